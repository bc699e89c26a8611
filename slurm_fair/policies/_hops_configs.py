"""Hops' configurations (§3.4, §4 of the brief): where a job could run this plan, and at what rate.

A *configuration* is a map node -> GPUs. On each node with room for the whole gang there is an
*aggregated* one; a *distributed* one takes adjacent nodes of one type (sorted by name, nodes
without room skipped), filling each node's free GPUs in turn. A configuration spread over more
nodes than the gang needs (more than ``ceil(g / largest node of the type)``, the simulator's rule
for running at the unconsolidated rate) is generated only for a job of low *placement
sensitivity* on that type (Eq. 10); a gang larger than a node gets its minimal multi-node
configurations whatever its sensitivity (the brief's reading of the paper's exception).

Rate (§3.5): the slowest node's speed x the gang's rate on the type, the spread rate
(``Job.spread_throughput``) for a spread configuration.

Identical nodes are interchangeable. The ILP therefore sees a configuration as its *demand* on
node classes (nodes of one type, one speed and the same free GPUs), not on named nodes: the
capacity rows are per class, and :func:`pack` then names the nodes. That keeps 500 jobs x 64
nodes at a few hundred binaries when the nodes are alike, and is exact when the gang sizes
divide each other and the node size (1/2/4/8 on 8-GPU nodes: best fit decreasing packs any
multiset that fits by count); otherwise a job :func:`pack` cannot place is left to the next
plan. Without node structure a configuration is one GPU type (class = type). When a job names
hosts, every node is its own class (a class must be interchangeable for every job).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from ..model import Job, NodeCapacity

#: Eq. 10's threshold sigma: above it a job is placement-sensitive (the paper's operator value)
SIGMA = 1.4


@dataclass(frozen=True)
class Config:
    """One configuration of one job: its type, preferred nodes (``((node, gpus), ...)``; empty
    without node structure), its demand per class (``((class, gpus on one node), ...)``, sorted)
    and its throughput."""

    gpu_type: str
    nodes: tuple[tuple[str, int], ...]
    demand: tuple[tuple[str, int], ...]
    rate: float
    spread: bool = False


@dataclass(frozen=True)
class NodeClass:
    """Interchangeable nodes: one type, one speed, ``free`` GPUs free on each of ``names``."""

    gpu_type: str
    speed: float
    free: int
    names: tuple[str, ...]

    @property
    def gpus(self) -> int:
        return self.free * len(self.names)


def sensitivity(job: Job, gpu_type: str) -> float:
    """Eq. 10 on one type: per-GPU rate consolidated over per-GPU rate spread (the gang's GPU
    count is the same, so the rates' ratio). ``inf`` when the spread rate is unknown: an unknown
    job is treated as placement-sensitive, never spread on a guess."""
    spread = float(job.spread_throughput.get(gpu_type, 0.0))
    return float(job.throughput.get(gpu_type, 0.0)) / spread if spread > 0 else math.inf


def job_sensitivity(job: Job) -> float:
    """The job's one figure (the sensitivity adjustment compares means of it): the largest over
    the types it can run on (the paper names no type; the worst case is the safe one)."""
    values = [sensitivity(job, k) for k, t in job.throughput.items() if t > 0]
    return max(values, default=math.inf)


def classes(nodes: Sequence[NodeCapacity], free: Mapping[str, int], per_node: bool) -> dict[str, NodeClass]:
    """Nodes with GPUs free grouped into classes (``per_node``: one class per node)."""
    groups: dict[tuple[object, ...], list[str]] = {}
    for n in sorted(nodes, key=lambda n: n.name):
        f = int(free.get(n.name, 0))
        if f <= 0:
            continue
        key = (n.gpu_type, n.name) if per_node else (n.gpu_type, n.speed, f)
        groups.setdefault(key, []).append(n.name)
    by_name = {n.name: n for n in nodes}
    out = {}
    for names in groups.values():
        first = by_name[names[0]]
        cid = f"{first.gpu_type}|{first.speed:g}|{int(free[names[0]])}|{names[0]}"
        out[cid] = NodeClass(first.gpu_type, first.speed, int(free[names[0]]), tuple(names))
    return out


def configurations(job: Job, free: Mapping[str, int], nodes: Sequence[NodeCapacity],
                   class_of: Mapping[str, str], sigma: float = SIGMA) -> list[Config]:
    """The job's configurations on the GPUs ``free`` (per node, or per type without nodes)."""
    if not nodes:
        return [Config(k, (), ((k, job.gpus),), float(t))
                for k, t in sorted(job.throughput.items()) if t > 0 and job.gpus <= free.get(k, 0)]
    speed = {n.name: n.speed for n in nodes}
    out: dict[tuple[object, ...], Config] = {}
    for k in sorted(t for t, v in job.throughput.items() if v > 0):
        of_type = [n for n in nodes if n.gpu_type == k]
        largest = max((n.gpus for n in of_type), default=0)
        if not largest:
            continue
        needed = math.ceil(job.gpus / largest)
        low = sensitivity(job, k) <= sigma
        names = [n.name for n in sorted(of_type, key=lambda n: n.name)
                 if free.get(n.name, 0) > 0 and (job.hosts is None or n.name in job.hosts)]
        p = job.gpus_per_node
        candidates: list[list[tuple[str, int]]] = []
        if p is None or p >= job.gpus:
            candidates += [[(n, job.gpus)] for n in names if free[n] >= job.gpus]
        for i in range(len(names)):
            parts: list[tuple[str, int]] = []
            left = job.gpus
            for n in names[i:]:
                if job.max_nodes is not None and len(parts) >= job.max_nodes:
                    break
                if p is not None and free[n] < min(p, left):
                    continue
                take = min(p if p is not None else free[n], left)
                parts.append((n, take))
                left -= take
                if left == 0:
                    break
            # a window with a node that holds the whole gang is dominated by that node's
            # aggregated configuration (consolidated, and no slower node), and the rounding step
            # would cut the gang onto that one node anyway
            if left == 0 and len(parts) >= 2 and all(free[n] < job.gpus for n, _ in parts):
                candidates.append(parts)
        for parts in candidates:
            spread = len(parts) > needed
            if spread and not low:
                continue
            demand = tuple(sorted((class_of[n], g) for n, g in parts))
            if (k, demand) in out:
                continue
            base = job.spread_throughput.get(k, 0.0) if spread else job.throughput[k]
            rate = float(base) * min(speed[n] for n, _ in parts)
            if rate > 0:
                out[k, demand] = Config(k, tuple(parts), demand, rate, spread)
    return list(out.values())


def pack(chosen: Sequence[tuple[Job, Config]], cls: Mapping[str, NodeClass],
         prefer: Mapping[str, Mapping[str, int]]) -> tuple[dict[str, dict[str, int]], list[str]]:
    """Name the nodes of the chosen configurations: ``({job: {node: gpus}}, [jobs that did not
    fit])``. Parts go largest first (best fit decreasing, which never fails when sizes divide
    each other and the node size), each on a node of its class with room, never two parts of a
    job on one node; among those, the job's previous node (``prefer``: a running job is not
    moved for nothing), then nodes no other chosen job held before, then the configuration's own
    nodes, then the fullest."""
    free = {n: c.free for c in cls.values() for n in c.names}
    ids = {job.id for job, _ in chosen}
    held = {n: jid for jid, on in prefer.items() if jid in ids for n in on}
    parts = [(g, i, job, cfg, cid) for i, (job, cfg) in enumerate(chosen) for cid, g in cfg.demand]
    parts.sort(key=lambda p: (-p[0], p[1]))
    placed: dict[str, dict[str, int]] = {}
    failed: set[str] = set()
    for g, _, job, cfg, cid in parts:
        if job.id in failed:
            continue
        mine = placed.setdefault(job.id, {})
        room = [n for n in cls[cid].names if free[n] >= g and n not in mine]
        if not room:
            failed.add(job.id)
            for n, used in placed.pop(job.id).items():
                free[n] += used
            continue
        own = dict(cfg.nodes)
        n = min(room, key=lambda n: (n not in prefer.get(job.id, {}), held.get(n, job.id) != job.id,
                                     n not in own, free[n], n))
        free[n] -= g
        mine[n] = g
    return placed, sorted(failed)
