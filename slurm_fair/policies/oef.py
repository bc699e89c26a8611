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

from .. import fairness
from ..errors import SolverError
from ..solver import INF
from ..jobclasses import JobClass, classes_of
from ..model import Allocation, Problem
from . import PolicyOptions, register
from ._ceei import ceei
from ._lp import ClassLP, equal_split_classes, fallback_allocation, feasible_classes, result
from .baselines import _max_min, _max_throughput_classes

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
    """Per-tenant class lists, weights and the SI constants of one problem."""

    def __init__(self, problem: Problem, classes: list[JobClass]):
        self.problem = problem
        self.classes = classes
        self.names = problem.active_tenants
        self.mine = {u: [c for c in classes if c.tenant == u] for u in self.names}
        self.weight = {u: problem.weight(u) for u in self.names}
        self.value_of = {u: fairness.BestUseModel(self.mine[u], problem.types) for u in self.names}
        self.si = {u: self.value_of[u](fairness.equal_share(problem, u)).value for u in self.names}
        self._last: tuple[ClassX, dict] | None = None

    def envy_certificates(self, X: ClassX) -> dict[tuple[str, str], fairness.BestUse]:
        """``V_u((w_u/w_v) y_v)`` with its dual certificate, for every ordered pair.

        The last answer is remembered: the fairness check of a point and the cuts built at the
        same point need the same LPs."""
        if self._last is not None and self._last[0] is X:
            return self._last[1]
        out = self._certificates(X)
        self._last = (X, out)
        return out

    def _certificates(self, X: ClassX) -> dict[tuple[str, str], fairness.BestUse]:
        bundles = _bundles(self.classes, X, self.problem.types)
        out = {}
        for u in self.names:
            for v in self.names:
                if u != v:
                    scale = self.weight[u] / self.weight[v]
                    b = {k: scale * y for k, y in bundles.get(v, {}).items()}
                    out[u, v] = self.value_of[u](b)
        return out

    def fair(self, X: ClassX) -> bool:
        """SI and EF of a class solution, exactly as docs/fairness.md checks them."""
        util = _utilities(self.classes, X)
        for u in self.names:
            if util.get(u, 0.0) < self.si[u] - fairness.eps(self.si[u]):
                return False
        for (u, _), cert in self.envy_certificates(X).items():
            if util.get(u, 0.0) < cert.value - fairness.eps(cert.value):
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

    #: a pair's cut is put in the model from the start when its envy slack is below this
    NEAR = 1e-3

    def __init__(self, problem: Problem, t: _Tenants, options: PolicyOptions):
        self.problem, self.t = problem, t
        self.cm = ClassLP(problem, "oef_climb", t.classes, options)
        self.dev = {(u, k): self.cm.add_col() for u in t.names for k in problem.types}
        self.cm.set_objective(self.cm.efficiency())
        self.si_rows = {u: self.cm.add_row(self.cm.utility(u), t.si[u], INF) for u in t.names}
        self.base = len(self.cm.lp.rows)
        self.solves = 0

    def _solve(self) -> None:
        self.cm.solve()
        self.solves += 1

    def step(self, X: ClassX) -> dict[int, dict[str, float]]:
        """One linearisation: max E s.t. capacity, demand, SI and the EF cuts taken at ``X``."""
        t, cm = self.t, self.cm
        cm.lp.truncate(self.base)
        util = _utilities(t.classes, X)
        for u in t.names:
            # X is SI (up to eps): keep it feasible despite round-off; the answer is re-verified
            si = min(t.si[u], util.get(u, 0.0))
            cm.lp.set_row_bounds(self.si_rows[u], si - fairness.slack(si), INF)
        bundles = _bundles(t.classes, X, self.problem.types)
        cuts = []
        for (u, v), cert in t.envy_certificates(X).items():
            scale = t.weight[u] / t.weight[v]
            const = sum(c.count * cert.q.get(c.key, 0.0) for c in t.mine[u])
            # the cut is tight at X up to solver round-off; never let round-off cut X itself off
            # (X is verified SI+EF, so this moves the bound by round-off only): the constant is
            # at most the cut's value at X, less slack (eps/10; the answer is checked with eps)
            at_x = util.get(u, 0.0) - scale * sum(cert.p.get(k, 0.0) * y for k, y in bundles[v].items())
            const = min(const, at_x)
            const -= fairness.slack(cert.value)
            slack = util.get(u, 0.0) - cert.value
            cuts.append((u, v, scale, cert.p, const, slack <= self.NEAR * (1 + util.get(u, 0.0))))
        added = [False] * len(cuts)

        def add(i: int) -> None:
            u, v, scale, p, const, _ = cuts[i]
            terms = dict(cm.utility(u))
            for col, coef in cm.bundle(v, p, scale).items():
                terms[col] = terms.get(col, 0.0) - coef
            cm.add_row(terms, const, INF)
            added[i] = True

        for i, cut in enumerate(cuts):
            if cut[5]:
                add(i)
        while True:
            self._solve()
            X_new = feasible_classes(self.problem, t.classes, cm.values())
            u_new = _utilities(t.classes, X_new)
            b_new = _bundles(t.classes, X_new, self.problem.types)
            late = [i for i, (u, v, scale, p, const, _) in enumerate(cuts) if not added[i]
                    and u_new.get(u, 0.0) - scale * sum(p.get(k, 0.0) * y for k, y in b_new[v].items())
                    < const - 1e-9 * (1 + abs(const))]
            if not late:
                return X_new
            for i in late:
                add(i)

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

    def climb(self, X: ClassX, e: float) -> tuple[ClassX, float, int, str | None]:
        """Iterate the linearised LP from the SI+EF point ``X`` until ``E`` stops improving.

        The last value says why the climb stopped early when a step's solve failed (the last
        verified point is kept): None when it ran to its end."""
        rounds = 0
        for rounds in range(1, MAX_ROUNDS + 1):
            try:
                X_new = self.step(X)
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


def _mix(a: ClassX, b: ClassX, step: float) -> dict[int, dict[str, float]]:
    """``(1 - step) a + step b``, class by class."""
    keys = set(a) | set(b)
    out: dict[int, dict[str, float]] = {}
    for ck in keys:
        ra, rb = a.get(ck, {}), b.get(ck, {})
        out[ck] = {k: (1 - step) * ra.get(k, 0.0) + step * rb.get(k, 0.0) for k in set(ra) | set(rb)}
    return out


def _fair_step(t: _Tenants, a: ClassX, b: ClassX, probes: int = 8) -> float:
    """The largest step in [0, 1] (by bisection) from ``a`` towards ``b`` that stays SI and EF.

    Utilities are linear along the segment and envy ``V_u((w_u/w_v) y_v(s)) - U_u(s)`` is
    concave in ``s`` (V is concave, its argument affine), so the fair steps form an interval
    starting at 0 and bisection finds its end.
    """
    lo, hi = 0.0, 1.0
    for _ in range(probes):
        mid = (lo + hi) / 2
        if t.fair(_mix(a, b, mid)):
            lo = mid
        else:
            hi = mid
    return lo


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
        top = clean(_max_throughput_classes(problem, options, classes))
        e_star = _efficiency(classes, top)
        if t.fair(top):
            info = {"winner": "max-throughput", "candidates": {"max-throughput": "SI+EF+PE"},
                    "ccp_rounds": 0, "pareto_efficient": True, "pareto_gap": 0.0,
                    "efficiency_bound": e_star, "efficiency_ratio": 1.0, "degraded": {}}
            return result(problem, "oef", classes, top, options, started, info)
        tried["max-throughput"] = "not SI+EF"
    except SolverError as exc:
        tried["max-throughput"] = "failed"
        degraded["max-throughput"] = str(exc)
    lp = _Climb(problem, t, options)
    rounds = 0

    def climb(name: str, X: ClassX) -> None:
        """max E s.t. SI+EF (convex-concave) from the fair point X, then a Pareto polish."""
        nonlocal rounds
        X, _, more, why = lp.climb(clean(X), _efficiency(classes, clean(X)))
        rounds += more
        if why is not None:
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

    # 1. the climb from the equal split with best use (always SI+EF; itself a candidate, so a
    #    verified SI+EF point exists whatever fails later)
    consider("equal-split", X0)
    climb("equal-split", X0)
    eq = None
    if not at_bound():
        # 2. gavel-mmf's answer, a candidate when it happens to be SI+EF+PE, and the climb
        #    from it when it is a better fair start
        gm: ClassX | None = None
        try:
            _, gm, _ = _max_min(problem, options, "oef_gavel", agnostic=False)
        except SolverError as exc:
            degraded["gavel-mmf"] = str(exc)
        consider("gavel-mmf", gm)
        if gm is not None and tried["gavel-mmf"].startswith("SI+EF") and _efficiency(classes, clean(gm)) > _efficiency(classes, X0):
            climb("gavel-mmf", gm)
    if not at_bound():
        # 3. the competitive equilibrium from equal incomes (SI, EF and PE by construction)
        #    and the climb from it
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
        if eq is not None and tried["ceei"].startswith("SI+EF") and _efficiency(classes, clean(eq.X)) > _efficiency(classes, X0):
            climb("ceei", eq.X)
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
            "pareto_efficient": pe, "pareto_gap": gap, "efficiency_bound": e_star,
            "efficiency_ratio": None if e_star is None else fairness.efficiency_ratio(e_best, e_star),
            "ceei_spending_error": None if eq is None else eq.error, "degraded": degraded}
    return result(problem, "oef", classes, X, options, started, info)


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
