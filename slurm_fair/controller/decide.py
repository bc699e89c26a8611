"""Phases 3-6 of a cycle as one pure function: ``decide(snapshot, history, settings)``.

From the snapshot and what the controller remembers (:class:`.history.History`) to everything a
cycle applies and records: throughput estimates (with this snapshot's ``fair:tput`` reports
folded into the online EWMA), the service run since the last snapshot, the problem, the
policy's allocation, this round's placement, the plan and its diff with Slurm. Nothing here
reads or writes Slurm or the state store, so ``run --dry-run`` shows exactly the decision a real
cycle makes, and ``snapshot --json`` prints the problem it solves (:func:`observe`).

When the policy fails (solver error, time limit) the last good plan is kept for the jobs that
still exist, or there is no plan when there is none.
"""

from __future__ import annotations

import copy
import functools
import grp
import os
import pwd
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from .. import policies, rounding
from ..errors import SolverError
from ..hysteresis import Moves, min_run_or
from ..estimates.classes import ClassTable
from ..estimates.estimate import Estimate, estimate_all
from ..estimates.online import OnlineUpdate, fold, observations, reporters, values
from ..estimates.rules import Rules
from ..model import Allocation, Problem
from ..slurm.model import Snapshot
from .diff import Action, diff, order
from .history import History
from .legacy import legacy_actions
from .plan import PlanInputs, make_plan, turn_owed
from .plan.types import Plan, PlanSettings
from .problem import BuiltProblem, build_problem, untouched
from .requeue import eligible as rq_eligible
from .reserve import overdue
from .scope import Pilot, Scope, read_pilot
from .standing import Standing, displaceable, keeps, standing
from .settings import Settings
from .steer import partition_type, partition_types, type_partition_lists

AllocateFn = Callable[[str, Problem, policies.PolicyOptions], Allocation]
PlaceFn = Callable[..., rounding.Placement]

RETYPE_WARNING = ("pin_gres_type is set but this Slurm cannot undo a typed GPU request (before "
                  "23.11): jobs are steered by partition instead")


@dataclass(frozen=True)
class DecideSettings:
    """What a decision depends on besides the snapshot and the history: the configuration,
    the class table and rules it names, and whether this Slurm can undo a typed request."""

    settings: Settings
    table: ClassTable
    rules: Rules
    #: the port's :meth:`can_retype_gpu` (False when it could not say)
    can_retype: bool = False
    #: learned speeds per group (user, job name, GPUs) -> {type: speed} (:mod:`.learned`)
    learned: Mapping[tuple[str, str, int], Mapping[str, float]] = field(default_factory=dict)
    #: use ratios (elapsed / time limit) of the finished runs per group, pool and the site
    #: (:mod:`.learned`, :mod:`slurm_fair.estimates.runtime`): a job's size from its time limit
    run_ratios: Mapping[tuple[str, str, int], tuple[float, ...]] = field(default_factory=dict)

    @property
    def retype_ok(self) -> bool:
        """Pin gres types (rewrite the request) rather than steer by partition."""
        return self.settings.pin_gres_type in (True, "auto") and self.can_retype


@dataclass
class Timer:
    """Seconds per phase (``CycleResult.timings``); a phase entered twice adds up."""

    timings: dict[str, float] = field(default_factory=dict)

    def phase(self, name: str) -> "_Phase":
        return _Phase(self.timings, name)


class _Phase:
    def __init__(self, timings: dict[str, float], name: str):
        self.timings, self.name = timings, name

    def __enter__(self) -> None:
        self.t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.timings[self.name] = self.timings.get(self.name, 0.0) + time.perf_counter() - self.t0


@dataclass(frozen=True)
class Observed:
    """Phase 3: what this snapshot adds to the history, the estimates and the problem."""

    estimates: Mapping[str, Estimate]
    warnings: tuple[str, ...]
    online: OnlineUpdate
    #: GPU-seconds per tenant and seconds per job, per type, run since the last snapshot
    tenant_service: Mapping[str, Mapping[str, float]]
    job_service: Mapping[str, Mapping[str, float]]
    #: every GPU job of the snapshot -> the type it runs on (None: pending)
    running: Mapping[str, str | None]
    #: job -> (type, partition) Slurm refused it in just now
    refused: Mapping[str, tuple[str, str]]
    #: the history with this snapshot counted (what the store holds once it is recorded)
    history: History
    built: BuiltProblem


@dataclass(frozen=True)
class Decision:
    """Everything a cycle applies (``actions``) and records."""

    now: float
    observed: Observed
    allocation: Allocation | None
    placement: rounding.Placement | None
    #: the plan to apply (None: the policy failed and there is no earlier plan)
    plan: Plan | None
    actions: tuple[Action, ...]
    round_boundary: bool
    #: the policy's memory after this cycle (None: the policy did not run)
    policy_state: Mapping[str, Any] | None
    warnings: tuple[str, ...]
    message: str = ""
    timings: Mapping[str, float] = field(default_factory=dict)
    #: whose is what: the pilot's view, the settled rows (:mod:`.scope`)
    pilot: Pilot | None = None


def service_since(snapshot: Snapshot, last_at: float | None) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """GPU-seconds per tenant/type and seconds per job/type run since the previous cycle.

    A job running now is counted from the later of its start and the previous snapshot; jobs
    that started and ended between two cycles are not seen (reports use sacct for those).
    """
    now = snapshot.taken_at.timestamp()
    tenants: dict[str, dict[str, float]] = {}
    jobs: dict[str, dict[str, float]] = {}
    for j in snapshot.gpu_jobs():
        if not j.running or not j.gpu_type_running:
            continue
        start = j.start_time.timestamp() if j.start_time else now
        since = max(start, last_at) if last_at is not None else start
        secs = max(now - since, 0.0)
        if secs <= 0:
            continue
        k = j.gpu_type_running
        g = j.gpu_request.total if j.gpu_request else 0
        jobs.setdefault(j.job_id, {})[k] = jobs.get(j.job_id, {}).get(k, 0.0) + secs
        tenants.setdefault(j.account, {})[k] = tenants.get(j.account, {}).get(k, 0.0) + secs * g
    return tenants, jobs


def refused_now(snapshot: Snapshot, asked: Mapping[str, str],
                ptypes: Mapping[str, frozenset[str]]) -> dict[str, tuple[str, str]]:
    """Pending jobs Slurm marks ``BadConstraints`` in a single-type partition they did not ask
    for (``asked``: :func:`.asked.request_of`; so we, or the submit plugin, sent them
    there): job -> (that type, partition). Our own check (:func:`.steer.partition_holds`) should
    prevent it; this catches what it cannot see (features, licences, a node that changed), so
    the job is sent back and never there again."""
    out = {}
    for sj in snapshot.gpu_jobs():
        if not sj.pending or sj.reason != "BadConstraints":
            continue
        k = partition_type(sj.partition, ptypes)
        if k and sj.partition != asked.get(sj.job_id, sj.partition):
            out[sj.job_id] = (k, sj.partition)
    return out


def staying(snapshot: Snapshot, built: BuiltProblem, min_run: float,
            last_requeued: Mapping[str, float], st: Standing | None = None,
            turns: Mapping[str, tuple[float, tuple[str, ...]]] | None = None,
            round_s: float = 0.0) -> dict[str, str]:
    """Running jobs the controller will not stop this cycle -> their type: those not opted in
    to time-sharing or not run ``min_run`` (:func:`.requeue.eligible`), except the jobs a tenant
    below its share may displace, and those of a tenant not above its share with nothing of its
    own waiting that a rotation inside the tenant pays for (:func:`.standing.keeps`). The
    rounding step keeps them on their nodes, so it never
    plans a pending job into GPUs that will not be freed."""
    now = snapshot.taken_at.timestamp()
    in_problem = {j.id: j.tenant for j in built.problem.jobs}
    fixed = untouched(built.problem)  # counted in their tenant's share, never stopped or moved
    spare = displaceable(snapshot, built.problem, st, fixed) if st is not None else {}
    if st is not None and turns:  # a turn no tenant below may take back (plan.turn_owed) stays
        owed = turn_owed(snapshot, turns, now, min_run)
        spare = {j: sj for j, sj in spare.items() if not st.below <= owed.get(j, frozenset())}
    pjobs = {j.id: j for j in built.problem.jobs}
    run_ids = {sj.job_id for sj in snapshot.gpu_jobs() if sj.running}
    waiting = [j for j in built.problem.jobs if j.id not in run_ids]
    out = {}
    for sj in snapshot.gpu_jobs():
        if not sj.running or not sj.gpu_type_running or sj.job_id not in in_problem or sj.job_id in spare:
            continue
        if sj.job_id in fixed or not rq_eligible(sj, now, min_run, last_requeued) or \
                (st is not None and keeps(st, in_problem[sj.job_id], pjobs[sj.job_id], waiting, round_s)):
            out[sj.job_id] = sj.gpu_type_running
    return out


def standing_now(snapshot: Snapshot, built: BuiltProblem) -> Standing:
    """Each tenant against its equal share with the jobs running now (:mod:`.standing`)."""
    jobs = {j.id for j in built.problem.jobs}
    return standing(built.problem, {sj.job_id: sj.gpu_type_running for sj in snapshot.gpu_jobs()
                                    if sj.running and sj.gpu_type_running and sj.job_id in jobs})


def observe(pilot: Pilot, history: History, ds: DecideSettings) -> Observed:
    """Phase 3: estimates (this snapshot's reports folded in first), service, the problem, all
    of the pilot's view (:mod:`.scope`)."""
    s = ds.settings
    snapshot = pilot.view.snapshot
    now = snapshot.taken_at.timestamp()
    ptypes = partition_types(snapshot.nodes)
    first, _ = estimate_all(replace(snapshot, jobs=reporters(snapshot.jobs)), ds.table, ds.rules,
                            values(history.online), ds.learned)
    online = fold(history.online, history.reported, observations(snapshot.jobs, first), s.ewma_alpha, now)
    tenant_service, job_service = service_since(snapshot, history.last_snapshot_at)
    running = {j.job_id: j.gpu_type_running for j in snapshot.gpu_jobs()}
    refused = refused_now(snapshot, pilot.asked.partitions, ptypes)
    after = history.advanced(now, online, job_service, running, {j: k for j, (k, _) in refused.items()})
    est, warnings = estimate_all(snapshot, ds.table, ds.rules, values(after.online), ds.learned)
    built = build_problem(snapshot, est, after, s.weights, ptypes, ds.retype_ok, pilot.asked, ds.run_ratios)
    return Observed(est, tuple(warnings), online, tenant_service, job_service, running, refused, after, built)


def plan_settings(snapshot: Snapshot, whole: Snapshot, ds: DecideSettings) -> PlanSettings:
    """The plan's settings from the configuration and the pilot's view (``whole``: the
    partitions' rules, read for every partition a job asked for)."""
    s = ds.settings
    return PlanSettings(
        s.order, s.round_s, partition_types(snapshot.nodes), type_partition_lists(snapshot.nodes),
        {p.name: p for p in whole.partitions}, _groups(snapshot, whole), ds.retype_ok, s.min_run_s or None,
        s.requeue_cost_s, s.move_up_gain, tuple(n for n in snapshot.nodes if n.schedulable),
    )


def _groups(snapshot: Snapshot, whole: Snapshot) -> dict[str, frozenset[str] | None]:
    """Each of the pilot's users -> their groups, read here once per cycle (the plan only reads
    this table), and only when a partition restricts groups (``AllowGroups``)."""
    if not any(p.allow_groups is not None for p in whole.partitions):
        return {}
    return {u: user_groups(u) for u in sorted({j.user for j in snapshot.jobs})}


@functools.lru_cache(maxsize=4096)
def user_groups(user: str) -> frozenset[str] | None:
    """The groups of ``user`` as this host resolves them (a partition's ``AllowGroups``); None
    when the user is unknown here (then only partitions open to every group are targets)."""
    try:
        pw = pwd.getpwnam(user)
        return frozenset(grp.getgrgid(g).gr_name for g in os.getgrouplist(user, pw.pw_gid))
    except (KeyError, OSError):
        return None


def _allocate(built: BuiltProblem, history: History, snapshot: Snapshot, ds: DecideSettings,
              allocate: AllocateFn, place: PlaceFn, timer: Timer, late: Mapping[str, float],
              st: Standing | None = None) -> tuple[Allocation | None, rounding.Placement | None, dict[str, Any] | None, str]:
    """Phase 4: the policy's allocation and this round's placement (None, with the reason,
    when the policy fails). ``late``: the overdue gangs (:mod:`.reserve`), served first; a
    running job is moved only when the move pays (:mod:`slurm_fair.hysteresis`)."""
    s = ds.settings
    try:
        policy_state: dict[str, Any] | None = None
        if built.problem.jobs:
            state = copy.deepcopy(dict(history.policy_state))
            options = policies.PolicyOptions(
                solver=s.solver, time_limit_s=s.time_limit_s, keep_lp_dir=str(s.state_dir),
                round_s=s.round_s, state=state, params=s.policy_params,
            )
            allocation = allocate(s.policy, built.problem, options)
            policy_state = state
        else:
            allocation = Allocation(policy=s.policy, x={}, status="empty")
        with timer.phase("rounding"):
            held = staying(snapshot, built, min_run_or(s.min_run_s, s.round_s, s.requeue_cost_s),
                           history.last_requeues, st, history.turns, s.round_s)
            moves = Moves(frozenset(built.prev_nodes), s.requeue_cost_s, s.move_up_gain)
            placement = place(built.problem, allocation, built.received, built.prev,
                              built.prev_nodes, held, sticky=True, overdue=late, moves=moves)
        return allocation, placement, policy_state, ""
    except (SolverError, ArithmeticError, ValueError) as exc:
        return None, None, None, f"policy {s.policy!r} failed: {exc}"


def decide(
    whole: Snapshot, history: History, ds: DecideSettings, *,
    allocate: AllocateFn = policies.allocate, place: PlaceFn = rounding.place,
) -> Decision:
    """Phases 3-6 (module docstring) on the whole snapshot: only the pilot's jobs are planned
    (:mod:`.scope`); fields the controller holds on jobs outside it, or on jobs the plan no
    longer mentions, are given back, and so is everything versions before 0.2 changed
    (:mod:`.legacy`)."""
    s = ds.settings
    timer = Timer()
    now = whole.taken_at.timestamp()
    warnings: list[str] = []
    if s.pin_gres_type is True and not ds.can_retype:
        warnings.append(RETYPE_WARNING)
    user_groups.cache_clear()  # once per user and cycle: a loop sees group changes next cycle
    pilot = read_pilot(whole, history.owned, Scope.of(s.accounts, s.partitions))
    snapshot = pilot.view.snapshot
    with timer.phase("estimate"):
        obs = observe(pilot, history, ds)
        warnings += obs.warnings
    built = obs.built
    round_boundary = now - history.round_started_at >= s.round_s
    late = overdue(built.problem, {j.job_id: j for j in snapshot.jobs}, s.round_s, s.reserve_after_lr,
                   3600.0 * s.reserve_after_h)
    st = standing_now(snapshot, built) if s.displace else Standing()
    with timer.phase("policy"):
        allocation, placement, policy_state, message = _allocate(built, history, snapshot, ds, allocate,
                                                                 place, timer, late, st)
    plan: Plan | None = None
    with timer.phase("plan"):
        if allocation is not None and placement is not None:
            inputs = PlanInputs(
                placement.types, placement.priority, built.fixed_type, pilot.asked.partitions,
                history.last_requeues, round_boundary,
                # a policy that names nodes (Hops) has its jobs pinned to the nodes placed
                {j: tuple(placement.nodes[j]) for j in allocation.nodes if placement.nodes.get(j)},
                pilot.asked.nodes, pilot.asked.choices, pilot.owned, pilot.released,
                _head(placement, late), st, history.turns,
            )
            plan = make_plan(snapshot, built.problem, allocation, inputs, plan_settings(snapshot, whole, ds))
            for job_id, k in sorted(plan.unsteered.items()):
                warnings.append(f"job {job_id}: no partition of only {k} GPUs admits it, so it cannot "
                                "be steered there; left in its own partition")
        elif history.last_plan is not None:
            cycle_id, last = history.last_plan
            plan = Plan.from_dict(last).restricted_to({j.job_id for j in snapshot.jobs})
            message += f"; keeping the last good plan of cycle {cycle_id}"
        else:
            message += ("; no earlier plan: nothing steered; what slurm-fair still holds on jobs is given "
                        "back")
    with timer.phase("diff"):
        actions = diff(plan or Plan({}, {}), whole, pilot.owned, pilot.reading.ours, pilot.requests)
        actions = sorted(actions + legacy_actions(whole, history.managed_qos, pilot.owned), key=order)
    for job_id, name in sorted(pilot.reading.newly_released):
        warnings.append(f"job {job_id}: its {name} was changed by someone else after slurm-fair set it; "
                        "their value stays and slurm-fair no longer manages that field of the job")
    return Decision(now, obs, allocation, placement, plan, tuple(actions), round_boundary, policy_state,
                    tuple(warnings), message, dict(timer.timings), pilot)


def _head(placement: rounding.Placement, late: Mapping[str, float]) -> dict[str, str]:
    """Overdue gangs -> the type they go first on: the one this round places them on, or the
    one whose GPUs the rounding step keeps for them."""
    head = {j: placement.types[j] for j in late if j in placement.types}
    head.update({j: k for j, k in placement.reserved_for.items() if j in late})
    return head
