"""Gangs get their turn on real Slurm: which pending gangs of the problem are past their wait
bound (pure: no Slurm call, no clock).

The bound is the simulator's (:func:`slurm_fair.fairness.overdue_ratio`): a waiting gang is
*overdue* once it waited at least a round and ``reserve_after_lr`` times its age. The
simulator knows a job's work; the controller does not, so the age here is the job's time
limit, Slurm's own prediction of its run time (the one its backfill scheduler plans with). A
job without a time limit is never overdue, as Slurm's backfill cannot plan around one either.
Users write limits of days, so ``reserve_after_lr`` times the limit alone could be weeks:
``reserve_after_h`` (default 4) makes a gang overdue after that many hours whatever its limit
(issue 39). Once overdue it waits at most for the jobs holding the GPUs it will get to end, which
their own time limits bound (Slurm ends a job at its limit), or to be requeued where they opted
in. The wait is the time since the job was first seen (Slurm resets ``SubmitTime`` at a requeue;
the problem keeps the first sighting) minus the time it ran.

What follows is the rounding step's single rule (:func:`slurm_fair.rounding.place` with
``overdue``): overdue gangs are served first, and one that cannot fit because jobs that cannot
be stopped hold the GPUs becomes the top job of its type (``Placement.reserved_for``). The
plan makes it the first of the pilot's pending jobs competing for that type by pushing those
down (:mod:`.plan.order`; the gang itself is never raised), so Slurm's backfill scheduler,
which plans the start of the pending jobs in priority order and starts a lower one only where
it delays none above it, keeps the nodes it will need (docs/controller.md, "Gangs get their
turn").
"""

from __future__ import annotations

from typing import Mapping

from ..fairness import overdue_ratio, wait_s
from ..model import Problem
from ..slurm.model import SlurmJob


def overdue(problem: Problem, jobs: Mapping[str, SlurmJob], round_s: float, bound: float | None,
            cap_s: float = 0.0) -> dict[str, float]:
    """The pending gangs (more than one GPU) of ``problem`` past the bound -> their latency
    ratio (wait over the age the rule took). ``jobs``: the snapshot's jobs by id. A single GPU
    is never kept from a job by fragmentation, so 1-GPU jobs are never overdue (the simulator's
    rule). ``cap_s`` (``reserve_after_h``; 0: none): a gang is also overdue once it waited
    that long, whatever its time limit: users write limits of days, and ``bound`` times a
    limit of three days is a week, not a bound a site accepts. The age is then taken as
    ``min(limit, cap_s / bound)``, so the one rule (:func:`overdue_ratio`) decides both."""
    if not bound:
        return {}
    out: dict[str, float] = {}
    for job in problem.jobs:
        sj = jobs.get(job.id)
        if sj is None or not sj.pending or job.gpus <= 1 or not sj.time_limit_min:
            continue
        waited = wait_s(job.age_s or 0.0, job.attained_s)
        limit = 60.0 * sj.time_limit_min
        ratio = overdue_ratio(waited, min(limit, cap_s / bound) if cap_s > 0 else limit, round_s, bound)
        if ratio is not None:
            out[job.id] = ratio
    return out
