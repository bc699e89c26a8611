"""What fairness costs in efficiency: E / E* of each policy on random Gavel-mix problems.

For every problem (a few tenants with weights, jobs drawn from the embedded Gavel throughput
table, one to three GPU types, demand above and below capacity) each policy is solved and judged
by the same independent measures (slurm_fair.fairness): E / E*, E / E_SI (the most efficient
sharing-incentive allocation, the bound an SI+EF policy is judged against), and whether the allocation is
sharing-incentive (SI), envy-free (EF) and Pareto-efficient (PE). This is where the price of
strategy-proofness (`oef-noncoop` against `oef`) is measured.

    .venv/bin/python benchmarks/bench_fairness_price.py --problems 60 --seed 0 [--solver cbc]

``--solver`` is the policies' solver option (default ``auto``: HiGHS in-process when highspy is
installed, else CBC). The judge (E*, SI, EF, PE) is the same in every run. Besides the table, the
``oef`` problems that fell back or degraded are listed.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Iterator

from slurm_fair import fairness, policies
from slurm_fair.model import Job, Problem
from slurm_fair.policies import PolicyOptions
from slurm_fair.solver import SOLVER_CHOICES, resolve
from slurm_fair.estimates.gavel import ThroughputTable, load

POLICIES = ("max-throughput", "oef", "oef-noncoop", "gavel-mmf", "agnostic", "fifo")


def random_problem(rng: random.Random, table: ThroughputTable) -> Problem:
    types = rng.sample(["v100", "p100", "k80"], rng.randint(1, 3))
    caps = {t: rng.choice([2, 4, 8, 16]) for t in types}
    tenants = {f"t{i}": float(rng.choice([1, 1, 2, 4])) for i in range(rng.randint(2, 5))}
    jobs = []
    for n in range(rng.randint(3, 30)):
        job_type = rng.choice(table.job_types)
        gpus = rng.choice([1, 1, 1, 2, 4])
        tput = {t: table.lookup(job_type, gpus, t) for t in types}
        if max(tput.values()) <= 0:
            continue
        jobs.append(Job(f"j{n}", rng.choice(sorted(tenants)), gpus, tput))
    return Problem(caps, tenants, tuple(jobs))


def problems(seed: int, count: int, table: ThroughputTable) -> Iterator[tuple[int, Problem]]:
    """The first ``count`` problems with jobs of ``seed``'s sequence, numbered from 1 (the
    sequence every benchmark on these problems shares)."""
    rng = random.Random(seed)
    done = 0
    while done < count:
        problem = random_problem(rng, table)
        if problem.jobs:
            done += 1
            yield done, problem


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--solver", choices=SOLVER_CHOICES, default="auto",
                    help="the policies' LP solver (default auto: highs when installed, else cbc)")
    args = ap.parse_args()
    options = PolicyOptions(solver=args.solver)
    notes: list[str] = []
    rows: dict[str, dict[str, list[float]]] = {p: {"ratio": [], "si_ratio": [], "si": [], "ef": [], "pe": [], "s": []}
                                              for p in POLICIES}
    for done, problem in problems(args.seed, args.problems, load()):
        e_star = fairness.efficiency_bound(problem)
        e_si = fairness.si_bound(problem)
        for name in POLICIES:
            started = time.perf_counter()
            alloc = policies.allocate(name, problem, options)
            rows[name]["s"].append(time.perf_counter() - started)
            # oef's fairness is that of its tenant level (docs/oef.md, "Two levels"): the bundles
            # SI, EF and PE are about; inside a tenant its jobs are ordered by aging
            x = alloc.tenant_x or alloc.x
            if name == "oef" and (alloc.status != "optimal" or alloc.info.get("degraded")
                                  or not alloc.info.get("pareto_efficient", True)):
                notes.append(f"problem {done}: oef status {alloc.status}, winner {alloc.info.get('winner')}, "
                             f"degraded {alloc.info.get('degraded')}, fallback {alloc.info.get('fallback_reason')}")
            rows[name]["ratio"].append(fairness.efficiency_ratio(fairness.efficiency(problem, x), e_star))
            rows[name]["si_ratio"].append(fairness.efficiency_ratio(fairness.efficiency(problem, x), e_si))
            rows[name]["si"].append(float(fairness.is_sharing_incentive(problem, x)))
            rows[name]["ef"].append(float(fairness.is_envy_free(problem, x)))
            rows[name]["pe"].append(float(fairness.is_pareto_efficient(problem, x)))
    print(f"{args.problems} random problems, seed {args.seed}, solver {args.solver} ({resolve(args.solver)})\n")
    print("| policy | mean E/E* | min E/E* | mean E/E_SI | min E/E_SI | SI held | EF held | PE held | median solve s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in POLICIES:
        r = rows[name]
        print(f"| {name} | {statistics.mean(r['ratio']):.4f} | {min(r['ratio']):.4f} | "
              f"{statistics.mean(r['si_ratio']):.4f} | {min(r['si_ratio']):.4f} | "
              f"{sum(r['si']):.0f}/{done} | {sum(r['ef']):.0f}/{done} | {sum(r['pe']):.0f}/{done} | "
              f"{statistics.median(r['s']):.3f} |")
    sp = [nc / o for nc, o in zip(rows["oef-noncoop"]["ratio"], rows["oef"]["ratio"]) if o > 0]
    if sp:
        print(f"\nprice of strategy-proofness: E(oef-noncoop) / E(oef) per problem: mean {statistics.mean(sp):.4f}, "
              f"min {min(sp):.4f}, below 0.999 on {sum(r < 0.999 for r in sp)}/{len(sp)}")
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
