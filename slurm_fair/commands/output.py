"""Where a command's output goes: stdout, or ``-o/--output FILE`` written atomically.

One home for the output rule of docs/cli.md, so every command that writes a file writes it the
same way (a reader never sees half a file: cron jobs and node_exporter read these files).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

import click
from rich.console import Console, RenderableType

from .. import atomic
from ..errors import UserError, printable
from ..inputs import jsonable

#: the formats ``--plot FILE`` writes, by FILE's extension (none: PNG); matplotlib knows more
#: (``.pgf`` needs LaTeX, ``.raw`` is no picture), these are the ones that work everywhere
PLOT_FORMATS = ("png", "pdf", "svg", "eps", "ps", "jpg", "jpeg")


#: the file names that mean standard output, as ``--input -`` means standard input (docs/cli.md)
STDOUT_NAMES = ("-", "/dev/stdout")


def is_stdout(path: str | None) -> bool:
    """Whether an output option's value means standard output (``-o -``)."""
    return path in STDOUT_NAMES


def check_distinct(outputs: Mapping[str, str | Path | None],
                   inputs: Mapping[str, str | Path | Iterable[str | Path] | None]) -> None:
    """Refuse, before any work, a command whose outputs would replace one of its own inputs
    (``solve --input p.json -o p.json``, ``report --config c.toml -o c.toml``) or each other
    (``simulate --json X --plot X``): a :class:`~slurm_fair.errors.UserError` naming both
    options. ``outputs``/``inputs`` map an option name (``--output``) to its value(s); None,
    ``-`` (stdin/stdout) are skipped. Files are compared by :func:`slurm_fair.atomic.same_file`
    (through symlinks and hard links; resolved paths for new files)."""
    def pairs(named: Mapping[str, Any]) -> list[tuple[str, str]]:
        out = []
        for option, value in named.items():
            values = [value] if isinstance(value, (str, Path)) or value is None else list(value)
            out += [(option, str(v)) for v in values if v is not None and str(v) and str(v) not in STDOUT_NAMES]
        return out

    outs, ins = pairs(outputs), pairs(inputs)
    for i, (option, path) in enumerate(outs):
        for other, source in ins:
            if atomic.same_file(path, source):
                raise UserError(f"{option} {printable(path)} is the {other} file; refusing to overwrite an input")
        for other, earlier in outs[:i]:
            if atomic.same_file(path, earlier):
                raise UserError(f"{option} {printable(path)} is also {other}'s file; give each output its own file")


def write_output(text: str, output: str | None) -> None:
    """To stdout, or atomically to ``output`` (:func:`write_outputs`: never half a file, never
    over a device or a directory)."""
    if not output or is_stdout(output):
        click.echo(text, nl=False)
        return
    write_outputs({"--output": (output, text)})


def json_text(doc: Any) -> str:
    """The JSON every ``--json`` document is written as (indented, one trailing newline).
    Strict JSON: a non-finite number is written as ``null`` (:func:`slurm_fair.inputs.jsonable`),
    never ``NaN``/``Infinity``, which no strict reader (jq, JavaScript, our own) accepts."""
    return json.dumps(jsonable(doc), indent=2, default=str, allow_nan=False) + "\n"


def json_line(doc: Any) -> str:
    """One JSON document on one line (``run --json``, ``explain --json``), strict like
    :func:`json_text`, without the trailing newline (``click.echo`` adds it)."""
    return json.dumps(jsonable(doc), default=str, allow_nan=False)


def output_problem(path: str) -> str | None:
    """Why ``-o FILE`` (or ``--json FILE``, ``--save-workload FILE``) could not be written, or
    None: checked when the options are parsed (:func:`slurm_fair.atomic.check_writable`), so a
    bad path fails before an hour of simulation, not after it. ``-`` is standard output."""
    if is_stdout(path):
        return None
    try:
        atomic.check_writable(path)
    except atomic.AtomicWriteError as exc:
        return str(exc)
    return None


def plot_problem(path: str) -> str | None:
    """:func:`output_problem`, and an extension that is not one of :data:`PLOT_FORMATS`."""
    if is_stdout(path):
        return f"{path}: a picture is written to a file, not to standard output"
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    if fmt not in PLOT_FORMATS:
        return f"{path}: unknown picture format {fmt!r} (use one of .{', .'.join(PLOT_FORMATS)})"
    return output_problem(path)


def check_output(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: :func:`output_problem` of the option's value as a usage error."""
    if value is not None and (msg := output_problem(value)):
        raise click.BadParameter(msg, ctx, param)
    return value


def check_file_output(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """:func:`check_output` for an output that is a file of its own beside stdout's
    (``--save-workload``): ``-`` is refused, standard output already carries the command's."""
    if value is not None and is_stdout(value):
        raise click.BadParameter(f"{value}: give a file (standard output carries the command's own output)",
                                 ctx, param)
    return check_output(ctx, param, value)


def check_plot(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: :func:`plot_problem` of the option's value as a usage error."""
    if value is not None and (msg := plot_problem(value)):
        raise click.BadParameter(msg, ctx, param)
    return value


def table_text(table: RenderableType) -> str:
    """A rich table as plain text (no colours), for ``-o FILE`` without ``--json``."""
    buf = io.StringIO()
    Console(file=buf, width=120, no_color=True, force_terminal=False).print(table)
    return buf.getvalue()


def write_outputs(files: Mapping[str, tuple[str, str | bytes]]) -> None:
    """Write a command's files (option -> (path, content)) all or nothing
    (:func:`slurm_fair.atomic.write_all`): a full disk on the last one leaves every old file
    as it was, never a new JSON beside a stale picture."""
    if not files:
        return
    try:
        atomic.write_all({path: (content, 0o644) for path, content in files.values()})
    except atomic.AtomicWriteError as exc:
        options = "/".join(files)
        raise UserError(f"{options} {exc}") from None


def table_or_json(table: RenderableType, doc: Any, as_json: bool, output: str | None,
                  also: Mapping[str, tuple[str, str | bytes]] | None = None) -> None:
    """A command whose output is a table for people and a JSON document for programs
    (``simulate``, ``testbed replay``): stdout (or ``output``) carries one of them; with
    ``--json`` the table still reaches the terminal, on stderr. ``also``: the command's other
    files (option -> (path, content)), written together with ``output`` (:func:`write_outputs`)."""
    files = dict(also or {})
    text = json_text(doc) if as_json else table_text(table)
    if output and not is_stdout(output):
        files = {"--output": (output, text), **files}
    write_outputs(files)  # first: a failed write is the only message
    if as_json:
        if not output or is_stdout(output):
            click.echo(text, nl=False)
        Console(stderr=True).print(table)
    elif not output:
        Console().print(table)
    elif is_stdout(output):
        click.echo(text, nl=False)
