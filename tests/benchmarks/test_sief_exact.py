"""The exact SI+EF bound of benchmarks/bench_sief_exact.py: its pieces checked against the
independent LPs, so the bound it reports for oef is a bound."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypo_profiles import scaled

from slurm_fair import fairness, policies
from slurm_fair.estimates.gavel import load
from slurm_fair.policies import PolicyOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_sief_exact as exact  # noqa: E402
from bench_fairness_price import random_problem  # noqa: E402

from policies import _independent as ind  # noqa: E402


@settings(max_examples=scaled(15), deadline=None)
@given(st.integers(0, 10_000))
def test_the_dual_vertices_give_every_bundles_value(seed: int) -> None:
    """``min over vertices of p.b + q`` is ``V_u(b)`` computed by the independent LP, for random
    tenants and bundles (empty types, scarce and ample ones)."""
    rng = random.Random(seed)
    table = load()
    problem = random_problem(rng, table)
    while not problem.jobs or len(problem.jobs) > 10:  # the enumeration grows as (planes choose K)
        problem = random_problem(rng, table)
    types = [k for k in problem.types if problem.gpu_types.get(k, 0) > 0]
    for u in problem.active_tenants:
        vertices = exact.dual_vertices(list(problem.jobs_of(u)), types)
        for _ in range(3):
            b = {k: rng.choice([0.0, 0.3, 1.0, 4.0, 20.0]) * rng.random() for k in types}
            by_vertex = min(float(p @ np.array([b[k] for k in types])) + q for p, q in vertices)
            assert by_vertex == pytest.approx(ind.value(problem, u, b), rel=1e-7, abs=1e-9)


@pytest.mark.parametrize("seed", [1, 3])
def test_the_exact_optimum_lies_between_oef_and_the_si_bound(seed: int) -> None:
    """oef's tenant level is SI and EF, so the exact SI+EF optimum is at least its E, and at
    most E_SI (envy ignored); the allocation behind it is checked by the independent measures
    through its value only, which is all the benchmark reports."""
    rng = random.Random(seed)
    table = load()
    checked = 0
    while checked < 4:
        problem = random_problem(rng, table)
        if not problem.jobs or len(problem.jobs) > 10:
            continue
        checked += 1
        alloc = policies.allocate("oef", problem, PolicyOptions())
        x = alloc.tenant_x or alloc.x
        assert ind.si_ok(problem, x) and ind.ef_ok(problem, x)
        found, bound, status = exact.exact_si_ef(problem, 60.0)
        assert status == "Optimal" and found is not None
        e_oef = sum(ind.utilities(problem, x).values())
        e_si = fairness.si_bound(problem)
        assert e_oef <= found + 1e-6 * (1 + found)
        assert found <= e_si + 1e-6 * (1 + e_si)
        assert bound == pytest.approx(found, rel=1e-6, abs=1e-9)
