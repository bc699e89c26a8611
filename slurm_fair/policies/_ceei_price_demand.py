"""The market of the CEEI in price space (:mod:`._ceei_price`) as arrays, and every tenant's
demand at given prices, exact and vectorised over classes (the derivation is in
:mod:`._ceei_price`'s docstring and docs/oef.md, "CEEI in price space")."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..jobgroups import JobGroup
from ..model import Problem


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

    @cached_property
    def shapes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The distinct ``(n_c, g_c)`` rows (throughputs and gang size: all a class's lines
        depend on) as ``(n, gpus, index of each class's row)``: classes of many tenants share a
        few hundred, so the breakpoints are computed once per row, not once per class."""
        rows, inverse = np.unique(np.hstack([self.n, self.gpus[:, None]]), axis=0, return_inverse=True)
        return rows[:, :-1], rows[:, -1], inverse.reshape(-1)

    def lines(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Slopes and costs (``C x (K + 1)``) of every class's lines ``lambda n_ck - g_c p_k``
        (:func:`lines_of`)."""
        return lines_of(self.n, self.gpus, p)


def lines_of(n: np.ndarray, gpus: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Slopes and costs (``rows x (K + 1)``, column 0 the idle line) of the lines ``lambda n_k -
    g p_k`` of rows of throughputs ``n`` and gang sizes ``gpus``; a type a row cannot use gets
    slope -1 (never chosen for ``lambda > 0``)."""
    slope = np.hstack([np.zeros((len(gpus), 1)), np.where(n > 0, n, -1.0)])
    cost = np.hstack([np.zeros((len(gpus), 1)), gpus[:, None] * p[None, :]])
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
    n_rows, g_rows, row_of = m.shapes
    cand, choice = _pieces(*lines_of(n_rows, g_rows, p))
    cand, choice = cand[row_of], choice[row_of]
    C, P = cand.shape
    rows = np.arange(C)
    piece_cost = m.count[:, None] * np.take_along_axis(cost, choice, axis=1)  # C x (P + 1)
    step = piece_cost[:, 1:] - piece_cost[:, :-1]
    T = len(m.tenants)
    base = np.bincount(m.owner, piece_cost[:, 0], minlength=T)
    fin = np.isfinite(cand)
    ci, pi = np.nonzero(fin)
    lam, d, ten = cand[ci, pi], step[ci, pi], m.owner[ci]
    # by tenant, then breakpoint; ties keep np.nonzero's (class, piece) order (lexsort is stable)
    order = np.lexsort((lam, ten))
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


def excess(m: PriceMarket, dem: Demand, p: np.ndarray) -> np.ndarray:
    """Relative excess demand per type; a free type (``p_k = 0``) with demand below supply is
    cleared (its excess counts as 0)."""
    e = (dem.Y.sum(axis=0) - m.caps) / m.caps
    return np.where((p <= 0) & (e < 0), 0.0, e)
