"""The round-based simulation loop: the same Problem, policies and rounding step as the controller.

Each round (``round_s``, default 360 s like Gavel):

1. jobs whose arrival time has come join; with nothing to run, time jumps to the next arrival
   (the round grid restarts there);
2. a :class:`~slurm_fair.model.Problem` of the active jobs is built: throughputs per cluster
   type from the table (0 where the type's nodes cannot hold the job's gang:
   :meth:`Problem.holds <slurm_fair.model.Problem.holds>`), ``remaining_work``, ``age_s``,
   ``attained_s``, ``prev_type``, the gang shape, tenant weights, and the node structure when
   the cluster has nodes;
3. the policy allocates (see *caching* below) with a per-policy ``options.state`` kept for the
   whole run;
4. :func:`slurm_fair.rounding.place` turns the allocation into this round's placement, given each
   job's received share of rounds per type, its previous type and the GPUs per node it holds
   (so a job that keeps its type keeps its nodes when they are free);
5. :class:`~.playout.RoundPlay` plays the round out in time: start latency, requeue hold,
   exact completions, and with ``fill_between_rounds`` the jobs Slurm would start on GPUs freed
   (or arrivals) inside the round.

Speed on a placement = ``T_jk`` from the table x the slowest node factor of its nodes; a gang
spread over more nodes than ``ceil(g / largest node of the type)`` runs at Gavel's
``<type>_unconsolidated`` throughput when the table has one.

Costs of the real system (:mod:`.playout`): ``restart_s`` (default 30 s) is paid by every
member that did not hold exactly the same type and GPUs per node in the previous round,
including its first start (loading a checkpoint costs the same as loading the initial model);
``requeue_hold_s`` (default 0) delays the restart of a job that left the GPUs it held (Slurm's
``cred_expire + 1`` s); ``fill_between_rounds`` (default off) makes the cluster work-conserving
between rounds, as Slurm is. Like the controller (``min_run_s``), a job is not stopped before it
has run a round since it last started: one still in its hold or start latency, or started less
than a round ago, keeps its GPUs (``fixed`` in the rounding step).

Forks (HadarE): a policy may add copy jobs to its allocation, listing them in
``allocation.forks = {copy_id: parent_id}``. Copies are placed by the same rounding step
as ordinary jobs. A job with ``m >= 2`` members (itself and/or copies) running progresses at
``(1 - fork_sync) * sum_i speed_i`` (each member after its own overhead): copies train on
separate data shards and average parameters, paying ``fork_sync`` (default 10 %) for it.

Caching: a policy registered with ``dynamic=False`` is solved again only when the set of active
jobs changes (its inputs are otherwise the same); a dynamic one every ``resolve_every`` rounds
(default 1, i.e. every round) and whenever the set changes. With ``stale_s`` > 0 (bounded
staleness, for long histories where the set changes almost every round) a policy's last
solution stands while jobs come and go, until ``stale_s`` seconds passed since it was solved or
``stale_changes`` of the active jobs are new or gone: the jobs that left free their shares, new
jobs take leftover GPUs on their fastest type until the next solve; a dynamic policy is then
solved every ``stale_s`` seconds (or ``resolve_every`` rounds when that is longer).
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

from .. import rounding
from ..hysteresis import Moves, min_run_s
from ..model import Allocation, Job, NodeCapacity, Problem
from ..policies import FORK_SYNC, PolicyInfo, PolicyOptions, simulation_params
from ..estimates.gavel import ThroughputTable
from .bounds import MAX_ROUNDS, Fits, check_length, too_long
from .cluster import ClusterSpec
from .fairness_check import FairnessChecker
from .knowledge import Knowledge, KnowledgeSpec
from .metrics import JobRecord, RoundSample
from . import inround, resplit
from .playout import JobState, Placed, RoundPlay, Seat, finish_time, progress_in
from .workload import TraceJob, Workload
from ..statuses import AllocationStatus

__all__ = ["SimConfig", "SimResult", "Simulator", "finish_time", "job_throughputs", "progress_in", "simulate"]

_EPS = 1e-9
#: slack when comparing a run's age with a round (clock sums drift by ulps over long runs)
_TOLERANCE_S = 1e-6


#: one solve's answer reused until the active set changes: the problem, the allocation, the
#: problem with HadarE's copies as jobs, and the (SI, EF) verdicts when checked
_Solved = tuple[Problem, Allocation, Problem, tuple[bool | None, bool | None]]


@dataclass
class _Cache:
    """The last solve (its active jobs, when, rounds since) and its reuse on changed jobs."""

    key: frozenset[str] = frozenset()
    solved: "_Solved | None" = None
    solved_at: float = 0.0
    rounds_since: int = 0
    known: int = 0
    #: the last solution restricted to the active jobs of a round it was reused in
    reused: "tuple[frozenset[str], _Solved] | None" = None


@dataclass
class _SolveCounts:
    """How many times the policy ran, for how long, and how often it fell back."""

    solves: int = 0
    seconds: float = 0.0
    fallbacks: int = 0
    #: rounds whose active jobs changed but the last solution was reused (bounded staleness)
    reused: int = 0


@dataclass(frozen=True)
class SimConfig:
    round_s: float = 360.0
    #: start latency of every (re)start: checkpoint load, Slurm's launch
    restart_s: float = 30.0
    fork_sync: float = FORK_SYNC
    resolve_every: int = 1
    #: stop after this much simulated time (None: run until every job finished)
    horizon_s: float | None = None
    check_fairness: bool = True
    solver: str = "auto"
    time_limit_s: float = 30.0
    keep_lp_dir: str | None = None
    #: seconds a requeued job waits before it may start again (Slurm: cred_expire + 1)
    requeue_hold_s: float = 0.0
    #: start waiting jobs on GPUs freed, and arrivals, inside a round (Slurm is work-conserving)
    fill_between_rounds: bool = False
    #: a waiting gang allocated some time whose wait passes this many times its age (Hops'
    #: latency ratio, at least one round) goes first in the rounding step, and the nodes that will
    #: hold it are kept idle while jobs that cannot be stopped still hold them (Slurm's backfill
    #: reservation for its top job); None: never
    reserve_after_lr: float | None = 2.0
    #: a policy that re-plans inside a round (``PolicyInfo.replans``, Hops) is called again at
    #: every completion and arrival inside the round, on the waiting jobs and the GPUs free then
    replan_in_round: bool = True
    #: policy parameters (``{"hops.lambda": 2.0}``, PolicyOptions.params)
    policy_params: Mapping[str, float] = field(default_factory=dict)
    #: what the policy knows of job speeds (:mod:`.knowledge`; oracle: the true speeds)
    knowledge: KnowledgeSpec = field(default_factory=KnowledgeSpec)
    #: seed of ``tagged=F``'s draw of the tagged jobs
    knowledge_seed: int = 0
    #: bounded staleness: a static policy's last solution is reused while jobs arrive and leave,
    #: for up to this many simulated seconds since its solve (0: solve at every change)
    stale_s: float = 0.0
    #: ... and while fewer than this fraction of the active jobs arrived or left since
    stale_changes: float = 0.25
    #: between solves, a two-level policy's bundles stay and the inside level is shared again
    #: for the tenants whose jobs changed (:mod:`.resplit`); False: new jobs take leftovers only
    stale_resplit: bool = True


@dataclass
class SimResult:
    """Everything a run produced: job records and round samples for :mod:`.metrics`, plus the
    policy's own figures."""

    policy: str
    records: list[JobRecord]
    samples: list[RoundSample]
    capacity: dict[str, int]
    wall_seconds: float
    solves: int
    solve_seconds: float
    restarts: int
    fallback_allocations: int
    unschedulable: list[str]
    throughput_fallbacks: int
    work_done: dict[str, float] = field(default_factory=dict)
    #: rounds that reused a solution although the jobs changed (:attr:`SimConfig.stale_s`)
    reused_solutions: int = 0


def job_throughputs(table: ThroughputTable, job: TraceJob, types: list[str]) -> dict[str, float]:
    """``T_jk`` of a trace job on each cluster type (the table's fallback applies)."""
    return {k: table.lookup(job.job_type, job.gpus, k) for k in types}


class Simulator:
    """One run of one policy over one workload (create a new one per policy)."""

    def __init__(
        self,
        workload: Workload,
        cluster: ClusterSpec,
        table: ThroughputTable,
        policy: PolicyInfo,
        config: SimConfig | None = None,
        progress: Callable[[float], None] | None = None,
        where: Callable[[float, int, int], None] | None = None,
    ) -> None:
        self.workload = workload
        self.cluster = cluster
        self.table = table
        self.policy = policy
        self.config = config or SimConfig()
        self.progress = progress
        #: called each round with the simulated seconds since the first arrival, the solves and
        #: the reused rounds so far (a long run's progress lines: where a stopped run was)
        self.where = where
        self.types = sorted(cluster.capacity)
        self.nodes: tuple[NodeCapacity, ...] = cluster.nodes()
        self.node_speed = {n.name: n.speed for n in self.nodes}
        self.largest_node = {k: max((n.gpus for n in self.nodes if n.gpu_type == k), default=0) for k in self.types}
        #: the cluster without jobs: one home for "can this type hold that gang" (Problem.holds)
        self.frame = Problem(dict(cluster.capacity), {}, (), self.nodes)
        #: every member's seat (jobs and HadarE copies), by member id
        self.seats: dict[str, Seat] = {}
        self.state: dict = {}
        self.checker = FairnessChecker() if self.config.check_fairness else None
        self.knowledge = Knowledge(self.config.knowledge, self.types, [j.id for j in workload.jobs],
                                   self.config.knowledge_seed)
        #: per job, the types whose nodes hold its gang (what a controller knows without a tag)
        self.fits: dict[str, list[str]] = {}
        self.fitting = Fits(self.frame)
        check_length(workload, cluster, table, self.config, self.fitting)

    # ---------------------------------------------------------------- setup

    def _make_state(self, job: TraceJob) -> JobState:
        """A job's state; ``T_jk`` is 0 on the types whose nodes cannot hold its gang."""
        fits = self.fitting.types(job)
        self.fits[job.id] = fits
        thr = {k: (t if k in fits else 0.0) for k, t in job_throughputs(self.table, job, self.types).items()}
        uncons: dict[str, float] = {}
        if self.cluster.has_nodes:
            for k in self.types:
                name = f"{k}_unconsolidated"
                uncons[k] = self.table.lookup(job.job_type, job.gpus, name) if name in self.table.data else thr[k]
        st = JobState(job, thr, uncons, job.total_steps)
        self.seats[job.id] = st.seat
        return st

    @staticmethod
    def _group(job: TraceJob) -> tuple[str, str, int]:
        """What recurs (the learner's group): tenant + job type + GPUs (user + job name + GPUs)."""
        return (job.tenant, job.job_type, job.gpus)

    def _believed(self, s: JobState) -> dict[str, float]:
        return self.knowledge.believed(s.trace.id, self._group(s.trace), s.throughput, self.fits.get(s.trace.id))

    def _learn(self, done: list[JobState], ran: Sequence[JobState] = ()) -> None:
        """Tell the knowledge of jobs that held GPUs of a type they cannot run on (a failed
        run: no progress) and of jobs that finished (how long they ran on each type)."""
        if self.knowledge.spec.mode == "oracle":
            return
        for s in ran:
            for k, g in s.gpu_seconds.items():
                if g > 0 and s.throughput.get(k, 0.0) <= 0:
                    self.knowledge.failed(s.trace.id, self._group(s.trace), k)
        for s in done:
            self.knowledge.finished(s.trace.id, self._group(s.trace),
                                    {k: g / max(1, s.trace.gpus) for k, g in s.gpu_seconds.items()})
            if not self.knowledge.knows(s.trace.id):
                self.knowledge.ran(self._group(s.trace), s.attained_s,
                                   self.knowledge.time_limit(s.trace.id, self._alone_s(s)))

    @staticmethod
    def _alone_s(s: JobState) -> float:
        """The job's run time alone on its fastest type: what its user's time limit is written from."""
        return s.trace.total_steps / max(s.best, 1e-12)

    def _seen(self, s: JobState, now: float) -> Job:
        """Job ``s`` as the policy and the gang reservation see it at ``now``: its believed
        speeds and its size as :meth:`Knowledge.sizes` shows it (the true remaining work only
        for a job the knowledge knows; else a time limit), the one place the engine hands a
        job's state to a decision (issue 39: "only what a site knows")."""
        size, extra = self.knowledge.sizes(s.trace.id, s.remaining, self._alone_s(s), self._group(s.trace))
        return Job(
            id=s.trace.id,
            tenant=s.trace.tenant,
            gpus=s.trace.gpus,
            throughput=self._believed(s),
            remaining_work=size,
            age_s=now - s.trace.arrival_s,
            attained_s=s.attained_s,
            prev_type=s.seat.spot[0] if s.seat.spot else None,
            extra={"job_type": s.trace.job_type, **extra},
            gpus_per_node=s.shape.per_node,
            max_nodes=s.shape.max_nodes,
            spread_throughput=s.unconsolidated,
        )

    def _problem(self, active: list[JobState], now: float) -> Problem:
        jobs = tuple(self._seen(s, now) for s in active)
        tenants = {s.trace.tenant: self.workload.weight(s.trace.tenant) for s in active}
        return Problem(dict(self.cluster.capacity), tenants, jobs, self.nodes)

    def _speed(self, st: JobState, gpu_type: str, nodes: tuple[str, ...]) -> float:
        speed = st.throughput.get(gpu_type, 0.0)
        largest = self.largest_node.get(gpu_type, 0)
        if nodes and largest:
            if len(nodes) > math.ceil(st.trace.gpus / largest):
                speed = st.unconsolidated.get(gpu_type, speed)
            speed *= min(self.node_speed.get(n, 1.0) for n in nodes)
        return speed

    # ---------------------------------------------------------------- the loop

    def run(self) -> SimResult:
        cfg = self.config
        wall0 = time.perf_counter()
        fallbacks_before = self.table.fallback_count
        states: dict[str, JobState] = {}
        unschedulable: list[str] = []
        arrivals: deque[TraceJob] = deque(self.workload.jobs)
        active: list[JobState] = []
        samples: list[RoundSample] = []
        options = self._policy_options()
        counts = _SolveCounts()
        cache = _Cache(known=self.knowledge.version)
        ran_last: set[str] = set()
        t = self.workload.jobs[0].arrival_s if self.workload.jobs else 0.0

        def admit_until(limit: float) -> list[JobState]:
            """Admit the arrivals up to ``limit``; the schedulable ones are returned."""
            out = []
            while arrivals and arrivals[0].arrival_s <= limit:
                job = arrivals.popleft()
                st = states[job.id] = self._make_state(job)
                if st.best > 0:
                    out.append(st)
                else:
                    unschedulable.append(job.id)
            return out

        while arrivals or active:
            active.extend(admit_until(t + _EPS))
            if not active:
                if not arrivals:
                    break
                t = max(t, arrivals[0].arrival_s)
                continue
            if cfg.horizon_s is not None and t >= cfg.horizon_s:
                break

            problem, allocation, placed_problem, verdict = self._answer(cache, active, t, options, counts)
            forks = allocation.forks
            received = self._received(active, forks, states)
            placement = self._place(placed_problem, allocation, active, forks, received, t)
            replan = inround.replanner(self, options) if self.policy.replans and cfg.replan_in_round else None
            incoming = admit_until(t + cfg.round_s - _EPS) if cfg.fill_between_rounds or replan else []
            play = RoundPlay(t, cfg, self.cluster.capacity, self.nodes, self.seats, self._speed)
            service = {j: sum(v.values()) for j, v in received.items()}
            sample, ran_last = play.play(active, self._members(placement, forks, active), ran_last, incoming,
                                         placement.priority, service, placement.reserved, replan)
            samples.append(replace(sample, si_ok=verdict[0], ef_ok=verdict[1]))
            self._learn([s for s in active + incoming if s.end_s is not None], active + incoming)
            active = [s for s in active + incoming if s.end_s is None]
            t += cfg.round_s
            if len(samples) >= MAX_ROUNDS:
                raise too_long(len(samples), cfg.round_s, len(active))
            if self.progress:
                self.progress((len(states) - len(active)) / max(1, len(self.workload.jobs)))
            if self.where:
                self.where(t - self.workload.jobs[0].arrival_s, counts.solves, counts.reused)

        return self._result(states, samples, unschedulable, counts, time.perf_counter() - wall0,
                            self.table.fallback_count - fallbacks_before)

    def _result(self, states: Mapping[str, JobState], samples: list[RoundSample], unschedulable: list[str],
                counts: _SolveCounts, wall_seconds: float, throughput_fallbacks: int) -> SimResult:
        """The run's records (the unschedulable jobs left out) and its tallies."""
        return SimResult(
            policy=self.policy.name,
            records=[self._record(s) for s in states.values() if s.trace.id not in unschedulable],
            samples=samples,
            capacity=dict(self.cluster.capacity),
            wall_seconds=wall_seconds,
            solves=counts.solves,
            solve_seconds=counts.seconds,
            restarts=sum(s.restarts for s in states.values()),
            fallback_allocations=counts.fallbacks,
            unschedulable=unschedulable,
            throughput_fallbacks=throughput_fallbacks,
            work_done={s.trace.id: s.work_done for s in states.values()},
            reused_solutions=counts.reused,
        )

    def _policy_options(self) -> PolicyOptions:
        """What every solve of the run gets (its state carries a dynamic policy's memory); the
        policy's parameters at their simulation defaults (:func:`slurm_fair.policies.simulation_params`:
        oef's wall-time bound raised to a safety net) unless the run sets them."""
        cfg = self.config
        params = {**simulation_params(self.policy), **cfg.policy_params}
        return PolicyOptions(
            solver=cfg.solver, time_limit_s=cfg.time_limit_s, keep_lp_dir=cfg.keep_lp_dir,
            round_s=cfg.round_s, fork_sync=cfg.fork_sync, state=self.state, params=params,
        )

    def _answer(self, cache: "_Cache", active: list[JobState], t: float, options: PolicyOptions,
                counts: _SolveCounts) -> _Solved:
        """This round's answer: solved again when due (module docstring, *caching*), else the
        last one, restricted to this round's jobs when they changed within the staleness bound."""
        cfg = self.config
        # a dynamic policy is solved every resolve_every rounds; with bounded staleness at most
        # every stale_s seconds
        every = max(cfg.resolve_every, math.ceil(cfg.stale_s / cfg.round_s - _TOLERANCE_S))
        key = frozenset(s.trace.id for s in active)
        stale = cache.solved is None or key != cache.key
        due = self.policy.uses_history(options) and cache.rounds_since >= every
        due = due or cache.known != self.knowledge.version  # a failed run changed the belief
        cache.known = self.knowledge.version
        cache.rounds_since += 1
        if stale and not due and cache.solved is not None and \
                self._may_reuse(cache.solved, key, cache.key, t - cache.solved_at):
            if cache.reused is None or cache.reused[0] != key:
                previous = cache.reused[1] if cache.reused is not None else cache.solved
                cache.reused = (key, self._reuse(cache.solved, previous, active, t, options))
            counts.reused += 1
            return cache.reused[1]
        if stale or due:
            cache.solved = self._solve(active, t, options, counts)
            cache.key, cache.solved_at, cache.reused, cache.rounds_since = key, t, None, 1
        assert cache.solved is not None
        return cache.solved

    def _may_reuse(self, cached: _Solved, key: frozenset[str], solved_key: frozenset[str], age_s: float) -> bool:
        """Whether the last solution may stand although the active jobs changed (bounded
        staleness, :attr:`SimConfig.stale_s`; a dynamic policy is also due every ``stale_s``
        seconds whatever the jobs do), no copies (HadarE's forks name their
        parents), solved less than ``stale_s`` ago, and fewer than ``stale_changes`` of the
        active jobs arrived or left since."""
        cfg = self.config
        if cfg.stale_s <= 0 or age_s >= cfg.stale_s - _TOLERANCE_S or cached[1].forks:
            return False
        return len(key ^ solved_key) <= cfg.stale_changes * max(len(key), 1)

    def _reuse(self, cached: _Solved, previous: _Solved, active: list[JobState], t: float,
               options: PolicyOptions) -> _Solved:
        """The last allocation on this round's jobs: the shares of jobs that left are free, a
        job that arrived since has none and takes leftover GPUs on its fastest type (the
        rounding step's work conservation) until the next solve. A policy in two levels keeps
        its tenant-level bundles instead and shares them again among the jobs of the tenants
        whose jobs changed since the ``previous`` round (:mod:`.resplit`,
        :attr:`SimConfig.stale_resplit`). Fairness is checked on solved rounds only (a reused
        round's verdicts are None)."""
        problem = self._problem(active, t)
        ids = {j.id for j in problem.jobs}
        old = cached[1]
        x: Mapping[str, Mapping[str, float]] = {j: v for j, v in old.x.items() if j in ids}
        if self.config.stale_resplit and old.tenant_x is not None and \
                resplit.two_level_policy(self.policy, options):
            x = resplit.resplit(problem, resplit.bundles_of(cached[0], old.tenant_x), previous[1].x,
                                resplit.changed_tenants(previous[0], problem), self.policy.name, options)
        allocation = replace(old, x=x, nodes={j: v for j, v in old.nodes.items() if j in ids}, solve_seconds=0.0)
        return problem, allocation, problem, (None, None)

    def _solve(self, active: list[JobState], t: float, options: PolicyOptions, counts: _SolveCounts) -> _Solved:
        """The policy on the round's problem, its placed problem (HadarE's copies as jobs) and,
        when checking, the SI and EF verdicts of its answer; ``counts`` keeps the tally."""
        problem = self._problem(active, t)
        allocation = self.policy.allocate(problem, options)
        counts.solves += 1
        counts.seconds += allocation.solve_seconds
        counts.fallbacks += allocation.status == AllocationStatus.FALLBACK
        placed_problem = self._with_forks(problem, allocation, active)
        verdict: tuple[bool | None, bool | None] = (None, None)
        if self.checker is not None:
            verdict = self.checker.check(placed_problem, allocation.x, allocation.tenant_x)
        return problem, allocation, placed_problem, verdict

    def _received(self, active: list[JobState], forks: Mapping[str, str],
                  states: Mapping[str, JobState]) -> dict[str, dict[str, float]]:
        """Share of its rounds each member ran on each type (a copy: of its parent's rounds)."""
        received: dict[str, dict[str, float]] = {}
        for s in active:
            if s.rounds_in_system:
                received[s.trace.id] = {k: n / s.rounds_in_system for k, n in s.seat.rounds_on.items()}
        for cid, parent in forks.items():
            seat = self.seats.get(cid)
            if seat is not None and states[parent].rounds_in_system:
                received[cid] = {k: n / states[parent].rounds_in_system for k, n in seat.rounds_on.items()}
        return received

    def _place(self, problem: Problem, allocation: Allocation, active: list[JobState], forks: Mapping[str, str],
               received: Mapping[str, Mapping[str, float]], now: float) -> rounding.Placement:
        """The rounding step, told where every member ran in the previous round; a member that
        must not be stopped now (:meth:`_unstoppable`) keeps its GPUs (``fixed``)."""
        prev: dict[str, str] = {}
        prev_nodes: dict[str, dict[str, int]] = {}
        fixed: dict[str, str] = {}
        for mid in [s.trace.id for s in active] + list(forks):
            seat = self.seats.get(mid)
            if seat is not None and seat.spot is not None:
                prev[mid] = seat.spot[0]
                if seat.spot[1]:
                    prev_nodes[mid] = dict(seat.spot[1])
                if self._unstoppable(seat, now):
                    fixed[mid] = seat.spot[0]
        # modelling Slurm's requeue hold, stops are as expensive as the controller's: its rules,
        # a running job moved only when the move pays for its restart (slurm_fair.hysteresis)
        sticky = self.config.requeue_hold_s > 0
        moves = Moves(frozenset(prev), self._restart_cost_s) if sticky else None
        return rounding.place(problem, allocation, received, prev, prev_nodes, fixed, sticky=sticky,
                              overdue=inround.overdue(active, now, self.config, self.cluster.capacity, self._seen),
                              moves=moves)

    @property
    def _restart_cost_s(self) -> float:
        """What a stop costs a job: Slurm's hold and the restart latency."""
        return self.config.requeue_hold_s + self.config.restart_s

    def _unstoppable(self, seat: Seat, now: float) -> bool:
        """Still in its requeue hold or start latency, or started less than
        :func:`slurm_fair.hysteresis.min_run_s` ago (a round, longer when a restart costs more
        than a third of one).

        The controller never requeues a job before it has run that long since it
        last started (docs/controller.md); stopping it earlier would throw away the hold and the
        latency it paid, and two jobs taking turns on one node could then start for ever without
        progressing. With the defaults every start is at a round start and the latency shorter
        than a round, so this never applies; it does to jobs started by filling or after a hold.
        """
        min_run = min_run_s(self.config.round_s, self._restart_cost_s)
        return seat.ready_at > now + _EPS or now - seat.held_from < min_run - _TOLERANCE_S

    @staticmethod
    def _members(placement: rounding.Placement, forks: Mapping[str, str], active: list[JobState]) -> Placed:
        """Placed members grouped by job: ``{job: [(member, type, {node: gpus}), ...]}``."""
        ids = {s.trace.id for s in active}
        members: dict[str, list[tuple[str, str, Mapping[str, int]]]] = {}
        for member_id, gpu_type in placement.types.items():
            parent = forks.get(member_id, member_id)
            if parent in ids:
                members.setdefault(parent, []).append((member_id, gpu_type, placement.node_gpus.get(member_id, {})))
        return members

    def _with_forks(self, problem: Problem, allocation: Allocation, active: list[JobState]) -> Problem:
        """The problem the rounding step sees: the active jobs plus any copies the policy forked."""
        forks = allocation.forks
        if not forks:
            return problem
        by_id = {j.id: j for j in problem.jobs}
        copies = [
            Job(id=cid, tenant=by_id[parent].tenant, gpus=by_id[parent].gpus, throughput=by_id[parent].throughput,
                extra={"fork_of": parent}, gpus_per_node=by_id[parent].gpus_per_node,
                max_nodes=by_id[parent].max_nodes)
            for cid, parent in sorted(forks.items())
            if parent in by_id
        ]
        return Problem(problem.gpu_types, problem.tenants, problem.jobs + tuple(copies), problem.nodes)

    def _record(self, s: JobState) -> JobRecord:
        main = max(s.gpu_seconds, key=lambda k: s.gpu_seconds[k]) if s.gpu_seconds else None
        return JobRecord(
            job_id=s.trace.id, tenant=s.trace.tenant, arrival_s=s.trace.arrival_s, start_s=s.start_s,
            end_s=s.end_s, gpu_type=main, gpus=s.trace.gpus, weight=self.workload.weight(s.trace.tenant),
            work=s.trace.total_steps, throughput=s.throughput, gpu_seconds=s.gpu_seconds,
            run_s=s.attained_s,
        )


def simulate(
    workload: Workload,
    cluster: ClusterSpec,
    table: ThroughputTable,
    policy: PolicyInfo,
    config: SimConfig | None = None,
    progress: Callable[[float], None] | None = None,
    where: Callable[[float, int, int], None] | None = None,
) -> SimResult:
    """Run ``policy`` over ``workload`` on ``cluster`` (see the module docstring)."""
    return Simulator(workload, cluster, table, policy, config, progress, where).run()
