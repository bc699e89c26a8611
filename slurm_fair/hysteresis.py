"""No thrash: when stopping or moving a running job pays for its restart (one rule for the
simulator and the controller).

On Slurm a running job is stopped by a requeue: it waits out Slurm's hold and restarts from its
checkpoint, a cost ``cost_s`` of lost time (``[controller].requeue_cost_s``; in the simulator
``requeue_hold_s + restart_s``). Two decisions stop a running job, and each has its rule here:

**Rotation** (time-sharing: the job is stopped so that a job behind its allocation runs). The
gain is the other job's turn, which cannot be weighed against the cost in the job's own
seconds; what can be bounded is the share of a job's time that restarts eat. A job is stopped
only after it ran at least :func:`min_run_s` since it last started: ``max(round, cost x (1 -
s) / s)`` with ``s`` = :data:`MAX_RESTART_SHARE`, so that a restart costs at most that share of
the time from one start to the next. With Gavel's costs (a 30 s restart, 360 s rounds) that is
one round, as before; on the testbed (a 13 s requeue in 12 s rounds) about three rounds
instead of one: rotating every round there spent more time restarting than running.

**Move** (the job is stopped to restart on another type). The job itself gains or loses
speed, so the rule is the gain over a horizon: with ``a`` the time it ran so far (the usual
estimate of what is left for a job of unknown length: a job that ran ``a`` is expected to
run about ``a`` more), a move from ``cur`` to ``new`` pays when ``a x (1 - n_cur / n_new) >
cost`` and ``new`` is at least ``1 + min_gain`` times as fast (:func:`move_pays`). A move to a
slower type never pays: the rounding step keeps such a job where it is
(:func:`slurm_fair.rounding.place` with :class:`Moves`) instead of rotating it between types,
which is what moved a 4-GPU job five times (P100, K80, P100, K80, V100) on the held-out replay.

**Rotation inside a tenant** (the job is stopped for another job of its own tenant). The tenant
holds the same GPUs before and after, so the swap gains it nothing and costs it a restart; what
it can buy is the order its jobs finish in. It pays (:func:`swap_pays`) when the waiting job is
predicted to finish sooner than the running one (shortest remaining first lowers the tenant's
mean completion time), or when the waiting job has waited at least a round and at least as long
as its own predicted run (its latency ratio passed 1: the bound that keeps a long job from
waiting behind a stream of shorter ones). Sizes are what a site knows (:func:`slurm_fair.fairness.
known_remaining_s`: the time limit and the group's history); a job of unknown size rotates as
before. On the testbed two 4-GPU jobs of one tenant swapped V100 and P100 eight times in five
minutes, and a 1-GPU job 87 % through its run was stopped for a job of its tenant ten times longer.
The controller applies it (:mod:`slurm_fair.controller.standing`, the plan's make room); the
simulator still rotates inside a tenant at every round (not yet ported: its figures are the
policy's schedule without this rule).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .fairness import known_remaining_s, wait_s
from .model import Job

#: a restart may cost at most this share of the time from one start of a job to the next
MAX_RESTART_SHARE = 0.25
#: a move needs a type at least this much faster (``[controller].move_up_gain``'s default)
MIN_MOVE_GAIN = 0.25


def min_run_s(round_s: float, cost_s: float, share: float = MAX_RESTART_SHARE) -> float:
    """How long a job runs before it may be stopped for rotation: at least a round, and long
    enough that a restart of ``cost_s`` is at most ``share`` of a start-to-start period."""
    if not 0.0 < share < 1.0:
        raise ValueError(f"restart share must be in (0, 1), got {share!r}")
    return max(float(round_s), max(0.0, float(cost_s)) * (1.0 - share) / share)


def min_run_or(configured_s: float | None, round_s: float, cost_s: float) -> float:
    """The minimum run in force: the configured one (``[controller] min_run_s``) when set, else
    :func:`min_run_s`."""
    return float(configured_s) if configured_s else min_run_s(round_s, cost_s)


def move_gain_s(horizon_s: float, n_cur: float, n_new: float) -> float:
    """Seconds of the current type's run a move saves over ``horizon_s`` of running there."""
    if n_new <= 0 or n_cur <= 0:
        return 0.0
    return horizon_s * (1.0 - n_cur / n_new)


def move_pays(horizon_s: float, n_cur: float, n_new: float, cost_s: float,
              min_gain: float = MIN_MOVE_GAIN) -> bool:
    """A running job should move from a type of speed ``n_cur`` to one of ``n_new``: much
    faster, and the time saved over the horizon beats the cost of the restart."""
    return n_new >= n_cur * (1.0 + min_gain) and move_gain_s(horizon_s, n_cur, n_new) > cost_s


@dataclass(frozen=True)
class Moves:
    """What the rounding step needs to hold running jobs where they are: the jobs running now
    (``running``), a restart's cost and the least speed-up worth a move."""

    running: frozenset[str] = field(default_factory=frozenset)
    cost_s: float = 0.0
    min_gain: float = MIN_MOVE_GAIN


def swap_pays(taker: Job, victim: Job, round_s: float) -> bool:
    """A running ``victim`` may be stopped so that ``taker``, a waiting job of the same tenant,
    runs (module docstring, "Rotation inside a tenant"): the taker's predicted remaining run is
    shorter than the victim's, or it waited at least a round and at least its own predicted run,
    or either size is unknown."""
    t_rem, v_rem = known_remaining_s(taker), known_remaining_s(victim)
    if t_rem is None or v_rem is None or t_rem < v_rem:
        return True
    waited = wait_s(taker.age_s or 0.0, taker.attained_s)
    return waited >= max(float(round_s), t_rem)
