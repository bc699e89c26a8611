"""No thrash (issue 29): the rule of ``slurm_fair/hysteresis.py`` against the rule before it, in
the simulator with the testbed's costs.

    .venv/bin/python benchmarks/bench_thrash.py                       # the held-out testbed trace
    .venv/bin/python benchmarks/bench_thrash.py --trace benchmarks/traces/philly_testbed_42.csv

Before: a running job could be stopped a round after it started, and the rounding step moved a
running job to whatever type its allocation named. Now: it is stopped only after 3x a restart's
cost (at least a round), and moved only when the move pays (faster, and the time saved over the
time it ran beats the cost). "Before" is reproduced by swapping the two rules out of the engine
for the run (``min_run_s`` -> a round, no ``Moves``); everything else is the same code.

Costs: the testbed at S = 30 (``testbed replay``): rounds of 360 s, a start of 45 s (1.5 real s),
Slurm's requeue hold plus restart 390 s (13 real s), filling between rounds as Slurm does; the
testbed's node layout. Prints one table: restarts, average JCT, worst FTF rho, worst LR.
"""

from __future__ import annotations

import argparse
import platform
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from rich.console import Console
from rich.table import Table

from slurm_fair import policies
from slurm_fair.estimates import gavel as tt
from slurm_fair.sim import engine
from slurm_fair.sim.cluster import parse_cluster
from slurm_fair.sim.metrics import summarize
from slurm_fair.sim.workload import load_traces
from slurm_fair.solver import fastest_available

TRACE = Path(__file__).parent / "traces" / "philly_testbed_heldout_42.csv"


@contextmanager
def before() -> Iterator[None]:
    """The engine with the rules before issue 29: rotation after a round, moves never checked."""
    saved = engine.min_run_s, engine.Moves
    engine.min_run_s = lambda round_s, cost_s: round_s  # type: ignore[assignment]
    engine.Moves = lambda *a, **k: None  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        engine.min_run_s, engine.Moves = saved  # type: ignore[misc]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trace", default=str(TRACE))
    parser.add_argument("--policy", action="append", default=None)
    args = parser.parse_args()
    console = Console(width=160)
    console.print(f"machine: {platform.machine()}, Python {platform.python_version()}, solver {fastest_available()}")
    table = tt.load()
    workload = load_traces([args.trace], table, None, None, False, {})
    cluster = parse_cluster("v100=2x4,p100=2x4,k80=1x8")
    config = engine.SimConfig(round_s=360.0, restart_s=45.0, requeue_hold_s=390.0, fill_between_rounds=True)
    t = Table(title=f"{Path(args.trace).name}: {len(workload.jobs)} jobs, v100=2x4,p100=2x4,k80=1x8")
    for col in ("policy", "rule", "restarts", "avg JCT h", "rho max", "LR max (>=1 round)", "done"):
        t.add_column(col, justify="right")
    for pol in args.policy or ["oef", "gavel-mmf"]:
        for rule in ("before", "hysteresis"):
            if rule == "before":
                with before():
                    res = engine.simulate(workload, cluster, table, policies.get(pol), config)
            else:
                res = engine.simulate(workload, cluster, table, policies.get(pol), config)
            m = summarize(res.records, res.samples, res.capacity)
            t.add_row(pol, rule, str(res.restarts), f"{m['avg_jct_s'] / 3600:.2f}", f"{m['ftf_rho_max']:.2f}",
                      f"{m['latency_ratio_max_1round'] or 0:.2f}", f"{m['jobs_completed']}/{m['jobs']}")
    console.print(t)


if __name__ == "__main__":
    main()
