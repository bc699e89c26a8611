"""Snapshot -> Problem: what ``slurm-fair snapshot --json`` prints (a valid PROBLEM.json).

* ``gpu_types``: schedulable GPUs per type (:meth:`Snapshot.capacity`: nodes up, not drained).
* ``tenants``: every account with a GPU job; weight = its Slurm fair-share ``Share`` (raw
  shares; ``parent`` or none = 1), overridden by ``[tenants.NAME] weight`` in the config.
* ``jobs``: pending and running GPU jobs; ``gpus`` = the job's total GPUs (``g_j``).

Throughput estimates until the throughput model is wired in (:func:`default_throughputs`) —
a documented default, not a measurement:

1. a ``fair:class=NAME`` tag naming a job type of the embedded Gavel table (compared without
   case and punctuation; a prefix such as ``resnet50`` picks the matching type with the smallest
   batch size, numbers compared as numbers) -> the table's measured steps/s of that type on the job's GPU count (with the table's
   own fallback for unmeasured counts);
2. otherwise the *mean normalised* Gavel throughput per GPU type over all 1-GPU job types,
   times the GPU count: a typical job's relative speed on each type;
3. a GPU type the table does not know (``a100``, untyped ``gpu``...) gets the job's best known
   value: without a measurement we do not pretend a type is slower (heterogeneity-agnostic
   there). A job on a cluster none of whose types are known gets 1.0 per GPU everywhere.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache
from typing import Mapping

from ..model import Job, Problem, SlurmJob, Snapshot
from ..throughput_table import ThroughputTable, load

_ALNUM = re.compile(r"[^a-z0-9]")


def _norm(name: str) -> str:
    return _ALNUM.sub("", name.lower())


@lru_cache(maxsize=1)
def _table() -> ThroughputTable:
    return load()


@lru_cache(maxsize=1)
def _mean_normalised() -> dict[str, float]:
    """Mean over 1-GPU Gavel job types of ``T_jk / max_k T_jk``, per table GPU type."""
    table = _table()
    types = [k for k in table.gpu_types if not k.endswith("_unconsolidated")]
    sums = {k: 0.0 for k in types}
    n = 0
    for job_type in table.job_types:
        row = {k: table.data[k].get((job_type, 1), 0.0) for k in types}
        best = max(row.values(), default=0.0)
        if best <= 0:
            continue
        n += 1
        for k in types:
            sums[k] += row[k] / best
    return {k: s / n for k, s in sums.items()} if n else {}


def _natural(name: str) -> list:
    """Sort key comparing digit runs as numbers (batch size 16 before 128)."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", name.lower())]


def match_class(tag: str | None) -> str | None:
    """The Gavel job type a ``fair:class`` tag names, or None."""
    if not tag:
        return None
    want = _norm(tag)
    if not want:
        return None
    names = sorted(_table().job_types, key=_natural)
    for name in names:
        if _norm(name) == want:
            return name
    for name in names:
        if _norm(name).startswith(want):
            return name
    return None


def default_throughputs(job: SlurmJob, gpu_types: list[str]) -> dict[str, float]:
    """The documented default ``T_jk`` of a job over the cluster's GPU types (module doc)."""
    gpus = job.gpu_request.total if job.gpu_request else 1
    return dict(_throughputs(job.tags.get("class"), gpus, tuple(gpu_types)))


@lru_cache(maxsize=4096)
def _throughputs(tag: str | None, gpus: int, gpu_types: tuple[str, ...]) -> tuple[tuple[str, float], ...]:
    """Memoised by (class tag, GPU count, types): 10,000 jobs share a few dozen answers."""
    table = _table()
    job_type = match_class(tag)
    known: dict[str, float] = {}
    for k in gpu_types:
        if k in table.data:
            known[k] = (
                table.lookup(job_type, gpus, k) if job_type else _mean_normalised().get(k, 0.0) * gpus
            )
    fill = max(known.values(), default=0.0) or float(gpus)
    return tuple((k, known.get(k, fill)) for k in gpu_types)


def tenant_weights(snapshot: Snapshot, overrides: Mapping[str, Mapping[str, object]] | None = None) -> dict[str, float]:
    """Weights of the snapshot's GPU tenants: Slurm shares, then config overrides."""
    shares = {a.name: float(a.shares) for a in snapshot.accounts}
    weights: dict[str, float] = {}
    for job in snapshot.gpu_jobs():
        weights[job.account] = shares.get(job.account, 1.0)
    for name, table in (overrides or {}).items():
        if name in weights and "weight" in table:
            weights[name] = float(table["weight"])  # type: ignore[arg-type]
    return weights


def job_extra(job: SlurmJob) -> dict[str, object]:
    """Fields beside the standard ones, for the controller and for humans."""
    req = job.gpu_request
    extra: dict[str, object] = {
        "state": job.state.lower(),
        "name": job.name,
        "partition": job.partition,
        "qos": job.qos,
        "requested_type": req.gpu_type if req else None,
        "original_request": req.raw if req else "",
        "per": req.per if req else "",
    }
    if job.nodes:
        extra["nodes"] = list(job.nodes)
    if job.gpu_type_running:
        extra["running_type"] = job.gpu_type_running
    if job.tags:
        extra["tags"] = dict(job.tags)
    return extra


def snapshot_to_problem(
    snapshot: Snapshot,
    tenant_config: Mapping[str, Mapping[str, object]] | None = None,
    now: datetime | None = None,
) -> Problem:
    """The allocation problem of ``snapshot`` (module doc for every choice)."""
    capacity = snapshot.capacity()
    types = sorted(capacity)
    now = now or snapshot.taken_at
    jobs = []
    for sj in snapshot.gpu_jobs():
        age = (now - sj.submit_time).total_seconds() if sj.submit_time else None
        jobs.append(
            Job(
                id=sj.job_id,
                tenant=sj.account,
                gpus=sj.gpu_request.total,  # type: ignore[union-attr]  (gpu_jobs: not None)
                throughput=default_throughputs(sj, types),
                age_s=max(0.0, age) if age is not None else None,
                extra=job_extra(sj),
            )
        )
    return Problem(gpu_types=capacity, tenants=tenant_weights(snapshot, tenant_config), jobs=tuple(jobs))
