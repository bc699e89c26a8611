"""Hops (SoCC 2024): node-level heterogeneity, weighted ILP placement for latency-ratio fairness,
and fragment filling with low-sensitivity jobs.

1. **Latency ratio (LRF).** For every job an estimate of its latency ratio if it ran from now on
   at full speed: ``LR_j = (age_s + R_j) / (attained_s + R_j)`` with ``R_j = remaining_work /
   max_k T_jk`` (its remaining run time alone on its fastest type; without ``remaining_work``
   one round). A job that waited long relative to its size has a high ratio.
2. **Node-level throughput.** A node's speed factor (``NodeCapacity.speed``, e.g. a slower host
   CPU or network) multiplies ``T_jk``; the ILP sees each type at the mean speed of its nodes, and
   the placement step puts the most sensitive of the placed jobs on the fastest nodes
   (``Allocation.nodes``, honoured by the shared rounding step when there is room).
3. **Weighted ILP.** The *candidates* are the jobs in decreasing ``LR`` until their GPUs reach the
   cluster's capacity (the jobs LRF says deserve to run now). The ILP chooses binaries
   ``a_jk`` maximising ``sum LR_j ** ALPHA * n_jk * speed_k * a_jk`` with ``sum_k a_jk <= 1`` and
   ``sum_j g_j a_jk <= C_k``.
4. **Fragment filling.** GPUs left over (gangs that did not fit, slow types nobody chose) are
   filled with the remaining jobs in increasing *sensitivity* ``1 - min_k n_jk`` (a job whose
   speed varies least across types loses least on a leftover GPU), each on the free type where
   it is fastest.

Our own choices (no public code exists): the LR estimate, ``ALPHA = 1``, the candidate cut,
type-level ILP with per-type mean speed, the sensitivity measure, and objective coefficients
rounded to 3 significant digits so a round whose model is unchanged reuses the last solution
(kept in ``options.state``). See ``docs/policies/hops.md``.
"""

from __future__ import annotations

import time

import pulp

from .. import fairness
from ..errors import SolverError
from ..model import Allocation, Job, Problem
from ..solver import solve
from . import PolicyOptions, register
from ._lp import fallback_allocation

ALPHA = 1.0


def latency_ratio_estimate(job: Job, round_s: float) -> float:
    """:func:`slurm_fair.fairness.slowdown` if the job ran from now on at full speed: JCT
    ``age + R`` over time alone ``attained + R`` (``R`` its remaining time alone)."""
    best = job.best_throughput
    rem = float(job.remaining_work) / best if job.remaining_work is not None and best > 0 else round_s
    return fairness.slowdown(float(job.age_s or 0.0) + rem, max(job.attained_s + rem, 1e-9))


def sensitivity(job: Job, types: list[str]) -> float:
    """``1 - min_k n_jk`` over the types it can run on (0: the same speed everywhere)."""
    ns = [job.normalised(k) for k in types if job.normalised(k) > 0]
    return 1.0 - min(ns) if ns else 1.0


def type_speeds(problem: Problem) -> dict[str, float]:
    """Mean node speed per type, GPU-weighted (1.0 without node structure)."""
    out: dict[str, float] = {}
    for k in problem.types:
        nodes = [n for n in problem.nodes if n.gpu_type == k]
        total = sum(n.gpus for n in nodes)
        out[k] = sum(n.speed * n.gpus for n in nodes) / total if total else 1.0
    return out


def _node_choice(problem: Problem, placed: dict[str, str], order: list[Job]) -> dict[str, tuple[str, ...]]:
    """Fastest nodes first for the most sensitive placed jobs: whole gangs on one node when
    possible (fastest such node, then the fullest), else the fastest nodes with room."""
    free = {n.name: n.gpus for n in problem.nodes}
    speed = {n.name: n.speed for n in problem.nodes}
    by_type: dict[str, list[str]] = {}
    for n in problem.nodes:
        by_type.setdefault(n.gpu_type, []).append(n.name)
    hints: dict[str, tuple[str, ...]] = {}
    for job in order:
        k = placed.get(job.id)
        if k is None:
            continue
        names = by_type.get(k, [])
        whole = [m for m in names if free[m] >= job.gpus]
        if whole:
            m = min(whole, key=lambda m: (-speed[m], free[m], m))
            free[m] -= job.gpus
            hints[job.id] = (m,)
            continue
        need, picked = job.gpus, []
        for m in sorted(names, key=lambda m: (-speed[m], -free[m], m)):
            if need <= 0:
                break
            if free[m] > 0:
                use = min(free[m], need)
                free[m] -= use
                need -= use
                picked.append(m)
        if need <= 0:
            hints[job.id] = tuple(picked)
    return hints


@register("hops", "Hops: latency-ratio weighted ILP placement, node speed aware, fragments filled with low-sensitivity jobs", dynamic=True)
def allocate(problem: Problem, options: PolicyOptions) -> Allocation:
    started = time.perf_counter()
    types = problem.types
    lr = {j.id: latency_ratio_estimate(j, options.round_s) for j in problem.jobs}
    speeds = type_speeds(problem)
    capacity = sum(problem.gpu_types.values())
    ranked = sorted(problem.jobs, key=lambda j: (-lr[j.id], j.id))
    candidates: list[Job] = []
    demand = 0
    for j in ranked:
        if demand >= capacity:
            break
        if j.best_throughput > 0:
            candidates.append(j)
            demand += j.gpus

    model = pulp.LpProblem("hops", pulp.LpMaximize)
    a: dict[tuple[str, str], pulp.LpVariable] = {}
    obj: dict[pulp.LpVariable, float] = {}
    by_type: dict[str, dict] = {k: {} for k in types}
    for i, j in enumerate(candidates):
        row = {}
        for t, k in enumerate(types):
            n = j.normalised(k)
            if n <= 0 or j.gpus > problem.gpu_types[k]:
                continue
            v = pulp.LpVariable(f"a_{i}_{t}", cat=pulp.LpBinary)
            a[j.id, k] = v
            obj[v] = float(f"{(lr[j.id] ** ALPHA) * n * speeds[k]:.3g}")
            row[v] = 1.0
            by_type[k][v] = float(j.gpus)
        if row:
            model += pulp.LpConstraint(pulp.LpAffineExpression(row), pulp.LpConstraintLE, None, 1.0)
    placed: dict[str, str] = {}
    solver_name = "none"
    # each candidate on its own best type, if that fits all at once, is the ILP's optimum
    best = {}
    for (jid, k), v in a.items():
        if jid not in best or (obj[v], k) > (obj[a[jid, best[jid]]], best[jid]):
            best[jid] = k
    gpus_of = {j.id: j.gpus for j in candidates}
    used: dict[str, int] = {}
    for jid, k in best.items():
        used[k] = used.get(k, 0) + gpus_of[jid]
    if all(u <= problem.gpu_types[k] for k, u in used.items()):
        placed = dict(best)
    elif a:
        # the same model as last round (coefficients to 3 significant digits): same optimum
        key = (tuple(sorted((jid, k, obj[v], gpus_of[jid]) for (jid, k), v in a.items())),
               tuple(sorted(problem.gpu_types.items())))
        memo = options.state.setdefault("hops_memo", {})
        if key in memo:
            placed = dict(memo[key])
        else:
            model += pulp.LpAffineExpression(obj)
            for k, terms in by_type.items():
                if terms:
                    model += pulp.LpConstraint(pulp.LpAffineExpression(terms), pulp.LpConstraintLE, None,
                                               float(problem.gpu_types[k]))
            try:
                res = solve(model, options.solver, options.time_limit_s, options.keep_lp_dir)
            except SolverError as exc:
                return fallback_allocation(problem, "hops", exc, started)
            solver_name = res.solver
            placed = {jid: k for (jid, k), v in a.items() if (v.varValue or 0.0) > 0.5}
            memo.clear()  # only the last model: rounds repeat the previous one, not older ones
            memo[key] = dict(placed)

    # fragment filling: leftovers to the least sensitive waiting jobs
    free = {k: int(c) for k, c in problem.gpu_types.items()}
    gpus = {j.id: j.gpus for j in problem.jobs}
    for jid, k in placed.items():
        free[k] -= gpus[jid]
    fillers: list[str] = []
    waiting = sorted(
        (j for j in problem.jobs if j.id not in placed and j.best_throughput > 0),
        key=lambda j: (sensitivity(j, types), -lr[j.id], j.id),
    )
    for j in waiting:
        options_k = sorted((k for k in types if j.normalised(k) > 0 and free[k] >= j.gpus),
                           key=lambda k: (-j.normalised(k) * speeds[k], k))
        if options_k:
            placed[j.id] = options_k[0]
            free[options_k[0]] -= j.gpus
            fillers.append(j.id)

    nodes: dict[str, tuple[str, ...]] = {}
    if problem.nodes:
        order = sorted(problem.jobs, key=lambda j: (-sensitivity(j, types), -j.gpus, j.id))
        nodes = _node_choice(problem, placed, order)
    x = {j.id: ({placed[j.id]: 1.0} if j.id in placed else {}) for j in problem.jobs}
    return Allocation("hops", x, "optimal", solver_name, time.perf_counter() - started, nodes=nodes,
                      info={"latency_ratio": lr, "fragment_fillers": fillers})
