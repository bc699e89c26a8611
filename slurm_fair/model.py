"""Frozen value types of the allocation problem, shared by every layer.

The **allocation problem** of one cycle (:class:`Job`, :class:`Problem`, :class:`Allocation`) is
exactly the objects of ``docs/fairness.md``: policies, the simulator, reports and tests speak it.
The Slurm view the controller builds a Problem from (:class:`~slurm_fair.slurm.model.Snapshot`
and its parts) lives in :mod:`slurm_fair.slurm.model`; policies never see Slurm types.

Everything is immutable so a problem can be shared between phases and threads without
defensive copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from .gangs import Shape, can_hold
from .inputs import number_problem
from .statuses import AllocationStatus

# --- the ranges every input of a problem is held to (PROBLEM.json, traces, --cluster) ---------
# Far beyond any real cluster or job, far below where an LP's coefficients lose their meaning
# (a capacity of 1e23 GPUs or a weight ratio of 1e600 leaves the solvers' tolerances useless).

#: most GPUs of one type, and most GPUs one job may ask for
MAX_GPUS = 1_000_000
#: tenant weights ``w_u`` lie in [MIN_WEIGHT, MAX_WEIGHT]
MIN_WEIGHT, MAX_WEIGHT = 1e-6, 1e6
#: a throughput ``T_jk`` is 0 (the job cannot run there) or in [MIN_THROUGHPUT, MAX_THROUGHPUT]
#: work units per second (a ratio of 1e-312 between two types divides by zero in float)
MIN_THROUGHPUT, MAX_THROUGHPUT = 1e-6, 1e12
#: largest remaining work (work units) and age (seconds) of a job
MAX_QUANTITY = 1e15


def throughput_problem(value: object) -> str | None:
    """Why ``value`` is not a throughput ``T_jk`` (0, or finite in [MIN_THROUGHPUT,
    MAX_THROUGHPUT]), or None: the one check of PROBLEM.json's and throughput tables' values."""
    problem = number_problem(value)
    if problem or value == 0:
        return problem
    if number_problem(value, lo=MIN_THROUGHPUT, hi=MAX_THROUGHPUT):
        return f"must be 0 (the job cannot run there) or in [{MIN_THROUGHPUT:g}, {MAX_THROUGHPUT:g}], got {value!r}"
    return None


def frozen_map(m: Mapping[Any, Any] | None) -> Mapping[Any, Any]:
    """A read-only view of a copy of ``m`` (dataclasses stay hashable-ish and immutable)."""
    return MappingProxyType(dict(m or {}))


# --------------------------------------------------------------------------------------------
# The allocation problem (docs/fairness.md)
# --------------------------------------------------------------------------------------------


def normalised_throughput(throughput: Mapping[str, float], gpu_type: str) -> float:
    """``n_jk = T_jk / max_k' T_jk'`` in [0, 1]: the one definition of the normalised throughput
    (:meth:`Job.normalised`, job groups, reports and simulator records all call it).

    0 for a type the job cannot use (``T_jk`` missing or 0) and for a job that can run nowhere:
    no time on such a type has any value. (A job whose speed is *unknown* is another matter: the
    callers give it flat throughputs, 1 on every type, before asking.)"""
    return relative_speed(throughput.get(gpu_type, 0.0), throughput)


def relative_speed(speed: float, throughput: Mapping[str, float]) -> float:
    """``speed / max_k T_jk``: a rate against the job's fastest type (0 when it has none).

    ``n_jk`` is this for ``T_jk`` itself; the simulator's members, which run on nodes with speed
    factors, measure their actual rate with it (above 1 on a node faster than the type's mean)."""
    best = max(throughput.values(), default=0.0)
    return float(speed) / best if best > 0 else 0.0


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
    #: ``T_jk`` of the gang spread over more nodes than it needs (Gavel's unconsolidated
    #: measurements; Hops' placement sensitivity compares it with ``throughput``). Empty: unknown
    spread_throughput: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "throughput", frozen_map(self.throughput))
        object.__setattr__(self, "extra", frozen_map(self.extra))
        object.__setattr__(self, "spread_throughput", frozen_map(self.spread_throughput))
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
        # read once per tenant by the policies' setup: a scan of every job each time made the
        # equal shares of 512 tenants and 8192 jobs cost a second
        object.__setattr__(self, "_active", tuple(sorted({j.tenant for j in self.jobs})))

    @property
    def types(self) -> list[str]:
        """GPU type names in a stable order."""
        return sorted(self.gpu_types)

    @property
    def active_tenants(self) -> list[str]:
        """Tenants with at least one job: only they take part in the cycle (docs/fairness.md)."""
        return list(self._active)  # type: ignore[attr-defined]

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
    status: str = AllocationStatus.OPTIMAL
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
    #: two levels (docs/oef.md): the tenant-level allocation whose bundles the tenants hold,
    #: ``x`` sharing each tenant's bundle among its jobs by job-level fairness; SI, EF and PE are
    #: properties of these bundles (None: one level, ``x`` itself)
    tenant_x: Mapping[str, Mapping[str, float]] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "x", frozen_map({j: frozen_map(v) for j, v in (self.x or {}).items()})
        )
        object.__setattr__(self, "nodes", frozen_map({j: tuple(v) for j, v in self.nodes.items()}))
        object.__setattr__(self, "forks", frozen_map(self.forks))
        object.__setattr__(self, "info", frozen_map(self.info))
        if self.tenant_x is not None:
            object.__setattr__(self, "tenant_x", frozen_map({j: frozen_map(v) for j, v in self.tenant_x.items()}))

    def fraction(self, job_id: str, gpu_type: str) -> float:
        return float(self.x.get(job_id, {}).get(gpu_type, 0.0))
