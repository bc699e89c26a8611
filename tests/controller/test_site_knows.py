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


def test_a_running_job_left_to_slurm_is_charged_to_its_tenant_and_never_touched():
    """Issue 39, item 4: tenant b runs 4 v100 with ``-C`` (a feature every node has). Before, its
    GPUs were subtracted like an outsider's and b's share was computed as if it held nothing;
    now the job is in the problem, pinned where it runs, marked untouched, counted in b's bundle,
    and the GPUs are in the capacity."""
    from slurm_fair.controller.decide import staying
    from slurm_fair.controller.problem import untouched
    from slurm_fair.fairness import tenant_bundles

    snap = snapshot(cluster(v100=8, k80=4), [
        job("feat", "b", gpus=4, state="RUNNING", running_on="v100", features="fast", comment="fair:preemptible"),
        job("mine", "a"), job("wait", "b", features="fast")])
    built = _built(snap, ["mine", "wait"])  # neither left-out job has an estimate of its own
    jobs = {j.id: j for j in built.problem.jobs}
    assert built.problem.gpu_types["v100"] == 8  # not subtracted as foreign any more
    assert set(jobs) == {"feat", "mine"} and untouched(built.problem) == {"feat"}
    assert dict(jobs["feat"].throughput) == {"v100": 1.0} and jobs["feat"].prev_type == "v100"
    assert "wait" in built.left_out and "wait" not in jobs  # pending: holds nothing, stays out
    x = {"feat": {"v100": 1.0}, "mine": {"v100": 1.0}}
    assert tenant_bundles(built.problem, x)["b"]["v100"] == 4.0
    # opted in to time-sharing, run long enough: still never a requeue candidate
    assert staying(snap, built, 0.0, {}) == {"feat": "v100"}


def test_an_untouched_job_is_never_requeued_to_make_room():
    """The plan's requeues pass over a charged job: the same opted-in job (``--requeue``,
    ``fair:preemptible``, run an hour) is requeued for a pending job placed on its type, unless it
    asked for a feature (then the controller only counts it)."""
    from datetime import timedelta

    from slurm_fair.controller.plan import PlanInputs, make_plan
    from slurm_fair.model import Allocation

    from .builders import T0
    from .test_plan_diff import steering

    def requeued(**extra):
        run = job("1", "a", state="RUNNING", running_on="v100", requeue=True, comment="fair:preemptible",
                  started=T0 - timedelta(hours=1), **extra)
        snap = snapshot(cluster(v100=1), [run, job("5", "b")])
        built = _built(snap, ["1", "5"])
        pilot = read_pilot(snap, {}, Scope.of())
        inputs = PlanInputs({"5": "v100"}, {}, {}, pilot.asked.partitions, round_boundary=True,
                            asked_nodes=pilot.asked.nodes, choices=pilot.asked.choices, owned=pilot.owned,
                            released=pilot.released)
        return make_plan(snap, built.problem, Allocation("test", {"5": {"v100": 1.0}}), inputs, steering(snap)).requeue

    assert requeued() == ("1",)
    assert requeued(features="fast") == ()


def test_a_running_job_seen_late_is_as_old_as_slurm_says():
    """The controller counts service from the cycle it first sees a job: after a restart (an
    empty history) a job Slurm started two hours ago ran two hours, not zero, for the size
    estimate and the aging. Service counted beyond the current start (an earlier run before a
    requeue) is kept: the larger of the two."""
    from datetime import timedelta

    from .builders import T0

    run = job("r", "a", state="RUNNING", running_on="v100", started=T0 - timedelta(hours=2), time_limit_min=600)
    snap = snapshot(cluster(v100=8, k80=4), [run, job("p", "a")])
    jobs = {j.id: j for j in _built(snap, ["r", "p"]).problem.jobs}
    assert jobs["r"].attained_s == 7200.0 and jobs["p"].attained_s == 0.0
    pilot = read_pilot(snap, {}, Scope.of())
    est = {j: Estimate(j, {"v100": 1.0, "k80": 1.0}, {"v100": "flat", "k80": "flat"}) for j in ("r", "p")}
    counted = History(job_service={"r": {"k80": 9000.0, "v100": 600.0}})
    built = build_problem(pilot.view.snapshot, est, counted, {}, partition_types(snap.nodes), False, pilot.asked)
    assert {j.id: j for j in built.problem.jobs}["r"].attained_s == 9600.0
