"""oef-noncoop: SI always, and no misreport of throughputs raises a tenant's TRUE utility."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypo_profiles import scaled

from slurm_fair import policies
from slurm_fair.model import Job, Problem
from slurm_fair.policies import PolicyOptions

from . import _independent as ind
from .strategies import problems

OPTS = PolicyOptions(solver="highs")


def true_utility(problem: Problem, x, tenant: str) -> float:
    return ind.utilities(problem, x).get(tenant, 0.0)


@settings(max_examples=scaled(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.integers(0, 10_000))
def test_misreports_never_help(problem: Problem, seed: int) -> None:
    rng = random.Random(seed)
    liar = rng.choice(problem.active_tenants)
    honest = {j: dict(r) for j, r in policies.allocate("oef-noncoop", problem, OPTS).x.items()}
    assert ind.capacity_ok(problem, honest)
    assert ind.si_ok(problem, honest)
    base = true_utility(problem, honest, liar)
    for _ in range(3):
        lies = []
        for j in problem.jobs:
            if j.tenant != liar:
                lies.append(j)
                continue
            thr = {k: v * rng.choice([0.0, 0.1, 0.5, 1.0, 2.0, 10.0]) for k, v in j.throughput.items()}
            if not any(v > 0 for v in thr.values()):
                thr = dict(j.throughput)
            if rng.random() < 0.3:  # claim a type it cannot use
                k = rng.choice(problem.types)
                thr[k] = thr.get(k, 0.0) or rng.choice([0.5, 5.0, 50.0])
            lies.append(Job(j.id, j.tenant, j.gpus, thr))
        reported = Problem(problem.gpu_types, problem.tenants, lies)
        x = {j: dict(r) for j, r in policies.allocate("oef-noncoop", reported, OPTS).x.items()}
        # true utility: the allocation of the lie, valued with the TRUE n_jk
        assert true_utility(problem, x, liar) <= base + ind.tol(base) * 10
