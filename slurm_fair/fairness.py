"""docs/fairness.md's measures as pure functions: the one definition policies, reports, the simulator
and the tests agree on.

An allocation is given as ``x[job_id][gpu_type]`` (a mapping, e.g. ``Allocation.x``). Every
function takes the :class:`~slurm_fair.model.Problem` it belongs to. The bundle value
``V_u(b)`` is a small LP; it is solved on job *classes* (identical jobs aggregated, see
:mod:`slurm_fair.jobgroups`) with the fastest solver installed, so the checks stay cheap.

Tolerance everywhere: ``eps(rhs) = 1e-6 * (1 + |rhs|)`` (docs/fairness.md). A constraint built
from a *computed* value (a floor taken from a solution, an EF cut tight at a point, an SI
constant) is relaxed by :func:`slack` (a tenth of ``eps``), so that the point it was taken from
stays feasible under solver round-off, while a point that uses the whole relaxation still passes
the exact checks with ``eps``.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping, Sequence


from .errors import SolverError
from .estimates import runtime
from .grouplp import GroupLP
from .jobgroups import JobGroup, groups_of
from .model import Job, Problem
from .solver import INF

XMap = Mapping[str, Mapping[str, float]]


def eps(rhs: float) -> float:
    """docs/fairness.md's tolerance for a comparison against ``rhs``."""
    return 1e-6 * (1.0 + abs(rhs))


#: the share of ``eps`` that a constraint built from a computed value is relaxed by
SLACK_SHARE = 0.1


def slack(rhs: float) -> float:
    """Round-off allowance of a constraint built from a computed value ``rhs``: ``eps(rhs) / 10``.

    Larger than the solvers' feasibility tolerances (1e-7 absolute for CBC and PuLP's HiGHS,
    1e-9 in the in-process models) and than CBC's printed solution precision (8 significant
    digits), smaller than ``eps`` so the exact checks are unchanged."""
    return SLACK_SHARE * eps(rhs)


# --- sums of an allocation -------------------------------------------------------------------


def job_rates(problem: Problem, x: XMap) -> dict[str, float]:
    """``r_j = sum_k n_jk x_jk``."""
    return {
        j.id: sum(j.normalised(k) * float(v) for k, v in x.get(j.id, {}).items())
        for j in problem.jobs
    }


def tenant_utilities(problem: Problem, x: XMap) -> dict[str, float]:
    """``U_u = sum_{j in u} r_j`` for every active tenant."""
    out = {u: 0.0 for u in problem.active_tenants}
    rates = job_rates(problem, x)
    for j in problem.jobs:
        out[j.tenant] += rates[j.id]
    return out


def tenant_bundles(problem: Problem, x: XMap) -> dict[str, dict[str, float]]:
    """``y_uk = sum_{j in u} g_j x_jk`` (GPUs of each type the tenant holds on average)."""
    out = {u: {k: 0.0 for k in problem.types} for u in problem.active_tenants}
    for j in problem.jobs:
        for k, v in x.get(j.id, {}).items():
            out[j.tenant][k] = out[j.tenant].get(k, 0.0) + j.gpus * float(v)
    return out


def efficiency(problem: Problem, x: XMap) -> float:
    """``E = sum_u U_u``."""
    return sum(tenant_utilities(problem, x).values())


# --- the value of a bundle --------------------------------------------------------------------


@dataclass(frozen=True)
class BestUse:
    """``V_u(b)`` with a certificate.

    ``z[class_key][k]``: the class's total time on ``k`` in an optimal best use;
    ``p[k]`` and ``q[class_key]``: an exactly dual-feasible point of the LP
    (``g_c p_k + q_c >= n_ck``, ``p, q >= 0``), so ``V_u(b') <= p.b' + sum_c m_c q_c`` for
    *every* bundle ``b'`` (weak duality) with equality at ``b`` up to solver tolerance.
    """

    value: float
    z: dict[int, dict[str, float]]
    p: dict[str, float]
    q: dict[int, float]

    def bound(self, bundle: Mapping[str, float], classes: list[JobGroup]) -> float:
        """The dual upper bound ``p.b + sum m_c q_c`` on ``V_u(bundle)``."""
        return sum(self.p.get(k, 0.0) * float(b) for k, b in bundle.items()) + sum(
            c.count * self.q.get(c.key, 0.0) for c in classes
        )


def best_use(
    classes: list[JobGroup], bundle: Mapping[str, float], solver: str | None = None
) -> BestUse:
    """Solve ``V(b) = max sum n_ck z_ck`` s.t. ``sum_c g_c z_ck <= b_k``, ``sum_k z_ck <= m_c``
    (the group LP, :mod:`slurm_fair.grouplp`, with the bundle as capacities).

    ``classes`` are one tenant's job groups. The duals are repaired to be exactly feasible
    (``p`` clipped at 0, ``q_c`` raised to ``max_k n_ck - g_c p_k``), because EF cuts built from
    them must be valid upper bounds, not approximately valid ones.
    """
    types = sorted({k for c in classes for k in c.n if float(bundle.get(k, 0.0)) > 1e-12})
    if not classes or not types:
        p0 = {k: 0.0 for k in bundle}
        q0 = {c.key: max(c.n.values(), default=0.0) for c in classes}
        return BestUse(0.0, {c.key: {} for c in classes}, p0, q0)
    lp = GroupLP(classes, {k: float(bundle[k]) for k in types}, "best_use", types=types,
                 backend=_backend(solver))
    lp.set_objective(lp.efficiency())
    lp.solve()
    p = {k: max(0.0, lp.lp.duals[r]) for k, r in lp.cap_row.items()}
    return _certified(lp, bundle, p, absent_price(classes))


def absent_price(classes: list[JobGroup]) -> dict[str, float]:
    """The price of each type in a best-use certificate when the bundle holds none of it:
    nothing of it is held, so any price >= 0 keeps the bound valid; ``max_c n_ck / g_c`` (the
    largest needed) makes ``q`` independent of the type."""
    types = {k for c in classes for k in c.n}
    return {k: max((c.n.get(k, 0.0) / c.gpus for c in classes), default=0.0) for k in types}


def _certified(lp: GroupLP, bundle: Mapping[str, float], p: dict[str, float],
               absent: Mapping[str, float]) -> BestUse:
    """The :class:`BestUse` of a solved best-use LP: value, ``z`` and the repaired duals
    (``p`` for the types the LP priced, ``absent`` for the others)."""
    for k in bundle:
        if k not in p:
            p[k] = absent.get(k, 0.0)
    q = {c.key: max([0.0] + [c.n[k] - c.gpus * p.get(k, 0.0) for k in c.n]) for c in lp.classes}
    zval: dict[int, dict[str, float]] = {c.key: {} for c in lp.classes}
    value = 0.0
    for (ck, k), v in zip(lp.cols, lp.lp.x):
        if v > 1e-12:
            zval[ck][k] = v
        value += lp.n[ck][k] * v
    return BestUse(value, zval, p, q)


def _backend(solver: str | None) -> str | None:
    """The :class:`~slurm_fair.solver.SmallLP` backend of a ``solver`` argument (None: the fastest)."""
    return None if solver in (None, "auto", "highs") else solver


class BestUseModel:
    """``V_u(b)`` for one tenant's classes and many bundles: one group LP (every type some class
    can use) whose capacity bounds change between solves, so each value after the first is a
    warm re-solve. Same answer and certificate as :func:`best_use` (types absent from the
    bundle priced by :func:`absent_price`)."""

    def __init__(self, classes: list[JobGroup], types: list[str], solver: str | None = None):
        self.classes = classes
        self.types = [k for k in types if any(c.n.get(k, 0.0) > 0 for c in classes)]
        self.lp = GroupLP(classes, {k: 0.0 for k in self.types}, "best_use", types=self.types,
                          backend=_backend(solver))
        self.lp.set_objective(self.lp.efficiency())
        self.absent = absent_price(classes)

    def __call__(self, bundle: Mapping[str, float]) -> BestUse:
        held = {k: float(bundle.get(k, 0.0)) for k in self.types}
        if not self.classes or not any(v > 1e-12 for v in held.values()):
            return best_use(self.classes, bundle)
        rows = self.lp.cap_row
        for k in self.types:
            b = held[k] if held[k] > 1e-12 else 0.0
            if self.lp.lp.rows[rows[k]][3] != b:
                self.lp.lp.set_row_bounds(rows[k], -INF, b)
        self.lp.solve()
        p = {k: (max(0.0, self.lp.lp.duals[rows[k]]) if held[k] > 1e-12 else self.absent[k]) for k in self.types}
        return _certified(self.lp, bundle, p, self.absent)


def bundle_value(problem: Problem, tenant: str, bundle: Mapping[str, float]) -> float:
    """``V_u(b)``: the best tenant ``u``'s own jobs can do with bundle ``b``."""
    return best_use(groups_of(problem, problem.jobs_of(tenant)), bundle).value


def equal_share(problem: Problem, tenant: str) -> dict[str, float]:
    """The weighted equal share ``(w_u / W) * C`` of ``tenant`` (active tenants only in W)."""
    total = sum(problem.weight(u) for u in problem.active_tenants)
    return weighted_share(problem.weight(tenant), total, problem.gpu_types)


def weighted_share(w_u: float, total_w: float, capacity: Mapping[str, float]) -> dict[str, float]:
    """``(w_u / W) * C``: the bundle SI compares a tenant's utility with (``W = total_w``, the
    weights of the tenants taking part). Reports call it with a slice's GPU-hours as ``C``."""
    share = w_u / total_w if total_w > 0 else 0.0
    return {k: share * float(c) for k, c in capacity.items()}


def envied_bundle(w_u: float, w_v: float, bundle_v: Mapping[str, float]) -> dict[str, float]:
    """``(w_u / w_v) * y_v``: tenant ``v``'s bundle as EF lets ``u`` claim it (weights scale it)."""
    scale = w_u / w_v
    return {k: scale * float(y) for k, y in bundle_v.items()}


# --- the properties -------------------------------------------------------------------------

#: ``V_u(b)`` as a function of tenant and bundle; the checks below take one so that a caller
#: valuing many allocations of the same jobs (the simulator) can pass a memoised one
Valuer = Callable[[str, Mapping[str, float]], float]


def valuer(problem: Problem) -> Valuer:
    """``V_u(b)`` of ``problem``'s tenants, each tenant's job groups built once."""
    classes = {u: groups_of(problem, problem.jobs_of(u)) for u in problem.active_tenants}
    return lambda u, bundle: best_use(classes[u], bundle).value


def _si_gaps(problem: Problem, x: XMap, value: Valuer | None) -> Iterator[tuple[str, float, float]]:
    """``(u, V_u(equal share) - U_u, U_u)`` tenant after tenant, computed lazily."""
    value = value or valuer(problem)
    utilities = tenant_utilities(problem, x)
    for u in problem.active_tenants:
        yield u, value(u, equal_share(problem, u)) - utilities[u], utilities[u]


def sharing_incentive_gaps(problem: Problem, x: XMap, value: Valuer | None = None) -> dict[str, float]:
    """``V_u(equal share) - U_u`` per tenant (SI holds where this is <= eps)."""
    return {u: gap for u, gap, _ in _si_gaps(problem, x, value)}


def is_sharing_incentive(problem: Problem, x: XMap, value: Valuer | None = None) -> bool:
    """SI with tolerance ``eps`` (stops at the first tenant below its equal share's value)."""
    return all(gap <= eps(util + gap) for _, gap, util in _si_gaps(problem, x, value))


def _envies(problem: Problem, x: XMap, value: Valuer | None) -> Iterator[tuple[str, str, float, float]]:
    """``(u, v, V_u((w_u/w_v) y_v) - U_u, U_u)`` pair after pair, computed lazily."""
    value = value or valuer(problem)
    utilities = tenant_utilities(problem, x)
    bundles = tenant_bundles(problem, x)
    for u in problem.active_tenants:
        for v in problem.active_tenants:
            if u != v:
                b = envied_bundle(problem.weight(u), problem.weight(v), bundles[v])
                yield u, v, value(u, b) - utilities[u], utilities[u]


def envy(problem: Problem, x: XMap, value: Valuer | None = None) -> dict[tuple[str, str], float]:
    """``V_u((w_u/w_v) y_v) - U_u`` for every ordered pair ``u != v`` (> eps means u envies v)."""
    return {(u, v): e for u, v, e, _ in _envies(problem, x, value)}


def is_envy_free(problem: Problem, x: XMap, value: Valuer | None = None) -> bool:
    """EF with tolerance ``eps`` (stops at the first envious pair)."""
    return all(e <= eps(util + e) for _, _, e, util in _envies(problem, x, value))


def beyond(gap: float, value: float, rel: float) -> bool:
    """Whether a shortfall ``gap = V - U`` against the value ``V`` a property promises passes
    the relative tolerance ``rel`` (the two levels' ``inside_eps``: ``U >= (1 - rel) V``) and
    :func:`eps` (``rel = 0``: the exact checks above)."""
    return gap > rel * value + eps(value)


def si_shortfalls(problem: Problem, x: XMap, rel: float = 0.0, value: Valuer | None = None) -> dict[str, float]:
    """The tenants below ``(1 - rel)`` of their sharing incentive -> ``U_u / V_u(equal share)``."""
    out = {}
    for u, gap, util in _si_gaps(problem, x, value):
        if beyond(gap, util + gap, rel):
            out[u] = util / (util + gap) if util + gap > 0 else 0.0
    return out


def envy_beyond(problem: Problem, x: XMap, rel: float = 0.0,
                value: Valuer | None = None) -> dict[tuple[str, str], float]:
    """The pairs where ``u`` envies ``v`` by more than ``rel`` of the envied value -> ``U_u /
    V_u((w_u/w_v) y_v)``."""
    out = {}
    for u, v, e, util in _envies(problem, x, value):
        if beyond(e, util + e, rel):
            out[(u, v)] = util / (util + e) if util + e > 0 else 0.0
    return out


def pareto_gap(problem: Problem, x: XMap) -> float:
    """How much more total utility a feasible allocation could reach while giving every tenant
    at least its ``U_u``: ``max {E' : U'_u >= U_u} - E`` (0 when ``x`` is Pareto-efficient).

    Computed as :func:`pareto_bound` (an upper bound robust to round-off in ``x``)."""
    utilities = tenant_utilities(problem, x)
    best = pareto_bound(problem, groups_of(problem), utilities)
    return max(0.0, best - sum(utilities.values()))


def pareto_gap_within(problem: Problem, x: XMap, rel: float) -> float:
    """:func:`pareto_gap` of the utilities of ``x`` raised by ``1 / (1 - rel)``: how much more
    than ``sum_u U_u / (1 - rel)`` a feasible allocation can reach while giving every tenant at
    least ``U_u / (1 - rel)`` (0 also when none can: ``x`` is Pareto-efficient within ``rel``,
    no allocation improves every tenant by that factor). ``rel = 0``: :func:`pareto_gap`."""
    raised = {u: v / (1.0 - rel) for u, v in tenant_utilities(problem, x).items()}
    try:
        best = pareto_bound(problem, groups_of(problem), raised)
    except SolverError:
        return 0.0
    return max(0.0, best - sum(raised.values()))


def is_pareto_efficient(problem: Problem, x: XMap) -> bool:
    e = efficiency(problem, x)
    return pareto_gap(problem, x) <= eps(e)


def efficiency_bound(problem: Problem) -> float:
    """``E*``: the maximum efficiency over all feasible allocations."""
    return _max_efficiency(problem, floors=None)


def si_bound(problem: Problem) -> float:
    """``E_SI``: the maximum efficiency over sharing-incentive allocations (every tenant at least
    ``V_u((w_u/W) C)``), the bound that SI alone leaves; an SI+EF policy is judged against it
    (``E* >= E_SI >= max E over SI+EF``)."""
    floors = {u: bundle_value(problem, u, equal_share(problem, u)) for u in problem.active_tenants}
    return _max_efficiency(problem, floors)


def _max_efficiency(problem: Problem, floors: Mapping[str, float] | None) -> float:
    """max E over feasible allocations, optionally with ``U_u >= floors[u]`` (a group LP)."""
    return max_efficiency_classes(problem, groups_of(problem), floors)[0]


def pareto_bound(
    problem: Problem, classes: list[JobGroup], floors: Mapping[str, float], solver: str | None = None,
) -> float:
    """An upper bound on ``v(f) = max {E : U_u >= f_u}`` that round-off cannot make infeasible.

    The floors usually come from a computed allocation, which solver round-off (CBC prints 8
    significant digits) can leave a hair outside the feasible set, so ``v(f)`` itself may be
    infeasible by 1e-8. The LP is solved with every floor relaxed by ``r_u = slack(f_u)``; ``v``
    is concave in ``f`` and ``-mu`` (``mu >= 0`` the floor rows' duals) is a supergradient at
    ``f - r``, so ``v(f) <= v(f - r) - sum_u mu_u r_u``: the bound returned. It is what the PE
    check compares with ``E + eps``."""
    value, _, correction = _max_efficiency_lp(problem, classes, floors, solver)
    return value - correction


def max_efficiency_classes(
    problem: Problem, classes: list[JobGroup], floors: Mapping[str, float] | None = None,
    solver: str | None = None,
) -> tuple[float, dict[int, dict[str, float]]]:
    """``max E`` over class solutions (optionally with ``U_u >= floors[u]``, each floor relaxed
    by :func:`slack` so the allocation that set it stays feasible): the value and a solution."""
    value, X, _ = _max_efficiency_lp(problem, classes, floors, solver)
    return value, X


def _max_efficiency_lp(
    problem: Problem, classes: list[JobGroup], floors: Mapping[str, float] | None, solver: str | None,
) -> tuple[float, dict[int, dict[str, float]], float]:
    """``max E`` (floors relaxed by ``slack``): value, solution and ``sum_u mu_u slack(f_u)``."""
    if not classes:
        return 0.0, {}, 0.0
    lp = GroupLP(classes, {k: float(c) for k, c in problem.gpu_types.items()}, "max_efficiency",
                 backend=_backend(solver))
    if not lp.cols:
        return 0.0, {c.key: {} for c in classes}, 0.0
    lp.set_objective(lp.efficiency())
    relax: dict[str, float] = {}
    rows: dict[str, int] = {}
    if floors:
        tenants = sorted({c.tenant for c in classes})
        relax = {u: slack(float(floors.get(u, 0.0))) for u in tenants}
        rows = lp.add_floors({u: float(floors.get(u, 0.0)) - relax[u] for u in tenants})
    value = lp.solve()
    # a binding >= row of a maximisation has dual <= 0: mu_u = -dual (clipped: never loosen)
    correction = sum(max(0.0, -lp.lp.duals[rows[u]]) * r for u, r in relax.items())
    return value, lp.values(), correction


# --- job-level and over-time measures ------------------------------------------------------


def isolated_time_shares(problem: Problem) -> dict[str, dict[str, float]]:
    """The finish-time-fairness baseline (docs/fairness.md, "isolated baseline"): the time share
    ``z_jk`` every job of ``problem`` would have with its tenant's isolated slice of the cluster.

    ``problem`` holds the jobs in the system at the moment the baseline is taken (reports and the
    simulator: at the job's arrival; gavel-ftf: this cycle). Tenant ``u`` owns ``w_u / W`` of
    every type (``W`` over the tenants with a job in ``problem``), shared equally among its
    ``N_u`` jobs (Gavel's isolated split, by job count): job ``j`` owns ``(w_u / W) C_k / N_u``
    GPUs of each type and uses them as well as a gang of ``g_j`` can, fastest types first
    (``z_jk <= owned_k / g_j``, ``sum_k z_jk <= 1``; :func:`_best_time_shares`)."""
    fraction = _isolated_fractions(problem)
    return {j.id: _best_time_shares(j, fraction[j.tenant], problem.gpu_types) for j in problem.jobs}


def _isolated_fractions(problem: Problem) -> dict[str, float]:
    """``(w_u / W) / N_u`` per tenant with a job in ``problem``: the part of every type's GPUs
    each of its jobs owns in isolation."""
    count: dict[str, int] = {}
    for j in problem.jobs:
        count[j.tenant] = count.get(j.tenant, 0) + 1
    return isolated_fractions(count, {u: problem.weight(u) for u in count})


def isolated_fractions(count: Mapping[str, int], weight: Mapping[str, float]) -> dict[str, float]:
    """``(w_u / W) / N_u`` per tenant from ``count[u]`` = N_u (jobs in the system, > 0) and the
    tenants' weights: what :func:`_isolated_fractions` computes from a problem, for callers that
    keep the counts as jobs come and go (:func:`rhos_at_arrival` over a long history)."""
    total = sum(weight[u] for u in count)
    return {u: weight[u] / total / n for u, n in count.items()}


def _best_time_shares(job: Job, fraction: float, capacity: Mapping[str, int]) -> dict[str, float]:
    """The best use of ``fraction * C_k`` GPUs of every type by ``job``'s gang: time fractions
    ``z_k <= fraction * C_k / g_j`` filled fastest type first until they sum to 1 (a fractional
    knapsack; types the job cannot use get nothing)."""
    left, out = 1.0, {}
    for k in sorted(job.throughput, key=lambda k: (-job.throughput[k], k)):
        if left <= 0 or job.throughput[k] <= 0:
            continue
        z = min(left, fraction * float(capacity.get(k, 0)) / job.gpus)
        if z > 0:
            out[k] = z
            left -= z
    return out


def isolated_throughputs(problem: Problem) -> dict[str, float]:
    """``thr_j^iso = sum_k T_jk z_jk`` under :func:`isolated_time_shares` (work units per second)."""
    jobs = {j.id: j for j in problem.jobs}
    return {jid: sum(jobs[jid].throughput[k] * z for k, z in s.items())
            for jid, s in isolated_time_shares(problem).items()}


def isolated_jct(problem: Problem, job_id: str, work: float) -> float | None:
    """``JCT_iso = work / thr_j^iso`` of job ``job_id`` in ``problem`` (the jobs in the system at
    its arrival, itself included); None when its isolated share is worth nothing to it."""
    job = next(j for j in problem.jobs if j.id == job_id)
    shares = _best_time_shares(job, _isolated_fractions(problem)[job.tenant], problem.gpu_types)
    rate = sum(job.throughput[k] * z for k, z in shares.items())
    return work / rate if rate > 0 else None


@dataclass(frozen=True)
class JobSpan:
    """A job's life as the per-job measures see it (simulator records and sacct records alike):
    ``work`` in the units of ``throughput`` (steps and steps/s, or seconds on its fastest type
    and ``n_jk``); ``end_s`` None while it has not ended (in the system from then on)."""

    id: str
    tenant: str
    weight: float
    gpus: int
    throughput: Mapping[str, float]
    arrival_s: float
    end_s: float | None
    work: float | None


def rhos_at_arrival(spans: Sequence[JobSpan], capacity: Mapping[str, int]) -> dict[str, float]:
    """``rho_j = JCT_j / JCT_j^iso`` of every ended job with a known baseline, ``JCT_iso``
    (:func:`isolated_jct`) taken over the jobs in the system at its arrival (arrived, not ended;
    itself included) and frozen from then on (Gavel's snapshot idea). The one definition the
    simulator's metrics, the report and ``testbed replay`` use.

    Computed in one sweep over arrivals (counts per tenant of the jobs in the system, updated as
    jobs arrive and end): ``JCT_iso`` needs only its tenant's weight over the present tenants'
    and its tenant's count (:func:`isolated_fractions`), so a history of 100,000 jobs costs
    ``O(n log n)``, not a problem of every present job per job."""
    order = sorted(spans, key=lambda s: s.arrival_s)
    ends: list[tuple[float, int]] = []  # (end, index in order) of the jobs present
    count: dict[str, int] = {}
    weight: dict[str, float] = {}
    out: dict[str, float] = {}
    i = 0
    while i < len(order):
        t = order[i].arrival_s
        group = []
        while i < len(order) and order[i].arrival_s == t:
            p = order[i]
            group.append(p)
            count[p.tenant] = count.get(p.tenant, 0) + 1
            weight[p.tenant] = p.weight
            if p.end_s is not None:
                heapq.heappush(ends, (p.end_s, i))
            i += 1
        gone: list[JobSpan] = []
        while ends and ends[0][0] <= t:
            p = order[heapq.heappop(ends)[1]]
            gone.append(p)
            count[p.tenant] -= 1
            if not count[p.tenant]:
                del count[p.tenant]
        for s in group:
            if s.end_s is None or not s.work or not s.throughput:
                continue
            mine = dict(count)
            if any(g is s for g in gone):  # itself included even when it ended at its arrival
                mine[s.tenant] = mine.get(s.tenant, 0) + 1
            fraction = isolated_fractions(mine, weight)[s.tenant]
            shares = _best_time_shares(Job(s.id, s.tenant, s.gpus, s.throughput), fraction, capacity)
            rate = sum(s.throughput[k] * z for k, z in shares.items())
            if rate > 0:
                out[s.id] = ftf_rho(s.end_s - s.arrival_s, s.work / rate)
    return out


def wait_s(jct_s: float, ran_s: float) -> float:
    """Hops' wait ``W``: time in the system not running (``JCT - time run``, at least 0)."""
    return max(0.0, jct_s - ran_s)


#: the goals' "worst latency ratio" counts jobs of at least one round (Gavel's 360 s): a job of
#: seconds that waited one round has an LR of hundreds that says nothing about starvation
LR_MIN_AGE_S = 360.0


def worst_latency_ratio(pairs: Iterable[tuple[float, float]], min_age_s: float = 0.0) -> float | None:
    """The largest ``LR = W / A`` over ``(wait, age)`` pairs whose age is at least ``min_age_s``
    (the goals count jobs of at least one round: a job of seconds that waited one round has an
    LR of hundreds that says nothing about starvation); None when there is none."""
    lrs = [latency_ratio(w, a) for w, a in pairs if a >= min_age_s]
    return max(lrs) if lrs else None


def ftf_rho(jct_s: float, isolated_jct_s: float) -> float:
    """Finish-time fairness ``rho = JCT / JCT_iso`` (< 1: better than its isolated share)."""
    return jct_s / isolated_jct_s if isolated_jct_s > 0 else float("inf")


def slowdown(jct_s: float, alone_s: float) -> float:
    """A job's JCT over its run time alone on its fastest type (inf when ``alone_s`` is 0)."""
    return jct_s / alone_s if alone_s > 0 else float("inf")


def age_s(work: float, throughput: Mapping[str, float], capacity: Mapping[str, int]) -> float:
    """Hops' age ``A`` (Eq. 9): the job's predicted run time without waiting, averaged over the
    GPU types by their share of the GPUs, ``sum_k (C_k / C) work / T_jk`` (``T_jk`` the rate of
    the whole gang). Only the types the job can run on count (``C`` sums their GPUs): a type
    where it cannot run has no run time to average. inf when it can run nowhere."""
    usable = {k: float(c) for k, c in capacity.items() if c > 0 and throughput.get(k, 0.0) > 0}
    total = sum(usable.values())
    if total <= 0:
        return float("inf")
    return sum(c / total * work / float(throughput[k]) for k, c in usable.items())


def known_remaining(job: Job) -> float | None:
    """The work a policy may believe ``job`` has left, in its throughput's units: the one home of
    "a job's size as a site knows it" (docs/oef.md, "Only what a site knows"). Its
    ``remaining_work`` where the caller knows it (a tagged job, the simulator with ``--knowledge
    oracle``), else the run time its time limit and its group's history predict
    (:func:`slurm_fair.estimates.runtime.expected_run_s` of ``extra['time_limit_s']`` and the
    finished runs' use ratios ``extra['run_ratios']``; the limit alone without them) less the
    time it ran, at its fastest believed rate, as the controller reads Slurm's ``TimeLimit`` and
    the accounting; None when neither is given. Every policy and the simulator's gang reservation
    read sizes through this, never the simulator's true remaining work
    (``tests/sim/test_knowledge_sizes.py``)."""
    if job.remaining_work is not None:
        return float(job.remaining_work)
    limit = job.extra.get("time_limit_s")
    if isinstance(limit, (int, float)) and limit > 0 and job.best_throughput > 0:
        ratios = job.extra.get(runtime.EXTRA_KEY)
        total = runtime.expected_run_s(float(limit), float(job.attained_s),
                                       ratios if isinstance(ratios, tuple) else ())
        return max(0.0, total - float(job.attained_s)) * job.best_throughput
    return None


def predicted_run_s_at(job: Job, q: float) -> float | None:
    """The ``q`` quantile of the run time a site predicts for ``job`` (seconds at its best
    rate, the time it ran included: :func:`slurm_fair.estimates.runtime.run_s_at` of its time
    limit and its group's finished runs), the spread around :func:`known_remaining`'s estimate;
    None when the size is not a prediction (``remaining_work`` known, or no time limit)."""
    if job.remaining_work is not None:
        return None
    limit = job.extra.get("time_limit_s")
    if not (isinstance(limit, (int, float)) and limit > 0 and job.best_throughput > 0):
        return None
    ratios = job.extra.get(runtime.EXTRA_KEY)
    return runtime.run_s_at(float(limit), float(job.attained_s), ratios if isinstance(ratios, tuple) else (), q)


def known_remaining_s(job: Job) -> float | None:
    """:func:`known_remaining` in seconds at the job's best (believed) rate; None when unknown."""
    rem = known_remaining(job)
    best = job.best_throughput
    return max(0.0, rem) / best if rem is not None and best > 0 else None


def known_age(job: Job, capacity: Mapping[str, int]) -> float | None:
    """Hops' age of ``job`` as a site knows it: the time it ran plus :func:`age_s` of its
    :func:`known_remaining` work; None when its size is unknown."""
    rem = known_remaining(job)
    if rem is None:
        return None
    return float(job.attained_s) + age_s(rem, job.throughput, capacity)


def latency_ratio(wait_s: float, age: float) -> float:
    """Hops' latency ratio ``LR = W / A`` (Eqs. 6, 8): time spent waiting over the age
    (:func:`age_s`). 0 for a job that never waited; inf for a job that waited with no age."""
    if wait_s <= 0:
        return 0.0
    return wait_s / age if age > 0 else float("inf")


def overdue_ratio(waited_s: float, age: float | None, round_s: float, bound: float | None) -> float | None:
    """The wait bound of gang reservation, one rule for the simulator and the controller: a
    waiting job is *overdue* once it waited at least a round and at least ``bound`` times its
    age (its latency ratio passed ``bound``); returns that latency ratio, None when it is not
    overdue (no bound, or no finite positive age: a job whose run time nobody can predict)."""
    if bound is None or age is None or not 0 < age < float("inf"):
        return None
    if waited_s < round_s or waited_s < bound * age:
        return None
    return latency_ratio(waited_s, age)


def efficiency_ratio(e: float, e_star: float) -> float:
    """``E / E*`` (1.0 when nothing can run at all)."""
    return e / e_star if e_star > 0 else 1.0
