"""How a pending job is sent to a GPU type (pure): its partition, or its gres request.

Slurm 22.05 can type a pending job's GPU request once and never undo it: re-typing asks for
both types (the job then waits forever), un-typing is refused (docs/slurm-adapter.md). A rule of
slurm-fair is that ``revert`` can undo everything, so by default an untyped job is *steered*
instead: moved to a partition whose nodes carry only the planned GPU type. Its request stays
untyped, the original partition is in the state store before the move, and ``revert`` moves it
back. Rewriting the request itself (``[controller].pin_gres_type``) is done only where the
adapter says Slurm can undo it (``can_retype_gpu()``, Slurm >= 23.11).

The map type -> partition comes from the snapshot, never from names: a partition all of whose
nodes carry GPUs of exactly one type ``k`` is a partition of ``k``. When several are, the one
with the most nodes of ``k`` wins (then the name, for a stable choice).
"""

from __future__ import annotations

from typing import Iterable, Mapping

from ..gangs import can_hold
from ..slurm.model import Node, Partition, SlurmJob

def partition_types(nodes: Iterable[Node]) -> dict[str, frozenset[str]]:
    """Partition -> the GPU types of its nodes (a node without GPUs adds the empty type ``""``)."""
    out: dict[str, set[str]] = {}
    for n in nodes:
        types = {k for k, c in n.gpus_total.items() if c > 0} or {""}
        for p in n.partitions:
            out.setdefault(p, set()).update(types)
    return {p: frozenset(t) for p, t in out.items()}


def type_partition_lists(nodes: Iterable[Node]) -> dict[str, tuple[str, ...]]:
    """GPU type -> every partition whose nodes carry only that type, the preferred first (the
    most nodes, then by name): where its jobs may be steered (module docstring)."""
    nodes = list(nodes)
    ptypes = partition_types(nodes)
    size: dict[str, int] = {}
    for n in nodes:
        for p in n.partitions:
            size[p] = size.get(p, 0) + 1
    out: dict[str, list[str]] = {}
    for p, types in ptypes.items():
        if len(types) != 1 or "" in types:
            continue
        (k,) = types
        out.setdefault(k, []).append(p)
    return {k: tuple(sorted(ps, key=lambda p: (-size.get(p, 0), p))) for k, ps in out.items()}


def type_partitions(nodes: Iterable[Node]) -> dict[str, str]:
    """GPU type -> the partition to steer its jobs to by default (the first of
    :func:`type_partition_lists`; the submit plugin's plan file names this one)."""
    return {k: ps[0] for k, ps in type_partition_lists(nodes).items()}


def job_partitions(partition: str) -> list[str]:
    """``gpu,v100`` (a job submitted to several partitions) -> ``["gpu", "v100"]``."""
    return [p for p in (s.strip() for s in (partition or "").split(",")) if p]


def reachable_types(partition: str, ptypes: Mapping[str, frozenset[str]]) -> frozenset[str] | None:
    """GPU types a job submitted to ``partition`` may run on; None when a partition is unknown
    (then nothing is restricted: the snapshot does not know it, Slurm does)."""
    out: set[str] = set()
    for p in job_partitions(partition):
        if p not in ptypes:
            return None
        out |= ptypes[p]
    return frozenset(out - {""})


def partition_type(partition: str, ptypes: Mapping[str, frozenset[str]]) -> str | None:
    """The one GPU type a job in ``partition`` can get, or None when it could get several."""
    types = reachable_types(partition, ptypes)
    return next(iter(types)) if types is not None and len(types) == 1 else None


def current_type(job: SlurmJob, ptypes: Mapping[str, frozenset[str]]) -> str | None:
    """The type a pending job will get as it stands: its typed request, else its partition's."""
    if job.gpu_request is not None and job.gpu_request.gpu_type:
        return job.gpu_request.gpu_type
    return partition_type(job.partition, ptypes)


def partition_holds(job: SlurmJob, partition: str, nodes: Iterable[Node]) -> bool:
    """Whether the schedulable nodes of ``partition`` that can host the job (CPUs, memory)
    could hold its GPU gang, all of them free, with GPUs of the types it may get there (a
    typed request: that type only). Slurm keeps a job it cannot hold pending for ever
    (``BadConstraints``): the controller never sends a job where this is false."""
    want = job.gpu_request.gpu_type if job.gpu_request else None
    sizes: dict[str, list[int]] = {}
    for n in nodes:
        if partition not in n.partitions or not n.schedulable or not n.can_host(job):
            continue
        for k, c in n.gpus_total.items():
            if want is None or k == want:
                sizes.setdefault(k, []).append(int(c))
    return any(can_hold(job.shape, counts) for counts in sizes.values())


def holds_key(job: SlurmJob, partition: str, typed: str | None = None) -> tuple[object, ...]:
    """Everything :func:`partition_holds` reads of a job (with ``typed``: of the job with its
    request pinned to that type), with the partition: equal keys, equal answers (for a memo
    over a cycle's thousands of jobs)."""
    req = job.gpu_request
    want = (typed if typed is not None else req.gpu_type) if req else None
    return (partition, want, job.min_cpus, job.min_memory_mb, job.shape)


def user_choice(job: SlurmJob, asked: str, asked_nodes: str) -> str | None:
    """Why the job's partition, GPU request and node list are its owner's to decide (None: the
    controller may steer it). A user who asked for several partitions, for nodes, against
    nodes, for a reservation or for features has chosen where it runs; a held job or one
    waiting for a dependency is not ready to run, and its owner may still change it."""
    if len(job_partitions(asked)) > 1:
        return "asked for several partitions"
    if asked_nodes:
        return "asked for nodes"
    if job.exc_nodes:
        return "excludes nodes"
    if job.reservation:
        return "runs in a reservation"
    if job.features:
        return "asks for node features"
    if job.held:
        return "held"
    if job.waits_for_dependency:
        return "waits for a dependency"
    return None


def admits(target: Partition, job: SlurmJob, asked: Iterable[Partition],
           groups: Mapping[str, frozenset[str] | None] | None = None) -> bool:
    """Whether the job may be moved into ``target``: it is UP; its rules admit the job's
    account, QOS, user's groups (``groups`` None or a user it cannot resolve: only partitions
    open to all groups), time limit and node count; its tier is not above the tier of any
    partition the job asked for (a higher tier would schedule it ahead of other accounts' jobs,
    and under partition preemption could preempt them); and every one of its nodes is a node
    the job asked for (steering only narrows the job's own choice)."""
    asked = list(asked)
    if target.state != "UP" or not asked:
        return False
    if target.allow_accounts is not None and job.account not in target.allow_accounts:
        return False
    if job.account in target.deny_accounts:
        return False
    if target.allow_qos is not None and job.qos not in target.allow_qos:
        return False
    if job.qos in target.deny_qos:
        return False
    if target.allow_groups is not None:
        mine = groups.get(job.user) if groups else None
        if not mine or not (mine & target.allow_groups):
            return False
    if target.max_time_min is not None and (job.time_limit_min is None or job.time_limit_min > target.max_time_min):
        return False
    if target.max_nodes is not None and (job.shape.nodes_needed or 1) > target.max_nodes:
        return False
    if target.priority_tier > max(p.priority_tier for p in asked):
        return False
    allowed = {n for p in asked for n in p.nodes}
    return set(target.nodes) <= allowed
