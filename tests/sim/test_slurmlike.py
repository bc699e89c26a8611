"""The modelled site Slurm (``agnostic`` in a replay): priority order, backfill by time limits,
nodes in name order, no preemption, jobs ended at their limit."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypo_profiles import scaled

from slurm_fair.estimates.gavel import ThroughputTable
from slurm_fair.sim.slurmlike import Node, SlurmModel, replay_slurm
from slurm_fair.sim.workload import TraceJob, make_workload

NODES = [Node("a100-01", "a100", 4), Node("a100-02", "a100", 4), Node("v100-01", "v100", 4)]
SPEEDS = {"a100": 1.0, "v100": 0.5}


def _table(jobs: list[TraceJob], speeds: dict[str, float] = SPEEDS) -> ThroughputTable:
    return ThroughputTable({k: {(j.job_type, j.gpus): v for j in jobs} for k, v in speeds.items()}, source="test")


def run(jobs: list[TraceJob], limits: dict[str, float | None], nodes=NODES, model: SlurmModel | None = None,
        weights=None):
    records, _ = replay_slurm(make_workload(jobs, weights or {}, ["test"]), nodes, _table(jobs), limits,
                              model or SlurmModel())
    return {r.job_id: r for r in records}


def job(i: str, gpus: int, work: float, at: float, tenant: str = "t", nodes: int | None = None) -> TraceJob:
    return TraceJob(i, tenant, "x", gpus, work, at, nodes)


def test_nodes_in_name_order_whatever_their_speed():
    # v100-01 is free and named last: the job goes to a100-01 first, the second to a100-02
    r = run([job("1", 4, 100, 0), job("2", 4, 100, 0), job("3", 4, 100, 0)], {})
    assert [r[i].gpu_type for i in "123"] == ["a100", "a100", "v100"]
    assert r["3"].end_s - r["3"].start_s == 200  # half as fast on v100


def test_backfill_starts_a_short_job_that_ends_before_the_reservation():
    limits = {"big": 1000.0, "long": 5000.0, "short": 300.0, "head": 1000.0}
    jobs = [job("head", 8, 1000, 0),                 # a100-01 and a100-02 until 1000 s
            job("big", 12, 1000, 10),                # needs every node: reserved at 1000 s
            job("short", 4, 100, 20),                # fits on v100 and ends by 1000 s: backfilled
            job("long", 4, 2000, 30)]                # would still hold v100 at 1000 s: waits
    r = run(jobs, limits)
    assert r["big"].start_s == 1000
    assert r["short"].start_s == 30 and r["short"].end_s <= 1000
    assert r["long"].start_s >= r["big"].end_s


def test_main_scheduler_stops_at_the_first_job_that_waits():
    # without backfill's plan (no limits: the partition's longest), a later small job still waits
    # behind the head until a backfill pass finds it cannot delay the head
    limits: dict[str, float | None] = {"head": 1000.0, "big": 1000.0, "small": 1000.0}
    r = run([job("head", 8, 1000, 0), job("big", 12, 1000, 1), job("small", 4, 1000, 2)], limits)
    # small on v100 would hold it until 2000 s (v100 at half speed, limit 1000: it would end at
    # its limit at 1002 s, after big's reservation at 1000 s): it must not start before big
    assert r["big"].start_s == 1000
    assert r["small"].start_s >= 1000


def test_a_job_that_needs_longer_than_its_limit_ends_at_it():
    r = run([job("a", 4, 100, 0), job("b", 4, 100, 0), job("slow", 4, 150, 0)], {"slow": 200.0})
    assert r["slow"].gpu_type == "v100" and r["slow"].end_s - r["slow"].start_s == 200  # needed 300


def test_a_gang_spanning_types_runs_at_its_slowest():
    nodes = [Node("a100-01", "a100", 4), Node("v100-01", "v100", 4)]
    r = run([job("g", 8, 100, 0, nodes=2)], {}, nodes)
    assert r["g"].gpu_type == "v100" and r["g"].end_s == 200
    assert dict(r["g"].gpu_seconds) == {"a100": 800.0, "v100": 800.0}


def test_fairshare_puts_the_tenant_that_used_less_first():
    nodes = [Node("a100-01", "a100", 4)]
    jobs = [job("heavy1", 4, 3600, 0, "heavy"), job("heavy2", 4, 100, 10, "heavy"), job("light", 4, 100, 20, "light")]
    fifo = run(jobs, {}, nodes)
    fair = run(jobs, {}, nodes, SlurmModel(priority="fairshare"))
    assert fifo["heavy2"].start_s < fifo["light"].start_s
    assert fair["light"].start_s < fair["heavy2"].start_s


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 14))
    jobs, limits = [], {}
    for i in range(n):
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        work = draw(st.integers(10, 2000))
        jobs.append(job(f"j{i}", gpus, work, draw(st.integers(0, 3000)), draw(st.sampled_from("uv")),
                        2 if gpus == 8 else None))
        limits[f"j{i}"] = draw(st.sampled_from([None, 2.0 * work, 4.0 * work, 0.5 * work]))
    return jobs, limits


@settings(max_examples=scaled(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from(["fifo", "fairshare"]))
def test_never_more_than_a_node_holds_and_never_preempted(case, priority):
    jobs, limits = case
    r = run(jobs, limits, model=SlurmModel(priority=priority))
    assert set(r) == {j.id for j in jobs}  # every gang fits some nodes here: every job ran
    for j in jobs:
        rec = r[j.id]
        assert rec.start_s is not None and rec.end_s is not None and rec.start_s >= j.arrival_s
        assert not rec.runs  # one run: Slurm never stopped it
        limit = limits[j.id] or max(v for v in limits.values() if v) if any(limits.values()) else None
        if limit is not None:
            assert rec.end_s - rec.start_s <= limit + 1e-6
    # per type, at every start, the GPUs held never exceed the type's nodes
    cap = {k: sum(n.gpus for n in NODES if n.gpu_type == k) for k in SPEEDS}
    for t in {rec.start_s for rec in r.values()}:
        held: dict[str, float] = {}
        for rec in r.values():
            if rec.start_s <= t < rec.end_s:
                for k, s in rec.gpu_seconds.items():
                    held[k] = held.get(k, 0.0) + s / (rec.end_s - rec.start_s)
        assert all(held[k] <= cap[k] + 1e-6 for k in held)


def test_no_job_starts_before_it_arrives_after_the_queue_emptied():
    """A backfill tick that passed while nothing waited is not run later in the past: the 1-GPU
    job arriving at 31 behind a blocked gang once started at 30 (found by the test above)."""
    jobs = [job("j0", 8, 10, 31, "u", 2), job("j1", 1, 10, 0, "u"), job("j2", 1, 10, 22, "u"),
            job("j3", 1, 10, 31, "u"), job("j4", 4, 10, 22, "u")]
    r = run(jobs, {j.id: None for j in jobs}, model=SlurmModel(priority="fifo"))
    assert all(r[j.id].start_s >= j.arrival_s for j in jobs)
    assert r["j3"].start_s == 32.0  # behind j0 (fifo) until j2 and j4 end, then both start
