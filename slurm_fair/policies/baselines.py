"""The baselines OEF is measured against: max-throughput, Gavel's max-min fairness and
finish-time fairness, the heterogeneity-agnostic max-min, and FIFO.

Exact formulations (also in ``docs/policies/``):

* ``max-throughput``: ``max E`` (the bound ``E*``).
* ``gavel-mmf``: ``max t`` s.t. ``r_j >= t * w_j * r^eq_j`` for every job, where
  ``w_j = w_u / (number of active jobs of u)`` and ``r^eq_j = sum_k n_jk e_k`` is the rate the job
  gets from Gavel's equal time share ``e_k = C_k / max(sum_j g_j, sum_k C_k)`` on every type;
  then, as a second stage, ``max E`` with ``t`` held at its optimum (Gavel leaves the tie open;
  we take the most efficient max-min allocation).
* ``agnostic``: the same two stages with ``n_jk = 1`` wherever the job can run (Slurm's view of
  a GPU); the allocation is then judged with the true throughputs.
* ``gavel-ftf``: ``min R`` s.t. ``rho_j(x) <= R`` by bisection, then ``max E`` at that ``R``;
  ``rho_j(x) = (age_j + rem_j / thr_j(x)) / (age_j + rem_j / thr^iso_j)`` with
  ``thr^iso`` from :func:`slurm_fair.fairness.isolated_throughputs`; missing ``age_s`` is 0, ``rem_j``
  the size a site knows (:func:`slurm_fair.fairness.known_remaining`: its time limit when its
  size is hidden); a job with neither counts with age 0 (``rho = thr^iso / thr``).
* ``fifo``: oldest first (``age_s`` descending, id), each job all the time on its fastest type
  with enough free GPUs, or not at all this cycle (FIFO with backfill).
"""

from __future__ import annotations

import time
from typing import Any

from .. import fairness
from ..errors import SolverError
from ..jobgroups import JobGroup, groups_of, normalised_vector
from ..model import Allocation, Job, Problem
from . import PolicyOptions, register
from . import _inside as inside
from ._lp import class_lp, fallback_allocation, max_min_classes, max_throughput_classes, result
from ..solver import INF
from ..statuses import AllocationStatus

#: relative width at which gavel-ftf's bisection on the largest rho stops
_FTF_TOLERANCE = 1e-5


@register("max-throughput", "maximum total normalised throughput E (the efficiency bound E*)",
          params=inside.params(0.0))
def max_throughput(problem: Problem, options: PolicyOptions) -> Allocation:
    """``max E``: no fairness at all; the yardstick ``E*`` for every other policy. With
    ``max-throughput.inside=1``, in two levels (:func:`._inside.split`)."""
    return inside.split("max-throughput", problem, options, _max_throughput)


def _max_throughput(problem: Problem, options: PolicyOptions) -> Allocation:
    started = time.perf_counter()
    try:
        classes = groups_of(problem)
        X = max_throughput_classes(problem, options, classes)
    except SolverError as exc:
        return fallback_allocation(problem, "max-throughput", exc, started)
    return result(problem, "max-throughput", classes, X, options, started)


@register("gavel-mmf", "Gavel's heterogeneity-aware weighted max-min fairness over jobs",
          params=inside.params(0.0))
def gavel_mmf(problem: Problem, options: PolicyOptions) -> Allocation:
    """Gavel's max-min; with ``gavel-mmf.inside=1``, in two levels (:func:`._inside.split`):
    each tenant keeps the GPUs max-min gives its jobs, shared among them by latency-ratio aging."""
    return inside.split("gavel-mmf", problem, options, _gavel_mmf)


def _gavel_mmf(problem: Problem, options: PolicyOptions) -> Allocation:
    started = time.perf_counter()
    try:
        classes, X, t = max_min_classes(problem, options, "gavel_mmf", agnostic=False)
    except SolverError as exc:
        return fallback_allocation(problem, "gavel-mmf", exc, started)
    return result(problem, "gavel-mmf", classes, X, options, started, {"max_min_level": t})


@register("agnostic", "max-min fairness seeing every GPU as equal (Slurm's view), judged on true throughputs")
def agnostic(problem: Problem, options: PolicyOptions) -> Allocation:
    started = time.perf_counter()
    try:
        classes, X, t = max_min_classes(problem, options, "agnostic", agnostic=True)
    except SolverError as exc:
        return fallback_allocation(problem, "agnostic", exc, started)
    return result(problem, "agnostic", classes, X, options, started, {"max_min_level": t})


# --- finish-time fairness ---------------------------------------------------------------------


def _ftf_classes(problem: Problem) -> tuple[list[JobGroup], dict[int, tuple[float, float, float]]]:
    """Classes that also agree on remaining work and age; per class ``(rem, age, thr_iso/T_max)``
    in normalised units (a job's throughput divided by its best one)."""
    iso = fairness.isolated_throughputs(problem)
    types = problem.types
    groups: dict[tuple[Any, ...], list[Job]] = {}
    for j in problem.jobs:
        n = normalised_vector(j, types)
        rem = fairness.known_remaining(j)  # its time limit when its size is hidden
        age = float(j.age_s or 0.0) if rem is not None else 0.0
        iso_n = iso[j.id] / j.best_throughput if j.best_throughput > 0 else 0.0
        rem_n = (float(rem) / j.best_throughput) if rem is not None and j.best_throughput > 0 else 1.0
        key = (j.tenant, j.gpus, tuple(round(n.get(k, 0.0), 12) for k in types), round(rem_n, 9), round(age, 6), round(iso_n, 12))
        groups.setdefault(key, []).append(j)
    classes, params = [], {}
    for i, (key, members) in enumerate(groups.items()):
        classes.append(JobGroup(i, key[0], key[1], normalised_vector(members[0], types), tuple(m.id for m in members)))
        params[i] = (key[3], key[4], key[5])
    return classes, params


@register("gavel-ftf", "Gavel's finish-time fairness: minimise the largest rho = JCT / isolated JCT", dynamic=True)
def gavel_ftf(problem: Problem, options: PolicyOptions) -> Allocation:
    started = time.perf_counter()
    classes, params = _ftf_classes(problem)
    runnable = [c for c in classes if params[c.key][2] > 0]

    def bound(c: JobGroup, r: float) -> float | None:
        """Rate the class's jobs need (normalised units) for rho <= r; None if impossible."""
        rem, age, thr_iso = params[c.key]
        if rem <= 0:  # nothing left to do (or less than the rounding of rem_n): needs no rate
            return 0.0
        d = age + rem / thr_iso
        slack = r * d - age
        return None if slack <= 0 else rem / slack

    # One in-memory model for the whole bisection: a probe only moves the lower bounds of the
    # per-class rate rows, so HiGHS re-solves warm instead of rebuilding the model every time.
    cm = class_lp(problem, "gavel_ftf", classes, options)
    rows = {c.key: cm.add_row(cm.class_rate(c), 0.0, INF) for c in runnable}
    cm.set_objective(cm.efficiency())

    def feasible(r: float) -> bool:
        for c in runnable:
            need = bound(c, r)
            if need is None or need > 1 + 1e-12:
                return False
            cm.lp.set_row_bounds(rows[c.key], c.count * need, INF)
        cm.lp.solve(infeasible_ok=True)
        return not cm.lp.infeasible

    try:
        lo = max([params[c.key][1] / (params[c.key][1] + params[c.key][0] / params[c.key][2]) for c in runnable
                  if params[c.key][0] > 0] + [0.0])
        hi = 1.0  # the isolated allocation itself reaches rho = 1 for every job
        for _ in range(30):
            if hi - lo <= _FTF_TOLERANCE * hi:
                break
            mid = (lo + hi) / 2
            if feasible(mid):
                hi = mid
            else:
                lo = mid
        if not feasible(hi * (1 + 1e-6)):  # pragma: no cover - hi is feasible by construction
            raise SolverError("gavel-ftf: no feasible finish-time level", None, "Infeasible")
    except SolverError as exc:
        return fallback_allocation(problem, "gavel-ftf", exc, started)
    return result(problem, "gavel-ftf", classes, cm.values(), options, started, {"max_rho": hi})


# --- FIFO -----------------------------------------------------------------------------------


@register("fifo", "first in, first out: oldest job first, each on its fastest type with room")
def fifo(problem: Problem, options: PolicyOptions) -> Allocation:
    started = time.perf_counter()
    free = {k: int(c) for k, c in problem.gpu_types.items()}
    x: dict[str, dict[str, float]] = {}
    for job in sorted(problem.jobs, key=lambda j: (-(j.age_s or 0.0), j.id)):
        options_k = sorted(
            (k for k in problem.types if job.throughput.get(k, 0.0) > 0),
            key=lambda k: (-job.throughput[k], k),
        )
        for k in options_k:
            if free.get(k, 0) >= job.gpus:
                free[k] -= job.gpus
                x[job.id] = {k: 1.0}
                break
        else:
            x[job.id] = {}
    return Allocation(policy="fifo", x=x, status=AllocationStatus.HEURISTIC, solver="none",
                      solve_seconds=time.perf_counter() - started)
