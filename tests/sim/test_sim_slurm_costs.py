"""The real system's costs in the simulator: start latency, requeue hold, filling between rounds,
gang shapes on mixed node sizes, node continuity; scenarios by hand and conservation properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypo_profiles import scaled

from slurm_fair.model import Job
from slurm_fair.sim import engine, metrics
from slurm_fair.sim.cluster import ClusterSpec, parse_cluster
from slurm_fair.sim.holdings import FreeGpus
from slurm_fair.sim.workload import TraceJob, make_workload

from simhelpers import job_rows, even_split, oldest_first, scripted, standin, table_from, taking_turns

FLAT = table_from({"v100": {("A", 1): 10.0}, "k80": {("A", 1): 10.0}})
SHAPED = table_from({k: {("A", 1): s, ("A", 4): 4 * s, ("A", 8): 8 * s, ("A", 16): 16 * s}
                     for k, s in (("v100", 3.0), ("p100", 2.0), ("k80", 1.0))})


def _run(jobs, cluster, policy, table=FLAT, **config):
    config.setdefault("check_fairness", False)
    res = engine.simulate(make_workload(jobs), cluster, table, policy, engine.SimConfig(**config))
    return res, {r.job_id: r for r in res.records}


# ------------------------------------------------------------------ requeue hold


def test_a_move_up_costs_hold_plus_restart_and_a_move_down_never_happens() -> None:
    """A (10 steps/s on K80, 30 on V100) is sent k80, v100, v100, k80 in rounds of 360 s;
    restart 30 s, hold 11 s (slurm_fair.hysteresis: a running job moves only when the move pays):
      round 0: first start on K80, no hold: ready at 30 -> 3300 steps
      round 1: the move up pays (330 s run x (1 - 10/30) = 220 s > 41 s): left K80 at 360, may
               start on V100 at 371, ready at 401 -> 319 s x 30 = 9570 steps
      round 2: V100 again -> 10800 steps
      round 3: the script wants K80: a move down never pays, so A keeps its V100: 3000 steps
               -> ends at 1180 (moved, it would restart at 1091 and end at 1421)
    GPU-seconds count from each start (the hold is not GPU time): K80 360, V100 1180 - 371.
    """
    table = table_from({"v100": {("A", 1): 30.0}, "k80": {("A", 1): 10.0}})
    policy = scripted("moves", [{"a/1": "k80"}, {"a/1": "v100"}, {"a/1": "v100"}, {"a/1": "k80"}])
    res, rec = _run([TraceJob("a/1", "a", "A", 1, 3300 + 9570 + 10800 + 3000, 0)], parse_cluster("v100=1,k80=1"),
                    policy, table, restart_s=30, requeue_hold_s=11)
    assert rec["a/1"].end_s == pytest.approx(1180)
    assert dict(rec["a/1"].gpu_seconds) == pytest.approx({"k80": 360, "v100": 809})
    assert res.restarts == 2
    assert sum(s.busy_gpu_s for s in res.samples) == pytest.approx(1169)


@pytest.mark.parametrize("hold,round_s", [(0.0, 360.0), (11.0, 360.0), (90.0, 360.0), (360.0, 1200.0),
                                          (500.0, 1600.0), (700.0, 2200.0)])
def test_requeue_hold_delays_the_restart_by_what_is_left_of_it(hold: float, round_s: float) -> None:
    """A runs round 0, B round 1 (A requeued at R), A again in round 2 (at 2R): A may start at
    max(2R, R + hold), then pays the 30 s restart. A hold up to a round costs it nothing more
    than the restart. (A job is stopped only after running 3x a restart's cost,
    slurm_fair.hysteresis, so a long hold comes with long rounds here.)"""
    policy = scripted("turns", [{"a/1": "v100"}, {"b/1": "v100"}, {"a/1": "v100"}])
    first = 10 * (round_s - 30)
    jobs = [TraceJob("a/1", "a", "A", 1, first + 700, 0), TraceJob("b/1", "b", "A", 1, 10**6, 0)]
    _, rec = _run(jobs, parse_cluster("v100=1"), policy, restart_s=30, requeue_hold_s=hold, round_s=round_s,
                  horizon_s=4 * round_s)
    delay = max(0.0, round_s + hold - 2 * round_s)
    assert delay == 0.0
    # round 0: first steps; round 2: 700 left after the restart
    assert rec["a/1"].end_s == pytest.approx(2 * round_s + delay + 30 + 70)
    assert rec["a/1"].gpu_seconds["v100"] == pytest.approx(round_s + 100)
    assert rec["b/1"].start_s == pytest.approx(round_s)


@pytest.mark.parametrize("hold", [360.0, 700.0])
def test_a_job_is_not_rotated_before_a_restart_costs_at_most_a_quarter_of_its_turn(hold: float) -> None:
    """Rounds of 360 s, a restart of 30 s and a hold of ``hold``: A is stopped only after it ran
    3 x (hold + 30) (slurm_fair.hysteresis.min_run_s), so the script's rotation at 360 does not
    happen and A runs to its end at 30 + 400 s; B starts when A ends (the script gives round 2
    to A, which is done)."""
    policy = scripted("turns", [{"a/1": "v100"}, {"b/1": "v100"}, {"a/1": "v100"}])
    jobs = [TraceJob("a/1", "a", "A", 1, 4000, 0), TraceJob("b/1", "b", "A", 1, 10**6, 0)]
    _, rec = _run(jobs, parse_cluster("v100=1"), policy, restart_s=30, requeue_hold_s=hold, horizon_s=1440)
    assert rec["a/1"].end_s == pytest.approx(430)
    assert rec["a/1"].gpu_seconds["v100"] == pytest.approx(430)


@pytest.mark.parametrize("hold", [11.0, 90.0])
def test_requeue_hold_also_delays_a_fill_start(hold: float) -> None:
    """With filling, a job requeued at a round start may take GPUs freed inside the round only
    once its hold is over (the end of a hold is an event of its own). v100=1: A runs round 0;
    round 1 gives the GPU to B (100 steps: ends at 360 + 30 + 10 = 400); A, requeued at 360,
    starts at max(400, 360 + hold)."""
    policy = scripted("turns", [{"a/1": "v100"}, {"b/1": "v100"}])
    jobs = [TraceJob("a/1", "a", "A", 1, 10**6, 0), TraceJob("b/1", "b", "A", 1, 100, 0)]
    _, rec = _run(jobs, parse_cluster("v100=1"), policy, restart_s=30, requeue_hold_s=hold,
                  fill_between_rounds=True, horizon_s=720)
    assert rec["b/1"].start_s == pytest.approx(360) and rec["b/1"].end_s == pytest.approx(400)
    assert rec["a/1"].gpu_seconds["v100"] == pytest.approx(360 + 720 - max(400, 360 + hold))


def test_taking_turns_with_a_hold_longer_than_a_round_still_progresses() -> None:
    """Two 8-GPU single-node jobs share the one K80 node of the testbed layout under a policy that
    swaps them every round, with the testbed's hold at S = 60 (660 s) and a 90 s start: a job
    starts 300 s into its round, so stopping it at the next round would throw its start away
    each time and neither would ever progress. A job is not stopped before it has run a round
    since it started, so both finish."""
    jobs = [TraceJob("a/1", "a", "A", 8, 8 * 3600, 0, nodes=1), TraceJob("b/1", "b", "A", 8, 8 * 3600, 0, nodes=1)]
    res, rec = _run(jobs, parse_cluster("v100=2x4,p100=2x4,k80=1x8"), standin("turns", taking_turns, dynamic=True),
                    SHAPED, restart_s=90, requeue_hold_s=660, fill_between_rounds=True, horizon_s=100 * 360)
    assert all(r.end_s is not None for r in rec.values())
    assert all(set(r.gpu_seconds) == {"k80"} for r in rec.values())


# ------------------------------------------------------------------ filling between rounds


@pytest.mark.parametrize("gpn", [None, 1])
def test_fill_starts_a_waiting_job_when_the_running_one_completes(gpn: int | None) -> None:
    """v100=1, A 100 steps, B 5000 steps at 10 steps/s, restart 30 s.
    A ends at 30 + 10 = 40; B starts then, progresses from 70: 2900 steps by 360; it counts as
    running on that GPU, so round 1 continues it without a restart: ends at 360 + 210 = 570.
    Without filling, B would start at 360 and end at 360 + 30 + 500 = 890."""
    jobs = [TraceJob("a/1", "a", "A", 1, 100, 0), TraceJob("b/1", "b", "A", 1, 5000, 0)]
    cluster = parse_cluster("v100=1", gpn)
    res, rec = _run(jobs, cluster, standin("oldest", oldest_first), restart_s=30, fill_between_rounds=True)
    assert rec["a/1"].end_s == pytest.approx(40)
    assert rec["b/1"].start_s == pytest.approx(40)
    assert rec["b/1"].end_s == pytest.approx(570)
    assert res.restarts == 2
    assert rec["b/1"].gpu_seconds["v100"] == pytest.approx(530)
    # the first round's GPU time: A 40 s + B 320 s; the busiest instant holds one GPU
    assert res.samples[0].busy_gpu_s == pytest.approx(360)
    assert dict(res.samples[0].busy) == {"v100": 1}
    _, rec = _run(jobs, cluster, standin("oldest", oldest_first), restart_s=30)
    assert rec["b/1"].end_s == pytest.approx(890)


def test_fill_starts_an_arrival_inside_the_round_when_gpus_are_free() -> None:
    jobs = [TraceJob("a/1", "a", "A", 1, 10**5, 0), TraceJob("b/1", "b", "A", 1, 500, 100)]
    _, rec = _run(jobs, parse_cluster("v100=2"), standin("oldest", oldest_first), restart_s=30,
                  fill_between_rounds=True)
    assert rec["b/1"].start_s == pytest.approx(100)
    assert rec["b/1"].end_s == pytest.approx(100 + 30 + 50)
    _, rec = _run(jobs, parse_cluster("v100=2"), standin("oldest", oldest_first), restart_s=30)
    assert rec["b/1"].start_s == pytest.approx(360)


def test_fill_needs_the_gang_to_fit_per_node_and_lets_a_smaller_one_go_ahead() -> None:
    """k80=2x2 at 1 step/s per GPU, no restart cost. Round 0 packs A (1 GPU, 100 steps) and B
    (1 GPU, 10 steps) on k80-1, C (1 GPU, 200 steps) and D (1 GPU, 10 steps) on k80-2. E (2 GPUs
    on one node, arrives at 5) and F (2 GPUs any split, arrives at 6) wait. At 10, B and D end:
    one GPU free on each node. E comes first but fits no node; F fits 1+1 and starts (ends at
    20, leaving 1+1 again). At 100 A ends: k80-1 has 2 free and E starts."""
    table = table_from({"k80": {("A", 1): 1.0, ("A", 2): 2.0}})
    jobs = [
        TraceJob("a/1", "a", "A", 1, 100, 0), TraceJob("b/1", "b", "A", 1, 10, 0),
        TraceJob("c/1", "c", "A", 1, 200, 0), TraceJob("d/1", "d", "A", 1, 10, 0),
        TraceJob("e/1", "e", "A", 2, 20, 5, nodes=1), TraceJob("f/1", "f", "A", 2, 20, 6),
    ]
    _, rec = _run(jobs, parse_cluster("k80=2x2"), standin("oldest", oldest_first), table, restart_s=0,
                  fill_between_rounds=True)
    assert rec["f/1"].start_s == pytest.approx(10) and rec["f/1"].end_s == pytest.approx(20)
    assert rec["e/1"].start_s == pytest.approx(100) and rec["e/1"].end_s == pytest.approx(110)


def test_fill_takes_the_fastest_type_free_now() -> None:
    """An arrival does not wait for the V100 busy until 390: it starts on the free K80 at once."""
    table = table_from({"v100": {("A", 1): 10.0}, "k80": {("A", 1): 1.0}})
    jobs = [TraceJob("a/1", "a", "A", 1, 3600, 0), TraceJob("b/1", "b", "A", 1, 50, 20)]
    _, rec = _run(jobs, parse_cluster("v100=1,k80=1"), standin("oldest", oldest_first), table, restart_s=30,
                  fill_between_rounds=True)
    assert dict(rec["b/1"].gpu_seconds) == pytest.approx({"k80": 80})
    assert rec["b/1"].end_s == pytest.approx(100)


# ------------------------------------------------------------------ gang shapes on mixed node sizes



@pytest.mark.parametrize("fill", [False, True])
@pytest.mark.parametrize("policy", [standin("oldest", oldest_first), standin("even", even_split)])
def test_single_node_8_gpu_jobs_run_only_where_a_node_has_8(policy, fill: bool) -> None:
    """The testbed's layout: 2x4 V100, 2x4 P100, 1x8 K80. An 8-GPU job on one node fits only
    the K80 node; an 8-GPU job over 2 nodes fits V100 and P100 (not the single K80 node); a
    16-GPU single-node job fits nowhere. Nothing is stranded: every schedulable job finishes."""
    jobs = [TraceJob(f"t/{i}", "t", "A", 8, 2000, 100 * i, nodes=1) for i in range(4)]
    jobs += [TraceJob(f"u/{i}", "u", "A", 8, 2000, 50 * i, nodes=2) for i in range(4)]
    jobs += [TraceJob(f"v/{i}", "v", "A", 1, 500, 10 * i) for i in range(6)]
    jobs.append(TraceJob("w/big", "w", "A", 16, 10, 0, nodes=1))
    res, rec = _run(jobs, parse_cluster("v100=2x4,p100=2x4,k80=1x8"), policy, SHAPED, fill_between_rounds=fill,
                    requeue_hold_s=11 if fill else 0)
    assert res.unschedulable == ["w/big"]
    for i in range(4):
        assert set(rec[f"t/{i}"].gpu_seconds) == {"k80"}
        assert set(rec[f"u/{i}"].gpu_seconds) <= {"v100", "p100"}
        assert rec[f"t/{i}"].throughput["v100"] == 0 and rec[f"u/{i}"].throughput["k80"] == 0
    assert all(r.end_s is not None for r in res.records)
    assert all(res.work_done[j.id] == pytest.approx(j.total_steps) for j in jobs if j.id != "w/big")


def test_a_job_that_keeps_its_type_keeps_its_nodes() -> None:
    """Node continuity: on v100=2x3, A and B (2 GPUs each) take one node each (best fit), so C
    (2 GPUs, any split) gets one GPU of each node. A and B end in round 0; from round 1 one node
    could hold C alone, but C keeps its GPUs: it is not restarted for nothing and ends at
    30 + 20000 / 20 = 1030 (a move would cost another 30 s)."""
    table = table_from({"v100": {("A", 2): 20.0}})
    jobs = [TraceJob("a/1", "a", "A", 2, 100, 0), TraceJob("b/1", "b", "A", 2, 100, 0),
            TraceJob("c/1", "c", "A", 2, 20000, 0)]
    policy = scripted("all", [{"a/1": "v100", "b/1": "v100", "c/1": "v100"}])
    res, rec = _run(jobs, parse_cluster("v100=2x3"), policy, table, restart_s=30)
    assert rec["c/1"].end_s == pytest.approx(1030)
    assert res.restarts == 3


# ------------------------------------------------------------------ conservation, with every option


@st.composite
def clusters(draw) -> ClusterSpec:
    """1..3 types, each none to a few nodes of 1, 2, 4 or 8 GPUs (sizes mixed between types)."""
    layout = {}
    for k in draw(st.lists(st.sampled_from(["v100", "p100", "k80"]), min_size=1, max_size=3, unique=True)):
        layout[k] = (draw(st.integers(1, 3)), draw(st.sampled_from([1, 2, 4, 8])))
    return parse_cluster(",".join(f"{k}={n}x{g}" for k, (n, g) in layout.items()))


jobs_strategy = job_rows([(1, None), (2, None), (4, None), (4, 1), (4, 2), (8, 1), (8, 2), (16, 4)])


@settings(max_examples=scaled(40), deadline=None)
@given(
    rows=jobs_strategy,
    cluster=clusters(),
    policy=st.sampled_from(["oldest", "even", "turns"]),
    restart=st.sampled_from([0.0, 30.0, 90.0]),
    hold=st.sampled_from([0.0, 11.0, 400.0, 660.0]),
    fill=st.booleans(),
)
def test_conservation_with_shapes_holds_and_filling(rows, cluster, policy, restart, hold, fill) -> None:
    """Every job finishes and every step is done once; GPU-seconds of the records equal the
    rounds' busy GPU-seconds; no node ever lends more GPUs than it has nor goes below zero; a
    job runs only on types whose nodes hold its gang, and is unschedulable exactly when no type
    does."""
    table = table_from({k: {("A", g): s * g for g in (1, 2, 4, 8, 16)}
                        for k, s in (("v100", 10.0), ("p100", 6.0), ("k80", 2.0))})
    jobs = [TraceJob(f"{t}/{i}", t, "A", g, float(s), float(a), n) for i, (t, (g, n), s, a) in enumerate(rows)]
    sizes = {n.name: n.gpus for n in cluster.nodes()}
    original = FreeGpus.change

    def checked(self, gpu_type, node_gpus, gpus, sign):
        original(self, gpu_type, node_gpus, gpus, sign)
        for n in node_gpus:
            assert 0 <= self.by_node[gpu_type][n] <= sizes[n]
        assert self.by_type[gpu_type] >= 0

    info = standin(policy, {"oldest": oldest_first, "even": even_split, "turns": taking_turns}[policy],
                   dynamic=policy == "turns")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(FreeGpus, "change", checked)
        # a horizon far beyond what any of these workloads needs: a livelock fails, not hangs
        res, rec = _run(jobs, cluster, info, table, restart_s=restart, requeue_hold_s=hold,
                        fill_between_rounds=fill, check_fairness=True, horizon_s=3e6)
    frame = engine.Simulator(make_workload(jobs), cluster, table, info).frame
    for job in jobs:
        probe = Job(job.id, job.tenant, job.gpus, {}, gpus_per_node=job.shape.per_node, max_nodes=job.shape.max_nodes)
        holding = {k for k in cluster.capacity if frame.holds(probe, k)}
        assert (job.id in res.unschedulable) == (not holding)
        if job.id in res.unschedulable:
            continue
        assert res.work_done[job.id] == pytest.approx(job.total_steps, rel=1e-9)
        r = rec[job.id]
        assert r.end_s is not None and r.start_s is not None
        assert r.arrival_s <= r.start_s < r.end_s
        assert set(r.gpu_seconds) <= holding
        # a job holds GPUs at most from its first start to its end
        assert sum(r.gpu_seconds.values()) <= job.gpus * (r.end_s - r.start_s) * (1 + 1e-9) + 1e-6
    assert sum(s.busy_gpu_s for s in res.samples) == pytest.approx(
        sum(sum(r.gpu_seconds.values()) for r in res.records), rel=1e-9, abs=1e-6)
    for s in res.samples:
        for k, used in s.busy.items():
            assert used <= cluster.capacity[k]
        assert sum(s.tenant_gpus.values()) == sum(s.busy.values())
        assert s.busy_gpu_s <= s.duration_s * cluster.total_gpus + 1e-6
    m = metrics.summarize(res.records, res.samples, res.capacity)
    assert m["utilization"] is None or m["utilization"] <= 1 + 1e-9
    assert not math.isnan(m["effective_throughput"] or 0.0)
