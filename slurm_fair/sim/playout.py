"""One round played out in time: who holds which GPUs when, and what the real system charges.

The policy and the rounding step decide at a round's start (:mod:`.engine`); this module turns
that placement into time inside the round, the way Slurm runs it:

* **Start latency** (``restart_s``): a member (a job, or a HadarE copy) that did not hold exactly
  the same type and GPUs per node in the previous round pays it before it progresses (its
  first start included). It holds its GPUs meanwhile.
* **Requeue hold** (``requeue_hold_s``): a member that held GPUs in the previous round and does
  not hold exactly the same ones now was requeued at the round start; Slurm keeps a requeued
  job pending for ``cred_expire + 1`` s, so it may start again only that long after, then pays
  the start latency. Its GPUs are set aside for it during the hold but not counted as used.
* **Filling between rounds** (``fill_between_rounds``): Slurm starts a pending job within a
  second or two of GPUs being free, not at the next round. Completions and arrivals inside the
  round (and the end of a hold) are events; at each, the waiting jobs eligible then are started
  on the GPUs free then (the gang must fit per node), in the round's priority order, each on
  its fastest type that fits, paying the start latency.

Progress is exact: a job progresses at ``factor x sum of its members' speeds``, each member from
its own ``ready`` time on (:func:`finish_time`, :func:`progress_in`); GPU-seconds are counted
from each member's start (after any hold) to the job's end or the round's end. A start latency
or hold that outlasts the round carries into the next one (``Seat``) when the member keeps its
GPUs. Who holds which GPUs meanwhile is :mod:`.holdings`.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Collection, Iterable, Mapping

from ..gangs import Shape
from ..model import NodeCapacity
from .holdings import FreeGpus, Group, Load, Member
from .metrics import RoundSample
from .workload import TraceJob

if TYPE_CHECKING:  # the engine imports this module
    from .engine import SimConfig

_EPS = 1e-9

#: where a member runs: (GPU type, ((node, gpus), ...) sorted); no nodes without node structure
Spot = tuple[str, tuple[tuple[str, int], ...]]


def spot_of(gpu_type: str, node_gpus: Mapping[str, int]) -> Spot:
    return gpu_type, tuple(sorted(node_gpus.items()))


@dataclass
class Seat:
    """What the simulator remembers of one member (a job or a copy) from round to round."""

    #: where it held GPUs in the previous round (None: it did not)
    spot: Spot | None = None
    #: absolute times its current run holds its GPUs from (after any hold) and progresses from
    held_from: float = 0.0
    ready_at: float = 0.0
    #: when it last left GPUs it held (Slurm's requeue), None if never
    requeued_at: float | None = None
    #: rounds it held GPUs of each type (the rounding step's received share)
    rounds_on: dict[str, int] = field(default_factory=dict)


@dataclass
class JobState:
    """A job of the run: its trace entry, speeds and progress."""

    trace: TraceJob
    #: ``T_jk``, 0 where the type cannot hold the gang
    throughput: dict[str, float]
    unconsolidated: dict[str, float]
    remaining: float
    seat: Seat = field(default_factory=Seat)
    attained_s: float = 0.0
    rounds_in_system: int = 0
    start_s: float | None = None
    end_s: float | None = None
    gpu_seconds: dict[str, float] = field(default_factory=dict)
    restarts: int = 0
    #: work completed so far (steps); equals total_steps at the end (conservation tests)
    work_done: float = 0.0

    @property
    def id(self) -> str:
        return self.trace.id

    @property
    def best(self) -> float:
        return max(self.throughput.values(), default=0.0)

    @property
    def shape(self) -> Shape:
        return self.trace.shape

    def fastest_types(self) -> list[str]:
        """Types it can run on, fastest first (then by name)."""
        return sorted((k for k, t in self.throughput.items() if t > 0), key=lambda k: (-self.throughput[k], k))


def finish_time(members: list[tuple[float, float]], remaining: float, factor: float, round_s: float) -> float | None:
    """Time into the round at which ``remaining`` work is done by ``members`` = (speed, overhead)
    pairs working together at ``factor`` x their summed speed, or None if not within the round.

    Progress is piecewise linear: each member contributes from its own overhead on.
    """
    events = sorted((o, s) for s, o in members if s > 0 and o < round_s)
    done, speed, t = 0.0, 0.0, 0.0
    for o, s in events:
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


#: speed of a job on a type and nodes (the engine's node factors and consolidation rule)
SpeedFn = Callable[[JobState, str, tuple[str, ...]], float]
#: a job's members placed at the round start: (member id, GPU type, {node: gpus})
Placed = Mapping[str, list[tuple[str, str, Mapping[str, int]]]]

# in-round event kinds; at one instant completions are handled before arrivals
_DONE, _ARRIVAL, _ELIGIBLE = 0, 1, 2


#: a policy's in-round plan: (time, eligible waiting jobs, free GPUs) -> [(job, type, {node: gpus})]
Replan = Callable[[float, list["JobState"], FreeGpus], list[tuple["JobState", str, Mapping[str, int]]]]


class RoundPlay:
    """Plays one round from ``t0``: starts the placement, runs the in-round events when filling
    is on, and books progress, GPU-seconds and the round's sample."""

    def __init__(
        self,
        t0: float,
        config: SimConfig,
        capacity: Mapping[str, int],
        nodes: tuple[NodeCapacity, ...],
        seats: dict[str, Seat],
        speed: SpeedFn,
    ) -> None:
        self.t0 = t0
        self.cfg = config
        self.round_s = config.round_s
        self.capacity = capacity
        self.free = FreeGpus(capacity, nodes)
        self.seats = seats
        self.speed = speed
        self.groups: list[Group] = []
        self.load = Load()
        self.peak = Load()
        self.busy_gpu_s = 0.0
        self.events: list[tuple[float, int, int, Group | JobState]] = []
        self.seq = itertools.count()
        self.waiting: dict[str, JobState] = {}
        self.order: dict[str, tuple[float, float, str]] = {}
        self.replan: Replan | None = None

    # ------------------------------------------------------------------ entry point

    def play(
        self,
        active: list[JobState],
        placed: Placed,
        ran_last: set[str],
        incoming: Iterable[JobState] = (),
        priority: Mapping[str, float] | None = None,
        service: Mapping[str, float] | None = None,
        reserved: Mapping[str, Mapping[str, int]] | None = None,
        replan: Replan | None = None,
    ) -> tuple[RoundSample, set[str]]:
        """Play the round; return its sample (without fairness verdicts) and the members that
        held GPUs in it.

        ``placed[job]``: the job's members placed at the round start as (member, type,
        ``{node: gpus}``); ``ran_last``: members that held GPUs in the previous round;
        ``incoming``: jobs arriving inside the round (started by filling only); ``priority``
        and ``service``: the rounding step's order of this round for filling; ``reserved``
        (``Placement.reserved``): GPUs kept idle for overdue jobs, never filled this round;
        ``replan`` (a policy that re-plans inside a round, Hops): at every completion and arrival
        inside the round it chooses which waiting jobs start on the GPUs free then (before any
        filling).
        """
        self.replan = replan
        spots = {m: spot_of(k, ng) for ms in placed.values() for m, k, ng in ms}
        for mid in ran_last:
            if spots.get(mid) != self.seats[mid].spot:
                self.seats[mid].requeued_at = self.t0
        for s in active:
            s.rounds_in_system += 1
            if s.id in placed:
                self._start(s, placed[s.id], 0.0, ran_last)
            else:
                self.waiting[s.id] = s
        for k, on in (reserved or {}).items():
            self.free.change(k, {n: g for n, g in on.items() if n}, sum(on.values()), -1)
        fragmented = self._fragmented(active, placed)
        self.peak = self.load.copy()
        if self.events_on:
            self._schedule(incoming, priority or {}, service or {})
            self._run_events()
        ran = self._settle()
        for mid in ran_last - ran:
            self.seats[mid].spot = None
        sample = RoundSample(
            start_s=self.t0, duration_s=self.round_s, capacity=self.capacity, busy=self.peak.busy,
            busy_gpu_s=self.busy_gpu_s, effective_throughput=self.peak.eff, fragmented_gpus=fragmented,
            tenant_gpus=self.peak.tenants,
        )
        return sample, ran

    # ------------------------------------------------------------------ starts

    def _start(self, job: JobState, members: list[tuple[str, str, Mapping[str, int]]], at: float,
               ran_last: Collection[str] = frozenset()) -> None:
        """Give a job its members from offset ``at``: each continues (same spot as in the
        previous round) or (re)starts after any requeue hold and the start latency."""
        runs: list[Member] = []
        for mid, k, node_gpus in members:
            seat = job.seat if mid == job.id else self.seats.setdefault(mid, Seat())
            if mid in ran_last and seat.spot == spot_of(k, node_gpus):
                start, ready = max(at, seat.held_from - self.t0), max(at, seat.ready_at - self.t0)
            else:
                hold_end = (seat.requeued_at + self.cfg.requeue_hold_s - self.t0) if seat.requeued_at is not None else at
                start = max(at, hold_end)
                ready = start + self.cfg.restart_s
                job.restarts += int(ready > at)
                seat.held_from, seat.ready_at = self.t0 + start, self.t0 + ready
            seat.rounds_on[k] = seat.rounds_on.get(k, 0) + 1
            self.free.change(k, node_gpus, job.trace.gpus, -1)
            runs.append(Member(mid, k, dict(node_gpus), start, ready, self.speed(job, k, tuple(sorted(node_gpus)))))
        factor = (1.0 - self.cfg.fork_sync) if len(runs) > 1 else 1.0
        done_at = finish_time([(m.speed, m.ready) for m in runs], job.remaining, factor, self.round_s)
        group = Group(job, runs, factor, done_at, at)
        self.groups.append(group)
        self.load.change(group, +1)
        if done_at is not None and self.events_on:
            self._push(done_at, _DONE, group)

    def _fragmented(self, active: list[JobState], placed: Mapping[str, object]) -> int:
        """Idle GPUs of the types some waiting job could use, after the round-start placement."""
        waiting_types = {k for s in active if s.id not in placed for k, thr in s.throughput.items() if thr > 0}
        return sum(c - self.load.busy.get(k, 0) for k, c in self.capacity.items() if k in waiting_types)

    # ------------------------------------------------------------------ events (filling)

    def _push(self, at: float, kind: int, what: Group | JobState) -> None:
        heapq.heappush(self.events, (at, kind, next(self.seq), what))

    def _schedule(self, incoming: Iterable[JobState], priority: Mapping[str, float], service: Mapping[str, float]) -> None:
        """Events besides completions: arrivals, and the end of holds inside the round; the fill
        order of every job (the rounding's priority, then the least served, then the id)."""
        for s in list(self.waiting.values()) + list(incoming):
            self.order[s.id] = (-priority.get(s.id, 0.0), service.get(s.id, 0.0), s.id)
        for s in incoming:
            self._push(s.trace.arrival_s - self.t0, _ARRIVAL, s)
        for s in self.waiting.values():
            eligible = self._eligible_at(s)
            if 0 < eligible < self.round_s:
                self._push(eligible, _ELIGIBLE, s)

    def _eligible_at(self, job: JobState) -> float:
        """Offset from which Slurm may start the job (the end of its requeue hold)."""
        if job.seat.requeued_at is None:
            return 0.0
        return job.seat.requeued_at + self.cfg.requeue_hold_s - self.t0

    def _run_events(self) -> None:
        while self.events:
            at = self.events[0][0]
            if at >= self.round_s - _EPS:
                break
            while self.events and self.events[0][0] <= at + _EPS:
                _, kind, _, what = heapq.heappop(self.events)
                if isinstance(what, Group):
                    self._release(what)
                elif kind == _ARRIVAL:
                    what.rounds_in_system += 1  # in the system from now on
                    self.waiting[what.id] = what
                # _ELIGIBLE: nothing to book, the fill below considers the job from now on
            if self.replan is not None:
                self._replan(at)
            if self.cfg.fill_between_rounds:
                self._fill(at)
            if self.load.total > self.peak.total:
                self.peak = self.load.copy()

    def _release(self, group: Group) -> None:
        for m in group.members:
            self.free.change(m.gpu_type, m.node_gpus, group.job.trace.gpus, +1)
        self.load.change(group, -1)

    @property
    def events_on(self) -> bool:
        """Whether completions and arrivals inside the round are events (filling or re-plans)."""
        return self.cfg.fill_between_rounds or self.replan is not None

    def _replan(self, at: float) -> None:
        """The policy's in-round plan on the GPUs free now, for the eligible waiting jobs."""
        eligible = [s for s in self.waiting.values() if self._eligible_at(s) <= at + _EPS]
        if not eligible or not self.free.any or self.replan is None:
            return
        for job, k, nodes in self.replan(self.t0 + at, eligible, self.free):
            if job.id not in self.waiting:
                continue
            got = nodes if nodes and self._free_on(k, nodes, job.trace.gpus) else self.free.fit(job.shape, k)
            if got is not None:
                del self.waiting[job.id]
                self._start(job, [(job.id, k, got)], at)

    def _free_on(self, gpu_type: str, nodes: Mapping[str, int], gpus: int) -> bool:
        """Whether ``nodes`` (``{node: gpus}``) are free now on ``gpu_type``."""
        if self.free.by_type.get(gpu_type, 0) < gpus:
            return False
        free = self.free.by_node.get(gpu_type, {})
        return sum(nodes.values()) == gpus and all(free.get(n, 0) >= g for n, g in nodes.items())

    def _fill(self, at: float) -> None:
        """Start the eligible waiting jobs that fit now, in the round's order."""
        if not self.free.any:
            return
        for job in sorted(self.waiting.values(), key=lambda s: self.order[s.id]):
            if self._eligible_at(job) > at + _EPS:
                continue
            for k in job.fastest_types():
                got = self.free.fit(job.shape, k)
                if got is not None:
                    del self.waiting[job.id]
                    self._start(job, [(job.id, k, got)], at)
                    break
            if not self.free.any:
                return

    # ------------------------------------------------------------------ booking

    def _settle(self) -> set[str]:
        """Book every group's progress, GPU-seconds and run time; return the members that held
        GPUs in this round (their seats now name where)."""
        self.busy_gpu_s = 0.0
        ran: set[str] = set()
        for group in self.groups:
            job, end = group.job, (self.round_s if group.done_at is None else group.done_at)
            g = job.trace.gpus
            for m in group.members:
                held = max(0.0, end - m.start)
                job.gpu_seconds[m.gpu_type] = job.gpu_seconds.get(m.gpu_type, 0.0) + g * held
                self.busy_gpu_s += g * held
                self.seats[m.id].spot = spot_of(m.gpu_type, m.node_gpus)
                ran.add(m.id)
            first = min(m.start for m in group.members)
            job.attained_s += max(0.0, end - first)
            if job.start_s is None and first < self.round_s:
                job.start_s = self.t0 + first
            if group.done_at is None:
                step = progress_in([(m.speed, m.ready) for m in group.members], group.factor, self.round_s)
                job.remaining -= step
                job.work_done += step
            else:
                job.work_done += job.remaining
                job.remaining = 0.0
                job.end_s = self.t0 + group.done_at
        return ran
