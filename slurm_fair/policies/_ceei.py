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
  :func:`_snap` then closes the error exactly with small LPs on the support (bilinear
  conditions: linear in the duals for a fixed ``X``, in ``X`` for fixed duals; joint
  sequential-LP steps; activities brought into the support when it stalls).

The answer is checked exactly by the caller (SI, EF and PE with the ``V_u`` LPs); this module
only promises a Pareto-efficient point whose spending error it reports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from .. import fairness
from ..jobclasses import JobClass
from ..model import Problem
from ..errors import SolverError
from ..classlp import ClassLP
from ..solver import INF, SmallLP

_INITIAL_TANGENTS = 30
#: a tenant within this relative distance of its best utility counts as satiated in the closing
#: step; it is then kept at least there (less fairness.slack: the row is built from a computed
#: point and must not cut that point off under round-off)
_SATIATED = 1e-7


@dataclass
class Equilibrium:
    X: dict[int, dict[str, float]]
    prices: dict[str, float]
    budgets: dict[str, float]
    spending: dict[str, float]
    #: max over tenants of the relative spending error (0 for a satiated tenant spending less)
    error: float
    iterations: int


def ceei(problem: Problem, classes: list[JobClass], tol: float = 1e-10, max_iter: int = 60,
         solver: str | None = None, snap_below: float = 1e-3,
         good_enough: "Callable[[dict[int, dict[str, float]]], bool] | None" = None) -> Equilibrium:
    """The CEEI of ``problem`` over ``classes`` (see the module docstring).

    ``good_enough(X)``, when given, is asked before the exact closing step (:func:`_snap`): an
    approximate point that already passes the caller's own check is returned as it is.
    """
    caps = {k: float(c) for k, c in problem.gpu_types.items() if float(c) > 0}
    types = [k for k in problem.types if k in caps]
    # the class LP with a column t_u per tenant (its log-utility), tangent rows added below
    model = ClassLP(classes, caps, "eisenberg_gale", backend=None if solver in (None, "auto", "highs") else solver)
    lp = model.lp
    cols = model.cols
    tenant_of = {c.key: c.tenant for c in classes}
    owner = [tenant_of[ck] for ck, _ in cols]
    # tenants that can use some GPU: the others get nothing whatever the prices
    tenants = sorted(set(owner))
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
        try:
            lp.solve()
        except SolverError:
            try:
                lp.reset()
                lp.solve()  # once more from scratch, without the warm start
            except SolverError:
                if best is None:
                    raise
                break  # the cuts got too close for the LP's tolerances: polish the best point
        prices = {k: max(0.0, lp.duals[r]) * scale for k, r in cap_rows.items()}
        spend = {u: 0.0 for u in tenants}
        util = {u: 0.0 for u in tenants}
        X = {c.key: {} for c in classes}
        for i, (ck, k) in enumerate(cols):
            v = max(0.0, lp.x[i])
            if v > 1e-12:
                X[ck][k] = v
            spend[owner[i]] += prices[k] * gpus[ck] * v
            util[owner[i]] += ncoef[ck][k] * v
        err = 0.0
        for u in tenants:
            e = (spend[u] - weight[u]) / weight[u]
            satiated = util[u] >= umax[u] * (1 - 1e-9)
            err = max(err, max(e, 0.0) if satiated else abs(e))
        if best is None or err < best.error:
            best = Equilibrium(X, prices, dict(budgets), spend, err, it)
        if err <= tol or (err <= snap_below and it >= 3):
            break
        for u in tenants:
            satiated = util[u] >= umax[u] * (1 - 1e-9)
            if satiated and spend[u] <= weight[u]:
                continue
            # the fixed-point step b <- w + Q is b += (w - p.y); it is lengthened while the error
            # keeps its sign (a tenant whose marginal GPUs are worth little to it needs a large
            # budget before it buys any) and reset when the sign flips
            sign = 1 if weight[u] > spend[u] else -1
            step[u] = min(step[u] * 2, 1e6) if sign == last[u] else 1.0
            last[u] = sign
            budgets[u] = max(budgets[u] + step[u] * (weight[u] - spend[u]), 0.1 * budgets[u])
            a = util[u]
            if a > 0 and min(abs(a - t) for t in tangents[u]) > 1e-13 * a:
                tangent(u, a)
    assert best is not None or not tenants
    if best is None:
        return Equilibrium({c.key: {} for c in classes}, {}, {}, {}, 0.0, 0)
    best.iterations = it
    if best.error > tol and not (good_enough is not None and good_enough(best.X)):
        snapped = _snap(classes, types, caps, weight, umax, best, solver=solver, good_enough=good_enough)
        if snapped is not None and (snapped.error < best.error or (good_enough is not None and good_enough(snapped.X))):
            snapped.budgets, snapped.iterations = best.budgets, it
            best = snapped
    return best


def _groups(acts: list[tuple[int, str]], by_key: dict[int, JobClass]
            ) -> tuple[dict[str, list], dict[int, list], dict[str, list]]:
    """Activities ``(class key, type)`` grouped by type, by class and by tenant, in one pass."""
    g_type: dict[str, list] = {}
    g_cls: dict[int, list] = {}
    g_ten: dict[str, list] = {}
    for a in acts:
        g_type.setdefault(a[1], []).append(a)
        g_cls.setdefault(a[0], []).append(a)
        g_ten.setdefault(by_key[a[0]].tenant, []).append(a)
    return g_type, g_cls, g_ten


def _snap(classes: list[JobClass], types: list[str], caps: dict[str, float], weight: dict[str, float],
          umax: dict[str, float], eq: Equilibrium, rounds: int = 40, solver: str | None = None,
          good_enough: "Callable[[dict[int, dict[str, float]]], bool] | None" = None) -> Equilibrium | None:
    """Close the spending error of a Negishi point exactly, by alternating two small LPs.

    The equilibrium conditions are linear in the duals ``(lambda, p, q)`` once the allocation
    ``X`` is fixed, and linear in ``X`` once the duals are fixed; only the spending equations
    ``p.y_u = w_u`` couple the two. So:

    (a) with ``X`` fixed: duals with bang-per-buck equality on ``X``'s support
        (``lambda_u n_ck = g_c p_k + q_c``) and on a set ``E`` of extra activities, ``<=``
        elsewhere, ``p_k > 0`` only on sold-out types and ``q_c > 0`` only on full classes,
        minimising the spending error;
    (b) with the duals fixed: an ``X`` on the face they certify (activities with zero reduced
        cost, sold-out types where ``p_k > 0``, full classes where ``q_c > 0``), minimising the
        spending error.

    Each of these starts from a feasible point (the other block's answer satisfies the
    complementarity it imposes), so the error never increases; but a move that needs the duals
    and ``X`` to change together stalls them. So each round also tries (c) a *joint* step: the
    same constraints with the support fixed, ``(lambda, p, q, X)`` all free in a box of relative
    size ``rho`` around the point, the spending ``p.y_u`` linearised there and the error, then
    the step length, minimised (a sequential-LP Newton step that respects the inequalities; it
    converges quadratically once the support is right). When everything stalls, the
    equilibrium needs an activity that is not yet at zero reduced cost: the activities nearest
    to it are tried in the support (each alone, in pairs, the nearest few together) with joint
    steps, and a move is kept only when it lowers the error. An error of 0 is an exact CEEI (``docs/oef.md``); the caller checks the
    answer exactly in any case.
    """
    by_key = {c.key: c for c in classes if c.tenant in weight}
    tenants = sorted(weight)
    acts = [(ck, k) for ck, c in by_key.items() for k in types if c.n.get(k, 0.0) > 0]
    backend = None if solver in (None, "auto", "highs") else solver

    def measure(X, prices):
        spend = {u: 0.0 for u in tenants}
        util = {u: 0.0 for u in tenants}
        for ck, row in X.items():
            c = by_key[ck]
            for k, v in row.items():
                spend[c.tenant] += prices.get(k, 0.0) * c.gpus * v
                util[c.tenant] += c.n[k] * v
        sat = {u for u in tenants if util[u] >= umax[u] * (1 - _SATIATED)}
        err = 0.0
        for u in tenants:
            e = (spend[u] - weight[u]) / weight[u]
            err = max(err, max(e, 0.0) if u in sat else abs(e))
        return err, spend, sat

    def error_cols(lp_cost: list[float], start: int, sat: set[str]) -> None:
        for i, u in enumerate(tenants):
            lp_cost[start + 2 * i] = -1.0 / weight[u]  # overspending
            lp_cost[start + 2 * i + 1] = 0.0 if u in sat else -1.0 / weight[u]  # underspending

    def duals_for(X, extra):
        used = {k: sum(by_key[ck].gpus * row.get(k, 0.0) for ck, row in X.items()) for k in types}
        tight = [k for k in types if used[k] >= caps[k] * (1 - 1e-6)]
        full = [ck for ck, row in X.items() if sum(row.values()) >= by_key[ck].count * (1 - 1e-6)]
        y = {u: {k: 0.0 for k in types} for u in tenants}
        for ck, row in X.items():
            for k, v in row.items():
                y[by_key[ck].tenant][k] += by_key[ck].gpus * v
        _, _, sat = measure(X, {})
        iu = {u: i for i, u in enumerate(tenants)}
        ip = {k: len(tenants) + i for i, k in enumerate(tight)}
        iq = {ck: len(tenants) + len(tight) + i for i, ck in enumerate(full)}
        ie = len(tenants) + len(tight) + len(full)
        ncol = ie + 2 * len(tenants)
        cost = [0.0] * ncol
        error_cols(cost, ie, sat)
        lp = SmallLP(cost, [0.0] * ncol, [INF] * ncol, [], name="ceei_duals", backend=backend)
        for a in acts:
            ck, k = a
            c = by_key[ck]
            cols, vals = [iu[c.tenant]], [c.n[k]]
            if k in ip:
                cols.append(ip[k])
                vals.append(-float(c.gpus))
            if ck in iq:
                cols.append(iq[ck])
                vals.append(-1.0)
            on = X.get(ck, {}).get(k, 0.0) > 1e-10 * max(1.0, c.count) or a in extra
            lp.add_row(cols, vals, 0.0 if on else -INF, 0.0)
        for u in tenants:
            cols = [ip[k] for k in tight if y[u][k] > 0] + [ie + 2 * iu[u], ie + 2 * iu[u] + 1]
            vals = [y[u][k] for k in tight if y[u][k] > 0] + [-1.0, 1.0]
            lp.add_row(cols, vals, weight[u], weight[u])
        lp.solve()
        lam = {u: max(0.0, lp.x[iu[u]]) for u in tenants}
        prices = {k: (max(0.0, lp.x[ip[k]]) if k in ip else 0.0) for k in types}
        q = {ck: (max(0.0, lp.x[iq[ck]]) if ck in iq else 0.0) for ck in by_key}
        return lam, prices, q, sat

    def reduced(lam, prices, q):
        return {(ck, k): by_key[ck].gpus * prices[k] + q[ck] - lam[by_key[ck].tenant] * by_key[ck].n[k]
                for ck, k in acts}

    def allocation_for(lam, prices, q, sat):
        scale = max([1e-300] + list(prices.values()) + list(lam.values()) + list(q.values()))
        red = reduced(lam, prices, q)
        face = [a for a in acts if red[a] <= 1e-9 * scale]
        ix = {a: i for i, a in enumerate(face)}
        ie = len(face)
        ncol = ie + 2 * len(tenants)
        cost = [0.0] * ncol
        error_cols(cost, ie, sat)
        lp = SmallLP(cost, [0.0] * ncol, [INF] * ncol, [], name="ceei_allocation", backend=backend)
        g_type, g_cls, g_ten = _groups(face, by_key)
        for k in types:
            cols = [ix[a] for a in g_type.get(k, [])]
            if cols:
                lo = caps[k] if prices[k] > 1e-12 * scale else -INF
                lp.add_row(cols, [float(by_key[face[i][0]].gpus) for i in cols], lo, caps[k])
        for ck, c in by_key.items():
            cols = [ix[a] for a in g_cls.get(ck, [])]
            if cols:
                lo = float(c.count) if q[ck] > 1e-12 * scale else -INF
                lp.add_row(cols, [1.0] * len(cols), lo, float(c.count))
        for u in sat:  # a satiated tenant stays satiated (it may then spend less than w_u)
            cols = [ix[a] for a in g_ten.get(u, [])]
            lp.add_row(cols, [by_key[face[j][0]].n[face[j][1]] for j in cols], umax[u] * (1 - _SATIATED) - fairness.slack(umax[u]), INF)
        for i, u in enumerate(tenants):
            cols = [ix[a] for a in g_ten.get(u, []) if prices[a[1]] > 0]
            vals = [prices[face[j][1]] * by_key[face[j][0]].gpus for j in cols]
            lp.add_row(cols + [ie + 2 * i, ie + 2 * i + 1], vals + [-1.0, 1.0], weight[u], weight[u])
        lp.solve()
        X = {ck: {} for ck in by_key}
        for a, i in ix.items():
            v = max(0.0, lp.x[i])
            if v > 1e-13:
                X[a[0]][a[1]] = v
        return X

    def joint(X, prices, extra, rho):
        """One sequential-LP step on (duals, X) together, the spending linearised at (p, X)."""
        used = {k: sum(by_key[ck].gpus * row.get(k, 0.0) for ck, row in X.items()) for k in types}
        tight = [k for k in types if used[k] >= caps[k] * (1 - 1e-6)]
        full = [ck for ck, row in X.items() if sum(row.values()) >= by_key[ck].count * (1 - 1e-6)]
        _, _, sat = measure(X, {})
        support = [a for a in acts if X.get(a[0], {}).get(a[1], 0.0) > 0 or a in extra]
        iu = {u: i for i, u in enumerate(tenants)}
        ip = {k: len(tenants) + i for i, k in enumerate(tight)}
        iq = {ck: len(tenants) + len(tight) + i for i, ck in enumerate(full)}
        ix = {a: len(tenants) + len(tight) + len(full) + i for i, a in enumerate(support)}
        ie = len(tenants) + len(tight) + len(full) + len(support)
        moved = [(ip[k], prices.get(k, 0.0), max(prices.get(k, 0.0), 1e-12)) for k in tight]
        moved += [(ix[a], X.get(a[0], {}).get(a[1], 0.0), float(by_key[a[0]].count)) for a in support]
        idev = ie + 2 * len(tenants)
        ncol = idev + 2 * len(moved)
        cost = [0.0] * ncol
        error_cols(cost, ie, sat)
        for i in range(ie, idev):
            cost[i] *= 1e6  # the spending error first, then the shortest step
        for i, (_, _, unit) in enumerate(moved):
            cost[idev + 2 * i] = cost[idev + 2 * i + 1] = -1.0 / unit
        lb, ub = [0.0] * ncol, [INF] * ncol
        for k in tight:
            pk = prices.get(k, 0.0)
            lb[ip[k]], ub[ip[k]] = max(0.0, pk * (1 - rho)), (pk * (1 + rho) if pk > 0 else INF)
        for a in support:
            xa = X.get(a[0], {}).get(a[1], 0.0)
            m = by_key[a[0]].count
            lb[ix[a]], ub[ix[a]] = max(0.0, xa - rho * m), xa + rho * m
        lp = SmallLP(cost, lb, ub, [], name="ceei_joint", backend=backend)
        for i, (col, v0, _) in enumerate(moved):
            lp.add_row([col, idev + 2 * i, idev + 2 * i + 1], [1.0, -1.0, 1.0], v0, v0)
        for a in acts:
            ck, k = a
            c = by_key[ck]
            cols, vals = [iu[c.tenant]], [c.n[k]]
            if k in ip:
                cols.append(ip[k])
                vals.append(-float(c.gpus))
            if ck in iq:
                cols.append(iq[ck])
                vals.append(-1.0)
            lp.add_row(cols, vals, 0.0 if a in ix else -INF, 0.0)
        g_type, g_cls, g_ten = _groups(support, by_key)
        for k in types:
            cols = [ix[a] for a in g_type.get(k, [])]
            if cols:
                lp.add_row(cols, [float(by_key[a[0]].gpus) for a in g_type[k]],
                           caps[k] if k in ip else -INF, caps[k])
        for ck, c in by_key.items():
            cols = [ix[a] for a in g_cls.get(ck, [])]
            if cols:
                lp.add_row(cols, [1.0] * len(cols), float(c.count) if ck in iq else -INF, float(c.count))
        for u in sat:  # a satiated tenant stays satiated (it may then spend less than w_u)
            cols = [ix[a] for a in g_ten.get(u, [])]
            lp.add_row(cols, [by_key[a[0]].n[a[1]] for a in g_ten.get(u, [])],
                       umax[u] * (1 - _SATIATED) - fairness.slack(umax[u]), INF)
        for u in tenants:
            cols, vals, const = [], [], 0.0
            for a in g_ten.get(u, []):
                ck, k = a
                if k not in ip:
                    continue
                g, pk, xa = by_key[ck].gpus, prices.get(k, 0.0), X.get(ck, {}).get(k, 0.0)
                cols += [ix[a], ip[k]]
                vals += [g * pk, g * xa]
                const += g * pk * xa
            merged: dict[int, float] = {}
            for col, val in zip(cols, vals):
                merged[col] = merged.get(col, 0.0) + val
            cols, vals = list(merged) + [ie + 2 * iu[u], ie + 2 * iu[u] + 1], list(merged.values()) + [-1.0, 1.0]
            lp.add_row(cols, vals, weight[u] + const, weight[u] + const)
        try:
            lp.solve()
        except SolverError:
            return None
        lam = {u: max(0.0, lp.x[iu[u]]) for u in tenants}
        p2 = {k: (max(0.0, lp.x[ip[k]]) if k in ip else 0.0) for k in types}
        q = {ck: (max(0.0, lp.x[iq[ck]]) if ck in iq else 0.0) for ck in by_key}
        X2 = {ck: {} for ck in by_key}
        for a, i in ix.items():
            v = max(0.0, lp.x[i])
            if v > 1e-13:
                X2[a[0]][a[1]] = v
        err, spend, _ = measure(X2, p2)
        return Equilibrium(X2, p2, {}, spend, err, 0), (lam, p2, q)

    def step(X, extra):
        """(a) then (b); the new point and its error (None when an LP fails)."""
        try:
            lam, prices, q, sat = duals_for(X, extra)
            X2 = allocation_for(lam, prices, q, sat)
        except SolverError:
            return None
        err, spend, _ = measure(X2, prices)
        return Equilibrium(X2, prices, {}, spend, err, 0), (lam, prices, q)

    X = {ck: dict(eq.X.get(ck, {})) for ck in by_key}
    best: Equilibrium | None = None
    duals = None
    for _ in range(rounds):
        got = step(X, ())
        if best is not None:
            rho = 0.5
            while rho > 1e-6:
                j = joint(best.X, best.prices, (), rho)
                if j is not None and (got is None or j[0].error < got[0].error):
                    got = j
                if got is not None and got[0].error < best.error * (1 - 1e-3):
                    break
                rho /= 4
        if got is not None and (best is None or got[0].error < best.error * (1 - 1e-3)):
            best, duals = got
            X = best.X
            if best.error <= 1e-13 or (good_enough is not None and good_enough(X)):
                break
            continue
        if best is None or duals is None:
            break
        # stalled: bring the activities nearest to zero reduced cost into the support
        red = reduced(*duals)
        near = sorted((r, a) for a, r in red.items() if not best.X.get(a[0], {}).get(a[1], 0.0) > 0)
        top = [a for _, a in near[:6]]
        trials = [(a,) for a in top] + [(a, b) for i, a in enumerate(top) for b in top[i + 1:]]
        trials += [tuple(top[:j]) for j in (3, 4, 6) if j <= len(top)]
        moved = False
        for extra in trials:
            for rho in (0.5, 0.05, 0.005):
                got = joint(best.X, best.prices, extra, rho)
                if got is not None and got[0].error < best.error * (1 - 1e-3):
                    best, duals = got
                    X = best.X
                    moved = True
                    break
            if moved:
                break
        if not moved or best.error <= 1e-13 or (good_enough is not None and good_enough(best.X)):
            break
    return best
