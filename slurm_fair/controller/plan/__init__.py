"""Phase 5 (pure): from the allocation and this round's placement to the state Slurm should have.

Nothing here reads or writes Slurm; the plan is a value the diff compares with a snapshot. It
only ever concerns the pilot's jobs (:mod:`..scope`), and never a field someone else changed
after the controller (:mod:`..ownership`).

**Per tenant**: its bundle (``y_uk = sum g_j x_jk``) and fair share, recorded for ``explain``,
the reports and the shadow report. No hard per-tenant cap is written to Slurm (no QOS is made
or changed): a tenant keeps to its share through which of its jobs go where and in which order,
so when the controller stops, nothing it set keeps a GPU idle (docs/controller.md, "Tenant
limits: why none").

**Per pending GPU job**: its GPU type and its place in line.

* Type: the placement's type when this round runs it; otherwise its current type when the
  allocation still gives it time there (no churn), else the type with the largest ``x_jk``, else
  its fastest type; the first of these it can be sent to (:func:`.jobs.rank_types`). A fixed type
  (typed request, single-type partition: :mod:`..problem`) is never changed, and a job whose owner
  chose where it runs (several partitions, nodes, an exclude list, a reservation, features) or
  that is held or waits for a dependency is never moved (:func:`..steer.user_choice`).
* How the type is enforced (:mod:`..steer`): by default the job moves to a partition of that
  type (``partition``; reversible, the request stays untyped) whose rules admit it and whose tier
  is not above the one it asked for (:func:`..steer.admits`); with ``pin_gres`` (only on a
  Slurm that can undo it) its gres request is rewritten to the type (``gpu_type``). Never
  where no node of the partition could hold the job's gang, CPUs and memory
  (:func:`..steer.partition_holds`): Slurm would keep it pending for ever. A type without a
  partition that holds it cannot be steered: the job stays in (or goes back to) its original
  partition, unplaced, and is listed in :attr:`.types.Plan.unsteered`.
* Order (:mod:`.order`): the jobs this round places keep their priority; the pilot's other
  pending jobs that compete with them get a site factor that puts them just behind (pushed
  down only, so no pilot job is pushed ahead of anyone). An overdue gang (:mod:`..reserve`)
  is sent to the type the rounding step serves it on or keeps GPUs for, and every other job
  competing there goes behind it, so Slurm's backfill keeps its nodes.

**Requeues** (opt-in: ``--requeue`` plus ``fair:preemptible``; :mod:`..requeue`): a running job
is requeued to make room for a pending job this round places on the type it holds and that
cannot start otherwise (at a round boundary any such job; between boundaries only a job that
never ran: a new job is let in at once, rotation waits for the round), or to move up to a
faster type whose GPUs stay idle after this plan when the gain beats the cost; never before
``min_run_s`` (default one round), never to restart on the type it holds. A requeued job is then
planned like a pending one in the same cycle (partition of its planned type, its place in line);
Slurm holds it for its credential lifetime + 1 s before it may start again (the controller never
shortens that: a relaunch on the same node sooner fails). Jobs are never cancelled.

Modules: :mod:`.types` (the plan, its settings, its JSON form), :mod:`.jobs` (type, enforcement
and place in line of each job), :mod:`.order` (the site factors); this module puts them
together and picks the requeues.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Mapping

from ...fairness import equal_share, tenant_bundles
from ...hysteresis import swap_pays
from ...model import Allocation, Job, Problem
from ...rounding import Pool
from ...slurm.model import Snapshot, SlurmJob
from .. import requeue as rq
from ..problem import untouched
from ..standing import Standing, displaceable
from ..state.fields import Owned
from .jobs import JobContext, job_plans, sent_to, steerable
from .order import site_factors
from .types import Plan, PlanSettings, TenantPlan


@dataclass(frozen=True)
class PlanInputs:
    """What a cycle's plan is made from besides the problem and its allocation: this round's
    placement (:mod:`slurm_fair.rounding`) and what the controller knows of each job."""

    #: job -> the type this round's placement runs it on
    placed: Mapping[str, str] = field(default_factory=dict)
    #: job -> how far behind its allocation it is (the place in line)
    deficit: Mapping[str, float] = field(default_factory=dict)
    #: job -> the type it must keep (:func:`..problem.user_typed`)
    fixed_type: Mapping[str, str] = field(default_factory=dict)
    #: job -> the partition(s) it asked for (:func:`..asked.request_of`)
    asked: Mapping[str, str] = field(default_factory=dict)
    #: when the controller last requeued each job (epoch seconds)
    last_requeued: Mapping[str, float] = field(default_factory=dict)
    #: a new round starts this cycle (time-sharing may rotate running jobs)
    round_boundary: bool = False
    #: job -> the nodes this round's placement runs it on, for the jobs whose policy named
    #: nodes (Hops' per-server configurations, ``Allocation.nodes``): pinned with ReqNodeList
    nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: job -> the node list it asked for (folded hostlist, "" for none)
    asked_nodes: Mapping[str, str] = field(default_factory=dict)
    #: job -> why where it runs is its owner's choice (:func:`..steer.user_choice`)
    choices: Mapping[str, str] = field(default_factory=dict)
    #: the fields the controller wrote (:mod:`..state.fields`) and those it may no longer write
    owned: Mapping[tuple[str, str], Owned] = field(default_factory=dict)
    released: frozenset[tuple[str, str]] = frozenset()
    #: overdue gangs -> the type this round serves them on or keeps GPUs for
    #: (:mod:`..reserve`): sent there, first in line, every competitor there pushed below
    head: Mapping[str, str] = field(default_factory=dict)
    #: each tenant against its share now (:mod:`..standing`): who has the displacement right
    standing: Standing = field(default_factory=Standing)
    #: job -> when its last turn began and the jobs requeued to make room for it
    #: (:meth:`..state.Store.turns`): the displacement right leaves a turn alone for ``min_run``
    turns: Mapping[str, tuple[float, tuple[str, ...]]] = field(default_factory=dict)


def make_plan(
    snapshot: Snapshot, problem: Problem, allocation: Allocation, inputs: PlanInputs, settings: PlanSettings,
) -> Plan:
    """The desired state for this cycle (pure; see the module docstring)."""
    placed_types, deficit = inputs.placed, inputs.deficit
    capacity = {k: int(c) for k, c in problem.gpu_types.items()}
    by_id = {j.job_id: j for j in snapshot.jobs}
    pjobs = {j.id: j for j in problem.jobs}
    bundles = tenant_bundles(problem, allocation.x)
    tenants = {
        t: TenantPlan(t, {k: round(v, 6) for k, v in bundles[t].items() if v > 1e-9},
                      {k: round(v, 6) for k, v in equal_share(problem, t).items()}, problem.weight(t))
        for t in problem.active_tenants
    }
    pending = [by_id[j] for j in pjobs if j in by_id and by_id[j].pending]
    ctx = JobContext(by_id, pjobs, allocation, placed_types, deficit, inputs.fixed_type, settings, capacity,
                     inputs.asked, inputs.nodes, inputs.asked_nodes, inputs.choices, inputs.released, inputs.head)
    jobs, unsteered = job_plans(pending, ctx)

    # who is requeued (controller/requeue.py): to make room, to move up
    now = snapshot.taken_at.timestamp()
    free = rq.free_gpus(snapshot)
    fixed = untouched(problem)  # counted in their tenant's share, never requeued (issue 39)
    eligible = [sj for sj in snapshot.jobs if sj.job_id in pjobs and sj.job_id not in fixed
                and rq.eligible(sj, now, settings.min_run, inputs.last_requeued)]
    takers = [rq.Taker(by_id[jp.job_id], placed_types[jp.job_id])
              for jp in sorted(jobs.values(), key=lambda jp: jp.rank)
              if jp.job_id in placed_types and sent_to(jp, placed_types[jp.job_id], settings)]
    victims: dict[str, list[SlurmJob]] = {}
    for sj in eligible:
        if placed_types.get(sj.job_id) != sj.gpu_type_running:  # never requeued to restart in place
            victims.setdefault(sj.gpu_type_running or "", []).append(sj)
    for k in victims:
        victims[k].sort(key=lambda sj: (round(deficit.get(sj.job_id, 0.0), 9),
                                        sj.start_time.timestamp() if sj.start_time else now, sj.job_id))
    # at a round boundary any job this round runs may take GPUs (time-sharing); between
    # boundaries only a job that never ran (admission: a new job does not wait for the round)
    startable = [t for t in takers if t.job.reason not in rq.NOT_STARTABLE
                 and (inputs.round_boundary or pjobs[t.job.job_id].attained_s <= 0)]
    seated: set[str] = set()
    st = inputs.standing
    # another tenant's job is rotated away only while its tenant is above its share (..standing)
    rotation = rq.Budget(dict(st.surplus), st.value, st.share) if st.known else None
    requeue_for = rq.make_room(free, startable, victims, _hosts(settings), seated, rotation,
                               _swap_pays(pjobs, settings.round_s))
    right = [t for t in takers if t.job.job_id not in seated and t.job.reason not in rq.NOT_STARTABLE
             and st.tenant_below(pjobs[t.job.job_id].tenant)]
    if right:
        left = rotation.surplus if rotation is not None else dict(st.surplus)
        requeue_for.update(_displace(snapshot, problem, inputs, right, free, fixed, requeue_for, seated, settings,
                                     left))
    rq.make_room(free, [t for t in takers if t not in startable and t.job.job_id not in seated], {},
                 _hosts(settings))  # not idle for moves
    movers = sorted((sj for sj in eligible if sj.job_id not in requeue_for and sj.job_id not in inputs.choices),
                    key=lambda sj: (-pjobs[sj.job_id].attained_s, sj.job_id))
    reach = {sj.job_id: frozenset(k for k in capacity if k != sj.gpu_type_running
                                  and steerable(sj, k, settings, ctx.asked_of(sj))) for sj in movers}
    moves = rq.move_up(free, movers, problem, settings.requeue_cost_s, settings.move_up_gain,
                       _hosts(settings), reach)
    requeue = sorted(set(requeue_for) | set(moves))
    if requeue:
        # a requeued job is pending as soon as the requeue returns: plan it like one (its type,
        # partition and place in line), so it does not simply restart where it was
        jobs, unsteered = job_plans(pending + [by_id[j] for j in requeue], ctx,
                                    requeued=set(requeue), moves=moves)
    if settings.order == "site_factor":
        reachable = {j: tuple(pjobs[j].throughput) for j in jobs}
        factors = site_factors(jobs, by_id, inputs.owned, reachable, inputs.released, inputs.head)
        jobs = {j: replace(jp, site_factor=factors.get(j)) for j, jp in jobs.items()}
    return Plan(
        tenants, jobs, tuple(requeue), tuple(sorted(capacity)), allocation.policy, allocation.status,
        unsteered, {j: tuple(t) for j, t in requeue_for.items()}, moves,
        {j: k for j, k in inputs.head.items() if j in jobs and jobs[j].planned_type == k},
    )


def _displace(snapshot: Snapshot, problem: Problem, inputs: PlanInputs, right: list[rq.Taker], free: Pool,
              fixed: frozenset[str], chosen: Mapping[str, list[str]], seated: set[str],
              settings: PlanSettings, surplus: Mapping[str, float]) -> dict[str, list[str]]:
    """The displacement right (:mod:`..standing`): waiting jobs of tenants below their share
    (``right``) may have opted-in jobs of tenants above theirs requeued, before their min_run
    and at any cycle, never more of one tenant than its surplus over its equal share's value;
    those furthest ahead of their allocation first, then the newest started. ``surplus``: what
    the round's rotations left of each tenant's surplus."""
    st, now = inputs.standing, snapshot.taken_at.timestamp()
    others: dict[str, list[SlurmJob]] = {}
    for sj in displaceable(snapshot, problem, st, fixed).values():
        if sj.job_id not in chosen:
            others.setdefault(sj.gpu_type_running or "", []).append(sj)
    for k in others:
        others[k].sort(key=lambda sj: (round(inputs.deficit.get(sj.job_id, 0.0), 9),
                                       -(sj.start_time.timestamp() if sj.start_time else now), sj.job_id))
    return rq.make_room(free, right, others, _hosts(settings), seated,
                        rq.Budget(dict(surplus), st.value, protected=turn_owed(snapshot, inputs.turns, now, settings.min_run)))


def turn_owed(snapshot: Snapshot, turns: Mapping[str, tuple[float, tuple[str, ...]]], now: float,
              min_run: float) -> dict[str, frozenset[str]]:
    """Running job -> the tenants whose jobs were requeued less than ``min_run`` ago to give it
    its turn (:mod:`..standing`, "A turn is not taken back"): the displacement right of those
    tenants does not reach it. A requeued job no longer in the queue names no tenant."""
    account = {sj.job_id: sj.account for sj in snapshot.jobs}
    out: dict[str, frozenset[str]] = {}
    for sj in snapshot.jobs:
        turn = turns.get(sj.job_id)
        if not sj.running or turn is None or now - turn[0] >= min_run - 1e-6:
            continue
        started = sj.start_time.timestamp() if sj.start_time else now
        if started + 1.0 < turn[0]:  # Slurm's StartTime has whole seconds
            continue  # running since before that requeue: not the turn it gave
        owed = frozenset(account[v] for v in turn[1] if v in account and account[v] != sj.account)
        if owed:
            out[sj.job_id] = owed
    return out


def _swap_pays(pjobs: Mapping[str, Job], round_s: float) -> Callable[[SlurmJob, SlurmJob], bool]:
    """A running job may be rotated away for a job of its own tenant only when the swap pays
    (:func:`slurm_fair.hysteresis.swap_pays`); for another tenant's job the budget decides."""
    def may(taker: SlurmJob, victim: SlurmJob) -> bool:
        t, v = pjobs.get(taker.job_id), pjobs.get(victim.job_id)
        return t is None or v is None or t.tenant != v.tenant or swap_pays(t, v, round_s)
    return may


def _hosts(settings: PlanSettings) -> Callable[[SlurmJob, str], bool]:
    """Whether node ``name`` can host a part of ``sj``: only a schedulable node (those in
    ``settings.nodes``) can; without node information, any."""
    nodes = {n.name: n for n in settings.nodes}
    if not nodes:
        return lambda sj, name: True
    return lambda sj, name: name in nodes and nodes[name].can_host(sj)
