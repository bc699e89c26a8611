"""The closing step of the CEEI in price space (:mod:`._ceei_price`): the LP on the classes at a
tie that clears the market at given prices, the snap to the prices where more classes tie,
and the equilibrium's certified bound on a Pareto improvement (docs/oef.md)."""

from __future__ import annotations

import itertools
import time
from typing import Mapping

import numpy as np

from ..solver import INF, SmallLP
from ._ceei_price_demand import Demand, PriceMarket, demand

#: two lines of a class closer than this (relative) at a tenant's multiplier are a tie
TIE = 1e-9
#: the classes nearest to a tie whose (K - 1)-subsets :func:`snap_prices` tries
SNAP_NEAREST = 8
#: the closing LP's error (relative spending and unsold capacity) that ends the price iteration
CLOSED = 1e-10


def _ties(m: PriceMarket, dem: Demand, p: np.ndarray, tie: float = TIE) -> np.ndarray:
    """``C x (K + 1)``: the lines each class may use at the tenants' multipliers (within
    :data:`TIE` of its best line); a satiated tenant's classes keep their demand."""
    slope, cost = m.lines(p)
    lam = dem.lam[m.owner]
    finite = np.isfinite(lam)
    lam_f = np.where(finite, lam, 0.0)
    profit = lam_f[:, None] * slope - cost
    best = profit.max(axis=1, keepdims=True)
    scale = lam_f[:, None] * np.abs(slope) + cost + 1e-300
    near = (profit >= best - tie * scale.max(axis=1, keepdims=True)) & (slope >= 0)
    near[:, 1:] &= m.n > 0
    return np.where(finite[:, None], near, dem.Z > 0)


def close(m: PriceMarket, dem: Demand, p: np.ndarray, tie: float = TIE) -> tuple[np.ndarray, float]:
    """The closing LP: the classes at a tie are its columns (every other class stays on its
    line), the prices held; minimise the tenants' relative spending error and the relative
    unsold capacity of priced types and the over-used capacity. The allocation (``C x (K + 1)``)
    and its error (the larger of the two, relative)."""
    near = _ties(m, dem, p, tie)
    free = np.nonzero(near.sum(axis=1) >= 2)[0]
    Z = dem.Z.copy()
    if len(free) == 0:
        return Z, _error(m, Z, p)
    Z[free] = 0.0
    _, cost = m.lines(p)
    T, K = len(m.tenants), len(m.types)
    fixed_use = (Z[:, 1:] * m.gpus[:, None]).sum(axis=0)
    fixed_spend = np.bincount(m.owner, (Z * cost).sum(axis=1), minlength=T)
    acts = [(c, ln) for c in free for ln in range(1, K + 1) if near[c, ln]]
    nx = len(acts)
    sat = ~np.isfinite(dem.lam)
    # columns: activities, then per tenant (over, under) spending, then per type unsold and
    # over-used (a fixed class alone may overfill a type at prices that do not clear yet)
    cost_vec = [0.0] * nx + [w for u in range(T) for w in (-1.0 / m.weight[u], 0.0 if sat[u] else -1.0 / m.weight[u])]
    cost_vec += [-1.0 / m.caps[k] if p[k] > 0 else 0.0 for k in range(K)]
    cost_vec += [-1.0 / m.caps[k] for k in range(K)]
    ncol = len(cost_vec)
    lp = SmallLP(cost_vec, [0.0] * ncol, [INF] * ncol, [], name="ceei_price_close")
    by_class: dict[int, list[int]] = {}
    by_type: dict[int, list[int]] = {}
    by_tenant: dict[int, list[int]] = {}
    for i, (c, ln) in enumerate(acts):
        by_class.setdefault(int(c), []).append(i)
        by_type.setdefault(ln - 1, []).append(i)
        if p[ln - 1] > 0:
            by_tenant.setdefault(int(m.owner[c]), []).append(i)
    for c in free:
        cols = by_class.get(int(c), [])
        lo = m.count[c] if not near[c, 0] else -INF
        if cols:
            lp.add_row(cols, [1.0] * len(cols), lo, float(m.count[c]))
    for k in range(K):
        cols = by_type.get(k, [])
        vals = [float(m.gpus[acts[i][0]]) for i in cols]
        room = float(m.caps[k] - fixed_use[k])
        lp.add_row(cols + [nx + 2 * T + k, nx + 2 * T + K + k], vals + [1.0, -1.0], room if p[k] > 0 else -INF, room)
    for u in range(T):
        cols = by_tenant.get(u, [])
        vals = [float(cost[acts[i][0], acts[i][1]]) for i in cols]
        lp.add_row(cols + [nx + 2 * u, nx + 2 * u + 1], vals + [-1.0, 1.0],
                   float(m.weight[u] - fixed_spend[u]), float(m.weight[u] - fixed_spend[u]))
    lp.solve()
    for i, (c, ln) in enumerate(acts):
        Z[c, ln] += max(0.0, float(lp.x[i]))
    return Z, _error(m, Z, p)


def _walras(m: PriceMarket, p: np.ndarray) -> np.ndarray:
    """``p`` rescaled to the level where the cluster costs what the tenants spend (every type
    sold): ``f p.C = W_ns + f S_sat`` (incomes of the tenants that are not satiated, the
    satiated ones' spending scaling with the prices); the ties fix only the direction."""
    dem = demand(m, p)
    sat = ~np.isfinite(dem.lam)
    value = float(p @ m.caps)
    denom = value - float(dem.spend[sat].sum())
    income = float(m.weight[~sat].sum())
    # denom at round-off of the cluster's value (the satiated tenants buy all that is priced):
    # the level is not fixed by it, and dividing by the round-off once priced a type at 6e15
    # (a closing LP HiGHS refused), so the prices stay as they are
    return p * (income / denom) if denom > 1e-9 * value and income > 0 else p


def _line_price(m: PriceMarket, c: int, line: int) -> np.ndarray:
    """The cost ``g_c p_k`` of class ``c``'s line (0 for the idle line) as a vector over p."""
    v = np.zeros(len(m.types))
    if line > 0:
        v[line - 1] = m.gpus[c]
    return v


def snap_prices(m: PriceMarket, dem: Demand, p0: np.ndarray, deadline: float, nearest: int = SNAP_NEAREST
                ) -> tuple[np.ndarray, Demand, np.ndarray, float] | None:
    """Where the price iteration stalls, the prices at which ``K - 1`` more classes tie at
    once, tried for the classes nearest to a tie. A tenant's multiplier is the breakpoint of
    its split class, ``lambda_u = (g p_b - g p_a) / (n_b - n_a)``, linear in ``p``; so a tie of
    another class of ``u`` between its lines ``a, b`` (``lambda_u (n_b - n_a) = g (p_b - p_a)``)
    is a homogeneous linear equation in ``p``. ``K - 1`` of them fix the direction of ``p``,
    Walras' law its level (:func:`_walras`); the demand there is recomputed exactly and the
    closing LP run. Returns the first closed ``(p, demand, allocation,
    error)``, else the best, else None (``K = 1`` or no candidate)."""
    K = len(m.types)
    if K < 2:
        return None
    slope, cost = m.lines(p0)
    lam = dem.lam[m.owner]
    finite = np.isfinite(lam)
    profit = np.where(finite, lam, 0.0)[:, None] * slope - cost
    order = np.argsort(-profit, axis=1)
    rows = np.arange(len(m.classes))
    first, second = order[:, 0], order[:, 1]
    scale = np.abs(profit).max(axis=1) + 1e-300
    gap = (profit[rows, first] - profit[rows, second]) / scale
    pivots = set(int(c) for c in dem.pivot[:, 0] if c >= 0)
    eqs: list[np.ndarray] = []
    for c in (int(c) for c in np.argsort(gap)):
        if len(eqs) >= nearest:
            break
        u = int(m.owner[c])
        pc, pa, pb = (int(v) for v in dem.pivot[u])
        if not finite[c] or c in pivots or slope[c, second[c]] < 0 or pc < 0 or slope[pc, pb] == slope[pc, pa]:
            continue
        lam_vec = (_line_price(m, pc, pb) - _line_price(m, pc, pa)) / (slope[pc, pb] - slope[pc, pa])
        a, b = int(second[c]), int(first[c])
        row = lam_vec * (slope[c, b] - slope[c, a]) - (_line_price(m, c, b) - _line_price(m, c, a))
        norm = float(np.abs(row).max())
        # a row that vanishes is a tie the pivot already holds (same breakpoint); a parallel
        # one is the same equation again
        if norm <= 1e-12 * float(np.abs(lam_vec).max() + m.gpus[c]) or any(
                abs(abs(float(row @ e)) - norm_e * float(np.linalg.norm(row))) <= 1e-12 * norm_e * float(np.linalg.norm(row))
                for e, norm_e in ((e, float(np.linalg.norm(e))) for e in eqs)):
            continue
        eqs.append(row)
    best: tuple[np.ndarray, Demand, np.ndarray, float] | None = None
    for subset in itertools.combinations(range(len(eqs)), K - 1):
        if time.perf_counter() >= deadline:
            break
        A = np.array([eqs[i] for i in subset])
        _, sv, vt = np.linalg.svd(A)
        if len(sv) < K - 1 or sv[-1] <= 1e-12 * sv[0]:
            continue  # dependent ties: no single direction
        d = vt[-1]
        p = d * float(d @ p0)
        if np.any(p < -1e-15 * np.abs(p).max()):
            continue
        p = _walras(m, np.maximum(p, 0.0))
        got = demand(m, p)
        Z, err = close(m, got, p)
        if best is None or err < best[3]:
            best = (p, got, Z, err)
        if err <= CLOSED:
            break
    return best


def _error(m: PriceMarket, Z: np.ndarray, p: np.ndarray) -> float:
    """The larger of the tenants' relative spending error (a satiated tenant may spend less:
    all its classes at their best rate) and the relative unsold capacity of priced types."""
    _, cost = m.lines(p)
    T = len(m.tenants)
    spend = np.bincount(m.owner, (Z * cost).sum(axis=1), minlength=T)
    util = np.bincount(m.owner, (Z[:, 1:] * m.n).sum(axis=1), minlength=T)
    umax = np.bincount(m.owner, m.count * m.n.max(axis=1), minlength=T)
    e = (spend - m.weight) / m.weight
    sat = util >= umax * (1 - 1e-7)
    spend_err = np.where(sat, np.maximum(e, 0.0), np.abs(e))
    used = (Z[:, 1:] * m.gpus[:, None]).sum(axis=0)
    unsold = np.where(p > 0, np.abs(m.caps - used) / m.caps, np.maximum(used - m.caps, 0.0) / m.caps)
    return float(max(spend_err.max(initial=0.0), unsold.max(initial=0.0)))


def pareto_bound_gain(m: PriceMarket, X: Mapping[int, Mapping[str, float]], p: np.ndarray, lam: np.ndarray) -> float | None:
    """An upper bound on what any feasible allocation giving every tenant at least its utility
    in ``X`` can add to ``E`` (so ``X`` is PE when it is at most ``eps(E)``), from the
    equilibrium's own certificate instead of an LP over all classes: with ``q_c = max(0,
    max_k lambda_u n_ck - g_c p_k)``, ``(p, q)`` is dual-feasible for ``max sum_u lambda_u U_u``,
    so every feasible ``X'`` has ``sum_u lambda_u U'_u <= D = p.C + sum_c m_c q_c``; if
    ``U' >= U(X)`` then ``sum_u (U'_u - U_u) <= (D - sum_u lambda_u U_u(X)) / min_u lambda_u``.
    None when a tenant is satiated (``lambda = inf``: the caller's LP check decides)."""
    if not np.all(np.isfinite(lam)) or not np.all(lam > 0):
        return None
    Xa = np.zeros((len(m.classes), len(m.types)))
    col = {k: j for j, k in enumerate(m.types)}
    for i, c in enumerate(m.classes):
        for k, v in X.get(c.key, {}).items():
            if k in col:
                Xa[i, col[k]] = v
    la = lam[m.owner]
    q = np.maximum(0.0, (la[:, None] * m.n - m.gpus[:, None] * p[None, :]).max(axis=1))
    dual = float(p @ m.caps + m.count @ q)
    primal = float((la * (Xa * m.n).sum(axis=1)).sum())
    return max(0.0, dual - primal) / float(lam.min())
