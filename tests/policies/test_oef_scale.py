"""OEF at many tenants: the pooled envy bounds are true upper bounds, and the anytime search
returns a verified answer within its time limit and says what it skipped.

Values are checked against scipy's linprog (tests/policies/_independent.py), per job."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypo_profiles import scaled

from slurm_fair import fairness, policies
from slurm_fair.jobgroups import groups_of
from slurm_fair.model import Job, Problem
from slurm_fair.policies import PolicyOptions
from slurm_fair.policies._envy import EnvyBounds

from . import _independent as ind
from .strategies import problems

FAST = settings(max_examples=scaled(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _envy_of(problem: Problem) -> EnvyBounds:
    classes = groups_of(problem)
    names = problem.active_tenants
    mine = {u: [c for c in classes if c.tenant == u] for u in names}
    value_of = {u: fairness.BestUseModel(mine[u], problem.types) for u in names}
    return EnvyBounds(names, problem.types, mine, {u: problem.weight(u) for u in names}, value_of)


@FAST
@given(problems(), st.lists(st.floats(0, 20), min_size=5, max_size=5), st.integers(0, 3))
def test_pooled_bounds_are_upper_bounds_and_exact_is_exact(problem: Problem, raw: list[float], extra: int) -> None:
    envy = _envy_of(problem)
    T, K = len(envy.names), len(envy.types)
    Y = np.array([[raw[(i + k) % 5] for k in range(K)] for i in range(T)])
    rng = random.Random(extra)
    for _ in range(extra):  # grow the pools with the duals of some exact LPs
        i = rng.randrange(T)
        envy.exact(i, np.array([rng.uniform(0, 10) for _ in range(K)]))
    bound, P, Q = envy.pooled(Y)
    for i, u in enumerate(envy.names):
        for j in range(T):
            b = envy.scale[i, j] * Y[j]
            truth = ind.value(problem, u, dict(zip(envy.types, b)))
            assert bound[i, j] >= truth - ind.tol(truth)
            # the certificate reproduces the bound it gives
            assert abs(float(P[i, j] @ b) + Q[i, j] - bound[i, j]) <= 1e-9 * (1 + abs(bound[i, j]))
            value, _, _ = envy.exact(i, b)
            assert abs(value - truth) <= ind.tol(truth)


def _many_tenants(n_tenants: int, jobs_per_tenant: int, seed: int) -> Problem:
    rng = random.Random(seed)
    types = ["v100", "p100", "k80"]
    jobs = []
    for u in range(n_tenants):
        for j in range(jobs_per_tenant):
            thr = {"v100": rng.choice([2.0, 3.0, 4.0])}
            thr["p100"] = thr["v100"] * rng.choice([0.5, 0.7, 0.9])
            if rng.random() < 0.8:
                thr["k80"] = thr["v100"] * rng.choice([0.2, 0.3, 0.5])
            jobs.append(Job(f"u{u}j{j}", f"u{u}", rng.choice([1, 1, 2, 4]), thr))
    total = n_tenants * jobs_per_tenant
    return Problem({k: max(1, total // 3) for k in types}, {f"u{u}": 1.0 + u % 3 for u in range(n_tenants)}, jobs)


def test_oef_with_many_tenants_is_si_ef_and_pe_by_independent_check() -> None:
    problem = _many_tenants(12, 3, seed=4)
    a = policies.allocate("oef", problem, PolicyOptions(solver="highs"))
    x = {j: dict(r) for j, r in (a.tenant_x or a.x).items()}  # the tenant level (docs/oef.md)
    assert a.status == "optimal"
    assert ind.capacity_ok(problem, x)
    assert ind.si_ok(problem, x)
    assert ind.ef_ok(problem, x)
    assert ind.pe_gap(problem, x) <= ind.tol(sum(ind.utilities(problem, x).values()))


def test_the_equal_split_is_cleared_without_a_single_pair_lp() -> None:
    """At the equal split v's bundle, scaled to u's weight, lies inside u's equal share, so the
    SI LP's duals bound every pair: 30 x 29 ordered pairs checked with no exact LP at all."""
    from slurm_fair.policies._lp import equal_split_classes
    from slurm_fair.policies._tenants import Tenants

    problem = _many_tenants(30, 3, seed=9)
    classes = groups_of(problem)
    t = Tenants(problem, classes)
    X0 = equal_split_classes(problem, classes)
    assert t.fair(X0)
    assert t.envy.exact_solves == 0
    # independently: the equal split is envy-free
    x = {jid: {k: v / c.count for k, v in X0.get(c.key, {}).items()} for c in classes for jid in c.job_ids}
    assert ind.ef_ok(problem, x)


def test_a_climb_that_cannot_finish_a_step_in_time_is_not_started_or_is_cut() -> None:
    """With a time limit too short for a climb step over these tenants, the stage is skipped
    (predicted from timed exact LPs) or its step is cut at the deadline: either way the answer
    is a verified point, and little time is spent past the limit."""
    import time

    from slurm_fair.policies import _climb

    problem = _many_tenants(24, 4, seed=11)
    climbs: list[int] = []
    real_step = _climb.Climb.step

    def step(self, X, deadline=None):  # a step that always runs out of time, if one starts
        climbs.append(1)
        return real_step(self, X, time.perf_counter() - 1.0)

    _climb.Climb.step = step
    try:
        a = policies.allocate("oef", problem, PolicyOptions(solver="highs", time_limit_s=60))
    finally:
        _climb.Climb.step = real_step
    x = {j: dict(r) for j, r in (a.tenant_x or a.x).items()}  # the tenant level (docs/oef.md)
    assert ind.si_ok(problem, x) and ind.ef_ok(problem, x)
    # every climb that started was cut before its first step's point was used
    assert a.info["ccp_rounds"] == 0
    assert climbs and any(s.startswith("rest of ccp") for s in a.info["skipped_for_time"]), a.info


def test_the_step_estimate_counts_the_pairs_the_pools_cannot_clear() -> None:
    from slurm_fair.policies import _climb, _tenants
    from slurm_fair.policies._lp import equal_split_classes

    problem = _many_tenants(24, 4, seed=11)
    classes = groups_of(problem)
    t = _tenants.Tenants(problem, classes)
    lp = _climb.Climb(problem, t, PolicyOptions(solver="highs"))
    assert t.fair(equal_split_classes(problem, classes))  # puts the SI LPs' duals in the pools
    assert t.envy.exact_solves == 0
    # everything to u0's jobs: the others' envy of u0 is undecided by the pools, and timing the
    # estimate solves a sample of those exact LPs
    X = {c.key: ({"v100": float(c.count)} if c.tenant == "u0" and c.n.get("v100", 0) > 0 else {}) for c in classes}
    U, Y = t.arrays(X)
    pairs = {(int(i), int(j)) for i, j in t.envy.undecided(U, Y)}
    u0 = t.names.index("u0")
    assert {(i, u0) for i in range(len(t.names)) if i != u0} <= pairs
    assert lp.first_step_seconds(X) > 0.0 and t.envy.exact_solves == _climb._TIMED_SAMPLE
