"""Envy between many tenants at once: upper bounds from a pool of dual prices, exact LPs only
where the bounds cannot decide.

Tenant ``u``'s value of a bundle, ``V_u(b)`` (docs/fairness.md), is the best-use LP
``max sum n_ck z_ck`` s.t. ``sum_c g_c z_ck <= b_k``, ``sum_k z_ck <= m_c``. For *any* prices
``p >= 0`` the dual point ``(p, q(p))`` with ``q_c(p) = max(0, max_k n_ck - g_c p_k)`` is
feasible, so (weak duality)

    V_u(b) <= p.b + Q_u(p),    Q_u(p) = sum_c m_c q_c(p),

for every bundle ``b``. Envy-freeness needs ``U_u >= V_u((w_u/w_v) y_v)`` for every ordered
pair: with ``T`` tenants that is ``T (T - 1)`` LPs per point, which is what made ``oef`` collapse
at hundreds of tenants. Here every tenant keeps a *pool* of price vectors (the duals of every
exact LP solved for it, plus ``p = 0``, the full-demand bound, and ``p_k = max_c n_ck / g_c``,
the best-rate bound), and all pairs are bounded at once by one matrix product per tenant. Only
the pairs whose best pooled bound exceeds ``U_u`` need the exact LP, and its duals join the
pool, so the bounds get tighter as the climb goes on. The bounds are exact upper bounds, so a
pair they clear is envy-free exactly, not approximately.
"""

from __future__ import annotations

import time

from typing import Mapping

import numpy as np

from .. import fairness
from ..jobgroups import JobGroup


class EnvyBounds:
    """Pooled dual bounds on ``V_u(s y_v)`` for all ordered pairs, with exact LP fallback."""

    def __init__(self, names: list[str], types: list[str], mine: Mapping[str, list[JobGroup]],
                 weight: Mapping[str, float], value_of: Mapping[str, fairness.BestUseModel]):
        self.names = list(names)
        self.types = list(types)
        self.index = {u: i for i, u in enumerate(self.names)}
        self.value_of = value_of
        K = len(self.types)
        self.n: list[np.ndarray] = []
        self.g: list[np.ndarray] = []
        self.m: list[np.ndarray] = []
        for u in self.names:
            cls = mine[u]
            self.n.append(np.array([[c.n.get(k, 0.0) for k in self.types] for c in cls], dtype=float).reshape(len(cls), K))
            self.g.append(np.array([float(c.gpus) for c in cls], dtype=float))
            self.m.append(np.array([float(c.count) for c in cls], dtype=float))
        w = np.array([float(weight[u]) for u in self.names], dtype=float)
        #: ``scale[u, v] = w_u / w_v``: u compares itself with v's bundle scaled to u's weight
        self.scale = w[:, None] / w[None, :]
        # each tenant's pool: rows [0, size) of a buffer that doubles when full (a copy per
        # added row made the pools quadratic in the exact LPs of a solve)
        self._pbuf: list[np.ndarray] = []
        self._qbuf: list[np.ndarray] = []
        self._size: list[int] = []
        for i in range(len(self.names)):
            best_rate = (self.n[i] / self.g[i][:, None]).max(axis=0) if len(self.g[i]) else np.zeros(K)
            self._pbuf.append(np.zeros((16, K)))
            self._qbuf.append(np.zeros(16))
            self._size.append(0)
            self.add(i, np.zeros(K))
            self.add(i, best_rate)
        #: exact LPs solved (for the diagnostics in ``info``) and the seconds they took
        self.exact_solves = 0
        self.exact_seconds = 0.0

    def q_of(self, i: int, P: np.ndarray) -> np.ndarray:
        """``Q_u(p)`` for each row ``p`` of ``P`` (tenant index ``i``)."""
        if not len(self.g[i]):
            return np.zeros(len(P))
        gain = self.n[i][None, :, :] - self.g[i][None, :, None] * P[:, None, :]
        q: np.ndarray = (self.m[i][None, :] * np.maximum(0.0, gain.max(axis=2))).sum(axis=1)
        return q

    def add(self, i: int, p: np.ndarray) -> tuple[np.ndarray, float]:
        """Put the prices ``p`` (clipped at 0) in tenant ``i``'s pool; returns ``(p, Q_u(p))``."""
        p = np.maximum(0.0, np.asarray(p, dtype=float)).reshape(1, -1)
        q = self.q_of(i, p)
        n = self._size[i]
        if n == len(self._qbuf[i]):
            self._pbuf[i] = np.concatenate([self._pbuf[i], np.zeros_like(self._pbuf[i])])
            self._qbuf[i] = np.concatenate([self._qbuf[i], np.zeros_like(self._qbuf[i])])
        self._pbuf[i][n] = p[0]
        self._qbuf[i][n] = q[0]
        self._size[i] = n + 1
        return p[0], float(q[0])

    def pool(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Tenant ``i``'s price vectors (one per row) and their ``Q_u(p)``, in the order added."""
        n = self._size[i]
        return self._pbuf[i][:n], self._qbuf[i][:n]

    def pooled(self, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For every ordered pair, the best pooled bound on ``V_u(s_uv Y_v)`` and its certificate.

        ``Y`` is ``T x K`` (bundles in tenant order). Returns ``(bound, P, Q)`` with ``bound``
        ``T x T`` (the diagonal is meaningless), ``P`` ``T x T x K`` and ``Q`` ``T x T``: the
        prices and constant of the pooled certificate that gives each bound."""
        T, K = len(self.names), len(self.types)
        bound = np.empty((T, T))
        P = np.empty((T, T, K))
        Q = np.empty((T, T))
        for i in range(T):
            p, q = self.pool(i)
            vals = (p @ Y.T) * self.scale[i][None, :] + q[:, None]
            best = vals.argmin(axis=0)
            bound[i] = vals[best, np.arange(T)]
            P[i] = p[best]
            Q[i] = q[best]
        return bound, P, Q

    @staticmethod
    def needs_exact(bound: np.ndarray, U: np.ndarray) -> np.ndarray:
        """Pairs whose pooled ``bound`` does not clear them *with room to spare* (a climb step
        trusts a pooled cut only then, so its constant needs no lowering): ``T x T`` booleans,
        the diagonal False."""
        # fairness.slack is elementwise on arrays (its formula is arithmetic only)
        hot: np.ndarray = bound > U[:, None] - fairness.slack(U[:, None])  # type: ignore[arg-type]
        np.fill_diagonal(hot, False)
        return hot

    def undecided(self, U: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """The ordered pairs ``(i, j)`` that need an exact LP at utilities ``U`` and bundles
        ``Y`` (what a climb step over these bundles starts by paying)."""
        return np.argwhere(self.needs_exact(self.pooled(Y)[0], U))

    def exact(self, i: int, b: np.ndarray) -> tuple[float, np.ndarray, float]:
        """``V_u(b)`` by its LP; its duals join the pool. Returns ``(value, p, Q_u(p))``."""
        u = self.names[i]
        t0 = time.perf_counter()
        res = self.value_of[u]({k: float(v) for k, v in zip(self.types, b)})
        self.exact_seconds += time.perf_counter() - t0
        self.exact_solves += 1
        p, q = self.add(i, np.array([res.p.get(k, 0.0) for k in self.types]))
        return float(res.value), p, q

