"""``slurm-fair testbed up|down|status|env``: the local Slurm cluster, thin over :class:`Testbed`."""

from __future__ import annotations

import shlex

import click
from rich.console import Console
from rich.table import Table

from ..errors import TestbedError
from ..testbed import Testbed
from .options import quiet_option, slurm_option, testbed_config_option, testbed_dir_option

def _testbed(state_dir: str | None, config_path: str | None, slurm: str | None = None) -> Testbed:
    return Testbed(dir=state_dir, config=config_path, slurm=slurm)


def _say(msg: str) -> None:
    click.echo(f"testbed: {msg}", err=True)


@click.group("testbed")
def command() -> None:
    """A real local Slurm cluster (munge, MariaDB, slurmdbd, slurmctld, one slurmd per node)."""


@command.command("up")
@testbed_dir_option
@testbed_config_option
@slurm_option
@quiet_option
def up(state_dir: str | None, config_path: str | None, slurm: str | None, quiet: bool) -> None:
    """Start the testbed (idempotent) and wait until every node is idle."""
    tb = _testbed(state_dir, config_path, slurm)
    seconds = tb.up(progress=None if quiet else _say)
    if not quiet:
        _say(f"Slurm {tb.config.slurm} up in {seconds:.1f}s ({len(tb.config.nodes)} nodes) -- {tb.dir}")
        _say(f'use it with: eval "$(slurm-fair testbed env{_dir_arg(state_dir, slurm)})"')


@command.command("down")
@testbed_dir_option
@testbed_config_option
@slurm_option
def down(state_dir: str | None, config_path: str | None, slurm: str | None) -> None:
    """Stop exactly the daemons this testbed started."""
    tb = _testbed(state_dir, config_path, slurm)
    stopped = tb.down(progress=_say)
    _say(f"down ({len(stopped)} daemons stopped)")


@command.command("status")
@testbed_dir_option
@testbed_config_option
@slurm_option
def status(state_dir: str | None, config_path: str | None, slurm: str | None) -> None:
    """Show each daemon and node; exit 1 unless every daemon runs."""
    tb = _testbed(state_dir, config_path, slurm)
    st = tb.status()
    console = Console()
    table = Table(title=f"testbed {tb.config.cluster_name} (Slurm {tb.config.slurm}) in {st.dir}")
    for col in ("daemon", "state", "pid", "port", "log"):
        table.add_column(col)
    for d in st.daemons:
        table.add_row(
            d.name,
            "[green]running[/]" if d.running else "[red]stopped[/]",
            str(d.pid or "-"),
            str(d.port or "-"),
            str(d.log_file.relative_to(st.dir)) if d.log_file.is_relative_to(st.dir) else str(d.log_file),
        )
    console.print(table)
    if st.nodes:
        nodes = Table(title="nodes")
        for col in ("node", "gpus", "state"):
            nodes.add_column(col)
        gres = {n.name: n.gres for n in tb.config.nodes}
        for name, state in sorted(st.nodes.items()):
            nodes.add_row(name, gres.get(name, "?"), state)
        console.print(nodes)
    if not st.all_running:
        stopped = [d.name for d in st.daemons if not d.running]
        raise TestbedError(f"not running: {', '.join(stopped)}")


@command.command("env")
@testbed_dir_option
@testbed_config_option
@slurm_option
def env(state_dir: str | None, config_path: str | None, slurm: str | None) -> None:
    """Print `export` lines for: eval "$(slurm-fair testbed env)".

    For another Slurm version than the host's, PATH starts with the wrappers of its commands.
    """
    tb = _testbed(state_dir, config_path, slurm)
    click.echo(f"export SLURM_CONF={shlex.quote(str(tb.slurm_conf))}")
    if tb.bin_dir is not None:
        click.echo(f'export PATH={shlex.quote(str(tb.bin_dir))}:"$PATH"')


def _dir_arg(state_dir: str | None, slurm: str | None = None) -> str:
    out = f" --dir {shlex.quote(state_dir)}" if state_dir else ""
    return out + (f" --slurm {slurm}" if slurm and not state_dir else "")


from .replay import replay as _replay  # noqa: E402  (issue 6: a trace replayed on the testbed)

command.add_command(_replay)
