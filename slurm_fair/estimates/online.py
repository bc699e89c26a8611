"""Step 1 of the order of precedence: the online estimate, an EWMA of reported throughputs.

Running jobs report ``fair:tput=<steps/s>`` in their comment; each report on the type a job
runs on is folded into the exponentially weighted mean of its online key (the class, ``class@G``
for a gang, else ``job:<id>``) on that type: ``new = alpha * value + (1 - alpha) * old``. A job
reporting the same number cycle after cycle counts once (only a changed report is a new
observation), so long jobs do not drown the estimate.

The fold is pure: the controller computes it from the history it read and the state store
saves the rows it changed, so a dry run sees the same estimates as a real cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..slurm.model import SlurmJob
from .estimate import Estimate
from .tags import tag_tput


@dataclass(frozen=True)
class OnlineEstimate:
    """The EWMA of one (key, GPU type): its value, how many reports made it, when last changed."""

    value: float
    observations: int
    updated_at: float


#: online key -> GPU type -> estimate
Online = Mapping[str, Mapping[str, OnlineEstimate]]


@dataclass(frozen=True)
class OnlineUpdate:
    """What one cycle's reports change: the estimates (key, type) and the last report counted
    per (job, type). Both are the rows the state store writes."""

    estimates: Mapping[tuple[str, str], OnlineEstimate] = field(default_factory=dict)
    reported: Mapping[tuple[str, str], float] = field(default_factory=dict)


def values(online: Online) -> dict[str, dict[str, float]]:
    """``{key: {type: steps/s}}``: what :func:`.estimate.estimate_job` reads."""
    return {key: {k: e.value for k, e in by.items()} for key, by in online.items()}


def reporters(jobs: Iterable[SlurmJob]) -> tuple[SlurmJob, ...]:
    """The jobs :func:`observations` reads: running on a known type with a reported rate (the
    only ones whose estimate it needs, a handful among thousands of pending jobs)."""
    return tuple(j for j in jobs if j.running and j.gpu_type_running and tag_tput(j.tags) is not None)


def observations(jobs: Iterable[SlurmJob], estimates: Mapping[str, Estimate]) -> list[tuple[str, str, str, float]]:
    """(job, online key, gpu type, steps/s) reported by running jobs on the type they run on."""
    out = []
    for job in jobs:
        if not job.running or not job.gpu_type_running:
            continue
        v = tag_tput(job.tags)
        est = estimates.get(job.job_id)
        if v is None or est is None:
            continue
        out.append((job.job_id, est.online_key, job.gpu_type_running, v))
    return out


def fold(
    online: Online, reported: Mapping[tuple[str, str], float],
    observed: Iterable[tuple[str, str, str, float]], alpha: float, at: float,
) -> OnlineUpdate:
    """Fold ``observed`` (in order) into ``online``; ``reported[(job, type)]`` is the last
    report already counted. Returns only what changed."""
    changed: dict[tuple[str, str], OnlineEstimate] = {}
    seen: dict[tuple[str, str], float] = {}
    for job_id, key, k, value in observed:
        last = seen.get((job_id, k), reported.get((job_id, k)))
        if last is not None and last == value:
            continue
        seen[(job_id, k)] = value
        old = changed.get((key, k)) or online.get(key, {}).get(k)
        if old is None:
            changed[(key, k)] = OnlineEstimate(value, 1, at)
        else:
            changed[(key, k)] = OnlineEstimate(alpha * value + (1 - alpha) * old.value, old.observations + 1, at)
    return OnlineUpdate(changed, seen)


def updated(online: Online, update: OnlineUpdate) -> dict[str, dict[str, OnlineEstimate]]:
    """``online`` with ``update`` applied."""
    out = {key: dict(by) for key, by in online.items()}
    for (key, k), e in update.estimates.items():
        out.setdefault(key, {})[k] = e
    return out
