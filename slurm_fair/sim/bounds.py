"""How long a simulation may run: refused before it starts when it provably needs too long.

A run is a loop of rounds until every job has finished, so a workload that needs a billion rounds
(``total_steps = 1e300``, ``--round-s 1e-9``) would never end: no traceback, no message, a hang.
A lower bound of the run's rounds is cheap to compute from the workload alone; above
:data:`MAX_ROUNDS` the run is refused with what to change, naming the job when one job alone is
the cause. The engine also stops at :data:`MAX_ROUNDS` (a lower bound cannot see contention).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..errors import Finding, InputError, UserError
from ..estimates.gavel import ThroughputTable
from ..model import Job, Problem
from .cluster import ClusterSpec
from .workload import TraceJob, Workload

if TYPE_CHECKING:  # the engine imports this module
    from .engine import SimConfig

#: most rounds one run may take (a year of Gavel's 6-minute rounds is 87,600)
MAX_ROUNDS = 1_000_000


class Fits:
    """The types of ``frame`` (the cluster without jobs) whose nodes can hold a job's gang
    (:meth:`Problem.holds`, the one home of that rule), memoised by the gang's shape: a history
    of 100,000 jobs has a handful of shapes, and asking the nodes per job cost minutes."""

    def __init__(self, frame: Problem) -> None:
        self.frame = frame
        self._memo: dict[tuple[int, int | None, int | None], list[str]] = {}

    def types(self, job: TraceJob) -> list[str]:
        shape = job.shape
        key = (job.gpus, shape.per_node, shape.max_nodes)
        if key not in self._memo:
            probe = Job(job.id, job.tenant, job.gpus, {}, gpus_per_node=shape.per_node, max_nodes=shape.max_nodes)
            self._memo[key] = [k for k in sorted(self.frame.gpu_types) if self.frame.holds(probe, k)]
        return self._memo[key]


def best_speed(job: TraceJob, table: ThroughputTable, fits: Fits) -> float:
    """``max_k T_jk`` over the types whose nodes can hold the job's gang; 0 when none can (the
    engine does not simulate such a job)."""
    return max((table.lookup(job.job_type, job.gpus, k) for k in fits.types(job)), default=0.0)


def check_length(workload: Workload, cluster: ClusterSpec, table: ThroughputTable, config: "SimConfig",
                 fits: Fits) -> None:
    """Raise when the run needs more than :data:`MAX_ROUNDS` rounds.

    The lower bound of its busy time: every job is in the system at least from its arrival for
    its run time alone on its fastest type (the union of those intervals; idle time between
    jobs is skipped by the engine, not simulated), and the cluster needs at least all jobs'
    GPU-seconds over its GPUs; up to the horizon. Rounds are that over ``round_s``."""
    spans: list[tuple[float, float, TraceJob]] = []
    gpu_seconds = 0.0
    for job in workload.jobs:
        best = best_speed(job, table, fits)
        if best > 0:
            spans.append((job.arrival_s, job.arrival_s + job.total_steps / best, job))
            gpu_seconds += job.total_steps / best * job.gpus
    if not spans:
        return
    busy, end = 0.0, -math.inf
    for start, stop, _ in sorted(spans, key=lambda s: s[0]):
        busy += max(0.0, stop - max(start, end))
        end = max(end, stop)
    busy = max(busy, gpu_seconds / max(1, cluster.total_gpus))
    if config.horizon_s is not None:
        busy = min(busy, max(0.0, config.horizon_s - spans[0][0]))
    rounds = busy / config.round_s
    if rounds <= MAX_ROUNDS:
        return
    start, stop, job = max(spans, key=lambda s: s[1] - s[0])
    alone = (stop - start) / config.round_s
    if alone > MAX_ROUNDS and config.horizon_s is None:
        what = (f"job {job.id} runs {stop - start:.3g} s alone on its fastest GPU type, {alone:.3g} rounds of "
                f"{config.round_s:g} s: more than the {MAX_ROUNDS:,} a run may take")
        source, _, line = job.where.rpartition(" line ")
        if source:  # a trace's job: its file and line
            raise InputError(source, [Finding(f"line {line}", f"total_steps: {what} (fewer steps, a longer "
                                                               "--round-s, or a --horizon-h)")])
        raise UserError(f"{what}: give a longer --round-s, a --horizon-h or a --max-duration-h")
    raise UserError(f"the run needs at least {rounds:.3g} rounds of {config.round_s:g} s ({busy:.3g} s of busy time), "
                    f"more than the {MAX_ROUNDS:,} a run may take: give a longer --round-s, a --horizon-h, or "
                    "fewer jobs")


def too_long(rounds: int, round_s: float, left: int) -> UserError:
    """The error of a run that reached :data:`MAX_ROUNDS` rounds (contention the bound missed)."""
    return UserError(f"the run reached {rounds:,} rounds of {round_s:g} s with {left} job(s) left: give a longer "
                     "--round-s, a --horizon-h, or fewer jobs")
