"""OEF: maximum efficiency subject to fairness, cooperative (``oef``) and strategy-proof
(``oef-noncoop``). The soundness argument is in ``docs/oef.md``; in short:

``oef`` maximises ``E`` subject to capacity, demand (a job's rate <= 1), sharing incentive
(``U_u >= V_u((w_u/W) C)``, a constant per tenant: linear) and envy-freeness. EF against the
best-use valuation ``V_u`` is reverse-convex, so it is enforced by *sufficient* linear cuts:
for any dual-feasible ``(p, q)`` of the ``V_u`` LP, ``V_u(b) <= p.b + sum_c m_c q_c`` (weak
duality), hence ``U_u >= (w_u/w_v) p.y_v + sum_c m_c q_c`` implies ``U_u >= V_u((w_u/w_v) y_v)``.
A convex-concave procedure linearises at the current bundles with the duals there (tight, so the
current point stays feasible and ``E`` never decreases), starting from an SI+EF point: the equal
split with best use, or gavel-mmf's answer when it is verified SI and EF and more efficient.
Every iterate is exactly SI and EF. A last stage looks for a Pareto improvement among tenants
(``max E`` with every ``U_u`` held at least at its fair value, then the bundles moved as little as
possible); it is adopted only when it is verified envy-free, and ``info`` says whether the
answer is Pareto-efficient and, if not, by how much (``pareto_gap``).

``oef-noncoop``: every tenant's bundle is fixed *before* its throughput report is read: its
weighted equal share, less what its own best use leaves unused, plus a weight-proportional part of
the GPUs the *other* tenants leave unused after their own best use; the tenant then uses its
bundle as well as its report says. A report changes only how the tenant uses a bundle whose
useful part it cannot change (and which types it claims at all), so lying never raises its true
utility (proof in docs/oef.md); the equal share's value inside the bundle gives SI.
"""

from __future__ import annotations

import time
from typing import Mapping

import numpy as np

from .. import fairness
from ..errors import SolverError
from ..solver import INF
from ..jobclasses import JobClass, classes_of
from ..model import Allocation, Problem
from . import PolicyOptions, register
from ._ceei import ceei
from ._envy import EnvyBounds
from ._lp import (class_lp, equal_split_classes, fallback_allocation, feasible_classes, max_min_classes,
                  max_throughput_classes, result)

ClassX = Mapping[int, Mapping[str, float]]

MAX_ROUNDS = 25
MAX_REPAIRS = 4
_REL_IMPROVEMENT = 1e-7


def _utilities(classes: list[JobClass], X: ClassX) -> dict[str, float]:
    out: dict[str, float] = {}
    for c in classes:
        out[c.tenant] = out.get(c.tenant, 0.0) + sum(c.n.get(k, 0.0) * v for k, v in X.get(c.key, {}).items())
    return out


def _bundles(classes: list[JobClass], X: ClassX, types: list[str]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for c in classes:
        row = out.setdefault(c.tenant, {k: 0.0 for k in types})
        for k, v in X.get(c.key, {}).items():
            row[k] += c.gpus * v
    return out


class _Tenants:
    """Per-tenant class lists, weights, the SI constants and the envy bounds of one problem."""

    def __init__(self, problem: Problem, classes: list[JobClass]):
        self.problem = problem
        self.classes = classes
        self.names = problem.active_tenants
        self.types = problem.types
        self.mine = {u: [c for c in classes if c.tenant == u] for u in self.names}
        self.weight = {u: problem.weight(u) for u in self.names}
        self.value_of = {u: fairness.BestUseModel(self.mine[u], problem.types) for u in self.names}
        self.envy = EnvyBounds(self.names, self.types, self.mine, self.weight, self.value_of)
        self.si: dict[str, float] = {}
        for i, u in enumerate(self.names):
            at_share = self.value_of[u](fairness.equal_share(problem, u))
            self.si[u] = at_share.value
            # the equal share's duals clear every pair at the equal split: v's bundle, scaled to
            # u's weight, is inside u's equal share
            self.envy.add(i, np.array([at_share.p.get(k, 0.0) for k in self.types]))
        self.si_vec = np.array([self.si[u] for u in self.names])
        self._class_tenant = {c.key: self.envy.index[c.tenant] for c in classes}
        self._class_gpus = {c.key: float(c.gpus) for c in classes}
        self._class_n = {c.key: c.n for c in classes}
        self._type_index = {k: i for i, k in enumerate(self.types)}

    def arrays(self, X: ClassX) -> tuple[np.ndarray, np.ndarray]:
        """Utilities ``U`` (``T``) and bundles ``Y`` (``T x K``) of a class solution, tenant order."""
        U = np.zeros(len(self.names))
        Y = np.zeros((len(self.names), len(self.types)))
        for ck, row in X.items():
            i = self._class_tenant.get(ck)
            if i is None:
                continue
            n, g = self._class_n[ck], self._class_gpus[ck]
            for k, v in row.items():
                U[i] += n.get(k, 0.0) * v
                Y[i, self._type_index[k]] += g * v
        return U, Y

    def fair(self, X: ClassX) -> bool:
        """SI and EF of a class solution, exactly as docs/fairness.md checks them: pooled dual
        bounds decide most pairs; the others get their exact LP (and the first envious pair
        ends the check)."""
        U, Y = self.arrays(X)
        if np.any(U < self.si_vec - fairness.eps(self.si_vec)):
            return False
        bound, _, _ = self.envy.pooled(Y)
        # V <= bound <= U + eps(U) implies U >= V - eps(V) (eps grows with its argument)
        undecided = bound > (U + fairness.eps(U))[:, None]
        np.fill_diagonal(undecided, False)
        for i, j in np.argwhere(undecided):
            value, _, _ = self.envy.exact(i, self.envy.scale[i, j] * Y[j])
            if U[i] < value - fairness.eps(value):
                return False
        return True


def _efficiency(classes: list[JobClass], X: ClassX) -> float:
    return sum(_utilities(classes, X).values())


class _Climb:
    """The convex-concave climb and the Pareto polish on one warm in-memory LP.

    Rows: capacity and demand, one SI row per tenant (``U_u >= V_u((w_u/W) C)``, or the floor
    ``U_u >= U_u^0`` in the polish), then the EF cuts of the current linearisation (replaced at
    every step), then the polish's rows. Columns: ``X_ck``, then ``d_uk >= 0`` (the polish's
    bundle moves; free and unused before). Only the pairs whose cut binds or is violated are in
    the model: the cuts of the pairs with slack are checked at every answer and added when
    violated, then the model is re-solved warm, so the answer is that of the full cut set.
    """

    def __init__(self, problem: Problem, t: _Tenants, options: PolicyOptions):
        self.problem, self.t = problem, t
        self.cm = class_lp(problem, "oef_climb", t.classes, options)
        self.dev = {(u, k): self.cm.add_col() for u in t.names for k in problem.types}
        self.cm.set_objective(self.cm.efficiency())
        self.si_rows = {u: self.cm.add_row(self.cm.utility(u), t.si[u], INF) for u in t.names}
        self.base = len(self.cm.lp.rows)
        self.solves = 0
        #: per tenant: its columns, their type index and their classes' GPU counts (cut rows)
        self.tenant_cols: list[tuple[list[int], np.ndarray, np.ndarray]] = []
        tix = {k: i for i, k in enumerate(t.types)}
        for u in t.names:
            cols, types, gpus = [], [], []
            for c in t.mine[u]:
                for k, col in self.cm.by_class.get(c.key, {}).items():
                    cols.append(col)
                    types.append(tix[k])
                    gpus.append(float(c.gpus))
            self.tenant_cols.append((cols, np.array(types, dtype=int), np.array(gpus)))

    def _solve(self) -> None:
        self.cm.solve()
        self.solves += 1

    def step(self, X: ClassX, deadline: float | None = None) -> dict[int, dict[str, float]]:
        """One linearisation: max E s.t. capacity, demand, SI and an EF cut per pair valid at ``X``.

        Pair ``(u, v)``'s cut is ``U_u >= s_uv p.y_v + Q_u(p)`` for a price vector ``p`` whose
        bound clears the pair at ``X`` (:mod:`._envy`; so ``X`` stays feasible and ``E`` never
        decreases). Cuts enter the model only when the answer violates them; a cut from the pool
        that binds is replaced by the exact LP's certificate at ``X`` (tight there, the
        convex-concave linearisation) and the model re-solved, so the answer is that of the
        linearisation wherever it matters, while exact LPs are solved for binding pairs only.

        With many tenants a step can need an exact LP for most of the ``T^2`` pairs; past the
        ``deadline`` it stops with :class:`_OutOfTime` (the step's point is not used).
        """
        t, cm, envy = self.t, self.cm, self.t.envy

        def exact(i: int, j: int) -> None:
            if deadline is not None and envy.exact_solves % 32 == 0 and time.perf_counter() >= deadline:
                raise _OutOfTime
            _, P[i, j], Q[i, j] = envy.exact(i, envy.scale[i, j] * Y[j])

        cm.lp.truncate(self.base)
        U, Y = t.arrays(X)
        for i, u in enumerate(t.names):
            # X is SI (up to eps): keep it feasible despite round-off; the answer is re-verified
            si = min(t.si[u], float(U[i]))
            cm.lp.set_row_bounds(self.si_rows[u], si - fairness.slack(si), INF)
        T = len(t.names)
        off = ~np.eye(T, dtype=bool)
        bound, P, Q = envy.pooled(Y)
        tight = np.zeros((T, T), dtype=bool)
        # a pooled cut is used only with room to spare (its constant then needs no lowering below
        # Q_u(p), which keeps it a valid bound); the other pairs get the exact certificate
        for i, j in np.argwhere(envy.needs_exact(bound, U)):
            exact(i, j)
            tight[i, j] = True
        const = np.zeros((T, T))

        def set_const(i: int, j: int) -> None:
            # never let round-off cut X itself off (X is verified SI+EF): at most the cut's value
            # at X, less slack (eps/10; the answer is checked with eps)
            at_x = U[i] - envy.scale[i, j] * float(P[i, j] @ Y[j])
            const[i, j] = min(Q[i, j], at_x) - fairness.slack(U[i])

        for i, j in np.argwhere(off):
            set_const(i, j)
        rows: dict[tuple[int, int], int] = {}

        def add(i: int, j: int) -> None:
            terms = dict(cm.utility(t.names[i]))
            cols, tix, gpus = self.tenant_cols[j]
            coef = envy.scale[i, j] * P[i, j][tix] * gpus
            for col, c in zip(cols, coef):
                if c != 0.0:
                    terms[col] = terms.get(col, 0.0) - float(c)
            rows[i, j] = cm.add_row(terms, float(const[i, j]), INF)

        for i, j in np.argwhere(tight):
            add(i, j)
        while True:
            if deadline is not None and time.perf_counter() >= deadline:
                raise _OutOfTime
            self._solve()
            X_new = feasible_classes(self.problem, t.classes, cm.values())
            U2, Y2 = t.arrays(X_new)
            lhs = U2[:, None] - envy.scale * np.einsum("ijk,jk->ij", P, Y2)
            tol = 1e-9 * (1.0 + np.abs(const))
            late = (lhs < const - tol) & off
            for key in rows:
                late[key] = False
            if late.any():
                for i, j in np.argwhere(late):
                    add(i, j)
                continue
            loose = [(i, j) for (i, j) in rows if not tight[i, j] and lhs[i, j] <= const[i, j] + 1e-7 * (1.0 + abs(const[i, j]))]
            if not loose:
                return X_new
            for i, j in loose:
                exact(i, j)
                tight[i, j] = True
                cm.lp.set_row_bounds(rows[i, j], -INF, INF)  # retire the pooled cut
                set_const(i, j)
                add(i, j)

    def polish(self, X: ClassX) -> tuple[dict | None, float]:
        """A Pareto improvement of ``X`` (or None) and the gap ``max E' - E`` found.

        Stage 1: ``max E`` with ``U_u >= U_u(X)``; stage 2: at that ``E``, move the bundles as
        little as possible (L1) from ``X``'s, which keeps envy away when it can be kept away.
        Floors and the ``E`` row are relaxed by ``fairness.slack``; the model is restored to the
        climb's rows even when a solve fails.
        """
        try:
            return self._polish(X)
        except SolverError:
            self.cm.lp.reset()  # rebuild the in-memory model from scratch for the next solve
            raise
        finally:
            self.cm.lp.truncate(self.base)
            self.cm.set_objective(self.cm.efficiency())

    def _polish(self, X: ClassX) -> tuple[dict | None, float]:
        t, cm = self.t, self.cm
        cm.lp.truncate(self.base)
        util = _utilities(t.classes, X)
        e_now = sum(util.values())
        for u in t.names:
            floor = util.get(u, 0.0)
            cm.lp.set_row_bounds(self.si_rows[u], floor - fairness.slack(floor), INF)
        cm.set_objective(cm.efficiency())
        self._solve()
        e_max = cm.lp.objective
        gap = max(0.0, e_max - e_now)
        if gap <= fairness.eps(e_now):
            return None, gap
        cm.add_row(cm.efficiency(), e_max - fairness.slack(e_max), INF)
        bundles = _bundles(t.classes, X, self.problem.types)
        gpus = {c.key: c.gpus for c in t.classes}
        for u in t.names:
            for k in self.problem.types:
                terms = {cm.by_class[c.key][k]: float(gpus[c.key]) for c in t.mine[u] if k in cm.by_class[c.key]}
                d = self.dev[u, k]
                cm.add_row({**terms, d: -1.0}, -INF, bundles[u][k])
                cm.add_row({**terms, d: 1.0}, bundles[u][k], INF)
        cm.set_objective({d: -1.0 for d in self.dev.values()})
        self._solve()
        X_near = feasible_classes(self.problem, t.classes, cm.values())
        cm.lp.truncate(self.base)
        cm.set_objective(cm.efficiency())
        return X_near, gap

    def first_step_seconds(self, X: ClassX) -> float:
        """An estimate of one climb step from ``X``: its exact envy LPs at the average time of
        those solved so far, times :data:`_STEP_PER_EXACT` for the rows they add and the
        re-solves. With hundreds of tenants this is most of the ``T^2`` pairs."""
        envy = self.t.envy
        U, Y = self.t.arrays(X)
        pairs = envy.undecided(U, Y)
        # too few timed so far: time a few of the pairs the step needs anyway (their duals
        # join the pools, so the step does not pay for them again)
        for i, j in pairs[:max(0, _TIMED_SAMPLE - envy.exact_solves)]:
            envy.exact(int(i), envy.scale[i, j] * Y[j])
        per = envy.exact_seconds / envy.exact_solves if envy.exact_solves else 0.0
        return len(pairs) * per * _STEP_PER_EXACT

    def climb(self, X: ClassX, e: float, deadline: float | None = None) -> tuple[ClassX, float, int, str | None]:
        """Iterate the linearised LP from the SI+EF point ``X`` until ``E`` stops improving (or
        the ``deadline``, a ``time.perf_counter()`` value, passes: every iterate is verified, so
        stopping early returns a verified point).

        The last value says why the climb stopped early when a step's solve failed (the last
        verified point is kept): None when it ran to its end."""
        rounds = 0
        for rounds in range(1, MAX_ROUNDS + 1):
            if deadline is not None and time.perf_counter() >= deadline:
                return X, e, rounds - 1, "time limit"
            try:
                X_new = self.step(X, deadline)
            except _OutOfTime:
                return X, e, rounds - 1, "time limit"
            except SolverError as exc:
                self.cm.lp.reset()
                return X, e, rounds, str(exc)
            e_new = _efficiency(self.t.classes, X_new)
            improved = e_new > e + _REL_IMPROVEMENT * (1 + e)
            if not improved:
                break
            if not self.t.fair(X_new):  # round-off broke a property: keep the last verified point
                break
            X, e = X_new, e_new
        return X, e, rounds, None


#: a climb step's cost over that of its exact envy LPs alone (2.8 measured with 200 tenants and
#: 7,207 classes: 23 s for the step, 8.2 s in the 37,840 exact LPs)
_STEP_PER_EXACT = 3.0
#: exact LPs timed before the first estimate of a step
_TIMED_SAMPLE = 16


class _OutOfTime(Exception):
    """A climb step passed the deadline: its point is dropped, the last verified one kept."""


def _pareto_ok(problem: Problem, t: _Tenants, X: ClassX) -> tuple[bool, float]:
    """Exact PE check of a class solution: ``max E s.t. U_u >= U_u(X)`` is at most ``E + eps``
    (the maximum bounded from above by :func:`slurm_fair.fairness.pareto_bound`, which relaxes
    the floors against round-off and takes the relaxation back out with the floors' duals)."""
    util = _utilities(t.classes, X)
    e = sum(util.values())
    best = fairness.pareto_bound(problem, t.classes, util)
    gap = max(0.0, best - e)
    return gap <= fairness.eps(e), gap


@register("oef", "OEF (cooperative): maximum efficiency subject to sharing incentive, envy-freeness and Pareto efficiency")
def oef(problem: Problem, options: PolicyOptions) -> Allocation:
    """See the module docstring and docs/oef.md. Every candidate is made exactly feasible
    (:func:`~._lp.feasible_classes`) and checked exactly (SI, EF with ``eps``; PE with
    :func:`slurm_fair.fairness.pareto_bound`) before it counts. A stage whose solve fails is
    recorded in ``info['degraded']`` and skipped; the answer is then the best verified
    SI+EF+PE candidate, else the best verified SI+EF one (``pareto_efficient: false``), and the
    equal split (status ``fallback``) only when nothing could be verified at all."""
    started = time.perf_counter()
    deadline = started + options.time_limit_s
    classes = classes_of(problem)
    tried: dict[str, str] = {}
    degraded: dict[str, str] = {}
    try:
        t = _Tenants(problem, classes)
        X0 = feasible_classes(problem, classes, equal_split_classes(problem, classes))
    except SolverError as exc:  # no SI constant, nothing can be verified: the documented fallback
        return fallback_allocation(problem, "oef", exc, started)
    clean = lambda X: feasible_classes(problem, classes, X)  # noqa: E731
    #: verified candidates: (E, name, X, pareto gap or None when PE was not verified)
    fair_points: list[tuple[float, str, ClassX, float | None]] = []
    passing: list[tuple[float, str, ClassX]] = []

    def consider(name: str, X: ClassX | None) -> bool:
        if X is None:
            tried.setdefault(name, "failed")
            return False
        X = clean(X)
        try:
            if not t.fair(X):
                tried[name] = "not SI+EF"
                return False
        except SolverError as exc:
            tried[name] = "check failed"
            degraded[f"check of {name}"] = str(exc)
            return False
        e = _efficiency(classes, X)
        try:
            pe, gap = _pareto_ok(problem, t, X)
        except SolverError as exc:
            tried[name] = "SI+EF, PE check failed"
            degraded[f"PE check of {name}"] = str(exc)
            fair_points.append((e, name, X, None))
            return False
        fair_points.append((e, name, X, gap))
        if not pe:
            tried[name] = f"SI+EF, not PE (gap {gap:.3g})"
            return False
        tried[name] = "SI+EF+PE"
        passing.append((e, name, X))
        return True

    # 0. the efficiency bound: when the most efficient allocation is already SI and EF it is
    #    the answer (E = E*, and it is Pareto-efficient by construction)
    e_star: float | None = None
    try:
        top = clean(max_throughput_classes(problem, options, classes))
        e_star = _efficiency(classes, top)
        if t.fair(top):
            info = {"winner": "max-throughput", "candidates": {"max-throughput": "SI+EF+PE"},
                    "ccp_rounds": 0, "pareto_efficient": True, "pareto_gap": 0.0,
                    "efficiency_ratio": 1.0, "degraded": {}}
            return result(problem, "oef", classes, top, options, started, info, efficiency_bound=e_star)
        tried["max-throughput"] = "not SI+EF"
    except SolverError as exc:
        tried["max-throughput"] = "failed"
        degraded["max-throughput"] = str(exc)
    lp = _Climb(problem, t, options)
    rounds = 0

    def climb(name: str, X: ClassX) -> None:
        """max E s.t. SI+EF (convex-concave) from the fair point X, then a Pareto polish."""
        nonlocal rounds
        if lp.first_step_seconds(clean(X)) > deadline - time.perf_counter():
            skipped.append(f"ccp from {name} (its first step alone would pass the time limit)")
            return
        X, _, more, why = lp.climb(clean(X), _efficiency(classes, clean(X)), deadline)
        rounds += more
        if why == "time limit":
            skipped.append(f"rest of ccp from {name}")
            if more == 0:
                return  # not one verified step: the starting point was considered already
        elif why is not None:
            degraded[f"ccp from {name}"] = why
        try:
            better, _ = lp.polish(X)
        except SolverError as exc:
            degraded[f"polish from {name}"] = str(exc)
            tried[f"ccp+polish from {name}"] = "failed"
            consider(f"ccp from {name}", X)
            return
        if not consider(f"ccp+polish from {name}", X if better is None else better) and better is not None:
            # the polish broke SI/EF: the climb's own answer may still be PE
            consider(f"ccp from {name}", X)

    def at_bound() -> bool:
        """A verified candidate reaches E*: no other candidate can be more efficient."""
        return e_star is not None and any(e >= e_star - fairness.eps(e_star) for e, _, _ in passing)

    # 1. the equal split with best use: always SI+EF, so a verified SI+EF point exists whatever
    #    fails later
    consider("equal-split", X0)
    eq = None
    skipped: list[str] = []

    def time_left() -> bool:
        """Whether an improvement stage may start: only before the deadline
        (``options.time_limit_s`` from the start)."""
        return time.perf_counter() < deadline

    # 2. the competitive equilibrium from equal incomes: SI, EF and PE by construction, the
    #    candidate that keeps oef anytime (one verified SI+EF+PE point early, whatever the size)
    def good(X: ClassX) -> bool:
        X = clean(X)
        try:
            return t.fair(X) and _pareto_ok(problem, t, X)[0]
        except SolverError:
            return False

    try:
        eq = ceei(problem, classes, good_enough=good)
    except SolverError as exc:
        degraded["ceei"] = str(exc)
    consider("ceei", None if eq is None else eq.X)
    # 3. improvement stages, most promising first, while time is left: the climbs from the
    #    CEEI and from the equal split, then gavel-mmf's answer and the climb from it
    stages: list[tuple[str, object]] = []
    if eq is not None and tried["ceei"].startswith("SI+EF") and _efficiency(classes, clean(eq.X)) > _efficiency(classes, X0):
        stages.append(("ccp from ceei", lambda: climb("ceei", eq.X)))
    stages.append(("ccp from equal-split", lambda: climb("equal-split", X0)))

    def gavel() -> None:
        gm: ClassX | None = None
        try:
            _, gm, _ = max_min_classes(problem, options, "oef_gavel", agnostic=False)
        except SolverError as exc:
            degraded["gavel-mmf"] = str(exc)
        consider("gavel-mmf", gm)
        if gm is not None and tried["gavel-mmf"].startswith("SI+EF") and _efficiency(classes, clean(gm)) > _efficiency(classes, X0):
            climb("gavel-mmf", gm)

    stages.append(("gavel-mmf", gavel))
    for name, run in stages:
        if at_bound():
            break
        if not time_left():
            skipped.append(name)
            continue
        run()  # type: ignore[operator]
    if passing:
        passing.sort(key=lambda r: r[0], reverse=True)
        e_best, winner, X = passing[0]
        pe, gap = True, 0.0
    elif not fair_points:  # every check failed: nothing verified, the documented fallback
        why = "; ".join(f"{k}: {v}" for k, v in degraded.items()) or "no candidate could be verified"
        return fallback_allocation(problem, "oef", SolverError(f"oef: no verified candidate ({why})", None, "Error"), started)
    else:
        # no candidate verified PE: the most efficient verified SI+EF one (the equal split at
        # worst), reported as such
        fair_points.sort(key=lambda r: r[0], reverse=True)
        e_best, winner, X, g = fair_points[0]
        pe, gap = False, g
        winner = f"{winner} (SI+EF, not verified PE)"
    info = {"winner": winner, "candidates": tried, "ccp_rounds": rounds,
            "time_limit_s": options.time_limit_s, "skipped_for_time": skipped,
            "exact_envy_lps": t.envy.exact_solves,
            "pareto_efficient": pe, "pareto_gap": gap,
            "efficiency_ratio": None if e_star is None else fairness.efficiency_ratio(e_best, e_star),
            "ceei_spending_error": None if eq is None else eq.error, "degraded": degraded}
    return result(problem, "oef", classes, X, options, started, info, efficiency_bound=e_star)


# --- non-cooperative ------------------------------------------------------------------------


@register("oef-noncoop", "OEF non-cooperative: strategy-proof, SI; bundles fixed before reports are used")
def oef_noncoop(problem: Problem, options: PolicyOptions) -> Allocation:
    started = time.perf_counter()
    classes = classes_of(problem)
    names = problem.active_tenants
    mine = {u: [c for c in classes if c.tenant == u] for u in names}
    types = problem.types
    try:
        share = {u: fairness.equal_share(problem, u) for u in names}
        first = {u: fairness.best_use(mine[u], share[u]) for u in names}
        used = _bundles(classes, {k: v for u in names for k, v in first[u].z.items()}, types)
        left = {u: {k: max(0.0, share[u][k] - used.get(u, {}).get(k, 0.0)) for k in types} for u in names}
        claims = {u: {k for c in mine[u] for k in c.n} for u in names}
        # a tenant keeps what its own best use takes of its equal share (at least V_u(share): SI)
        bundle = {u: {k: share[u][k] - left[u][k] for k in types} for u in names}
        for v in names:  # v's unused GPUs go to the other tenants claiming the type, by weight
            for k in types:
                if left[v][k] <= 1e-12:
                    continue
                takers = [u for u in names if u != v and k in claims[u]]
                wsum = sum(problem.weight(u) for u in takers)
                for u in takers:
                    bundle[u][k] += left[v][k] * problem.weight(u) / wsum
        X: dict[int, dict[str, float]] = {}
        for u in names:
            X.update(fairness.best_use(mine[u], bundle[u]).z)
    except SolverError as exc:
        return fallback_allocation(problem, "oef-noncoop", exc, started)
    info = {"bundles_granted": {u: {k: v for k, v in b.items() if v > 0} for u, b in bundle.items()}}
    return result(problem, "oef-noncoop", classes, X, options, started, info)
