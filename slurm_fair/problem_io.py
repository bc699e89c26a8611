"""PROBLEM.json and allocation output (FAIRNESS.md): the one reader/writer of both formats.

Loading validates completely (every bad job and field named, exit 2 through InputError);
dumping is the exact inverse so ``load(dump(p)) == p`` for any valid problem.
"""

from __future__ import annotations

from typing import Any

from .model import Job, Problem


def job_to_dict(job: Job) -> dict[str, Any]:
    """One job as a PROBLEM.json entry (extra fields are added beside the standard ones)."""
    out: dict[str, Any] = {
        "id": job.id,
        "tenant": job.tenant,
        "gpus": job.gpus,
        "throughput": dict(job.throughput),
    }
    if job.remaining_work is not None:
        out["remaining_work"] = job.remaining_work
    if job.age_s is not None:
        out["age_s"] = job.age_s
    for key, value in job.extra.items():
        out.setdefault(key, value)
    return out


def problem_to_dict(problem: Problem) -> dict[str, Any]:
    """A problem as a PROBLEM.json document."""
    return {
        "gpu_types": dict(problem.gpu_types),
        "tenants": {t: {"weight": w} for t, w in sorted(problem.tenants.items())},
        "jobs": [job_to_dict(j) for j in problem.jobs],
    }
