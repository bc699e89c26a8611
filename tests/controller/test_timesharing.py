"""Time-sharing: when a running opted-in job is requeued at a round boundary (:mod:`slurm_fair.controller.requeue`).

The rule (docs/controller.md, "Time-sharing"): only when the round's placement does not run it
on the type it holds, a pending job that the placement runs on that type and that this cycle
sends there cannot start without its GPUs, and it has run at least the minimum run time.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypo_profiles import scaled

from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.diff import diff
from slurm_fair.controller.plan import PlanInputs, make_plan
from slurm_fair.controller.plan.jobs import sent_to
from slurm_fair.model import Allocation

from .builders import T0, cluster, job, node, snapshot
from .conftest import make_config
from .test_plan_diff import problem_of, steering

OLD = T0 - timedelta(hours=1)
PRE = {"requeue": True, "comment": "fair:preemptible"}


def run(jid, account="a", on="k80", gpus=1, started=OLD, node=None, **kw):
    """A running opted-in job."""
    return job(jid, account, gpus=gpus, state="RUNNING", running_on=on, started=started, on_node=node,
               **{**PRE, **kw})


def requeues(snap, placed, *, boundary=True, s=None, last=None, deficit=None, x=None, attained=None):
    prob = problem_of(snap, attained=attained)
    s = s or steering(snap)
    plan = make_plan(snap, prob, Allocation("test", x or {}),
                     PlanInputs(placed, deficit or {}, last_requeued=last or {}, round_boundary=boundary), s)
    return plan


# --- scenario table ------------------------------------------------------------------------------
K80_FULL = [run("A"), run("B"), run("C"), run("D")]  # one 4-GPU k80 node, full
SCENARIOS = [
    # (name, jobs, placement, expected requeues)
    ("the k80->k80 loop: planned on the type it runs on, never requeued",
     K80_FULL + [job("P", "b")], {"A": "k80", "B": "k80", "C": "k80", "D": "k80", "P": "k80"}, ()),
    ("not placed but nobody pending: keeps running (work-conserving)",
     K80_FULL, {}, ()),
    ("a pending job placed on another type does not need k80 GPUs",
     K80_FULL + [job("P", "b")], {"P": "v100"}, ()),
    ("a pending job placed on k80 but not this round's: no taker",
     K80_FULL + [job("P", "b")], {"B": "k80", "C": "k80", "D": "k80"}, ()),
    ("a pending job placed on k80 that fits in the free GPUs",
     K80_FULL[:3] + [job("P", "b")], {"P": "k80"}, ()),
    ("a held pending job cannot take the GPUs",
     K80_FULL + [job("P", "b", reason="JobHeldUser")], {"P": "k80", "B": "k80", "C": "k80", "D": "k80"}, ()),
    ("a requeued job still in Slurm's hold cannot take the GPUs",
     K80_FULL + [job("P", "b", reason="BeginTime")], {"P": "k80", "B": "k80", "C": "k80", "D": "k80"}, ()),
    ("a taker on k80 that cannot fit even after the requeue: nothing requeued",
     K80_FULL + [job("P", "b", gpus=4)], {"P": "k80", "B": "k80", "C": "k80", "D": "k80"}, ()),
    ("one taker on a full k80 node: exactly the one job the placement left out",
     K80_FULL + [job("P", "b")], {"P": "k80", "B": "k80", "C": "k80", "D": "k80"}, ("A",)),
    ("one 1-GPU taker, several left out: only one is requeued",
     K80_FULL + [job("P", "b")], {"P": "k80", "C": "k80", "D": "k80"}, ("A",)),
    ("a 2-GPU taker: two requeued, not more",
     K80_FULL + [job("P", "b", gpus=2)], {"P": "k80", "D": "k80"}, ("A", "B")),
    ("a running job that did not opt in is never requeued",
     [run("A", requeue=False), run("B"), run("C"), run("D")] + [job("P", "b")],
     {"P": "k80", "C": "k80", "D": "k80"}, ("B",)),
    ("placed on another type (migration) and its k80 GPU is needed: requeued",
     K80_FULL + [job("P", "b")], {"A": "v100", "P": "k80", "B": "k80", "C": "k80", "D": "k80"}, ("A",)),
]


@pytest.mark.parametrize("name,jobs,placed,want", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_requeue_scenarios(name, jobs, placed, want):
    snap = snapshot(cluster(v100=4, k80=4), jobs)
    plan = requeues(snap, placed)
    assert plan.requeue == want, name
    for j in want:  # and the taker is named
        assert plan.requeue_for[j] == ("P",)


def test_not_requeued_when_the_taker_cannot_be_steered_to_the_type():
    # no partition of k80 alone: the pending job cannot be sent there, so it would not take the GPU
    snap = snapshot(cluster(type_partitions=False, v100=4, k80=4), K80_FULL + [job("P", "b")])
    plan = requeues(snap, {"P": "k80", "B": "k80", "C": "k80", "D": "k80"})
    assert plan.unsteered == {"P": "k80"} and plan.requeue == ()


def test_between_round_boundaries_only_a_job_that_never_ran_is_let_in():
    snap = snapshot(cluster(v100=4, k80=4), K80_FULL + [job("P", "b")])
    placed = {"P": "k80", "B": "k80", "C": "k80", "D": "k80"}
    # P is new: admitted at once, it does not wait for the round
    assert requeues(snap, placed, boundary=False).requeue == ("A",)
    # P already ran (it was requeued earlier): time-sharing waits for the round boundary
    assert requeues(snap, placed, boundary=False, attained={"P": 600.0}).requeue == ()
    assert requeues(snap, placed, boundary=True, attained={"P": 600.0}).requeue == ("A",)


@pytest.mark.parametrize("ran_s,last_requeued_ago,min_run_s,want", [
    # the default minimum: a round (360 s), or 3x the requeue cost (150 s) when longer
    (449, None, None, ()),
    (450, None, None, ("A",)),
    (3600, 100, None, ()),      # started long ago, but we requeued it 100 s ago (restart not seen yet)
    (3600, 460, None, ("A",)),
    (900, None, 1200, ()),      # a configured minimum
    (1200, None, 1200, ("A",)),
])
def test_hysteresis(ran_s, last_requeued_ago, min_run_s, want):
    a = run("A", started=T0 - timedelta(seconds=ran_s))
    snap = snapshot(cluster(v100=4, k80=4), [a] + K80_FULL[1:] + [job("P", "b")])
    last = {"A": (T0 - timedelta(seconds=last_requeued_ago)).timestamp()} if last_requeued_ago else {}
    plan = requeues(snap, {"P": "k80", "B": "k80", "C": "k80", "D": "k80"}, last=last,
                    s=steering(snap, min_run_s=min_run_s))
    assert plan.requeue == want


def test_the_job_furthest_ahead_of_its_allocation_yields_first():
    snap = snapshot(cluster(v100=4, k80=4), K80_FULL + [job("P", "b")])
    plan = requeues(snap, {"P": "k80", "D": "k80"}, deficit={"A": 3.0, "B": 0.5, "C": 1.0})
    assert plan.requeue == ("B",)


def test_requeued_job_is_planned_like_a_pending_one_after_its_requeue():
    snap = snapshot(cluster(v100=4, k80=4), K80_FULL + [job("P", "b")])
    placed = {"A": "v100", "P": "k80", "B": "k80", "C": "k80", "D": "k80"}
    plan = requeues(snap, placed)
    assert plan.requeue == ("A",)
    jp = plan.jobs["A"]
    assert (jp.requeued, jp.placed, jp.planned_type, jp.partition) == (True, True, "v100", "v100")
    kinds = [(a.kind, a.job) for a in diff(plan, snap) if a.job == "A"]
    # Slurm's own requeue hold is left alone: releasing it early makes a relaunch on the same
    # node fail ("credential revoked")
    assert kinds == [("requeue", "A"), ("set_partition", "A")]
    # every change to pending jobs (the taker is steered to k80) comes before the requeue
    order = [(a.kind, a.job) for a in diff(plan, snap)]
    assert order.index(("set_partition", "P")) < order.index(("requeue", "A"))


def test_requeued_job_left_out_of_the_round_goes_to_the_back_of_the_line():
    snap = snapshot(cluster(v100=4, k80=4), K80_FULL + [job("P", "b")])
    plan = requeues(snap, {"P": "k80", "B": "k80", "C": "k80", "D": "k80"}, x={"A": {"k80": 0.5}})
    assert plan.jobs["A"].planned_type == "k80" and not plan.jobs["A"].placed and plan.jobs["P"].placed
    assert plan.jobs["P"].rank < plan.jobs["A"].rank


def test_a_last_good_plan_never_replays_requeue_settings():
    snap = snapshot(cluster(v100=4, k80=4), K80_FULL + [job("P", "b")])
    plan = requeues(snap, {"P": "k80", "B": "k80", "C": "k80", "D": "k80"})
    kept = plan.restricted_to({j.job_id for j in snap.jobs})
    assert kept.requeue == () and "A" not in kept.jobs and "P" in kept.jobs


# --- properties ----------------------------------------------------------------------------------
def _free_blocks(snap):
    """(node, type) -> free GPUs, counted like choose_requeues (independently written)."""
    held = {}
    for j in snap.jobs:
        if j.running:
            for n in j.nodes:
                held[(n, j.gpu_type_running)] = held.get((n, j.gpu_type_running), 0) + j.gpu_request.count
    return {(n.name, k): c - held.get((n.name, k), 0) for n in snap.nodes for k, c in n.gpus_total.items()}


def _all_start_without_requeues(snap, plan, placed, k):
    """Do the pending jobs placed on ``k`` and sent there all start, in line, on the free GPUs?"""
    free = {n: c for (n, t), c in _free_blocks(snap).items() if t == k}
    by_id = {j.job_id: j for j in snap.jobs}
    takers = sorted((jp for jp in plan.jobs.values() if not jp.requeued and placed.get(jp.job_id) == k
                     and by_id[jp.job_id].pending and sent_to(jp, k, steering(snap))),
                    key=lambda jp: jp.rank)
    for jp in takers:
        g = by_id[jp.job_id].gpu_request.total
        fits = [n for n, c in free.items() if c >= g]
        if not fits:
            return False
        free[min(fits, key=lambda n: (free[n], n))] -= g
    return True


@st.composite
def small_cluster_state(draw):
    nodes = cluster(v100=draw(st.sampled_from([4, 8])), k80=draw(st.sampled_from([4, 8])))
    free = {n.name: (next(iter(n.gpus_total)), n.gpus_total[next(iter(n.gpus_total))]) for n in nodes}
    jobs = []
    for i in range(draw(st.integers(0, 8))):
        node_name = draw(st.sampled_from(sorted(free)))
        k, left = free[node_name]
        if left <= 0:
            continue
        g = draw(st.integers(1, left))
        free[node_name] = (k, left - g)
        opted = draw(st.booleans())
        jobs.append(job(f"r{i}", draw(st.sampled_from("ab")), gpus=g, state="RUNNING", running_on=k,
                        on_node=node_name, requeue=opted or draw(st.booleans()),
                        comment="fair:preemptible" if opted else "",
                        started=T0 - timedelta(seconds=draw(st.integers(0, 1500)))))
    for i in range(draw(st.integers(0, 6))):
        jobs.append(job(f"p{i}", draw(st.sampled_from("ab")), gpus=draw(st.sampled_from([1, 2, 4])),
                        reason=draw(st.sampled_from(["Priority", "Resources", "BeginTime"]))))
    snap = snapshot(nodes, jobs)
    placed = {}
    for j in jobs:
        choice = draw(st.sampled_from([None, "v100", "k80"]))
        if choice:
            placed[j.job_id] = choice
    deficit = {j.job_id: draw(st.floats(0, 5)) for j in jobs}
    return snap, placed, deficit


@settings(max_examples=scaled(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state=small_cluster_state(), min_run=st.sampled_from([None, 600.0]))
def test_property_every_requeue_makes_room_for_a_placed_pending_job(state, min_run):
    snap, placed, deficit = state
    s = steering(snap, min_run_s=min_run)
    plan = requeues(snap, placed, s=s, deficit=deficit)
    by_id = {j.job_id: j for j in snap.jobs}
    for j in plan.requeue:
        sj = by_id[j]
        k = sj.gpu_type_running
        assert sj.running and sj.requeue and "preemptible" in sj.comment
        assert placed.get(j) != k  # never requeued to be restarted on the type it runs on
        assert (T0 - sj.start_time).total_seconds() >= s.min_run
        takers = plan.requeue_for[j]
        assert takers
        for t in takers:
            tj, tp = by_id[t], plan.jobs[t]
            assert tj.pending and tj.reason != "BeginTime" and placed.get(t) == k and sent_to(tp, k, s)
        # the GPUs are needed: without any requeue the pending jobs placed on k could not all start
        assert not _all_start_without_requeues(snap, plan, placed, k)


@settings(max_examples=scaled(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), min_run=st.sampled_from([None, 720.0]))
def test_property_no_job_is_requeued_twice_within_the_minimum_run_time(seed, min_run):
    """Rounds of random placements over a small queue; requeued jobs restart after a random
    delay wherever there is room (like Slurm); a job's requeues are at least min_run apart."""
    rng = random.Random(seed)
    nodes = cluster(k80=4)
    jobs = {f"j{i}": job(f"j{i}", "ab"[i % 2], **PRE) for i in range(6)}
    at = T0
    s = None
    last: dict[str, float] = {}
    history: dict[str, list[float]] = {}
    for _ in range(20):
        # Slurm: start pending jobs while there is room on the one node
        used = sum(j.gpu_request.total for j in jobs.values() if j.state == "RUNNING")
        for jid, j in sorted(jobs.items()):
            if j.state == "PENDING" and used < 4 and rng.random() < 0.7:
                jobs[jid] = job(jid, j.account, state="RUNNING", running_on="k80", started=at, **PRE)
                used += 1
        snap = snapshot(nodes, list(jobs.values()), at=at)
        s = steering(snap, min_run_s=min_run)
        placed = {jid: "k80" for jid in rng.sample(sorted(jobs), 4)}
        prob = problem_of(snap)
        plan = make_plan(snap, prob, Allocation("t", {}), PlanInputs(placed, last_requeued=last, round_boundary=True), s)
        for jid in plan.requeue:
            history.setdefault(jid, []).append(at.timestamp())
            last[jid] = at.timestamp()
            jobs[jid] = job(jid, jobs[jid].account, partition="k80", **PRE)
        at += timedelta(seconds=rng.choice([120, 360, 400, 800]))
    for jid, times in history.items():
        assert all(b - a >= s.min_run for a, b in zip(times, times[1:])), (jid, times)


# --- the fake: several rounds with time-sharing jobs -------------------------------------------
def _slurm_schedules(fake, held_until):
    """What Slurm's scheduler would do between two cycles: start eligible pending jobs in
    priority order (highest first, site factor included, then job id) on nodes of their
    partition with room."""
    used: dict[str, int] = {}
    for j in fake.jobs():
        if j.running:
            for n in j.nodes:
                used[n] = used.get(n, 0) + j.gpu_request.total
    nodes = {n.name: n for n in fake.nodes()}
    now = fake.now
    for j in sorted((j for j in fake.jobs() if j.pending), key=lambda j: (-j.priority, int(j.job_id))):
        if j.reason == "BeginTime":
            if now < held_until.get(j.job_id, now):
                continue
            fake._put(j, reason="Priority")  # the hold is over
        parts = set(j.partition.split(","))
        for name, n in sorted(nodes.items()):
            (k, cap), = n.gpus_total.items()
            if parts & set(n.partitions) and cap - used.get(name, 0) >= j.gpu_request.total:
                fake.start(j.job_id, name, k)
                used[name] = used.get(name, 0) + j.gpu_request.total
                break


@pytest.mark.parametrize("hold_s", [11, 121])
def test_fake_rounds_of_time_sharing_have_bounded_requeues(tmp_path, fake, hold_s):
    """Slurm holds a requeued job for its credential lifetime + 1 s (11 s on the testbed, 121 s
    by default); time-sharing stays bounded either way."""
    config = make_config(tmp_path, round_s=360, interval_s=60)
    ids = []
    for i in range(12):  # 12 one-GPU jobs (two tenants) for the 8 k80: the allocation time-shares
        jid = fake.submit("alice" if i % 2 else "bob", "--gres=gpu:1", hold=False, partition="k80",
                          comment="fair:class=a3c fair:preemptible")
        fake._put(fake.job(jid), requeue=True)
        ids.append(jid)
    for i in range(4):  # and jobs that fit on the other types without sharing
        jid = fake.submit("alice" if i % 2 else "bob", "--gres=gpu:2", hold=False,
                          comment="fair:class=resnet-50-bs32 fair:preemptible")
        fake._put(fake.job(jid), requeue=True)
    held_until: dict[str, object] = {}
    requeued: list[tuple[int, str, str]] = []  # (cycle, job, type it held)
    admitted: set[int] = set()  # cycles with a requeue that made room for a job that never ran
    ever_ran: set[str] = set()
    cycles = 36  # 6 rounds
    for c in range(cycles):
        res = run_cycle(fake, config)
        assert res.exit_code == 0, res.message
        takers = []
        for r in res.results:
            if r.action.kind == "requeue" and r.applied:
                requeued.append((c, r.action.job, r.action.before))
                held_until[r.action.job] = fake.now + timedelta(seconds=hold_s)
                takers += res.plan.requeue_for[r.action.job]
                if not set(res.plan.requeue_for[r.action.job]) & ever_ran:
                    admitted.add(c)
        _slurm_schedules(fake, held_until)
        ever_ran |= {j.job_id for j in fake.jobs(("RUNNING",))}
        for t in takers:  # the job each requeue made room for now runs there
            assert fake.job(t).running and fake.job(t).gpu_type_running == "k80"
        fake.now += timedelta(seconds=60)
    rounds = cycles * 60 // 360
    # time-sharing happened, at most once per job per round, and bounded by the GPUs a round frees
    assert requeued
    # only k80 is shared, and a round requeues at most the 4 k80 jobs the 4 waiting ones replace
    assert {k for _, _, k in requeued} == {"k80"}
    assert len(requeued) <= rounds * 4
    per_job: dict[str, list[int]] = {}
    for c, j, _ in requeued:
        per_job.setdefault(j, []).append(c)
        # rotation only at round boundaries; between them only to let in a job that never ran
        assert c % 6 == 0 or c in admitted, (c, j)
    for j, cs in per_job.items():
        # at least the hysteresis apart: a round, or 3x the requeue cost (150 s) = 7.5 cycles
        assert all(b - a >= 8 for a, b in zip(cs, cs[1:])), (j, cs)
    print(f"hold={hold_s}s: {len(requeued)} requeues of {len(per_job)} jobs in {rounds} rounds")
    assert not [c for c in fake.calls if c[0] == "scancel"]


# --- moving up to an idle faster type -------------------------------------------------------------
def _mover_snapshot(ran_s, free_v100=True):
    mover = run("M", on="k80", started=T0 - timedelta(seconds=ran_s))
    blockers = [] if free_v100 else [job(f"B{i}", "b", state="RUNNING", running_on="v100", on_node="v100-1")
                                      for i in range(4)]
    return snapshot(cluster(v100=4, k80=4), [mover, *blockers])


def _moves(snap, attained, cost=150.0, gain=0.25, tput=None, pending_placed=None):
    tput = tput or {"M": {"v100": 8.0, "k80": 1.0}}
    prob = problem_of(snap, tput=tput, attained={"M": attained})
    # the mover's problem entry may run anywhere (problem_of pins running jobs to their type)
    prob = type(prob)(prob.gpu_types, prob.tenants,
                      tuple(j if j.id != "M" else type(j)(j.id, j.tenant, j.gpus, tput["M"], attained_s=attained)
                            for j in prob.jobs))
    s = steering(snap, requeue_cost_s=cost, move_up_gain=gain)
    return make_plan(snap, prob, Allocation("t", {}), PlanInputs(pending_placed or {}), s)


def test_a_job_on_a_slow_type_moves_up_when_the_gain_beats_the_cost():
    # 8x faster on v100: gain = attained x (1 - 1/8); cost 150 s -> worth it after 172 s
    plan = _moves(_mover_snapshot(3600), attained=600.0)
    assert plan.requeue == ("M",) and plan.move_up == {"M": "v100"}
    jp = plan.jobs["M"]
    assert (jp.requeued, jp.planned_type, jp.partition, jp.placed) == (True, "v100", "v100", True)
    assert _moves(_mover_snapshot(3600), attained=150.0).requeue == ()  # gain 131 s < cost


def test_no_move_up_when_the_fast_gpus_are_busy_or_wanted_or_not_much_faster():
    assert _moves(_mover_snapshot(3600, free_v100=False), attained=3600.0).requeue == ()
    # a pending job this cycle starts on v100 takes the free GPUs first
    snap = snapshot(cluster(v100=1, k80=4), [run("M", on="k80"), job("P", "b", partition="v100")])
    plan = _moves(snap, attained=3600.0, pending_placed={"P": "v100"},
                  tput={"M": {"v100": 8.0, "k80": 1.0}, "P": {"v100": 1.0, "k80": 1.0}})
    assert "M" not in plan.requeue
    # only 20 % faster, the gain threshold is 25 %
    assert _moves(_mover_snapshot(3600), attained=3600.0, tput={"M": {"v100": 1.2, "k80": 1.0}}).requeue == ()


def test_no_move_up_before_the_minimum_run_time():
    assert _moves(_mover_snapshot(100), attained=3600.0).requeue == ()  # started 100 s ago < one round


def test_a_gang_gets_room_only_on_one_node():
    """A 4-GPU single-node gang needs a whole 4-GPU node: two 2-GPU jobs on different nodes
    do not make room, the two on one node do (and only those)."""
    jobs = [run("A", gpus=2, node="k80-1"), run("B", gpus=2, node="k80-2"),
            run("C", gpus=2, node="k80-2"), run("D", gpus=2, node="k80-1"), job("P", "b", gpus=4)]
    snap = snapshot(cluster(v100=4, k80=8), jobs)
    plan = requeues(snap, {"P": "k80"}, deficit={"A": 0.1, "B": 0.2, "C": 3.0, "D": 0.3})
    # the fewest jobs furthest ahead first: A (0.1) and B (0.2) are on different nodes, so
    # the node of A and D is freed (A, D), not A and B
    assert plan.requeue == ("A", "D") and plan.requeue_for == {"A": ("P",), "D": ("P",)}


def test_gpus_of_a_node_that_is_draining_are_never_counted_as_room():
    """A job requeued on a draining node frees GPUs no pending job can start on: the
    controller must not requeue it for a taker (it did: nodes outside the schedulable set passed
    the host test)."""
    nodes = [*cluster(v100=4, k80=4), node("k80-2", "k80", 4, state="draining", used=4)]
    hogs = [run(j) for j in "ABCD"] + [run(j, node="k80-2") for j in "EFGH"]
    snap = snapshot(nodes, hogs + [job("P", "b")])
    placed = {j: "k80" for j in "ABCDFGH"} | {"P": "k80"}  # E, on the draining node, left out
    s = steering(snap, nodes=tuple(n for n in snap.nodes if n.schedulable))
    assert requeues(snap, placed, s=s).requeue == ()
    # the same GPUs on a schedulable node are room
    nodes[-1] = node("k80-2", "k80", 4, state="mixed", used=4)
    snap = snapshot(nodes, hogs + [job("P", "b")])
    s = steering(snap, nodes=tuple(n for n in snap.nodes if n.schedulable))
    assert requeues(snap, placed, s=s).requeue == ("E",)
