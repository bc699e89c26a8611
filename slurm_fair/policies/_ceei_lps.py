"""The closing step's small LPs (:mod:`._ceei_snap`, ``docs/oef.md``): the equilibrium
conditions are linear in the duals ``(lambda, p, q)`` for a fixed allocation ``X`` (:func:`duals_for`)
and linear in ``X`` for fixed duals (:func:`allocation_for`); :func:`joint` takes both blocks at
once with the spending linearised. Each minimises the tenants' spending error.
"""

from __future__ import annotations

from typing import Collection, Mapping

from .. import fairness
from ..errors import SolverError
from ..solver import INF, SmallLP
from ._ceei_market import SATIATED, Activity, Equilibrium, Market, Point

#: ``(lambda, p, q, satiated tenants)``
Duals = tuple[dict[str, float], dict[str, float], dict[int, float], set[str]]



def _dual_row(m: Market, a: Activity, iu: Mapping[str, int], ip: Mapping[str, int],
              iq: Mapping[int, int]) -> tuple[list[int], list[float]]:
    """The columns and coefficients of activity ``a``'s reduced cost ``u_c n_ck - g_c p_k - q_c``
    (``p_k`` and ``q_c`` only where they are columns): the row both LPs below are built of."""
    ck, k = a
    c = m.by_key[ck]
    cols, vals = [iu[c.tenant]], [c.n[k]]
    if k in ip:
        cols.append(ip[k])
        vals.append(-float(c.gpus))
    if ck in iq:
        cols.append(iq[ck])
        vals.append(-1.0)
    return cols, vals

def duals_for(m: Market, X: Point, extra: Collection[Activity]) -> Duals:
    """(a) Duals for a fixed ``X``: bang-per-buck equality on ``X``'s support and on ``extra``,
    ``<=`` elsewhere, prices only on sold-out types and class duals only on full classes; the
    spending error minimised. Also returns the satiated tenants."""
    used = {k: sum(m.by_key[ck].gpus * row.get(k, 0.0) for ck, row in X.items()) for k in m.types}
    tight = [k for k in m.types if used[k] >= m.caps[k] * (1 - 1e-6)]
    full = [ck for ck, row in X.items() if sum(row.values()) >= m.by_key[ck].count * (1 - 1e-6)]
    y = {u: {k: 0.0 for k in m.types} for u in m.tenants}
    for ck, row in X.items():
        for k, v in row.items():
            y[m.by_key[ck].tenant][k] += m.by_key[ck].gpus * v
    _, _, sat = m.measure(X, {})
    iu = {u: i for i, u in enumerate(m.tenants)}
    ip = {k: len(m.tenants) + i for i, k in enumerate(tight)}
    iq = {ck: len(m.tenants) + len(tight) + i for i, ck in enumerate(full)}
    ie = len(m.tenants) + len(tight) + len(full)
    ncol = ie + 2 * len(m.tenants)
    cost = [0.0] * ncol
    m.error_cols(cost, ie, sat)
    lp = SmallLP(cost, [0.0] * ncol, [INF] * ncol, [], name="ceei_duals", backend=m.backend)
    for a in m.acts:
        cols, vals = _dual_row(m, a, iu, ip, iq)
        ck, k = a
        on = X.get(ck, {}).get(k, 0.0) > 1e-10 * max(1.0, m.by_key[ck].count) or a in extra
        lp.add_row(cols, vals, 0.0 if on else -INF, 0.0)
    for u in m.tenants:
        cols = [ip[k] for k in tight if y[u][k] > 0] + [ie + 2 * iu[u], ie + 2 * iu[u] + 1]
        vals = [y[u][k] for k in tight if y[u][k] > 0] + [-1.0, 1.0]
        lp.add_row(cols, vals, m.weight[u], m.weight[u])
    lp.solve()
    lam = {u: max(0.0, lp.x[iu[u]]) for u in m.tenants}
    prices = {k: (max(0.0, lp.x[ip[k]]) if k in ip else 0.0) for k in m.types}
    q = {ck: (max(0.0, lp.x[iq[ck]]) if ck in iq else 0.0) for ck in m.by_key}
    return lam, prices, q, sat


def allocation_for(m: Market, lam: dict[str, float], prices: dict[str, float], q: dict[int, float],
                   sat: set[str]) -> Point:
    """(b) An ``X`` for fixed duals, on the face they certify (zero reduced cost, sold-out where
    ``p_k > 0``, full where ``q_c > 0``, a satiated tenant kept satiated); the spending error
    minimised."""
    scale = max([1e-300] + list(prices.values()) + list(lam.values()) + list(q.values()))
    red = m.reduced(lam, prices, q)
    face = [a for a in m.acts if red[a] <= 1e-9 * scale]
    ix = {a: i for i, a in enumerate(face)}
    ie = len(face)
    ncol = ie + 2 * len(m.tenants)
    cost = [0.0] * ncol
    m.error_cols(cost, ie, sat)
    lp = SmallLP(cost, [0.0] * ncol, [INF] * ncol, [], name="ceei_allocation", backend=m.backend)
    g_type, g_cls, g_ten = m.groups(face)
    for k in m.types:
        cols = [ix[a] for a in g_type.get(k, [])]
        if cols:
            lo = m.caps[k] if prices[k] > 1e-12 * scale else -INF
            lp.add_row(cols, [float(m.by_key[face[i][0]].gpus) for i in cols], lo, m.caps[k])
    for ck, c in m.by_key.items():
        cols = [ix[a] for a in g_cls.get(ck, [])]
        if cols:
            lo = float(c.count) if q[ck] > 1e-12 * scale else -INF
            lp.add_row(cols, [1.0] * len(cols), lo, float(c.count))
    for u in sat:  # a satiated tenant stays satiated (it may then spend less than w_u)
        cols = [ix[a] for a in g_ten.get(u, [])]
        floor = m.umax[u] * (1 - SATIATED) - fairness.slack(m.umax[u])
        lp.add_row(cols, [m.by_key[face[j][0]].n[face[j][1]] for j in cols], floor, INF)
    for i, u in enumerate(m.tenants):
        cols = [ix[a] for a in g_ten.get(u, []) if prices[a[1]] > 0]
        vals = [prices[face[j][1]] * m.by_key[face[j][0]].gpus for j in cols]
        lp.add_row(cols + [ie + 2 * i, ie + 2 * i + 1], vals + [-1.0, 1.0], m.weight[u], m.weight[u])
    lp.solve()
    X: Point = {ck: {} for ck in m.by_key}
    for a, i in ix.items():
        v = max(0.0, lp.x[i])
        if v > 1e-13:
            X[a[0]][a[1]] = v
    return X


def joint(m: Market, X: Point, prices: dict[str, float], extra: Collection[Activity], rho: float
          ) -> tuple[Equilibrium, tuple[dict[str, float], dict[str, float], dict[int, float]]] | None:
    """One sequential-LP step on (duals, X) together, the spending linearised at (p, X)."""
    used = {k: sum(m.by_key[ck].gpus * row.get(k, 0.0) for ck, row in X.items()) for k in m.types}
    tight = [k for k in m.types if used[k] >= m.caps[k] * (1 - 1e-6)]
    full = [ck for ck, row in X.items() if sum(row.values()) >= m.by_key[ck].count * (1 - 1e-6)]
    _, _, sat = m.measure(X, {})
    support = [a for a in m.acts if X.get(a[0], {}).get(a[1], 0.0) > 0 or a in extra]
    iu = {u: i for i, u in enumerate(m.tenants)}
    ip = {k: len(m.tenants) + i for i, k in enumerate(tight)}
    iq = {ck: len(m.tenants) + len(tight) + i for i, ck in enumerate(full)}
    ix = {a: len(m.tenants) + len(tight) + len(full) + i for i, a in enumerate(support)}
    ie = len(m.tenants) + len(tight) + len(full) + len(support)
    moved = [(ip[k], prices.get(k, 0.0), max(prices.get(k, 0.0), 1e-12)) for k in tight]
    moved += [(ix[a], X.get(a[0], {}).get(a[1], 0.0), float(m.by_key[a[0]].count)) for a in support]
    idev = ie + 2 * len(m.tenants)
    ncol = idev + 2 * len(moved)
    cost = [0.0] * ncol
    m.error_cols(cost, ie, sat)
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
        count = m.by_key[a[0]].count
        lb[ix[a]], ub[ix[a]] = max(0.0, xa - rho * count), xa + rho * count
    lp = SmallLP(cost, lb, ub, [], name="ceei_joint", backend=m.backend)
    for i, (col, v0, _) in enumerate(moved):
        lp.add_row([col, idev + 2 * i, idev + 2 * i + 1], [1.0, -1.0, 1.0], v0, v0)
    for a in m.acts:
        cols, vals = _dual_row(m, a, iu, ip, iq)
        lp.add_row(cols, vals, 0.0 if a in ix else -INF, 0.0)
    g_type, g_cls, g_ten = m.groups(support)
    for k in m.types:
        cols = [ix[a] for a in g_type.get(k, [])]
        if cols:
            lp.add_row(cols, [float(m.by_key[a[0]].gpus) for a in g_type[k]],
                       m.caps[k] if k in ip else -INF, m.caps[k])
    for ck, c in m.by_key.items():
        cols = [ix[a] for a in g_cls.get(ck, [])]
        if cols:
            lp.add_row(cols, [1.0] * len(cols), float(c.count) if ck in iq else -INF, float(c.count))
    for u in sat:  # a satiated tenant stays satiated (it may then spend less than w_u)
        cols = [ix[a] for a in g_ten.get(u, [])]
        lp.add_row(cols, [m.by_key[a[0]].n[a[1]] for a in g_ten.get(u, [])],
                   m.umax[u] * (1 - SATIATED) - fairness.slack(m.umax[u]), INF)
    for u in m.tenants:
        cols, vals, const = [], [], 0.0
        for a in g_ten.get(u, []):
            ck, k = a
            if k not in ip:
                continue
            g, pk, xa = m.by_key[ck].gpus, prices.get(k, 0.0), X.get(ck, {}).get(k, 0.0)
            cols += [ix[a], ip[k]]
            vals += [g * pk, g * xa]
            const += g * pk * xa
        merged: dict[int, float] = {}
        for col, val in zip(cols, vals):
            merged[col] = merged.get(col, 0.0) + val
        cols, vals = list(merged) + [ie + 2 * iu[u], ie + 2 * iu[u] + 1], list(merged.values()) + [-1.0, 1.0]
        lp.add_row(cols, vals, m.weight[u] + const, m.weight[u] + const)
    try:
        lp.solve()
    except SolverError:
        return None
    lam = {u: max(0.0, lp.x[iu[u]]) for u in m.tenants}
    p2 = {k: (max(0.0, lp.x[ip[k]]) if k in ip else 0.0) for k in m.types}
    q = {ck: (max(0.0, lp.x[iq[ck]]) if ck in iq else 0.0) for ck in m.by_key}
    X2: Point = {ck: {} for ck in m.by_key}
    for a, i in ix.items():
        v = max(0.0, lp.x[i])
        if v > 1e-13:
            X2[a[0]][a[1]] = v
    err, spend, _ = m.measure(X2, p2)
    return Equilibrium(X2, p2, {}, spend, err, 0), (lam, p2, q)

