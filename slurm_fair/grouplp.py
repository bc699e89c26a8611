"""The group LP of docs/fairness.md, built in one place.

Every linear model of slurm-fair over job groups (:mod:`slurm_fair.jobgroups`) starts from the
same rows: a column ``z_ck`` per class ``c`` and type ``k`` it can run on (the class's total time
on ``k``), the capacity row ``sum_c g_c z_ck <= C_k`` per type and the demand row
``sum_k z_ck <= m_c`` per class (a job's rate is at most 1, so a tenant cannot absorb GPUs it
cannot use), optionally a utility floor ``U_u >= f_u`` per tenant. The bundle value ``V_u(b)``
(``C`` = the bundle), the efficiency bound ``E*``, the Pareto bound (floors) and every LP policy
(extra columns and rows on top) are this model; building it once keeps their rows, column order
and tolerances the same, so their answers agree.

The model is kept in memory as a :class:`~slurm_fair.solver.SmallLP` (HiGHS in-process, warm
re-solves after rows are added, truncated or re-bounded; CBC through PuLP when forced). Terms
are ``{column: coefficient}`` dicts.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from .jobgroups import JobGroup
from .solver import INF, SmallLP


class GroupLP:
    """Columns ``z_ck`` (class order, then ``types`` order), then any extra columns; rows
    capacity (one per type with a column, ``types`` order) then demand (one per class with a
    column), then whatever the caller adds (:meth:`add_floors`, :meth:`add_row`).

    ``caps[k]`` is the right-hand side of type ``k``'s capacity row; ``types`` the types that get
    columns (default: those with ``caps[k] > 0``, sorted). ``n`` replaces the classes' ``n_ck``
    as the coefficients of utilities and efficiency (the columns still follow ``c.n``);
    ``counts`` the demand rows' right-hand sides (default: the classes' job counts). Every
    column starts with cost 0: choose the objective with :meth:`set_objective`.
    """

    def __init__(self, classes: Sequence[JobGroup], caps: Mapping[str, float], name: str,
                 types: Sequence[str] | None = None, n: Mapping[int, Mapping[str, float]] | None = None,
                 backend: str | None = None, time_limit_s: float | None = None, keep_lp_dir: str | None = None,
                 counts: Mapping[int, float] | None = None):
        self.classes = list(classes)
        if types is None:
            types = [k for k in sorted(caps) if float(caps[k]) > 0]
        self.n = {c.key: (n[c.key] if n else c.n) for c in self.classes}
        #: ``(class key, type)`` of every class column, in column order
        self.cols: list[tuple[int, str]] = []
        #: ``by_class[c][k]``: the column of ``z_ck``
        self.by_class: dict[int, dict[str, int]] = {}
        cap_terms: dict[str, tuple[list[int], list[float]]] = {k: ([], []) for k in types}
        dem_rows: list[tuple[int, list[int]]] = []
        by_key = {c.key: c for c in self.classes}
        for c in self.classes:
            row = self.by_class.setdefault(c.key, {})
            for k in types:
                if c.n.get(k, 0.0) > 0:
                    i = len(self.cols)
                    self.cols.append((c.key, k))
                    row[k] = i
                    cap_terms[k][0].append(i)
                    cap_terms[k][1].append(float(c.gpus))
            if row:
                dem_rows.append((c.key, list(row.values())))
        rows: list[tuple[list[int], list[float], float, float]] = []
        #: the row of each type's capacity and of each class's demand
        self.cap_row: dict[str, int] = {}
        self.dem_row: dict[int, int] = {}
        for k, (cols, vals) in cap_terms.items():
            if cols:
                self.cap_row[k] = len(rows)
                rows.append((cols, vals, -INF, float(caps.get(k, 0.0))))
        for ck, cols in dem_rows:
            self.dem_row[ck] = len(rows)
            rows.append((cols, [1.0] * len(cols), -INF, float(counts[ck]) if counts else float(by_key[ck].count)))
        nx = len(self.cols)
        self.lp = SmallLP([0.0] * nx, [0.0] * nx, [INF] * nx, rows, name=name, backend=backend,
                          time_limit_s=time_limit_s, keep_lp_dir=keep_lp_dir)
        self._owner = {c.key: c.tenant for c in self.classes}
        self._utility: dict[str, dict[int, float]] = {}

    def add_col(self, lb: float = 0.0, ub: float = INF, cost: float = 0.0) -> int:
        """An extra column (before the first solve)."""
        assert self.lp._h is None
        self.lp.cost.append(cost)
        self.lp.lb.append(lb)
        self.lp.ub.append(ub)
        return len(self.lp.cost) - 1

    def class_rate(self, c: JobGroup) -> dict[int, float]:
        """The class's total rate ``sum_k n_ck z_ck`` (the sum of its jobs' ``r_j``) as terms."""
        n = self.n[c.key]
        return {i: n.get(k, 0.0) for k, i in self.by_class[c.key].items()}

    def utility(self, tenant: str) -> dict[int, float]:
        """``U_u`` as terms."""
        got = self._utility.get(tenant)
        if got is None:
            got = {i: self.n[ck].get(k, 0.0) for ck, row in self.by_class.items() if self._owner[ck] == tenant
                   for k, i in row.items()}
            self._utility[tenant] = got
        return got

    def efficiency(self) -> dict[int, float]:
        """``E = sum_u U_u`` as terms."""
        return {i: self.n[ck].get(k, 0.0) for i, (ck, k) in enumerate(self.cols)}

    def add_floors(self, floors: Mapping[str, float]) -> dict[str, int]:
        """The rows ``U_u >= floors[u]``, in ``floors`` order; their indices by tenant."""
        return {u: self.add_row(self.utility(u), float(f), INF) for u, f in floors.items()}

    def set_objective(self, terms: Mapping[int, float]) -> None:
        """Maximise ``terms`` (every other column gets cost 0)."""
        for i, c in enumerate(self.lp.cost):
            v = float(terms.get(i, 0.0))
            if c != v:
                self.lp.set_cost(i, v)

    def add_row(self, terms: Mapping[int, float], lo: float = -INF, hi: float = INF) -> int:
        return self.lp.add_row(list(terms), [float(v) for v in terms.values()], lo, hi)

    def solve(self) -> float:
        """Solve; the objective value (raises :class:`~slurm_fair.errors.SolverError` unless
        optimal)."""
        self.lp.solve()
        return self.lp.objective

    def value(self, col: int) -> float:
        return float(self.lp.x[col])

    def values(self, floor: float = 1e-10) -> dict[int, dict[str, float]]:
        """The class solution ``z[c][k]`` (values at most ``floor``: round-off, dropped)."""
        out: dict[int, dict[str, float]] = {c.key: {} for c in self.classes}
        for (ck, k), val in zip(self.cols, self.lp.x):
            if val > floor:
                out[ck][k] = float(val)
        return out
