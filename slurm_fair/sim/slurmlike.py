"""Slurm's own scheduling of a history's jobs: the ``agnostic`` arm of a replay.

The simulator's ``agnostic`` policy is slurm-fair run with every GPU valued alike: a max-min
time-sharing that stops and restarts jobs between rounds and starts a job on its fastest free
type. That is not what a site's Slurm did, so a replay of its accounting scored with it departs
from the history (most on a congested cluster, where time-sharing favours short jobs). This
module is what a stock Slurm (``sched/backfill``, ``select/cons_tres``) does with the same jobs,
so the replay's baseline is the site's scheduler and a policy's gain is a gain over it:

* **priority**: ``fifo`` (``priority/basic``: submit order, Slurm 22.05's default) or
  ``fairshare`` (``priority/multifactor``: a fair-share factor of the usage decayed with a 7-day
  half-life, and an age factor; the weights of :class:`SlurmModel`). The fair-share factor is
  Fair Tree's (:mod:`.fairtree`: accounts, then their users, ranked by level fair-share; Slurm's
  default) or, with ``fairshare="classic"`` (``PriorityFlags=NO_FAIR_TREE``), the classic
  ``2^(-U/S)`` of the tenant's usage; usage is GPU-seconds, each type's at its
  ``TRESBillingWeights`` (``SlurmModel.billing``) when the site bills types differently;
* **main scheduler** (on every submit and end): pending jobs in priority order, each started
  when its gang fits now; the first that does not fit stops the pass (one partition);
* **backfill** (every ``bf_interval_s`` after a change): the pending jobs in priority order (at
  most ``bf_max_job_test``) against a plan of when GPUs free up *by time limits*: a job that fits
  now without delaying any earlier job's reservation starts, the others reserve the earliest
  time they fit within ``bf_window_s``;
* **nodes**: in Slurm's order (weight, then name: the history's node names), a gang of ``N``
  nodes takes the first ``N`` with ``G / N`` free GPUs, whatever their type (``--gres=gpu:G``
  asks for no type); a gang spanning types runs at its slowest;
* **never preempts**; a job is ended at its **time limit** (``TIMEOUT``), as Slurm does, when
  it would need longer on the GPUs it got than on those it had.

Pure: no Slurm call; the records are :class:`~.metrics.JobRecord` scored by ``summarize``.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from ..estimates.gavel import ThroughputTable
from .engine import SimResult
from .fairtree import FAIRSHARE_ALGORITHMS, fair_tree, flat_tree
from .metrics import JobRecord
from .workload import TraceJob, Workload

#: ``--slurm-priority``: how the site's Slurm orders pending jobs
PRIORITIES = ("fifo", "fairshare")


@dataclass(frozen=True)
class SlurmModel:
    """The scheduler parameters (Slurm's defaults where Slurm has one)."""

    priority: str = "fifo"
    #: ``SchedulerParameters=bf_interval`` (s)
    bf_interval_s: float = 30.0
    #: ``bf_window`` (s): no reservation further out
    bf_window_s: float = 86400.0
    #: ``bf_max_job_test``
    bf_max_job_test: int = 500
    #: the fair-share factor (:data:`.fairtree.FAIRSHARE_ALGORITHMS`): ``fair-tree`` (Slurm's
    #: default) or ``classic`` (``PriorityFlags=NO_FAIR_TREE``)
    fairshare: str = "fair-tree"
    #: ``PriorityDecayHalfLife`` (s), for ``fairshare``
    decay_half_life_s: float = 7 * 86400.0
    #: ``TRESBillingWeights`` per GPU type: the usage a GPU-second there charges (a type not
    #: named: 1, every type alike when empty)
    billing: Mapping[str, float] = field(default_factory=dict)
    #: ``PriorityWeightFairshare``, ``PriorityWeightAge``, ``PriorityMaxAge`` (s)
    weight_fairshare: float = 10000.0
    weight_age: float = 1000.0
    max_age_s: float = 7 * 86400.0


@dataclass(frozen=True)
class Node:
    """One node in Slurm's order."""

    name: str
    gpu_type: str
    gpus: int


@dataclass
class _Run:
    job: TraceJob
    nodes: list[int]
    per: int
    start: float
    planned_end: float  # start + time limit: what backfill plans with
    end: float  # when it really ends (done or at its limit)
    gpu_type: str
    timed_out: bool


class _Usage:
    """Each (tenant, user)'s GPU-seconds, decayed (``fairshare``): updated lazily at each event."""

    def __init__(self, half_life: float, users: Mapping[str, str], billing: Mapping[str, float],
                 nodes: Sequence[Node]) -> None:
        self.half_life = half_life
        self.billing, self.nodes = billing, nodes
        self.users = users
        self.value: dict[tuple[str, str], float] = {}
        self.at = 0.0

    def key(self, job: TraceJob) -> tuple[str, str]:
        return job.tenant, self.users.get(job.id, job.tenant)

    def advance(self, now: float, running: Sequence[_Run]) -> None:
        dt = now - self.at
        if dt <= 0:
            return
        decay = 0.5 ** (dt / self.half_life)
        for t in self.value:
            self.value[t] *= decay
        for r in running:  # accrued over the step (close enough for a factor that moves over days)
            k = self.key(r.job)
            self.value[k] = self.value.get(k, 0.0) + self.rate(r) * dt
        self.at = now

    def rate(self, r: _Run) -> float:
        """The usage a run charges a second: its GPUs at their type's billing weight."""
        if not self.billing:
            return float(r.job.gpus)
        return sum(r.per * self.billing.get(self.nodes[x].gpu_type, 1.0) for x in r.nodes)

    def by_tenant(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for (t, _), v in self.value.items():
            out[t] = out.get(t, 0.0) + v
        return out


def replay_slurm(workload: Workload, nodes: Sequence[Node], table: ThroughputTable,
                 limits: Mapping[str, float | None], model: SlurmModel = SlurmModel(),
                 zero_speed: Mapping[str, float] | None = None,
                 users: Mapping[str, str] | None = None) -> tuple[list[JobRecord], float]:
    """Every job's record under the modelled Slurm, and the wall seconds it took; a job whose
    gang fits no node set is left out (the engine counts it unschedulable). ``zero_speed``: the
    speed per type of a job whose table says 0 there (it ran there and failed: Slurm does not
    know, and runs it there at that speed). ``users``: each job's user (Fair Tree ranks the users
    of an account; default: one user per tenant)."""
    t0 = time.perf_counter()
    sched = _Scheduler(workload, list(nodes), table, limits, model, zero_speed or {}, users or {})
    sched.run()
    return sched.records, time.perf_counter() - t0


class _Scheduler:
    def __init__(self, workload: Workload, nodes: list[Node], table: ThroughputTable,
                 limits: Mapping[str, float | None], model: SlurmModel, zero_speed: Mapping[str, float],
                 users: Mapping[str, str]) -> None:
        if model.fairshare not in FAIRSHARE_ALGORITHMS:
            raise ValueError(f"unknown fair-share algorithm {model.fairshare!r}")
        self.w, self.nodes, self.table, self.model = workload, nodes, table, model
        known = [v for v in limits.values() if v]
        #: a job without a limit gets the partition's longest seen (Slurm's MaxTime stands in)
        self.default_limit = max(known) if known else math.inf
        self.limits = {j.id: (limits.get(j.id) or self.default_limit) for j in workload.jobs}
        self.free = [n.gpus for n in nodes]
        self.largest = max(self.free, default=0)
        self.running: dict[str, _Run] = {}
        self.pending: list[TraceJob] = []
        self.records: list[JobRecord] = []
        self.usage = _Usage(model.decay_half_life_s, users, model.billing, nodes)
        #: each tenant's users (Fair Tree's leaves): every user that has a job, from the start
        self.tenant_users: dict[str, set[str]] = {}
        for j in workload.jobs:
            self.tenant_users.setdefault(j.tenant, set()).add(self.usage.key(j)[1])
        self.types = sorted({n.gpu_type for n in nodes})
        self.speed = {j.id: {k: table.lookup(j.job_type, j.gpus, k) for k in self.types} for j in workload.jobs}
        self.run_speed = {jid: {k: v if v > 0 else zero_speed.get(k, 0.0) for k, v in s.items()}
                          for jid, s in self.speed.items()}
        self.shares = self._shares()

    def _shares(self) -> dict[str, float]:
        tenants = sorted({j.tenant for j in self.w.jobs})
        raw = {t: float(self.w.weights.get(t, 1.0)) for t in tenants}
        total = sum(raw.values()) or 1.0
        return {t: v / total for t, v in raw.items()}

    def _fits(self, job: TraceJob) -> bool:
        per, n = _shape(job, self.largest)
        return sum(1 for node in self.nodes if node.gpus >= per) >= n

    # -- the loop -------------------------------------------------------------------------------
    def run(self) -> None:
        # in time order, whatever the workload's order (a trace need not be sorted)
        arrivals = sorted((j for j in self.w.jobs if self._fits(j)), key=lambda j: (j.arrival_s, j.id))
        ends: list[tuple[float, int, str]] = []
        i, seq = 0, 0
        dirty_since: float | None = None
        while i < len(arrivals) or ends or self.pending:
            t_arr = arrivals[i].arrival_s if i < len(arrivals) else math.inf
            t_end = ends[0][0] if ends else math.inf
            t_bf = (math.floor(dirty_since / self.model.bf_interval_s) + 1) * self.model.bf_interval_s \
                if dirty_since is not None and self.pending else math.inf
            now = min(t_arr, t_end, t_bf)
            if now == math.inf:
                break  # pending jobs that can never start (cannot happen: unfit jobs are left out)
            if self.model.priority == "fairshare":
                self.usage.advance(now, list(self.running.values()))
            if now == t_bf and now < t_end and now < t_arr:
                seq = self._backfill(now, ends, seq)
                dirty_since = None
                continue
            while ends and ends[0][0] <= now:
                _, _, jid = heapq.heappop(ends)
                self._finish(self.running.pop(jid))
            while i < len(arrivals) and arrivals[i].arrival_s <= now:
                self.pending.append(arrivals[i])
                i += 1
            seq = self._main(now, ends, seq)
            if not self.pending:  # nothing waits: the next backfill tick that matters is after now
                dirty_since = None
            elif dirty_since is None:  # backfill runs every interval, whatever comes meanwhile
                dirty_since = now

    def _priority_order(self, now: float) -> list[TraceJob]:
        if self.model.priority == "fifo":
            return sorted(self.pending, key=lambda j: (j.arrival_s, j.id))
        m = self.model
        fs = self._fair_tree() if m.fairshare == "fair-tree" else self._classic()

        def prio(j: TraceJob) -> float:
            return m.weight_fairshare * fs(j) + m.weight_age * min((now - j.arrival_s) / m.max_age_s, 1.0)

        return sorted(self.pending, key=lambda j: (-prio(j), j.arrival_s, j.id))

    def _classic(self) -> Callable[[TraceJob], float]:
        """``2^(-U/S)`` of the job's tenant (``PriorityFlags=NO_FAIR_TREE``, a flat tree)."""
        usage = self.usage.by_tenant()
        total = sum(usage.values()) or 1.0

        def fs(j: TraceJob) -> float:
            s = self.shares[j.tenant]
            return 2 ** (-(usage.get(j.tenant, 0.0) / total) / s) if s > 0 else 0.0
        return fs

    def _fair_tree(self) -> Callable[[TraceJob], float]:
        """The job's user's Fair Tree rank over the users (root -> tenants -> their users)."""
        tree = flat_tree(self.w.weights, self.usage.value, self.tenant_users)
        factors = fair_tree(tree)
        return lambda j: factors[self.usage.key(j)]

    def _main(self, now: float, ends: list, seq: int) -> int:
        for job in self._priority_order(now):
            chosen = self._place_now(job)
            if chosen is None:
                break
            seq = self._start(job, chosen, now, ends, seq)
        return seq

    def _place_now(self, job: TraceJob) -> list[int] | None:
        per, n = _shape(job, self.largest)
        chosen = [x for x, f in enumerate(self.free) if f >= per][:n]
        return chosen if len(chosen) == n else None

    def _start(self, job: TraceJob, chosen: list[int], now: float, ends: list, seq: int) -> int:
        per, _ = _shape(job, self.largest)
        for x in chosen:
            self.free[x] -= per
        kinds = {self.nodes[x].gpu_type for x in chosen}
        speeds = self.run_speed[job.id]
        slowest = min(kinds, key=lambda k: (speeds[k], k))
        rate = speeds[slowest]
        need = job.total_steps / rate if rate > 0 else math.inf
        limit = self.limits[job.id]
        run = min(need, limit)
        if run == math.inf:  # no limit known and a type it cannot run on: it fails at once
            run = 0.0
        r = _Run(job, chosen, per, now, now + limit, now + run, slowest, need > limit)
        self.running[job.id] = r
        self.pending.remove(job)
        seq += 1
        heapq.heappush(ends, (r.end, seq, job.id))
        return seq

    def _finish(self, r: _Run) -> None:
        for x in r.nodes:
            self.free[x] += r.per
        run = r.end - r.start
        by_type: dict[str, float] = {}
        for x in r.nodes:
            k = self.nodes[x].gpu_type
            by_type[k] = by_type.get(k, 0.0) + r.per * run
        self.records.append(JobRecord(
            job_id=r.job.id, tenant=r.job.tenant, arrival_s=r.job.arrival_s, start_s=r.start, end_s=r.end,
            gpu_type=r.gpu_type, gpus=r.job.gpus, weight=float(self.w.weights.get(r.job.tenant, 1.0)),
            work=r.job.total_steps, throughput=self.speed[r.job.id], gpu_seconds=by_type, run_s=run))

    # -- backfill -------------------------------------------------------------------------------
    def _backfill(self, now: float, ends: list, seq: int) -> int:
        """Slurm's backfill pass: reservations by time limits, in priority order."""
        m = self.model
        busy: list[list[tuple[float, float, int]]] = [[] for _ in self.nodes]  # (from, to, GPUs)
        for r in self.running.values():
            for x in r.nodes:
                busy[x].append((now, max(r.planned_end, now + 1.0), r.per))
        cut = now + m.bf_window_s
        for job in self._priority_order(now)[:m.bf_max_job_test]:
            per, n = _shape(job, self.largest)
            length = self.limits[job.id]
            times = sorted({now, *(b for lst in busy for _, b, _ in lst if now < b <= cut)})
            for t in times:
                chosen = [x for x, node in enumerate(self.nodes)
                          if node.gpus - _peak(busy[x], t, t + length) >= per][:n]
                if len(chosen) < n:
                    continue
                if t == now:
                    seq = self._start(job, chosen, now, ends, seq)
                    stop = self.running[job.id].planned_end
                else:
                    stop = t + length
                for x in chosen:
                    busy[x].append((t, max(stop, t + 1.0), per))
                break
        return seq


def _peak(intervals: list[tuple[float, float, int]], a: float, b: float) -> int:
    """The most GPUs held at once on a node during ``[a, b)``."""
    points = [a, *(s for s, e, _ in intervals if a < s < b)]
    return max((sum(g for s, e, g in intervals if s <= p < e) for p in points), default=0)


def _shape(job: TraceJob, largest: int = 0) -> tuple[int, int]:
    """GPUs per node and nodes of a job's gang (``sbatch -N n --gres=gpu:G/n``; a job of no
    known node count on as few of the ``largest`` nodes as hold it)."""
    n = job.nodes or (max(1, math.ceil(job.gpus / largest)) if largest else 1)
    return math.ceil(job.gpus / n), n


def simulate_slurm(workload: Workload, nodes: Sequence[Node], table: ThroughputTable,
                   limits: Mapping[str, float | None], capacity: Mapping[str, int], model: SlurmModel = SlurmModel(),
                   zero_speed: Mapping[str, float] | None = None, round_s: float = 360.0,
                   name: str = "agnostic", users: Mapping[str, str] | None = None) -> SimResult:
    """:func:`replay_slurm` as a run of the engine's shape (rounds sampled from the records, as
    the history's are), so ``simulate``'s table and what-if score it like every policy."""
    from .metrics import samples_from_records

    records, wall = replay_slurm(workload, nodes, table, limits, model, zero_speed, users)
    done = {r.job_id for r in records}
    unfit = [j.id for j in workload.jobs if j.id not in done]
    return SimResult(policy=name, records=records, samples=samples_from_records(records, dict(capacity), round_s),
                     capacity=dict(capacity), wall_seconds=wall, solves=0, solve_seconds=0.0, restarts=0,
                     fallback_allocations=0, unschedulable=unfit, throughput_fallbacks=0,
                     work_done={r.job_id: r.work or 0.0 for r in records})
