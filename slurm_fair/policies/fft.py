"""FFT (ICS 2025): per-round cost minimisation balancing efficiency and finish-time fairness.

Each round the policy minimises, over time shares ``a_jk in [0, 1]`` (``sum_k a_jk <= 1``,
``sum_j g_j a_jk <= C_k``)::

    cost = - sum_jk a_jk * n_jk * m_j * (1 - s_jk),    m_j = 1 + LAMBDA * c_j + MU * r_j

* ``c_j``, the **fairness compensation** (:mod:`._fft_ledger`): the job's deficit against the
  progress it would make with its isolated share (the finish-time-fairness baseline of
  :func:`slurm_fair.fairness.isolated_time_shares`), accumulated every round with a weight that
  grows with the time the job has waited, kept in ``options.state``;
* ``r_j``, the **remaining-work term**: ``t_med / (t_med + t_j)`` with ``t_j`` the job's
  remaining time at full speed and ``t_med`` the median over the round's jobs (SRPT-like,
  scale-free: 1/2 for the median job, towards 1 for the shortest);
* ``s_jk``, the **switching cost**: the share of a round lost to the restart when the job ran on
  another type last round (``prev_type``), ``restart_j / round_s``; ``restart_j`` comes from the
  checkpoint size (:func:`restart_seconds`). A switch only happens when it gains more than it
  loses.

Everything here that the paper's abstract does not say is our own choice (the paper publishes
no code): the linear form, ``LAMBDA``, ``MU``, the waiting weight, the restart model, solving the
LP relaxation (the shared rounding step makes it integral, as for every policy). Details and the
measured results: ``docs/policies/fft.md``.
"""

from __future__ import annotations

import statistics
import time

from typing import Mapping

from ..errors import SolverError
from ..jobgroups import JobGroup
from .. import fairness
from ..model import Allocation, Job, Problem
from . import PolicyOptions, register
from ._fft_ledger import update_ledger
from ._lp import class_lp, fallback_allocation
from ..statuses import AllocationStatus

#: weight of the fairness compensation (per round of deficit)
LAMBDA = 1.0
#: weight of the remaining-work term
MU = 1.0
#: restart cost of a job whose checkpoint size is unknown: the simulator's default start latency
DEFAULT_RESTART_S = 30.0
#: checkpoint bandwidth (bytes/s) turning ``extra["checkpoint_bytes"]`` into seconds
CHECKPOINT_BYTES_PER_S = 1e9


def restart_seconds(job: Job) -> float:
    """Seconds a type switch costs the job: ``extra["restart_s"]`` when given, else
    ``DEFAULT_RESTART_S`` plus writing and reading ``extra["checkpoint_bytes"]`` once each at
    ``CHECKPOINT_BYTES_PER_S``. Gavel's data has no model sizes, so in the simulator every job
    pays the default, which is what the simulator charges (``--restart-s``, 30 s)."""
    given = job.extra.get("restart_s")
    if isinstance(given, (int, float)) and given >= 0:
        return float(given)
    size = job.extra.get("checkpoint_bytes")
    extra = 2.0 * float(size) / CHECKPOINT_BYTES_PER_S if isinstance(size, (int, float)) and size > 0 else 0.0
    return DEFAULT_RESTART_S + extra


def remaining_terms(problem: Problem) -> dict[str, float]:
    """``r_j = t_med / (t_med + t_j)``: favours jobs with little remaining time at full speed.

    A job whose remaining work is unknown counts as the median (1/2); when no job's is known
    every term is 0 (no preference at all)."""
    known = {j.id: fairness.known_remaining_s(j) for j in problem.jobs}  # time limits when sizes are hidden
    t = {jid: s for jid, s in known.items() if s is not None}
    if not t:
        return {j.id: 0.0 for j in problem.jobs}
    med = statistics.median(t.values())
    if med <= 0:
        return {j.id: (1.0 if t.get(j.id, 1.0) <= 0 else 0.5) for j in problem.jobs}
    return {j.id: (med / (med + max(0.0, t[j.id])) if j.id in t else 0.5) for j in problem.jobs}


def values(problem: Problem, comp: dict[str, float], rem: dict[str, float], round_s: float) -> dict[tuple[str, str], float]:
    """The value ``n_jk m_j (1 - s_jk)`` of a full round of every job on every type it fits."""
    out: dict[tuple[str, str], float] = {}
    for j in problem.jobs:
        m = 1.0 + LAMBDA * comp[j.id] + MU * rem[j.id]
        lost = min(1.0, restart_seconds(j) / round_s) if round_s > 0 else 0.0
        for k in problem.types:
            n = j.normalised(k)
            if n <= 0 or not problem.holds(j, k):
                continue
            switch = lost if (j.prev_type is not None and j.prev_type != k) else 0.0
            v = n * m * (1.0 - switch)
            if v > 0:
                out[j.id, k] = v
    return out


def _independent_optimum(problem: Problem, value: dict[tuple[str, str], float]) -> dict[str, dict[str, float]] | None:
    """When every job's best type fits at once, that assignment is the optimum of the LP (each
    term is maximised on its own): skip the solver. None otherwise."""
    best: dict[str, tuple[float, str]] = {}
    for (jid, k), v in value.items():
        if jid not in best or (v, k) > best[jid]:
            best[jid] = (v, k)
    used: dict[str, float] = {}
    gpus = {j.id: j.gpus for j in problem.jobs}
    for jid, (_, k) in best.items():
        used[k] = used.get(k, 0.0) + gpus[jid]
    if any(u > problem.gpu_types[k] for k, u in used.items()):
        return None
    x: dict[str, dict[str, float]] = {j.id: {} for j in problem.jobs}
    for jid, (_, k) in best.items():
        x[jid] = {k: 1.0}
    return x


@register("fft", "FFT: per-round cost minimisation with fairness compensation, remaining work and a switching cost", dynamic=True)
def allocate(problem: Problem, options: PolicyOptions) -> Allocation:
    started = time.perf_counter()
    comp = update_ledger(problem, options.state, options.round_s)
    rem = remaining_terms(problem)
    value = values(problem, comp, rem, options.round_s)
    info = {"compensation": {jid: c for jid, c in comp.items() if c > 0}}
    if not value:
        return Allocation("fft", {j.id: {} for j in problem.jobs}, AllocationStatus.OPTIMAL, "none",
                          time.perf_counter() - started, info=info)
    trivial = _independent_optimum(problem, value)
    if trivial is not None:
        return Allocation("fft", trivial, AllocationStatus.OPTIMAL, "none", time.perf_counter() - started,
                          info={**info, "trivial": True})
    try:
        x, solver_name = _solve_round(problem, value, options)
    except SolverError as exc:
        return fallback_allocation(problem, "fft", exc, started)
    return Allocation("fft", x, AllocationStatus.OPTIMAL, solver_name, time.perf_counter() - started, info=info)


def _solve_round(problem: Problem, value: Mapping[tuple[str, str], float],
                 options: PolicyOptions) -> tuple[dict[str, dict[str, float]], str]:
    """``max sum_jk value_jk a_jk`` over the group LP (:mod:`slurm_fair.grouplp`) of one-job
    groups: ``a_jk`` is ``z_ck`` of job ``j``'s own group, its capacity and demand rows are
    fft's ``sum_j g_j a_jk <= C_k`` and ``sum_k a_jk <= 1``. A group's ``n`` only marks the
    types that have a value (its columns); fft's objective is the value, not a utility."""
    jobs = [j for j in problem.jobs if any((j.id, k) in value for k in problem.types)]
    groups = [JobGroup(i, j.tenant, j.gpus, {k: 1.0 for k in problem.types if (j.id, k) in value}, (j.id,))
              for i, j in enumerate(jobs)]
    x: dict[str, dict[str, float]] = {j.id: {} for j in problem.jobs}
    lp = class_lp(problem, "fft", groups, options)
    if not lp.cols:  # no job has a value on a type with GPUs: nothing to solve
        return x, "none"
    lp.set_objective({i: value[(jobs[c].id, k)] for i, (c, k) in enumerate(lp.cols)})
    lp.solve()
    for c, row in lp.values(floor=1e-9).items():
        x[jobs[c].id] = {k: min(1.0, v) for k, v in row.items()}
    return x, lp.lp.solver_name
