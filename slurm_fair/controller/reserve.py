"""Gangs get their turn on real Slurm: which pending jobs are past their wait bound, which nodes
to drain for each, and the SiteFactor order that makes Slurm's backfill keep those nodes for them.

The simulator's rule (docs/simulator.md, "Reservation"): a waiting job allocated time whose
wait is at least a round and at least ``reserve_after_lr`` times its age is *overdue*. On Slurm
the backfill scheduler already reserves nodes for the pending jobs at the head of the priority
order (it plans their start and starts nothing that would delay it), so a reservation is an
order: overdue jobs get SiteFactors above every other job the controller orders, the most
overdue highest; the nodes named here are the ones Slurm will drain for it (those of its
partition and GPU type whose running jobs hold the fewest GPUs), for the audit log and for an
explicit ``scontrol create reservation`` when the site wants one. Pure: no Slurm call, no clock
(the caller passes ``now``).

Plugs into the controller's decision (``controller/decide.py``) after the policy and the
rounding step: ``reservations(snapshot, allocated, expected_run_s, now, ...)`` with the jobs
the allocation gives time to, then ``site_factors(found, top)`` merged over the plan's
SiteFactors (``top`` = the largest SiteFactor the plan writes).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Collection, Mapping

from ..slurm.model import Node, SlurmJob, Snapshot


@dataclass(frozen=True)
class Reservation:
    """An overdue pending job, its latency ratio so far, and the nodes to drain for it."""

    job_id: str
    ratio: float
    gpu_type: str | None
    nodes: tuple[str, ...]


def waited_s(job: SlurmJob, now: datetime) -> float:
    """Seconds since submission (Slurm resets Submit at a requeue: the wait of this run)."""
    return max(0.0, (now - job.submit_time).total_seconds()) if job.submit_time else 0.0


def reservations(snapshot: Snapshot, allocated: Collection[str], expected_run_s: Mapping[str, float],
                 now: datetime, reserve_after_lr: float = 2.0, min_wait_s: float = 360.0) -> list[Reservation]:
    """The overdue pending GPU jobs among ``allocated`` (the jobs the allocation gives time),
    most overdue first: wait ``>= min_wait_s`` and ``>= reserve_after_lr x A`` with ``A`` the
    job's expected run time (``expected_run_s``, else its time limit; a job with neither is
    never overdue)."""
    out: list[Reservation] = []
    for job in snapshot.jobs:
        if job.state != "PENDING" or job.job_id not in allocated or job.gpu_request is None:
            continue
        age = expected_run_s.get(job.job_id)
        if age is None and job.time_limit_min:
            age = 60.0 * job.time_limit_min
        wait = waited_s(job, now)
        if not age or wait < min_wait_s or wait < reserve_after_lr * age:
            continue
        k, nodes = drain_for(snapshot, job)
        out.append(Reservation(job.job_id, wait / age, k, nodes))
    return sorted(out, key=lambda r: (-r.ratio, r.job_id))


def drain_for(snapshot: Snapshot, job: SlurmJob) -> tuple[str | None, tuple[str, ...]]:
    """The nodes of ``job``'s partition (and GPU type, when it asks for one) that can hold one
    part of its gang, those whose running jobs hold the fewest GPUs first, as many as it needs."""
    req = job.gpu_request
    assert req is not None
    per_node = req.count if req.per == "node" else -(-req.total // max(1, req.nodes))
    part = next((p for p in snapshot.partitions if p.name == job.partition), None)
    names = set(part.nodes) if part is not None and part.nodes else None
    fits: list[tuple[int, str, str]] = []
    for node in snapshot.nodes:
        if (names is not None and node.name not in names) or node.name in job.exc_nodes or not _up(node):
            continue
        for k, total in node.gpus_total.items():
            if (req.gpu_type in (None, k)) and total >= per_node:
                fits.append((node.gpus_used.get(k, 0), node.name, k))
    fits.sort()
    if not fits:
        return req.gpu_type, ()
    k = req.gpu_type or fits[0][2]
    chosen = tuple(n for _, n, t in fits if t == k)[: max(1, req.nodes)]
    return k, chosen


def _up(node: Node) -> bool:
    state = node.state.upper()
    return not any(bad in state for bad in ("DOWN", "DRAIN", "FAIL", "MAINT"))


def site_factors(found: list[Reservation], top: int) -> dict[str, int]:
    """SiteFactors that put the overdue jobs above every job the plan orders (``top``), the
    most overdue highest."""
    return {r.job_id: top + len(found) - i for i, r in enumerate(found)}
