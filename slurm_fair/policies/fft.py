"""FFT (ICS 2025): per-round cost minimisation balancing efficiency and fairness.

Each round the policy minimises ``cost = - sum_jk n_jk (1 + lam * c_j) a_jk + sigma * sum_jk s_jk a_jk``
over ``a_jk in [0, 1]`` (``sum_k a_jk <= 1``, ``sum_j g_j a_jk <= C_k``), where

* ``c_j`` is the **fairness compensation** of job ``j``: how many rounds of full-speed progress
  the job (and, shared equally among its jobs, its tenant) is behind its fair progress. Fair
  progress accrues every round the job is in the system at its *isolated share rate* (its
  tenant's ``w_u/W`` of every type split equally among the tenant's active jobs, used as well as
  the job can; :func:`slurm_fair.fairness.isolated_time_shares`); attained progress accrues ``n_jk`` per
  round it ran on ``k`` (read from ``Job.prev_type``). Both live in ``options.state``, so the
  compensation is computed in real time from what actually happened.
* ``s_jk = 1`` when ``j`` ran on another type last round (the **switching penalty**).

Our own choices (no public code exists): the linear form of the cost, ``lam = 1``,
``sigma = 0.1`` (about the share of a round lost to a restart, ``30 s / 360 s``, rounded up),
deficits floored at 0 and capped at 10 rounds so one long-starved job cannot take the whole
cluster, and solving the LP relaxation: the shared rounding step turns fractional ``a`` into an
integral placement as for every other policy. Details: ``docs/policies/fft.md``.
"""

from __future__ import annotations

import time

import pulp

from .. import fairness
from ..errors import SolverError
from ..model import Allocation, Problem
from ..solver import solve
from . import PolicyOptions, register
from ._lp import fallback_allocation

LAMBDA = 1.0
SIGMA = 0.1
MAX_DEFICIT_ROUNDS = 10.0


def update_ledger(problem: Problem, state: dict) -> dict[str, float]:
    """Advance the fair/attained ledger by one round and return each job's compensation ``c_j``.

    ``state["fair"][j]`` and ``state["got"][j]`` are in rounds of full-speed progress.
    """
    fair: dict[str, float] = state.setdefault("fair", {})
    got: dict[str, float] = state.setdefault("got", {})
    seen: set[str] = state.setdefault("seen", set())
    tenants = problem.active_tenants
    count = {u: len(problem.jobs_of(u)) for u in tenants}
    for j in problem.jobs:
        if j.id in seen:
            # the previous round happened: credit what the job got, and what it deserved
            if j.prev_type:
                got[j.id] = got.get(j.id, 0.0) + j.normalised(j.prev_type)
            fair[j.id] = fair.get(j.id, 0.0) + state.get("rate", {}).get(j.id, 0.0)
        seen.add(j.id)
    # the job's isolated progress per round: its finish-time-fairness baseline, in full-speed rounds
    shares = fairness.isolated_time_shares(problem)
    rates = {j.id: sum(j.normalised(k) * z for k, z in shares[j.id].items()) for j in problem.jobs}
    state["rate"] = rates
    active = {j.id for j in problem.jobs}
    for book in (fair, got):
        for jid in [k for k in book if k not in active]:
            del book[jid]
    seen.intersection_update(active)
    job_def = {j.id: max(0.0, fair.get(j.id, 0.0) - got.get(j.id, 0.0)) for j in problem.jobs}
    tenant_def = {u: sum(job_def[j.id] for j in problem.jobs_of(u)) for u in tenants}
    return {
        j.id: min(MAX_DEFICIT_ROUNDS, job_def[j.id] + tenant_def[j.tenant] / count[j.tenant])
        for j in problem.jobs
    }


def _independent_optimum(problem: Problem, a: dict, cost: dict) -> dict[str, dict[str, float]] | None:
    """When every job's cheapest type (all costs negative) fits at once, that assignment is the
    optimum of the LP (each term is minimised on its own): skip the solver. None otherwise."""
    best: dict[str, tuple[float, str]] = {}
    for (jid, k), v in a.items():
        if jid not in best or (cost[v], k) < best[jid]:
            best[jid] = (cost[v], k)
    used: dict[str, float] = {}
    gpus = {j.id: j.gpus for j in problem.jobs}
    for jid, (c, k) in best.items():
        if c >= 0:
            return None
        used[k] = used.get(k, 0.0) + gpus[jid]
    if any(u > problem.gpu_types[k] for k, u in used.items()):
        return None
    x: dict[str, dict[str, float]] = {j.id: {} for j in problem.jobs}
    for jid, (_, k) in best.items():
        x[jid] = {k: 1.0}
    return x


@register("fft", "FFT: per-round cost minimisation with fairness compensation and a switching penalty", dynamic=True)
def allocate(problem: Problem, options: PolicyOptions) -> Allocation:
    started = time.perf_counter()
    comp = update_ledger(problem, options.state)
    model = pulp.LpProblem("fft", pulp.LpMinimize)
    types = problem.types
    a: dict[tuple[str, str], pulp.LpVariable] = {}
    cost: dict[pulp.LpVariable, float] = {}
    by_job: dict[str, dict] = {}
    by_type: dict[str, dict] = {k: {} for k in types}
    for i, j in enumerate(problem.jobs):
        for t, k in enumerate(types):
            n = j.normalised(k)
            if n <= 0 or j.gpus > problem.gpu_types[k]:
                continue
            v = pulp.LpVariable(f"a_{i}_{t}", lowBound=0, upBound=1)
            a[j.id, k] = v
            switch = SIGMA if (j.prev_type is not None and j.prev_type != k) else 0.0
            cost[v] = -n * (1.0 + LAMBDA * comp[j.id]) + switch
            by_job.setdefault(j.id, {})[v] = 1.0
            by_type[k][v] = float(j.gpus)
    if not a:
        return Allocation("fft", {j.id: {} for j in problem.jobs}, "optimal", "none", time.perf_counter() - started)
    trivial = _independent_optimum(problem, a, cost)
    if trivial is not None:
        return Allocation("fft", trivial, "optimal", "none", time.perf_counter() - started,
                          info={"compensation": {jid: c for jid, c in comp.items() if c > 0}, "trivial": True})
    model += pulp.LpAffineExpression(cost)
    for jid, terms in by_job.items():
        model += pulp.LpConstraint(pulp.LpAffineExpression(terms), pulp.LpConstraintLE, None, 1.0)
    for k, terms in by_type.items():
        if terms:
            model += pulp.LpConstraint(pulp.LpAffineExpression(terms), pulp.LpConstraintLE, None, float(problem.gpu_types[k]))
    try:
        res = solve(model, options.solver, options.time_limit_s, options.keep_lp_dir)
    except SolverError as exc:
        return fallback_allocation(problem, "fft", exc, started)
    x: dict[str, dict[str, float]] = {j.id: {} for j in problem.jobs}
    for (jid, k), v in a.items():
        val = float(v.varValue or 0.0)
        if val > 1e-9:
            x[jid][k] = min(1.0, val)
    return Allocation(
        "fft", x, "optimal", res.solver, time.perf_counter() - started,
        info={"compensation": {jid: c for jid, c in comp.items() if c > 0}},
    )
