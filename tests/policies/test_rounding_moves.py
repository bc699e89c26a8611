"""No thrash (slurm_fair.hysteresis): a running job is moved to another type only when the move
pays for its restart, and stopped for rotation only after a restart costs at most a quarter of
its turn; the rounding step's placement checked against that rule computed here again."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
from hypo_profiles import scaled

from slurm_fair import rounding
from slurm_fair.hysteresis import MAX_RESTART_SHARE, Moves, min_run_s, move_pays
from slurm_fair.model import Allocation, Job, Problem

TYPES = ("v100", "p100", "k80")


@settings(max_examples=scaled(300), deadline=None)
@given(st.floats(1, 10_000), st.floats(0, 10_000))
def test_a_restart_costs_at_most_its_share_of_a_turn_and_a_turn_is_at_least_a_round(round_s, cost) -> None:
    run = min_run_s(round_s, cost)
    assert run >= round_s
    assert cost / (run + cost) <= MAX_RESTART_SHARE + 1e-9


@settings(max_examples=scaled(300), deadline=None)
@given(st.floats(0, 1e6), st.floats(0.01, 100), st.floats(0.01, 100), st.floats(0, 1e4))
def test_a_move_pays_only_to_a_much_faster_type_and_only_when_the_gain_beats_the_cost(h, n_cur, n_new, cost) -> None:
    pays = move_pays(h, n_cur, n_new, cost, 0.25)
    assert pays == (n_new >= 1.25 * n_cur and h * (n_new - n_cur) / n_new > cost)
    if n_new <= n_cur:
        assert not pays


@st.composite
def _rounds(draw):
    """A few jobs on three types, some running (their type and how long they ran), and an
    allocation that may send them anywhere."""
    caps = {k: draw(st.integers(1, 8)) for k in TYPES}
    jobs, x, prev, running = [], {}, {}, set()
    for i in range(draw(st.integers(1, 8))):
        speeds = {k: draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0])) for k in TYPES}
        if not any(speeds.values()):
            speeds["k80"] = 1.0
        gpus = draw(st.sampled_from([1, 1, 2, 4]))
        jid = f"j{i}"
        jobs.append(Job(id=jid, tenant=f"t{i % 2}", gpus=gpus, throughput=speeds,
                        attained_s=draw(st.sampled_from([0.0, 100.0, 1000.0, 10_000.0]))))
        share = {k: draw(st.sampled_from([0.0, 0.5, 1.0])) for k in TYPES if speeds[k] > 0}
        x[jid] = share
        usable = [k for k in TYPES if speeds[k] > 0]
        if draw(st.booleans()):
            prev[jid] = draw(st.sampled_from(usable))
            running.add(jid)
    cost = draw(st.sampled_from([0.0, 13.0, 150.0, 1000.0]))
    return Problem(caps, {"t0": 1.0, "t1": 1.0}, tuple(jobs)), Allocation("test", x), prev, running, cost


@settings(max_examples=scaled(300), deadline=None)
@given(_rounds())
def test_the_placement_moves_a_running_job_only_where_the_move_pays(case) -> None:
    problem, alloc, prev, running, cost = case
    got = rounding.place(problem, alloc, {}, prev, None, None, sticky=True, moves=Moves(frozenset(running), cost))
    by_id = {j.id: j for j in problem.jobs}
    for jid, k in got.types.items():
        cur = prev.get(jid)
        if jid not in running or cur is None or k == cur:
            continue
        job = by_id[jid]
        n_cur = job.throughput[cur] / job.best_throughput
        n_new = job.throughput[k] / job.best_throughput
        assert n_new >= 1.25 * n_cur and job.attained_s * (1 - n_cur / n_new) > cost, (jid, cur, k)
    used: dict[str, int] = {}
    for jid, k in got.types.items():
        used[k] = used.get(k, 0) + by_id[jid].gpus
    assert all(used[k] <= problem.gpu_types[k] for k in used)


def test_a_job_the_allocation_sends_to_a_slower_type_keeps_its_own_instead() -> None:
    """The held-out replay's thrash: a running 4-GPU job allocated time on slower types only
    was moved between them every round. With the rule it keeps the type it runs on."""
    job = Job(id="g", tenant="t", gpus=4, throughput={"v100": 3.0, "p100": 2.0, "k80": 1.0}, attained_s=3000.0)
    problem = Problem({"v100": 4, "p100": 4, "k80": 4}, {"t": 1.0}, (job,))
    alloc = Allocation("test", {"g": {"k80": 0.5, "v100": 0.0, "p100": 0.0}})
    kept = rounding.place(problem, alloc, {}, {"g": "p100"}, None, None, sticky=True,
                          moves=Moves(frozenset({"g"}), 13.0))
    assert dict(kept.types) == {"g": "p100"}
    moved = rounding.place(problem, alloc, {}, {"g": "p100"}, None, None, sticky=True)
    assert dict(moved.types) == {"g": "k80"}  # without the rule (the control)
    # a much faster type is worth the move once the job ran long enough to expect the gain
    up = Allocation("test", {"g": {"v100": 1.0}})
    assert rounding.place(problem, up, {}, {"g": "k80"}, None, None, sticky=True,
                          moves=Moves(frozenset({"g"}), 13.0)).types == {"g": "v100"}
