"""FFT's fairness-compensation state: each job's deficit against its isolated progress.

The state lives in ``options.state["fft"]`` as plain JSON (the controller persists it between
cycles; the simulator keeps it for the run): per job, the last observation (``age``,
``attained``, ``remaining``), the isolated rate in force since then (``rate``) and the
accumulated deficit (``deficit``, seconds of full-speed progress).

No clock is read: the time elapsed since the last observation is the growth of the job's
``age_s``, so the ledger is right whether it is called every round (simulator) or every
controller cycle (shorter than a round).

The update, for every job at every call (``R`` = ``round_s``)::

    dt       = age_now - age_last                       (first sight: the whole age)
    fair     = rate_last * dt                           (isolated progress it was owed)
    got      = (remaining_last - remaining_now) / T_j^max   when the remaining work is known,
               else (attained_now - attained_last) * n_{j, prev_type}
    W        = age_now - attained_now                   (time it has waited so far)
    deficit  = max(0, deficit + (1 + W / R) * (fair - got))
    c_j      = deficit / (t_j + R)                      (t_j: remaining time at full speed)

``rate`` is ``sum_k n_jk z_jk`` under :func:`slurm_fair.fairness.isolated_time_shares` of the
current problem (the 1/N share: tenant weight split over its jobs): the one home of the
baseline. Dividing by ``t_j + R`` makes ``c_j`` the share of what is left of the job that it
is behind: a round of waiting raises a short job's finish-time ratio far more than a long
job's, so the same deficit weighs more on the short job (with ``t_j`` unknown, it is counted
in rounds). The weight ``1 + W / R`` makes the deficit of a job that has waited long grow faster
than that of one that ran (and shrink faster once it runs ahead), so among jobs equally behind,
the one that waited longer is compensated first. Finished jobs are forgotten.
"""

from __future__ import annotations

from typing import Any, MutableMapping

from .. import fairness
from ..model import Job, Problem

KEY = "fft"


def remaining_time(job: Job) -> float:
    """The job's remaining time at full speed (0 when its remaining work is unknown)."""
    return fairness.known_remaining_s(job) or 0.0


def _progress(job: Job, last: dict[str, Any]) -> float:
    """Full-speed seconds of progress since the last observation."""
    best = job.best_throughput
    before = last.get("remaining")
    now = fairness.known_remaining(job)
    if before is not None and now is not None and best > 0:
        return max(0.0, (float(before) - now) / best)
    ran = max(0.0, job.attained_s - float(last.get("attained", 0.0)))
    return ran * (job.normalised(job.prev_type) if job.prev_type else 0.0)


def _first_progress(job: Job) -> float:
    """Full-speed seconds the job made before the ledger first saw it (controller restart, a
    policy switched on mid-way): its attained time at the speed of the type it is on, or its
    best type when it is on none."""
    n = job.normalised(job.prev_type) if job.prev_type else 1.0
    return job.attained_s * n


def update_ledger(problem: Problem, state: MutableMapping[str, Any], round_s: float) -> dict[str, float]:
    """Advance every job's deficit to now and return its compensation ``c_j`` (>= 0, rounds)."""
    book: dict[str, dict[str, Any]] = state.setdefault(KEY, {})
    shares = fairness.isolated_time_shares(problem)
    horizon = round_s if round_s > 0 else 1.0
    comp: dict[str, float] = {}
    for j in problem.jobs:
        rate = sum(j.normalised(k) * z for k, z in shares[j.id].items())
        age = float(j.age_s) if j.age_s is not None else None
        last = book.get(j.id)
        if last is None:
            dt = age if age is not None else 0.0
            fair, got, deficit = rate * dt, _first_progress(j), 0.0
        else:
            if age is not None and last.get("age") is not None:
                dt = max(0.0, age - float(last["age"]))
            else:
                dt = horizon  # no ages: one call per round
            fair, got, deficit = float(last["rate"]) * dt, _progress(j, last), float(last["deficit"])
        waited = max(0.0, age - j.attained_s) if age is not None else 0.0
        deficit = max(0.0, deficit + (1.0 + waited / horizon) * (fair - got))
        book[j.id] = {"age": age, "attained": float(j.attained_s), "remaining": fairness.known_remaining(j),
                      "rate": rate, "deficit": deficit}
        comp[j.id] = deficit / (remaining_time(j) + horizon)
    active = {j.id for j in problem.jobs}
    for jid in [jid for jid in book if jid not in active]:
        del book[jid]
    return comp
