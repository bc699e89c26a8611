"""Each seed policy's defining behaviour, on scenarios small enough to reason about by hand."""

from __future__ import annotations

import pytest

from slurm_fair import policies
from slurm_fair.estimates import gavel as tt
from slurm_fair.model import Job, NodeCapacity, Problem
from slurm_fair.policies import PolicyOptions
from slurm_fair.sim import engine
from slurm_fair.sim.cluster import parse_cluster
from slurm_fair.sim.workload import TraceJob, make_workload

from simhelpers import table_from


def _job(jid: str, tenant: str, thr: dict[str, float], gpus: int = 1, **kw) -> Job:
    return Job(id=jid, tenant=tenant, gpus=gpus, throughput=thr, **kw)


def test_seed_policies_are_registered_as_dynamic() -> None:
    for name in ("fft", "hadar", "hadare", "hops"):
        assert policies.get(name).dynamic


def test_hadar_prices_rise_with_load() -> None:
    hadar = policies.get("hadar").allocate

    def final_price(n_jobs: int) -> float:
        # one tenant per job and identical jobs: the utility densities (L, U) stay the same,
        # only the load changes
        jobs = tuple(_job(f"j{i}", f"t{i}", {"v100": 10, "k80": 2}) for i in range(n_jobs))
        alloc = hadar(Problem({"v100": 8, "k80": 8}, {}, jobs), PolicyOptions(state={}))
        return alloc.info["prices"]["v100"]

    prices = [final_price(n) for n in (1, 4, 8, 16)]
    assert prices == sorted(prices) and prices[-1] > prices[0]


def test_hadar_price_function_spans_low_to_high() -> None:
    from slurm_fair.policies.hadar import price

    assert price(0, 8, 1.0, 5.0) == pytest.approx(1.0)
    assert price(8, 8, 1.0, 5.0) == pytest.approx(5.0)
    assert price(2, 8, 1.0, 5.0) < price(6, 8, 1.0, 5.0)


def test_hops_serves_the_highest_latency_ratio_first() -> None:
    """Two GPUs, three 1-GPU jobs of one speed: the two that waited longest relative to their
    size run (A: W/A = 9000 / 100 = 90, C: 500 / 10 = 50), not B (2000 / 1000 = 2) although it
    waited more than C; the plan names their nodes."""
    nodes = (NodeCapacity("v-1", "v100", 1), NodeCapacity("v-2", "v100", 1))
    jobs = (
        _job("A", "t1", {"v100": 10}, age_s=9000, remaining_work=1000),
        _job("B", "t2", {"v100": 10}, age_s=2000, remaining_work=10000),
        _job("C", "t3", {"v100": 10}, age_s=500, remaining_work=100),
    )
    alloc = policies.get("hops").allocate(Problem({"v100": 2}, {}, jobs, nodes), PolicyOptions(state={}))
    assert alloc.x["A"] == {"v100": 1.0} and alloc.x["C"] == {"v100": 1.0} and not alloc.x["B"]
    assert sorted(alloc.nodes["A"] + alloc.nodes["C"]) == ["v-1", "v-2"]


def test_hops_puts_jobs_on_fast_nodes() -> None:
    """The gain counts node speed: with one slow and one fast V100 node and one job, it runs on
    the fast one."""
    nodes = (NodeCapacity("v-1", "v100", 1, 0.5), NodeCapacity("v-2", "v100", 1, 1.0))
    alloc = policies.get("hops").allocate(
        Problem({"v100": 2}, {}, (_job("j", "t1", {"v100": 10}, age_s=10, remaining_work=100),), nodes),
        PolicyOptions(state={}))
    assert alloc.nodes["j"] == ("v-2",)


def test_hadare_forks_speed_up_a_lone_job_on_an_idle_cluster() -> None:
    table = table_from({"v100": {("A", 1): 10.0}, "p100": {("A", 1): 6.0}, "k80": {("A", 1): 3.0}})
    w = make_workload([TraceJob("a/1", "a", "A", 1, 100000, 0)])
    cluster = parse_cluster("v100=1,p100=1,k80=1")
    cfg = engine.SimConfig(restart_s=30, fork_sync=0.1, check_fairness=False)
    alone = engine.simulate(w, cluster, table, policies.get("hadar"), cfg)
    forked = engine.simulate(w, cluster, table, policies.get("hadare"), cfg)
    assert forked.records[0].end_s < alone.records[0].end_s
    # progress combined as documented: 0.9 * (10 + 6 + 3) steps/s after the 30 s start
    assert forked.records[0].end_s == pytest.approx(30 + 100000 / (0.9 * 19), rel=1e-9)
    assert forked.work_done["a/1"] == pytest.approx(100000)
    # every GPU-second of the copies is the job's
    assert set(forked.records[0].gpu_seconds) == {"v100", "p100", "k80"}


def test_hadare_does_not_fork_over_waiting_jobs() -> None:
    problem = Problem({"v100": 1, "k80": 1}, {}, (_job("a", "A", {"v100": 10, "k80": 3}), _job("b", "B", {"v100": 10, "k80": 3})))
    alloc = policies.get("hadare").allocate(problem, PolicyOptions(state={}))
    assert alloc.forks == {}


@pytest.mark.parametrize("name", ["fft", "hadar", "hadare", "hops"])
def test_seed_policies_run_a_small_trace_to_the_end(name: str) -> None:
    table = tt.load()
    jobs = [
        TraceJob(f"t{i % 3}/{i}", f"t{i % 3}", jt, g, 20000.0, 600.0 * i)
        for i, (jt, g) in enumerate([("ResNet-18 (batch size 32)", 1), ("LM (batch size 20)", 2),
                                     ("A3C", 1), ("Transformer (batch size 64)", 4),
                                     ("CycleGAN", 1), ("ResNet-50 (batch size 128)", 2)])
    ]
    cluster = parse_cluster("v100=2,p100=2,k80=4", gpus_per_node=2)
    res = engine.simulate(make_workload(jobs), cluster, table, policies.get(name), engine.SimConfig(solver="cbc"))
    assert all(r.end_s is not None for r in res.records)
    for job in jobs:
        assert res.work_done[job.id] == pytest.approx(job.total_steps)
