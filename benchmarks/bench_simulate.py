"""Wall time of the simulator per policy, and how it grows with jobs and GPUs.

    .venv/bin/python benchmarks/bench_simulate.py                 # the 240-job trace, every policy
    .venv/bin/python benchmarks/bench_simulate.py --scaling       # + synthetic jobs x GPUs grid

Prints one table per run (rich). Timings include the per-round SI/EF checks.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from slurm_fair import policies
from slurm_fair.estimates import gavel as tt
from slurm_fair.sim.cluster import parse_cluster
from slurm_fair.sim.engine import SimConfig, simulate
from slurm_fair.sim.synthetic import generate
from slurm_fair.sim.workload import load_traces
from slurm_fair.solver import fastest_available

TRACE = Path(__file__).parent / "traces" / "philly_6vc_240.csv"
POLICIES = ("fifo", "agnostic", "max-throughput", "gavel-mmf", "gavel-ftf", "oef", "oef-noncoop",
            "fft", "hadar", "hadare", "hops")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--policy", action="append", default=None)
    parser.add_argument("--scaling", action="store_true")
    parser.add_argument("--gpus-per-node", type=int, default=4)
    args = parser.parse_args()
    console = Console()
    console.print(f"machine: {platform.machine()} {platform.processor() or ''}, "
                  f"Python {platform.python_version()}, solver {fastest_available()}")
    table_t = tt.load()
    names = [n for n in (args.policy or POLICIES) if n in policies.names()]
    workload = load_traces([TRACE], table_t)
    cluster = parse_cluster("v100=8,p100=8,k80=8", args.gpus_per_node)
    out = Table(title=f"{TRACE.name}: {len(workload.jobs)} jobs, {len(workload.tenants)} tenants, "
                      f"24 GPUs, {args.gpus_per_node}/node")
    for col in ("policy", "wall s", "rounds", "solves", "solve s", "avg JCT h", "makespan h"):
        out.add_column(col, justify="right")
    for name in names:
        started = time.perf_counter()
        res = simulate(workload, cluster, table_t, policies.get(name), SimConfig(solver=fastest_available()))
        wall = time.perf_counter() - started
        jcts = [r.jct_s for r in res.records if r.jct_s is not None]
        out.add_row(name, f"{wall:.1f}", str(len(res.samples)), str(res.solves), f"{res.solve_seconds:.1f}",
                    f"{sum(jcts) / len(jcts) / 3600:.1f}", f"{max(r.end_s for r in res.records) / 3600:.1f}")
    console.print(out)
    if args.scaling:
        grid = Table(title="scaling (synthetic, Poisson arrivals, durations capped at 12 h): wall seconds")
        grid.add_column("policy")
        sizes = [(120, 24), (240, 24), (480, 24), (240, 48), (480, 96)]
        for jobs, gpus in sizes:
            grid.add_column(f"{jobs} jobs / {gpus} GPUs", justify="right")
        for name in [n for n in ("gavel-mmf", "fft", "hadar", "hops") if n in names]:
            row = [name]
            for jobs, gpus in sizes:
                w = generate(jobs, 6, 1, rate_per_hour=jobs / 48, table=table_t, max_duration_s=12 * 3600)
                c = parse_cluster(f"v100={gpus // 3},p100={gpus // 3},k80={gpus // 3}", 4)
                started = time.perf_counter()
                simulate(w, c, table_t, policies.get(name), SimConfig(solver=fastest_available()))
                row.append(f"{time.perf_counter() - started:.1f}")
            grid.add_row(*row)
        console.print(grid)


if __name__ == "__main__":
    main()
