"""Issue 39: the controller's problem carries what a site knows of a job's size (its time limit)
and charges every GPU a tenant holds to it."""

from __future__ import annotations

from slurm_fair.controller.history import History
from slurm_fair.controller.problem import build_problem
from slurm_fair.controller.scope import Scope, read_pilot
from slurm_fair.controller.steer import partition_types
from slurm_fair.estimates.estimate import Estimate

from .builders import cluster, job, snapshot


def _built(snap, ids):
    pilot = read_pilot(snap, {}, Scope.of())
    est = {j: Estimate(j, {"v100": 1.0, "k80": 1.0}, {"v100": "flat", "k80": "flat"}) for j in ids}
    return build_problem(pilot.view.snapshot, est, History(), {}, partition_types(snap.nodes), False, pilot.asked)


def test_the_time_limit_is_the_size_the_policy_sees():
    built = _built(snapshot(cluster(v100=8, k80=4), [job("l", "a", time_limit_min=120), job("n", "a")]), ["l", "n"])
    jobs = {j.id: j for j in built.problem.jobs}
    assert jobs["l"].extra["time_limit_s"] == 7200.0 and jobs["l"].remaining_work is None
    assert "time_limit_s" not in jobs["n"].extra
