"""A competitive equilibrium from (weighted) equal incomes (CEEI) for best-use valuations.

Market: one good per GPU type ``k`` (supply ``C_k > 0``), price ``p_k >= 0``; tenant ``u`` has
income ``w_u`` and values a bundle ``y`` at ``V_u(y)`` (FAIRNESS.md). A CEEI is prices and a
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
  relative error is below ``tol``.

The answer is checked exactly by the caller (SI, EF and PE with the ``V_u`` LPs); this module
only promises a Pareto-efficient point whose spending error it reports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..jobclasses import JobClass
from ..model import Problem
from ..errors import SolverError
from ..solver import INF, SmallLP

_INITIAL_TANGENTS = 30


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
         solver: str | None = None) -> Equilibrium:
    caps = {k: float(c) for k, c in problem.gpu_types.items() if float(c) > 0}
    types = [k for k in problem.types if k in caps]
    cols: list[tuple[int, str]] = []
    cost: list[float] = []
    owner: list[str] = []
    for c in classes:
        for k in types:
            if c.n.get(k, 0.0) > 0:
                cols.append((c.key, k))
                cost.append(0.0)
                owner.append(c.tenant)
    # tenants that can use some GPU: the others get nothing whatever the prices
    tenants = sorted(set(owner))
    weight = {u: problem.weight(u) for u in tenants}
    umax = {u: sum(c.count * max((c.n.get(k, 0.0) for k in types), default=0.0)
                   for c in classes if c.tenant == u) for u in tenants}
    nx = len(cols)
    tcol = {u: nx + i for i, u in enumerate(tenants)}
    lp = SmallLP(cost + [0.0] * len(tenants), [0.0] * nx + [-INF] * len(tenants),
                 [INF] * (nx + len(tenants)), [], name="eisenberg_gale",
                 backend=None if solver in (None, "highs") else solver)
    cap_rows = {}
    for k in types:
        idx = [i for i, (_, kk) in enumerate(cols) if kk == k]
        if idx:
            by_key = {c.key: c for c in classes}
            cap_rows[k] = lp.add_row(idx, [float(by_key[cols[i][0]].gpus) for i in idx], -INF, caps[k])
    gpus = {c.key: c.gpus for c in classes}
    dem_rows: dict[int, int] = {}
    trows: list[tuple[str, float, int]] = []
    ncoef = {c.key: c.n for c in classes}
    for c in classes:
        idx = [i for i, (ck, _) in enumerate(cols) if ck == c.key]
        if idx:
            dem_rows[c.key] = lp.add_row(idx, [1.0] * len(idx), -INF, float(c.count))
    ucols = {u: [i for i in range(nx) if owner[i] == u] for u in tenants}
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
            tdual = [(u, a, lp.duals[r]) for u, a, r in trows]
            best_lambda = {u: 0.0 for u in tenants}
            for u, a, mu in tdual:
                best_lambda[u] += max(mu, 0.0) * scale / a
            best_q = {ck: max(0.0, lp.duals[r]) * scale for ck, r in dem_rows.items()}
        if err <= tol:
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
    if best.error > tol and sum(len(r) for r in best.X.values()) <= 400:  # dense Newton steps
        polished = _newton(classes, types, caps, weight, umax, best, best_lambda, best_q)
        if polished is not None and polished.error < best.error:
            polished.iterations = it
            return polished
    return best


def _newton(classes, types, caps, weight, umax, eq: Equilibrium, lam: dict[str, float],
            q0: dict[int, float], steps: int = 8) -> Equilibrium | None:
    """Solve the equilibrium equations exactly for the support structure of ``eq``.

    The structure (activities in use, types sold out at a positive price, classes at full
    demand with a positive slot price, satiated tenants) is read from the approximate point;
    the unknowns ``lambda, p, q, X`` then satisfy square equations: bang-per-buck equalities
    ``lambda_u n_ck = g_c p_k + q_c`` on the activities used, capacity and demand equalities,
    and spending ``p.y_u = w_u`` (satiated tenants keep their ``lambda``). Newton's method
    (least squares steps) from the approximate point; the result is accepted only if it is
    non-negative and dual-feasible (``lambda_u n_ck <= g_c p_k + q_c`` everywhere), which makes
    it an exact Negishi point with the spending error it reports.
    """
    import numpy as np

    by_key = {c.key: c for c in classes}
    tenants = sorted(lam)
    act = [(ck, k) for ck, row in eq.X.items() for k, v in row.items() if v > 1e-9 * max(1.0, by_key[ck].count)]
    used = {k: sum(by_key[ck].gpus * v for ck, row in eq.X.items() for kk, v in row.items() if kk == k) for k in types}
    tight = [k for k in types if eq.prices.get(k, 0.0) > 1e-12 and used[k] >= caps[k] * (1 - 1e-7)]
    full = [ck for ck, v in q0.items() if v > 1e-12 and sum(eq.X.get(ck, {}).values()) >= by_key[ck].count * (1 - 1e-7)]
    util = {u: 0.0 for u in tenants}
    for ck, row in eq.X.items():
        for k, v in row.items():
            util[by_key[ck].tenant] += by_key[ck].n[k] * v
    sat = {u for u in tenants if util[u] >= umax[u] * (1 - 1e-9)}
    iu = {u: i for i, u in enumerate(tenants)}
    ip = {k: len(tenants) + i for i, k in enumerate(tight)}
    iq = {ck: len(tenants) + len(tight) + i for i, ck in enumerate(full)}
    ix = {a: len(tenants) + len(tight) + len(full) + i for i, a in enumerate(act)}
    z = np.zeros(len(tenants) + len(tight) + len(full) + len(act))
    for u in tenants:
        z[iu[u]] = lam[u]
    for k in tight:
        z[ip[k]] = eq.prices[k]
    for ck in full:
        z[iq[ck]] = q0[ck]
    for (ck, k) in act:
        z[ix[ck, k]] = eq.X[ck][k]

    def system(z):
        F, J = [], []
        n = len(z)
        for (ck, k) in act:
            c = by_key[ck]
            row = np.zeros(n)
            row[iu[c.tenant]] = c.n[k]
            val = z[iu[c.tenant]] * c.n[k]
            if k in ip:
                row[ip[k]] = -c.gpus
                val -= c.gpus * z[ip[k]]
            if ck in iq:
                row[iq[ck]] = -1.0
                val -= z[iq[ck]]
            F.append(val)
            J.append(row)
        for k in tight:
            row = np.zeros(n)
            val = -caps[k]
            for (ck, kk) in act:
                if kk == k:
                    row[ix[ck, kk]] = by_key[ck].gpus
                    val += by_key[ck].gpus * z[ix[ck, kk]]
            F.append(val)
            J.append(row)
        for ckf in full:
            row = np.zeros(n)
            val = -float(by_key[ckf].count)
            for (ck, kk) in act:
                if ck == ckf:
                    row[ix[ck, kk]] = 1.0
                    val += z[ix[ck, kk]]
            F.append(val)
            J.append(row)
        for u in tenants:
            row = np.zeros(n)
            if u in sat:
                row[iu[u]] = 1.0
                F.append(z[iu[u]] - lam[u])
                J.append(row)
                continue
            val = -weight[u]
            for (ck, k) in act:
                c = by_key[ck]
                if c.tenant == u and k in ip:
                    row[ip[k]] += c.gpus * z[ix[ck, k]]
                    row[ix[ck, k]] += c.gpus * z[ip[k]]
                    val += c.gpus * z[ip[k]] * z[ix[ck, k]]
            F.append(val / weight[u])
            J.append(row / weight[u])
        return np.array(F), np.array(J)

    for _ in range(steps):
        F, J = system(z)
        if float(np.max(np.abs(F), initial=0.0)) < 1e-13:
            break
        dz, *_ = np.linalg.lstsq(J, -F, rcond=None)
        z = z + dz
    if np.any(z < -1e-12):
        return None
    prices = {k: 0.0 for k in types}
    for k in tight:
        prices[k] = float(z[ip[k]])
    q = {c.key: 0.0 for c in classes}
    for ck in full:
        q[ck] = float(z[iq[ck]])
    for c in classes:  # dual feasibility off the support
        lu = float(z[iu[c.tenant]]) if c.tenant in iu else 0.0
        for k in types:
            if c.n.get(k, 0.0) > 0 and lu * c.n[k] > c.gpus * prices[k] + q[c.key] + 1e-9 * (1 + lu):
                return None
    X: dict[int, dict[str, float]] = {c.key: {} for c in classes}
    for (ck, k) in act:
        X[ck][k] = max(0.0, float(z[ix[ck, k]]))
    for k in types:  # primal feasibility
        if sum(by_key[ck].gpus * row.get(k, 0.0) for ck, row in X.items()) > caps[k] * (1 + 1e-9):
            return None
    if any(sum(row.values()) > by_key[ck].count * (1 + 1e-9) for ck, row in X.items()):
        return None
    spend = {u: 0.0 for u in tenants}
    utilp = {u: 0.0 for u in tenants}
    for ck, row in X.items():
        for k, v in row.items():
            spend[by_key[ck].tenant] += prices[k] * by_key[ck].gpus * v
            utilp[by_key[ck].tenant] += by_key[ck].n[k] * v
    err = 0.0
    for u in tenants:
        e = (spend[u] - weight[u]) / weight[u]
        err = max(err, max(e, 0.0) if u in sat else abs(e))
    return Equilibrium(X, prices, eq.budgets, spend, err, 0)
