"""The displacement right of a tenant below its share (:mod:`slurm_fair.controller.standing`).

A waiting job of a tenant whose running jobs give it less than its equal share's value may have
opted-in jobs of tenants above theirs requeued before their ``min_run`` and between round
boundaries; never a job of a tenant that would fall below its own share's value, never a job
that did not opt in. The values are checked against an independent LP (scipy's linprog on the
textbook best-use LP), not against the module's own numbers.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
from hypothesis import event, given, settings, strategies as st
from hypo_profiles import scaled
from scipy.optimize import linprog

from slurm_fair.controller.plan import PlanInputs, make_plan
from slurm_fair.controller.standing import Standing, keeps, standing
from slurm_fair.model import Allocation, Job, Problem

from .builders import T0, cluster, job, snapshot
from .test_plan_diff import steering

JUST = T0 - timedelta(seconds=5)  # started 5 s ago: far from any min_run
PRE = {"requeue": True, "comment": "fair:preemptible"}


def run(jid, account, on="k80", gpus=1, started=JUST, **kw):
    return job(jid, account, gpus=gpus, state="RUNNING", running_on=on, started=started, **{**PRE, **kw})


def problem(snap, weights=None, tput=None):
    cap = snap.capacity()
    jobs = []
    for j in snap.gpu_jobs():
        t = dict((tput or {}).get(j.job_id, {k: 1.0 for k in cap}))
        jobs.append(Job(j.job_id, j.account, j.gpu_request.total, t))
    return Problem(cap, dict(weights or {}), tuple(jobs))


def lp_value(jobs: list[Job], bundle: dict[str, float]) -> float:
    """max sum_j sum_k n_jk z_jk, sum_j g_j z_jk <= b_k, sum_k z_jk <= 1 (independent of the code)."""
    types = sorted(bundle)
    nv = len(jobs) * len(types)
    if nv == 0:
        return 0.0
    c = np.zeros(nv)
    a, b = [], []
    for i, j in enumerate(jobs):
        best = max(j.throughput.values())
        for t, k in enumerate(types):
            c[i * len(types) + t] = -(j.throughput.get(k, 0.0) / best if best > 0 else 0.0)
        row = np.zeros(nv)
        row[i * len(types):(i + 1) * len(types)] = 1.0
        a.append(row), b.append(1.0)
    for t, k in enumerate(types):
        row = np.zeros(nv)
        for i, j in enumerate(jobs):
            row[i * len(types) + t] = j.gpus
        a.append(row), b.append(bundle[k])
    res = linprog(c, A_ub=np.array(a), b_ub=np.array(b), bounds=(0, None), method="highs")
    return -res.fun


def share_value(prob: Problem, u: str) -> float:
    total = sum(prob.weight(v) for v in prob.active_tenants)
    return lp_value(list(prob.jobs_of(u)), {k: prob.weight(u) / total * c for k, c in prob.gpu_types.items()})


def held_value(prob: Problem, running: dict[str, str], u: str) -> float:
    return sum(j.normalised(running[j.id]) for j in prob.jobs_of(u) if j.id in running)


def plan(snap, prob, placed, st, boundary=False, s=None):
    return make_plan(snap, prob, Allocation("test", {}),
                     PlanInputs(placed, {}, round_boundary=boundary, standing=st), s or steering(snap))


def running_of(snap):
    return {j.job_id: j.gpu_type_running for j in snap.gpu_jobs() if j.running}


# a holds the whole k80 node with four jobs that just started; b (same weight) waits with one
FULL = [run("A1", "a"), run("A2", "a"), run("A3", "a"), run("A4", "a")]


def test_a_tenant_below_its_share_displaces_a_young_job_of_a_tenant_above_it():
    snap = snapshot(cluster(k80=4), FULL + [job("P", "b")])
    prob = problem(snap)
    st = standing(prob, running_of(snap))
    assert st.below == {"b"}
    # independent: b holds 0 of a share worth 1 (2 k80 for 1 job); a holds 4 of a share worth 2
    assert share_value(prob, "b") == 1.0 and share_value(prob, "a") == 2.0
    assert abs(st.surplus["a"] - 2.0) < 1e-6
    placed = {"P": "k80", "A2": "k80", "A3": "k80", "A4": "k80"}
    got = plan(snap, prob, placed, st)
    assert len(got.requeue) == 1 and got.requeue_for[got.requeue[0]] == ("P",)
    # without the right (or with it off): the young jobs keep running until min_run
    assert plan(snap, prob, placed, Standing()).requeue == ()


def test_never_below_the_victims_own_share():
    # three tenants of weight 1 on 4 k80: each owed 4/3. a holds 3 (surplus 5/3: one job's worth),
    # c holds 1; b waits with two jobs: only one of a's jobs is requeued, and none of c's
    snap = snapshot(cluster(k80=4), [run("A1", "a"), run("A2", "a"), run("A3", "a"), run("C1", "c"),
                                     job("P1", "b"), job("P2", "b")])
    prob = problem(snap)
    st_ = standing(prob, running_of(snap))
    assert st_.below == {"b"} and set(st_.surplus) == {"a"}
    got = plan(snap, prob, {"P1": "k80", "P2": "k80"}, st_)
    assert len(got.requeue) == 1 and got.requeue[0].startswith("A")
    after = {j: k for j, k in running_of(snap).items() if j not in got.requeue}
    assert held_value(prob, after, "a") >= share_value(prob, "a") - 1e-9


def test_jobs_that_did_not_opt_in_are_never_displaced():
    snap = snapshot(cluster(k80=4), [run(f"A{i}", "a", requeue=False) for i in range(4)] + [job("P", "b")])
    prob = problem(snap)
    st = standing(prob, running_of(snap))
    assert plan(snap, prob, {"P": "k80"}, st).requeue == ()


def test_a_tenant_at_its_share_has_no_right():
    # b runs 4 jobs on its share of 4 k80 (worth 4 to its 5 jobs): not below, so a's young
    # jobs keep running although b's fifth job waits
    snap = snapshot(cluster(k80=8), [run(f"A{i}", "a") for i in range(4)]
                    + [run(f"B{i}", "b") for i in range(4)] + [job("P", "b")])
    prob = problem(snap)
    st_ = standing(prob, running_of(snap))
    assert share_value(prob, "b") == 4.0 and st_.below == frozenset()
    assert plan(snap, prob, {"P": "k80"}, st_).requeue == ()


def test_the_value_counts_not_the_gpus():
    # b holds one v100 job and one k80 job where k80 is worth a quarter: 1.25 of a share worth 2
    # (its share: 2 v100 + 2 k80 for 3 jobs), so it is below although it holds 2 GPUs of 4
    tput = {**{j: {"v100": 4.0, "k80": 1.0} for j in ("B1", "B2", "P")},
            **{j: {"v100": 1.0} for j in ("A1", "A2", "A3")}}
    snap = snapshot(cluster(k80=4, v100=4), [run("A1", "a", on="v100"), run("A2", "a", on="v100"),
                                             run("A3", "a", on="v100"), run("B1", "b", on="v100"),
                                             run("B2", "b", on="k80"), job("P", "b")])
    prob = problem(snap, tput=tput)
    st_ = standing(prob, running_of(snap))
    assert abs(share_value(prob, "b") - 2.0 - 0.25) < 1e-6  # 2 v100 + one k80 for the third job
    assert st_.below == {"b"}
    got = plan(snap, prob, {"P": "v100"}, st_)
    # a (v100 only) holds 3 v100 (value 3) of a share worth 2 (2 v100): surplus 1, one job
    assert len(got.requeue) == 1 and got.requeue[0].startswith("A")


@settings(max_examples=scaled(80), deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.booleans(), st.booleans(), st.sampled_from([1, 2])),
                min_size=1, max_size=10),
       st.dictionaries(st.sampled_from("abc"), st.sampled_from([1.0, 2.0, 3.0])),
       st.booleans())
def test_the_right_never_pushes_a_tenant_below_its_share_and_only_serves_tenants_below(spec, weights, boundary):
    """Whatever the jobs: every requeued job belongs to a tenant that, without all its requeued
    jobs, still holds at least its equal share's value (independent LP), and every taker it was
    requeued for belongs to a tenant below its share (independent LP)."""
    jobs, placed, node_free = [], {}, {"k80-1": 4, "k80-2": 4}
    for i, (u, running, pre, gpus) in enumerate(spec):
        jid = f"J{i}"
        if running:
            nd = next((n for n, f in node_free.items() if f >= gpus), None)
            if nd is None:
                continue
            node_free[nd] -= gpus
            jobs.append(job(jid, u, gpus=gpus, state="RUNNING", running_on="k80", started=JUST, on_node=nd,
                            **(PRE if pre else {})))
        else:
            jobs.append(job(jid, u, gpus=gpus))
            placed[jid] = "k80"
    snap = snapshot(cluster(k80=8), jobs)
    prob = problem(snap, weights)
    runs = running_of(snap)
    st_ = standing(prob, runs)
    got = plan(snap, prob, placed, st_, boundary=boundary)
    tenant = {j.id: j.tenant for j in prob.jobs}
    # what other tenants' jobs took from a tenant (a swap among its own jobs is its own to make)
    cross = {j for j in got.requeue if any(tenant[t] != tenant[j] for t in got.requeue_for[j])}
    after = {j: k for j, k in runs.items() if j not in cross}
    for v in {tenant[j] for j in got.requeue}:
        assert held_value(prob, after, v) >= share_value(prob, v) - 1e-6
    for j in got.requeue:
        for taker in got.requeue_for[j]:
            u = tenant[taker]
            assert held_value(prob, runs, u) < share_value(prob, u) - 1e-9



# --- no rotation away from a tenant not above its share -----------------------------------------

LONG = T0 - timedelta(hours=2)  # ran past any min_run: a round's rotation may stop it


def test_a_round_never_rotates_a_job_away_from_a_tenant_at_its_share_for_another_tenants_job():
    # a and b (weight 1) each hold their share of 4 k80 (2 jobs, worth 2); the round places
    # b's waiting job on A1's GPU: rotating A1 away would leave a below its share at once
    snap = snapshot(cluster(k80=4), [run("A1", "a", started=LONG), run("A2", "a", started=LONG),
                                     run("B1", "b", started=LONG), run("B2", "b", started=LONG), job("P", "b")])
    prob = problem(snap)
    st_ = standing(prob, running_of(snap))
    assert share_value(prob, "a") == 2.0 and not st_.above("a") and st_.below == frozenset()
    placed = {"P": "k80", "A2": "k80", "B1": "k80", "B2": "k80"}
    assert plan(snap, prob, placed, st_, boundary=True).requeue == ()
    # without the standing (displace off) the round rotates it, as before
    assert plan(snap, prob, placed, Standing(), boundary=True).requeue == ("A1",)
    # b's own job may still make room for P (same tenant: b's value is b's to share out)
    assert plan(snap, prob, {"P": "k80", "A1": "k80", "A2": "k80", "B2": "k80"}, st_, boundary=True).requeue == ("B1",)


def test_a_tenant_above_its_share_loses_one_job_to_rotation_even_a_gang_worth_more_than_its_surplus():
    # a's 4-GPU gang holds the k80 node; a's share (2 of 4 GPUs) is worth half the gang to it, so
    # its surplus (0.5) is less than the gang's value (1): the displacement right could not take
    # it, the round's rotation may (a gang cannot be split), once
    snap = snapshot(cluster(k80=4), [run("G", "a", gpus=4, started=LONG), job("P", "b", gpus=4)])
    prob = problem(snap)
    st_ = standing(prob, running_of(snap))
    assert abs(share_value(prob, "a") - 0.5) < 1e-9 and abs(st_.surplus["a"] - 0.5) < 1e-6
    assert plan(snap, prob, {"P": "k80"}, st_, boundary=True).requeue == ("G",)


def test_the_rotation_spends_the_surplus_once():
    # a holds 3 of 4 k80 (share worth 2: surplus 1); b's two waiting jobs are placed on a's GPUs:
    # one of a's jobs is rotated away, not two
    snap = snapshot(cluster(k80=4), [run("A1", "a", started=LONG), run("A2", "a", started=LONG),
                                     run("A3", "a", started=LONG), run("B1", "b", started=LONG),
                                     job("P1", "b"), job("P2", "b")])
    prob = problem(snap)
    st_ = standing(prob, running_of(snap))
    got = plan(snap, prob, {"P1": "k80", "P2": "k80", "A3": "k80", "B1": "k80"}, st_, boundary=True)
    assert len(got.requeue) == 1 and got.requeue[0] in ("A1", "A2")


def test_keeps_only_tenants_not_above_their_share_with_nothing_of_their_own_waiting():
    snap = snapshot(cluster(k80=4), [run("A1", "a", started=LONG), run("A2", "a", started=LONG),
                                     run("A3", "a", started=LONG), run("B1", "b", started=LONG),
                                     job("P", "b"), job("Q", "c")])
    prob = problem(snap)
    st_ = standing(prob, running_of(snap))
    # shares of 4/3 GPUs: a holds 3 (above), b holds 1 and waits, c holds nothing and waits
    assert st_.above("a") and not keeps(st_, "a")
    assert not keeps(st_, "b") and not keeps(st_, "c")
    snap2 = snapshot(cluster(k80=4), [run("A1", "a", started=LONG), run("B1", "b", started=LONG), job("P", "b")])
    st2 = standing(problem(snap2), running_of(snap2))
    assert keeps(st2, "a") and not keeps(st2, "b") and not keeps(Standing(), "a")


def test_value_not_gpus_decides_who_is_above_its_share():
    # a's four jobs hold the whole k80 node. When they can run only there (their user asked for
    # k80: the problem knows them on k80 alone) a holds twice its share's value and b's k80 job
    # may have one rotated away; when a's share of v100s would serve them four times better, a
    # is below its share in value although it holds 4 k80 of its 2: nothing of a's is rotated
    only_k80 = {**{f"A{i}": {"k80": 1.0} for i in range(4)}, "P": {"k80": 1.0}}
    snap = snapshot(cluster(k80=4, v100=4), [run(f"A{i}", "a", started=LONG) for i in range(4)] + [job("P", "b")])
    placed = {"P": "k80", "A1": "k80", "A2": "k80", "A3": "k80"}
    prob = problem(snap, tput=only_k80)
    st_ = standing(prob, running_of(snap))
    assert st_.above("a") and abs(st_.surplus["a"] - 2.0) < 1e-6 and share_value(prob, "a") == 2.0
    got = plan(snap, prob, placed, st_, boundary=True)
    assert got.requeue == ("A0",) and got.requeue_for["A0"] == ("P",)
    faster = {**{f"A{i}": {"v100": 4.0, "k80": 1.0} for i in range(4)}, "P": {"k80": 1.0}}
    prob = problem(snap, tput=faster)
    st_ = standing(prob, running_of(snap))
    assert not st_.above("a") and held_value(prob, running_of(snap), "a") < share_value(prob, "a")
    assert plan(snap, prob, placed, st_, boundary=True).requeue == ()


def test_a_one_gpu_job_is_not_rotated_away_beyond_its_tenants_surplus():
    # make demo: physics (weight 2) held one V100 beyond its share of V100s but few P100s, a
    # surplus of less than one job's value; a job of another tenant took that V100 at a round
    # and physics fell below its share. a (weight 2) here: 4 v100 jobs + 1 p100 job, its share
    # 8/3 v100 + 8/3 p100 (worth 8/3 + 7/3 x 0.8 to its five jobs)
    tput = {**{f"A{i}": {"v100": 1.0, "p100": 0.8} for i in range(5)}, "P": {"v100": 1.0}}
    snap = snapshot(cluster(v100=4, p100=4), [run(f"A{i}", "a", on="v100", started=LONG) for i in range(4)]
                    + [run("A4", "a", on="p100", started=LONG), job("P", "b")])
    prob = problem(snap, weights={"a": 2.0}, tput=tput)
    st_ = standing(prob, running_of(snap))
    owed = 8 / 3 + 7 / 3 * 0.8
    assert abs(share_value(prob, "a") - owed) < 1e-6 and abs(st_.surplus["a"] - (4.8 - owed)) < 1e-6
    placed = {"P": "v100", "A1": "v100", "A2": "v100", "A3": "v100", "A4": "p100"}
    assert plan(snap, prob, placed, st_, boundary=True).requeue == ()
    assert plan(snap, prob, placed, Standing(), boundary=True).requeue == ("A0",)


def test_the_rounding_keeps_the_running_jobs_of_a_tenant_at_its_share_with_nothing_waiting():
    from slurm_fair.controller.decide import staying
    from slurm_fair.controller.problem import BuiltProblem

    # a holds its share (2 of 4 k80) with nothing waiting: both jobs stay whatever the round;
    # b (3 jobs on 2 GPUs, one waiting) may rotate its own
    snap = snapshot(cluster(k80=4), [run("A1", "a", started=LONG), run("A2", "a", started=LONG),
                                     run("B1", "b", started=LONG), run("B2", "b", started=LONG), job("P", "b")])
    prob = problem(snap)
    built = BuiltProblem(prob, {}, {}, {}, {})
    st_ = standing(prob, running_of(snap))
    assert staying(snap, built, 60.0, {}, st_) == {"A1": "k80", "A2": "k80"}
    assert staying(snap, built, 60.0, {}, Standing()) == {}
    assert staying(snap, built, 60.0, {}) == {}


@settings(max_examples=scaled(80), deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.booleans(), st.sampled_from([1, 2, 4])), min_size=1, max_size=10),
       st.dictionaries(st.sampled_from("abc"), st.sampled_from([1.0, 2.0, 3.0])))
def test_a_rounds_rotation_takes_another_tenants_job_only_from_its_surplus(spec, weights):
    """Whatever the jobs, at a round boundary with every running job past min_run and the round
    placing every waiting job: a tenant that loses a job to another tenant's either keeps at
    least its equal share's value (independent LP), or lost a gang larger than its equal share of
    the type, and then only out of a surplus it had; a job taken beside such a gang was within the
    surplus (the tenant keeps its share's value had the gang stayed)."""
    jobs, placed, node_free = [], {}, {"k80-1": 4, "k80-2": 4}
    for i, (u, running, gpus) in enumerate(spec):
        jid = f"J{i}"
        if running:
            nd = next((n for n, f in node_free.items() if f >= gpus), None)
            if nd is None:
                continue
            node_free[nd] -= gpus
            jobs.append(job(jid, u, gpus=gpus, state="RUNNING", running_on="k80", started=LONG, on_node=nd, **PRE))
        else:
            jobs.append(job(jid, u, gpus=gpus))
            placed[jid] = "k80"
    snap = snapshot(cluster(k80=8), jobs)
    prob = problem(snap, weights)
    runs = running_of(snap)
    st_ = standing(prob, runs)
    got = plan(snap, prob, placed, st_, boundary=True)
    tenant = {j.id: j.tenant for j in prob.jobs}
    # what other tenants' jobs took from a tenant (a swap among its own jobs is its own to make)
    cross = {j for j in got.requeue if any(tenant[t] != tenant[j] for t in got.requeue_for[j])}
    after = {j: k for j, k in runs.items() if j not in cross}
    gpus = {j.id: j.gpus for j in prob.jobs}
    total_w = sum(prob.weight(v) for v in prob.active_tenants)
    for j in got.requeue:
        v = tenant[j]
        event("cross" if any(tenant[t] != v for t in got.requeue_for[j]) else "own")
        if all(tenant[t] == v for t in got.requeue_for[j]):
            continue  # its own tenant's job: the tenant's value is its own to share out
        if held_value(prob, after, v) >= share_value(prob, v) - 1e-6:
            continue
        oversize = {g for g in cross if tenant[g] == v and gpus[g] > prob.weight(v) / total_w * 8 + 1e-9}
        assert held_value(prob, runs, v) > share_value(prob, v) + 1e-9, (j, v)  # it had a surplus
        if j in oversize:
            continue  # a gang larger than its share of the type: it may go while any surplus is left
        # any other job only within the surplus: below its share only by an oversize gang also taken
        assert oversize, (j, v)
        kept = {**after, **{g: runs[g] for g in oversize}}
        assert held_value(prob, kept, v) >= share_value(prob, v) - 1e-6, (j, v)


def test_a_turn_given_by_requeuing_a_tenants_jobs_is_not_taken_back_by_that_tenant_within_min_run():
    """The thrash seen on the testbed: a round rotated b's jobs away on the k80 node (a gang of
    b larger than its share may go while b has any surplus) so that a's 4-GPU gang got its turn;
    b, now below its share, used the displacement right at once and requeued that gang after 194
    trace seconds (then again after 53 s), two requeues for a job a few minutes from its end.
    The tenant whose jobs were requeued for a turn cannot take it back before ``min_run``; a
    third tenant below its share still can, and so can b once ``min_run`` has passed."""
    gang = run("G", "a", gpus=4, started=T0 - timedelta(seconds=5))
    ones = [run(f"A{i}", "a", on="v100", started=T0 - timedelta(hours=1)) for i in range(4)]  # a's surplus
    snap = snapshot(cluster(k80=4, v100=4), [gang, *ones, job("B1", "b", gpus=4, **PRE)])
    prob = problem(snap)
    st = standing(prob, running_of(snap))
    assert st.below == {"b"} and st.surplus.get("a", 0.0) > 0
    placed = {"B1": "k80"}

    def requeued(turn_at):
        inputs = PlanInputs(placed, {}, standing=st, turns={"G": (turn_at, ("B1",))})
        return make_plan(snap, prob, Allocation("test", {}), inputs, steering(snap)).requeue

    min_run = steering(snap).min_run
    just = T0.timestamp() - 6  # B1 was requeued for G 6 s ago, G started a second later
    assert requeued(just) == ()
    assert plan(snap, prob, placed, st).requeue == ("G",)  # no turn recorded: the right as before
    # a gang running since before the requeue did not get its turn from it
    old = snapshot(cluster(k80=4, v100=4), [run("G", "a", gpus=4, started=T0 - timedelta(seconds=600)), *ones,
                                            job("B1", "b", gpus=4, **PRE)])
    st_old = standing(problem(old), running_of(old))
    inputs = PlanInputs(placed, {}, standing=st_old, turns={"G": (just, ("B1",))})
    assert make_plan(old, problem(old), Allocation("test", {}), inputs, steering(old)).requeue == ("G",)
    # a third tenant below its share still may displace it
    snap3 = snapshot(cluster(k80=4, v100=4), [gang, *ones, job("B1", "b", gpus=4, **PRE), job("C1", "c", gpus=4)])
    prob3 = problem(snap3)
    st3 = standing(prob3, running_of(snap3))
    assert {"b", "c"} <= st3.below
    inputs = PlanInputs({"C1": "k80"}, {}, standing=st3, turns={"G": (just, ("B1",))})
    got = make_plan(snap3, prob3, Allocation("test", {}), inputs, steering(snap3))
    assert got.requeue == ("G",) and got.requeue_for["G"] == ("C1",)
    # after min_run the turn is over
    assert requeued(T0.timestamp() - min_run - 1) == ("G",)


def test_the_store_remembers_each_jobs_latest_turn(tmp_path):
    """:meth:`StateStore.turns`: the newest make-room requeue naming a job gives its turn (all
    the jobs requeued for it at that time); a move up gives nobody a turn."""
    from slurm_fair.controller.history import read_history
    from slurm_fair.controller.state import StateStore

    with StateStore(tmp_path / "s.sqlite") as store:
        store.record_requeue("1", "c1", 10.0, "k80", ["G"])
        store.record_requeue("2", "c2", 50.0, "k80", ["G", "H"])
        store.record_requeue("3", "c2", 50.0, "k80", ["G"])
        store.record_requeue("4", "c3", 60.0, "k80", reason="move-up", to_type="v100")
        assert store.turns() == {"G": (50.0, ("2", "3")), "H": (50.0, ("2",))}
        assert read_history(store, "oef").turns == store.turns()
