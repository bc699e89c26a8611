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
with the classes at a tie split the right way: the closing LP (:func:`._ceei_price_close.close`) takes the
classes within a relative ``1e-9`` of a tie as its only columns, the others fixed, and
minimises the tenants' spending error and the unsold capacity of priced types with the prices
held. Where the steps stall, :func:`snap_prices` jumps to the prices where ``K - 1`` more
classes tie (equations linear in ``p``) and the steps resume from there (:func:`_search`).
The answer is exact when the closing error is 0; the caller's exact SI/EF/PE check decides
in any case, helped by the certificates :class:`PriceResult` carries.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from ..jobgroups import JobGroup
from ..model import Problem
from ._ceei_market import Equilibrium, Point
from ._ceei_price_close import CLOSED, close, pareto_bound_gain, snap_prices
from ._ceei_price_demand import Demand, PriceMarket, demand, excess

#: per round of :func:`_search`, the steps without a tenfold fall of the closing error after
#: which the price steps stop and :func:`snap_prices` is tried (one class's switch can move a
#: whole percent of a type, and the steps then circle the point where enough classes tie at
#: once; where they stop decides which ties the snap sees, so each round waits longer)
STALLS = (30, 60, 100, 150)
#: price steps in all
MAX_STEPS = 600


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


def tatonnement(m: PriceMarket, p0: np.ndarray, deadline: float, max_steps: int = 400, stall: int = 100
                ) -> tuple[np.ndarray, Demand, np.ndarray, float, int, bool]:
    """Prices and the closing LP's answer there (:func:`._ceei_price_close.close`), tried at every step whose
    excess is small: ``p_k *= 1 + s_k e_k`` (``e`` the relative excess, clipped to [-0.5, 1]),
    ``s_k`` shortened (x0.6) when ``e_k`` changes sign and lengthened (x1.3, at most 1) while it
    keeps it, and the prices rescaled so the cluster costs what the tenants spend (the level
    Walras' law fixes; without it the steps of a type whose excess jumps back and forth shrink
    before the other prices have moved). Stops when the closing LP's error is at most
    :data:`._ceei_price_close.CLOSED`, when ``stall`` steps did not divide the best error by 10, at
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
            Z, err = close(m, dem, p)
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
        Z, err = close(m, dem, p)
        best = (err, p, dem, Z)
    return best[1], best[2], best[3], best[0], it, time.perf_counter() >= deadline and best[0] > CLOSED


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
