"""The round-based simulation loop: the same Problem, policies and rounding step as the controller.

Each round (``round_s``, default 360 s like Gavel):

1. jobs whose arrival time has come join; with nothing to run, time jumps to the next arrival
   (the round grid restarts there);
2. a :class:`~slurm_fair.model.Problem` of the active jobs is built: throughputs per cluster
   type from the table, ``remaining_work``, ``age_s``, ``attained_s``, ``prev_type``, tenant
   weights, and the node structure when the cluster has nodes;
3. the policy allocates (see *caching* below) with a per-policy ``options.state`` kept for the
   whole run;
4. :func:`slurm_fair.rounding.place` turns the allocation into this round's placement, given each
   job's received share of rounds per type and its previous type;
5. each placed job progresses at its speed on that placement for ``round_s`` minus the restart
   overhead it pays; a job finishing inside the round ends at the exact time
   ``round start + overhead + remaining / speed``.

Speed on a placement = ``T_jk`` from the table x the slowest node factor of its nodes; a gang
spread over more nodes than ``ceil(g / gpus_per_node)`` runs at Gavel's ``<type>_unconsolidated``
throughput when the table has one.

Restart overhead (default 30 s, ``restart_s``): paid in a round by every job that did not run on
exactly the same type and nodes in the previous round, including its first start (loading a
checkpoint costs the same as loading the initial model).

Forks (HadarE): a policy may add copy jobs to its allocation, listing them in
``allocation.info["forks"] = {copy_id: parent_id}``. Copies are placed by the same rounding step
as ordinary jobs. A job with ``m >= 2`` members (itself and/or copies) running progresses at
``(1 - fork_sync) * sum_i speed_i`` (each member after its own overhead): copies train on
separate data shards and average parameters, paying ``fork_sync`` (default 10 %) for it.

Caching: a policy registered with ``dynamic=False`` is solved again only when the set of active
jobs changes (its inputs are otherwise the same); a dynamic one every ``resolve_every`` rounds
(default 1, i.e. every round) and whenever the set changes.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Mapping

from .. import rounding
from ..model import Allocation, Job, NodeCapacity, Problem
from ..policies import PolicyInfo, PolicyOptions
from ..throughput_table import ThroughputTable
from .cluster import ClusterSpec
from .fairness_check import FairnessChecker
from .metrics import JobRecord, RoundSample
from .workload import TraceJob, Workload

_EPS = 1e-9


@dataclass(frozen=True)
class SimConfig:
    round_s: float = 360.0
    restart_s: float = 30.0
    fork_sync: float = 0.10
    resolve_every: int = 1
    #: stop after this much simulated time (None: run until every job finished)
    horizon_s: float | None = None
    check_fairness: bool = True
    solver: str = "auto"
    time_limit_s: float = 30.0
    keep_lp_dir: str | None = None


@dataclass
class _JobState:
    trace: TraceJob
    throughput: dict[str, float]
    unconsolidated: dict[str, float]
    remaining: float
    attained_s: float = 0.0
    rounds_in_system: int = 0
    rounds_on: dict[str, int] = field(default_factory=dict)
    prev: tuple[str, tuple[str, ...]] | None = None
    start_s: float | None = None
    end_s: float | None = None
    gpu_seconds: dict[str, float] = field(default_factory=dict)
    restarts: int = 0
    #: work completed so far (steps); equals total_steps at the end (conservation tests)
    work_done: float = 0.0

    @property
    def best(self) -> float:
        return max(self.throughput.values(), default=0.0)


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


def job_throughputs(table: ThroughputTable, job: TraceJob, types: list[str]) -> dict[str, float]:
    """``T_jk`` of a trace job on each cluster type (the table's fallback applies)."""
    return {k: table.lookup(job.job_type, job.gpus, k) for k in types}


def finish_time(members: list[tuple[float, float]], remaining: float, factor: float, round_s: float) -> float | None:
    """Time into the round at which ``remaining`` work is done by ``members`` = (speed, overhead)
    pairs working together at ``factor`` x their summed speed, or None if not within the round.

    Progress is piecewise linear: each member contributes from its own overhead on.
    """
    events = sorted((o, s) for s, o in members if s > 0 and o < round_s)
    done, speed, t = 0.0, 0.0, 0.0
    for i, (o, s) in enumerate(events):
        # segment [t, o) at the current speed
        if speed > 0 and done + speed * (o - t) >= remaining - _EPS:
            return t + (remaining - done) / speed
        done += speed * (o - t)
        t = o
        speed += s * factor
    if speed > 0 and done + speed * (round_s - t) >= remaining - _EPS:
        return t + (remaining - done) / speed
    return None


def progress_in(members: list[tuple[float, float]], factor: float, seconds: float) -> float:
    """Work done by ``members`` over ``seconds`` (each after its own overhead)."""
    return factor * sum(s * max(0.0, seconds - o) for s, o in members)


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
    ) -> None:
        self.workload = workload
        self.cluster = cluster
        self.table = table
        self.policy = policy
        self.config = config or SimConfig()
        self.progress = progress
        self.types = sorted(cluster.capacity)
        self.nodes: tuple[NodeCapacity, ...] = cluster.nodes()
        self.node_speed = {n.name: n.speed for n in self.nodes}
        self.state: dict = {}
        self.checker = FairnessChecker() if self.config.check_fairness else None

    # ---------------------------------------------------------------- setup

    def _schedulable(self, thr: Mapping[str, float], gpus: int) -> bool:
        return any(t > 0 and gpus <= self.cluster.capacity[k] for k, t in thr.items())

    def _make_state(self, job: TraceJob) -> _JobState:
        thr = job_throughputs(self.table, job, self.types)
        uncons: dict[str, float] = {}
        if self.cluster.gpus_per_node:
            for k in self.types:
                name = f"{k}_unconsolidated"
                uncons[k] = self.table.lookup(job.job_type, job.gpus, name) if name in self.table.data else thr[k]
        return _JobState(job, thr, uncons, job.total_steps)

    def _problem(self, active: list[_JobState], now: float) -> Problem:
        jobs = tuple(
            Job(
                id=s.trace.id,
                tenant=s.trace.tenant,
                gpus=s.trace.gpus,
                throughput=s.throughput,
                remaining_work=s.remaining,
                age_s=now - s.trace.arrival_s,
                attained_s=s.attained_s,
                prev_type=s.prev[0] if s.prev else None,
                extra={"job_type": s.trace.job_type},
            )
            for s in active
        )
        tenants = {s.trace.tenant: self.workload.weight(s.trace.tenant) for s in active}
        return Problem(dict(self.cluster.capacity), tenants, jobs, self.nodes)

    def _speed(self, st: _JobState, gpu_type: str, nodes: tuple[str, ...]) -> float:
        speed = st.throughput.get(gpu_type, 0.0)
        gpn = self.cluster.gpus_per_node
        if nodes and gpn:
            if len(nodes) > math.ceil(st.trace.gpus / gpn):
                speed = st.unconsolidated.get(gpu_type, speed)
            speed *= min(self.node_speed.get(n, 1.0) for n in nodes)
        return speed

    # ---------------------------------------------------------------- the loop

    def run(self) -> SimResult:
        cfg = self.config
        wall0 = time.perf_counter()
        fallbacks_before = self.table.fallback_count
        states: dict[str, _JobState] = {}
        unschedulable: list[str] = []
        arrivals: deque[TraceJob] = deque(self.workload.jobs)
        active: list[_JobState] = []
        samples: list[RoundSample] = []
        options = PolicyOptions(
            solver=cfg.solver, time_limit_s=cfg.time_limit_s, keep_lp_dir=cfg.keep_lp_dir,
            round_s=cfg.round_s, state=self.state,
        )
        self.state.setdefault("fork_sync", cfg.fork_sync)
        cache_key: frozenset[str] | None = None
        cached: tuple[Problem, Allocation, Problem, tuple[bool | None, bool | None]] | None = None
        rounds_since_solve = 0
        solves, solve_seconds, fallback_allocs = 0, 0.0, 0
        copy_prev: dict[str, tuple[str, tuple[str, ...]]] = {}
        copy_rounds: dict[str, dict[str, int]] = {}
        t = self.workload.jobs[0].arrival_s if self.workload.jobs else 0.0

        while arrivals or active:
            while arrivals and arrivals[0].arrival_s <= t + _EPS:
                job = arrivals.popleft()
                st = self._make_state(job)
                states[job.id] = st
                if self._schedulable(st.throughput, job.gpus):
                    active.append(st)
                else:
                    unschedulable.append(job.id)
            if not active:
                if not arrivals:
                    break
                t = max(t, arrivals[0].arrival_s)
                continue
            if cfg.horizon_s is not None and t >= cfg.horizon_s:
                break

            key = frozenset(s.trace.id for s in active)
            stale = cached is None or key != cache_key
            if self.policy.dynamic and rounds_since_solve >= cfg.resolve_every:
                stale = True
            if stale:
                problem = self._problem(active, t)
                allocation = self.policy.allocate(problem, options)
                solves += 1
                solve_seconds += allocation.solve_seconds
                fallback_allocs += allocation.status == "fallback"
                placed_problem = self._with_forks(problem, allocation, active)
                verdict: tuple[bool | None, bool | None] = (None, None)
                if self.checker is not None:
                    verdict = self.checker.check(placed_problem, allocation.x)
                cached = (problem, allocation, placed_problem, verdict)
                cache_key = key
                rounds_since_solve = 0
            assert cached is not None
            problem, allocation, placed_problem, verdict = cached
            rounds_since_solve += 1

            received: dict[str, dict[str, float]] = {}
            prev: dict[str, str] = {}
            for s in active:
                if s.rounds_in_system:
                    received[s.trace.id] = {k: n / s.rounds_in_system for k, n in s.rounds_on.items()}
                if s.prev:
                    prev[s.trace.id] = s.prev[0]
            forks: Mapping[str, str] = allocation.info.get("forks", {}) or {}
            for cid, parent in forks.items():
                if cid in copy_rounds and states[parent].rounds_in_system:
                    received[cid] = {k: n / states[parent].rounds_in_system for k, n in copy_rounds[cid].items()}
                if cid in copy_prev:
                    prev[cid] = copy_prev[cid][0]
            placement = rounding.place(placed_problem, allocation, received, prev)

            samples.append(self._advance(t, active, placement, forks, copy_prev, copy_rounds, verdict))
            active = [s for s in active if s.end_s is None]
            t += cfg.round_s
            if self.progress:
                finished = len(states) - len(active)
                self.progress(finished / max(1, len(self.workload.jobs)))

        records = [self._record(s) for s in states.values() if s.trace.id not in unschedulable]
        return SimResult(
            policy=self.policy.name,
            records=records,
            samples=samples,
            capacity=dict(self.cluster.capacity),
            wall_seconds=time.perf_counter() - wall0,
            solves=solves,
            solve_seconds=solve_seconds,
            restarts=sum(s.restarts for s in states.values()),
            fallback_allocations=fallback_allocs,
            unschedulable=unschedulable,
            throughput_fallbacks=self.table.fallback_count - fallbacks_before,
            work_done={s.trace.id: s.work_done for s in states.values()},
        )

    def _with_forks(self, problem: Problem, allocation: Allocation, active: list[_JobState]) -> Problem:
        """The problem the rounding step sees: the active jobs plus any copies the policy forked."""
        forks: Mapping[str, str] = allocation.info.get("forks", {}) or {}
        if not forks:
            return problem
        by_id = {j.id: j for j in problem.jobs}
        copies = [
            Job(id=cid, tenant=by_id[parent].tenant, gpus=by_id[parent].gpus, throughput=by_id[parent].throughput,
                extra={"fork_of": parent})
            for cid, parent in sorted(forks.items())
            if parent in by_id
        ]
        return Problem(problem.gpu_types, problem.tenants, problem.jobs + tuple(copies), problem.nodes)

    def _advance(
        self,
        t: float,
        active: list[_JobState],
        placement: rounding.Placement,
        forks: Mapping[str, str],
        copy_prev: dict[str, tuple[str, tuple[str, ...]]],
        copy_rounds: dict[str, dict[str, int]],
        verdict: tuple[bool | None, bool | None],
    ) -> RoundSample:
        cfg = self.config
        by_id = {s.trace.id: s for s in active}
        members: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {}
        for member_id, gpu_type in placement.types.items():
            parent = forks.get(member_id, member_id)
            if parent in by_id:
                members.setdefault(parent, []).append((member_id, gpu_type, tuple(placement.nodes.get(member_id, ()))))

        busy: dict[str, int] = {}
        busy_gpu_s = 0.0
        tenant_gpus: dict[str, int] = {}
        eff = 0.0
        new_copy_prev: dict[str, tuple[str, tuple[str, ...]]] = {}
        for s in active:
            s.rounds_in_system += 1
            mine = members.get(s.trace.id, [])
            if not mine:
                s.prev = None
                continue
            runs: list[tuple[float, float]] = []
            factor = (1.0 - cfg.fork_sync) if len(mine) > 1 else 1.0
            for member_id, gpu_type, nodes in mine:
                before = s.prev if member_id == s.trace.id else copy_prev.get(member_id)
                overhead = 0.0 if before == (gpu_type, nodes) else min(cfg.restart_s, cfg.round_s)
                s.restarts += overhead > 0
                speed = self._speed(s, gpu_type, nodes)
                runs.append((speed, overhead))
                eff += factor * speed / s.best if s.best > 0 else 0.0
                if member_id == s.trace.id:
                    s.rounds_on[gpu_type] = s.rounds_on.get(gpu_type, 0) + 1
                else:
                    rounds = copy_rounds.setdefault(member_id, {})
                    rounds[gpu_type] = rounds.get(gpu_type, 0) + 1
                    new_copy_prev[member_id] = (gpu_type, nodes)
            if s.start_s is None:
                s.start_s = t
            done_at = finish_time(runs, s.remaining, factor, cfg.round_s)
            ran = cfg.round_s if done_at is None else done_at
            for (member_id, gpu_type, nodes), _ in zip(mine, runs):
                g = s.trace.gpus
                busy[gpu_type] = busy.get(gpu_type, 0) + g
                tenant_gpus[s.trace.tenant] = tenant_gpus.get(s.trace.tenant, 0) + g
                s.gpu_seconds[gpu_type] = s.gpu_seconds.get(gpu_type, 0.0) + g * ran
                busy_gpu_s += g * ran
            s.attained_s += ran
            own = [m for m in mine if m[0] == s.trace.id]
            s.prev = (own[0][1], own[0][2]) if own else None
            if done_at is None:
                step = progress_in(runs, factor, cfg.round_s)
                s.remaining -= step
                s.work_done += step
            else:
                s.work_done += s.remaining
                s.remaining = 0.0
                s.end_s = t + done_at
        copy_prev.clear()
        copy_prev.update(new_copy_prev)

        waiting_types = {
            k for s in active if s.trace.id not in members for k, thr in s.throughput.items() if thr > 0
        }
        fragmented = sum(c - busy.get(k, 0) for k, c in self.cluster.capacity.items() if k in waiting_types)
        si_ok, ef_ok = verdict
        return RoundSample(
            start_s=t, duration_s=cfg.round_s, capacity=self.cluster.capacity, busy=busy, busy_gpu_s=busy_gpu_s,
            effective_throughput=eff, fragmented_gpus=fragmented, si_ok=si_ok, ef_ok=ef_ok,
            tenant_gpus=tenant_gpus,
        )

    def _record(self, s: _JobState) -> JobRecord:
        main = max(s.gpu_seconds, key=lambda k: s.gpu_seconds[k]) if s.gpu_seconds else None
        return JobRecord(
            job_id=s.trace.id, tenant=s.trace.tenant, arrival_s=s.trace.arrival_s, start_s=s.start_s,
            end_s=s.end_s, gpu_type=main, gpus=s.trace.gpus, weight=self.workload.weight(s.trace.tenant),
            work=s.trace.total_steps, throughput=s.throughput, gpu_seconds=s.gpu_seconds,
        )


def simulate(
    workload: Workload,
    cluster: ClusterSpec,
    table: ThroughputTable,
    policy: PolicyInfo,
    config: SimConfig | None = None,
    progress: Callable[[float], None] | None = None,
) -> SimResult:
    """Run ``policy`` over ``workload`` on ``cluster`` (see the module docstring)."""
    return Simulator(workload, cluster, table, policy, config, progress).run()
