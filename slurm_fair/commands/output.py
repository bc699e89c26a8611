"""Where a command's output goes: stdout, or ``-o/--output FILE`` written atomically.

One home for the output rule of docs/cli.md, so every command that writes a file writes it the
same way (a reader never sees half a file: cron jobs and node_exporter read these files).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from .. import atomic
from ..errors import UserError
from ..inputs import jsonable

#: the formats ``--plot FILE`` writes, by FILE's extension (none: PNG); matplotlib knows more
#: (``.pgf`` needs LaTeX, ``.raw`` is no picture), these are the ones that work everywhere
PLOT_FORMATS = ("png", "pdf", "svg", "eps", "ps", "jpg", "jpeg")


def write_output(text: str, output: str | None) -> None:
    """To stdout, or atomically to ``output`` (:func:`slurm_fair.atomic.write_text`: never
    half a file, never over a device or a directory)."""
    if not output:
        click.echo(text, nl=False)
        return
    try:
        atomic.write_text(output, text)
    except atomic.AtomicWriteError as exc:
        raise UserError(f"--output {exc}") from None


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
    bad path fails before an hour of simulation, not after it."""
    try:
        atomic.check_writable(path)
    except atomic.AtomicWriteError as exc:
        return str(exc)
    return None


def plot_problem(path: str) -> str | None:
    """:func:`output_problem`, and an extension that is not one of :data:`PLOT_FORMATS`."""
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    if fmt not in PLOT_FORMATS:
        return f"{path}: unknown picture format {fmt!r} (use one of .{', .'.join(PLOT_FORMATS)})"
    return output_problem(path)


def check_output(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: :func:`output_problem` of the option's value as a usage error."""
    if value is not None and (msg := output_problem(value)):
        raise click.BadParameter(msg, ctx, param)
    return value


def check_plot(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: :func:`plot_problem` of the option's value as a usage error."""
    if value is not None and (msg := plot_problem(value)):
        raise click.BadParameter(msg, ctx, param)
    return value


def table_text(table: Table) -> str:
    """A rich table as plain text (no colours), for ``-o FILE`` without ``--json``."""
    buf = io.StringIO()
    Console(file=buf, width=120, no_color=True, force_terminal=False).print(table)
    return buf.getvalue()


def table_or_json(table: Table, doc: Any, as_json: bool, output: str | None) -> None:
    """A command whose output is a table for people and a JSON document for programs
    (``simulate``, ``testbed replay``): stdout (or ``output``) carries one of them; with
    ``--json`` the table still reaches the terminal, on stderr."""
    if as_json:
        write_output(json_text(doc), output)  # first: a failed write is the only message
        Console(stderr=True).print(table)
    elif output:
        write_output(table_text(table), output)
    else:
        Console().print(table)
