"""Hops (SoCC 2024) as its paper describes it (through the project's implementation brief); every
choice where the paper is silent is listed in ``docs/policies/hops.md``.

One round is two plans, each the same three steps:

1. **Queue and window.** Every job's priority is its latency ratio ``LR = W / A`` (Eqs. 6, 8;
   :func:`slurm_fair.fairness.latency_ratio`): ``W`` the time it has waited so far (time in the
   system minus time run, so a requeued job's waits add up), ``A`` its age (Eq. 9,
   :func:`slurm_fair.fairness.age_s`): the time it has run plus its remaining work's predicted
   run time averaged over the types by GPU share. The window is the queue head (decreasing LR)
   up to the job whose minimum demand (our jobs are rigid: its ``g``) brings the sum to the
   cluster's total GPUs; only window jobs enter the plan's ILP.
2. **Configurations** (:mod:`._hops_configs`): per node, spread only for placement-insensitive
   jobs (Eq. 10, threshold ``hops.sigma``).
3. **Weighted ILP** (:mod:`._hops_ilp`, Eqs. 11-13): ``(prio + b)^lambda x G``, ``lambda`` =
   ``hops.lambda``, relative MIP gap ``hops.gap``.

The first plan re-plans every job on the whole cluster (jobs may change type and count between
rounds, §3.6). The second is the paper's in-round re-plan on the GPUs the first left idle: the
window recomputed over the jobs still waiting, plus the *sensitivity adjustment* (jobs beyond
the window with below-average placement sensitivity promoted into the idle GPUs). The engine
calls it again inside a round at every completion and arrival (``replans=True``: the paper's
re-plan when GPUs free up), on the jobs still waiting and the GPUs free then. On Slurm the
mirror is Slurm's own scheduler, which runs at every job end and starts the waiting jobs the
plan left unpinned on the GPUs free then, in the plan's order (docs/controller.md, "No job-end
trigger").

Output: ``x[j] = {type: 1.0}`` for the placed jobs and ``Allocation.nodes`` naming their nodes
(the rounding step honours them when there is room). ``options.state["hops_nodes"]`` keeps this
round's nodes so a job that stays on its type keeps them next round.
"""

from __future__ import annotations

import math
import time
from typing import Mapping

from .. import fairness
from ..errors import SolverError
from ..model import Allocation, Job, Problem
from . import Param, PolicyOptions, register
from ._hops_configs import SIGMA, Config, classes, configurations, job_sensitivity, pack
from ._hops_ilp import solve_plan
from ._lp import fallback_allocation
from ..statuses import AllocationStatus

PARAMS = {
    "lambda": Param(1.0, 0.0, 10.0, "exponent of (prio + b) in the ILP's weights; 0: max throughput"),
    "sigma": Param(SIGMA, 1.0, None, "placement sensitivity above which a job is never spread"),
    "gap": Param(0.01, 0.0, 0.5, "relative MIP gap of the ILP"),
}


def wait_s(job: Job) -> float:
    """``W``: time in the system minus time run (a requeued job's waits add up)."""
    return max(0.0, float(job.age_s or 0.0) - job.attained_s)


def age(job: Job, capacity: Mapping[str, int], round_s: float) -> float:
    """``A`` (Eq. 9) refreshed as the job runs: the time it has run plus the predicted run time
    of its remaining work (:func:`slurm_fair.fairness.age_s`); one round when the remaining work
    is unknown. For a job that never ran it is exactly Eq. 9 on its whole work."""
    known = fairness.known_age(job, capacity)  # its time limit when its size is hidden
    return job.attained_s + round_s if known is None else known


def priority(job: Job, capacity: Mapping[str, int], round_s: float) -> float:
    """``prio = LR = W / A``."""
    return fairness.latency_ratio(wait_s(job), age(job, capacity, round_s))


def queue_of(problem: Problem, prio: Mapping[str, float]) -> list[Job]:
    """The queue by decreasing priority (longer in the system first on a tie, then id). It
    holds the jobs the cluster can hold at all: a gang no type can hold even empty would take
    a place in the window (its demand counted against the total) and never run."""
    return sorted((j for j in problem.jobs if any(t > 0 and problem.holds(j, k) for k, t in j.throughput.items())),
                  key=lambda j: (-prio[j.id], -float(j.age_s or 0.0), j.id))


def window(queue: list[Job], total_gpus: int) -> list[Job]:
    """The queue head up to and including the job whose demand brings the sum to ``total_gpus``."""
    out, demand = [], 0
    for job in queue:
        if demand >= total_gpus:
            break
        out.append(job)
        demand += job.gpus
    return out


def promote(win: list[Job], queue: list[Job], idle: int, rho: Mapping[str, float]) -> list[Job]:
    """The sensitivity adjustment: while the window's mean sensitivity is above the queue's,
    promote jobs from beyond the window (queue order) that are below the queue's mean and fit
    in the GPUs still idle (decremented as jobs are promoted). Jobs of unknown sensitivity
    count in neither mean and are never promoted."""
    known = [rho[j.id] for j in queue if math.isfinite(rho[j.id])]
    if not known:
        return []
    q_mean = sum(known) / len(known)
    in_win = [rho[j.id] for j in win if math.isfinite(rho[j.id])]
    inside = {j.id for j in win}
    out: list[Job] = []
    for job in queue:
        if in_win and sum(in_win) / len(in_win) <= q_mean:
            break
        if job.id in inside or not rho[job.id] < q_mean or job.gpus > idle:
            continue
        out.append(job)
        in_win.append(rho[job.id])
        idle -= job.gpus
    return out


@register("hops", "Hops: latency-ratio window, weighted ILP over per-node configurations, "
          "spread and fragment filling for placement-insensitive jobs", dynamic=True, params=PARAMS,
          replans=True)
def allocate(problem: Problem, options: PolicyOptions) -> Allocation:
    started = time.perf_counter()
    lam, sigma, gap = (options.param("hops", k) for k in ("lambda", "sigma", "gap"))
    capacity = {k: int(c) for k, c in problem.gpu_types.items()}
    total = sum(capacity.values())
    prio = {j.id: priority(j, capacity, options.round_s) for j in problem.jobs}
    rho = {j.id: job_sensitivity(j) for j in problem.jobs}
    queue = queue_of(problem, prio)
    if problem.nodes:
        free = {n.name: n.gpus for n in problem.nodes}
    else:
        free = dict(capacity)
    memory = options.state.get("hops_nodes", {})
    prefer = {j.id: memory[j.id] for j in problem.jobs if j.id in memory and j.prev_type}
    placed: dict[str, tuple[str, dict[str, int]]] = {}
    plans: list[dict[str, object]] = []
    info: dict[str, object] = {"latency_ratio": prio, "plans": plans}
    solver_name = "none"
    for step in ("first", "replan"):
        waiting = [j for j in queue if j.id not in placed]
        idle = sum(free.values())
        if not waiting or idle <= 0:
            break
        win = window(waiting, total)
        promoted = promote(win, waiting, idle, rho) if step == "replan" else []
        try:
            got, stats = _plan(problem, win + promoted, free, prio, lam, sigma, gap, options, prefer)
        except SolverError as exc:
            return fallback_allocation(problem, "hops", exc, started)
        if stats["solver"] != "none":
            solver_name = str(stats["solver"])
        for jid, (k, on) in got.items():
            placed[jid] = (k, on)
            if problem.nodes:
                for n, g in on.items():
                    free[n] -= g
            else:
                free[k] -= next(j.gpus for j in problem.jobs if j.id == jid)
        plans.append({"step": step, "window": len(win), "promoted": [j.id for j in promoted],
                      "placed": len(got), **stats})
    options.state["hops_nodes"] = {jid: on for jid, (_, on) in placed.items() if on}
    x = {j.id: ({placed[j.id][0]: 1.0} if j.id in placed else {}) for j in problem.jobs}
    nodes = {jid: tuple(sorted(on)) for jid, (_, on) in placed.items() if on}
    info["node_gpus"] = {jid: dict(on) for jid, (_, on) in placed.items() if on}
    return Allocation("hops", x, AllocationStatus.OPTIMAL, solver_name, time.perf_counter() - started, nodes=nodes, info=info)


def _plan(problem: Problem, jobs: list[Job], free: dict[str, int], prio: Mapping[str, float], lam: float,
          sigma: float, gap: float, options: PolicyOptions,
          prefer: Mapping[str, Mapping[str, int]]) -> tuple[dict[str, tuple[str, dict[str, int]]], dict[str, object]]:
    """One plan on the GPUs ``free``: configurations, the ILP, the nodes named."""
    if problem.nodes:
        cls = classes(problem.nodes, free, per_node=any(j.hosts is not None for j in jobs))
        class_of = {n: cid for cid, c in cls.items() for n in c.names}
        capacity = {cid: (c.gpus, len(c.names), c.free) for cid, c in cls.items()}
    else:
        cls, class_of = {}, {}
        capacity = {k: (f, f, f) for k, f in free.items() if f > 0}
    rows = []
    for job in jobs:
        cfgs = configurations(job, free, problem.nodes, class_of, sigma)
        if cfgs:
            rows.append((job, prio[job.id], cfgs))
    plan = solve_plan(rows, capacity, lam, gap, options.solver, options.time_limit_s, options.keep_lp_dir)
    stats: dict[str, object] = {"solver": plan.solver, "binaries": plan.binaries, "seconds": round(plan.seconds, 4)}
    by_id = {j.id: j for j in jobs}
    if not problem.nodes:
        return {jid: (c.gpu_type, {}) for jid, c in plan.chosen.items()}, stats
    chosen: list[tuple[Job, Config]] = [(by_id[jid], c) for jid, c in plan.chosen.items()]
    chosen.sort(key=lambda jc: (-prio[jc[0].id], jc[0].id))
    named, failed = pack(chosen, cls, prefer)
    stats["unpacked"] = failed
    return {jid: (plan.chosen[jid].gpu_type, on) for jid, on in named.items()}, stats


