"""The simulator's SI/EF check takes short cuts (dual certificates, memoised values): its
verdicts must be those of the definitions in :mod:`slurm_fair.fairness`, computed directly."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_fair import fairness, policies
from slurm_fair.policies import PolicyOptions
from slurm_fair.sim.fairness_check import FairnessChecker
from slurm_fair.model import Job, Problem


@st.composite
def problems(draw) -> Problem:
    """1..4 types, 2..5 tenants of 1..4 jobs (gangs, types a job cannot use), weights apart."""
    types = [f"g{i}" for i in range(draw(st.integers(1, 4)))]
    caps = {k: draw(st.integers(1 if i == 0 else 0, 16)) for i, k in enumerate(types)}
    weights = {f"u{i}": draw(st.sampled_from([1.0, 1.0, 2.0, 0.5, 10.0])) for i in range(draw(st.integers(2, 5)))}
    jobs = []
    for u in weights:
        for j in range(draw(st.integers(1, 4))):
            thr = {k: draw(st.sampled_from([0.5, 1.0, 2.5, 7.0])) for k in types
                   if k == types[0] or draw(st.booleans())}
            jobs.append(Job(f"{u}-{j}", u, draw(st.sampled_from([1, 1, 2, 4, 8])), thr))
    return Problem(caps, weights, jobs)


@st.composite
def allocations(draw, problem):
    """Rows inside each job's demand (sum over types <= 1), often the best-use corner cases: a
    job at 0 or 1, a type it cannot use."""
    x = {}
    for j in problem.jobs:
        row = {}
        left = 1.0
        for k in problem.types:
            v = draw(st.sampled_from([0.0, 0.0, 0.25, 0.5, 1.0])) * left
            if v > 0:
                row[k] = v
                left -= v
        x[j.id] = row
    return x


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_envy_free_with_certificates_is_the_definition(data):
    problem = data.draw(problems())
    x = data.draw(allocations(problem))
    assert FairnessChecker().envy_free(problem, x) == fairness.is_envy_free(problem, x)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_the_check_of_a_policy_answer_is_the_definition(problem):
    """oef's answers are EF: the certificates clear most pairs there, the case the short cut is
    for; its verdicts must still be the direct ones (SI too), and again from the cache."""
    a = policies.get("oef").allocate(problem, PolicyOptions(solver="highs"))
    x = a.tenant_x if a.tenant_x is not None else a.x
    checker = FairnessChecker()
    direct = (fairness.is_sharing_incentive(problem, x), fairness.is_envy_free(problem, x))
    assert checker.check(problem, x) == direct
    assert checker.check(problem, x) == direct
