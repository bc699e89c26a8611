"""The two levels' guarantee where tenants see it (issue 39): the job-level allocation that
``slurm-fair solve --policy oef`` outputs, checked by the independent LPs of
:mod:`slurm_fair.fairness` on random problems.

    .venv/bin/python benchmarks/bench_inside.py                       # seeds 0-3, 8 problems each
    .venv/bin/python benchmarks/bench_inside.py --seed 7 --count 20

Problems vary in everything the check could depend on: 1-3 GPU types of Gavel's table with 2-32
GPUs each, 2-8 tenants with weights among 0.5, 1, 2, 4, 5-60 jobs of Gavel's job types with
gangs of 1, 2, 4 or 8 GPUs, and, in half of them, waits (ages, time run, running jobs), so that
the aging has something to order. Each problem is solved as ``solve`` does
(:func:`slurm_fair.policies.allocate`, no policy state) with ``oef.inside_eps`` at its default
and at 1 (no value floor: the aging alone, as before issue 39). Counted on the job-level
allocation ``x``: tenants below ``(1 - eps)`` of their sharing incentive, ordered pairs with
envy beyond ``eps`` of the envied value, ``E(x) / E*`` against the tenant level's, the Pareto
gap of ``x`` over ``E(x)`` and the same gap within eps (every utility raised by ``1 / (1 - eps)``,
:func:`slurm_fair.fairness.pareto_gap_within`).
"""

from __future__ import annotations

import argparse
import platform
import random
import time

from rich.console import Console
from rich.table import Table

from slurm_fair import fairness, policies
from slurm_fair.estimates import gavel as tt
from slurm_fair.model import Job, Problem
from slurm_fair.policies import PolicyOptions
from slurm_fair.policies._inside import INSIDE_EPS
from slurm_fair.solver import fastest_available

TYPES = ("v100", "p100", "k80")


def random_problem(rng: random.Random, table: tt.ThroughputTable) -> Problem:
    """One problem of the mix in the module docstring."""
    types = rng.sample(TYPES, rng.randint(1, 3))
    caps = {k: rng.choice([2, 4, 8, 16, 32]) for k in types}
    tenants = {f"t{i}": rng.choice([0.5, 1.0, 1.0, 2.0, 4.0]) for i in range(rng.randint(2, 8))}
    waits = rng.random() < 0.5
    jobs = []
    for n in range(rng.randint(5, 60)):
        job_type = rng.choice(table.job_types)
        gpus = rng.choice([1, 1, 1, 2, 4, 8])
        thr = {k: table.lookup(job_type, gpus, k) for k in types}
        if max(thr.values()) <= 0:
            continue
        extra: dict = {}
        if waits:
            ran = rng.choice([0.0, 0.0, rng.uniform(60, 7200)])
            running = ran > 0 and rng.random() < 0.5
            extra = {"remaining_work": rng.uniform(600, 86400) * max(thr.values()),
                     "age_s": ran + rng.uniform(0, 36000), "attained_s": ran,
                     "prev_type": max(thr, key=lambda k: thr[k]) if running else None}
        jobs.append(Job(f"j{n}", rng.choice(sorted(tenants)), gpus, thr, **extra))
    return Problem(caps, tenants, tuple(jobs))


def check(problem: Problem, eps: float, solver: str) -> dict:
    """Solve with ``oef.inside_eps = eps`` and count what a tenant can check."""
    opts = PolicyOptions(solver=solver, params={"oef.inside_eps": eps})
    started = time.perf_counter()
    a = policies.allocate("oef", problem, opts)
    wall = time.perf_counter() - started
    x = {j: dict(r) for j, r in a.x.items()}
    top = {j: dict(r) for j, r in (a.tenant_x or a.x).items()}
    value = fairness.valuer(problem)
    rel = 0.02  # the eps, whatever the arm's floor
    turned = {u for u in a.info.get("inside_turns", {})}
    si = fairness.si_shortfalls(problem, x, rel, value)
    ef = fairness.envy_beyond(problem, x, rel, value)
    e_star = fairness.efficiency_bound(problem)
    e_x, e_top = fairness.efficiency(problem, x), fairness.efficiency(problem, top)
    return {"si": len(si), "ef": len(ef), "si_turn": len([u for u in si if u in turned]),
            "ef_turn": len([p for p in ef if p[0] in turned]), "worst_si": min(si.values(), default=1.0),
            "ratio": fairness.efficiency_ratio(e_x, e_star), "top_ratio": fairness.efficiency_ratio(e_top, e_star),
            "pe_gap": fairness.pareto_gap(problem, x) / e_x if e_x > 0 else 0.0,
            "pe_within": fairness.pareto_gap_within(problem, x, rel) / e_x if e_x > 0 else 0.0, "wall": wall,
            "turns": sum(len(v) for v in a.info.get("inside_turns", {}).values())}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, action="append", default=None, help="repeatable; default 0-3")
    parser.add_argument("--count", type=int, default=8, help="problems per seed")
    parser.add_argument("--eps", type=float, action="append", default=None,
                        help="oef.inside_eps arms (repeatable; default: its default and 1)")
    args = parser.parse_args()
    console = Console(width=170)
    solver = fastest_available()
    console.print(f"machine: {platform.machine()}, Python {platform.python_version()}, solver {solver}")
    table = tt.load()
    arms = args.eps or [INSIDE_EPS, 1.0]
    rows: dict[float, list[dict]] = {e: [] for e in arms}
    for seed in args.seed or [0, 1, 2, 3]:
        rng = random.Random(f"inside-{seed}")
        done = 0
        while done < args.count:
            problem = random_problem(rng, table)
            if not problem.jobs:
                continue
            done += 1
            for e in arms:
                rows[e].append(check(problem, e, solver))
    t = Table(title=f"oef job-level allocation, {sum(len(v) for v in rows.values()) // len(arms)} problems")
    for col in ("oef.inside_eps", "SI below 0.98", "EF beyond 0.02", "of which tenants with a turn",
                "worst U/V(share)", "E/E* min", "E/E* mean", "tenant level E/E* mean", "(E/E*)/(tenant's) min",
                "PE gap/E max", "PE gap within eps /E max", "turns", "wall s"):
        t.add_column(col, justify="right")
    for e, got in rows.items():
        t.add_row(f"{e:g}", str(sum(r["si"] for r in got)), str(sum(r["ef"] for r in got)),
                  f"{sum(r['si_turn'] for r in got)} / {sum(r['ef_turn'] for r in got)}",
                  f"{min(r['worst_si'] for r in got):.3f}", f"{min(r['ratio'] for r in got):.3f}",
                  f"{sum(r['ratio'] for r in got) / len(got):.3f}", f"{sum(r['top_ratio'] for r in got) / len(got):.3f}",
                  f"{min(r['ratio'] / r['top_ratio'] for r in got if r['top_ratio'] > 0):.3f}",
                  f"{max(r['pe_gap'] for r in got):.3f}", f"{max(r['pe_within'] for r in got):.3f}",
                  str(sum(r["turns"] for r in got)),
                  f"{sum(r['wall'] for r in got):.0f}")
    console.print(t)


if __name__ == "__main__":
    main()
