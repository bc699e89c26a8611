"""A long sweep (not part of the test suite): ``oef`` on many random problems, each answer
checked for capacity, SI, EF and PE with the independent scipy LPs of ``_independent``.

    .venv/bin/python -m tests.policies.sweep_oef --random 250 --hypothesis 250 [--solver cbc]

Half the problems come from ``_independent.random_problem`` (2-4 tenants, 1-4 types), half from
the hypothesis strategy of ``strategies.py`` (derandomised, so a run is reproducible). Prints the
pass count and every failure with its candidates.
"""

from __future__ import annotations

import argparse
import random
import time

from hypothesis import HealthCheck, given, settings

from slurm_fair import policies
from slurm_fair.policies import PolicyOptions

from . import _independent as ind
from .strategies import problems


def check(problem, solver: str) -> tuple[bool, str, dict]:
    a = policies.allocate("oef", problem, PolicyOptions(solver=solver))
    x = {j: dict(r) for j, r in (a.tenant_x or a.x).items()}  # the tenant level (docs/oef.md)
    e = sum(ind.utilities(problem, x).values())
    what = []
    if not ind.capacity_ok(problem, x):
        what.append("capacity")
    if not ind.si_ok(problem, x):
        what.append("SI")
    if not ind.ef_ok(problem, x):
        what.append("EF")
    try:
        gap = ind.pe_gap(problem, x)
    except AssertionError as exc:  # the independent LP itself failed (e.g. infeasible floors)
        what.append(f"PE check failed ({exc})")
    else:
        if gap > ind.tol(e):
            what.append(f"PE (gap {gap:.3g})")
    return not what, ", ".join(what), dict(a.info)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--random", type=int, default=250)
    ap.add_argument("--hypothesis", type=int, default=250)
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--solver", choices=("auto", "cbc", "highs"), default="auto")
    args = ap.parse_args()
    started = time.perf_counter()
    total = passed = 0
    failures = []
    failed_problems = []
    rng = random.Random(args.seed)
    for i in range(args.random):
        p = ind.random_problem(rng, tenants=rng.randint(2, 4), types=rng.randint(1, 4))
        ok, what, info = check(p, args.solver)
        total += 1
        passed += ok
        if info.get("degraded") or "fallback_reason" in info:
            print("DEGRADED", f"random {args.seed}/{i}", info.get("degraded"), info.get("fallback_reason"))
        if not ok:
            failures.append((f"random {args.seed}/{i}", what, info.get("candidates"), info.get("ceei_spending_error")))
            failed_problems.append((f"random {args.seed}/{i}", p))
    seen = []

    @settings(max_examples=max(1, args.hypothesis), deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(problems())
    def run(problem) -> None:
        seen.append(problem)

    if args.hypothesis:
        run()
    for i, p in enumerate(seen[: args.hypothesis]):
        ok, what, info = check(p, args.solver)
        total += 1
        passed += ok
        if info.get("degraded") or "fallback_reason" in info:
            print("DEGRADED", f"hypothesis {i}", info.get("degraded"), info.get("fallback_reason"))
        if not ok:
            failures.append((f"hypothesis {i}", what, info.get("candidates"), info.get("ceei_spending_error")))
            failed_problems.append((f"hypothesis {i}", p))
    for f in failures:
        print("FAIL", *f)
    for name, p in failed_problems:
        print("PROBLEM", name, repr(p))
    print(f"oef SI+EF+PE: {passed}/{total} passed ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
