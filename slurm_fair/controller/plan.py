"""Phase 5 (pure): from the allocation and this round's placement to the state Slurm should have.

Nothing here reads or writes Slurm; the plan is a value the diff compares with a snapshot.

**Per tenant** (a Slurm account): a QOS ``fair_<account>`` with a ``GrpTRES`` limit on every GPU
type of the cluster, attached to the account as its default QOS. The limit on type ``k`` is::

    N_uk = min(C_k, max(ceil(y_uk - 1e-6), placed_uk) + ceil(slack * C_k))

``y_uk`` is the tenant's bundle (``sum g_j x_jk``, a fractional number of GPUs averaged over
time); rounding it *up* lets a tenant run a gang that its share covers only part of the time
(the rounding step decides which round), and ``placed_uk`` (GPUs of its jobs this round's
placement puts on ``k``) makes sure the limit never blocks the placement itself. ``slack`` (a
fraction of the type's capacity, ``[controller].slack``) is the work-conserving margin: with
``0`` the limits are strict; with e.g. ``0.1`` each tenant may go 10% of a type beyond its share
when those GPUs would otherwise sit idle. A type the tenant has no share of gets an explicit
limit of ``ceil(slack * C_k)`` (0 when strict), because a missing limit would mean "unlimited".

**Per pending GPU job**: its QOS (the tenant's), its GPU type and its place in line.

* Type: the placement's type when this round runs it; otherwise its current type when the
  allocation still gives it time there (no churn), else the type with the largest ``x_jk``, else
  its fastest type. A fixed type (typed request, single-type partition: :mod:`.problem`) is
  never changed.
* How the type is enforced (:mod:`.steer`): by default the job moves to the partition of that
  type (``partition``; reversible, the request stays untyped); with ``pin_gres`` (only on a
  Slurm that can undo it) its gres request is rewritten to the type (``gpu_type``). A type
  without a partition of its own cannot be steered: the job stays in (or goes back to) its
  original partition and is listed in ``info["unsteered"]``.
* ``total_limit`` adds ``GrpTRES=gres/gpu=<sum of the typed limits>`` to each tenant's QOS:
  typed limits bind typed requests only (checked on 22.05: an untyped job ran in a partition
  of ``k`` under ``gres/gpu:k=1`` while using 2), the total binds every GPU request.
* Order, ``[controller].order``: ``nice`` (default) puts the jobs this round places at the
  user's own nice value and all other pending GPU jobs ``NICE_BACK`` behind it. Nice is an
  offset on the multifactor priority, so fair-share, age and QOS keep ordering jobs *within*
  each tier, and the values only change when the placement does (a quiet second cycle writes
  nothing). ``priority`` sets ``Priority=`` from the job's rank: a total order that follows the
  plan exactly, but it freezes multifactor priority for those jobs (Slurm stops updating it
  until ``revert``), and ranks move whenever jobs arrive, so it writes more.

**Time-sharing** (opt-in: ``--requeue`` plus ``fair:preemptible``): at a round boundary, a
running opted-in job that has run at least one round and that this round's placement does not
keep on its type is requeued. Jobs are never cancelled.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from ..model import Allocation, Problem, Snapshot, SlurmJob, frozen_map
from .estimates import preemptible
from .steer import current_type

#: nice added to pending GPU jobs this round does not place (order = nice)
NICE_BACK = 100_000
#: priorities used with order = priority: placed jobs from PRIORITY_TOP down, the rest below
PRIORITY_TOP = 1_000_000
PRIORITY_REST = 500_000
QOS_PREFIX = "fair_"


def qos_name(account: str) -> str:
    """``fair_<account>``: Slurm QOS names are lower case; anything odd becomes ``_``."""
    return QOS_PREFIX + re.sub(r"[^a-z0-9_-]", "_", account.lower())


#: the untyped total of GPUs in GrpTRES
TOTAL_KEY = "gres/gpu"


def gres_key(gpu_type: str) -> str:
    return f"gres/gpu:{gpu_type}"


def is_gpu_tres(key: str) -> bool:
    """``gres/gpu`` or ``gres/gpu:<type>``: the GrpTRES keys slurm-fair manages."""
    return key == TOTAL_KEY or key.startswith(TOTAL_KEY + ":")


@dataclass(frozen=True)
class PlanSettings:
    slack: float = 0.0
    order: str = "nice"
    round_s: float = 360.0
    #: partition -> its GPU types; GPU type -> the partition jobs are steered to (:mod:`.steer`)
    ptypes: Mapping[str, frozenset[str]] = field(default_factory=dict)
    type_partition: Mapping[str, str] = field(default_factory=dict)
    #: rewrite the gres request instead of moving the job (only where Slurm can undo it)
    pin_gres: bool = False
    #: add the untyped total ``gres/gpu`` to every tenant's limits
    total_limit: bool = False


@dataclass(frozen=True)
class TenantPlan:
    tenant: str
    qos: str
    #: GrpTRES per ``gres/gpu:<type>``
    limits: Mapping[str, int]
    bundle: Mapping[str, float]
    fair_share: Mapping[str, float]
    weight: float = 1.0

    def __post_init__(self) -> None:
        for name in ("limits", "bundle", "fair_share"):
            object.__setattr__(self, name, frozen_map(getattr(self, name)))


@dataclass(frozen=True)
class JobPlan:
    job_id: str
    tenant: str
    qos: str
    #: the type to write into the gres request, None: leave the request as it is
    gpu_type: str | None
    rank: int
    placed: bool
    nice: int | None = None
    priority: int | None = None
    #: the partition to move the job to, None: leave it where it is
    partition: str | None = None
    #: the type the job is meant to run on (fixed or chosen), whichever way it is enforced
    planned_type: str | None = None


@dataclass(frozen=True)
class Plan:
    """The desired state: QOS per tenant, settings per pending job, jobs to requeue."""

    tenants: Mapping[str, TenantPlan]
    jobs: Mapping[str, JobPlan]
    requeue: tuple[str, ...] = ()
    gpu_types: tuple[str, ...] = ()
    policy: str = ""
    status: str = "optimal"
    info: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenants", frozen_map(self.tenants))
        object.__setattr__(self, "jobs", frozen_map(self.jobs))

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy, "status": self.status, "gpu_types": list(self.gpu_types),
            "requeue": list(self.requeue), "info": dict(self.info),
            "tenants": {t: _fields(p) for t, p in self.tenants.items()},
            "jobs": {j: _fields(p) for j, p in self.jobs.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Plan":
        return cls(
            tenants={t: TenantPlan(**p) for t, p in d.get("tenants", {}).items()},
            jobs={j: JobPlan(**p) for j, p in d.get("jobs", {}).items()},
            requeue=tuple(d.get("requeue", ())), gpu_types=tuple(d.get("gpu_types", ())),
            policy=d.get("policy", ""), status=d.get("status", ""), info=d.get("info", {}),
        )

    def restricted_to(self, live_jobs: set[str]) -> "Plan":
        """The same plan for the jobs that still exist (re-using a last good plan)."""
        return Plan(
            self.tenants, {j: p for j, p in self.jobs.items() if j in live_jobs}, (),
            self.gpu_types, self.policy, self.status, self.info,
        )


def _fields(obj: Any) -> dict[str, Any]:
    """A frozen dataclass as plain JSON-able data (``asdict`` cannot copy mapping proxies)."""
    return {f.name: (dict(v) if isinstance(v := getattr(obj, f.name), Mapping) else v) for f in fields(obj)}


def tenant_limits(
    bundle: Mapping[str, float], placed: Mapping[str, int], capacity: Mapping[str, int], slack: float,
    total: bool = False,
) -> dict[str, int]:
    """``N_uk`` of the module docstring for one tenant, keyed by ``gres/gpu:<type>``; with
    ``total`` also ``gres/gpu`` = their sum (at most the cluster's GPUs)."""
    out = {}
    for k, cap in capacity.items():
        base = max(math.ceil(bundle.get(k, 0.0) - 1e-6), placed.get(k, 0))
        out[gres_key(k)] = int(min(cap, base + math.ceil(slack * cap - 1e-9)))
    if total:
        out[TOTAL_KEY] = int(min(sum(capacity.values()), sum(out.values())))
    return out


def choose_type(
    job: SlurmJob, x: Mapping[str, float], placed_type: str | None, throughput: Mapping[str, float],
    capacity: Mapping[str, int],
    current: str | None = None,
) -> str | None:
    """The type to send a pending job to (module docstring, "Type"); ``current`` is the type it
    would get as it stands (default: its request's type)."""
    if placed_type:
        return placed_type
    if current is None:
        current = job.gpu_request.gpu_type if job.gpu_request else None
    if current and x.get(current, 0.0) > 1e-9:
        return current
    positive = {k: v for k, v in x.items() if v > 1e-9}
    if positive:
        return max(sorted(positive), key=lambda k: positive[k])
    usable = [k for k in sorted(throughput) if throughput[k] > 0 and capacity.get(k, 0) > 0]
    if not usable:
        return current
    return max(usable, key=lambda k: (throughput[k], capacity.get(k, 0)))


def make_plan(
    snapshot: Snapshot,
    problem: Problem,
    allocation: Allocation,
    placed_types: Mapping[str, str],
    deficit: Mapping[str, float],
    fixed_type: Mapping[str, str],
    base_nice: Mapping[str, int],
    settings: PlanSettings,
    round_boundary: bool,
    base_partition: Mapping[str, str] | None = None,
) -> Plan:
    """The desired state for this cycle (pure; see the module docstring). ``base_partition``:
    the partition each job had before our first change (where an unsteerable job goes back)."""
    base_partition = base_partition or {}
    capacity = {k: int(c) for k, c in problem.gpu_types.items()}
    by_id = {j.job_id: j for j in snapshot.jobs}
    pjobs = {j.id: j for j in problem.jobs}
    total_w = sum(problem.weight(t) for t in problem.active_tenants) or 1.0

    tenants: dict[str, TenantPlan] = {}
    for t in problem.active_tenants:
        bundle: dict[str, float] = {}
        placed: dict[str, int] = {}
        for j in problem.jobs_of(t):
            for k, xv in allocation.x.get(j.id, {}).items():
                bundle[k] = bundle.get(k, 0.0) + j.gpus * float(xv)
            if j.id in placed_types:
                k = placed_types[j.id]
                placed[k] = placed.get(k, 0) + j.gpus
        w = problem.weight(t)
        share = {k: w / total_w * c for k, c in capacity.items()}
        tenants[t] = TenantPlan(
            t, qos_name(t), tenant_limits(bundle, placed, capacity, settings.slack, settings.total_limit),
            {k: round(v, 6) for k, v in bundle.items() if v > 1e-9},
            {k: round(v, 6) for k, v in share.items()}, w,
        )

    pending = [by_id[j] for j in pjobs if j in by_id and by_id[j].pending]
    # place in line: this round's jobs first, then by deficit, then first come first served
    def line_key(sj: SlurmJob) -> tuple:
        submitted = sj.submit_time.timestamp() if sj.submit_time else 0.0
        return (0 if sj.job_id in placed_types else 1, -round(deficit.get(sj.job_id, 0.0), 9),
                submitted, sj.job_id)

    jobs: dict[str, JobPlan] = {}
    unsteered: dict[str, str] = {}
    for rank, sj in enumerate(sorted(pending, key=line_key), start=1):
        placed = sj.job_id in placed_types
        gpu_type = partition = None
        planned = fixed_type.get(sj.job_id)
        if planned is None:
            planned = choose_type(
                sj, allocation.x.get(sj.job_id, {}), placed_types.get(sj.job_id),
                pjobs[sj.job_id].throughput, capacity, current_type(sj, settings.ptypes),
            )
            if planned and settings.pin_gres:
                gpu_type = planned
            elif planned:
                partition = settings.type_partition.get(planned)
                if partition is None:
                    unsteered[sj.job_id] = planned
                    partition = base_partition.get(sj.job_id, sj.partition)
        nice = priority = None
        if settings.order == "nice":
            nice = int(base_nice.get(sj.job_id, sj.nice)) + (0 if placed else NICE_BACK)
        else:
            priority = (PRIORITY_TOP if placed else PRIORITY_REST) - rank
        jobs[sj.job_id] = JobPlan(sj.job_id, sj.account, qos_name(sj.account), gpu_type, rank, placed,
                                  nice, priority, partition, planned)

    requeue: list[str] = []
    if round_boundary:
        now = snapshot.taken_at.timestamp()
        for j in problem.jobs:
            sj = by_id.get(j.id)
            if sj is None or not sj.running or not preemptible(sj):
                continue
            ran = now - sj.start_time.timestamp() if sj.start_time else 0.0
            if ran >= settings.round_s and placed_types.get(j.id) != sj.gpu_type_running:
                requeue.append(j.id)
    return Plan(
        tenants, jobs, tuple(sorted(requeue)), tuple(sorted(capacity)), allocation.policy,
        allocation.status, {"unsteered": unsteered} if unsteered else {},
    )
