"""Scenario builders: small readable clusters and queues for the controller's tests."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Sequence

from slurm_fair.slurm.model import Account, GpuRequest, Node, Qos, SlurmJob, Snapshot
from slurm_fair.slurm.parse.tags import parse_tags

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


def node(name: str, gpu_type: str, gpus: int = 4, state: str = "idle", used: int = 0,
         partitions: tuple[str, ...] | None = None) -> Node:
    """A node in the default partition ``gpu`` and in the partition of its type (the layout of
    the testbed and the deployment templates)."""
    parts = ("gpu", gpu_type) if partitions is None else partitions
    return Node(name, state, {gpu_type: gpus}, {gpu_type: used} if used else {}, parts, (), 32)


def cluster(type_partitions: bool = True, **types: int) -> list[Node]:
    """``cluster(v100=8, k80=4)``: one 4-GPU node per 4 GPUs of each type; without
    ``type_partitions`` every node is only in ``gpu``."""
    out = []
    for k, n in types.items():
        for i in range(0, n, 4):
            out.append(node(f"{k}-{i // 4 + 1}", k, min(4, n - i),
                            partitions=None if type_partitions else ("gpu",)))
    return out


def job(
    job_id: str,
    account: str,
    gpus: int = 1,
    gpu_type: str | None = None,
    state: str = "PENDING",
    comment: str = "",
    running_on: str | None = None,
    name: str = "train",
    nice: int = 0,
    qos: str = "normal",
    requeue: bool = False,
    submitted: datetime | None = None,
    started: datetime | None = None,
    per: str = "node",
    partition: str = "gpu",
    on_node: str | None = None,
    reason: str = "",
    priority: int = 1000,
    site_factor: int | None = 0,
    **extra: object,
) -> SlurmJob:
    """A job; a running one is on ``on_node`` (default: the first node of its type,
    ``<type>-1`` as :func:`cluster` names them)."""
    spec = f"gres:gpu:{gpu_type}:{gpus}" if gpu_type else f"gres:gpu:{gpus}"
    field = "TresPerJob" if per == "job" else "TresPerNode"
    return SlurmJob(
        job_id=job_id, name=name, user="u", account=account, partition=partition, qos=qos,
        state=state, submit_time=submitted or T0 - timedelta(minutes=10),
        start_time=started if started else (T0 - timedelta(minutes=5) if state == "RUNNING" else None),
        priority=priority, nice=nice, site_factor=site_factor,
        gpu_request=GpuRequest(gpus, gpu_type, per, 1, f"{field}={spec}"),
        gpu_type_running=running_on if state == "RUNNING" else None,
        comment=comment, tags=parse_tags(comment), requeue=requeue, reason=reason,
        nodes=((on_node or f"{running_on}-1"),) if state == "RUNNING" and running_on else (),
        **extra,  # type: ignore[arg-type]
    )


def snapshot(
    nodes: Sequence[Node], jobs: Sequence[SlurmJob], accounts: Sequence[Account] = (),
    qos: Sequence[Qos] = (), at: datetime = T0,
) -> Snapshot:
    if not accounts:
        accounts = tuple(Account(a, 1.0, ("normal",), "normal") for a in sorted({j.account for j in jobs}))
    return Snapshot(taken_at=at, nodes=tuple(nodes), jobs=tuple(jobs), accounts=tuple(accounts),
                    qos=tuple(qos) or (Qos("normal"),), cluster="test")
