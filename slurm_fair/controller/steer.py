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

import re
from typing import Iterable, Mapping

from ..gangs import can_hold
from ..slurm.model import Node, SlurmJob

#: what the submit plugin writes into a job's admin comment when it chooses the partitions:
#: the partition(s) the job asked for (users cannot set an admin comment, so it can be trusted)
SUBMITTED_MARK = "slurm-fair:partition="
_MARK = re.compile(r"(?:^|\s)" + re.escape(SUBMITTED_MARK) + r"([A-Za-z0-9_.-]+(?:,[A-Za-z0-9_.-]+)*)(?:\s|$)")


def partition_types(nodes: Iterable[Node]) -> dict[str, frozenset[str]]:
    """Partition -> the GPU types of its nodes (a node without GPUs adds the empty type ``""``)."""
    out: dict[str, set[str]] = {}
    for n in nodes:
        types = {k for k, c in n.gpus_total.items() if c > 0} or {""}
        for p in n.partitions:
            out.setdefault(p, set()).update(types)
    return {p: frozenset(t) for p, t in out.items()}


def type_partitions(nodes: Iterable[Node]) -> dict[str, str]:
    """GPU type -> the partition to steer its jobs to (module docstring)."""
    nodes = list(nodes)
    ptypes = partition_types(nodes)
    size: dict[str, int] = {}
    for n in nodes:
        for p in n.partitions:
            size[p] = size.get(p, 0) + 1
    best: dict[str, tuple[int, str]] = {}
    for p, types in ptypes.items():
        if len(types) != 1 or "" in types:
            continue
        (k,) = types
        key = (-size.get(p, 0), p)
        if k not in best or key < best[k]:
            best[k] = key
    return {k: p for k, (_, p) in best.items()}


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


def submitted_partition(job: SlurmJob) -> str:
    """The partition(s) the job was submitted to: the submit plugin's record in the admin
    comment when it chose the partitions itself, else the job's partition."""
    m = _MARK.search(job.admin_comment or "")
    return m.group(1) if m else job.partition


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
