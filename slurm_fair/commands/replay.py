"""``slurm-fair testbed replay``: an emulated trace replayed on the testbed, scored from sacct (issue 6).

Thin: options here, the run in :mod:`slurm_fair.testbed.replay`. Registered under the
``testbed`` group by :mod:`slurm_fair.commands.testbed`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..errors import SlurmFairError
from ..inputs import FiniteFloat
from ..sim.results import COLUMNS, format_metric
from ..testbed import Testbed
from .options import (json_option, output_option, policy_option, quiet_option, round_option, slurm_option,
                      solver_option, testbed_config_option, testbed_dir_option, throughputs_option, trace_option)
from .output import check_distinct, table_or_json
from ..testbed.replay.interrupt import Interrupted
from ..testbed.replay.plan import ReplaySpec
from ..testbed.replay.run import Progress as RunProgress, Replay, fresh_run_dir

#: extra rows of a replay (real-run figures the simulator has no equivalent for)
REPLAY_ROWS: tuple[tuple[str, str, str], ...] = (
    ("requeued_jobs", "requeued jobs", "d"),
    ("emulation_rel_error_mean", "emul. err mean", ".1%"),
    ("emulation_rel_error_max", "emul. err max", ".1%"),
    ("wall_seconds", "real s", ".0f"),
)


#: per-tenant rows (``metrics.tenants``): key, header, format
TENANT_ROWS: tuple[tuple[str, str, str], ...] = (
    ("si_ratio", "SI ratio", ".2f"),
    ("envy_max", "envy max", ".2f"),
    ("avg_jct_s", "avg JCT h", "h"),
    ("ftf_rho_mean", "rho mean", ".2f"),
)


class ReplayInterrupted(SlurmFairError):
    """A signal ended the run after its cleanup: one line saying what was cleaned up, and the
    shell's exit code for the signal (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP)."""

    def __init__(self, exc: Interrupted) -> None:
        self.exit_code = exc.exit_code
        super().__init__(exc.summary())


def results_table(docs: Mapping[str, Mapping[str, Any]], title: str) -> Table:
    """One row per metric (the simulator's rows, then the replay's), one column per run."""
    table = Table(title=title)
    table.add_column("metric", style="bold")
    for name in docs:
        table.add_column(name, justify="right")
    for key, header, fmt in [c for c in COLUMNS if c[0] != "wall_seconds"] + list(REPLAY_ROWS):
        table.add_row(header, *[format_metric(d["metrics"].get(key), fmt) for d in docs.values()])
    # each tenant's fairness over the run (the report's definitions), beside its JCT and rho
    tenants = sorted({t for d in docs.values() for t in (d["metrics"].get("tenants") or {})})
    for t in tenants:
        for key, header, fmt in TENANT_ROWS:
            table.add_row(f"{t}: {header}", *[format_metric((d["metrics"].get("tenants") or {}).get(t, {}).get(key), fmt)
                                              for d in docs.values()])
    return table


def progress_bar(console: Console) -> Progress:
    """Jobs done of the trace's, the simulated (trace) time and the controller's cycle: a
    replay runs for minutes, and a person watching it sees it move (on a terminal; elsewhere
    rich shows only the last state)."""
    return Progress(TextColumn("replay"), BarColumn(), MofNCompleteColumn(), TextColumn("jobs done"),
                    TextColumn("trace {task.fields[trace]}"), TextColumn("cycle {task.fields[cycle]}"),
                    TimeElapsedColumn(), console=console, transient=False)


def trace_time(seconds: float) -> str:
    """Trace seconds as h:mm:ss."""
    s = int(max(0.0, seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


@click.command("replay")
@trace_option
@click.option("--time-scale", type=FiniteFloat(1e-3, 1e6), required=True, help="Trace seconds per real second.")
@policy_option
@json_option
@output_option
@round_option
@click.option("--timeout", "timeout_s", type=FiniteFloat(0, 30 * 86400.0, lo_open=True), default=None,
              help="Real seconds before giving up (default: from the trace; at most 30 days).")
@click.option("--run-dir", type=click.Path(file_okay=False), default=None,
              help="Directory for checkpoints, job output and controller state (default: a new temp dir).")
@throughputs_option
@click.option("--untagged", is_flag=True,
              help="Submit without fair:class tags: the controller learns speeds from the testbed's accounting.")
@solver_option
@testbed_dir_option
@testbed_config_option
@slurm_option
@quiet_option
def replay(trace: str, time_scale: float, policy: str, as_json: bool, output: str | None, round_s: float,
          timeout_s: float | None, run_dir: str | None, throughputs: str | None, solver: str | None,
          state_dir: str | None, config_path: str | None, slurm: str | None, quiet: bool,
          untagged: bool = False) -> None:
    """Replay an emulated trace on the testbed (Slurm alone or with the controller) and score it.

    --policy none runs Slurm alone.

    Interrupted (Ctrl-C, SIGTERM, SIGHUP), it stops its controller, cancels its jobs and reverts
    first, then exits with 128 + the signal.
    """
    check_distinct({"--output": output}, {"--trace": trace, "--throughputs": throughputs, "--config": config_path})
    tb = Testbed(dir=state_dir, config=config_path, slurm=slurm)
    say = (lambda _m: None) if quiet else (lambda m: click.echo(f"replay: {m}", err=True))
    spec = ReplaySpec(
        trace=Path(trace), time_scale=time_scale,
        policy=None if policy == "none" else policy, run_dir=fresh_run_dir(run_dir), round_s=round_s,
        timeout_real_s=timeout_s, solver=solver, throughputs=throughputs, untagged=untagged,
    )
    say(f"run directory {spec.run_dir}")
    with progress_bar(Console(stderr=True)) as bar:
        task = bar.add_task("replay", total=None, trace=trace_time(0), cycle=0, visible=not quiet)

        def show(p: RunProgress) -> None:
            bar.update(task, total=p.jobs, completed=p.done, trace=trace_time(p.trace_s), cycle=p.cycles)

        try:
            result = Replay(tb, spec, say, progress=None if quiet else show).run()
        except Interrupted as exc:
            raise ReplayInterrupted(exc) from None
    doc = result.doc
    name = doc["replay"]["policy"]
    table_or_json(results_table({name: doc}, f"testbed {doc['replay']['cluster']}: {name} "
                                             f"(trace seconds shown as hours; S={time_scale:g})"), doc, as_json, output)
    m = doc["metrics"]
    if m["jobs_completed"] != m["jobs"] or doc["replay"]["timed_out"]:
        raise click.ClickException(f"only {m['jobs_completed']} of {m['jobs']} jobs completed")
