"""Frozen value types shared by every layer.

Two families live here:

* the **allocation problem** of one cycle (:class:`Job`, :class:`Problem`, :class:`Allocation`),
  exactly the objects of ``docs/fairness.md``: policies, the simulator, reports and tests speak it;
* the **Slurm view** (:class:`Node`, :class:`GpuRequest`, :class:`SlurmJob`, :class:`Account`,
  :class:`Qos`, :class:`Snapshot`): what the adapter reads from a live cluster. The controller
  turns a Snapshot into a Problem; policies never see Slurm types.

Everything is immutable so a snapshot or a problem can be shared between phases and threads
without defensive copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Mapping

from .gangs import Shape, can_hold

def frozen_map(m: Mapping | None) -> Mapping:
    """A read-only view of a copy of ``m`` (dataclasses stay hashable-ish and immutable)."""
    return MappingProxyType(dict(m or {}))


# --------------------------------------------------------------------------------------------
# The allocation problem (docs/fairness.md)
# --------------------------------------------------------------------------------------------


def normalised_throughput(throughput: Mapping[str, float], gpu_type: str) -> float:
    """``n_jk = T_jk / max_k' T_jk'`` in [0, 1]: the one definition of the normalised throughput
    (:meth:`Job.normalised`, job classes, reports and simulator records all call it).

    0 for a type the job cannot use (``T_jk`` missing or 0) and for a job that can run nowhere:
    no time on such a type has any value. (A job whose speed is *unknown* is another matter: the
    callers give it flat throughputs, 1 on every type, before asking.)"""
    best = max(throughput.values(), default=0.0)
    return float(throughput.get(gpu_type, 0.0)) / best if best > 0 else 0.0


@dataclass(frozen=True)
class Job:
    """One GPU job of the cycle's problem.

    ``throughput[k]`` is ``T_jk``: work units per second on ``gpus`` GPUs of type ``k``; a type
    that is missing or 0 means the job cannot run there.

    The optional fields after ``age_s`` are history that dynamic policies (FFT, Hadar, Hops,
    gavel-ftf) and the rounding step use; static policies ignore them.
    """

    id: str
    tenant: str
    gpus: int
    throughput: Mapping[str, float]
    remaining_work: float | None = None
    age_s: float | None = None
    #: seconds this job has run so far (any type)
    attained_s: float = 0.0
    #: the GPU type it ran on in the previous round, if any (for switching penalties)
    prev_type: str | None = None
    #: free-form extra fields (state, requested type, ...) carried through unchanged
    extra: Mapping[str, object] = field(default_factory=dict)
    #: the gang's geometry (:mod:`slurm_fair.gangs`): GPUs on each of its nodes, or any split
    #: over at most ``max_nodes`` nodes; both None: any split (a problem without nodes)
    gpus_per_node: int | None = None
    max_nodes: int | None = None
    #: the nodes whose CPUs and memory can host one part of the job (None: any node)
    hosts: frozenset[str] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "throughput", frozen_map(self.throughput))
        object.__setattr__(self, "extra", frozen_map(self.extra))
        if self.hosts is not None:
            object.__setattr__(self, "hosts", frozenset(self.hosts))

    @property
    def shape(self) -> Shape:
        return Shape(self.gpus, self.gpus_per_node, self.max_nodes)

    @property
    def best_throughput(self) -> float:
        """``max_k T_jk`` (0 if the job can run nowhere)."""
        return max(self.throughput.values(), default=0.0)

    def normalised(self, gpu_type: str) -> float:
        """``n_jk`` (:func:`normalised_throughput`)."""
        return normalised_throughput(self.throughput, gpu_type)


@dataclass(frozen=True)
class NodeCapacity:
    """Optional node structure of a problem: GPUs of one type on one server.

    ``speed`` is a per-node throughput factor (Hops' server-level heterogeneity, 1.0 = nominal).
    """

    name: str
    gpu_type: str
    gpus: int
    speed: float = 1.0


@dataclass(frozen=True)
class Problem:
    """The allocation problem of one cycle: capacities ``C_k``, tenant weights ``w_u``, jobs."""

    gpu_types: Mapping[str, int]
    tenants: Mapping[str, float]
    jobs: tuple[Job, ...]
    nodes: tuple[NodeCapacity, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpu_types", frozen_map(self.gpu_types))
        weights = {j.tenant: 1.0 for j in self.jobs}
        weights.update(self.tenants or {})
        object.__setattr__(self, "tenants", frozen_map(weights))
        object.__setattr__(self, "jobs", tuple(self.jobs))
        object.__setattr__(self, "nodes", tuple(self.nodes))

    @property
    def types(self) -> list[str]:
        """GPU type names in a stable order."""
        return sorted(self.gpu_types)

    @property
    def active_tenants(self) -> list[str]:
        """Tenants with at least one job: only they take part in the cycle (docs/fairness.md)."""
        return sorted({j.tenant for j in self.jobs})

    def jobs_of(self, tenant: str) -> list[Job]:
        return [j for j in self.jobs if j.tenant == tenant]

    def weight(self, tenant: str) -> float:
        return float(self.tenants.get(tenant, 1.0))

    def holds(self, job: Job, gpu_type: str) -> bool:
        """Whether the type's capacity could hold the job's gang (:func:`type_holds`)."""
        return type_holds(job, gpu_type, self.nodes, int(self.gpu_types.get(gpu_type, 0)))


def type_holds(job: Job, gpu_type: str, nodes: tuple[NodeCapacity, ...], capacity: int) -> bool:
    """Whether GPUs of ``gpu_type`` could hold the job's gang, all of them free: per node when
    there is node structure (only the nodes in ``job.hosts``; :mod:`slurm_fair.gangs`), else by
    the type's GPU count. A type that cannot must get ``T_jk = 0``: no policy may give the job
    time where no node can hold it."""
    if job.gpus > capacity:
        return False
    if not nodes:
        return True
    return can_hold(job.shape, (n.gpus for n in nodes
                                if n.gpu_type == gpu_type and (job.hosts is None or n.name in job.hosts)))


@dataclass(frozen=True)
class Allocation:
    """A policy's answer: ``x[job][type]`` time fractions, plus how it was obtained.

    ``status`` is ``optimal`` for a solved model, ``fallback`` when the documented equal split
    replaced a failed solve, ``heuristic`` for policies without a model (fifo).

    The fields after ``solve_seconds`` are what other layers read from an answer (the rounding
    step, the simulator, ``slurm-fair solve``); ``info`` holds free-form diagnostics that are
    printed (``solve``'s JSON) but that no code reads.
    """

    policy: str
    x: Mapping[str, Mapping[str, float]]
    status: str = "optimal"
    solver: str = "none"
    solve_seconds: float = 0.0
    #: nodes the policy chose for a job (``{job: (node, ...)}``, Hops): the rounding step tries
    #: them first when the job is placed on their type
    nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: copies of a job the policy added to ``x`` (``{copy: job}``, HadarE): the simulator runs
    #: them as members of one job
    forks: Mapping[str, str] = field(default_factory=dict)
    #: ``E*``, when the policy computed it anyway (oef), so ``solve`` need not solve it again
    efficiency_bound: float | None = None
    #: why the model failed, when ``status`` is ``fallback``
    fallback_reason: str | None = None
    info: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "x", frozen_map({j: frozen_map(v) for j, v in (self.x or {}).items()})
        )
        object.__setattr__(self, "nodes", frozen_map({j: tuple(v) for j, v in self.nodes.items()}))
        object.__setattr__(self, "forks", frozen_map(self.forks))
        object.__setattr__(self, "info", frozen_map(self.info))

    def fraction(self, job_id: str, gpu_type: str) -> float:
        return float(self.x.get(job_id, {}).get(gpu_type, 0.0))


# --------------------------------------------------------------------------------------------
# The Slurm view
# --------------------------------------------------------------------------------------------

#: node states whose GPUs count as schedulable capacity (base state, flags stripped)
SCHEDULABLE_NODE_STATES = frozenset({"idle", "mixed", "mix", "allocated", "alloc", "completing"})


@dataclass(frozen=True)
class Node:
    """One Slurm node: its state and typed GPUs (several types per node are allowed)."""

    name: str
    state: str
    gpus_total: Mapping[str, int]
    gpus_used: Mapping[str, int] = field(default_factory=dict)
    partitions: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    cpus: int = 0
    #: RealMemory in MB (0: unknown)
    memory_mb: int = 0
    #: PriorityTier of each of its partitions: Slurm tries a job's partitions highest tier first
    tiers: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus_total", frozen_map(self.gpus_total))
        object.__setattr__(self, "gpus_used", frozen_map(self.gpus_used))
        object.__setattr__(self, "tiers", frozen_map(self.tiers))

    def can_host(self, job: "SlurmJob") -> bool:
        """Whether this node's CPUs and memory can hold one node's part of ``job`` (unknown
        sizes, 0, never exclude)."""
        if job.min_cpus and self.cpus and job.min_cpus > self.cpus:
            return False
        return not (job.min_memory_mb and self.memory_mb and job.min_memory_mb > self.memory_mb)

    @property
    def schedulable(self) -> bool:
        """Up and not draining: ``idle``/``mixed``/``allocated`` without DRAIN/DOWN flags."""
        s = self.state.lower()
        if any(flag in s for flag in ("drain", "down", "fail", "maint", "reserved", "not_responding")):
            return False
        base = s.rstrip("*~#!%$@^-+").split("+")[0]
        return base in SCHEDULABLE_NODE_STATES


@dataclass(frozen=True)
class GpuRequest:
    """A job's GPU request in any of Slurm's syntaxes, normalised.

    ``per`` says what ``count`` is per: ``node`` (``--gres=gpu:N``, ``--gpus-per-node``),
    ``job`` (``--gpus=N``), ``task`` (``--gpus-per-task``). ``raw`` keeps Slurm's own string so
    the original request can be restored exactly.
    """

    count: int
    gpu_type: str | None
    per: str = "node"
    nodes: int = 1
    raw: str = ""
    #: number of tasks (``-n``): ``--gpus-per-task`` jobs get ``count * tasks`` GPUs
    tasks: int = 1

    @property
    def total(self) -> int:
        """GPUs of the whole job (the ``g_j`` of the problem)."""
        if self.per == "task":
            return self.count * self.tasks
        return self.count * self.nodes if self.per == "node" else self.count


@dataclass(frozen=True)
class SlurmJob:
    """A pending or running job as Slurm reports it."""

    job_id: str
    name: str
    user: str
    account: str
    partition: str
    qos: str
    state: str
    reason: str = ""
    submit_time: datetime | None = None
    start_time: datetime | None = None
    priority: int = 0
    nice: int = 0
    gpu_request: GpuRequest | None = None
    #: the GPU type it actually got, when running
    gpu_type_running: str | None = None
    nodes: tuple[str, ...] = ()
    comment: str = ""
    #: parsed ``fair:key=value`` tags of the comment (user text, parsed defensively)
    tags: Mapping[str, str] = field(default_factory=dict)
    requeue: bool = False
    #: CPUs and memory (MB) it needs on each node (0: nothing asked; squeue cannot tell
    #: ``--mem-per-cpu`` from ``--mem``, so this is the number as printed)
    min_cpus: int = 0
    min_memory_mb: int = 0
    #: the most nodes it may use (squeue prints the node count when unlimited, so a free
    #: ``--gpus=N`` request without ``-N`` reads as "on as many nodes as it asks for": the safe side)
    max_nodes: int = 0
    #: administrators' comment (users cannot set it): where the submit plugin records the
    #: partition a job asked for before it chose one (``slurm-fair:partition=...``)
    admin_comment: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tags", frozen_map(self.tags))

    @property
    def is_gpu_job(self) -> bool:
        return self.gpu_request is not None and self.gpu_request.total > 0

    def gpus_on_nodes(self) -> dict[str, int]:
        """GPUs a running job holds on each of its nodes (a free split: spread evenly, which
        is what Slurm does for ``--gpus`` with ``-N``)."""
        req = self.gpu_request
        if req is None or not self.nodes:
            return {}
        if req.per == "node":
            return {n: req.count for n in self.nodes}
        share, extra = divmod(req.total, len(self.nodes))
        return {n: share + (1 if i < extra else 0) for i, n in enumerate(self.nodes)}

    @property
    def shape(self) -> Shape:
        """The gang's geometry (:mod:`slurm_fair.gangs`): ``--gres``/``--gpus-per-node`` are
        per node on exactly ``-N`` nodes; ``--gpus``/``--gpus-per-task`` any split over at most
        ``max_nodes`` nodes."""
        req = self.gpu_request
        if req is None:
            return Shape(0)
        if req.per == "node":
            return Shape(req.total, req.count, req.nodes)
        return Shape(req.total, None, max(self.max_nodes, req.nodes, 1))

    @property
    def pending(self) -> bool:
        return self.state.upper() == "PENDING"

    @property
    def running(self) -> bool:
        return self.state.upper() == "RUNNING"


@dataclass(frozen=True)
class Account:
    """A Slurm account = a tenant; ``shares`` become its weight."""

    name: str
    shares: float = 1.0
    qos: tuple[str, ...] = ()
    default_qos: str = ""


@dataclass(frozen=True)
class Qos:
    """A Slurm QOS and its group TRES limits (``{"gres/gpu:v100": 8}``)."""

    name: str
    grp_tres: Mapping[str, int] = field(default_factory=dict)
    priority: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "grp_tres", frozen_map(self.grp_tres))


@dataclass(frozen=True)
class Snapshot:
    """One consistent read of the cluster, taken at ``taken_at``."""

    taken_at: datetime
    nodes: tuple[Node, ...]
    jobs: tuple[SlurmJob, ...]
    accounts: tuple[Account, ...] = ()
    qos: tuple[Qos, ...] = ()
    cluster: str = ""

    def capacity(self) -> dict[str, int]:
        """Schedulable GPUs per type: nodes up and not drained only (docs/fairness.md ``C_k``)."""
        cap: dict[str, int] = {}
        for node in self.nodes:
            if not node.schedulable:
                continue
            for gpu_type, n in node.gpus_total.items():
                cap[gpu_type] = cap.get(gpu_type, 0) + int(n)
        return cap

    def gpu_jobs(self) -> list[SlurmJob]:
        """Pending and running GPU jobs: the jobs of the allocation problem."""
        return [j for j in self.jobs if j.is_gpu_job and (j.pending or j.running)]


@dataclass(frozen=True)
class AccountingRecord:
    """One job (allocation) from Slurm accounting (sacct): the source of truth for reports."""

    job_id: str
    account: str
    user: str
    state: str
    gpu_type: str | None
    gpus: int
    submit_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None
    elapsed_s: float
    partition: str = ""
    name: str = ""
    comment: str = ""
    #: nodes of the allocation (sacct NNodes): with ``gpus``, the gang's shape
    nodes: int = 1

    @property
    def shape(self) -> Shape:
        """The gang as it ran: ``gpus / nodes`` on each of ``nodes`` nodes."""
        return Shape(self.gpus, max(1, self.gpus // max(1, self.nodes)), self.nodes)

    @property
    def gpu_seconds(self) -> float:
        return self.gpus * self.elapsed_s
