"""Hops' weighted ILP (Eqs. 11-13): at most one configuration per job, capacity per node class,
``max sum_i sum_j (prio_i + b)^lambda * G_ij * x_ij``.

``G_ij`` is configuration j's rate over the job's *smallest* rate among its configurations of
this plan (Sia's convention: each row's smallest entry is 1), so a job's weight says how much
it deserves to run and ``G`` how much better one configuration is than its worst.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import pulp

from ..model import Job
from ..solver import solve
from ._hops_configs import Config


def bias(priorities: Sequence[float]) -> float:
    """The paper's ``b``: 0 when every priority is positive, else ``|min prio| + 0.01`` (every
    weight positive, so a job with ``LR = 0``, a new arrival, still counts)."""
    low = min(priorities, default=1.0)
    return 0.0 if low > 0 else abs(low) + 0.01


def gains(configs: Sequence[Config]) -> list[float]:
    """``G_ij``: each rate over the smallest of the row."""
    low = min((c.rate for c in configs), default=0.0)
    return [c.rate / low if low > 0 else 0.0 for c in configs]


@dataclass(frozen=True)
class Plan:
    """What one solve chose (``{job: Config}``), the solver used and its seconds."""

    chosen: Mapping[str, Config]
    solver: str
    seconds: float
    binaries: int


def solve_plan(rows: Sequence[tuple[Job, float, Sequence[Config]]], capacity: Mapping[str, tuple[int, int, int]],
               lam: float, gap: float, solver: str, time_limit_s: float, keep_lp_dir: str | None) -> Plan:
    """Choose configurations. ``rows``: ``(job, prio, configs)``; ``capacity[class]`` =
    ``(GPUs free, nodes, free GPUs per node)``. Besides the GPUs of a class (Eq. 13 summed over
    its identical nodes), a class cannot hold more parts larger than half a node than it has
    nodes (two such parts never share one). When every job's best configuration fits at once,
    that is the optimum and no solver runs."""
    b = bias([p for _, p, cfgs in rows if cfgs])
    coef: list[tuple[Job, Config, float]] = []
    for job, prio, cfgs in rows:
        w = (prio + b) ** lam
        coef += [(job, c, w * g) for c, g in zip(cfgs, gains(cfgs))]
    best: dict[str, tuple[Config, float]] = {}
    for job, c, v in coef:
        if job.id not in best or v > best[job.id][1]:
            best[job.id] = (c, v)
    if _fits([c for c, _ in best.values()], capacity):
        return Plan({j: c for j, (c, _) in best.items()}, "none", 0.0, 0)
    model = pulp.LpProblem("hops", pulp.LpMaximize)
    xs = [pulp.LpVariable(f"x{i}", cat=pulp.LpBinary) for i in range(len(coef))]
    model += pulp.LpAffineExpression({x: v for x, (_, _, v) in zip(xs, coef)})
    per_job: dict[str, dict[pulp.LpVariable, float]] = {}
    gpus: dict[str, dict[pulp.LpVariable, float]] = {cid: {} for cid in capacity}
    big: dict[str, dict[pulp.LpVariable, float]] = {cid: {} for cid in capacity}
    for x, (job, c, _) in zip(xs, coef):
        per_job.setdefault(job.id, {})[x] = 1.0
        for cid, g in c.demand:
            gpus[cid][x] = gpus[cid].get(x, 0.0) + g
            if 2 * g > capacity[cid][2]:
                big[cid][x] = big[cid].get(x, 0.0) + 1
    for terms in per_job.values():
        model += pulp.LpConstraint(pulp.LpAffineExpression(terms), pulp.LpConstraintLE, None, 1.0)
    for cid, (free, count, _) in capacity.items():
        if gpus[cid]:
            model += pulp.LpConstraint(pulp.LpAffineExpression(gpus[cid]), pulp.LpConstraintLE, None, float(free))
        if big[cid] and sum(big[cid].values()) > count:
            model += pulp.LpConstraint(pulp.LpAffineExpression(big[cid]), pulp.LpConstraintLE, None, float(count))
    res = solve(model, solver, time_limit_s, keep_lp_dir, gap_rel=gap)
    chosen = {job.id: c for x, (job, c, _) in zip(xs, coef) if (x.varValue or 0.0) > 0.5}
    return Plan(chosen, res.solver, res.seconds, len(xs))


def _fits(configs: Sequence[Config], capacity: Mapping[str, tuple[int, int, int]]) -> bool:
    used: dict[str, int] = {}
    big: dict[str, int] = {}
    for c in configs:
        for cid, g in c.demand:
            used[cid] = used.get(cid, 0) + g
            big[cid] = big.get(cid, 0) + (2 * g > capacity[cid][2])
    return all(used[c] <= capacity[c][0] and big[c] <= capacity[c][1] for c in used)
