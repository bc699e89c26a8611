"""Building blocks shared by the LP policies: the group LP with the policy's options, the
models more than one policy solves (max E, Gavel's max-min), the fallback and the result.

Every LP policy works on job groups (:mod:`slurm_fair.jobgroups`) and on the group LP of
:mod:`slurm_fair.grouplp` (columns ``X_ck``, capacity and demand rows), with its own columns and
rows on top.
"""

from __future__ import annotations

import time
from typing import Mapping

from .. import fairness
from ..grouplp import GroupLP
from ..errors import SolverError
from ..jobgroups import JobGroup, groups_of
from ..model import Allocation, Problem
from ..solver import INF
from . import PolicyOptions
from ..statuses import AllocationStatus

#: relative round-off allowance of max-min's level when it is held in the second stage
_MAX_MIN_SLACK = 1e-7


def class_lp(problem: Problem, name: str, classes: list[JobGroup], options: PolicyOptions,
             n: Mapping[int, Mapping[str, float]] | None = None, counts: Mapping[int, float] | None = None) -> GroupLP:
    """The group LP (:mod:`slurm_fair.grouplp`) over the problem's capacities, solved the way
    ``options`` say: HiGHS in-process, or PuLP/CBC when ``options.solver`` resolves to ``cbc``
    (forced, or ``auto`` without ``highspy``); the time limit applies to every solve."""
    return GroupLP(classes, {k: float(c) for k, c in problem.gpu_types.items()}, name, n=n, counts=counts,
                   backend="cbc" if options.resolved_solver == "cbc" else None,
                   time_limit_s=options.time_limit_s, keep_lp_dir=options.keep_lp_dir)


def max_throughput_classes(problem: Problem, options: PolicyOptions, classes: list[JobGroup]) -> dict[int, dict[str, float]]:
    """The class solution of ``max E`` (max-throughput's answer, oef's efficiency bound).

    ``max E`` does not look at tenants, and in GPU-time (``y_ck = g_c z_ck``) a class is only
    its rate per GPU ``n_ck / g_c`` and its GPUs ``g_c m_c``: classes with the same rates per GPU
    are one column set in the LP, with their GPUs summed (thousands of classes of many tenants
    are a few hundred such rate vectors). Each merged optimum is split back over its classes in
    proportion to their GPUs, which keeps every class within its demand and gives the same E."""
    types = [k for k in sorted(problem.gpu_types) if problem.gpu_types[k] > 0]
    merged: dict[tuple[float, ...], list[JobGroup]] = {}
    for c in classes:
        merged.setdefault(tuple(c.n.get(k, 0.0) / c.gpus for k in types), []).append(c)
    rates = [JobGroup(i, "", 1, {k: r for k, r in zip(types, key) if r > 0}, ())
             for i, key in enumerate(merged)]
    gpus = {i: float(sum(c.gpus * c.count for c in members)) for i, members in enumerate(merged.values())}
    cm = class_lp(problem, "max_throughput", rates, options, counts=gpus)
    cm.set_objective(cm.efficiency())
    cm.solve()
    y = cm.values()
    out: dict[int, dict[str, float]] = {}
    for i, members in enumerate(merged.values()):
        for c in members:  # z_ck = y_k * (g_c m_c / G) / g_c
            share = c.count / gpus[i] if gpus[i] else 0.0
            out[c.key] = {k: v * share for k, v in y[i].items() if v * share > 1e-10}
    return out


def _equal_share_rate(problem: Problem, n: Mapping[str, float], denom: float) -> float:
    """Gavel's equal-share rate ``sum_k n_k e_k`` with ``e_k = C_k / denom``."""
    return sum(v * problem.gpu_types.get(k, 0) / denom for k, v in n.items())


def max_min_classes(problem: Problem, options: PolicyOptions, name: str,
                    agnostic: bool) -> tuple[list[JobGroup], dict[int, dict[str, float]], float]:
    """Gavel's two-stage weighted max-min over jobs (gavel-mmf, agnostic; oef's third start):
    ``max t`` s.t. ``r_j >= t * w_j * r^eq_j``, then ``max E`` with ``t`` held at its optimum
    (docs/policies/gavel-mmf.md). ``agnostic``: ``n_jk = 1`` wherever the job can run. Returns the
    classes, the class solution and ``t``."""
    classes = groups_of(problem)
    if agnostic:
        n = {c.key: {k: 1.0 for k in c.n} for c in classes}
    else:
        n = {c.key: dict(c.n) for c in classes}
    njobs: dict[str, int] = {}
    for j in problem.jobs:
        njobs[j.tenant] = njobs.get(j.tenant, 0) + 1
    denom = max(sum(j.gpus for j in problem.jobs), sum(problem.gpu_types.values()), 1)
    coef = {c.key: c.count * (problem.weight(c.tenant) / njobs[c.tenant]) * _equal_share_rate(problem, n[c.key], denom)
            for c in classes}
    # one in-memory model for both stages: max t, then max E with t held at its optimum
    cm = class_lp(problem, f"{name}_maxmin", classes, options, n=n)
    t = cm.add_col()
    for c in classes:
        if coef[c.key] > 0:
            cm.add_row({**cm.class_rate(c), t: -coef[c.key]}, 0.0, INF)
    cm.set_objective({t: 1.0})
    cm.solve()
    t_star = max(0.0, cm.value(t))
    # held at its optimum less round-off (t_star is computed: fairness.slack keeps the first
    # stage's own answer feasible under the solvers' tolerances)
    cm.add_row({t: 1.0}, t_star - max(_MAX_MIN_SLACK * t_star, fairness.slack(t_star)), INF)
    cm.set_objective(cm.efficiency())
    cm.solve()
    return classes, cm.values(), t_star


def split_classes(classes: list[JobGroup], X: Mapping[int, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Per-job ``x_jk = X_ck / m_c``: identical jobs share their class's time equally.

    Shares are clipped into [0, 1] and scaled so a job's total never exceeds 1, which removes
    solver round-off without moving any value by more than the solver's tolerance.
    """
    x: dict[str, dict[str, float]] = {}
    for c in classes:
        row = {k: min(1.0, max(0.0, v / c.count)) for k, v in X.get(c.key, {}).items() if v > 1e-10}
        total = sum(row.values())
        if total > 1.0:
            row = {k: v / total for k, v in row.items()}
        for job_id in c.job_ids:
            x[job_id] = dict(row)
    return x


def clip_capacity(problem: Problem, x: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Scale a type's shares down by the solver's round-off when they exceed its capacity."""
    gpus = {j.id: j.gpus for j in problem.jobs}
    used: dict[str, float] = {}
    for jid, row in x.items():
        for k, v in row.items():
            used[k] = used.get(k, 0.0) + gpus[jid] * v
    for k, u in used.items():
        cap = float(problem.gpu_types.get(k, 0))
        if u > cap > 0 or (cap == 0 and u > 0):
            factor = cap / u if u > 0 else 0.0
            for row in x.values():
                if k in row:
                    row[k] *= factor
    return x


def feasible_classes(problem: Problem, classes: list[JobGroup],
                     X: Mapping[int, Mapping[str, float]]) -> dict[int, dict[str, float]]:
    """``X`` made exactly feasible the way :func:`result` makes the answer feasible (negatives
    dropped, a class's total scaled down to ``m_c``, a type's use scaled down to ``C_k``): solver
    round-off (CBC prints 8 significant digits) can leave a solution 1e-8 outside the feasible
    set, and a point that is checked, or whose utilities become floors of another model, must be
    the point that is returned."""
    out: dict[int, dict[str, float]] = {}
    for c in classes:
        row = {k: float(v) for k, v in X.get(c.key, {}).items() if v > 1e-10 and c.n.get(k, 0.0) > 0}
        total = sum(row.values())
        if total > c.count:
            row = {k: v * c.count / total for k, v in row.items()}
        out[c.key] = row
    used: dict[str, float] = {}
    gpus = {c.key: c.gpus for c in classes}
    for ck, row in out.items():
        for k, v in row.items():
            used[k] = used.get(k, 0.0) + gpus[ck] * v
    for k, u in used.items():
        cap = float(problem.gpu_types.get(k, 0))
        if u > cap:
            factor = cap / u if u > 0 else 0.0
            for row in out.values():
                if k in row:
                    row[k] *= factor
    return out


def equal_split_classes(problem: Problem, classes: list[JobGroup]) -> dict[int, dict[str, float]]:
    """The equal split with best use: each tenant's classes use ``(w_u/W) C`` as well as they can.

    Always feasible, SI and EF (docs/fairness.md); the documented fallback of every LP policy. Its
    small per-tenant LPs use the fastest installed solver.
    """
    X: dict[int, dict[str, float]] = {}
    mine: dict[str, list[JobGroup]] = {}
    for c in classes:
        mine.setdefault(c.tenant, []).append(c)
    for u in problem.active_tenants:
        X.update(fairness.best_use(mine.get(u, []), fairness.equal_share(problem, u)).z)
    return X


def fallback_allocation(problem: Problem, policy: str, error: SolverError, started: float) -> Allocation:
    """The equal split with best use, reported with status ``fallback`` and the error."""
    classes = groups_of(problem)
    x = clip_capacity(problem, split_classes(classes, equal_split_classes(problem, classes)))
    return Allocation(
        policy=policy, x=x, status=AllocationStatus.FALLBACK, solver="none",
        solve_seconds=time.perf_counter() - started,
        fallback_reason=str(error), info={"lp_file": error.lp_file, "solver_status": error.status},
    )


def result(problem: Problem, policy: str, classes: list[JobGroup], X: Mapping[int, Mapping[str, float]],
           options: PolicyOptions, started: float, info: Mapping[str, object] | None = None,
           status: str = AllocationStatus.OPTIMAL, efficiency_bound: float | None = None) -> Allocation:
    """The Allocation of a class solution (split over the classes' jobs, clipped to capacity);
    ``info`` gets the number of classes."""
    x = clip_capacity(problem, split_classes(classes, X))
    return Allocation(policy=policy, x=x, status=status, solver=options.resolved_solver,
                      solve_seconds=time.perf_counter() - started, efficiency_bound=efficiency_bound,
                      info={**(info or {}), "classes": len(classes)})
