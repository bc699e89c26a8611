"""A requeue made for waiting jobs is carried out only while one of them still waits.

Between the snapshot and the write Slurm may start the jobs a requeue makes room for elsewhere
(the submit plugin sent a new job to a partition, GPUs freed meanwhile). On the testbed (``make
demo``) such a requeue stopped a 4-GPU job for a 1-GPU job that had just started on another type;
the GPUs freed went to a third tenant, and the next cycle requeued another job for that one.
"""

from __future__ import annotations

from slurm_fair.controller.apply import apply
from slurm_fair.controller.diff import Action


def setup(fake):
    victim = fake.submit("alice", "--gres=gpu:1", hold=False, comment="fair:preemptible")
    fake.start(victim, "k80-1", "k80")
    taker = fake.submit("bob", "--gres=gpu:1", hold=False)
    return victim, taker


def requeue(victim, *takers):
    return Action("requeue", "alice", victim, "k80", "PENDING", {"for": tuple(takers), "to_type": None})


def test_not_requeued_when_the_job_it_made_room_for_started_meanwhile(fake):
    victim, taker = setup(fake)
    snap = fake.snapshot()
    fake.start(taker, "p100-1", "p100")  # Slurm started it on another type after the snapshot
    after = Action("set_partition", "alice", victim, "k80", "v100",
                   {"field": "partition", "value": "v100", "partition": "v100", "after_requeue": True})
    res = apply([requeue(victim, taker), after], fake, snap, None, "c1", 0.0)
    assert [(r.applied, r.skipped) for r in res] == [(False, True), (False, True)]
    assert "no longer wait" in res[0].error
    assert fake.job(victim).running and ("requeue", (victim,)) not in fake.calls


def test_not_requeued_when_the_job_it_made_room_for_ended():
    from slurm_fair.slurm.fake import FakeSlurm

    from .builders import cluster

    fake = FakeSlurm(slurm_version="22.05", nodes=cluster(p100=4, k80=4))
    victim, taker = setup(fake)
    snap = fake.snapshot()
    fake._jobs.pop(taker)  # cancelled by its user: Slurm no longer knows it
    res = apply([requeue(victim, taker)], fake, snap, None, "c1", 0.0)
    assert res[0].skipped and fake.job(victim).running


def test_requeued_while_one_of_its_jobs_still_waits(fake):
    victim, taker = setup(fake)
    other = fake.submit("bob", "--gres=gpu:1", hold=False)
    snap = fake.snapshot()
    fake.start(taker, "p100-1", "p100")
    res = apply([requeue(victim, taker, other)], fake, snap, None, "c1", 0.0)
    assert res[0].applied and fake.job(victim).pending


def test_a_move_up_is_requeued_without_asking_slurm_about_anyone(fake):
    victim, _ = setup(fake)
    snap = fake.snapshot()
    move = Action("requeue", "alice", victim, "k80", "PENDING", {"for": (), "to_type": "v100"})
    res = apply([move], fake, snap, None, "c1", 0.0)
    assert res[0].applied and fake.job(victim).pending
