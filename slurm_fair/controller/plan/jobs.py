"""Each job of the plan: the GPU type it is sent to, how that is enforced (partition or pinned
gres, :mod:`..steer`) and its place in line; see "Per pending GPU job" in
:mod:`slurm_fair.controller.plan`.

What the plan never writes: a field someone else changed after the controller (released,
:mod:`..ownership`), and anything of a job whose owner chose where it runs (several partitions,
nodes, an exclude list, a reservation, features) or that is not ready to run (held, waiting for
a dependency): :func:`..steer.user_choice`. Such a job keeps its type and its partitions; only
its place in line among the pilot's jobs may change (:mod:`.order`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from ...model import Allocation
from ...slurm.model import Partition, SlurmJob
from ...slurm.parse.fields import fold_hostlist
from ..steer import admits, current_type, holds_key, job_partitions, partition_holds
from .types import JobPlan, PlanSettings


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
    settings: PlanSettings
    capacity: Mapping[str, int]
    #: job -> the partition(s) it asked for (:func:`..asked.request_of`)
    asked: Mapping[str, str]
    nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: job -> the node list it asked for (folded; "" for none)
    asked_nodes: Mapping[str, str] = field(default_factory=dict)
    #: job -> why its placement is its owner's (:func:`..steer.user_choice`)
    choices: Mapping[str, str] = field(default_factory=dict)
    #: (job, field) someone else changed after the controller: never written again
    released: frozenset[tuple[str, str]] = frozenset()
    #: overdue gang -> the type it is served on or GPUs are kept for (first in line, sent there)
    head: Mapping[str, str] = field(default_factory=dict)

    def asked_of(self, sj: SlurmJob) -> str:
        return self.asked.get(sj.job_id) or sj.partition


def _asked_partitions(asked: str, settings: PlanSettings) -> list[Partition]:
    return [settings.partitions[p] for p in job_partitions(asked) if p in settings.partitions]


def steer_target(sj: SlurmJob, k: str, settings: PlanSettings, asked: str) -> str | None:
    """The partition that sends the job to type ``k`` (never strand a job, never overstep a
    partition's rules): with ``pin_gres``, a partition it asked for whose nodes of ``k`` hold it
    typed (the job stays there); else a partition of type ``k`` that admits it
    (:func:`..steer.admits`) and whose nodes hold it. None: ``k`` cannot be reached."""
    if settings.pin_gres:
        for p in job_partitions(asked):
            if _holds(sj, p, settings, k):
                return p
        return None
    asked_parts = _asked_partitions(asked, settings)
    for p in settings.type_partitions.get(k, ()):
        rules = settings.partitions.get(p)
        if settings.partitions and (rules is None or not admits(rules, sj, asked_parts, settings.groups)):
            continue
        if _holds(sj, p, settings):
            return p
    return None


def _holds(sj: SlurmJob, partition: str, settings: PlanSettings, typed: str | None = None) -> bool:
    """:func:`..steer.partition_holds` through the cycle's memo (no nodes known: True), for the
    job as it is or, with ``typed``, as it would be with its request pinned to that type."""
    if not settings.nodes:
        return True
    key = holds_key(sj, partition, typed)
    memo = settings.holds_memo
    if key not in memo:
        if typed is not None and sj.gpu_request is not None:
            sj = replace(sj, gpu_request=replace(sj.gpu_request, gpu_type=typed))
        memo[key] = partition_holds(sj, partition, settings.nodes)
    return memo[key]


def steerable(sj: SlurmJob, k: str, settings: PlanSettings, asked: str) -> bool:
    return steer_target(sj, k, settings, asked) is not None


def job_plans(
    queue: list[SlurmJob], ctx: JobContext, requeued: frozenset[str] | set[str] = frozenset(),
    moves: Mapping[str, str] | None = None,
) -> tuple[dict[str, JobPlan], dict[str, str]]:
    """Type, enforcement and place in line of every job of ``queue`` (pending, or requeued now)."""
    moves = moves or {}

    def placed_type(job_id: str) -> str | None:
        return moves.get(job_id) or ctx.placed_types.get(job_id)

    # place in line: overdue gangs, this round's jobs, then by deficit, then first come first served
    def line_key(sj: SlurmJob) -> tuple[int, float, float, str]:
        submitted = sj.submit_time.timestamp() if sj.submit_time else 0.0
        first = 0 if sj.job_id in ctx.head else 1 if placed_type(sj.job_id) else 2
        return (first, -round(ctx.deficit.get(sj.job_id, 0.0), 9), submitted, sj.job_id)

    jobs: dict[str, JobPlan] = {}
    unsteered: dict[str, str] = {}
    for rank, sj in enumerate(sorted(queue, key=line_key), start=1):
        jp, why = _one(sj, rank, placed_type(sj.job_id), ctx, sj.job_id in requeued, ctx.head.get(sj.job_id))
        jobs[sj.job_id] = jp
        if why:
            unsteered[sj.job_id] = why
    return jobs, unsteered


def _one(sj: SlurmJob, rank: int, placed_k: str | None, ctx: JobContext, requeued: bool,
         head_k: str | None = None) -> tuple[JobPlan, str]:
    """One job's plan and, when its planned type cannot be reached, that type (``head_k``: the
    type an overdue gang waits for, sent there first)."""
    settings = ctx.settings
    asked = ctx.asked_of(sj)
    gpu_type = partition = None
    unsteered = ""
    planned = ctx.fixed_type.get(sj.job_id)
    if planned is None and sj.job_id not in ctx.choices:
        ranked = rank_types(
            sj, ctx.allocation.x.get(sj.job_id, {}), placed_k or head_k,
            ctx.pjobs[sj.job_id].throughput, ctx.capacity, current_type(sj, settings.ptypes),
        )
        targets = {k: steer_target(sj, k, settings, asked) for k in ranked}
        ok = [k for k in ranked if targets[k]]
        planned = ok[0] if ok else (ranked[0] if ranked else None)
        if planned and settings.pin_gres:
            # typed where it asked to run (back there if a plugin or an older cycle moved it)
            gpu_type = planned if ok else None
            partition = targets.get(planned) or asked
        elif planned and ok:
            partition = targets[planned]
        elif planned:
            unsteered, partition = planned, asked
    placed = placed_k is not None and planned == placed_k
    nodes = node_list(sj, ctx, placed) if sj.job_id not in ctx.choices else None
    if (sj.job_id, "partition") in ctx.released:
        partition = None
    if (sj.job_id, "gres") in ctx.released:
        gpu_type = None
    if (sj.job_id, "nodes") in ctx.released:
        nodes = None
    return JobPlan(sj.job_id, sj.account, gpu_type, rank, placed, partition=partition, planned_type=planned,
                   requeued=requeued, nodes=nodes), unsteered


def node_list(sj: SlurmJob, ctx: JobContext, placed: bool) -> str | None:
    """The ReqNodeList the job should carry (a folded hostlist, "" for none), None: leave it.

    A user's own node list is never touched (such a job is a user's choice anyway). Otherwise a
    job this round places on nodes its policy named (Hops) is pinned to them, and every other
    job carries no node list (a pin of an earlier cycle is lifted)."""
    if ctx.asked_nodes.get(sj.job_id, fold_hostlist(sj.req_nodes)):
        return None
    nodes = ctx.nodes.get(sj.job_id)
    return fold_hostlist(nodes) if placed and nodes else ""


def sent_to(jp: JobPlan, k: str, settings: PlanSettings) -> bool:
    """Whether this cycle's plan sends a pending job to type ``k`` (so it will take GPUs freed
    there): its type is pinned, or it is steered to a partition of ``k`` only, or it can run on
    ``k`` only (a fixed type: the plan leaves partition and request as they are)."""
    if jp.planned_type != k:
        return False
    if jp.gpu_type == k or jp.partition is None:
        return True
    return settings.ptypes.get(jp.partition) == frozenset({k})
