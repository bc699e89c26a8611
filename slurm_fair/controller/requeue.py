"""Which running jobs the controller requeues, and why (pure).

Slurm cannot move a running job: the only way to change who runs where is ``scontrol requeue``
(the job is stopped, pending again, and Slurm holds it for its credential lifetime + 1 s before
it may start again; it resumes from its checkpoint). A requeue costs that hold plus a restart, so
the controller requeues a job for one of two reasons only, and never a job that has not opted in
(``--requeue`` *and* ``fair:preemptible``) or that ran less than ``min_run`` since it last
started or was last requeued by us (hysteresis):

**make room** (time-sharing, at round boundaries): a pending job that this round's placement
runs on type ``k``, and that this cycle sends to ``k``, cannot start in the GPUs free on ``k``
now, but can once some running jobs that the placement does not keep on ``k`` are stopped.
The fewest such jobs are chosen, those furthest ahead of their allocation (lowest deficit
priority) first; a job of the pending job's own tenant only when the swap pays
(:func:`slurm_fair.hysteresis.swap_pays`: the pending job is predicted to finish sooner, or has
waited its own run). A pending job that would not fit even then frees nothing. A job of another
tenant than the pending job's is chosen only out of its tenant's surplus over its equal share's
value (:mod:`.standing`, a :class:`Budget`; a gang larger than its tenant's share of the type
while any surplus is left).

**move up** (any cycle): a job runs on a type much slower than another type whose GPUs are idle
now and stay idle after this cycle's plan (nobody the plan starts needs them), its gang fits
there, and the expected gain beats the cost: with ``a`` the time it has run so far (the usual
estimate of what is left for a job of unknown length), ``a * (1 - n_cur / n_up) > cost``, where
``cost`` is Slurm's requeue hold plus a restart (``[controller].requeue_cost_s``): the rule of
:func:`slurm_fair.hysteresis.move_pays`, which the rounding step applies to the placement's
moves too, and the simulator alike.

Free GPUs are counted per node (a node's GPUs minus the larger of what Slurm reports used and
what the snapshot's running jobs hold) in the rounding step's :class:`~slurm_fair.rounding.Pool`,
so gangs are fitted exactly as the rounding step fits them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Collection, Mapping, Sequence

from ..model import Problem
from ..estimates.tags import preemptible
from ..hysteresis import move_pays
from ..rounding import Pool
from ..slurm.model import Snapshot, SlurmJob

#: pending reasons under which a job cannot start now, whatever GPUs are free
NOT_STARTABLE = ("JobHeldUser", "JobHeldAdmin", "Dependency", "DependencyNeverSatisfied", "BeginTime",
                 "ReqNodeNotAvail", "PartitionDown", "PartitionInactive", "AssocMaxJobsLimit",
                 "BadConstraints")


@dataclass(frozen=True)
class Taker:
    """A pending job this cycle starts on ``gpu_type`` (placed and sent there)."""

    job: SlurmJob
    gpu_type: str


def eligible(sj: SlurmJob, now: float, min_run: float, last_requeued: Mapping[str, float]) -> bool:
    """Opted in, and has run at least ``min_run`` since its start and our last requeue of it."""
    if not sj.running or not sj.gpu_type_running or not preemptible(sj):
        return False
    since = max(sj.start_time.timestamp() if sj.start_time else now, last_requeued.get(sj.job_id, -math.inf))
    return now - since >= min_run - 1e-6


def free_gpus(snapshot: Snapshot) -> Pool:
    """The GPUs free per node of the schedulable nodes, now."""
    held: dict[tuple[str, str], int] = {}
    for sj in snapshot.jobs:
        if sj.running and sj.gpu_type_running:
            for n, g in sj.gpus_on_nodes().items():
                held[(n, sj.gpu_type_running)] = held.get((n, sj.gpu_type_running), 0) + g
    free: dict[str, dict[str, int]] = {}
    for node in snapshot.nodes:
        if not node.schedulable:
            continue
        for k, total in node.gpus_total.items():
            used = max(int(node.gpus_used.get(k, 0)), held.get((node.name, k), 0))
            free.setdefault(k, {})[node.name] = max(int(total) - used, 0)
    return Pool.of_nodes(free)


def _on(job: SlurmJob, hosts: Callable[[SlurmJob, str], bool]) -> Callable[[str], bool]:
    """The node test of ``job`` (the nodes whose CPUs and memory can host a part of it)."""
    return lambda node: hosts(job, node)


def make_room(
    pool: Pool,
    takers: Sequence[Taker],
    victims: Mapping[str, Sequence[SlurmJob]],
    hosts: Callable[[SlurmJob, str], bool],
    seated: set[str] | None = None,
    budget: Budget | None = None,
    may: Callable[[SlurmJob, SlurmJob], bool] | None = None,
) -> dict[str, list[str]]:
    """Jobs to requeue -> the takers they make room for (the rule of the module docstring).

    ``pool`` is updated in place (takers' GPUs taken, victims' GPUs given back); ``victims[k]``
    are the eligible running jobs on ``k`` that the plan does not keep there, in the order they
    should be given up (furthest ahead of their allocation first). ``seated`` (when given)
    receives the takers that got their GPUs. ``budget``: how much of each tenant's value may be
    requeued for other tenants' jobs (the displacement right, :mod:`.standing`); a victim it does
    not cover is skipped. ``may(taker, victim)``: whether ``victim`` may be stopped for
    ``taker`` at all (a rotation inside a tenant: :func:`slurm_fair.hysteresis.swap_pays`).
    """
    chosen: dict[str, list[str]] = {}
    for t in takers:
        k, sj = t.gpu_type, t.job
        if pool.take(sj.shape, k, _on(sj, hosts)) is not None:
            if seated is not None:
                seated.add(sj.job_id)
            continue
        left = [v for v in victims.get(k, ()) if v.job_id not in chosen and (budget is None or budget.covers(sj, [v]))
                and (may is None or may(sj, v))]
        pick = _fewest(sj, k, pool, left, hosts)
        if pick is None or (budget is not None and not budget.covers(sj, pick)):
            continue
        for v in pick:
            chosen[v.job_id] = [sj.job_id]
            pool.give(k, v.gpus_on_nodes())
        if budget is not None:
            budget.spend(sj, pick)
        pool.take(sj.shape, k, _on(sj, hosts))  # it fits: _fewest checked it
        if seated is not None:
            seated.add(sj.job_id)
    return chosen


@dataclass
class Budget:
    """What each tenant may lose to other tenants' jobs under the displacement right this
    cycle: its surplus over its equal share's value (:mod:`.standing`), spent as its jobs are
    requeued for another tenant's job."""

    surplus: dict[str, float]
    #: running job -> its value to its tenant now (``n`` on the type it runs on)
    worth: Mapping[str, float]
    #: rotation (make room at a round): tenant -> its equal share, GPUs per type; a gang larger
    #: than its tenant's share of the type may go while any surplus is left (a gang cannot be
    #: split), every other job only within the surplus. None (the displacement right): every
    #: job only within the surplus
    share: Mapping[str, Mapping[str, float]] | None = None
    #: running job -> tenants that may not take it (:func:`.plan.turn_owed`: its turn, given by
    #: requeuing their jobs less than ``min_run`` ago)
    protected: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def _need(self, taker: SlurmJob, jobs: Sequence[SlurmJob]) -> dict[str, float]:
        need: dict[str, float] = {}
        for v in jobs:
            if v.account != taker.account:
                need[v.account] = need.get(v.account, 0.0) + self.worth.get(v.job_id, math.inf)
        return need

    def _oversize(self, v: SlurmJob) -> bool:
        """A gang larger than its tenant's equal share of the type it runs on (rotation only)."""
        if self.share is None:
            return False
        g = v.gpu_request.total if v.gpu_request else 0
        return g > self.share.get(v.account, {}).get(v.gpu_type_running or "", 0.0) + 1e-9

    def covers(self, taker: SlurmJob, jobs: Sequence[SlurmJob]) -> bool:
        if any(taker.account in self.protected.get(v.job_id, ()) for v in jobs):
            return False
        need = self._need(taker, jobs)
        return all(self.surplus.get(u, 0.0) >= n - 1e-9
                   or (self.surplus.get(u, 0.0) > 1e-9 and any(self._oversize(v) for v in jobs if v.account == u))
                   for u, n in need.items())

    def spend(self, taker: SlurmJob, jobs: Sequence[SlurmJob]) -> None:
        for u, n in self._need(taker, jobs).items():
            self.surplus[u] = self.surplus.get(u, 0.0) - n


def _fewest(sj: SlurmJob, k: str, pool: Pool, candidates: Sequence[SlurmJob],
            hosts: Callable[[SlurmJob, str], bool]) -> list[SlurmJob] | None:
    """The fewest ``candidates`` (taken in their order, then pruned) whose GPUs on ``k`` let
    ``sj`` fit there."""
    on = _on(sj, hosts)
    trial = pool.copy()
    picked: list[SlurmJob] = []
    for v in candidates:
        if trial.fit(sj.shape, k, on) is not None:
            break
        held = v.gpus_on_nodes()
        if not any(on(n) for n in held):
            continue  # its GPUs are on nodes the taker cannot use
        picked.append(v)
        trial.give(k, held)
    if trial.fit(sj.shape, k, on) is None:
        return None
    for v in list(reversed(picked)):  # give back any job the taker turns out not to need
        less = trial.copy()
        less.hold(k, v.gpus_on_nodes())
        if less.fit(sj.shape, k, on) is not None:
            picked.remove(v)
            trial = less
    return picked


def move_up(
    pool: Pool,
    running: Sequence[SlurmJob],
    problem: Problem,
    cost_s: float,
    min_gain: float,
    hosts: Callable[[SlurmJob, str], bool],
    reach: Mapping[str, Collection[str]],
) -> dict[str, str]:
    """Running jobs to requeue so they restart on a faster idle type -> that type.

    ``running``: the eligible jobs (opted in, run long enough), the longest-running first (the
    largest expected gain). ``pool`` must already exclude what this cycle's plan starts;
    it is updated for every move chosen. ``min_gain``: the faster type must be at least this
    much faster (``n_up >= n_cur * (1 + min_gain)``). ``reach[job]``: the types the plan can send
    the job to (a partition of that type holds it), decided by the plan before, so this step
    never calls back into it.
    """
    pjobs = {j.id: j for j in problem.jobs}
    moves: dict[str, str] = {}
    for sj in running:
        job = pjobs.get(sj.job_id)
        cur = sj.gpu_type_running
        if job is None or cur is None:
            continue
        n_cur = job.normalised(cur)
        attained = job.attained_s
        best: tuple[float, str, dict[str, int]] | None = None
        for k in sorted(problem.gpu_types):
            n_up = job.normalised(k)
            if k == cur or n_up < n_cur * (1.0 + min_gain) or k not in reach.get(sj.job_id, ()):
                continue
            if not move_pays(attained, n_cur, n_up, cost_s, min_gain):
                continue
            got = pool.fit(sj.shape, k, _on(sj, hosts))
            if got is not None and (best is None or n_up > best[0]):
                best = (n_up, k, got)
        if best is not None:
            _, k, got = best
            moves[sj.job_id] = k
            pool.hold(k, got)
            pool.give(cur, sj.gpus_on_nodes())
    return moves
