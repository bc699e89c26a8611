"""controller/reserve.py (overdue gangs, nodes to drain, SiteFactor order) and
controller/trigger.py (a cycle on job ends), both pure."""

from __future__ import annotations

from datetime import datetime, timedelta

from slurm_fair.controller.reserve import reservations, site_factors
from slurm_fair.controller.trigger import JobEndTrigger
from slurm_fair.slurm.model import GpuRequest, Node, Partition, SlurmJob, Snapshot

NOW = datetime(2026, 1, 1, 12, 0, 0)


def _job(jid: str, state: str, waited_h: float, gpus: int = 4, gpu_type: str | None = "v100",
         limit_min: int | None = 60, exc: tuple[str, ...] = ()) -> SlurmJob:
    return SlurmJob(jid, "j", "u", "acct", "gpu", "normal", state, submit_time=NOW - timedelta(hours=waited_h),
                    gpu_request=GpuRequest(gpus, gpu_type), time_limit_min=limit_min, exc_nodes=exc)


def _snapshot(*jobs: SlurmJob) -> Snapshot:
    nodes = (Node("a", "MIXED", {"v100": 4}, {"v100": 3}), Node("b", "MIXED", {"v100": 4}, {"v100": 1}),
             Node("c", "DRAIN", {"v100": 4}, {}), Node("d", "IDLE", {"k80": 2}, {}))
    return Snapshot(NOW, nodes, jobs, partitions=(Partition("gpu", ("a", "b", "c", "d")),))


def test_only_allocated_pending_jobs_past_the_bound_are_overdue_most_overdue_first() -> None:
    snap = _snapshot(_job("g1", "PENDING", 3.0), _job("g2", "PENDING", 5.0), _job("young", "PENDING", 1.5),
                     _job("run", "RUNNING", 9.0), _job("left", "PENDING", 9.0), _job("nolimit", "PENDING", 9.0, limit_min=None))
    found = reservations(snap, {"g1", "g2", "young", "run", "nolimit"}, {}, NOW, reserve_after_lr=2.0)
    assert [r.job_id for r in found] == ["g2", "g1"]
    assert found[0].ratio == 5.0 and found[1].ratio == 3.0
    # the expected run time, when known, replaces the time limit
    assert [r.job_id for r in reservations(snap, {"young"}, {"young": 600.0}, NOW)] == ["young"]


def test_the_node_to_drain_is_the_least_used_one_that_can_hold_the_gang_and_is_up() -> None:
    snap = _snapshot(_job("g", "PENDING", 3.0))
    (r,) = reservations(snap, {"g"}, {}, NOW)
    assert r.gpu_type == "v100" and r.nodes == ("b",)  # c is drained, d has no v100
    snap = _snapshot(_job("g", "PENDING", 3.0, exc=("b",)))
    assert reservations(snap, {"g"}, {}, NOW)[0].nodes == ("a",)
    snap = _snapshot(_job("g", "PENDING", 3.0, gpus=8))  # no node holds 8 GPUs: nothing to drain
    assert reservations(snap, {"g"}, {}, NOW)[0].nodes == ()


def test_overdue_jobs_go_above_everything_the_plan_orders() -> None:
    snap = _snapshot(_job("g1", "PENDING", 3.0), _job("g2", "PENDING", 5.0))
    assert site_factors(reservations(snap, {"g1", "g2"}, {}, NOW), top=1000) == {"g2": 1002, "g1": 1001}


def test_a_cycle_is_due_on_the_period_or_on_a_job_end_after_the_gap() -> None:
    t = JobEndTrigger(interval_s=300.0, min_gap_s=30.0)
    assert t.due(set(), 0.0) and t.reason == "period"
    t.cycled({"1", "2"}, 0.0)
    assert not t.due({"1", "2"}, 100.0)
    assert not t.due({"1"}, 10.0)  # a job ended, but within the gap
    assert t.due({"1", "3"}, 40.0) and t.reason == "job end" and t.ended({"1", "3"}) == {"2"}
    t.cycled({"1", "3"}, 40.0)
    assert not t.due({"1", "3", "4"}, 200.0)  # a start is no reason
    assert t.due({"1", "3"}, 340.0) and t.reason == "period"
