"""Between solves a two-level answer keeps its tenant-level bundles and shares them again inside
the tenants whose jobs changed (:mod:`slurm_fair.sim.resplit`): checked against the inside level
run directly over the whole problem, and against the bundles it must stay in."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_fair import fairness, policies
from slurm_fair.model import Job, Problem
from slurm_fair.policies import PolicyOptions
from slurm_fair.policies import _inside as inside
from slurm_fair.sim import resplit
from slurm_fair.sim.engine import SimConfig, simulate
from slurm_fair.sim.synthetic import generate
from slurm_fair.sim.cluster import parse_cluster
from slurm_fair.estimates import gavel

TYPES = ["a", "b", "c"]


@st.composite
def cases(draw):
    """A problem (2..4 tenants, waiting and running jobs of various ages), bundles for some of
    its tenants, previous rows, and the tenants whose jobs changed."""
    tenants = [f"u{i}" for i in range(draw(st.integers(2, 4)))]
    jobs = []
    for u in tenants:
        for i in range(draw(st.integers(1, 4))):
            thr = {k: draw(st.sampled_from([0.5, 1.0, 3.0])) for k in TYPES if k == "a" or draw(st.booleans())}
            age = draw(st.sampled_from([0.0, 600.0, 7200.0, 86400.0]))
            jobs.append(Job(f"{u}-{i}", u, draw(st.sampled_from([1, 2, 4, 8])), thr,
                            age_s=age, attained_s=age * draw(st.sampled_from([0.0, 0.5, 1.0])),
                            prev_type=draw(st.sampled_from([None, "a"])),
                            extra={"time_limit_s": draw(st.sampled_from([3600.0, 86400.0]))}))
    problem = Problem({"a": 16, "b": 8, "c": 8}, {u: draw(st.sampled_from([1.0, 2.0])) for u in tenants}, jobs)
    bundles = {u: {k: float(draw(st.integers(0, 8))) for k in TYPES} for u in tenants if draw(st.booleans())}
    previous = {j.id: {"a": 0.5} for j in jobs if draw(st.booleans())}
    changed = {u for u in tenants if draw(st.booleans())}
    return problem, bundles, previous, changed


def _direct(problem, bundles):
    """The inside level of the policy over the whole problem, every tenant's bundle given."""
    first = {}
    for j in problem.jobs:
        first.setdefault(j.tenant, j)
    x0 = {j.id: {k: v / j.gpus for k, v in bundles[u].items() if v > 1e-12}
          for u, j in first.items() if u in bundles}
    o = PolicyOptions(solver="highs", round_s=900, state={})
    rows, _, _ = inside.two_level(problem, x0, o, o.param("oef", "keep_bonus"), o.param("oef", "rho_weight"),
                                  o.param("oef", "inside_eps"), o.param("oef", "turn_after_lr") or None)
    return rows


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_resplit_is_the_inside_level_for_changed_tenants_and_keeps_the_others(case):
    problem, bundles, previous, changed = case
    options = PolicyOptions(solver="highs", round_s=900, state={})
    out = resplit.resplit(problem, bundles, previous, changed, "oef", options)
    direct = _direct(problem, bundles)
    redo = {u for u in changed if any(v > 1e-12 for v in bundles.get(u, {}).values())}
    # a tenant whose inside solve failed keeps its stand-in row in the direct run: the
    # previous rows are kept then
    failed = {j.tenant for j in problem.jobs
              if sum(direct.get(j.id, {}).values()) > 1 + 1e-9 or any(j.throughput.get(k, 0) <= 0 for k in direct.get(j.id, {}))}
    for j in problem.jobs:
        want = direct.get(j.id, {}) if j.tenant in redo - failed else previous.get(j.id, {})
        got = out[j.id]
        assert set(k for k, v in got.items() if v > 1e-9) == set(k for k, v in want.items() if v > 1e-9)
        assert all(abs(got.get(k, 0.0) - v) <= 1e-7 for k, v in want.items())
    # inside the bundles, at most all of a job's time, only where it runs (the tenants kept at
    # their previous rows are not split again: drawn independently of the bundles, those rows may
    # exceed a bundle the last solve would not have given with them)
    held = fairness.tenant_bundles(problem, out)
    for u in redo - failed:
        assert all(held[u][k] <= bundles[u].get(k, 0.0) + 1e-6 for k in TYPES)
    for j in problem.jobs:
        assert sum(out[j.id].values()) <= 1 + 1e-9 and all(j.throughput.get(k, 0) > 0 for k in out[j.id])
    # the new jobs' isolated JCTs are kept in the policy state, as a solve keeps them
    assert {j.id for j in problem.jobs if j.tenant in redo} <= set(options.state.get("oef.iso_jct", {}))


def test_changed_tenants_are_those_whose_jobs_differ():
    def p(*ids):
        return Problem({"a": 1}, {"x": 1.0, "y": 1.0, "z": 1.0}, [Job(i, i[0], 1, {"a": 1.0}) for i in ids])

    assert resplit.changed_tenants(p("x1", "y1", "z1"), p("x1", "y2", "z1")) == {"y"}
    assert resplit.changed_tenants(p("x1", "y1"), p("x1", "y1", "z1")) == {"z"}
    assert resplit.changed_tenants(p("x1"), p("x1")) == set()


def test_a_stale_run_with_the_resplit_finishes_every_job_within_capacity():
    table = gavel.load(None)
    workload = generate(60, 3, 5, rate_per_hour=30, table=table, max_duration_s=3 * 3600)
    cluster = parse_cluster("v100=8,p100=8,k80=8", 4)
    runs = {rs: simulate(workload, cluster, table, policies.get("oef"),
                         SimConfig(check_fairness=False, stale_s=3600.0, stale_changes=1.0, stale_resplit=rs))
            for rs in (False, True)}
    for res in runs.values():
        assert res.reused_solutions > 0
        assert all(r.end_s is not None for r in res.records) and len(res.records) == len(workload.jobs)
        for s in res.samples:
            assert all(s.busy.get(k, 0) <= c for k, c in cluster.capacity.items())
    # the re-split changes what the reused rounds run (else it would be the plain reuse)
    assert [(r.job_id, r.end_s) for r in runs[True].records] != [(r.job_id, r.end_s) for r in runs[False].records]
