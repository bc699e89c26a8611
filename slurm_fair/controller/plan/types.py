"""The plan: the state Slurm should have after a cycle (per tenant, per job, requeues), the
settings it is made with, and its JSON form (``run --json``, the last good plan in the store)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

from ...hysteresis import min_run_or
from ...model import frozen_map
from ...slurm.model import Node, Partition


@dataclass(frozen=True)
class PlanSettings:
    #: how the plan's order is given to Slurm: ``site_factor`` (pushed down, the pilot's jobs
    #: only) or ``none``
    order: str = "site_factor"
    round_s: float = 360.0
    #: partition -> its GPU types; GPU type -> the single-type partitions jobs may be steered
    #: to, best first (:func:`..steer.type_partitions`)
    ptypes: Mapping[str, frozenset[str]] = field(default_factory=dict)
    type_partitions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: the partitions' rules (empty: not read, nothing checked beyond the nodes)
    partitions: Mapping[str, Partition] = field(default_factory=dict)
    #: user -> their groups (None: unknown), read once per cycle for partitions with AllowGroups
    groups: Mapping[str, frozenset[str] | None] | None = None
    #: rewrite the gres request instead of moving the job (only where Slurm can undo it)
    pin_gres: bool = False
    #: hysteresis: a job is requeued only after running this long (None or 0:
    #: :func:`slurm_fair.hysteresis.min_run_s` of the round and the requeue cost)
    min_run_s: float | None = None
    #: what a requeue costs a job (Slurm's requeue hold + a restart), for moves to a faster type
    requeue_cost_s: float = 150.0
    #: a move up needs a type at least this much faster (n_up >= n_cur * (1 + move_up_gain))
    move_up_gain: float = 0.25
    #: schedulable nodes, to check that a partition can hold a job before it is sent there
    nodes: tuple[Node, ...] = ()
    #: whether a partition holds a job, by :func:`..steer.holds_key` (thousands of pending jobs
    #: share a few shapes: each (partition, shape) is computed once per cycle; not copied by
    #: ``replace``, so new nodes never meet old answers)
    holds_memo: dict[tuple[object, ...], bool] = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("ptypes", "type_partitions", "partitions"):
            object.__setattr__(self, name, frozen_map(getattr(self, name)))

    @property
    def min_run(self) -> float:
        return min_run_or(self.min_run_s, self.round_s, self.requeue_cost_s)


@dataclass(frozen=True)
class TenantPlan:
    """What the plan gives a tenant: its bundle (GPUs per type, averaged over time), its fair
    share and weight. Recorded per cycle for ``explain``, the reports and the shadow report."""

    tenant: str
    bundle: Mapping[str, float]
    fair_share: Mapping[str, float]
    weight: float = 1.0

    def __post_init__(self) -> None:
        for name in ("bundle", "fair_share"):
            object.__setattr__(self, name, frozen_map(getattr(self, name)))


@dataclass(frozen=True)
class JobPlan:
    job_id: str
    tenant: str
    #: the type to write into the gres request, None: leave the request as it is
    gpu_type: str | None
    rank: int
    placed: bool
    #: the site factor to give the job (its order among the pilot's jobs), None: leave it
    site_factor: int | None = None
    #: the partition to move the job to, None: leave it where it is
    partition: str | None = None
    #: the type the job is meant to run on (fixed or chosen), whichever way it is enforced
    planned_type: str | None = None
    #: a running job requeued this cycle: these settings are applied right after the requeue
    requeued: bool = False
    #: the node list to write (folded hostlist, "" to clear), None: leave it as it is
    nodes: str | None = None


@dataclass(frozen=True)
class Plan:
    """The desired state: what each tenant gets, settings per pending job, jobs to requeue."""

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
    #: overdue gang -> the type it goes first on (its competitors there pushed below it)
    head: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("tenants", "jobs", "unsteered", "move_up", "head"):
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
        if self.head:
            info["head"] = dict(self.head)
        return {
            "policy": self.policy, "status": self.status, "gpu_types": list(self.gpu_types),
            "requeue": list(self.requeue), "info": info,
            "tenants": {t: _fields(p) for t, p in self.tenants.items()},
            "jobs": {j: _fields(p) for j, p in self.jobs.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Plan":
        """A stored plan; one an older version stored (its QOS, limits, nice) loses those keys."""
        info = d.get("info", {}) or {}
        return cls(
            tenants={t: TenantPlan(**_known(TenantPlan, p)) for t, p in d.get("tenants", {}).items()},
            jobs={j: JobPlan(**_known(JobPlan, p)) for j, p in d.get("jobs", {}).items()},
            requeue=tuple(d.get("requeue", ())), gpu_types=tuple(d.get("gpu_types", ())),
            policy=d.get("policy", ""), status=d.get("status", ""),
            unsteered=info.get("unsteered", {}), requeue_for=info.get("requeue_for", {}),
            move_up=info.get("move_up", {}), head=info.get("head", {}),
        )

    def restricted_to(self, live_jobs: set[str]) -> "Plan":
        """The same plan for the jobs that still exist (re-using a last good plan), without its
        requeues and the settings of jobs it requeued."""
        return replace(self, jobs={j: p for j, p in self.jobs.items() if j in live_jobs and not p.requeued},
                       requeue=())



def _known(cls: type, d: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def _fields(obj: Any) -> dict[str, Any]:
    """A frozen dataclass as plain JSON-able data (``asdict`` cannot copy mapping proxies)."""
    return {name: (dict(v) if isinstance(v := getattr(obj, name), Mapping) else v) for name in _names(type(obj))}


def _names(cls: type) -> tuple[str, ...]:
    """The fields of a plan's dataclass (asked once per class, not once per job of a cycle)."""
    if cls not in _NAMES:
        _NAMES[cls] = tuple(f.name for f in fields(cls))
    return _NAMES[cls]


_NAMES: dict[type, tuple[str, ...]] = {}
