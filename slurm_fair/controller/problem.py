"""Phase 3b: the controller's allocation problem from a snapshot and the estimates.

What the controller knows and a generic Snapshot->Problem conversion does not:

* a job the *user* typed (its original request, before any rewrite of ours, named a GPU type)
  keeps that type: its throughput is zeroed on every other type;
* a running job that has not opted in to time-sharing cannot move: it is pinned to the type it
  runs on (the policy still counts it, so the tenant's share includes what it already holds);
* a gang larger than a type's capacity cannot run there; a job that fits nowhere is left out
  (with a warning) rather than making the whole problem infeasible;
* tenant weights: ``[tenants.NAME].weight`` from the configuration, else the account's Slurm
  shares, else 1;
* history for the rounding step: ``received[j][k]`` is the share of the job's time in the system
  it spent running on ``k``, from the service the state store accumulated.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Mapping

from ..model import Job, Problem, Snapshot, SlurmJob
from .estimates import Estimate, job_tags, preemptible
from .state import OriginalRequest


def user_typed(job: SlurmJob, original: OriginalRequest | None) -> str | None:
    """The GPU type the user asked for, or None when the type is ours to choose.

    Before our first rewrite the job's own request is the user's. A job typed by the submit
    plugin from our plan carries ``fair:auto`` and stays ours to retype.
    """
    if "auto" in job_tags(job):
        return None
    if original is not None:
        return original.gpu_type
    return job.gpu_request.gpu_type if job.gpu_request else None


@dataclass(frozen=True)
class BuiltProblem:
    problem: Problem
    #: jobs left out, with the reason (shown by run and explain)
    left_out: Mapping[str, str]
    #: job -> the type the user fixed (never retyped)
    fixed_type: Mapping[str, str]
    received: Mapping[str, Mapping[str, float]]
    prev: Mapping[str, str]


def _ts(d: datetime | None) -> float | None:
    return d.timestamp() if d is not None else None


def build_problem(
    snapshot: Snapshot,
    estimates: Mapping[str, Estimate],
    originals: Mapping[str, OriginalRequest],
    weights: Mapping[str, float],
    job_service: Mapping[str, Mapping[str, float]] | None = None,
    first_seen: Mapping[str, float] | None = None,
    last_type: Mapping[str, str | None] | None = None,
) -> BuiltProblem:
    """The cycle's :class:`Problem` (pure)."""
    capacity = snapshot.capacity()
    now = snapshot.taken_at.timestamp()
    job_service = job_service or {}
    first_seen = first_seen or {}
    last_type = last_type or {}
    shares = {a.name: a.shares for a in snapshot.accounts}
    jobs: list[Job] = []
    left_out: dict[str, str] = {}
    fixed: dict[str, str] = {}
    received: dict[str, dict[str, float]] = {}
    prev: dict[str, str] = {}
    for sj in snapshot.gpu_jobs():
        est = estimates.get(sj.job_id)
        if est is None:
            left_out[sj.job_id] = "no throughput estimate"
            continue
        g = sj.gpu_request.total if sj.gpu_request else 0
        tput = {k: v for k, v in est.throughput.items() if k in capacity and capacity[k] >= g}
        fixed_type = user_typed(sj, originals.get(sj.job_id))
        if fixed_type:
            fixed[sj.job_id] = fixed_type
            tput = {k: v for k, v in tput.items() if k == fixed_type}
        if sj.running and not preemptible(sj):
            tput = {k: v for k, v in tput.items() if k == sj.gpu_type_running}
        tput = {k: v for k, v in tput.items() if v > 0}
        if not tput:
            left_out[sj.job_id] = "fits on no schedulable GPU type"
            continue
        arrived = _ts(sj.submit_time) or first_seen.get(sj.job_id) or now
        age = max(now - arrived, 0.0)
        service = job_service.get(sj.job_id, {})
        if age > 0:
            received[sj.job_id] = {k: min(s / age, 1.0) for k, s in service.items()}
        p = sj.gpu_type_running if sj.running else last_type.get(sj.job_id)
        if p:
            prev[sj.job_id] = p
        jobs.append(
            Job(
                id=sj.job_id, tenant=sj.account, gpus=g, throughput=tput, age_s=age,
                attained_s=sum(service.values()), prev_type=p,
                extra={"state": sj.state.upper()},
            )
        )
    tenants = {}
    for t in {j.tenant for j in jobs}:
        w = weights.get(t)
        if w is None:
            w = shares.get(t) if shares.get(t, 0) and shares.get(t, 0) > 0 else 1.0
        tenants[t] = float(w)
    problem = Problem(gpu_types={k: c for k, c in capacity.items() if c > 0}, tenants=tenants, jobs=tuple(jobs))
    return BuiltProblem(problem, left_out, fixed, received, prev)
