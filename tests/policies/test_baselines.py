"""Hand-solved small cases for each baseline policy."""

from __future__ import annotations

import pytest
from hypothesis import given

from .strategies import problems

from slurm_fair import policies
from slurm_fair.model import Job, Problem
from slurm_fair.policies import PolicyOptions

from . import _independent as ind

OPTS = PolicyOptions(solver="highs")


def test_max_throughput_puts_the_v100_lover_on_v100() -> None:
    # a: 10x faster on v100; b: same everywhere. 1 v100, 1 k80. Best: a on v100 (1), b on k80 (1).
    p = Problem({"v100": 1, "k80": 1}, {}, [Job("a", "a", 1, {"v100": 10, "k80": 1}), Job("b", "b", 1, {"v100": 1, "k80": 1})])
    x = policies.allocate("max-throughput", p, OPTS).x
    assert x["a"]["v100"] == pytest.approx(1.0)
    assert x["b"]["k80"] == pytest.approx(1.0)


def test_gavel_mmf_equalises_normalised_rates() -> None:
    # two identical 1-GPU jobs of two tenants, 1 GPU: each gets half the time (max-min = 0.5)
    p = Problem({"v100": 1}, {}, [Job("a", "a", 1, {"v100": 3}), Job("b", "b", 1, {"v100": 3})])
    x = policies.allocate("gavel-mmf", p, OPTS).x
    assert x["a"]["v100"] == pytest.approx(0.5)
    assert x["b"]["v100"] == pytest.approx(0.5)


def test_gavel_mmf_job_weight_is_tenant_weight_over_its_jobs() -> None:
    # tenant a has 2 jobs, b has 1; equal tenant weights -> job weights 1/2, 1/2, 1.
    # 2 GPUs: rates r_a1 = r_a2 = t/2 * e, r_b = t * e -> b gets 1, each of a's gets 0.5.
    p = Problem({"v100": 2}, {}, [Job("a1", "a", 1, {"v100": 1}), Job("a2", "a", 1, {"v100": 1}), Job("b", "b", 1, {"v100": 1})])
    x = policies.allocate("gavel-mmf", p, OPTS).x
    assert x["b"]["v100"] == pytest.approx(1.0)
    assert x["a1"]["v100"] == pytest.approx(0.5)
    assert x["a2"]["v100"] == pytest.approx(0.5)


def test_agnostic_ignores_speed_differences() -> None:
    # 1 v100 + 1 k80; a is 10x faster on v100, b indifferent. Agnostic max-min sees equal GPUs,
    # so any split with each job at total time 1 is max-min; judged on true speed it can waste
    # the v100. Its true efficiency must not exceed the heterogeneity-aware bound.
    p = Problem({"v100": 1, "k80": 1}, {}, [Job("a", "a", 1, {"v100": 10, "k80": 1}), Job("b", "b", 1, {"v100": 1, "k80": 1})])
    x = {j: dict(r) for j, r in policies.allocate("agnostic", p, OPTS).x.items()}
    assert sum(x["a"].values()) == pytest.approx(1.0)
    assert sum(x["b"].values()) == pytest.approx(1.0)
    assert sum(ind.utilities(p, x).values()) <= ind.max_efficiency(p) + 1e-9


def test_fifo_oldest_first_on_fastest_free_type() -> None:
    p = Problem({"v100": 1, "k80": 1}, {}, [
        Job("young", "a", 1, {"v100": 5, "k80": 1}, age_s=10),
        Job("old", "b", 1, {"v100": 5, "k80": 1}, age_s=100),
        Job("newest", "c", 1, {"v100": 5, "k80": 1}, age_s=1),
    ])
    x = policies.allocate("fifo", p, OPTS).x
    assert dict(x["old"]) == {"v100": 1.0}
    assert dict(x["young"]) == {"k80": 1.0}
    assert dict(x["newest"]) == {}


def test_gavel_ftf_gives_the_speed_sensitive_job_the_fast_gpu() -> None:
    # 1 v100 + 1 k80, no age: rho_j = thr_iso_j / thr_j. Isolated share = half of each type:
    # thr_iso(a) = 0.5*10 + 0.5*1 = 5.5, thr_iso(b) = 0.5 + 0.5 = 1. b runs at most 1 (any type),
    # so rho_b >= 1 and the best max rho is 1; at that level, max E puts a on the v100 full time
    # (rho_a = 0.55) and b on the k80.
    p = Problem({"v100": 1, "k80": 1}, {}, [
        Job("a", "a", 1, {"v100": 10, "k80": 1}, remaining_work=100, age_s=0),
        Job("b", "b", 1, {"v100": 1, "k80": 1}, remaining_work=100, age_s=0),
    ])
    a = policies.allocate("gavel-ftf", p, OPTS)
    assert a.info["max_rho"] == pytest.approx(1.0, rel=1e-4)
    assert a.x["a"]["v100"] == pytest.approx(1.0, rel=1e-4)
    assert a.x["b"]["k80"] == pytest.approx(1.0, rel=1e-4)


def test_every_policy_is_feasible_on_a_random_problem() -> None:
    import random

    p = ind.random_problem(random.Random(11), tenants=4, types=4)
    for name in ["oef", "oef-noncoop", "gavel-mmf", "gavel-ftf", "max-throughput", "agnostic", "fifo"]:
        x = {j: dict(r) for j, r in policies.allocate(name, p, OPTS).x.items()}
        assert ind.capacity_ok(p, x), name


@given(problems())
def test_max_throughput_reaches_the_independent_efficiency_bound(p: Problem) -> None:
    """max E merges classes with equal rates per GPU across tenants and splits the answer back:
    the split answer is feasible and reaches E*, computed here by an independent LP."""
    x = {j: dict(r) for j, r in policies.allocate("max-throughput", p, OPTS).x.items()}
    assert ind.capacity_ok(p, x)
    assert sum(ind.utilities(p, x).values()) == pytest.approx(ind.max_efficiency(p), rel=1e-6, abs=1e-7)
