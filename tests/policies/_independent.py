"""Independent checks of docs/fairness.md's properties with scipy's linprog.

Written from docs/fairness.md alone, per job (no job groups), sharing no code with slurm_fair's
fairness module or policies, so a bug there cannot hide itself here.
"""

from __future__ import annotations

import random

import numpy as np
from scipy.optimize import linprog

from slurm_fair.model import Job, Problem


def n_of(job: Job, k: str) -> float:
    best = max(job.throughput.values())
    return job.throughput.get(k, 0.0) / best if best > 0 else 0.0


def utilities(problem: Problem, x) -> dict[str, float]:
    out = {j.tenant: 0.0 for j in problem.jobs}
    for j in problem.jobs:
        out[j.tenant] += sum(n_of(j, k) * v for k, v in x.get(j.id, {}).items())
    return out


def bundles(problem: Problem, x) -> dict[str, dict[str, float]]:
    out = {j.tenant: {k: 0.0 for k in problem.gpu_types} for j in problem.jobs}
    for j in problem.jobs:
        for k, v in x.get(j.id, {}).items():
            out[j.tenant][k] += j.gpus * v
    return out


def value(problem: Problem, tenant: str, bundle: dict[str, float]) -> float:
    """V_u(b) by linprog, one variable per (job, type)."""
    jobs = [j for j in problem.jobs if j.tenant == tenant]
    types = sorted(problem.gpu_types)
    idx = [(a, k) for a, j in enumerate(jobs) for k in types if j.throughput.get(k, 0.0) > 0]
    if not idx:
        return 0.0
    c = np.array([-n_of(jobs[a], k) for a, k in idx])
    rows, rhs = [], []
    for k in types:
        rows.append([jobs[a].gpus if kk == k else 0.0 for a, kk in idx])
        rhs.append(max(0.0, bundle.get(k, 0.0)))
    for b in range(len(jobs)):
        rows.append([1.0 if a == b else 0.0 for a, _ in idx])
        rhs.append(1.0)
    res = linprog(c, A_ub=np.array(rows), b_ub=np.array(rhs), bounds=(0, None), method="highs")
    assert res.status == 0, res.message
    return -res.fun


def max_efficiency(problem: Problem, floors: dict[str, float] | None = None) -> float:
    """max E over feasible allocations, optionally with U_u >= floors[u]."""
    types = sorted(problem.gpu_types)
    jobs = list(problem.jobs)
    idx = [(a, k) for a, j in enumerate(jobs) for k in types if j.throughput.get(k, 0.0) > 0]
    c = np.array([-n_of(jobs[a], k) for a, k in idx])
    rows, rhs = [], []
    for k in types:
        rows.append([jobs[a].gpus if kk == k else 0.0 for a, kk in idx])
        rhs.append(problem.gpu_types[k])
    for b in range(len(jobs)):
        rows.append([1.0 if a == b else 0.0 for a, _ in idx])
        rhs.append(1.0)
    for u, floor in (floors or {}).items():
        rows.append([-n_of(jobs[a], k) if jobs[a].tenant == u else 0.0 for a, k in idx])
        rhs.append(-(floor - 1e-9 * (1 + abs(floor))))
    res = linprog(c, A_ub=np.array(rows), b_ub=np.array(rhs), bounds=(0, None), method="highs")
    if res.status == 2:
        # HiGHS' presolve can call a feasible LP with nearly dependent floor rows infeasible
        # (seen on a problem whose allocation satisfies every row exactly): decide without it
        res = linprog(c, A_ub=np.array(rows), b_ub=np.array(rhs), bounds=(0, None), method="highs",
                      options={"presolve": False})
    assert res.status == 0, res.message
    return -res.fun


def tol(rhs: float) -> float:
    return 1e-6 * (1 + abs(rhs))


def capacity_ok(problem: Problem, x) -> bool:
    for j in problem.jobs:
        row = x.get(j.id, {})
        if sum(row.values()) > 1 + 1e-6 or any(v < -1e-9 for v in row.values()):
            return False
        if any(v > 1e-9 and j.throughput.get(k, 0.0) <= 0 for k, v in row.items()):
            return False
    used = {k: 0.0 for k in problem.gpu_types}
    for j in problem.jobs:
        for k, v in x.get(j.id, {}).items():
            used[k] += j.gpus * v
    return all(used[k] <= problem.gpu_types[k] + tol(problem.gpu_types[k]) for k in used)


def si_ok(problem: Problem, x) -> bool:
    U = utilities(problem, x)
    W = sum(problem.weight(u) for u in U)
    for u in U:
        share = {k: problem.weight(u) / W * c for k, c in problem.gpu_types.items()}
        v = value(problem, u, share)
        if U[u] < v - tol(v):
            return False
    return True


def ef_ok(problem: Problem, x) -> bool:
    U, Y = utilities(problem, x), bundles(problem, x)
    for u in U:
        for v in U:
            if u != v:
                scale = problem.weight(u) / problem.weight(v)
                val = value(problem, u, {k: scale * y for k, y in Y[v].items()})
                if U[u] < val - tol(val):
                    return False
    return True


def pe_gap(problem: Problem, x) -> float:
    U = utilities(problem, x)
    return max_efficiency(problem, U) - sum(U.values())


def random_problem(rng: random.Random, tenants: int = 3, types: int = 3) -> Problem:
    names = [f"t{i}" for i in range(types)]
    jobs = []
    for u in range(tenants):
        for j in range(rng.randint(1, 4)):
            thr = {k: round(rng.uniform(0.1, 10), 2) for k in names if rng.random() < 0.8} or {names[0]: 1.0}
            jobs.append(Job(f"u{u}j{j}", f"u{u}", rng.choice([1, 1, 2, 4]), thr))
    return Problem({k: rng.randint(1, 8) for k in names}, {f"u{u}": rng.choice([1, 2, 5]) for u in range(tenants)}, jobs)
