"""From time fractions to this round: an integral placement that never exceeds capacity.

A policy answers with ``x[j][k]``, the share of time job ``j`` should spend on GPU type ``k``.
A round runs each job on one type with all its GPUs, or not at all, so the shares are realised
over rounds. Following Gavel's round-based mechanism, a job's claim on type ``k`` this round is
its *priority* ``x_jk / received_jk``: the share it was allocated divided by the share of past
rounds it actually ran there (a job that never ran where it was allocated has the top priority).
Jobs are placed greedily by that priority, so the jobs furthest behind their allocation go
first; then leftover GPUs are filled with any job that can use them (work conservation).

Inputs besides the problem and the allocation:

``received[job_id][gpu_type]``
    the *share of rounds* since the job arrived during which it ran on that type (in [0, 1];
    e.g. 3 rounds on v100 out of 10 rounds in the system -> 0.3). Missing means 0.
``prev[job_id]``
    the type it ran on in the previous round. Among equal priorities the previous type wins, and
    a job keeps its previous type when its allocation there is positive and its priority ties,
    so a job is not restarted elsewhere for nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from .model import Allocation, Job, Problem, frozen_map

#: priority of a (job, type) pair the job never ran on: above every finite ratio
NEVER_RAN_PRIORITY = 1e9
_EPS = 1e-9


@dataclass(frozen=True)
class Placement:
    """This round's decision.

    ``types``: the GPU type each running job uses (jobs absent do not run this round).
    ``nodes``: for problems with node structure, the nodes holding each running job's GPUs
    (as few nodes as possible, never more GPUs than a node has); empty otherwise.
    ``priority``: each job's best deficit priority (``max_k x_jk / received_jk``), so the
    controller can order the pending jobs of Slurm's queue consistently with the plan.
    """

    types: Mapping[str, str]
    nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    priority: Mapping[str, float] = field(default_factory=dict)
    #: GPUs taken on each node per job (``{job: {node: gpus}}``), beside ``nodes``
    node_gpus: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "types", frozen_map(self.types))
        object.__setattr__(self, "nodes", frozen_map(self.nodes))
        object.__setattr__(self, "priority", frozen_map(self.priority))
        object.__setattr__(
            self, "node_gpus", frozen_map({j: frozen_map(v) for j, v in self.node_gpus.items()})
        )

    def gpus_used(self, problem: Problem) -> dict[str, int]:
        """GPUs per type this placement occupies."""
        gpus = {j.id: j.gpus for j in problem.jobs}
        used: dict[str, int] = {}
        for job_id, gpu_type in self.types.items():
            used[gpu_type] = used.get(gpu_type, 0) + gpus[job_id]
        return used


def pair_priority(x_jk: float, received_jk: float) -> float:
    """Gavel's priority of job j on type k: allocated share over received share."""
    if x_jk <= _EPS:
        return 0.0
    if received_jk <= _EPS:
        return NEVER_RAN_PRIORITY * x_jk
    return x_jk / received_jk


class _Pool:
    """Free GPUs per type, and per node when the problem has node structure."""

    def __init__(self, problem: Problem):
        self.free_type = {k: int(c) for k, c in problem.gpu_types.items()}
        self.by_type: dict[str, list[list]] = {}
        self.with_nodes = bool(problem.nodes)
        for node in problem.nodes:
            self.by_type.setdefault(node.gpu_type, []).append([node.name, int(node.gpus)])
        if self.with_nodes:
            for k in self.free_type:
                node_total = sum(n[1] for n in self.by_type.get(k, []))
                self.free_type[k] = min(self.free_type[k], node_total)

    def take(self, gpu_type: str, gpus: int, wanted: tuple[str, ...] = ()) -> dict[str, int] | None:
        """Reserve ``gpus`` GPUs of ``gpu_type``; ``{node: gpus}`` used, None when they do not fit.

        Node choice: the ``wanted`` nodes when the policy named some (Hops picks fast nodes) and
        they have room; else the fullest node that fits the whole gang (best fit keeps big holes
        for big jobs); otherwise the largest free nodes first, which needs the fewest nodes.
        """
        if self.free_type.get(gpu_type, 0) < gpus:
            return None
        if not self.with_nodes:
            self.free_type[gpu_type] -= gpus
            return {}
        nodes = self.by_type.get(gpu_type, [])
        hinted = [n for w in wanted for n in nodes if n[0] == w]
        if wanted and len(hinted) == len(wanted) and sum(n[1] for n in hinted) >= gpus:
            need, chosen = gpus, {}
            for n in hinted:
                use = min(n[1], need)
                if use > 0:
                    n[1] -= use
                    need -= use
                    chosen[n[0]] = use
            self.free_type[gpu_type] -= gpus
            return chosen
        fitting = [n for n in nodes if n[1] >= gpus]
        if fitting:
            best = min(fitting, key=lambda n: (n[1], n[0]))
            best[1] -= gpus
            chosen = {best[0]: gpus}
        else:
            need, picked = gpus, []
            for n in sorted(nodes, key=lambda n: (-n[1], n[0])):
                if need <= 0:
                    break
                if n[1] <= 0:
                    continue
                use = min(n[1], need)
                picked.append((n, use))
                need -= use
            if need > 0:
                return None
            for n, use in picked:
                n[1] -= use
            chosen = {n[0]: use for n, use in picked}
        self.free_type[gpu_type] -= gpus
        return chosen


def place(
    problem: Problem,
    allocation: Allocation,
    received: Mapping[str, Mapping[str, float]] | None = None,
    prev: Mapping[str, str] | None = None,
) -> Placement:
    """Turn ``allocation`` into this round's placement (see the module docstring)."""
    received = received or {}
    prev = prev or {}
    # optional node choice of the policy: allocation.info["nodes"] = {job_id: (node, ...)}
    node_hints: Mapping[str, tuple[str, ...]] = allocation.info.get("nodes", {}) or {}
    pool = _Pool(problem)
    jobs: dict[str, Job] = {j.id: j for j in problem.jobs}

    pairs: list[tuple[float, int, float, str, str]] = []
    job_priority: dict[str, float] = {}
    for job in problem.jobs:
        best = 0.0
        for k in problem.gpu_types:
            if job.throughput.get(k, 0.0) <= 0:
                continue
            x = allocation.fraction(job.id, k)
            pr = pair_priority(x, float(received.get(job.id, {}).get(k, 0.0)))
            best = max(best, pr)
            if pr > 0:
                keep = 1 if prev.get(job.id) == k else 0
                pairs.append((pr, keep, x, job.id, k))
        job_priority[job.id] = best
    # highest priority first; ties: previous type, larger share, then a stable name order
    pairs.sort(key=lambda p: (-_rounded(p[0]), -p[1], -p[2], p[3], p[4]))

    types: dict[str, str] = {}
    node_gpus: dict[str, dict[str, int]] = {}
    for _, _, _, job_id, k in pairs:
        if job_id in types:
            continue
        got = pool.take(k, jobs[job_id].gpus, tuple(node_hints.get(job_id, ())))
        if got is not None:
            types[job_id] = k
            if pool.with_nodes:
                node_gpus[job_id] = got

    # work conservation: leftover GPUs go to waiting jobs that can use them, the most deprived
    # first, each on its fastest type that still fits (its previous type when equally fast)
    waiting = sorted(
        (j for j in problem.jobs if j.id not in types and j.best_throughput > 0),
        key=lambda j: (-_rounded(job_priority[j.id]), j.id),
    )
    for job in waiting:
        options = sorted(
            (k for k in problem.gpu_types if job.throughput.get(k, 0.0) > 0),
            key=lambda k: (-job.normalised(k), 0 if prev.get(job.id) == k else 1, k),
        )
        for k in options:
            got = pool.take(k, job.gpus)
            if got is not None:
                types[job.id] = k
                if pool.with_nodes:
                    node_gpus[job.id] = got
                break

    nodes = {j: tuple(sorted(used)) for j, used in node_gpus.items()}
    return Placement(types=types, nodes=nodes, priority=job_priority, node_gpus=node_gpus)


def _rounded(value: float) -> float:
    """Priorities compared to 9 significant digits so float noise does not break ties."""
    return float(f"{value:.9g}")
