"""OEF's promises checked by an independent LP (scipy), on hand-made and generated problems."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypo_profiles import scaled

from slurm_fair import policies
from slurm_fair.model import Job, Problem
from slurm_fair.policies import PolicyOptions

from . import _independent as ind
from .strategies import problems

OPTS = PolicyOptions(solver="highs")
FAST = settings(max_examples=scaled(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _x(alloc):
    """The allocation SI, EF and PE are about: oef's tenant level (its bundles, docs/oef.md
    "Two levels"), any other policy's ``x``."""
    return {j: dict(r) for j, r in (alloc.tenant_x or alloc.x).items()}


@FAST
@given(problems())
def test_oef_is_feasible_si_and_ef(problem: Problem) -> None:
    a = policies.allocate("oef", problem, OPTS)
    x = _x(a)
    assert ind.capacity_ok(problem, x)
    assert ind.si_ok(problem, x)
    assert ind.ef_ok(problem, x)


@FAST
@given(problems())
def test_oef_pareto_flag_is_truthful(problem: Problem) -> None:
    """info['pareto_efficient'] is what an independent LP says (see docs/oef.md, PE)."""
    a = policies.allocate("oef", problem, OPTS)
    gap = ind.pe_gap(problem, _x(a))
    e = sum(ind.utilities(problem, _x(a)).values())
    assert (gap <= ind.tol(e) * 10) == bool(a.info["pareto_efficient"]), (gap, dict(a.info))


@FAST
@given(problems())
def test_oef_is_si_ef_and_pe(problem: Problem) -> None:
    """oef is SI, EF and PE on hypothesis-generated problems (independent scipy LPs)."""
    x = _x(policies.allocate("oef", problem, OPTS))
    assert ind.capacity_ok(problem, x)
    assert ind.si_ok(problem, x)
    assert ind.ef_ok(problem, x)
    e = sum(ind.utilities(problem, x).values())
    # the same 10x band as the pareto flag above: with tenant weights 100 apart (hypothesis
    # found u0=100 beside a tiny tenant) HiGHS's 1e-7 feasibility tolerance on the weighted
    # model shows as a few 1e-6 of unweighted utility (seen: 4.2e-6 on e = 2.5)
    assert ind.pe_gap(problem, x) <= ind.tol(e) * 10


def test_oef_pe_on_random_problems() -> None:
    rng = random.Random(7)
    for _ in range(40):
        p = ind.random_problem(rng)
        x = _x(policies.allocate("oef", p, OPTS))
        assert ind.si_ok(p, x) and ind.ef_ok(p, x)
        assert ind.pe_gap(p, x) <= ind.tol(sum(ind.utilities(p, x).values()))


@FAST
@given(problems())
def test_oef_at_least_gavel_mmf_when_gavel_is_fair(problem: Problem) -> None:
    """gavel-mmf's answer is one of oef's candidates when it is SI, EF and PE, so oef is at least
    as efficient then; otherwise the comparison is not promised (docs/oef.md)."""
    g = _x(policies.allocate("gavel-mmf", problem, OPTS))
    eg0 = sum(ind.utilities(problem, g).values())
    if not (ind.si_ok(problem, g) and ind.ef_ok(problem, g) and ind.pe_gap(problem, g) <= ind.tol(eg0)):
        return
    o = _x(policies.allocate("oef", problem, OPTS))
    eo, eg = sum(ind.utilities(problem, o).values()), sum(ind.utilities(problem, g).values())
    assert eo >= eg - ind.tol(eg) * 10


def test_oef_beats_equal_split_on_complementary_tenants() -> None:
    """Two tenants, one fast only on v100, the other indifferent: OEF trades GPUs so both gain,
    reaching E* = 4 (independently: a's 2 jobs on v100 at rate 1, b's on k80 at rate 1)."""
    p = Problem(
        {"v100": 2, "k80": 2}, {},
        [Job("a1", "a", 1, {"v100": 10, "k80": 1}), Job("a2", "a", 1, {"v100": 10, "k80": 1}),
         Job("b1", "b", 1, {"v100": 1, "k80": 1}), Job("b2", "b", 1, {"v100": 1, "k80": 1})],
    )
    a = policies.allocate("oef", p, OPTS)
    x = _x(a)
    assert sum(ind.utilities(p, x).values()) == pytest.approx(4.0, rel=1e-6)
    assert ind.max_efficiency(p) == pytest.approx(4.0)
    assert ind.si_ok(p, x) and ind.ef_ok(p, x)


def test_oef_reports_efficiency_bound() -> None:
    p = ind.random_problem(random.Random(3))
    a = policies.allocate("oef", p, OPTS)
    assert a.efficiency_bound == pytest.approx(ind.max_efficiency(p), rel=1e-6)
