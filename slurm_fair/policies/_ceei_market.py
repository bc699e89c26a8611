"""The CEEI closing step's market: the equilibrium point type and the data every step shares.

:class:`Equilibrium` is what :func:`~._ceei.ceei` returns; :class:`Market` is the fixed part of
the closing step (:mod:`._ceei_snap`): the classes that take part, their activities and what a
point's spending error is, read by each of its LPs (:mod:`._ceei_lps`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..jobgroups import JobGroup

#: an allocation of the closing step: ``X[class key][type]``, jobs of the class on the type
Point = dict[int, dict[str, float]]
#: a class key and a type it can use: one column of the allocation
Activity = tuple[int, str]

#: a tenant within this relative distance of its best utility counts as satiated in the closing
#: step; it is then kept at least there (less fairness.slack: the row is built from a computed
#: point and must not cut that point off under round-off)
SATIATED = 1e-7


@dataclass
class Equilibrium:
    """Prices and an allocation of the market (the budgets the price iteration ended with)."""

    X: Point
    prices: dict[str, float]
    budgets: dict[str, float]
    spending: dict[str, float]
    #: max over tenants of the relative spending error (0 for a satiated tenant spending less)
    error: float
    iterations: int


@dataclass(frozen=True)
class Market:
    """What every LP of the closing step reads: the classes by key, the tenants (incomes
    ``weight``, best utilities ``umax``), the types with their capacities, the activities
    ``(class key, type)`` a class can use and the LP backend."""

    by_key: dict[int, JobGroup]
    tenants: list[str]
    acts: list[Activity]
    types: list[str]
    caps: dict[str, float]
    weight: dict[str, float]
    umax: dict[str, float]
    backend: str | None

    @classmethod
    def of(cls, classes: list[JobGroup], types: list[str], caps: dict[str, float], weight: dict[str, float],
           umax: dict[str, float], solver: str | None) -> "Market":
        by_key = {c.key: c for c in classes if c.tenant in weight}
        acts = [(ck, k) for ck, c in by_key.items() for k in types if c.n.get(k, 0.0) > 0]
        backend = None if solver in (None, "auto", "highs") else solver
        return cls(by_key, sorted(weight), acts, types, caps, weight, umax, backend)

    def measure(self, X: Point, prices: Mapping[str, float]) -> tuple[float, dict[str, float], set[str]]:
        """The point's relative spending error (a satiated tenant may spend less), the
        spending of each tenant and the satiated tenants."""
        spend = {u: 0.0 for u in self.tenants}
        util = {u: 0.0 for u in self.tenants}
        for ck, row in X.items():
            c = self.by_key[ck]
            for k, v in row.items():
                spend[c.tenant] += prices.get(k, 0.0) * c.gpus * v
                util[c.tenant] += c.n[k] * v
        sat = {u for u in self.tenants if util[u] >= self.umax[u] * (1 - SATIATED)}
        err = 0.0
        for u in self.tenants:
            e = (spend[u] - self.weight[u]) / self.weight[u]
            err = max(err, max(e, 0.0) if u in sat else abs(e))
        return err, spend, sat

    def error_cols(self, lp_cost: list[float], start: int, sat: set[str]) -> None:
        """Costs of the over- and underspending columns from ``start`` (two per tenant, relative
        to its income; a satiated tenant's underspending is free)."""
        for i, u in enumerate(self.tenants):
            lp_cost[start + 2 * i] = -1.0 / self.weight[u]  # overspending
            lp_cost[start + 2 * i + 1] = 0.0 if u in sat else -1.0 / self.weight[u]  # underspending

    def reduced(self, lam: Mapping[str, float], prices: Mapping[str, float], q: Mapping[int, float]
                ) -> dict[Activity, float]:
        """Reduced cost ``g_c p_k + q_c - lambda_u n_ck`` of every activity (0 on the face)."""
        return {(ck, k): self.by_key[ck].gpus * prices[k] + q[ck] - lam[self.by_key[ck].tenant] * self.by_key[ck].n[k]
                for ck, k in self.acts}

    def groups(
        self, acts: list[Activity],
    ) -> tuple[dict[str, list[Activity]], dict[int, list[Activity]], dict[str, list[Activity]]]:
        """Activities ``(class key, type)`` grouped by type, by class and by tenant, in one pass."""
        g_type: dict[str, list[Activity]] = {}
        g_cls: dict[int, list[Activity]] = {}
        g_ten: dict[str, list[Activity]] = {}
        for a in acts:
            g_type.setdefault(a[1], []).append(a)
            g_cls.setdefault(a[0], []).append(a)
            g_ten.setdefault(self.by_key[a[0]].tenant, []).append(a)
        return g_type, g_cls, g_ten
