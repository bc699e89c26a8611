"""Starvation goals (issue 29): worst FTF rho, worst latency ratio (jobs of at least one round),
average JCT and SI/EF violations of oef against fft, gavel-ftf, hops, gavel-mmf and agnostic, on
workloads generated with seeds, sizes and weights the policies were not tuned on.

    .venv/bin/python benchmarks/bench_starvation.py                     # every scenario
    .venv/bin/python benchmarks/bench_starvation.py --scenario gangs    # one of them
    .venv/bin/python benchmarks/bench_starvation.py --seed 5            # other draws

Scenarios (``--seed`` shifts every draw):

* ``philly``: 200 jobs of the Philly mix, 5 tenants (tenant-1 weight 2), 8:8:8 GPUs on 4-GPU nodes;
* ``gangs``: 160 jobs of Gavel's mix (1/2/4/8 GPUs), every job one node (``sbatch -N1``), 4
  tenants, 16:16:16 GPUs on 8-GPU nodes: an 8-GPU job needs a whole node;
* ``wide`` (issue 39): 240 jobs of the Philly mix, 7 tenants with unequal weights (3, 2, 0.5, 1...),
  16:8:8 GPUs on 4-GPU nodes;
* ``trace``: ``benchmarks/traces/philly_6vc_240.csv`` (Gavel's Philly VCs, MIT), 8:8:8, 4-GPU nodes.

Every simulated policy knows every job's true throughput (the simulator's table), also oef:
the gains assume that; ``--knowledge untagged`` shows them what a site would know instead.
Prints one rich table per scenario and the goal checks.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
from pathlib import Path

from rich.console import Console
from rich.table import Table

from slurm_fair import policies
from slurm_fair.estimates import gavel as tt
from slurm_fair.sim.cluster import parse_cluster
from slurm_fair.sim.engine import SimConfig, simulate
from slurm_fair.sim.knowledge import parse_knowledge
from slurm_fair.sim.metrics import summarize
from slurm_fair.sim.synthetic import generate
from slurm_fair.sim.workload import Workload, load_traces, make_workload
from slurm_fair.solver import fastest_available

TRACE = Path(__file__).parent / "traces" / "philly_6vc_240.csv"
POLICIES = ("oef", "fft", "gavel-ftf", "hops", "gavel-mmf", "agnostic")


def scenario(name: str, seed: int, table: tt.ThroughputTable, trace: Path = TRACE) -> tuple[Workload, str, int]:
    """The workload, cluster spec and GPUs per node of scenario ``name``."""
    if name == "philly":
        jobs = generate(200, 5, 100 + seed, 8.0, table, 24 * 3600.0, "philly").jobs
        return make_workload(jobs, {"tenant-1": 2.0}), "8:8:8", 4
    if name == "gangs":
        jobs = generate(160, 4, 200 + seed, 5.0, table, 24 * 3600.0, "gavel").jobs
        return make_workload([dataclasses.replace(j, nodes=1) for j in jobs]), "16:16:16", 8
    if name == "wide":
        jobs = generate(240, 7, 300 + seed, 8.0, table, 24 * 3600.0, "philly").jobs
        return make_workload(jobs, {"tenant-1": 3.0, "tenant-2": 2.0, "tenant-3": 0.5}), "16:8:8", 4
    if name == "trace":
        return load_traces([str(trace)], table, None, None, False, {}), "8:8:8", 4
    raise SystemExit(f"unknown scenario {name!r}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", action="append", choices=("philly", "gangs", "trace", "wide"), default=None)
    parser.add_argument("--policy", action="append", default=None,
                        help="a policy, or POLICY:KEY=VALUE,... (e.g. gavel-mmf:inside=1); repeatable")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trace", type=Path, default=TRACE,
                        help="the trace of --scenario trace (default: philly_6vc_240.csv; other shapes: traces/)")
    parser.add_argument("--knowledge", default="oracle",
                        help="what the policies know (simulate --knowledge): oracle, untagged, tagged=F")
    args = parser.parse_args()
    knowledge = parse_knowledge(args.knowledge)
    console = Console(width=180)
    console.print(f"machine: {platform.machine()}, Python {platform.python_version()}, solver {fastest_available()}")
    table = tt.load()
    for name in args.scenario or ["philly", "gangs", "trace"]:
        workload, spec, gpn = scenario(name, args.seed, table, args.trace)
        cluster = parse_cluster(spec, gpn)
        got = {}
        for arm in args.policy or POLICIES:
            # an arm is a policy, or POLICY:KEY=VALUE,... with its parameters (gavel-mmf:inside=1)
            pol, _, opts = arm.partition(":")
            params = {f"{pol}.{k}": float(v) for k, v in (o.split("=", 1) for o in opts.split(",") if o)}
            res = simulate(workload, cluster, table, policies.get(pol),
                           SimConfig(policy_params=params, knowledge=knowledge, knowledge_seed=args.seed))
            got[arm] = summarize(res.records, res.samples, res.capacity) | {"wall": res.wall_seconds}
        label = f"trace {args.trace.name}" if name == "trace" else name
        show(console, f"{label} (seed {args.seed}, {knowledge}): {len(workload.jobs)} jobs, {spec}, {gpn} GPUs/node",
             got)


def show(console: Console, title: str, got: dict[str, dict]) -> None:
    """The metrics table and the goals of issue 29 that the runs allow to check."""
    t = Table(title=title)
    for col in ("policy", "avg JCT h", "rho max", "LR max (>=1 round)", "LR mean", "avg wait h", "eff. thr.",
                "SI viol.", "EF viol.", "done", "wall s"):
        t.add_column(col, justify="right")
    for pol, m in got.items():
        t.add_row(pol, f"{m['avg_jct_s'] / 3600:.2f}", f"{m['ftf_rho_max']:.2f}",
                  f"{m['latency_ratio_max_1round'] or 0:.2f}", f"{m['latency_ratio_mean']:.2f}",
                  f"{m['avg_wait_s'] / 3600:.2f}", f"{m['effective_throughput'] or 0:.3f}",
                  str(m["si_violation_rounds"]), str(m["ef_violation_rounds"]),
                  f"{m['jobs_completed']}/{m['jobs']}", f"{m['wall']:.0f}")
    console.print(t)
    goals = []
    # every oef arm (oef, oef:keep_bonus=2,...) against the same references
    for arm in [a for a in got if a.partition(":")[0] == "oef"]:
        m = got[arm]
        if {"fft", "gavel-ftf"} <= got.keys():
            best = min(got["fft"]["ftf_rho_max"], got["gavel-ftf"]["ftf_rho_max"])
            goals.append((f"{arm} rho max <= 1.2 x better of fft/gavel-ftf", m["ftf_rho_max"] / best, 1.2))
        if "hops" in got:
            goals.append((f"{arm} LR max <= 2 x hops'", m["latency_ratio_max_1round"]
                          / got["hops"]["latency_ratio_max_1round"], 2.0))
        if "agnostic" in got:
            goals.append((f"agnostic JCT / {arm} JCT >= 1.5 (1.3 untagged)", -got["agnostic"]["avg_jct_s"] / m["avg_jct_s"],
                          -1.5 if "oracle" in title else -1.3))
        if "gavel-mmf" in got and m["effective_throughput"] and got["gavel-mmf"]["effective_throughput"]:
            goals.append((f"{arm} eff. thr. >= 0.99 x gavel-mmf's", -m["effective_throughput"]
                          / got["gavel-mmf"]["effective_throughput"], -0.99))
    # every hops arm (hops, hops:lambda=2, ...) against gavel-mmf
    for arm in [a for a in got if a.partition(":")[0] == "hops"] if "gavel-mmf" in got else []:
        h, g = got[arm], got["gavel-mmf"]
        goals.append((f"{arm} LR max <= gavel-mmf's / 3", h["latency_ratio_max_1round"] / g["latency_ratio_max_1round"], 1 / 3))
        goals.append((f"{arm} LR mean <= gavel-mmf's / 3", h["latency_ratio_mean"] / g["latency_ratio_mean"], 1 / 3))
        goals.append((f"{arm} JCT <= 0.8 x gavel-mmf's", h["avg_jct_s"] / g["avg_jct_s"], 0.8))
    for what, ratio, limit in goals:
        console.print(f"  {what}: {abs(ratio):.2f} {'met' if ratio <= limit else 'NOT met'}")


if __name__ == "__main__":
    main()
