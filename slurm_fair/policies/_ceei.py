"""A competitive equilibrium from (weighted) equal incomes (CEEI) for best-use valuations.

Market: one good per GPU type ``k`` (supply ``C_k > 0``), price ``p_k >= 0``; tenant ``u`` has
income ``w_u`` and values a bundle ``y`` at ``V_u(y)`` (docs/fairness.md). A CEEI is prices and a
feasible allocation in which every tenant's bundle maximises ``V_u`` over ``p.y <= w_u`` (a
cheapest such bundle when it is satiated) and every type with ``p_k > 0`` is fully allocated. It
is SI, EF and Pareto-efficient (``docs/oef.md``, "CEEI").

Computation (``docs/oef.md`` has the proofs):

* For budgets ``b_u > 0`` the weighted Eisenberg-Gale program ``max sum_u b_u log U_u`` over
  feasible class solutions is solved as an LP with tangent cuts ``t_u <= log a + (U_u - a)/a``
  (an outer approximation of ``log``, refined at the point the solution lands). Whatever the
  approximation, the LP's optimum ``X`` with its duals is an exact *Negishi point*: with
  ``lambda_u = sum_i mu_ui / a_i > 0`` (``mu`` the cut duals), ``X`` maximises
  ``sum_u lambda_u U_u`` and ``(p, q)`` (capacity and per-class demand duals) certify it, with
  ``lambda_u U_u = p.y_u + Q_u`` (``Q_u = sum_c m_c q_c``). So ``X`` is Pareto-efficient, and
  it is a CEEI for incomes ``w`` as soon as every tenant spends ``p.y_u = w_u`` (or spends less
  and is satiated: all its jobs at their best rate).
* The budgets are moved by the spending error, ``b_u <- b_u + (w_u - p.y_u)`` (``b = w + Q``
  at a fixed point: the per-class duals are money the tenant does not spend on GPUs), until the
  relative error is below ``snap_below``; this iteration alone can cycle, so
  :func:`~._ceei_snap.snap` then closes the error exactly with small LPs on the support (bilinear
  conditions: linear in the duals for a fixed ``X``, in ``X`` for fixed duals; joint
  sequential-LP steps; activities brought into the support when it stalls).

The answer is checked exactly by the caller (SI, EF and PE with the ``V_u`` LPs); this module
only promises a Pareto-efficient point whose spending error it reports.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Mapping, Sequence

from ..grouplp import GroupLP
from ..errors import SolverError
from ..jobgroups import JobGroup
from ..model import Problem
from ..solver import INF, SmallLP
from ._ceei_market import Equilibrium
from ._ceei_snap import snap

_INITIAL_TANGENTS = 30


def ceei(problem: Problem, classes: list[JobGroup], tol: float = 1e-10, max_iter: int = 60,
         solver: str | None = None, snap_below: float = 1e-3,
         good_enough: "Callable[[dict[int, dict[str, float]]], bool] | None" = None,
         deadline: float | None = None) -> Equilibrium:
    """The CEEI of ``problem`` over ``classes`` (see the module docstring).

    ``good_enough(X)``, when given, is asked before the exact closing step
    (:func:`~._ceei_snap.snap`): an approximate point that already passes the caller's own check
    is returned as it is. ``deadline`` (``time.perf_counter()``) ends the iteration and the
    closing step between two solves: the best point so far is returned (``error`` says how far).
    """
    caps = {k: float(c) for k, c in problem.gpu_types.items() if float(c) > 0}
    types = [k for k in problem.types if k in caps]
    # the group LP with a column t_u per tenant (its log-utility), tangent rows added below
    model = GroupLP(classes, caps, "eisenberg_gale", backend=None if solver in (None, "auto", "highs") else solver)
    lp, cols = model.lp, model.cols
    lp.simplex = "primal"  # the iterations change costs (budgets): re-solves from a primal feasible basis
    tenant_of = {c.key: c.tenant for c in classes}
    owner = [tenant_of[ck] for ck, _ in cols]
    # tenants that can use some GPU: the others get nothing whatever the prices
    tenants = sorted(set(owner))
    if not tenants:  # no class can use a type with GPUs: nothing to price, every bundle empty
        return Equilibrium({c.key: {} for c in classes}, {}, {}, {}, 0.0, 0)
    weight = {u: problem.weight(u) for u in tenants}
    umax = {u: sum(c.count * max((c.n.get(k, 0.0) for k in types), default=0.0)
                   for c in classes if c.tenant == u) for u in tenants}
    tcol = {u: model.add_col(lb=-INF) for u in tenants}
    gpus = {c.key: c.gpus for c in classes}
    ucols: dict[str, list[int]] = {u: [] for u in tenants}
    for i, u in enumerate(owner):
        ucols[u].append(i)
    cap_rows = model.cap_row
    trows: list[tuple[str, float, int]] = []
    ncoef = {c.key: c.n for c in classes}
    uvals = {u: [ncoef[cols[i][0]][cols[i][1]] for i in ucols[u]] for u in tenants}
    tangents: dict[str, list[float]] = {u: [] for u in tenants}

    def tangent(u: str, a: float) -> None:
        # t_u - U_u / a <= log a - 1
        tangents[u].append(a)
        trows.append((u, a, len(lp.rows)))
        lp.add_row([tcol[u]] + ucols[u], [1.0] + [-v / a for v in uvals[u]], -INF, math.log(a) - 1.0)

    for u in tenants:
        for i in range(_INITIAL_TANGENTS):
            tangent(u, umax[u] * 0.5 ** i)
    budgets = dict(weight)
    step = {u: 1.0 for u in tenants}
    last = {u: 0 for u in tenants}
    best: Equilibrium | None = None
    X: dict[int, dict[str, float]] = {}
    for it in range(1, max_iter + 1):
        scale = max(budgets.values())
        for u in tenants:
            lp.set_cost(tcol[u], budgets[u] / scale)
        failed = _solve_twice(lp)
        if failed is not None:
            if best is None:
                raise failed
            break  # the cuts got too close for the LP's tolerances: polish the best point
        prices = {k: max(0.0, lp.duals[r]) * scale for k, r in cap_rows.items()}
        X, spend, util = _read_point(lp.x, cols, owner, classes, prices, gpus, ncoef, tenants)
        err = max((_spending_error(spend[u], util[u], weight[u], umax[u]) for u in tenants), default=0.0)
        if best is None or err < best.error:
            best = Equilibrium(X, prices, dict(budgets), spend, err, it)
        if err <= tol or (err <= snap_below and it >= 3) or _late(deadline):
            break
        for u in tenants:
            satiated = util[u] >= umax[u] * (1 - 1e-9)
            if satiated and spend[u] <= weight[u]:
                continue
            budgets[u], step[u], last[u] = _budget_step(budgets[u], weight[u], spend[u], step[u], last[u])
            a = util[u]
            if a > 0 and min(abs(a - t) for t in tangents[u]) > 1e-13 * a:
                tangent(u, a)
    assert best is not None
    best.iterations = it
    if best.error > tol and not _late(deadline) and not (good_enough is not None and good_enough(best.X)):
        return _snapped(best, classes, types, caps, weight, umax, solver, good_enough, deadline)
    return best


def _late(deadline: float | None) -> bool:
    return deadline is not None and time.perf_counter() >= deadline


def _snapped(best: Equilibrium, classes: list[JobGroup], types: list[str], caps: dict[str, float],
             weight: dict[str, float], umax: dict[str, float], solver: str | None,
             good_enough: Callable[[dict[int, dict[str, float]]], bool] | None,
             deadline: float | None = None) -> Equilibrium:
    """The exact closing step (:func:`~._ceei_snap.snap`) from ``best``; its answer when it is
    closer (or passes the caller's check), else ``best``."""
    snapped = snap(classes, types, caps, weight, umax, best, solver=solver, good_enough=good_enough,
                   deadline=deadline)
    if snapped is not None and (snapped.error < best.error or (good_enough is not None and good_enough(snapped.X))):
        snapped.budgets, snapped.iterations = best.budgets, best.iterations
        return snapped
    return best


def _solve_twice(lp: SmallLP) -> SolverError | None:
    """Solve warm; when that fails, once more from scratch. The second failure, or None."""
    try:
        lp.solve()
    except SolverError:
        try:
            lp.reset()
            lp.solve()
        except SolverError as exc:
            return exc
    return None


def _read_point(x: Sequence[float], cols: Sequence[tuple[int, str]], owner: Sequence[str],
                classes: list[JobGroup], prices: Mapping[str, float], gpus: Mapping[int, int],
                ncoef: Mapping[int, Mapping[str, float]], tenants: Sequence[str],
                ) -> tuple[dict[int, dict[str, float]], dict[str, float], dict[str, float]]:
    """The LP's point as a class solution, with each tenant's spending ``p.y_u`` and utility."""
    spend = {u: 0.0 for u in tenants}
    util = {u: 0.0 for u in tenants}
    X: dict[int, dict[str, float]] = {c.key: {} for c in classes}
    for i, (ck, k) in enumerate(cols):
        v = max(0.0, x[i])
        if v > 1e-12:
            X[ck][k] = v
        spend[owner[i]] += prices[k] * gpus[ck] * v
        util[owner[i]] += ncoef[ck][k] * v
    return X, spend, util


def _spending_error(spend: float, util: float, weight: float, umax: float) -> float:
    """A tenant's relative spending error; a satiated tenant may spend less than its budget."""
    e = (spend - weight) / weight
    return max(e, 0.0) if util >= umax * (1 - 1e-9) else abs(e)


def _budget_step(budget: float, weight: float, spend: float, step: float, last: int) -> tuple[float, float, int]:
    """The fixed-point step ``b <- w + Q`` is ``b += (w - p.y)``; it is lengthened while the
    error keeps its sign (a tenant whose marginal GPUs are worth little to it needs a large
    budget before it buys any) and reset when the sign flips. The new budget, step and sign."""
    sign = 1 if weight > spend else -1
    step = min(step * 2, 1e6) if sign == last else 1.0
    return max(budget + step * (weight - spend), 0.1 * budget), step, sign
