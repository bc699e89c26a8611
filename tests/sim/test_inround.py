"""The in-round re-plan of a policy that declares it (Hops): a job waiting for the one GPU starts
when the job ahead of it ends, not at the next round."""

from __future__ import annotations

import pytest

from slurm_fair import policies
from slurm_fair.estimates import gavel as tt
from slurm_fair.sim.cluster import parse_cluster
from slurm_fair.sim.engine import SimConfig, simulate
from slurm_fair.sim.workload import TraceJob, make_workload

JOB = "ResNet-18 (batch size 32)"


def _run(replan: bool) -> dict[str, float]:
    table = tt.load()
    rate = table.lookup(JOB, 1, "v100")
    jobs = [TraceJob("a", "t", JOB, 1, rate * 100.0, 0.0), TraceJob("b", "t", JOB, 1, rate * 100.0, 0.0)]
    res = simulate(make_workload(jobs), parse_cluster("v100=1", 1), table, policies.get("hops"),
                   SimConfig(replan_in_round=replan, check_fairness=False))
    return {r.job_id: r.start_s for r in res.records}


def test_hops_replans_when_the_gpu_frees_up_inside_the_round() -> None:
    assert policies.get("hops").replans and not policies.get("gavel-mmf").replans
    first, second = sorted(_run(True).values())
    assert first == 0.0 and second == pytest.approx(130.0)  # 30 s start latency + 100 s of work
    first, second = sorted(_run(False).values())
    assert second == pytest.approx(360.0)  # the next round
