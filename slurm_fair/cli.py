"""The ``slurm-fair`` command line: a thin click group.

Each command lives in ``slurm_fair/commands/<name>.py`` and exposes ``command``; the group
imports it only when it is used.
:func:`main` is the one place that turns :class:`SlurmFairError` into a message and exit code.
"""

from __future__ import annotations

import importlib
import sys

import click

from . import __version__
from .errors import SlurmFairError

#: command name -> its module under slurm_fair.commands (each exposes ``command``)
COMMANDS: dict[str, str] = {
    "solve": "solve",
    "policies": "policies",
    "simulate": "simulate",
    "simulate-merge": "sweep",
    "run": "run",
    "report": "report",
    "metrics": "metrics",
    "explain": "explain",
    "snapshot": "snapshot",
    "testbed": "testbed",
    "render-config": "render_config",
    "revert": "revert",
    "failsafe": "failsafe",
    "speeds": "speeds",
}


class _LazyGroup(click.Group):
    """Imports a command's module only when that command runs (or help lists it), so
    ``slurm-fair solve`` does not pay for pandas, matplotlib or jinja2 that other commands use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module = importlib.import_module(f"slurm_fair.commands.{COMMANDS[cmd_name]}")
            self.add_command(module.command, cmd_name)
        return self.commands.get(cmd_name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="slurm-fair")
def cli() -> None:
    """Heterogeneity-aware fair GPU sharing for Slurm."""


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI, map errors to messages and exit codes (1 operational, 2 user)."""
    try:
        cli.main(args=argv, prog_name="slurm-fair", standalone_mode=False)
    except SlurmFairError as exc:
        click.echo(f"slurm-fair: {exc.message()}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return 130
    except click.ClickException as exc:
        # one line, like every other user mistake: the command and what is wrong (click's
        # usage block is what --help is for)
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "slurm-fair"
        click.echo(f"{where}: {exc.format_message()}", err=True)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
