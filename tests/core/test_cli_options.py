"""One option name, one meaning: every command of the group is checked against
``slurm_fair/commands/options.py``, so a fourth ``--solver`` (or a ``--json`` of another meaning) cannot
appear unnoticed; and no help text promises an option or a command that does not exist."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, Callable, Iterator

import json

import click
from click.testing import CliRunner

from slurm_fair.cli import cli
from slurm_fair.commands import options


def commands(group: click.Group = cli, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command of the CLI (sub-groups included), with its path of names."""
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None, name
        yield (*path, name), cmd
        if isinstance(cmd, click.Group):
            yield from commands(cmd, (*path, name))


def long_name(param: click.Parameter) -> str:
    return max(param.opts, key=len)


def meaning(param: click.Option) -> tuple[Any, ...]:
    """What an option is, apart from how many values a command takes (``multiple``, ``required``;
    the default of one value and of several differ) and the parameter name its function receives."""
    return (tuple(sorted(param.opts)), param.type.to_info_dict(), param.help, param.is_flag,
            param.show_default, param.metavar)


def same(param: click.Option, shared: click.Option) -> bool:
    if param.multiple or shared.multiple:
        return meaning(param) == meaning(shared)
    return meaning(param) == meaning(shared) and param.default == shared.default


def canonical(decorators: tuple[Callable[..., Any], ...]) -> dict[str, click.Option]:
    out = {}
    for decorate in decorators:
        (param,) = click.command()(decorate(lambda **_: None)).params
        assert isinstance(param, click.Option)
        out[long_name(param)] = param
    return out


SHARED = canonical(options.SHARED)
TESTBED = canonical(options.TESTBED)


def in_scope(path: tuple[str, ...]) -> dict[str, click.Option]:
    """The shared options as a command at ``path`` must use them (``testbed`` has its own ``--config``)."""
    return {**SHARED, **TESTBED} if path[0] == "testbed" else SHARED


def test_an_option_name_means_one_thing():
    wrong, seen = [], defaultdict(set)
    for path, cmd in commands():
        scope = in_scope(path)
        for param in cmd.params:
            if not isinstance(param, click.Option) or param.name == "help":
                continue
            name = long_name(param)
            seen[(path[0] == "testbed" and name in TESTBED, name)].add(" ".join(path))
            if name in scope and not same(param, scope[name]):
                wrong.append(f"{' '.join(path)} {name}")
    assert not wrong, f"defined apart from commands/options.py: {wrong}"
    # an option two commands take is a shared one (else the next copy drifts)
    unshared = {name: sorted(where) for (_, name), where in seen.items()
                if len(where) > 1 and name not in SHARED and name not in TESTBED}
    assert not unshared, f"define these once in commands/options.py: {unshared}"


def test_shared_options_are_used():
    """Each shared definition is taken by at least two commands (else it is not shared)."""
    used = defaultdict(int)
    for _path, cmd in commands():
        for param in cmd.params:
            used[long_name(param)] += 1
    assert {name: used[name] for name in {**SHARED, **TESTBED} if used[name] < 2} == {}


def test_json_means_one_thing_everywhere():
    """``--json`` is the shared option in every command: alone, JSON on stdout; with a FILE only
    where the command has ``-o`` (``--json FILE`` = ``--json -o FILE``), never a stray argument."""
    found = [(path, p) for path, cmd in commands() for p in cmd.params if "--json" in p.opts]
    assert len(found) >= 6
    for path, param in found:
        assert same(param, SHARED["--json"]) and param.name == "as_json", path
    result = CliRunner().invoke(cli, ["policies", "--json"])
    assert result.exit_code == 0 and "oef" in {p["name"] for p in json.loads(result.stdout)}
    result = CliRunner().invoke(cli, ["explain", "--json", "123"])
    assert result.exit_code == 2 and "takes no FILE" in result.output


def test_output_is_a_file_everywhere():
    """``-o/--output`` is a FILE in every command; a directory is ``--output-dir``."""
    for path, cmd in commands():
        for param in cmd.params:
            if {"-o", "--output"} & set(param.opts):
                assert same(param, SHARED["--output"]), path


def test_help_promises_only_what_exists():
    """Every ``--option`` a help text names is an option of some command, every
    ``slurm-fair WORD`` a command (``solve --help`` once sent users to ``--list-policies``)."""
    all_options = {o for _, cmd in commands() for p in cmd.get_params(click.Context(cmd)) for o in p.opts}
    top = set(cli.list_commands(click.Context(cli)))
    for path, cmd in commands():
        with click.Context(cmd, info_name=" ".join(path), terminal_width=10_000, max_content_width=10_000) as ctx:
            text = cmd.get_help(ctx)
        assert set(re.findall(r"(?<![\w-])--[a-z][a-z-]*[a-z]", text)) <= all_options, path
        assert {w for w in re.findall(r"`slurm-fair ([a-z][a-z-]+)", text)} <= top, path
