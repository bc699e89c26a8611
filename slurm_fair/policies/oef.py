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

from .. import fairness
from ..errors import SolverError
from ..jobgroups import groups_of
from ..model import Allocation, Problem
from . import Param, PolicyOptions, register
from . import _inside as inside
from ._lp import fallback_allocation, feasible_classes, result
from ._oef_search import Search
from ._tenants import Tenants, class_bundles


@register("oef", "OEF (cooperative): maximum efficiency subject to sharing incentive, envy-freeness and Pareto "
                 "efficiency between tenants; inside a tenant, its bundle shared by latency-ratio aging",
          dynamic=True, params={
              **inside.params(1.0),
              "improve_s": Param(3.0, 0.0, 86400.0, "seconds the improvement stages (climbs, gavel-mmf) may "
                                 "run after the CEEI (a stage predicted to pass them is not started); the "
                                 "time limit bounds them in any case. In a simulation 30 s, a safety net "
                                 "only: oef.improve_lps binds first, so a run does not depend on the load",
                                 simulated=30.0),
              "improve_lps": Param(3.0, 0.0, 1e9, "the improvement stages' work bound: LP solves (climbs and "
                                   "exact envy LPs) per ordered pair of tenants, counting at least 400 pairs; "
                                   "a count, so the answer and its cost do not depend on the machine's load"),
              "improve_below_classes": Param(400.0, 0.0, 1e12, "the improvement stages are skipped when the "
                                             "price-space CEEI closed on at least this many job classes "
                                             "(measured: they did not change E there)")})
def oef(problem: Problem, options: PolicyOptions) -> Allocation:
    """Two levels (docs/oef.md, "Two levels", :func:`._inside.split`): the tenant-level answer
    (:func:`tenant_level`), then each tenant's bundle shared among its jobs by latency-ratio
    aging."""
    return inside.split("oef", problem, options, tenant_level)


def tenant_level(problem: Problem, options: PolicyOptions) -> Allocation:
    """See the module docstring and docs/oef.md; the stages are :class:`._oef_search.Search`'s.
    A stage whose solve fails is recorded in ``info['degraded']`` and skipped; the answer is
    then the best verified SI+EF+PE candidate, else the best verified SI+EF one
    (``pareto_efficient: false``), and the equal split (status ``fallback``) only when nothing
    could be verified at all."""
    started = time.perf_counter()
    classes = groups_of(problem)
    try:
        t = Tenants(problem, classes)
        X0 = feasible_classes(problem, classes, t.equal_split)
    except SolverError as exc:  # no SI constant, nothing can be verified: the documented fallback
        return fallback_allocation(problem, "oef", exc, started)
    search = Search(problem, options, classes, t, started)
    # 1. the equal split with best use: always SI+EF, so a verified SI+EF point exists whatever
    #    fails later (its PE, an LP over all classes, is checked only if it is the answer)
    search.consider("equal-split", X0, check_pe=False)
    # 2. the competitive equilibrium from equal incomes: SI, EF and PE by construction, the
    #    candidate that keeps oef anytime (one verified SI+EF+PE point early, whatever the size)
    search.ceei()
    # 0. the efficiency bound (an LP as large as the problem, so after the anytime point): when
    #    the most efficient allocation is already SI and EF it is the answer (E = E*, and it is
    #    Pareto-efficient by construction)
    top = search.max_e()
    if top is not None:
        info = {"winner": "max-throughput", "candidates": {**search.tried, "max-throughput": "SI+EF+PE"},
                "ccp_rounds": 0, "pareto_efficient": True, "pareto_gap": 0.0, "efficiency_ratio": 1.0,
                "time_limit_s": options.time_limit_s, "skipped_for_time": search.skipped,
                "ceei_price": search.price_info, "degraded": search.degraded}
        return result(problem, "oef", classes, top, options, started, info, efficiency_bound=search.e_star)
    # 3. improvement stages while time is left
    search.improve(X0)
    return search.answer()


# --- non-cooperative ------------------------------------------------------------------------


@register("oef-noncoop", "OEF non-cooperative: strategy-proof, SI; bundles fixed before reports are used",
          params=inside.params(0.0))
def oef_noncoop(problem: Problem, options: PolicyOptions) -> Allocation:
    """Non-cooperative OEF; with ``oef-noncoop.inside=1``, in two levels (:func:`._inside.split`)."""
    return inside.split("oef-noncoop", problem, options, _oef_noncoop)


def _oef_noncoop(problem: Problem, options: PolicyOptions) -> Allocation:
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
