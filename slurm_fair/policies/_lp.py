"""Building blocks shared by the LP policies: one class model, the fallback, the result.

Every LP policy works on job classes (:mod:`slurm_fair.jobclasses`): a variable ``X_ck`` per
class and type it can run on, the demand row ``sum_k X_ck <= m_c`` (a job's rate is at most 1,
so a tenant cannot absorb GPUs it cannot use), the capacity row ``sum_c g_c X_ck <= C_k``.
Rows are built from dicts into ``LpAffineExpression`` in one pass, never term by term.
"""

from __future__ import annotations

import time
from typing import Mapping

import pulp

from .. import fairness
from ..errors import SolverError
from ..jobclasses import JobClass, classes_of
from ..model import Allocation, Problem
from ..solver import INF, SmallLP, SolveResult, solve
from . import PolicyOptions


class ClassModel:
    """An LP over class variables with the feasibility rows already in place."""

    def __init__(self, problem: Problem, name: str, classes: list[JobClass] | None = None,
                 sense: int = pulp.LpMaximize, n_override: Mapping[int, Mapping[str, float]] | None = None):
        self.problem = problem
        self.classes = classes if classes is not None else classes_of(problem)
        self.model = pulp.LpProblem(name, sense)
        caps = {k: float(c) for k, c in problem.gpu_types.items()}
        self.X: dict[tuple[int, str], pulp.LpVariable] = {}
        type_index = {k: i for i, k in enumerate(problem.types)}
        for c in self.classes:
            for k in c.n:
                if caps.get(k, 0.0) > 0:
                    self.X[c.key, k] = pulp.LpVariable(f"X_{c.key}_{type_index[k]}", lowBound=0)
        self.by_class: dict[int, dict[str, pulp.LpVariable]] = {c.key: {} for c in self.classes}
        for (ck, k), v in self.X.items():
            self.by_class[ck][k] = v
        self.n = {c.key: dict(n_override[c.key]) if n_override else dict(c.n) for c in self.classes}
        by_type: dict[str, dict] = {k: {} for k in caps}
        for c in self.classes:
            for k, v in self.by_class[c.key].items():
                by_type[k][v] = c.gpus
        for k, terms in by_type.items():
            if terms:
                self.model += pulp.LpConstraint(pulp.LpAffineExpression(terms), pulp.LpConstraintLE, f"cap_{type_index[k]}", caps[k])
        for c in self.classes:
            terms = {v: 1.0 for v in self.by_class[c.key].values()}
            if terms:
                self.model += pulp.LpConstraint(pulp.LpAffineExpression(terms), pulp.LpConstraintLE, f"dem_{c.key}", float(c.count))

    def class_rate(self, c: JobClass) -> pulp.LpAffineExpression:
        """The class's total rate ``sum_k n_ck X_ck`` (sum of its jobs' ``r_j``)."""
        return pulp.LpAffineExpression({v: self.n[c.key].get(k, 0.0) for k, v in self.by_class[c.key].items()})

    def utility(self, tenant: str) -> pulp.LpAffineExpression:
        """``U_u`` as an expression."""
        return pulp.LpAffineExpression(
            {v: self.n[c.key].get(k, 0.0) for c in self.classes if c.tenant == tenant for k, v in self.by_class[c.key].items()}
        )

    def bundle_terms(self, tenant: str, prices: Mapping[str, float], scale: float = 1.0) -> dict:
        """Terms of ``scale * sum_k prices_k * y_uk`` (for EF cuts)."""
        return {
            v: scale * prices.get(k, 0.0) * c.gpus
            for c in self.classes if c.tenant == tenant
            for k, v in self.by_class[c.key].items()
            if prices.get(k, 0.0) != 0.0
        }

    def efficiency(self) -> pulp.LpAffineExpression:
        """``E = sum_u U_u`` as an expression."""
        return pulp.LpAffineExpression({v: self.n[ck].get(k, 0.0) for (ck, k), v in self.X.items()})

    def solve(self, options: PolicyOptions) -> SolveResult:
        return solve(self.model, options.solver, options.time_limit_s, options.keep_lp_dir)

    def values(self) -> dict[int, dict[str, float]]:
        """The class solution ``X[c][k]`` (tiny negatives and noise dropped)."""
        out: dict[int, dict[str, float]] = {c.key: {} for c in self.classes}
        for (ck, k), v in self.X.items():
            val = float(v.varValue or 0.0)
            if val > 1e-10:
                out[ck][k] = val
        return out


class ClassLP:
    """The same class model as :class:`ClassModel`, kept in memory as a :class:`SmallLP`.

    Columns ``X_ck`` (one per class and type it can run on), then any extra columns; rows
    capacity (one per type) and demand (one per class), then whatever the caller adds. Terms are
    ``{column: coefficient}`` dicts. The model is solved in-process with HiGHS and re-solved warm
    after rows are added, truncated or re-bounded; when ``options.solver`` resolves to ``cbc``
    (forced, or ``auto`` without ``highspy``) it goes through PuLP/CBC instead (a fresh model per
    solve).
    """

    def __init__(self, problem: Problem, name: str, classes: list[JobClass], options: PolicyOptions,
                 n_override: Mapping[int, Mapping[str, float]] | None = None):
        self.problem = problem
        self.classes = classes
        caps = {k: float(c) for k, c in problem.gpu_types.items()}
        self.n = {c.key: (n_override[c.key] if n_override else c.n) for c in classes}
        self.cols: list[tuple[int, str]] = []
        self.by_class: dict[int, dict[str, int]] = {}
        cap_terms: dict[str, tuple[list[int], list[float]]] = {k: ([], []) for k in problem.types if caps.get(k, 0.0) > 0}
        dem_rows = []
        for c in classes:
            row = self.by_class.setdefault(c.key, {})
            for k in c.n:
                if caps.get(k, 0.0) > 0:
                    i = len(self.cols)
                    self.cols.append((c.key, k))
                    row[k] = i
                    cap_terms[k][0].append(i)
                    cap_terms[k][1].append(float(c.gpus))
            if row:
                dem_rows.append((list(row.values()), [1.0] * len(row), -INF, float(c.count)))
        rows = [(cols, vals, -INF, caps[k]) for k, (cols, vals) in cap_terms.items() if cols] + dem_rows
        nx = len(self.cols)
        self.lp = SmallLP([0.0] * nx, [0.0] * nx, [INF] * nx, rows, name=name,
                          backend="cbc" if options.resolved_solver == "cbc" else None,
                          time_limit_s=options.time_limit_s, keep_lp_dir=options.keep_lp_dir)
        self._owner = {c.key: c.tenant for c in classes}
        self._utility: dict[str, dict[int, float]] = {}

    def add_col(self, lb: float = 0.0, ub: float = INF, cost: float = 0.0) -> int:
        """An extra column (before the first solve)."""
        assert self.lp._h is None
        self.lp.cost.append(cost)
        self.lp.lb.append(lb)
        self.lp.ub.append(ub)
        return len(self.lp.cost) - 1

    def class_rate(self, c: JobClass) -> dict[int, float]:
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
        return {i: self.n[ck].get(k, 0.0) for i, (ck, k) in enumerate(self.cols)}

    def set_objective(self, terms: Mapping[int, float]) -> None:
        """Maximise ``terms`` (every other column gets cost 0)."""
        for i, c in enumerate(self.lp.cost):
            v = float(terms.get(i, 0.0))
            if c != v:
                self.lp.set_cost(i, v)

    def add_row(self, terms: Mapping[int, float], lo: float = -INF, hi: float = INF) -> int:
        return self.lp.add_row(list(terms), [float(v) for v in terms.values()], lo, hi)

    def solve(self) -> float:
        """Solve; the objective value (raises :class:`SolverError` unless optimal)."""
        self.lp.solve()
        return self.lp.objective

    def value(self, col: int) -> float:
        return float(self.lp.x[col])

    def values(self) -> dict[int, dict[str, float]]:
        """The class solution ``X[c][k]`` (tiny negatives and noise dropped)."""
        out: dict[int, dict[str, float]] = {c.key: {} for c in self.classes}
        for (ck, k), val in zip(self.cols, self.lp.x):
            if val > 1e-10:
                out[ck][k] = float(val)
        return out


def split_classes(classes: list[JobClass], X: Mapping[int, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Per-job ``x_jk = X_ck / m_c``: identical jobs share their class's time equally.

    Shares are clipped into [0, 1] and scaled so a job's total never exceeds 1, which removes
    solver round-off without moving any value by more than the solver's tolerance.
    """
    x: dict[str, dict[str, float]] = {}
    for c in classes:
        row = {k: min(1.0, max(0.0, v / c.count)) for k, v in X.get(c.key, {}).items() if v > 1e-10}
        total = sum(row.values())
        if total > 1.0:
            row = {k: v / total for k, v in row.items()}
        for job_id in c.job_ids:
            x[job_id] = dict(row)
    return x


def clip_capacity(problem: Problem, x: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Scale a type's shares down by the solver's round-off when they exceed its capacity."""
    gpus = {j.id: j.gpus for j in problem.jobs}
    used: dict[str, float] = {}
    for jid, row in x.items():
        for k, v in row.items():
            used[k] = used.get(k, 0.0) + gpus[jid] * v
    for k, u in used.items():
        cap = float(problem.gpu_types.get(k, 0))
        if u > cap > 0 or (cap == 0 and u > 0):
            factor = cap / u if u > 0 else 0.0
            for row in x.values():
                if k in row:
                    row[k] *= factor
    return x


def feasible_classes(problem: Problem, classes: list[JobClass],
                     X: Mapping[int, Mapping[str, float]]) -> dict[int, dict[str, float]]:
    """``X`` made exactly feasible the way :func:`result` makes the answer feasible (negatives
    dropped, a class's total scaled down to ``m_c``, a type's use scaled down to ``C_k``): solver
    round-off (CBC prints 8 significant digits) can leave a solution 1e-8 outside the feasible
    set, and a point that is checked, or whose utilities become floors of another model, must be
    the point that is returned."""
    out: dict[int, dict[str, float]] = {}
    for c in classes:
        row = {k: float(v) for k, v in X.get(c.key, {}).items() if v > 1e-10 and c.n.get(k, 0.0) > 0}
        total = sum(row.values())
        if total > c.count:
            row = {k: v * c.count / total for k, v in row.items()}
        out[c.key] = row
    used: dict[str, float] = {}
    gpus = {c.key: c.gpus for c in classes}
    for ck, row in out.items():
        for k, v in row.items():
            used[k] = used.get(k, 0.0) + gpus[ck] * v
    for k, u in used.items():
        cap = float(problem.gpu_types.get(k, 0))
        if u > cap:
            factor = cap / u if u > 0 else 0.0
            for row in out.values():
                if k in row:
                    row[k] *= factor
    return out


def equal_split_classes(problem: Problem, classes: list[JobClass]) -> dict[int, dict[str, float]]:
    """The equal split with best use: each tenant's classes use ``(w_u/W) C`` as well as they can.

    Always feasible, SI and EF (docs/fairness.md); the documented fallback of every LP policy. Its
    small per-tenant LPs use the fastest installed solver.
    """
    X: dict[int, dict[str, float]] = {}
    for u in problem.active_tenants:
        mine = [c for c in classes if c.tenant == u]
        X.update(fairness.best_use(mine, fairness.equal_share(problem, u)).z)
    return X


def fallback_allocation(problem: Problem, policy: str, error: SolverError, started: float) -> Allocation:
    """The equal split with best use, reported with status ``fallback`` and the error."""
    classes = classes_of(problem)
    x = clip_capacity(problem, split_classes(classes, equal_split_classes(problem, classes)))
    return Allocation(
        policy=policy, x=x, status="fallback", solver="none",
        solve_seconds=time.perf_counter() - started,
        info={"fallback_reason": str(error), "lp_file": error.lp_file, "solver_status": error.status},
    )


def result(problem: Problem, policy: str, classes: list[JobClass], X: Mapping[int, Mapping[str, float]],
           options: PolicyOptions, started: float, info: Mapping[str, object] | None = None,
           status: str = "optimal") -> Allocation:
    """Build the Allocation with E (and E* / E/E* when ``options.state['with_bound']``)."""
    x = clip_capacity(problem, split_classes(classes, X))
    extra = dict(info or {})
    e = fairness.efficiency(problem, x)
    extra["efficiency"] = e
    extra["classes"] = len(classes)
    return Allocation(policy=policy, x=x, status=status, solver=options.resolved_solver,
                      solve_seconds=time.perf_counter() - started, info=extra)
