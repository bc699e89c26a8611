"""The CEEI in price space: a price iteration over the few GPU types, each tenant's demand at
given prices computed from its own classes only, and one small LP on the classes at a tie.

Why: the Eisenberg-Gale budget iteration (:mod:`._ceei`) re-solves the whole group LP 20-60 times,
most of oef's time at many tenants. Here the unknowns are the ``K`` prices; at prices ``p`` a
tenant's demand (``docs/oef.md``, "CEEI": a cheapest bundle maximising ``V_u`` over
``p.y <= w_u``) is a fractional multiple-choice knapsack over its classes, solved exactly in
closed form:

* with a multiplier ``lambda`` (money per unit of utility) a class ``c`` runs all its ``m_c``
  jobs on the type maximising ``lambda n_ck - g_c p_k`` when that is positive, and none
  otherwise; the tenant's spending ``S_u(lambda)`` is a nondecreasing step function of
  ``lambda`` (a class only switches to a type of higher ``n`` and higher cost), with breakpoints
  where two of the class's lines ``lambda n_ck - g_c p_k`` (and the idle line 0) cross;
* the demand is at the ``lambda_u`` where ``S_u`` crosses ``w_u``: every class fixed except the
  one whose breakpoint crosses, which is split so the spending is exactly ``w_u``. A tenant
  whose spending at ``lambda -> inf`` stays below ``w_u`` is satiated (every class on its best
  type, the cheapest among equally good ones).

This is the LP optimum of the tenant's knapsack with its dual ``lambda_u``, so ``(lambda, p, q)``
with ``q_c = max(0, max_k lambda_u n_ck - g_c p_k)`` certify every tenant's demand. The prices
move by the excess demand (:func:`tatonnement`: a step per type, shortened when its excess
changes sign, the level rescaled by Walras' law), warm-started from the caller's prices (oef
keeps the last equilibrium's in its policy state). At the limit prices the market clears only
with the classes at a tie split the right way: the closing LP (:func:`_close`) takes the
classes within a relative ``1e-9`` of a tie as its only columns, the others fixed, and
minimises the tenants' spending error and the unsold capacity of priced types with the prices
held. Where the steps stall, :func:`snap_prices` jumps to the prices where ``K - 1`` more
classes tie (equations linear in ``p``) and the steps resume from there (:func:`_search`).
The answer is exact when the closing error is 0; the caller's exact SI/EF/PE check decides
in any case, helped by the certificates :class:`PriceResult` carries.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from ..jobgroups import JobGroup
from ..model import Problem
from ..solver import INF, SmallLP
from ._ceei_market import Equilibrium, Point

#: two lines of a class closer than this (relative) at a tenant's multiplier are a tie
TIE = 1e-9
#: per round of :func:`_search`, the steps without a tenfold fall of the closing error after
#: which the price steps stop and :func:`snap_prices` is tried (one class's switch can move a
#: whole percent of a type, and the steps then circle the point where enough classes tie at
#: once; where they stop decides which ties the snap sees, so each round waits longer)
STALLS = (30, 60, 100, 150)
#: price steps in all
MAX_STEPS = 600
#: the classes nearest to a tie whose (K - 1)-subsets :func:`snap_prices` tries
SNAP_NEAREST = 8
#: the closing LP's error (relative spending and unsold capacity) that ends the price iteration
CLOSED = 1e-10


@dataclass(frozen=True)
class PriceMarket:
    """The market as arrays: classes (``C``) of the tenants (``T``) over the types (``K``) with
    capacity; ``lines`` are the idle line (column 0) and one per type."""

    classes: list[JobGroup]
    tenants: list[str]
    types: list[str]
    caps: np.ndarray
    weight: np.ndarray
    owner: np.ndarray
    gpus: np.ndarray
    count: np.ndarray
    #: ``n_ck`` (``C x K``), 0 where the class cannot use the type
    n: np.ndarray

    @classmethod
    def of(cls, problem: Problem, classes: list[JobGroup]) -> "PriceMarket":
        """Tenants with positive weight and some class that can use a type with capacity."""
        types = [k for k in problem.types if float(problem.gpu_types.get(k, 0)) > 0]
        mine = [c for c in classes if problem.weight(c.tenant) > 0 and any(c.n.get(k, 0.0) > 0 for k in types)]
        tenants = sorted({c.tenant for c in mine})
        index = {u: i for i, u in enumerate(tenants)}
        return cls(mine, tenants, types, np.array([float(problem.gpu_types[k]) for k in types]),
                   np.array([float(problem.weight(u)) for u in tenants]),
                   np.array([index[c.tenant] for c in mine], dtype=int),
                   np.array([float(c.gpus) for c in mine]), np.array([float(c.count) for c in mine]),
                   np.array([[float(c.n.get(k, 0.0)) for k in types] for c in mine]).reshape(len(mine), len(types)))

    def lines(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Slopes and costs (``C x (K + 1)``) of every class's lines ``lambda n_ck - g_c p_k``;
        a type the class cannot use gets slope -1 (never chosen for ``lambda > 0``)."""
        slope = np.hstack([np.zeros((len(self.classes), 1)), np.where(self.n > 0, self.n, -1.0)])
        cost = np.hstack([np.zeros((len(self.classes), 1)), self.gpus[:, None] * p[None, :]])
        return slope, cost


@dataclass
class Demand:
    """The tenants' demands at prices ``p``: jobs of each class on each line (``C x (K + 1)``,
    column 0 idle), the multipliers (``inf`` when satiated), the spending and the bundles."""

    Z: np.ndarray
    lam: np.ndarray
    spend: np.ndarray
    Y: np.ndarray
    #: per tenant the class split at its spending crossing and the lines it is split between
    #: (``T x 3``; -1 for a satiated tenant): ``lambda_u`` is that class's breakpoint, linear in p
    pivot: np.ndarray


def _pieces(slope: np.ndarray, cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every class's breakpoints (sorted, ``inf`` padded; ``C x P``) and the line it chooses on
    each of the ``P + 1`` intervals between them (a zero-width interval takes the next one's)."""
    nl = slope.shape[1]
    pairs = [(a, b) for a in range(nl) for b in range(a + 1, nl)]
    cand = np.full((slope.shape[0], len(pairs)), np.inf)
    for i, (a, b) in enumerate(pairs):
        ds = slope[:, b] - slope[:, a]
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = (cost[:, b] - cost[:, a]) / ds
        cand[:, i] = np.where((ds != 0) & (lam > 0) & np.isfinite(lam), lam, np.inf)
    cand.sort(axis=1)
    lo = np.hstack([np.zeros((cand.shape[0], 1)), cand])
    hi = np.hstack([cand, np.full((cand.shape[0], 1), np.inf)])
    top = np.max(np.where(np.isfinite(cand), cand, 0.0), axis=1, keepdims=True)
    mid = np.where(np.isfinite(hi), (lo + hi) / 2, np.maximum(2 * lo, 2 * top) + 1.0)
    mid = np.where(np.isfinite(lo), mid, 2 * top + 1.0)
    choice = np.argmax(mid[:, :, None] * slope[:, None, :] - cost[:, None, :], axis=2)
    for i in range(cand.shape[1] - 1, -1, -1):  # zero-width interval i+1 .. i: keep the later choice
        if i > 0:
            with np.errstate(invalid="ignore"):
                flat = np.isfinite(cand[:, i]) & (hi[:, i] - lo[:, i] <= 1e-12 * np.maximum(hi[:, i], 1e-300))
            choice[:, i] = np.where(flat, choice[:, i + 1], choice[:, i])
    return cand, choice


def demand(m: PriceMarket, p: np.ndarray) -> Demand:
    """Every tenant's demand at prices ``p`` (the module docstring): exact, vectorised over
    classes; the tenants' spending crossings found in one sort of all breakpoints."""
    slope, cost = m.lines(p)
    cand, choice = _pieces(slope, cost)
    C, P = cand.shape
    rows = np.arange(C)
    piece_cost = m.count[:, None] * np.take_along_axis(cost, choice, axis=1)  # C x (P + 1)
    step = piece_cost[:, 1:] - piece_cost[:, :-1]
    T = len(m.tenants)
    base = np.bincount(m.owner, piece_cost[:, 0], minlength=T)
    fin = np.isfinite(cand)
    ci, pi = np.nonzero(fin)
    lam, d, ten = cand[ci, pi], step[ci, pi], m.owner[ci]
    order = np.lexsort((pi, ci, lam, ten))
    ci, pi, lam, d, ten = ci[order], pi[order], lam[order], d[order], ten[order]
    cum = np.cumsum(d)
    start = np.searchsorted(ten, np.arange(T))
    before = np.concatenate([[0.0], cum])[start]
    reach = base[ten] + cum - before[ten]  # the tenant's spending just after each breakpoint
    over = np.nonzero(reach >= m.weight[ten] * (1 - 1e-15))[0]
    cross = np.full(T, len(ten))
    if len(over):
        first_t, first_i = np.unique(ten[over], return_index=True)
        cross[first_t] = over[first_i]
    switched = np.arange(len(ten)) < cross[ten]
    piece = np.bincount(ci[switched], minlength=C)
    Z = np.zeros_like(slope)
    Z[rows, choice[rows, piece]] = m.count
    lam_u = np.full(T, np.inf)
    pivot = np.full((T, 3), -1, dtype=int)
    hit = np.nonzero(cross < len(ten))[0]
    if len(hit):  # the crossing class is split: the tenant spends exactly w_u
        j = cross[hit]
        c, i = ci[j], pi[j]
        need = m.weight[hit] - (reach[j] - d[j])
        with np.errstate(divide="ignore", invalid="ignore"):
            theta = np.where(d[j] > 0, np.clip(need / d[j], 0.0, 1.0), 1.0)
        Z[c, choice[c, i]] = m.count[c] * (1 - theta)
        Z[c, choice[c, i + 1]] += m.count[c] * theta
        lam_u[hit] = lam[j]
        pivot[hit] = np.column_stack([c, choice[c, i], choice[c, i + 1]])
    spend = np.bincount(m.owner, (Z * cost).sum(axis=1), minlength=T)
    Y = np.column_stack([np.bincount(m.owner, Z[:, k + 1] * m.gpus, minlength=T) for k in range(len(m.types))])
    return Demand(Z, lam_u, spend, Y, pivot)


@dataclass
class PriceResult:
    """The closed equilibrium, the limit prices, how many price steps ran and whether the
    iteration stopped for time."""

    eq: Equilibrium
    prices: dict[str, float]
    steps: int
    timed_out: bool
    #: each tenant's multiplier at the limit prices (money per unit of utility; ``inf`` when
    #: satiated): ``p / lambda_u`` is a dual-feasible point of ``V_u``'s LP that bounds every
    #: bundle u can afford by ``U_u`` (the envy certificate of the equilibrium)
    lam: dict[str, float]
    #: the certified bound on a Pareto improvement's gain in ``E`` for an allocation of this
    #: market (:func:`pareto_bound_gain` at the limit prices); None when it cannot be given
    pe_gain: "Callable[[Mapping[int, Mapping[str, float]]], float | None]"


def excess(m: PriceMarket, dem: Demand, p: np.ndarray) -> np.ndarray:
    """Relative excess demand per type; a free type (``p_k = 0``) with demand below supply is
    cleared (its excess counts as 0)."""
    e = (dem.Y.sum(axis=0) - m.caps) / m.caps
    return np.where((p <= 0) & (e < 0), 0.0, e)


def tatonnement(m: PriceMarket, p0: np.ndarray, deadline: float, max_steps: int = 400, stall: int = 100
                ) -> tuple[np.ndarray, Demand, np.ndarray, float, int, bool]:
    """Prices and the closing LP's answer there (:func:`_close`), tried at every step whose
    excess is small: ``p_k *= 1 + s_k e_k`` (``e`` the relative excess, clipped to [-0.5, 1]),
    ``s_k`` shortened (x0.6) when ``e_k`` changes sign and lengthened (x1.3, at most 1) while it
    keeps it, and the prices rescaled so the cluster costs what the tenants spend (the level
    Walras' law fixes; without it the steps of a type whose excess jumps back and forth shrink
    before the other prices have moved). Stops when the closing LP's error is at most
    :data:`CLOSED`, when ``stall`` steps did not divide the best error by 10, at
    ``deadline`` or after ``max_steps``. Returns the prices, their demand,
    the closed allocation (``C x (K + 1)``) and its error at the best point tried, the number
    of steps and whether time ran out."""
    p = np.maximum(p0.astype(float), 0.0)
    s = np.full(len(p), 1.0)
    last = np.zeros(len(p))
    best: tuple[float, np.ndarray, Demand, np.ndarray] | None = None
    improved = 0
    for it in range(1, max_steps + 1):
        dem = demand(m, p)
        e = excess(m, dem, p)
        if float(np.abs(e).max()) <= 0.01 or it % 10 == 1:
            Z, err = _close(m, dem, p)
            if best is None or err < best[0] * 0.1:
                improved = it
            if best is None or err < best[0]:
                best = (err, p.copy(), dem, Z)
            if err <= CLOSED or it - improved > stall:
                break
        if time.perf_counter() >= deadline:
            break
        value = float(p @ m.caps)
        if value > 0:
            p = p * float(dem.spend.sum()) / value
        sign = np.sign(e)
        s = np.where(sign * last < 0, s * 0.6, np.minimum(s * 1.3, 1.0))
        last = sign
        p = p * (1 + s * np.clip(e, -0.5, 1.0))
        p = np.where(p < 1e-14 * max(float(p.max()), 1e-300), 0.0, p)
    if best is None:
        Z, err = _close(m, dem, p)
        best = (err, p, dem, Z)
    return best[1], best[2], best[3], best[0], it, time.perf_counter() >= deadline and best[0] > CLOSED


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


def _close(m: PriceMarket, dem: Demand, p: np.ndarray, tie: float = TIE) -> tuple[np.ndarray, float]:
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
    denom = float(p @ m.caps) - float(dem.spend[sat].sum())
    income = float(m.weight[~sat].sum())
    return p * (income / denom) if denom > 0 and income > 0 else p


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
        Z, err = _close(m, got, p)
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


def start_prices(m: PriceMarket, warm: Mapping[str, float] | None) -> np.ndarray:
    """The caller's prices (the last equilibrium: the price iteration's rescaling adapts their
    level to this market's incomes) when they cover these types, are finite and positive
    somewhere; else every GPU priced alike so the incomes buy the whole cluster."""
    if warm and all(k in warm for k in m.types):
        p = np.array([max(0.0, float(warm[k])) for k in m.types])
        if np.all(np.isfinite(p)) and float(p @ m.caps) > 0:
            return p
    return np.full(len(m.types), float(m.weight.sum()) / float(m.caps.sum()))


def _search(m: PriceMarket, p: np.ndarray, deadline: float
            ) -> tuple[np.ndarray, Demand, np.ndarray, float, int, bool]:
    """Price steps until they stall, then :func:`snap_prices` from the best point, and again
    from the snap's prices (one round per :data:`STALLS`, :data:`MAX_STEPS` steps in all); the
    steps stop at three quarters of the time left so the snap gets the rest. The best point:
    prices, demand, closed allocation, error, steps and whether time ran out first."""
    start = time.perf_counter()
    best: tuple[np.ndarray, Demand, np.ndarray, float] | None = None
    steps = 0
    for stall in STALLS:
        step_deadline = start + 0.75 * (deadline - start)
        p, dem, Z, err, n, _ = tatonnement(m, p, step_deadline, max_steps=MAX_STEPS - steps, stall=stall)
        steps += n
        if best is None or err < best[3]:
            best = (p, dem, Z, err)
        if best[3] <= CLOSED:
            break
        snapped = snap_prices(m, best[1], best[0], deadline)
        if snapped is not None and snapped[3] < best[3]:
            best = snapped
            p = snapped[0]
        if best[3] <= CLOSED or steps >= MAX_STEPS or time.perf_counter() >= deadline:
            break
    assert best is not None
    return best[0], best[1], best[2], best[3], steps, best[3] > CLOSED and time.perf_counter() >= deadline


def price_ceei(problem: Problem, classes: list[JobGroup], deadline: float,
               warm: Mapping[str, float] | None = None) -> PriceResult | None:
    """The CEEI of ``problem`` in price space (module docstring); None when no tenant can use
    any GPU (nothing to price)."""
    m = PriceMarket.of(problem, classes)
    if not m.classes or not len(m.types):
        return None
    p, dem, Z, err, steps, timed_out = _search(m, start_prices(m, warm), deadline)
    lam = dem.lam
    X: Point = {c.key: {} for c in classes}
    for i, c in enumerate(m.classes):
        for j, k in enumerate(m.types):
            if Z[i, j + 1] > 1e-13:
                X[c.key][k] = float(Z[i, j + 1])
    _, cost = m.lines(p)
    spend = np.bincount(m.owner, (Z * cost).sum(axis=1), minlength=len(m.tenants))
    prices = {k: float(v) for k, v in zip(m.types, p)}
    eq = Equilibrium(X, prices, {}, {u: float(s) for u, s in zip(m.tenants, spend)}, err, steps)
    return PriceResult(eq, prices, steps, timed_out, {u: float(v) for u, v in zip(m.tenants, lam)},
                       lambda X: pareto_bound_gain(m, X, p, lam))


