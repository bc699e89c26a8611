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
  its fastest type; the first of these a partition can hold (:func:`rank_types`). A fixed type
  (typed request, single-type partition: :mod:`.problem`) is never changed.
* How the type is enforced (:mod:`.steer`): by default the job moves to the partition of that
  type (``partition``; reversible, the request stays untyped); with ``pin_gres`` (only on a
  Slurm that can undo it) its gres request is rewritten to the type (``gpu_type``). Never
  where no node of the partition could hold the job's gang, CPUs and memory
  (:func:`.steer.partition_holds`): Slurm would keep it pending for ever. A type without a
  partition that holds it cannot be steered: the job stays in (or goes back to) its original
  partition, unplaced, and is listed in :attr:`Plan.unsteered`.
* ``total_limit`` adds ``GrpTRES=gres/gpu=<sum of the typed limits>`` to each tenant's QOS:
  typed limits bind typed requests only (checked on 22.05: an untyped job ran in a partition
  of ``k`` under ``gres/gpu:k=1`` while using 2), the total binds every GPU request.
* Order, ``[controller].order``: ``nice`` (default) puts the jobs this round places a band
  (``NICE_BAND``) ahead of every other pending GPU job, which keeps the user's own nice. Nice is
  an offset on the multifactor priority, so fair-share, age and QOS keep ordering jobs *within*
  each band, and the values only change when the placement does (a quiet second cycle writes
  nothing). ``priority`` sets ``Priority=`` from the job's rank: a total order that follows the
  plan exactly, but it freezes multifactor priority for those jobs (Slurm stops updating it
  until ``revert``), and ranks move whenever jobs arrive, so it writes more.

**Requeues** (opt-in: ``--requeue`` plus ``fair:preemptible``; :mod:`.requeue`): a running job
is requeued to make room for a pending job this round places on the type it holds and that
cannot start otherwise (at a round boundary any such job; between boundaries only a job that
never ran: a new job is let in at once, rotation waits for the round), or to move up to a
faster type whose GPUs stay idle after this plan when the gain beats the cost; never before
``min_run_s`` (default one round), never to restart on the type it holds. A requeued job is then
planned like a pending one in the same cycle (partition of its planned type, its place in line);
Slurm holds it for its credential lifetime + 1 s before it may start again (the controller never
shortens that: a relaunch on the same node sooner fails). Jobs are never cancelled.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

from ..fairness import equal_share, tenant_bundles
from ..model import Allocation, Problem, frozen_map
from ..slurm.model import Node, Snapshot, SlurmJob
from . import requeue as rq
from .steer import current_type, job_partitions, partition_holds, submitted_partition

#: nice taken off the jobs this round places (order = nice): a band above every multifactor
#: priority (the sum of the PriorityWeight* factors is far below it), so they go first and every
#: job keeps its own multifactor order inside its band
NICE_BAND = 10_000_000
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
    #: hysteresis: a job is requeued only after running this long (None or 0: one round)
    min_run_s: float | None = None
    #: what a requeue costs a job (Slurm's requeue hold + a restart), for moves to a faster type
    requeue_cost_s: float = 150.0
    #: a move up needs a type at least this much faster (n_up >= n_cur * (1 + move_up_gain))
    move_up_gain: float = 0.25
    #: schedulable nodes, to check that a partition can hold a job before it is sent there
    nodes: tuple[Node, ...] = ()

    @property
    def min_run(self) -> float:
        return float(self.min_run_s) if self.min_run_s else float(self.round_s)


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
    #: a running job requeued this cycle: these settings are applied right after the requeue
    requeued: bool = False


@dataclass(frozen=True)
class Plan:
    """The desired state: QOS per tenant, settings per pending job, jobs to requeue."""

    tenants: Mapping[str, TenantPlan]
    jobs: Mapping[str, JobPlan]
    requeue: tuple[str, ...] = ()
    gpu_types: tuple[str, ...] = ()
    policy: str = ""
    status: str = "optimal"
    #: job -> the type no partition can steer it to (left in its own partition; run warns)
    unsteered: Mapping[str, str] = field(default_factory=dict)
    #: requeued job -> the pending jobs it makes room for
    requeue_for: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: requeued job -> the faster type it moves up to
    move_up: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("tenants", "jobs", "unsteered", "move_up"):
            object.__setattr__(self, name, frozen_map(getattr(self, name)))
        object.__setattr__(self, "requeue_for", frozen_map({j: tuple(t) for j, t in self.requeue_for.items()}))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (``run --json`` and the state store); the three maps above under ``info``,
        each only when not empty."""
        info: dict[str, Any] = {}
        if self.unsteered:
            info["unsteered"] = dict(self.unsteered)
        if self.requeue_for:
            info["requeue_for"] = {j: list(t) for j, t in self.requeue_for.items()}
        if self.move_up:
            info["move_up"] = dict(self.move_up)
        return {
            "policy": self.policy, "status": self.status, "gpu_types": list(self.gpu_types),
            "requeue": list(self.requeue), "info": info,
            "tenants": {t: _fields(p) for t, p in self.tenants.items()},
            "jobs": {j: _fields(p) for j, p in self.jobs.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Plan":
        info = d.get("info", {}) or {}
        return cls(
            tenants={t: TenantPlan(**p) for t, p in d.get("tenants", {}).items()},
            jobs={j: JobPlan(**p) for j, p in d.get("jobs", {}).items()},
            requeue=tuple(d.get("requeue", ())), gpu_types=tuple(d.get("gpu_types", ())),
            policy=d.get("policy", ""), status=d.get("status", ""),
            unsteered=info.get("unsteered", {}), requeue_for=info.get("requeue_for", {}),
            move_up=info.get("move_up", {}),
        )

    def restricted_to(self, live_jobs: set[str]) -> "Plan":
        """The same plan for the jobs that still exist (re-using a last good plan), without its
        requeues and the settings of jobs it requeued."""
        return replace(self, jobs={j: p for j, p in self.jobs.items() if j in live_jobs and not p.requeued},
                       requeue=())

    def with_tenants(self, extra: Mapping[str, TenantPlan]) -> "Plan":
        """This plan with more tenants (those without jobs whose QOS we manage)."""
        return replace(self, tenants={**self.tenants, **extra})


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
    ranked = rank_types(job, x, placed_type, throughput, capacity, current)
    return ranked[0] if ranked else current


def rank_types(
    job: SlurmJob, x: Mapping[str, float], placed_type: str | None, throughput: Mapping[str, float],
    capacity: Mapping[str, int], current: str | None = None,
) -> list[str]:
    """Every type the job may be sent to, best first: the placement's, its current type while
    the allocation gives it time there, the others by ``x_jk``, then by speed."""
    if current is None:
        current = job.gpu_request.gpu_type if job.gpu_request else None
    usable = [k for k in sorted(throughput) if throughput[k] > 0 and capacity.get(k, 0) > 0]
    positive = {k: v for k, v in x.items() if v > 1e-9 and k in usable}
    first = [placed_type] if placed_type else []
    if current and positive.get(current, 0.0) > 0:
        first.append(current)
    by_x = sorted(positive, key=lambda k: (-positive[k], k))
    by_speed = sorted(usable, key=lambda k: (-throughput[k], -capacity.get(k, 0), k))
    return list(dict.fromkeys(first + by_x + by_speed))


@dataclass(frozen=True)
class PlanInputs:
    """What a cycle's plan is made from besides the problem and its allocation: this round's
    placement (:mod:`slurm_fair.rounding`) and what the controller remembers of each job."""

    #: job -> the type this round's placement runs it on
    placed: Mapping[str, str] = field(default_factory=dict)
    #: job -> how far behind its allocation it is (the place in line)
    deficit: Mapping[str, float] = field(default_factory=dict)
    #: job -> the type it must keep (:func:`.problem.user_typed`)
    fixed_type: Mapping[str, str] = field(default_factory=dict)
    #: nice and partition of each job before our first change
    base_nice: Mapping[str, int] = field(default_factory=dict)
    base_partition: Mapping[str, str] = field(default_factory=dict)
    #: when the controller last requeued each job (epoch seconds)
    last_requeued: Mapping[str, float] = field(default_factory=dict)
    #: a new round starts this cycle (time-sharing may rotate running jobs)
    round_boundary: bool = False


def make_plan(
    snapshot: Snapshot, problem: Problem, allocation: Allocation, inputs: PlanInputs, settings: PlanSettings,
) -> Plan:
    """The desired state for this cycle (pure; see the module docstring)."""
    placed_types, deficit = inputs.placed, inputs.deficit
    base_partition, last_requeued = inputs.base_partition, inputs.last_requeued
    capacity = {k: int(c) for k, c in problem.gpu_types.items()}
    by_id = {j.job_id: j for j in snapshot.jobs}
    pjobs = {j.id: j for j in problem.jobs}
    bundles = tenant_bundles(problem, allocation.x)

    tenants: dict[str, TenantPlan] = {}
    for t in problem.active_tenants:
        placed: dict[str, int] = {}
        for j in problem.jobs_of(t):
            if j.id in placed_types:
                k = placed_types[j.id]
                placed[k] = placed.get(k, 0) + j.gpus
        bundle = bundles[t]
        tenants[t] = TenantPlan(
            t, qos_name(t), tenant_limits(bundle, placed, capacity, settings.slack, settings.total_limit),
            {k: round(v, 6) for k, v in bundle.items() if v > 1e-9},
            {k: round(v, 6) for k, v in equal_share(problem, t).items()}, problem.weight(t),
        )

    pending = [by_id[j] for j in pjobs if j in by_id and by_id[j].pending]
    ctx = _Ctx(by_id, pjobs, allocation, placed_types, deficit, inputs.fixed_type, inputs.base_nice, settings,
               capacity, base_partition)
    jobs, unsteered = _job_plans(pending, ctx)

    # who is requeued (controller/requeue.py): to make room, to move up
    now = snapshot.taken_at.timestamp()
    free = rq.free_gpus(snapshot)
    eligible = [sj for sj in snapshot.jobs
                if sj.job_id in pjobs and rq.eligible(sj, now, settings.min_run, last_requeued)]
    takers = [rq.Taker(by_id[jp.job_id], placed_types[jp.job_id])
              for jp in sorted(jobs.values(), key=lambda jp: jp.rank)
              if jp.job_id in placed_types and sent_to(jp, placed_types[jp.job_id], settings)]
    victims: dict[str, list[SlurmJob]] = {}
    for sj in eligible:
        if placed_types.get(sj.job_id) != sj.gpu_type_running:  # never requeued to restart in place
            victims.setdefault(sj.gpu_type_running or "", []).append(sj)
    for k in victims:
        victims[k].sort(key=lambda sj: (round(deficit.get(sj.job_id, 0.0), 9),
                                        sj.start_time.timestamp() if sj.start_time else now, sj.job_id))
    # at a round boundary any job this round runs may take GPUs (time-sharing); between
    # boundaries only a job that never ran (admission: a new job does not wait for the round)
    startable = [t for t in takers if t.job.reason not in rq.NOT_STARTABLE
                 and (inputs.round_boundary or pjobs[t.job.job_id].attained_s <= 0)]
    requeue_for = rq.make_room(free, startable, victims, _hosts(settings))
    rq.make_room(free, [t for t in takers if t not in startable], {}, _hosts(settings))  # not idle for moves
    movers = sorted((sj for sj in eligible if sj.job_id not in requeue_for),
                    key=lambda sj: (-pjobs[sj.job_id].attained_s, sj.job_id))
    moves = rq.move_up(free, movers, problem, settings.requeue_cost_s, settings.move_up_gain,
                       _hosts(settings),
                       lambda sj, k: _steerable(sj, k, settings, base_partition.get(sj.job_id) or submitted_partition(sj)))
    requeue = sorted(set(requeue_for) | set(moves))
    if requeue:
        # a requeued job is pending as soon as the requeue returns: plan it like one (its type,
        # partition and place in line), so it does not simply restart where it was
        jobs, unsteered = _job_plans(pending + [by_id[j] for j in requeue], ctx,
                                     requeued=set(requeue), moves=moves)
    return Plan(
        tenants, jobs, tuple(requeue), tuple(sorted(capacity)), allocation.policy, allocation.status,
        unsteered, {j: tuple(t) for j, t in requeue_for.items()}, moves,
    )


@dataclass(frozen=True)
class _Ctx:
    """What every job plan of one cycle reads."""

    by_id: Mapping[str, SlurmJob]
    pjobs: Mapping[str, Any]
    allocation: Allocation
    placed_types: Mapping[str, str]
    deficit: Mapping[str, float]
    fixed_type: Mapping[str, str]
    base_nice: Mapping[str, int]
    settings: PlanSettings
    capacity: Mapping[str, int]
    base_partition: Mapping[str, str]


def _hosts(settings: PlanSettings):
    nodes = {n.name: n for n in settings.nodes}
    return lambda sj, name: name not in nodes or nodes[name].can_host(sj)


def _steerable(sj: SlurmJob, k: str, settings: PlanSettings, base: str) -> bool:
    """The job can be sent to type ``k`` and held there (never strand a job): with ``pin_gres``
    a partition it asked for (``base``) has nodes of ``k`` that can hold it typed; else a
    partition of type ``k`` exists and its nodes can hold it."""
    if settings.pin_gres:
        if not settings.nodes:
            return True
        typed = replace(sj, gpu_request=replace(sj.gpu_request, gpu_type=k)) if sj.gpu_request else sj
        return any(partition_holds(typed, p, settings.nodes) for p in job_partitions(base))
    part = settings.type_partition.get(k)
    if part is None:
        return False
    return not settings.nodes or partition_holds(sj, part, settings.nodes)


def _job_plans(
    queue: list[SlurmJob], ctx: _Ctx, requeued: frozenset[str] | set[str] = frozenset(),
    moves: Mapping[str, str] | None = None,
) -> tuple[dict[str, JobPlan], dict[str, str]]:
    """Type, enforcement and place in line of every job of ``queue`` (pending, or requeued now)."""
    moves = moves or {}
    settings = ctx.settings

    def placed_type(job_id: str) -> str | None:
        return moves.get(job_id) or ctx.placed_types.get(job_id)

    # place in line: this round's jobs first, then by deficit, then first come first served
    def line_key(sj: SlurmJob) -> tuple:
        submitted = sj.submit_time.timestamp() if sj.submit_time else 0.0
        return (0 if placed_type(sj.job_id) else 1, -round(ctx.deficit.get(sj.job_id, 0.0), 9),
                submitted, sj.job_id)

    jobs: dict[str, JobPlan] = {}
    unsteered: dict[str, str] = {}
    for rank, sj in enumerate(sorted(queue, key=line_key), start=1):
        placed = placed_type(sj.job_id) is not None
        gpu_type = partition = None
        planned = ctx.fixed_type.get(sj.job_id)
        if planned is None:
            ranked = rank_types(
                sj, ctx.allocation.x.get(sj.job_id, {}), placed_type(sj.job_id),
                ctx.pjobs[sj.job_id].throughput, ctx.capacity, current_type(sj, settings.ptypes),
            )
            base = ctx.base_partition.get(sj.job_id) or submitted_partition(sj)
            ok = [k for k in ranked if _steerable(sj, k, settings, base)]
            planned = ok[0] if ok else (ranked[0] if ranked else None)
            if planned and settings.pin_gres:
                # typed where it asked to run (back there if a plugin or an older cycle moved it)
                gpu_type = planned if ok else None
                partition = base if base != sj.partition else None
            elif planned and ok:
                partition = settings.type_partition[planned]
            elif planned:
                unsteered[sj.job_id] = planned
                partition = ctx.base_partition.get(sj.job_id, sj.partition)
            if placed and planned != placed_type(sj.job_id):
                placed = False  # its placed type cannot be reached: it waits like the others
        nice = priority = None
        if settings.order == "nice":
            nice = own_nice(sj, ctx.base_nice) - (NICE_BAND if placed else 0)
        else:
            priority = (PRIORITY_TOP if placed else PRIORITY_REST) - rank
        jobs[sj.job_id] = JobPlan(sj.job_id, sj.account, qos_name(sj.account), gpu_type, rank, placed,
                                  nice, priority, partition, planned, sj.job_id in requeued)
    return jobs, unsteered


def own_nice(sj: SlurmJob, recorded: Mapping[str, int]) -> int:
    """The job's nice without our band: as recorded before our first change, else as it is,
    unless it already carries the band (only an administrator can set a negative nice, so a
    nice that low is ours: never stack a second band on it)."""
    if sj.job_id in recorded:
        return int(recorded[sj.job_id])
    return sj.nice + NICE_BAND if sj.nice <= -NICE_BAND // 2 else sj.nice


def sent_to(jp: JobPlan, k: str, settings: PlanSettings) -> bool:
    """Whether this cycle's plan sends a pending job to type ``k`` (so it will take GPUs freed
    there): its type is pinned, or it is steered to ``k``'s partition, or it can run on ``k``
    only (a fixed type: the plan leaves partition and request as they are)."""
    if jp.planned_type != k:
        return False
    if jp.gpu_type == k:
        return True
    if jp.partition is None:
        return True
    return jp.partition == settings.type_partition.get(k)
