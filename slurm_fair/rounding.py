"""From time fractions to this round: an integral placement that never exceeds capacity.

A policy answers with ``x[j][k]``, the share of time job ``j`` should spend on GPU type ``k``.
A round runs each job on one type with all its GPUs, or not at all, so the shares are realised
over rounds. Following Gavel's round-based mechanism, a job's claim on type ``k`` this round is
its *priority* ``x_jk / received_jk``: the share it was allocated divided by the share of past
rounds it actually ran there (a job that never ran where it was allocated has the top priority).
Jobs are placed greedily by that priority, so the jobs furthest behind their allocation go
first; then leftover GPUs are filled with any job that can use them (work conservation), on a
type not much slower than those it is allocated (else it would be moved there later).

Who goes first among pairs that never ran where they are allocated (Gavel gives them all the
top priority): the job that received the least service so far, on any type. Without that
rule a running job allocated time on a second type ties with a job that never ran at all, and
the placement moves running jobs between types instead of starting waiting ones.

Gavel assumes stopping a job is nearly free (a restart of 30 s in a 360 s round). On Slurm it is
not: a requeued job waits out a hold (121 s by default) and restarts. With ``sticky`` (the
controller; the simulator when it models the hold) two rules follow from that cost. The pairs
allocated the whole period (``x_jk = 1``) go first, among themselves by the same order: Gavel's
ratio alone would let a job at ``x = 0.3`` that received ``0.2`` (priority 1.5) displace a
running job allocated ``x = 1`` (priority at most 1), although the latter's allocation can only
be met by running every round, so the stop would be undone next round at the cost of two
restarts. And leftover GPUs do not go to a job allocated a type much faster than them: it would
be stopped and moved there later. Without the cost (Gavel's setting) rotating and filling freely
is better (the sticky rules made finish-time fairness worse on the simulator's Philly trace with
Gavel's costs while they were built), so they are off there.

Jobs are gangs on real nodes (:mod:`slurm_fair.gangs`): with node structure a job is placed only
where its shape fits in the GPUs free per node (and only on ``job.hosts``), never by a per-type
count alone.

Inputs besides the problem and the allocation:

``received[job_id][gpu_type]``
    the *share of rounds* since the job arrived during which it ran on that type (in [0, 1];
    e.g. 3 rounds on v100 out of 10 rounds in the system -> 0.3). Missing means 0.
``prev[job_id]``
    the type it ran on in the previous round. Among equal priorities the previous type wins, and
    a job keeps its previous type when its allocation there is positive and its priority ties,
    so a job is not restarted elsewhere for nothing.
``prev_nodes[job_id]``
    GPUs per node it holds now: placed on its previous type, it keeps those nodes when free.
``fixed[job_id]``
    a type it runs on this round whatever the priorities (the controller's running jobs that
    cannot be stopped); its ``prev_nodes`` are reserved before anything else is placed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from .gangs import Shape, choose_nodes
from .hysteresis import Moves, move_pays
from .model import Allocation, Job, Problem, frozen_map

#: priority of a (job, type) pair the job never ran on: above every finite ratio
NEVER_RAN_PRIORITY = 1e9
#: ``x_jk`` this close to 1 means "runs all the time on k"
FULL_TIME_EPS = 1e-6
#: leftover GPUs of a type at least this fraction as fast as a type a job is allocated on
FILL_SLOWER = 0.9
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
    #: GPUs held idle this round for overdue jobs that could not start yet (``{type: {node:
    #: gpus}}``; without node structure ``{type: {"": gpus}}``): nothing else may start there
    reserved: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    #: overdue job -> the type whose GPUs are held for it (the controller makes it the first of
    #: its competitors in Slurm's queue, so Slurm's backfill keeps those GPUs for it too)
    reserved_for: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "types", frozen_map(self.types))
        object.__setattr__(self, "reserved_for", frozen_map(self.reserved_for))
        object.__setattr__(self, "nodes", frozen_map(self.nodes))
        object.__setattr__(self, "priority", frozen_map(self.priority))
        object.__setattr__(
            self, "node_gpus", frozen_map({j: frozen_map(v) for j, v in self.node_gpus.items()})
        )
        object.__setattr__(self, "reserved", frozen_map({k: frozen_map(v) for k, v in self.reserved.items()}))

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


class Pool:
    """Free GPUs per type, and per node when there is node structure: the one place a gang is
    fitted into what is free now (the rounding step; the controller's requeue choices).

    Gangs are cut by :func:`slurm_fair.gangs.choose_nodes`; ``hosts`` (a node -> bool test,
    None: any node) restricts a job to the nodes that can host one part of it."""

    def __init__(self, free_type: Mapping[str, int], free_node: Mapping[str, Mapping[str, int]] | None = None):
        self.free_type = {k: int(v) for k, v in free_type.items()}
        self.with_nodes = free_node is not None
        self.free_node = {k: {n: int(g) for n, g in v.items()} for k, v in (free_node or {}).items()}

    @classmethod
    def of_problem(cls, problem: Problem) -> "Pool":
        """Everything free: the problem's capacities (per node when it has nodes)."""
        if not problem.nodes:
            return cls(problem.gpu_types)
        free_node: dict[str, dict[str, int]] = {}
        for node in problem.nodes:
            free_node.setdefault(node.gpu_type, {})[node.name] = int(node.gpus)
        free_type = {k: min(int(c), sum(free_node.get(k, {}).values())) for k, c in problem.gpu_types.items()}
        return cls(free_type, free_node)

    @classmethod
    def of_nodes(cls, free_node: Mapping[str, Mapping[str, int]]) -> "Pool":
        """GPUs free per node (``{type: {node: free}}``)."""
        return cls({k: sum(v.values()) for k, v in free_node.items()}, free_node)

    def copy(self) -> "Pool":
        return Pool(self.free_type, self.free_node if self.with_nodes else None)

    def fit(self, shape: Shape, gpu_type: str, hosts: Callable[[str], bool] | None = None,
            wanted: Sequence[str] = ()) -> dict[str, int] | None:
        """Where the gang would go on ``gpu_type`` now, nothing reserved: ``{node: gpus}`` ({}
        without node structure), None when it does not fit (``wanted`` nodes first, then best
        fit, counted per node)."""
        if self.free_type.get(gpu_type, 0) < shape.gpus:
            return None
        if not self.with_nodes:
            return {}
        nodes = self.free_node.get(gpu_type, {})
        usable = nodes if hosts is None else {n: f for n, f in nodes.items() if hosts(n)}
        return choose_nodes(shape, usable, wanted)

    def take(self, shape: Shape, gpu_type: str, hosts: Callable[[str], bool] | None = None,
             wanted: Sequence[str] = ()) -> dict[str, int] | None:
        """:meth:`fit`, and reserve what it found."""
        got = self.fit(shape, gpu_type, hosts, wanted)
        if got is not None:
            self.hold(gpu_type, got, shape.gpus)
        return got

    def keep(self, shape: Shape, gpu_type: str, on: Mapping[str, int]) -> dict[str, int] | None:
        """Reserve exactly the GPUs per node a running job holds now when all are free, else None.

        Naming its nodes as ``wanted`` is not enough: ``choose_nodes`` re-cuts the gang over
        them (a 2+2 split becomes 4 on one node), which moves a running job for nothing."""
        nodes = self.free_node.get(gpu_type, {})
        if not self.with_nodes or sum(on.values()) != shape.gpus or any(nodes.get(n, 0) < g for n, g in on.items()):
            return None
        return self.hold(gpu_type, on)

    def hold(self, gpu_type: str, on: Mapping[str, int], gpus: int | None = None) -> dict[str, int]:
        """Reserve exactly ``on`` (``gpus`` in all, default ``sum(on)``), never refused: what a
        job that cannot move holds now, or what :meth:`fit` found."""
        self.free_type[gpu_type] = self.free_type.get(gpu_type, 0) - (sum(on.values()) if gpus is None else gpus)
        if not self.with_nodes:
            return {}
        nodes = self.free_node.setdefault(gpu_type, {})
        for n, g in on.items():
            nodes[n] = nodes.get(n, 0) - int(g)
        return {n: int(g) for n, g in on.items()}

    def give(self, gpu_type: str, on: Mapping[str, int]) -> None:
        """GPUs per node that become free (a job stopped or moved away)."""
        self.free_type[gpu_type] = self.free_type.get(gpu_type, 0) + sum(on.values())
        nodes = self.free_node.setdefault(gpu_type, {})
        for n, g in on.items():
            nodes[n] = nodes.get(n, 0) + int(g)


def _hosts(job: Job) -> Callable[[str], bool] | None:
    return None if job.hosts is None else job.hosts.__contains__


def place(
    problem: Problem,
    allocation: Allocation,
    received: Mapping[str, Mapping[str, float]] | None = None,
    prev: Mapping[str, str] | None = None,
    prev_nodes: Mapping[str, Mapping[str, int]] | None = None,
    fixed: Mapping[str, str] | None = None,
    sticky: bool = False,
    overdue: Mapping[str, float] | None = None,
    moves: Moves | None = None,
) -> Placement:
    """Turn ``allocation`` into this round's placement (see the module docstring).

    ``prev_nodes``, ``fixed``: module docstring. ``sticky``: stopping and restarting a job is
    expensive (Slurm's requeue hold), so a job allocated the whole period is never displaced by
    one allocated less, and leftover GPUs do not go to a job allocated a much faster type.
    ``overdue[job]``: how far a waiting job is past its wait bound: it goes first, and when it
    cannot fit now its nodes are kept idle (:func:`_serve_overdue`, ``Placement.reserved``).
    ``moves``: a running job moves to another type only when the move pays for its restart
    (:mod:`slurm_fair.hysteresis`); else it competes for the type it runs on (:func:`_stays`).
    """
    received, prev, prev_nodes, fixed = received or {}, prev or {}, prev_nodes or {}, fixed or {}
    node_hints = allocation.nodes  # optional node choice of the policy
    pool = Pool.of_problem(problem)
    jobs: dict[str, Job] = {j.id: j for j in problem.jobs}
    types, node_gpus = _hold_fixed(pool, jobs, fixed, prev_nodes)

    def wanted(job_id: str, k: str) -> tuple[str, ...]:
        hint = tuple(node_hints.get(job_id, ()))
        if not hint and prev.get(job_id) == k:
            hint = tuple(sorted(prev_nodes.get(job_id, {})))
        return hint

    def take(job_id: str, k: str) -> dict[str, int] | None:
        """The job's gang on ``k``: on its previous type, without a policy hint, exactly the
        GPUs it holds when they are free; else by :meth:`Pool.take`."""
        job = jobs[job_id]
        if prev.get(job_id) == k and not node_hints.get(job_id) and prev_nodes.get(job_id):
            kept = pool.keep(job.shape, k, prev_nodes[job_id])
            if kept is not None:
                return kept
        return pool.take(job.shape, k, _hosts(job), wanted(job_id, k))

    reserved, reserved_for = _serve_overdue(problem, allocation, overdue or {}, pool, types, node_gpus, take, prev)

    # service received so far (share of the job's rounds it ran, any type): among "never ran
    # here" pairs, a job that never ran anywhere goes before one that ran on another type
    service = {j: sum(float(v) for v in received.get(j, {}).values()) for j in jobs}
    pairs, job_priority = _ranked_pairs(problem, allocation, received, prev, service, sticky, moves)
    for job_id, k in pairs:
        if job_id in types:
            continue
        placed = take(job_id, k)
        if placed is not None:
            types[job_id] = k
            if pool.with_nodes:
                node_gpus[job_id] = placed

    # work conservation: leftover GPUs go to waiting jobs that can use them, the most deprived
    # first (the least served among equals), each on its fastest type that still fits (its
    # previous type when equally fast), but not on a type much slower than one it is allocated
    # time on: it would have to be stopped and restarted there later, which costs more than
    # the little it does meanwhile (a job allocated nothing takes any free GPU)
    for job in _waiting(problem, types, job_priority, service):
        for k in _fill_types(job, problem, allocation, prev, sticky, moves):
            placed = take(job.id, k)
            if placed is not None:
                types[job.id] = k
                if pool.with_nodes:
                    node_gpus[job.id] = placed
                break

    nodes = {j: tuple(sorted(used)) for j, used in node_gpus.items()}
    return Placement(types=types, nodes=nodes, priority=job_priority, node_gpus=node_gpus, reserved=reserved,
                     reserved_for=reserved_for)


def _hold_fixed(pool: Pool, jobs: Mapping[str, Job], fixed: Mapping[str, str],
                prev_nodes: Mapping[str, Mapping[str, int]]) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """Jobs that run this round whatever the priorities keep the GPUs they hold (first)."""
    types: dict[str, str] = {}
    node_gpus: dict[str, dict[str, int]] = {}
    for job_id, k in sorted(fixed.items()):
        if job_id in jobs:
            types[job_id] = k
            got = pool.hold(k, prev_nodes.get(job_id, {}), jobs[job_id].gpus)
            if pool.with_nodes:
                node_gpus[job_id] = got
    return types, node_gpus


def _ranked_pairs(
    problem: Problem, allocation: Allocation, received: Mapping[str, Mapping[str, float]],
    prev: Mapping[str, str], service: Mapping[str, float], sticky: bool, moves: Moves | None = None,
) -> tuple[list[tuple[str, str]], dict[str, float]]:
    """The (job, type) pairs with a positive priority in the order they are placed, and each
    job's best pair priority.

    Pairs allocated the whole period first (nothing allocated less displaces them), then the
    others; in each group "never ran here" pairs first, the least served job first, then by
    Gavel's priority (one stopped and behind before one that kept running); ties: previous
    type, larger share, then a stable name order. With ``moves``, a running job's pair on a
    type it should not move to (:func:`_stays`) becomes a pair on the type it runs on."""
    pairs: list[tuple[int, int, float, float, int, float, str, str]] = []
    job_priority: dict[str, float] = {}
    for job in problem.jobs:
        best = 0.0
        mine: dict[str, tuple[int, int, float, float, int, float, str, str]] = {}
        for k in problem.gpu_types:
            if job.throughput.get(k, 0.0) <= 0:
                continue
            x = allocation.fraction(job.id, k)
            got_k = float(received.get(job.id, {}).get(k, 0.0))
            pr = pair_priority(x, got_k)
            best = max(best, pr)
            if pr > 0:
                keep = 1 if prev.get(job.id) == k else 0
                never = got_k <= _EPS
                tier = 0 if sticky and x >= 1.0 - FULL_TIME_EPS else 1
                mine[k] = (tier, 0 if never else 1, service[job.id] if never else 0.0,
                           -_rounded(pr), -keep, -x, job.id, k)
        pairs.extend(_stays(job, mine, prev, moves))
        job_priority[job.id] = best
    pairs.sort(key=lambda p: (p[0], p[1], _rounded(p[2]), p[3], p[4], p[5], p[6], p[7]))
    return [(p[6], p[7]) for p in pairs], job_priority


def _stays(job: Job, mine: Mapping[str, tuple[int, int, float, float, int, float, str, str]],
           prev: Mapping[str, str], moves: Moves | None) -> list[tuple[int, int, float, float, int, float, str, str]]:
    """A job's pairs, a running job's hysteresis applied: a pair on another type is kept only
    when the move pays (:func:`slurm_fair.hysteresis.move_pays`); when one is dropped and the
    job has no pair on its current type, it competes there with the dropped pair's rank (it
    stays, or it is stopped for others, but it is not moved to where a move does not pay)."""
    cur = prev.get(job.id)
    if moves is None or job.id not in moves.running or cur is None or job.throughput.get(cur, 0.0) <= 0:
        return list(mine.values())
    kept = [p for k, p in mine.items() if k == cur or _move_ok(job, cur, k, moves)]
    dropped = [p for k, p in mine.items() if k != cur and not _move_ok(job, cur, k, moves)]
    if dropped and cur not in mine:
        best = min(dropped, key=lambda p: (p[0], p[3]))
        kept.append((best[0], 1, 0.0, best[3], -1, best[5], job.id, cur))
    return kept


def _move_ok(job: Job, cur: str, new: str, moves: Moves) -> bool:
    return move_pays(job.attained_s, job.normalised(cur), job.normalised(new), moves.cost_s, moves.min_gain)


def _waiting(problem: Problem, types: Mapping[str, str], job_priority: Mapping[str, float],
             service: Mapping[str, float]) -> list[Job]:
    """Jobs not placed that can run somewhere: the most deprived first, the least served among
    equals."""
    return sorted(
        (j for j in problem.jobs if j.id not in types and j.best_throughput > 0),
        key=lambda j: (-_rounded(job_priority[j.id]), _rounded(service[j.id]), j.id),
    )


def _fill_types(job: Job, problem: Problem, allocation: Allocation, prev: Mapping[str, str],
                sticky: bool, moves: Moves | None = None) -> list[str]:
    """The types a waiting job may take leftover GPUs on, best first: its fastest (its previous
    type when equally fast), never much slower than one it is allocated time on when stops are
    expensive (``sticky``); a running job (``moves``) only its own or one a move pays for."""
    allocated = [job.normalised(k) for k in problem.gpu_types if allocation.fraction(job.id, k) > _EPS]
    floor = FILL_SLOWER * max(allocated) if allocated and sticky else 0.0
    cur = prev.get(job.id)
    held = moves is not None and job.id in moves.running and cur is not None
    return sorted(
        (k for k in problem.gpu_types if job.throughput.get(k, 0.0) > 0 and job.normalised(k) >= floor - _EPS
         and (not held or k == cur or _move_ok(job, cur, k, moves))),  # type: ignore[arg-type]
        key=lambda k: (-job.normalised(k), 0 if prev.get(job.id) == k else 1, k),
    )


def _serve_overdue(problem: Problem, allocation: Allocation, overdue: Mapping[str, float], pool: Pool,
                   types: dict[str, str], node_gpus: dict[str, dict[str, int]],
                   take: Callable[[str, str], dict[str, int] | None],
                   prev: Mapping[str, str]) -> tuple[dict[str, dict[str, int]], dict[str, str]]:
    """Overdue jobs first (most overdue first), each on the fastest type it is allocated that
    fits; when none fits now (jobs that cannot be stopped hold the GPUs) the free GPUs of the
    nodes that will hold it are kept idle, as Slurm's backfill reserves nodes for its top job, so
    smaller jobs cannot keep taking them. Returns what is held idle, and for whom."""
    jobs = {j.id: j for j in problem.jobs}
    reserved: dict[str, dict[str, int]] = {}
    reserved_for: dict[str, str] = {}
    #: what jobs that cannot be stopped leave free: a gang that fits there waits for an overdue
    #: job ahead of it, not for a drain, and gets nothing held
    after_fixed = pool.copy()
    for job_id in sorted(overdue, key=lambda j: (-overdue[j], j)):
        job = jobs.get(job_id)
        if job is None or job_id in types:
            continue
        allocated = sorted((k for k in problem.gpu_types if allocation.fraction(job_id, k) > _EPS
                            and job.throughput.get(k, 0.0) > 0),
                           key=lambda k: (-job.normalised(k), 0 if prev.get(job_id) == k else 1, k))
        for k in allocated:
            got = take(job_id, k)
            if got is not None:
                types[job_id] = k
                if pool.with_nodes:
                    node_gpus[job_id] = got
                break
        else:
            # one drain per type and round (Slurm's backfill reserves for its top job), and only
            # when jobs that cannot be stopped are what keeps the gang out
            first = allocated[0] if allocated else None
            # (the first of a type is its top job even while nothing is free to hold yet)
            if (first is not None and first not in reserved_for.values()
                    and after_fixed.fit(job.shape, first, _hosts(job)) is None):
                reserved_for[job_id] = first
                held = _drain(problem, pool, job, first)
                if held:
                    reserved[first] = held
    return reserved, reserved_for


def _drain(problem: Problem, pool: Pool, job: Job, gpu_type: str) -> dict[str, int]:
    """Hold the free GPUs of the nodes that will hold ``job`` on ``gpu_type`` (the nodes most
    free first, as many as its gang needs and no more GPUs than it needs per node)."""
    if not pool.with_nodes:
        got = min(job.gpus, max(0, pool.free_type.get(gpu_type, 0)))
        if got:
            pool.hold(gpu_type, {}, got)
        return {"": got} if got else {}
    per_node = job.shape.per_node or job.gpus
    size = {n.name: n.gpus for n in problem.nodes if n.gpu_type == gpu_type}
    free = pool.free_node.get(gpu_type, {})
    nodes = sorted((n for n in free if size.get(n, 0) >= min(per_node, job.gpus)), key=lambda n: (-free[n], n))
    want, out = job.gpus, {}
    for n in nodes:
        if want <= 0:
            break
        g = min(free[n], per_node, want)
        want -= min(size[n], per_node, want)
        if g > 0:
            out[n] = g
    if out:
        pool.hold(gpu_type, out)
    return out


def _rounded(value: float) -> float:
    """Priorities compared to 9 significant digits so float noise does not break ties."""
    return float(f"{value:.9g}")
