"""The Slurm view: frozen value types of what the adapter reads from a live cluster.

:class:`Node`, :class:`GpuRequest`, :class:`SlurmJob`, :class:`Account`, :class:`Qos`,
:class:`Snapshot` and :class:`AccountingRecord`. The controller turns a Snapshot into the cycle's
:class:`~slurm_fair.model.Problem` (``controller/problem.py``); policies never see these types.

Everything is immutable so a snapshot can be shared between phases and threads without
defensive copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Mapping

from ..gangs import Shape
from ..model import frozen_map

#: node states whose GPUs count as schedulable capacity (base state, flags stripped)
SCHEDULABLE_NODE_STATES = frozenset({"idle", "mixed", "mix", "allocated", "alloc", "completing", "comp",
                                     "planned", "plnd"})
#: flags (``scontrol``'s ``+FLAG``, lower-cased) that keep a node's GPUs from new jobs: drained or
#: draining, failing, in maintenance or a reservation, not responding, registered wrongly, rebooting
BLOCKING_NODE_FLAGS = frozenset({
    "drain", "drained", "draining", "drng", "drain*", "fail", "failing", "maint", "maintenance",
    "reserved", "resv", "not_responding", "invalid_reg", "invalid", "reboot_issued", "down",
})
#: sinfo's one-character state suffixes (sinfo(1) NODE STATE CODES)
_STATE_SUFFIXES = "*~#!%$@^-"
#: the suffixes that keep a node from new jobs: not responding (``*``), in a maintenance
#: reservation (``$``), reboot issued (``^``), powering down or about to (``%``, ``!``); the others
#: do not (``~`` powered off, ``#`` powering up: Slurm boots it for a job; ``@`` reboot pending;
#: ``-`` planned by the backfill scheduler)
_BLOCKING_SUFFIXES = "*$^%!"


def node_state_schedulable(state: str) -> bool:
    """Whether a node in ``state`` takes new jobs: its base state (before the first ``+``,
    sinfo's suffix characters stripped) is idle/mixed/allocated/completing/planned, no flag
    blocks it (:data:`BLOCKING_NODE_FLAGS`, matched as whole ``+``-separated words, so
    ``POWERED_DOWN`` is not ``DOWN``: a powered-down cloud node is booted by Slurm on demand,
    as sinfo's ``idle~`` says) and no sinfo suffix blocks it (:data:`_BLOCKING_SUFFIXES`:
    ``idle*`` is not responding). Unknown states and flags Slurm may add later: a base state not
    in the list is not schedulable; an unknown flag does not block."""
    s = state.strip().lower()
    if not s:
        return False
    words = s.split("+")
    base = words[0].rstrip(_STATE_SUFFIXES)
    if any(c in _BLOCKING_SUFFIXES for c in words[0][len(base):]):
        return False
    if base not in SCHEDULABLE_NODE_STATES:
        return False
    return not any(w.rstrip(_STATE_SUFFIXES) in BLOCKING_NODE_FLAGS for w in words[1:])


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
        """Up and not draining (:func:`node_state_schedulable`)."""
        return node_state_schedulable(self.state)


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
    #: the nodes it must run on (``--nodelist``/``ReqNodeList``; empty: any)
    req_nodes: tuple[str, ...] = ()
    #: the nodes it must not run on (``--exclude``; read for pending jobs)
    exc_nodes: tuple[str, ...] = ()
    #: ``--time`` in minutes (None: unlimited or not known)
    time_limit_min: int | None = None
    #: ``--reservation``, ``--constraint`` (Slurm's Features), ``--dependency`` ("" for none)
    reservation: str = ""
    features: str = ""
    dependency: str = ""
    #: Slurm's admin priority factor (``scontrol update SiteFactor=``; sprio's weighted ``site``):
    #: None when Slurm did not say (sprio lists only pending jobs eligible to start)
    site_factor: int | None = None

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
    def held(self) -> bool:
        """Held by its user or an administrator: its owner decides when it runs. (By the reason:
        a priority of 0 alone is also what Slurm gives a job it cannot run, ``BadConstraints``.)"""
        return self.pending and self.reason in ("JobHeldUser", "JobHeldAdmin")

    @property
    def waits_for_dependency(self) -> bool:
        """Pending on a dependency that is not satisfied yet (or never will be)."""
        return self.pending and self.reason.startswith("Dependency")

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
class Partition:
    """A Slurm partition and the rules that decide whether a job may be moved into it
    (``scontrol show partition -o``). ``None`` in an allow list means ``ALL``; limits of
    ``None`` mean unlimited. The controller only steers a job into a partition whose rules
    admit it (account, QOS, user's groups, time limit, node count) and whose ``priority_tier``
    is not above the tier of the partition the job asked for (a higher tier would put it ahead
    of other accounts' jobs)."""

    name: str
    nodes: tuple[str, ...] = ()
    state: str = "UP"
    priority_tier: int = 1
    allow_accounts: frozenset[str] | None = None
    deny_accounts: frozenset[str] = frozenset()
    allow_qos: frozenset[str] | None = None
    deny_qos: frozenset[str] = frozenset()
    allow_groups: frozenset[str] | None = None
    #: MaxTime in minutes (None: unlimited)
    max_time_min: int | None = None
    #: MaxNodes (None: unlimited)
    max_nodes: int | None = None
    default: bool = False


@dataclass(frozen=True)
class Snapshot:
    """One consistent read of the cluster, taken at ``taken_at``."""

    taken_at: datetime
    nodes: tuple[Node, ...]
    jobs: tuple[SlurmJob, ...]
    accounts: tuple[Account, ...] = ()
    qos: tuple[Qos, ...] = ()
    cluster: str = ""
    #: the partitions and their rules (empty when the adapter did not read them)
    partitions: tuple[Partition, ...] = ()

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
    #: the time limit in minutes (sacct Timelimit; None: unlimited or not read)
    time_limit_min: int | None = None

    @property
    def shape(self) -> Shape:
        """The gang as it ran: ``gpus / nodes`` on each of ``nodes`` nodes."""
        return Shape(self.gpus, max(1, self.gpus // max(1, self.nodes)), self.nodes)

    @property
    def gpu_seconds(self) -> float:
        return self.gpus * self.elapsed_s


@dataclass(frozen=True)
class PriorityFactors:
    """One line of ``sprio`` for a pending job: the priority Slurm's multifactor plugin gives it
    in one partition and the weighted factors that add up to it. ``explain`` shows them beside
    the controller's decision so a tenant sees which part of the order is Slurm's own."""

    job_id: str
    partition: str
    priority: float
    #: weighted factors: ``age``, ``fairshare``, ``jobsize``, ``partition``, ``qos``, ``site``
    factors: Mapping[str, float]
    #: the nice adjustment (subtracted from the priority)
    nice: int = 0
    #: the weighted TRES factors as sprio prints them (``gres/gpu:v100=120,...``; "" for none)
    tres: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "factors", frozen_map(self.factors))


@dataclass(frozen=True)
class JobOutlook:
    """Slurm's own view of one job now (``squeue -j``): state, pending reason, priority and the
    start time (actual when it runs; the backfill scheduler's estimate when pending, None when
    Slurm has none)."""

    job_id: str
    state: str
    reason: str
    priority: int
    start: datetime | None
