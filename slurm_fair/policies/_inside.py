"""Two levels: a tenant-level allocation's bundles shared among each tenant's jobs by
latency-ratio aging, within a floor that keeps the tenant's value.

Why (docs/oef.md, "Two levels"): a tenant-level policy that maximises efficiency also gives a
tenant's bundle to the jobs that use it best; a job that is slow per GPU, or a gang, gets
nothing for as long as faster jobs of its tenant keep arriving. Inside the bundle ``y_u`` of
tenant ``u`` (``y_uk = sum_j g_j x_jk`` of the tenant-level answer) this step instead maximises
``sum_j p_j r_j`` with ``p_j`` growing with the job's latency ratio so far (:func:`priority`),
subject to ``sum_j g_j x_jk <= y_uk``, ``sum_k x_jk <= 1`` and ``sum_j r_j >= (1 - eps)
V_u(y_u)`` (``<policy>.inside_eps``), after the jobs whose turn has come (:func:`turns`) took
what they can.

What stays (issue 39; proof in docs/oef.md, "Keeping the tenant's value"): every tenant holds
at most the GPUs of its tenant-level bundle and, unless one of its jobs took its turn, its
jobs together get at least ``(1 - eps)`` of that bundle's best use, so the jobs' allocation
``x`` is SI and EF within ``eps`` and no allocation improves every tenant by ``1 / (1 - eps)``,
checked on ``x`` itself by :func:`slurm_fair.fairness.si_shortfalls`, ``envy_beyond`` and
``pareto_gap_within``; the tenant level (``Allocation.tenant_x``) stays exactly SI, EF and PE.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Container, Mapping, MutableMapping

from .. import fairness
from ..errors import SolverError
from ..grouplp import GroupLP
from ..jobgroups import JobGroup, normalised_vector
from ..model import Allocation, Job, Problem
from . import Param, PolicyOptions

XMap = Mapping[str, Mapping[str, float]]


#: a running job's priority is this many times its own (``<policy>.keep_bonus``'s default)
KEEP_BONUS = 1.25
#: the finish-time ratio's weight against the latency ratio (``<policy>.rho_weight``'s default)
RHO_WEIGHT = 1.5
#: a tenant's jobs get at least ``1 - INSIDE_EPS`` of its bundle's best use (``<policy>.inside_eps``)
INSIDE_EPS = 0.01
#: a waiting job past this latency ratio takes its turn first (``<policy>.turn_after_lr``; chosen
#: on the Philly trace of bench_starvation against 2, docs/results.md: twice the bound of the
#: simulator's gang reservation, which then finds the turned gang its nodes)
TURN_AFTER_LR = 4.0
#: the quantile of a predicted run time (a size that is a band: the time limit and the group's
#: history, :func:`slurm_fair.fairness.predicted_run_s_at`) at which the finish-time ratio is
#: also taken: a job that may be short ages as one. 0: the shortest past run still going, the
#: upper end of the ``rho`` the band allows (chosen on the Philly trace, checked on fresh draws:
#: docs/results.md, "Untagged: a size that is a band"); 0.5 or more: the size estimate alone
SIZE_QUANTILE = 0.0
#: the policy state key of each job's predicted run time when first seen (the size its
#: isolated JCT was taken for)
ISO_RUN = "oef.iso_run_s"
#: a tenant's most overdue waiting job takes its turn once its latency ratio passes this
#: (``<policy>.turn_first_lr``; 0 turns it off)
TURN_FIRST_LR = 0.0
#: a job taking its turn runs only on the types where its rate is at least this fraction of
#: its best (``<policy>.turn_min_speed``; 0: any type, the default). The value floor does not
#: bind turned jobs, so a turn may start a gang on a type ten times slower than its best; at
#: 0.5 the bound shortened one run of the five it was tuned on and lengthened three, so it is
#: off (docs/oef.md, "A turn on a type where the job runs")
TURN_MIN_SPEED = 0.0


def remaining(job: Job) -> float | None:
    """The work the policy believes ``job`` has left: :func:`slurm_fair.fairness.known_remaining`
    (its ``remaining_work`` where known, else what its time limit leaves), all a site knows of
    a job's size (docs/oef.md, "Only what a site knows")."""
    return fairness.known_remaining(job)


def age(problem: Problem, job: Job) -> float:
    """Hops' age ``A_j``: the time run so far plus :func:`slurm_fair.fairness.age_s` of the
    :func:`remaining` work (only the time run when nothing predicts the rest)."""
    rem = remaining(job)
    ahead = fairness.age_s(rem, job.throughput, problem.gpu_types) if rem is not None else float("inf")
    return float(job.attained_s) + (ahead if ahead < float("inf") else 0.0)


def priority(problem: Problem, job: Job, keep_bonus: float, iso_jct: float | None = None,
             rho_weight: float = RHO_WEIGHT, iso_run_s: float | None = None,
             size_quantile: float | None = None) -> float:
    """Aging: ``g_j max(1 + LR_j, w rho_j)``, times ``keep_bonus`` for a running job.

    ``LR_j = W_j / A_j`` is Hops' latency ratio so far: ``W_j`` the time in the system not run
    (``age_s - attained_s``), ``A_j`` its predicted run time without waiting (:func:`age`).
    ``rho_j`` (when ``iso_jct``, the job's isolated JCT taken when it was first seen, is known)
    is the finish-time ratio it reaches at best, running from now on its fastest type:
    ``(age_s + rem / T_max) / JCT_iso``.
    ``A_j`` averages over the types, so a job much faster on one type has a small ratio while
    its ``rho`` grows: the larger of the two keeps both bounded. ``g_j`` makes the value per GPU
    of a gang equal to a single GPU job's at the same ratio, so a gang is not passed over for
    being a gang. ``w`` (``rho_weight``) weighs the finish-time ratio against the
    latency ratio. ``keep_bonus`` is a margin against swapping two jobs of about equal value:
    a running job is stopped only for a job whose value beats its own by that factor. It is
    not what pays for restarts (:mod:`slurm_fair.hysteresis` does that, in the rounding step):
    a large bonus is a floor on every wait, since a waiting job's value must pass
    ``keep_bonus`` times a running job's before it gets a GPU of its tenant (docs/oef.md).

    When the size is a prediction (``iso_run_s``: the run time predicted when the job was first
    seen, for which ``iso_jct`` was taken), ``rho_j`` is also taken at the ``size_quantile`` of
    the predicted run time ``S_q`` (:data:`SIZE_QUANTILE` unless given) (:func:`slurm_fair.fairness.predicted_run_s_at`), its
    baseline scaled with it: ``(age_s + S_q - attained) / (iso_jct S_q / iso_run_s)``, the
    larger of the two counting. A job whose group's runs are sometimes short is late sooner, as
    it would be if it is one of them (docs/oef.md, "A size that is a band")."""
    waited = max(0.0, float(job.age_s or 0.0) - float(job.attained_s))
    value = 1.0 + waited / max(age(problem, job), 1.0)
    rem = remaining(job)
    if iso_jct and rem is not None and job.best_throughput > 0:
        value = max(value, rho_weight * (float(job.age_s or 0.0) + rem / job.best_throughput) / iso_jct)
        q = SIZE_QUANTILE if size_quantile is None else size_quantile
        short = fairness.predicted_run_s_at(job, q) if iso_run_s and q < 0.5 else None
        if short is not None and short > 0 and iso_run_s:
            ahead = max(0.0, short - float(job.attained_s))
            value = max(value, rho_weight * (float(job.age_s or 0.0) + ahead) / (iso_jct * short / iso_run_s))
    return job.gpus * value * (keep_bonus if job.prev_type else 1.0)


def isolated_jcts(problem: Problem, state: MutableMapping[str, Any]) -> dict[str, float]:
    """Each job's isolated JCT (:func:`slurm_fair.fairness.isolated_jct` of its remaining work)
    taken the first time the policy sees it, kept in the policy state (``oef.iso_jct``) as the
    finish-time baseline the metrics take at arrival; jobs gone are dropped."""
    memo: dict[str, float] = state.setdefault("oef.iso_jct", {})
    runs: dict[str, float] = state.setdefault(ISO_RUN, {})
    ids = {j.id for j in problem.jobs}
    for book in (memo, runs):
        for jid in [j for j in book if j not in ids]:
            del book[jid]
    for j in problem.jobs:
        rem = remaining(j)
        if j.id not in memo and rem is not None:
            memo[j.id] = fairness.isolated_jct(problem, j.id, rem) or 0.0
            if fairness.predicted_run_s_at(j, 0.5) is not None:  # a predicted size
                runs[j.id] = float(j.attained_s) + rem / j.best_throughput
    return memo


def turns(problem: Problem, jobs: list[Job], bound: float | None, seen: Container[str] = (),
          round_s: float = 0.0, first_lr: float | None = None) -> set[str]:
    """The jobs of ``jobs`` whose turn has come: waiting (not running), seen waiting by an
    earlier decision of the policy (``seen``: a turn is a promise over rounds, made where the
    policy state persists, by the simulator and the controller; a one-shot ``solve`` gives
    none), and past the wait bound of :func:`slurm_fair.fairness.overdue_ratio` (waited a round
    and ``bound`` times the age :func:`age` predicts), the rule the rounding step's gang
    reservation uses. A job whose run time nobody can predict (no time limit, no work) has no
    turn: :func:`share_bundle` orders it by aging inside the tenant's value like any other.

    With ``first_lr``, the most overdue of these waiting jobs (highest latency ratio so far,
    :func:`slurm_fair.fairness.overdue_ratio` with ``first_lr`` as its bound) also has its turn,
    whatever ``bound``: inside a tenant the worst-off job goes first, as Hops' latency-ratio
    fairness orders its queue, instead of only once it is ``bound`` times late (a gang would
    otherwise wait there behind a queue of smaller jobs, whose GPUs are worth more to the value
    floor; docs/oef.md, "Turns")."""
    out = set()
    worst: tuple[float, str] | None = None
    for j in jobs:
        if j.prev_type or j.id not in seen:
            continue
        waited = fairness.wait_s(float(j.age_s or 0.0), float(j.attained_s))
        a = age(problem, j)
        if bound and fairness.overdue_ratio(waited, a, round_s, bound) is not None:
            out.add(j.id)
        lr = fairness.overdue_ratio(waited, a, round_s, first_lr) if first_lr else None
        if lr is not None and (worst is None or (lr, j.id) > worst):
            worst = (lr, j.id)
    if worst is not None:
        out.add(worst[1])
    return out


def share_bundle(problem: Problem, tenant: str, x: XMap, options: PolicyOptions, keep_bonus: float,
                 rho_weight: float, iso: Mapping[str, float], inside_eps: float = INSIDE_EPS,
                 turn_after_lr: float | None = None, seen: Container[str] = (),
                 turn_first_lr: float | None = None,
                 turn_min_speed: float = TURN_MIN_SPEED) -> tuple[dict[str, dict[str, float]], bool, list[str]]:
    """Tenant ``tenant``'s jobs' shares of its bundle ``y_u`` in ``x`` (module docstring):
    first the jobs whose turn has come (:func:`turns`) take what they can of it, highest
    priority first, each only on the types where its rate is at least ``turn_min_speed`` of its
    best (:func:`runnable_types`); the others then share the rest ``y'`` by ``max sum_j p_j r_j`` (``p_j``
    :func:`priority`, ``r_j`` the job's normalised rate) subject to ``sum_j r_j >= (1 - eps)
    V_u(y')``, the floor that keeps the tenant's value (docs/oef.md, "Two levels"). A vertex of
    this LP runs most jobs all the time or not at all, highest priority first among the
    allocations the floor allows. ``(rows, changed, turned)``; the tenant keeps its rows of
    ``x`` when a solve fails."""
    jobs = list(problem.jobs_of(tenant))
    keep = {j.id: dict(x.get(j.id, {})) for j in jobs}
    gpus = {j.id: j.gpus for j in jobs}
    bundle: dict[str, float] = {}
    for jid, row in keep.items():
        for k, v in row.items():
            bundle[k] = bundle.get(k, 0.0) + gpus[jid] * v
    turned = turns(problem, jobs, turn_after_lr, seen, options.round_s or 0.0, turn_first_lr)
    first = [j for j in jobs if j.id in turned]
    rest = [j for j in jobs if j.id not in turned]
    try:
        out = _ordered(problem, tenant, first, bundle, options, keep_bonus, rho_weight, iso, None,
                       turn_min_speed)
        used = {k: sum(gpus[jid] * row.get(k, 0.0) for jid, row in out.items()) for k in bundle}
        left = {k: max(0.0, b - used.get(k, 0.0)) for k, b in bundle.items()}
        out.update(_ordered(problem, tenant, rest, left, options, keep_bonus, rho_weight, iso, inside_eps))
    except SolverError:
        return keep, False, []
    return _within(out, bundle, gpus), True, sorted(turned)


def runnable_types(job: Job, types: list[str], min_speed: float) -> dict[str, float]:
    """``job``'s normalised rates on the types where it runs at least ``min_speed`` times its best
    rate (all the types it can use when ``min_speed`` is 0). Why: a turn exempts a job from its
    tenant's value floor, the one thing that keeps a job off a type where it is slow; a gang
    started there holds its GPUs several times longer than on its best type, and it is those
    GPU-hours, not the wait, that stretch the run (docs/oef.md, "A turn on a type where the job
    runs")."""
    n = normalised_vector(job, types)
    if min_speed <= 0 or not n:
        return n
    top = max(n.values())
    return {k: v for k, v in n.items() if v >= min_speed * top}


def _ordered(problem: Problem, tenant: str, jobs: list[Job], bundle: Mapping[str, float], options: PolicyOptions,
             keep_bonus: float, rho_weight: float, iso: Mapping[str, float],
             inside_eps: float | None, min_speed: float = 0.0) -> dict[str, dict[str, float]]:
    """``jobs``' rows: ``max sum_j p_j r_j`` inside ``bundle``, with ``sum_j r_j >= (1 - eps)
    V(bundle)`` (``V`` the best use by ``jobs``, :func:`slurm_fair.fairness.best_use`) unless
    ``inside_eps`` is None; each job only on the types where it runs at least ``min_speed`` of
    its best rate (:func:`runnable_types`)."""
    types = problem.types
    groups = [JobGroup(i, tenant, j.gpus, runnable_types(j, types, min_speed), (j.id,)) for i, j in enumerate(jobs)]
    held = {k: v for k, v in bundle.items() if v > 1e-12}
    backend = "cbc" if options.resolved_solver == "cbc" else None
    lp = GroupLP(groups, held, f"inside_{tenant}", backend=backend,
                 time_limit_s=options.time_limit_s, keep_lp_dir=options.keep_lp_dir)
    if not lp.cols:
        return {j.id: {} for j in jobs}
    if inside_eps is not None:
        value = fairness.best_use(groups, held, backend).value
        # aimed a round-off margin inside (1 - eps) V, so that the checks with eps pass
        floor = min((1.0 - inside_eps) * value + 10 * fairness.eps(value), value) - fairness.slack(value)
        lp.add_row(lp.efficiency(), floor)
    objective: dict[int, float] = {}
    runs = options.state.get(ISO_RUN, {})
    for g, j in zip(groups, jobs):
        p = priority(problem, j, keep_bonus, iso.get(j.id), rho_weight, runs.get(j.id))
        for col, n in lp.class_rate(g).items():
            objective[col] = p * n
    lp.set_objective(objective)
    lp.solve()
    values = lp.values()
    return {j.id: {k: min(1.0, v) for k, v in values.get(g.key, {}).items()} for g, j in zip(groups, jobs)}


def _within(x: dict[str, dict[str, float]], bundle: Mapping[str, float],
            gpus: Mapping[str, int]) -> dict[str, dict[str, float]]:
    """``x`` scaled down by the solver's round-off where a job's total passes 1 or a type's use
    passes the bundle (so the returned rows are exactly inside the bundle)."""
    for row in x.values():
        total = sum(row.values())
        if total > 1.0:
            for k in row:
                row[k] /= total
    used: dict[str, float] = {}
    for jid, row in x.items():
        for k, v in row.items():
            used[k] = used.get(k, 0.0) + gpus[jid] * v
    for k, u in used.items():
        if u > bundle.get(k, 0.0) > 0 or bundle.get(k, 0.0) <= 0:
            factor = bundle.get(k, 0.0) / u if u > 0 else 0.0
            for row in x.values():
                if k in row:
                    row[k] *= factor
    return x


def two_level(problem: Problem, x: XMap, options: PolicyOptions, keep_bonus: float, rho_weight: float,
              inside_eps: float = INSIDE_EPS, turn_after_lr: float | None = None,
              turn_first_lr: float | None = None,
              turn_min_speed: float = TURN_MIN_SPEED) -> tuple[dict[str, dict[str, float]], int, dict[str, list[str]]]:
    """Every tenant's bundle in ``x`` shared among its jobs by :func:`share_bundle`; the new
    rows, how many tenants' rows were re-shared, and the jobs whose turn came, by tenant."""
    out: dict[str, dict[str, float]] = {}
    changed = 0
    turned: dict[str, list[str]] = {}
    seen = set(options.state.get("oef.iso_jct", {}))  # before this call adds the new jobs
    iso = isolated_jcts(problem, options.state)
    for u in problem.active_tenants:
        rows, done, late = share_bundle(problem, u, x, options, keep_bonus, rho_weight, iso, inside_eps,
                                        turn_after_lr, seen, turn_first_lr, turn_min_speed)
        out.update(rows)
        changed += done
        if late:
            turned[u] = late
    return out, changed, turned


def params(default: float) -> dict[str, Param]:
    """The parameters of a policy offering the two levels (``inside`` on by ``default``)."""
    return {"inside": Param(default, 0.0, 1.0, "1: a tenant's bundle is shared among its jobs by latency-ratio "
                            "aging (two levels); 0: as the tenant level gives it (by efficiency alone)"),
            "keep_bonus": Param(KEEP_BONUS, 1.0, 100.0, "a running job keeps its GPUs against a waiting job of "
                                "the same tenant unless the latter's priority is this many times its own (a "
                                "margin against swaps; restarts are paid by the hysteresis)"),
            "rho_weight": Param(RHO_WEIGHT, 0.1, 100.0, "weight of the finish-time ratio against the latency ratio in a "
                                "job's priority inside its tenant (higher: lower worst finish-time ratio, "
                                "longer worst wait)"),
            "inside_eps": Param(INSIDE_EPS, 0.0, 1.0, "a tenant's jobs together get at least (1 - this) of the best "
                                "use of its bundle; the aging orders its jobs within that room (0: best use only)"),
            "turn_after_lr": Param(TURN_AFTER_LR, 0.0, 1e6, "a waiting job whose latency ratio passed this takes its "
                                   "turn in its tenant's bundle before the value floor (0: never)"),
            "turn_first_lr": Param(TURN_FIRST_LR, 0.0, 1e6, "the waiting job of a tenant with the highest latency "
                                   "ratio takes its turn once that ratio passes this (0: never)"),
            "turn_min_speed": Param(TURN_MIN_SPEED, 0.0, 1.0, "a job taking its turn runs only on the types where "
                                    "its rate is at least this fraction of its best (0: any type)")}


def tenant_key(problem: Problem) -> tuple[Any, ...]:
    """What a tenant-level answer depends on: jobs (tenant, gang, throughputs), weights, capacity."""
    return (tuple((j.id, j.tenant, j.gpus, j.gpus_per_node, j.max_nodes, tuple(sorted(j.throughput.items())))
                  for j in problem.jobs),
            tuple(sorted(problem.tenants.items())), tuple(sorted(problem.gpu_types.items())), problem.nodes)


def split(name: str, problem: Problem, options: PolicyOptions,
          tenant_level: Callable[[Problem, PolicyOptions], Allocation]) -> Allocation:
    """Policy ``name`` in two levels (docs/oef.md, "Two levels"): ``tenant_level``'s answer,
    memoised in ``options.state`` while the jobs, weights and capacity stay the same (it does
    not depend on time), then, with ``name.inside`` on, each tenant's bundle shared among its
    jobs by :func:`two_level` every call (that depends on the jobs' waits). ``tenant_x`` is the
    tenant-level answer: its bundles are what SI, EF and PE are about."""
    started = time.perf_counter()
    key = tenant_key(problem)
    memo = options.state.get(f"{name}.tenant_level")
    if memo is None or memo[0] != key:
        memo = (key, tenant_level(problem, options))
        options.state[f"{name}.tenant_level"] = memo
    top: Allocation = memo[1]
    if options.param(name, "inside") < 0.5 or top.status == "fallback":
        return dataclasses.replace(top, solve_seconds=time.perf_counter() - started)
    eps = options.param(name, "inside_eps")
    x, changed, turned = two_level(problem, top.x, options, options.param(name, "keep_bonus"),
                                   options.param(name, "rho_weight"), eps,
                                   options.param(name, "turn_after_lr") or None,
                                   options.param(name, "turn_first_lr") or None,
                                   options.param(name, "turn_min_speed"))
    return dataclasses.replace(top, x=x, tenant_x=top.x, solve_seconds=time.perf_counter() - started,
                               info={**top.info, "inside": "latency-ratio aging within the value floor",
                                     "inside_eps": eps, "inside_tenants": changed, "inside_turns": turned})
