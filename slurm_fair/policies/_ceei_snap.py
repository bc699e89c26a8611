"""The CEEI's exact closing step: from a Negishi point whose spending error the price iteration
(:func:`~._ceei.ceei`) could not close, alternate the small LPs of :mod:`._ceei_lps` until the
error is 0 (or the caller's check passes, or nothing moves).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from ..errors import SolverError
from ..jobgroups import JobGroup
from ._ceei_lps import allocation_for, duals_for, joint
from ._ceei_market import Activity, Equilibrium, Market, Point


def snap(classes: list[JobGroup], types: list[str], caps: dict[str, float], weight: dict[str, float],
         umax: dict[str, float], eq: Equilibrium, rounds: int = 40, solver: str | None = None,
         good_enough: "Callable[[dict[int, dict[str, float]]], bool] | None" = None,
         deadline: float | None = None) -> Equilibrium | None:
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
    steps, and a move is kept only when it lowers the error. An error of 0 is an exact CEEI
    (``docs/oef.md``); the caller checks the answer exactly in any case.
    """
    m = Market.of(classes, types, caps, weight, umax, solver)

    def step(X: Point, extra: tuple[Activity, ...]) -> tuple[Equilibrium, tuple[Any, ...]] | None:
        """(a) then (b); the new point and its error (None when an LP fails)."""
        try:
            lam, prices, q, sat = duals_for(m, X, extra)
            X2 = allocation_for(m, lam, prices, q, sat)
        except SolverError:
            return None
        err, spend, _ = m.measure(X2, prices)
        return Equilibrium(X2, prices, {}, spend, err, 0), (lam, prices, q)

    X = {ck: dict(eq.X.get(ck, {})) for ck in m.by_key}
    best: Equilibrium | None = None
    duals = None
    for _ in range(rounds):
        if deadline is not None and best is not None and time.perf_counter() >= deadline:
            break  # the time limit: the best point so far (the caller checks it exactly)
        got = step(X, ())
        if best is not None:
            rho = 0.5
            while rho > 1e-6:
                j = joint(m, best.X, best.prices, (), rho)
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
        moved = False
        for extra in _support_trials(m, duals, best):
            for rho in (0.5, 0.05, 0.005):
                got = joint(m, best.X, best.prices, extra, rho)
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


def _support_trials(m: Market, duals: tuple[Any, ...], best: Equilibrium) -> list[tuple[Activity, ...]]:
    """A stalled snap's candidates: the activities outside the support nearest to zero reduced
    cost, each alone, in pairs, and the nearest 3, 4 and 6 together."""
    red = m.reduced(*duals)
    near = sorted((r, a) for a, r in red.items() if not best.X.get(a[0], {}).get(a[1], 0.0) > 0)
    top = [a for _, a in near[:6]]
    trials: list[tuple[Activity, ...]] = [(a,) for a in top]
    trials += [(a, b) for i, a in enumerate(top) for b in top[i + 1:]]
    trials += [tuple(top[:j]) for j in (3, 4, 6) if j <= len(top)]
    return trials
