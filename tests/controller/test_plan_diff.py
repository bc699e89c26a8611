"""Phases 5 and 6a: plan and diff on scenario tables; ownership, scope and order invariants."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings, strategies as st
from hypo_profiles import scaled

from slurm_fair.controller.diff import diff, give_backs
from slurm_fair.controller.legacy import legacy_actions
from slurm_fair.controller.ownership import reconcile
from slurm_fair.controller.plan import PlanInputs, make_plan
from slurm_fair.controller.plan.order import natural, site_factors
from slurm_fair.controller.plan.types import JobPlan, PlanSettings
from slurm_fair.controller.scope import Scope, read_pilot
from slurm_fair.controller.state.fields import Owned
from slurm_fair.controller.state.originals import ManagedQos
from slurm_fair.controller.steer import partition_types, type_partition_lists
from slurm_fair.model import Allocation, Job, Problem
from slurm_fair.slurm.model import Account, Partition, Qos

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


def steering(snap, partitions=(), **kw):
    """PlanSettings with the partition maps of the snapshot (what the cycle passes)."""
    return PlanSettings(ptypes=partition_types(snap.nodes), type_partitions=type_partition_lists(snap.nodes),
                        partitions={p.name: p for p in partitions}, **kw)


def plan_for(snap, x, placed, deficit=None, fixed=None, s=None, boundary=False, owned=None, scope=None):
    prob = problem_of(snap)
    s = s or steering(snap)
    pilot = read_pilot(snap, owned or {}, scope or Scope())
    inputs = PlanInputs(placed, deficit or {}, fixed or {}, pilot.asked.partitions, round_boundary=boundary,
                        asked_nodes=pilot.asked.nodes, choices=pilot.asked.choices, owned=pilot.owned,
                        released=pilot.released)
    return make_plan(snap, prob, Allocation("test", x), inputs, s)


def test_scenario_two_tenants_get_typed_and_ordered_without_any_qos():
    snap = snapshot(cluster(v100=4, k80=4), [
        job("1", "alice", priority=900), job("2", "alice", priority=1000), job("3", "bob", gpus=2, priority=950),
    ])
    x = {"1": {"v100": 1.0}, "2": {"k80": 0.5}, "3": {"v100": 0.5, "k80": 0.5}}
    plan = plan_for(snap, x, {"1": "v100", "3": "k80"}, {"1": 2.0, "3": 1.0, "2": 0.5})
    assert {j: p.planned_type for j, p in plan.jobs.items()} == {"1": "v100", "2": "k80", "3": "k80"}
    # steered by partition (reversible), the requests stay as the users wrote them
    assert {j: p.partition for j, p in plan.jobs.items()} == {"1": "v100", "2": "k80", "3": "k80"}
    assert all(p.gpu_type is None for p in plan.jobs.values())
    assert [plan.jobs[j].rank for j in ("1", "3", "2")] == [1, 2, 3]
    # this round's jobs keep their priority; job 2 (k80, not placed, above job 3) is pushed
    # just behind job 3; nobody is pushed up
    assert plan.jobs["1"].site_factor == 0 and plan.jobs["3"].site_factor == 0
    assert 1000 + plan.jobs["2"].site_factor < 950
    assert dict(plan.tenants["alice"].bundle) == {"v100": 1.0, "k80": 0.5}
    kinds = {a.kind for a in diff(plan, snap)}
    assert kinds == {"set_partition", "set_site_factor"}  # no QOS, no nice, no priority


def test_user_typed_job_is_never_retyped():
    snap = snapshot(cluster(v100=4, k80=4), [job("1", "alice", gpu_type="k80")])
    plan = plan_for(snap, {"1": {"k80": 1.0}}, {"1": "k80"}, fixed={"1": "k80"})
    assert plan.jobs["1"].gpu_type is None and plan.jobs["1"].partition is None
    assert plan.jobs["1"].planned_type == "k80"
    assert not [a for a in diff(plan, snap) if a.kind in ("set_gpu_type", "set_partition")]


def test_pin_gres_mode_rewrites_the_request_instead_of_the_partition():
    snap = snapshot(cluster(v100=4, k80=4), [job("1", "alice")])
    plan = plan_for(snap, {"1": {"k80": 1.0}}, {"1": "k80"}, s=steering(snap, pin_gres=True))
    assert (plan.jobs["1"].gpu_type, plan.jobs["1"].partition) == ("k80", "gpu")
    assert [a.kind for a in diff(plan, snap) if a.job] == ["set_gpu_type"]


def test_type_without_its_own_partition_is_not_steered_and_reported():
    snap = snapshot(cluster(type_partitions=False, v100=4, k80=4), [job("1", "alice")])
    plan = plan_for(snap, {"1": {"k80": 1.0}}, {"1": "k80"})
    assert plan.jobs["1"].partition == "gpu" and plan.unsteered == {"1": "k80"}
    assert not [a for a in diff(plan, snap) if a.kind in ("set_gpu_type", "set_partition")]


def test_job_in_a_type_partition_keeps_it_while_allocated_there():
    snap = snapshot(cluster(v100=4, k80=4), [job("1", "a", partition="k80")])
    plan = plan_for(snap, {"1": {"v100": 0.6, "k80": 0.4}}, {})
    assert plan.jobs["1"].partition == "k80"


def test_order_none_writes_no_site_factor():
    snap = snapshot(cluster(v100=4), [job(str(i), "a", priority=1000 + i) for i in range(1, 4)])
    plan = plan_for(snap, {}, {"1": "v100"}, s=steering(snap, order="none"))
    assert all(p.site_factor is None for p in plan.jobs.values())
    assert not [a for a in diff(plan, snap) if a.kind == "set_site_factor"]


USER_CHOICES = {
    "several partitions": dict(partition="v100,k80"),
    "nodes": dict(req_nodes=("k80-1",)),
    "exclude": dict(exc_nodes=("v100-1",)),
    "reservation": dict(reservation="maint"),
    "features": dict(features="nvlink"),
    "held": dict(reason="JobHeldUser"),
    "dependency": dict(reason="Dependency", dependency="afterok:7"),
}


def test_a_users_choice_of_where_to_run_is_never_narrowed():
    """-p a,b, -w, -x, --reservation, -C, a hold or a dependency: neither partition, request nor
    node list is written, whatever the allocation wants."""
    snap = snapshot(cluster(v100=4, k80=4), [job(name, "a", **kw) for name, kw in USER_CHOICES.items()])
    x = {j.job_id: {"v100": 1.0} for j in snap.jobs}
    plan = plan_for(snap, x, {j.job_id: "v100" for j in snap.jobs})
    for a in diff(plan, snap):
        assert a.kind == "set_site_factor", (a.job, a.kind)
    for j in snap.jobs:
        assert plan.jobs[j.job_id].partition is None and plan.jobs[j.job_id].nodes is None


def test_partition_rules_decide_the_steering_targets():
    nodes = cluster(v100=4, p100=4, k80=4)
    rules = [Partition("gpu", tuple(n.name for n in nodes), priority_tier=1),
             Partition("v100", ("v100-1",), allow_accounts=frozenset({"other"})),  # not for account a
             Partition("p100", ("p100-1",), max_time_min=60),  # the job asks for 2 h
             Partition("k80", ("k80-1",), priority_tier=5)]  # would jump the queue: never
    snap = snapshot(nodes, [job("1", "a", time_limit_min=120)])
    s = steering(snap, partitions=rules)
    for k in ("v100", "p100", "k80"):
        plan = plan_for(snap, {"1": {k: 1.0}}, {"1": k}, s=s)
        assert plan.jobs["1"].partition == "gpu" and plan.unsteered == {"1": k}
    ok = [replace(r, allow_accounts=None, max_time_min=None, priority_tier=1) for r in rules]
    plan = plan_for(snap, {"1": {"k80": 1.0}}, {"1": "k80"}, s=steering(snap, partitions=ok))
    assert plan.jobs["1"].partition == "k80"


def test_a_field_someone_changed_is_released_and_never_written_again():
    owned = {("1", "partition"): Owned("1", "partition", "a", "gpu", written="v100")}
    # the user moved it to k80 after the controller moved it to v100
    snap = snapshot(cluster(v100=4, k80=4), [job("1", "a", partition="k80")])
    reading = reconcile(owned, {j.job_id: j for j in snap.jobs}, 0.0)
    assert reading.newly_released == {("1", "partition")} and reading.updates[("1", "partition")].released
    released = {k: replace(r, released=True) for k, r in owned.items()}
    plan = plan_for(snap, {"1": {"v100": 1.0}}, {"1": "v100"}, owned=released)
    assert plan.jobs["1"].partition is None
    assert not [a for a in diff(plan, snap, released, {}) if a.kind == "set_partition"]
    assert give_backs(snap, released, reconcile(released, {"1": snap.jobs[0]}, 0.0).ours) == []
    # the controller's own value is confirmed, not released
    assert not reconcile(owned, {"1": replace(snap.jobs[0], partition="v100")}, 0.0).newly_released


def test_intents_are_settled_from_what_slurm_shows():
    j = job("1", "a", partition="v100")
    row = Owned("1", "partition", "a", "gpu", written=None, intent="v100")
    got = reconcile({("1", "partition"): row}, {"1": j}, 0.0).updates[("1", "partition")]
    assert got == replace(row, written="v100", intent=None)
    # never written: the row goes (the field holds its original)
    r = reconcile({("1", "partition"): row}, {"1": replace(j, partition="gpu")}, 0.0)
    assert ("1", "partition") in r.ended and not r.ours
    # something else: someone changed it
    r = reconcile({("1", "partition"): row}, {"1": replace(j, partition="k80")}, 0.0)
    assert r.newly_released == {("1", "partition")}
    # a job that ended: forgotten
    assert reconcile({("1", "partition"): row}, {}, 0.0).ended == {("1", "partition")}


def test_a_write_in_doubt_is_ours_when_it_lands_until_its_doubt_ends():
    """A write that timed out (doubt v100 until t=100) may land late, even after later writes."""
    j = job("1", "a", partition="gpu")
    key = ("1", "partition")
    row = Owned("1", "partition", "a", "gpu", doubt="v100", doubt_until=100.0)
    # not landed yet: the row stays, holding nothing (not forgotten as "never written")
    r = reconcile({key: row}, {"1": j}, 50.0)
    assert key not in r.ended and not r.ours and not r.newly_released
    # landed: the controller's own write, to be given back
    r = reconcile({key: row}, {"1": replace(j, partition="v100")}, 50.0)
    assert r.ours == {key: "v100"} and r.updates[key].written == "v100" and not r.newly_released
    # landed after a later write of another value (p100) was confirmed: still ours
    later = replace(row, written="p100")
    r = reconcile({key: later}, {"1": replace(j, partition="v100")}, 50.0)
    assert r.ours == {key: "v100"} and not r.newly_released
    # given back by the controller meanwhile (nothing written; the field holds its original):
    # kept past the doubt too, holding nothing, until the job ends (issue 40: a write landing
    # later still is matched by its value)
    r = reconcile({key: row}, {"1": j}, 100.0)
    assert key not in r.ended and not r.ours and not r.newly_released
    assert key in reconcile({key: row}, {}, 100.0).ended
    # past its end, the doubted value landing is still the controller's (a late write)
    r = reconcile({key: later}, {"1": replace(j, partition="v100")}, 100.0)
    assert r.ours == {key: "v100"} and not r.newly_released and r.updates[key].doubt is None
    # past its end, any other value is someone else's
    assert reconcile({key: later}, {"1": replace(j, partition="k80")}, 100.0).newly_released == {key}
    # someone else's value during the doubt: released, as without one
    assert reconcile({key: row}, {"1": replace(j, partition="k80")}, 50.0).newly_released == {key}
    # a give-back that timed out (its doubt is the original): the field back at it is the site's
    back = Owned("1", "partition", "a", "gpu", written="v100", doubt="gpu", doubt_until=100.0)
    assert key in reconcile({key: back}, {"1": j}, 50.0).ended


def test_a_job_the_plan_drops_gets_its_fields_back():
    snap = snapshot(cluster(v100=4, k80=4), [job("1", "a", partition="v100", site_factor=-64)])
    owned = {("1", "partition"): Owned("1", "partition", "a", "gpu", written="v100"),
             ("1", "site_factor"): Owned("1", "site_factor", "a", "0", written="-64")}
    ours = reconcile(owned, {"1": snap.jobs[0]}, 0.0).ours
    from slurm_fair.controller.plan.types import Plan
    acts = diff(Plan({}, {}), snap, owned, ours)
    assert {(a.kind, a.after, a.params["give_back"]) for a in acts} == {
        ("set_partition", "gpu", True), ("set_site_factor", 0, True)}


def test_pilot_plans_only_its_jobs_and_subtracts_outsiders_gpus():
    snap = snapshot(cluster(v100=8, k80=4), [
        job("mine", "a"), job("theirs", "b"),
        job("run", "b", state="RUNNING", running_on="v100", gpus=4),  # an outsider holds v100-1
    ])
    pilot = read_pilot(snap, {}, Scope.of(["a"]))
    assert [j.job_id for j in pilot.view.snapshot.jobs] == ["mine"]
    assert pilot.view.foreign == {"v100-1": {"v100": 4}}
    from slurm_fair.controller.problem import build_problem
    from slurm_fair.controller.history import History
    from slurm_fair.estimates.estimate import Estimate
    est = {"mine": Estimate("mine", {"v100": 1.0, "k80": 1.0}, {"v100": "flat", "k80": "flat"})}
    built = build_problem(pilot.view.snapshot, est, History(), {}, partition_types(snap.nodes), False, pilot.asked)
    assert dict(built.problem.gpu_types) == {"v100": 4, "k80": 4}
    # a partition outside the pilot is no target and its jobs are outside
    p = read_pilot(snapshot(cluster(v100=4, k80=4), [job("1", "a"), job("2", "a", partition="k80")]),
                   {}, Scope.of((), ["gpu", "v100"]))
    assert [j.job_id for j in p.view.snapshot.jobs] == ["1"]
    assert all("k80" not in n.partitions for n in p.view.snapshot.nodes)


def test_legacy_qos_is_given_back_in_an_order_that_strands_nobody():
    """A store of 0.1: fair_a made by it, the account's default; a job that got it as its
    default (no record) and one moved into it (a record)."""
    snap = snapshot(cluster(v100=4), [job("1", "a", qos="fair_a"), job("2", "a", qos="fair_a"),
                                      job("3", "a", qos="fair_a", state="RUNNING", running_on="v100")],
                    accounts=[Account("a", 1.0, ("normal", "fair_a"), "fair_a")],
                    qos=[Qos("normal"), Qos("fair_a", {"gres/gpu:v100": 1})])
    managed = {"fair_a": ManagedQos("fair_a", "a", False, False, "normal", {})}
    owned = {("1", "qos"): Owned("1", "qos", "a", "normal", legacy=True)}
    ours = reconcile(owned, {j.job_id: j for j in snap.jobs}, 0.0).ours
    acts = sorted(give_backs(snap, owned, ours) + legacy_actions(snap, managed, owned),
                  key=lambda a: __import__("slurm_fair.controller.diff", fromlist=["order"]).order(a))
    kinds = [(a.kind, a.job) for a in acts]
    assert kinds[0] == ("restore_default_qos", "")
    assert {k for k in kinds[1:3]} == {("set_job_qos", "1"), ("set_job_qos", "2")}
    assert [k for k, _ in kinds[3:]] == ["detach_qos", "clear_qos_limits", "delete_qos"]
    # the running job still carries it: the delete is kept back for a later cycle
    assert acts[-1].params["running"] == ["3"]


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
@given(st.lists(st.tuples(st.integers(0, 10**6), st.booleans(), st.sampled_from(["v100", "k80"]),
                          st.integers(-4096, 0)), min_size=1, max_size=12))
def test_site_factors_only_push_down_and_put_unplaced_competitors_behind(rows):
    """Independent of the plan's code path: for random priorities, placements and existing
    pushes, no job ever gets a factor above the one it had before the controller, and every
    unplaced job ends strictly below the lowest placed job of its type."""
    jobs, plans, owned = {}, {}, {}
    for i, (prio, placed, k, pushed) in enumerate(rows):
        jid = str(i)
        jobs[jid] = job(jid, "a", priority=prio + pushed, site_factor=pushed)
        owned[(jid, "site_factor")] = Owned(jid, "site_factor", "a", "0", written=str(pushed))
        plans[jid] = JobPlan(jid, "a", None, i + 1, placed, planned_type=k)
    out = site_factors(plans, jobs, owned, {j: ("v100", "k80") for j in jobs})
    own = {j: natural(jobs[j], owned[(j, "site_factor")]) for j in jobs}
    for f in out.values():
        assert f <= 0  # never above the job's own factor (0)
    for k in ("v100", "k80"):
        placed = [own[j] for j, p in plans.items() if p.placed and p.planned_type == k]
        if not placed:
            continue
        for j, p in plans.items():
            if not p.placed and p.planned_type == k:
                assert own[j] + out[j] < min(placed)


def test_a_site_factor_slurm_does_not_show_keeps_its_push_and_writes_nothing():
    """sprio did not answer this cycle (site factors unknown): the push recorded stays planned and
    nothing is written; a job without a push gets none. Before, the empty plan field gave every
    push back, and the next cycle that read sprio pushed them again."""
    snap = snapshot(cluster(v100=4), [job("1", "a", priority=1000), job("2", "a", priority=2000, site_factor=None),
                                      job("3", "a", priority=3000, site_factor=None)])
    owned = {("2", "site_factor"): Owned("2", "site_factor", "a", "0", written="-2048")}
    plan = plan_for(snap, {}, {"1": "v100"}, owned=owned)
    assert plan.jobs["2"].site_factor == -2048 and plan.jobs["3"].site_factor is None
    ours = reconcile(owned, {j.job_id: j for j in snap.jobs}, 0.0).ours
    assert not [a for a in diff(plan, snap, owned, ours) if a.kind == "set_site_factor"]
    # order = "none" still gives the push back
    plan = plan_for(snap, {}, {"1": "v100"}, owned=owned, s=steering(snap, order="none"))
    assert [(a.job, a.after) for a in diff(plan, snap, owned, ours) if a.kind == "set_site_factor"] == [("2", 0)]
