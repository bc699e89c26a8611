"""Phases 5 and 6a: plan and diff on scenario tables."""

from __future__ import annotations

import math
from datetime import timedelta

from hypothesis import given, settings, strategies as st
from hypo_profiles import scaled

from slurm_fair.model import Allocation, Job, Problem
from slurm_fair.controller.diff import diff
from slurm_fair.controller.plan import PlanInputs, make_plan
from slurm_fair.controller.plan.jobs import NICE_BAND
from slurm_fair.controller.plan.limits import qos_name, tenant_limits
from slurm_fair.controller.plan.types import PlanSettings
from slurm_fair.controller.steer import partition_types, type_partitions
from slurm_fair.slurm.model import Account, Qos

from .builders import T0, cluster, job, snapshot


def problem_of(snap, tput=None, attained=None):
    """The problem of a snapshot; ``attained[job]``: seconds it already ran (a requeued job)."""
    cap = snap.capacity()
    jobs = []
    for j in snap.gpu_jobs():
        t = (tput or {}).get(j.job_id, {k: 1.0 for k in cap})
        if j.running:
            t = {j.gpu_type_running: t[j.gpu_type_running]}
        jobs.append(Job(j.job_id, j.account, j.gpu_request.total, t, attained_s=(attained or {}).get(j.job_id, 0.0)))
    return Problem(cap, {}, tuple(jobs))


def steering(snap, **kw):
    """PlanSettings with the partition maps of the snapshot (what the cycle passes)."""
    return PlanSettings(ptypes=partition_types(snap.nodes), type_partition=type_partitions(snap.nodes), **kw)


def plan_for(snap, x, placed, deficit=None, fixed=None, s=None, boundary=False):
    prob = problem_of(snap)
    s = s or steering(snap)
    inputs = PlanInputs(placed, deficit or {}, fixed or {}, round_boundary=boundary)
    return make_plan(snap, prob, Allocation("test", x), inputs, s)


def test_scenario_two_tenants_get_typed_ordered_and_limited():
    snap = snapshot(cluster(v100=4, k80=4), [
        job("1", "alice"), job("2", "alice"), job("3", "bob", gpus=2),
    ])
    x = {"1": {"v100": 1.0}, "2": {"k80": 0.5}, "3": {"v100": 0.5, "k80": 0.5}}
    plan = plan_for(snap, x, {"1": "v100", "3": "k80"}, {"1": 2.0, "3": 1.0, "2": 0.5})
    assert {j: p.planned_type for j, p in plan.jobs.items()} == {"1": "v100", "2": "k80", "3": "k80"}
    # steered by partition (reversible), the requests stay as the users wrote them
    assert {j: p.partition for j, p in plan.jobs.items()} == {"1": "v100", "2": "k80", "3": "k80"}
    assert all(p.gpu_type is None for p in plan.jobs.values())
    assert [plan.jobs[j].rank for j in ("1", "3", "2")] == [1, 2, 3]
    # this round's jobs go a band ahead; the others keep their own nice (and their
    # multifactor order among themselves)
    assert plan.jobs["2"].nice == 0 and plan.jobs["1"].nice == -NICE_BAND
    # alice: bundle v100 1.0, k80 0.5 -> ceil; bob: 1 GPU of each on average, 2 placed on k80
    assert dict(plan.tenants["alice"].limits) == {"gres/gpu:v100": 1, "gres/gpu:k80": 1}
    assert dict(plan.tenants["bob"].limits) == {"gres/gpu:v100": 1, "gres/gpu:k80": 2}
    assert plan.tenants["alice"].qos == "fair_alice"


def test_user_typed_job_is_never_retyped():
    snap = snapshot(cluster(v100=4, k80=4), [job("1", "alice", gpu_type="k80")])
    plan = plan_for(snap, {"1": {"k80": 1.0}}, {"1": "k80"}, fixed={"1": "k80"})
    assert plan.jobs["1"].gpu_type is None and plan.jobs["1"].partition is None
    assert plan.jobs["1"].planned_type == "k80"
    assert not [a for a in diff(plan, snap) if a.kind in ("set_gpu_type", "set_partition")]


def test_pin_gres_mode_rewrites_the_request_instead_of_the_partition():
    snap = snapshot(cluster(v100=4, k80=4), [job("1", "alice")])
    plan = plan_for(snap, {"1": {"k80": 1.0}}, {"1": "k80"}, s=steering(snap, pin_gres=True))
    assert (plan.jobs["1"].gpu_type, plan.jobs["1"].partition) == ("k80", None)
    assert [a.kind for a in diff(plan, snap) if a.job] == ["set_job_qos", "set_gpu_type", "set_nice"]


def test_type_without_its_own_partition_is_not_steered_and_reported():
    snap = snapshot(cluster(type_partitions=False, v100=4, k80=4), [job("1", "alice")])
    plan = plan_for(snap, {"1": {"k80": 1.0}}, {"1": "k80"})
    assert plan.jobs["1"].partition == "gpu" and plan.unsteered == {"1": "k80"}
    assert not [a for a in diff(plan, snap) if a.kind in ("set_gpu_type", "set_partition")]


def test_job_in_a_type_partition_keeps_it_while_allocated_there():
    snap = snapshot(cluster(v100=4, k80=4), [job("1", "a", partition="k80")])
    plan = plan_for(snap, {"1": {"v100": 0.6, "k80": 0.4}}, {})
    assert plan.jobs["1"].partition == "k80"


def test_total_limit_is_the_sum_of_the_typed_limits():
    lim = tenant_limits({"v100": 1.5, "k80": 0.2}, {}, {"v100": 4, "k80": 8}, 0.0, total=True)
    assert lim == {"gres/gpu:v100": 2, "gres/gpu:k80": 1, "gres/gpu": 3}


def test_pending_job_keeps_its_current_type_while_allocated_there():
    snap = snapshot(cluster(v100=4, k80=4), [job("1", "a", gpu_type="k80")])
    plan = plan_for(snap, {"1": {"v100": 0.6, "k80": 0.4}}, {}, s=steering(snap, pin_gres=True))
    assert plan.jobs["1"].gpu_type == "k80"


def test_priority_order_mode_sets_a_total_order():
    snap = snapshot(cluster(v100=4), [job(str(i), "a") for i in range(1, 4)])
    plan = plan_for(snap, {}, {"2": "v100"}, s=steering(snap, order="priority"))
    prios = {j: p.priority for j, p in plan.jobs.items()}
    assert prios["2"] > prios["1"] > prios["3"] and all(p.nice is None for p in plan.jobs.values())


def test_requeue_only_opted_in_jobs_at_round_boundaries():
    old = T0 - timedelta(hours=1)
    jobs = [
        job("1", "a", state="RUNNING", running_on="v100", requeue=True, comment="fair:preemptible", started=old),
        job("2", "a", state="RUNNING", running_on="v100", requeue=True, started=old),  # no tag
        job("3", "a", state="RUNNING", running_on="v100", comment="fair:preemptible", started=old),  # no --requeue
        job("4", "a", state="RUNNING", running_on="v100", requeue=True, comment="fair:preemptible",
            started=T0 - timedelta(seconds=10)),  # too recent
    ]
    # a pending job the placement runs on v100 needs the GPU (v100 is full with the four)
    snap = snapshot(cluster(v100=4), jobs + [job("5", "b")])
    assert plan_for(snap, {}, {"5": "v100"}, boundary=True).requeue == ("1",)
    # between boundaries only a job that never ran is let in (admission)
    assert plan_for(snap, {}, {"5": "v100"}, boundary=False).requeue == ("1",)
    assert plan_for(snap, {}, {"1": "v100", "5": "v100"}, boundary=True).requeue == ()
    # nobody needs its GPU: it keeps running (work-conserving)
    assert plan_for(snap, {}, {}, boundary=True).requeue == ()


@settings(max_examples=scaled(200), deadline=None)
@given(
    caps=st.dictionaries(st.sampled_from(["a100", "v100", "k80"]), st.integers(0, 64), min_size=1),
    bundle=st.dictionaries(st.sampled_from(["a100", "v100", "k80"]), st.floats(0, 64)),
    placed=st.dictionaries(st.sampled_from(["a100", "v100", "k80"]), st.integers(0, 64)),
    slack=st.floats(0, 1),
)
def test_limits_never_exceed_capacity_and_cover_bundle_and_placement(caps, bundle, placed, slack):
    lim = tenant_limits(bundle, placed, caps, slack)
    assert set(lim) == {f"gres/gpu:{k}" for k in caps}
    for k, c in caps.items():
        n = lim[f"gres/gpu:{k}"]
        assert 0 <= n <= c
        want = max(math.ceil(bundle.get(k, 0.0) - 1e-6), placed.get(k, 0))
        assert n >= min(c, want)


def test_diff_is_empty_when_slurm_already_matches():
    snap = snapshot(cluster(v100=4, k80=4), [job("1", "a")])
    plan = plan_for(snap, {"1": {"v100": 1.0}}, {"1": "v100"})
    first = diff(plan, snap)
    assert [a.kind for a in first] == ["ensure_qos", "attach_qos", "set_job_qos", "set_partition", "set_nice"]
    applied = snapshot(
        cluster(v100=4, k80=4),
        [job("1", "a", partition="v100", qos="fair_a", nice=-NICE_BAND)],
        accounts=[Account("a", 1.0, ("normal", "fair_a"), "fair_a")],
        qos=[Qos("normal"), Qos("fair_a", {"gres/gpu:v100": 1, "gres/gpu:k80": 0, "cpu": 8})],
    )
    assert diff(plan, applied) == []


def test_diff_sees_a_lost_change_again():
    plan_snap = snapshot(cluster(v100=4, k80=4), [job("1", "a")])
    plan = plan_for(plan_snap, {"1": {"v100": 1.0}}, {"1": "v100"})
    lost = snapshot(cluster(v100=4, k80=4), [job("1", "a", partition="gpu", qos="fair_a", nice=-NICE_BAND)],
                    accounts=[Account("a", 1.0, ("fair_a",), "fair_a")],
                    qos=[Qos("fair_a", {"gres/gpu:v100": 1, "gres/gpu:k80": 0})])
    assert [a.kind for a in diff(plan, lost)] == ["set_partition"]


def test_diff_removes_a_total_limit_that_was_turned_off():
    snap = snapshot(cluster(v100=4, k80=4), [job("1", "a", partition="v100", qos="fair_a", nice=-NICE_BAND)],
                    accounts=[Account("a", 1.0, ("fair_a",), "fair_a")],
                    qos=[Qos("fair_a", {"gres/gpu:v100": 1, "gres/gpu:k80": 0, "gres/gpu": 1})])
    plan = plan_for(snap, {"1": {"v100": 1.0}}, {"1": "v100"})
    [a] = diff(plan, snap)
    assert a.kind == "ensure_qos" and a.after == {"gres/gpu:v100": 1, "gres/gpu:k80": 0, "gres/gpu": None}


def test_qos_name_is_safe():
    assert qos_name("Phys ics;drop") == "fair_phys_ics_drop"


def test_an_idle_tenant_gets_a_total_limit_only_when_total_limits_are_on():
    from slurm_fair.controller.decide import idle_tenant_limits
    from slurm_fair.controller.plan.limits import TOTAL_KEY
    from slurm_fair.controller.plan.types import Plan, TenantPlan

    plan = Plan({"a": TenantPlan("a", "fair_a", {}, {}, {}, 2.0), "b": TenantPlan("b", "fair_b", {}, {}, {}, 1.0)}, {})
    capacity = {"v100": 8, "k80": 4}
    off = idle_tenant_limits(plan, {"c": 1.0}, capacity, 0.0, total=False)["c"]
    on = idle_tenant_limits(plan, {"c": 1.0}, capacity, 0.0, total=True)["c"]
    # joining beside weights 2 + 1 with weight 1: a quarter of every type
    assert off == {"gres/gpu:v100": 2, "gres/gpu:k80": 1}
    assert on == {**off, TOTAL_KEY: 3}
