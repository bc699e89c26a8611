"""Aggregation of identical jobs into groups: the key to solving big problems fast.

(A *group* is this LP aggregate; a workload *class* is what a job trains, ``fair:class=NAME``,
:mod:`slurm_fair.estimates.classes`; the two are different things.)

Jobs of the same tenant with the same GPU count and the same normalised throughput vector are
interchangeable in every model of docs/fairness.md (utilities, bundles and the fairness constraints
are sums over jobs). One variable ``X_ck`` per group and type (the group's total time on ``k``,
``0 <= sum_k X_ck <= m_c``) replaces ``m_c`` per-job variables; the group's time is then split
equally over its jobs, which is feasible and gives the same sums. Gavel's scaling study draws
job types from a table of a few dozen entries, so thousands of jobs become a few hundred groups.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Job, Problem

_DIGITS = 12


@dataclass(frozen=True)
class JobGroup:
    """``count`` interchangeable jobs: tenant, gang size ``gpus``, normalised throughputs ``n``."""

    key: int
    tenant: str
    gpus: int
    n: dict[str, float]
    job_ids: tuple[str, ...]

    @property
    def count(self) -> int:
        return len(self.job_ids)


def normalised_vector(job: Job, types: list[str]) -> dict[str, float]:
    """:meth:`Job.normalised` over the problem's ``types``, types the job cannot use left out."""
    return {k: n for k in types if (n := job.normalised(k)) > 0}


def groups_of(problem: Problem, jobs: list[Job] | None = None) -> list[JobGroup]:
    """The classes of ``jobs`` (default: all the problem's jobs), in first-seen order."""
    types = problem.types
    groups: dict[tuple, list[Job]] = {}
    vectors: dict[tuple, dict[str, float]] = {}
    for job in problem.jobs if jobs is None else jobs:
        n = normalised_vector(job, types)
        key = (job.tenant, int(job.gpus), tuple(round(n.get(k, 0.0), _DIGITS) for k in types))
        groups.setdefault(key, []).append(job)
        vectors.setdefault(key, n)
    return [
        JobGroup(i, key[0], key[1], vectors[key], tuple(j.id for j in members))
        for i, (key, members) in enumerate(groups.items())
    ]
