"""The ``slurm-fair`` command line: a thin click group.

Each command lives in ``slurm_fair/commands/<name>.py`` and exposes ``command``. A command whose
issue has not landed is registered all the same and says so with exit code 2 (never pretends).
:func:`main` is the one place that turns :class:`SlurmFairError` into a message and exit code.
"""

from __future__ import annotations

import importlib
import sys

import click

from . import __version__
from .errors import NotYetImplemented, SlurmFairError

#: command name -> (module under slurm_fair.commands, or None while not built; the issue)
COMMANDS: dict[str, tuple[str | None, str]] = {
    "solve": ("solve", "issue 4, the allocation engine"),
    "simulate": ("simulate", "issue 5, the simulator"),
    "run": ("run", "issue 6, the controller"),
    "report": ("report", "issue 7, fairness reports"),
    "metrics": ("metrics", "issue 7, fairness reports"),
    "explain": ("explain", "issue 6, the controller"),
    "snapshot": ("snapshot", "issue 3, the Slurm adapter"),
    "testbed": ("testbed", "issue 2, the local testbed"),
    "render-config": ("render_config", "issue 8, deployment"),
    "revert": ("revert", "issue 6, the controller"),
}


def _placeholder(name: str, issue: str) -> click.Command:
    @click.command(name, context_settings={"ignore_unknown_options": True}, add_help_option=False)
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def command(args: tuple[str, ...]) -> None:
        raise NotYetImplemented(name, issue)

    command.help = f"Not available yet ({issue})."
    return command


class _LazyGroup(click.Group):
    """Imports a command's module only when that command runs (or help lists it), so
    ``slurm-fair solve`` does not pay for pandas, matplotlib or jinja2 that other commands use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, issue = COMMANDS[cmd_name]
            if module is None:
                self.add_command(_placeholder(cmd_name, issue), cmd_name)
            else:
                self.add_command(importlib.import_module(f"slurm_fair.commands.{module}").command, cmd_name)
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
        exc.show()
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
