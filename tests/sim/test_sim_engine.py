"""The simulation loop: a scenario computed by hand, conservation and capacity invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypo_profiles import scaled

from slurm_fair.sim import engine, metrics
from slurm_fair.sim.cluster import ClusterSpec, parse_cluster
from slurm_fair.sim.workload import TraceJob, make_workload

from simhelpers import job_rows, even_split, oldest_first, standin, table_from

TABLE_1 = {"v100": {("A", 1): 10.0}}


def test_two_jobs_one_gpu_by_hand(oldest) -> None:
    """j1 (3600 steps) and j2 (7200 steps) arrive at 0 on a single V100 at 10 steps/s.

    Rounds of 360 s, restart overhead 30 s at every start:
      round 0 [0, 360):     j1 pays 30 s, runs 330 s -> 3300 steps, 300 left
      round 1 [360, 720):   j1 continues (no overhead), ends at 360 + 300/10 = 390
      round 2 [720, 1080):  j2 pays 30 s, 3300 steps, 3900 left
      round 3 [1080, 1440): 3600 steps, 300 left
      round 4 [1440, 1800): ends at 1440 + 30 = 1470
    """
    w = make_workload([TraceJob("a/1", "a", "A", 1, 3600, 0), TraceJob("a/2", "a", "A", 1, 7200, 0)])
    res = engine.simulate(w, parse_cluster("v100=1"), table_from(TABLE_1), oldest,
                          engine.SimConfig(round_s=360, restart_s=30, check_fairness=False))
    ends = {r.job_id: r.end_s for r in res.records}
    assert ends == pytest.approx({"a/1": 390.0, "a/2": 1470.0})
    m = metrics.summarize(res.records, res.samples, res.capacity)
    assert m["avg_jct_s"] == pytest.approx((390 + 1470) / 2)
    assert m["makespan_s"] == pytest.approx(1470)
    assert m["rounds"] == 5
    # GPU held: 360 + 30 + 360 + 360 + 30 = 1140 of 5 * 360 offered
    assert m["utilization"] == pytest.approx(1140 / 1800)
    # isolated baseline: both jobs in the system at 0, tenant owns the V100, half each -> 5 steps/s
    assert m["ftf_rho_max"] == pytest.approx(1470 / (7200 / 5))
    assert m["ftf_rho_mean"] == pytest.approx((390 / 720 + 1470 / 1440) / 2)
    # slowdown: JCT over run time alone on the fastest type
    assert m["max_slowdown"] == pytest.approx(1470 / 720)
    # wait = JCT - time holding the GPU: j1 held it 0..390 (0 s waited); j2 720..1470 (750 s
    # held, 720 s waited). Age (Eq. 9, one type): 7200 / 10 = 720 s, so j2's LR = 720 / 720
    ran = {r.job_id: r.ran_s() for r in res.records}
    assert ran == pytest.approx({"a/1": 390.0, "a/2": 750.0})
    assert m["avg_wait_s"] == pytest.approx((0 + 720) / 2)
    assert m["latency_ratio_max"] == pytest.approx(1.0)
    assert m["latency_ratio_mean"] == pytest.approx(0.5)
    assert m["effective_throughput"] == pytest.approx(1.0)
    # j2 waited while the only GPU was busy: nothing idle, so nothing fragmented
    assert m["fragmentation"] == 0.0
    assert res.restarts == 2


def test_avg_frag_by_hand(oldest) -> None:
    """Two 2-GPU gangs on 3 V100s: a/1 runs rounds 0-1 (7200 steps at 10/s), a/2 waits with one
    GPU idle after the placement in each of them, then runs round 2 alone (nobody waits: its idle
    GPU is not a fragment). Avg.frag = (1 + 1 + 0) / 3 rounds; a/2 waited 720 s of a 1080 s JCT,
    its age is 3600 / 10 = 360 s on the one type, so its LR is 2."""
    table = table_from({"v100": {("A", 2): 10.0}})
    w = make_workload([TraceJob("a/1", "a", "A", 2, 7200, 0), TraceJob("a/2", "a", "A", 2, 3600, 0)])
    res = engine.simulate(w, parse_cluster("v100=3"), table, oldest,
                          engine.SimConfig(round_s=360, restart_s=0, check_fairness=False))
    assert [s.fragmented_gpus for s in res.samples] == [1, 1, 0]
    m = metrics.summarize(res.records, res.samples, res.capacity)
    assert m["fragmentation"] == pytest.approx(2 / 3)
    assert m["avg_wait_s"] == pytest.approx(360.0)
    assert m["latency_ratio_max"] == pytest.approx(2.0)
    assert m["latency_ratio_mean"] == pytest.approx(1.0)
    assert m["max_slowdown"] == pytest.approx(1080 / 360)
    assert m["tenants"]["a"]["latency_ratio_max"] == pytest.approx(2.0)


def test_arrival_mid_round_waits_for_the_next_round_and_idle_time_is_skipped(oldest) -> None:
    w = make_workload([TraceJob("a/1", "a", "A", 1, 100, 0), TraceJob("b/1", "b", "A", 1, 100, 5000)])
    res = engine.simulate(w, parse_cluster("v100=1"), table_from(TABLE_1), oldest,
                          engine.SimConfig(round_s=360, restart_s=0, check_fairness=False))
    ends = {r.job_id: r.end_s for r in res.records}
    assert ends == pytest.approx({"a/1": 10.0, "b/1": 5010.0})
    assert len(res.samples) == 2


def test_faster_type_and_node_speed_are_used() -> None:
    table = table_from({"v100": {("A", 1): 10.0}, "k80": {("A", 1): 2.0}})
    w = make_workload([TraceJob("a/1", "a", "A", 1, 1000, 0)])
    cluster = ClusterSpec({"v100": 2, "k80": 2}, gpus_per_node=1, speeds={"v100-1": 0.5, "v100-2": 0.5})
    res = engine.simulate(w, cluster, table, standin("oldest", oldest_first),
                          engine.SimConfig(restart_s=0, check_fairness=False))
    # on a V100 node at half speed: 5 steps/s
    assert res.records[0].end_s == pytest.approx(200.0)
    assert res.records[0].gpu_type == "v100"


def test_unschedulable_jobs_are_reported_not_simulated(oldest) -> None:
    w = make_workload([TraceJob("a/1", "a", "A", 2, 10, 0), TraceJob("a/2", "a", "A", 1, 10, 0)])
    res = engine.simulate(w, parse_cluster("v100=1"), table_from({"v100": {("A", 1): 1.0, ("A", 2): 2.0}}), oldest,
                          engine.SimConfig(check_fairness=False))
    assert res.unschedulable == ["a/1"]
    assert [r.job_id for r in res.records] == ["a/2"]


def test_finish_time_of_members_with_different_overheads() -> None:
    # two members at 1 and 2 steps/s, overheads 0 and 10 s, together at factor 0.5:
    # first 10 s: 0.5 steps/s -> 5 steps; then 1.5 steps/s
    assert engine.finish_time([(1.0, 0.0), (2.0, 10.0)], 20.0, 0.5, 360) == pytest.approx(20.0)
    assert engine.finish_time([(1.0, 0.0)], 500.0, 1.0, 360) is None
    assert engine.progress_in([(1.0, 0.0), (2.0, 10.0)], 0.5, 20.0) == pytest.approx(20.0)


jobs_strategy = job_rows([1, 2, 4])


@settings(max_examples=scaled(30), deadline=None)
@given(
    rows=jobs_strategy,
    v100=st.integers(0, 5),
    k80=st.integers(1, 5),
    gpn=st.sampled_from([None, 1, 2, 4]),
    policy=st.sampled_from(["oldest", "even"]),
    restart=st.sampled_from([0.0, 30.0]),
)
def test_every_step_done_once_and_capacity_never_exceeded(rows, v100, k80, gpn, policy, restart) -> None:
    table = table_from({
        "v100": {("A", 1): 10.0, ("A", 2): 18.0, ("A", 4): 30.0},
        "k80": {("A", 1): 2.0, ("A", 2): 4.0, ("A", 4): 7.0},
    })
    jobs = [TraceJob(f"{t}/{i}", t, "A", g, float(s), float(a)) for i, (t, g, s, a) in enumerate(rows)]
    w = make_workload(jobs, {"t1": 2.0})
    cluster = parse_cluster(f"v100={v100},k80={k80}", gpn)
    fn = oldest_first if policy == "oldest" else even_split
    res = engine.simulate(w, cluster, table, standin(policy, fn), engine.SimConfig(restart_s=restart))
    for job in w.jobs:
        if job.id in res.unschedulable:
            assert job.gpus > max(cluster.capacity.values())
            continue
        assert res.work_done[job.id] == pytest.approx(job.total_steps, rel=1e-9)
    for rec in res.records:
        assert rec.end_s is not None and rec.start_s is not None
        assert rec.arrival_s <= rec.start_s < rec.end_s
    for s in res.samples:
        for k, used in s.busy.items():
            assert used <= cluster.capacity[k]
        assert s.busy_gpu_s <= s.duration_s * cluster.total_gpus + 1e-6
