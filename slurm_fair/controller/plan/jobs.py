"""Each job of the plan: the GPU type it is sent to, how that is enforced (partition or pinned
gres, :mod:`..steer`) and its place in line (nice band or priority); see "Per pending GPU job" in
:mod:`slurm_fair.controller.plan`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from ...model import Allocation
from ...slurm.model import SlurmJob
from ...slurm.parse.fields import fold_hostlist
from ..steer import current_type, job_partitions, partition_holds, submitted_partition
from .limits import qos_name
from .types import JobPlan, PlanSettings

#: nice taken off the jobs this round places (order = nice): a band above every multifactor
#: priority (the sum of the PriorityWeight* factors is far below it), so they go first and every
#: job keeps its own multifactor order inside its band
NICE_BAND = 10_000_000
#: priorities used with order = priority: placed jobs from PRIORITY_TOP down, the rest below
PRIORITY_TOP = 1_000_000
PRIORITY_REST = 500_000


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
class JobContext:
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
    nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    base_nodes: Mapping[str, str] = field(default_factory=dict)


def steerable(sj: SlurmJob, k: str, settings: PlanSettings, base: str) -> bool:
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


def job_plans(
    queue: list[SlurmJob], ctx: JobContext, requeued: frozenset[str] | set[str] = frozenset(),
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
            ok = [k for k in ranked if steerable(sj, k, settings, base)]
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
                                  nice, priority, partition, planned, sj.job_id in requeued,
                                  node_list(sj, ctx, placed and planned == placed_type(sj.job_id)))
    return jobs, unsteered


def node_list(sj: SlurmJob, ctx: JobContext, placed: bool) -> str | None:
    """The ReqNodeList the job should carry (a folded hostlist, "" for none), None: leave it.

    A user's own node list is never touched. Otherwise a job this round places on nodes its
    policy named (Hops) is pinned to them, and every other job carries no node list (a pin of
    an earlier cycle is lifted)."""
    user = ctx.base_nodes.get(sj.job_id, fold_hostlist(sj.req_nodes))
    if user:
        return None
    nodes = ctx.nodes.get(sj.job_id)
    return fold_hostlist(nodes) if placed and nodes else ""


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
