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
from dataclasses import replace

from .. import fairness
from ..errors import SolverError
from ..jobgroups import groups_of
from ..model import Allocation, Problem
from . import Param, PolicyOptions, register
from . import _inside as inside
from ._ceei import ceei
from ._climb import Climb
from ._lp import (equal_split_classes, fallback_allocation, feasible_classes, max_min_classes,
                  max_throughput_classes, result)
from ._tenants import ClassX, Tenants, class_bundles, class_efficiency, pareto_ok


@register("oef", "OEF (cooperative): maximum efficiency subject to sharing incentive, envy-freeness and Pareto "
                 "efficiency between tenants; inside a tenant, its bundle shared by latency-ratio aging",
          dynamic=True, params={
              "inside": Param(1.0, 0.0, 1.0, "1: a tenant's bundle is shared among its jobs by latency-ratio "
                              "aging (two levels); 0: by efficiency alone"),
              "keep_bonus": Param(2.0, 1.0, 100.0, "a running job keeps its GPUs against a waiting job of the "
                                  "same tenant unless the latter's (1 + latency ratio) is this many times its own")})
def oef(problem: Problem, options: PolicyOptions) -> Allocation:
    """Two levels (docs/oef.md, "Two levels"): the tenant-level answer (:func:`tenant_level`,
    memoised in ``options.state`` while the jobs, weights and capacity stay the same, since it
    does not depend on time), then each tenant's bundle shared among its jobs by latency-ratio
    aging (:mod:`._inside`), every round since that depends on the jobs' waits. The answer's
    ``tenant_x`` is the tenant-level allocation: its bundles are what SI, EF and PE are about."""
    started = time.perf_counter()
    key = _tenant_key(problem)
    memo = options.state.get("oef.tenant_level")
    if memo is None or memo[0] != key:
        memo = (key, tenant_level(problem, options))
        options.state["oef.tenant_level"] = memo
    top = memo[1]
    if options.param("oef", "inside") < 0.5 or top.status == "fallback":
        return replace(top, solve_seconds=time.perf_counter() - started)
    x, changed = inside.two_level(problem, top.x, options, options.param("oef", "keep_bonus"))
    return replace(top, x=x, tenant_x=top.x, solve_seconds=time.perf_counter() - started,
                   info={**top.info, "inside": "latency-ratio aging", "inside_tenants": changed})


def _tenant_key(problem: Problem) -> tuple:
    """What the tenant-level answer depends on: jobs (tenant, gang, throughputs), weights, capacity."""
    return (tuple((j.id, j.tenant, j.gpus, j.gpus_per_node, j.max_nodes, tuple(sorted(j.throughput.items())))
                  for j in problem.jobs),
            tuple(sorted(problem.tenants.items())), tuple(sorted(problem.gpu_types.items())), problem.nodes)


def tenant_level(problem: Problem, options: PolicyOptions) -> Allocation:
    """See the module docstring and docs/oef.md. Every candidate is made exactly feasible
    (:func:`~._lp.feasible_classes`) and checked exactly (SI, EF with ``eps``; PE with
    :func:`slurm_fair.fairness.pareto_bound`) before it counts. A stage whose solve fails is
    recorded in ``info['degraded']`` and skipped; the answer is then the best verified
    SI+EF+PE candidate, else the best verified SI+EF one (``pareto_efficient: false``), and the
    equal split (status ``fallback``) only when nothing could be verified at all."""
    started = time.perf_counter()
    deadline = started + options.time_limit_s
    classes = groups_of(problem)
    tried: dict[str, str] = {}
    degraded: dict[str, str] = {}
    try:
        t = Tenants(problem, classes)
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
        e = class_efficiency(classes, X)
        try:
            pe, gap = pareto_ok(problem, t, X)
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
        e_star = class_efficiency(classes, top)
        if t.fair(top):
            info = {"winner": "max-throughput", "candidates": {"max-throughput": "SI+EF+PE"},
                    "ccp_rounds": 0, "pareto_efficient": True, "pareto_gap": 0.0,
                    "efficiency_ratio": 1.0, "degraded": {}}
            return result(problem, "oef", classes, top, options, started, info, efficiency_bound=e_star)
        tried["max-throughput"] = "not SI+EF"
    except SolverError as exc:
        tried["max-throughput"] = "failed"
        degraded["max-throughput"] = str(exc)
    lp = Climb(problem, t, options)
    rounds = 0

    def climb(name: str, X: ClassX) -> None:
        """max E s.t. SI+EF (convex-concave) from the fair point X, then a Pareto polish."""
        nonlocal rounds
        if lp.first_step_seconds(clean(X)) > deadline - time.perf_counter():
            skipped.append(f"ccp from {name} (its first step alone would pass the time limit)")
            return
        X, _, more, why = lp.climb(clean(X), class_efficiency(classes, clean(X)), deadline)
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
            return t.fair(X) and pareto_ok(problem, t, X)[0]
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
    if eq is not None and tried["ceei"].startswith("SI+EF") and class_efficiency(classes, clean(eq.X)) > class_efficiency(classes, X0):
        stages.append(("ccp from ceei", lambda: climb("ceei", eq.X)))
    stages.append(("ccp from equal-split", lambda: climb("equal-split", X0)))

    def gavel() -> None:
        gm: ClassX | None = None
        try:
            _, gm, _ = max_min_classes(problem, options, "oef_gavel", agnostic=False)
        except SolverError as exc:
            degraded["gavel-mmf"] = str(exc)
        consider("gavel-mmf", gm)
        if gm is not None and tried["gavel-mmf"].startswith("SI+EF") and class_efficiency(classes, clean(gm)) > class_efficiency(classes, X0):
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
    classes = groups_of(problem)
    names = problem.active_tenants
    mine = {u: [c for c in classes if c.tenant == u] for u in names}
    types = problem.types
    try:
        share = {u: fairness.equal_share(problem, u) for u in names}
        first = {u: fairness.best_use(mine[u], share[u]) for u in names}
        used = class_bundles(classes, {k: v for u in names for k, v in first[u].z.items()}, types)
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
