"""The plan's order in Slurm's queue: the site factor, pushed down only (pure).

Slurm starts pending jobs by priority. The plan wants the jobs this round places to go before
the pilot's other pending jobs that compete for the same GPUs. Earlier versions gave placed jobs
a nice of -10,000,000: that put them ahead of *every* job of the cluster, the pilot's outsiders
included, and it overwrote the job's nice, which is its user's. Now:

* The controller writes only Slurm's **site factor** (``scontrol update SiteFactor=``, admin
  only, added to the multifactor priority; sprio's ``site`` column). A user's nice stays theirs.
* It only ever **pushes down**: a placed job keeps its own priority; an unplaced job of the pilot
  whose priority is at or above the lowest placed job it competes with (one planned for a type
  it may run on) gets a negative site factor that puts it just below that job. So no job of the
  pilot is pushed ahead of anyone, and an outsider only moves relative to pilot jobs that the
  plan holds back for the round.
* An overdue gang whose GPUs the rounding step keeps (:mod:`..reserve`) is the top job of its
  type: every other pending pilot job competing for that type, placed or not, is pushed just
  below it, so Slurm's backfill scheduler reserves the gang's nodes and starts the others only
  where they do not delay it. The gang keeps its own priority.
* Pushes are powers of two, at least :data:`MIN_PUSH`, and an existing push is kept while it is
  between the need and :data:`KEEP` times it: priorities drift with age every few minutes, and
  without the band each drift would be a write. A job the plan leaves unplaced keeps a push it
  carries (it is only raised when the need passes it) until the plan places it: without that,
  an unplaced gang's push was lifted whenever its competitors had all started and set again
  when the next ones came, a write every other cycle.

A job's priority without the controller's push is Slurm's priority minus the push it carries
(what the controller wrote minus the site factor it found there). Jobs whose site factor Slurm
did not show (sprio lists only jobs eligible to start) and jobs whose site factor someone else
changed after the controller are left alone.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from ...slurm.model import SlurmJob
from ..state.fields import Owned
from .types import JobPlan

#: the smallest push, in priority points, and the band an existing push is kept within
MIN_PUSH = 16
KEEP = 4
#: Slurm's limit on a site factor
SITE_FACTOR_MAX = 2147483645


def _pow2(n: int) -> int:
    p = MIN_PUSH
    while p < n:
        p *= 2
    return p


def own_factor(sj: SlurmJob, row: Owned | None) -> int | None:
    """The site factor the job had before the controller pushed it (None: unknown)."""
    if row is not None:
        return int(row.original or 0)
    return sj.site_factor


def natural(sj: SlurmJob, row: Owned | None) -> int | None:
    """The job's priority without the controller's push (None: unknown)."""
    if sj.site_factor is None:
        return None
    base = own_factor(sj, row)
    return sj.priority - (sj.site_factor - (base or 0))


def site_factors(
    plans: Mapping[str, JobPlan], jobs: Mapping[str, SlurmJob], owned: Mapping[tuple[str, str], Owned],
    reachable: Mapping[str, Iterable[str]], released: frozenset[tuple[str, str]] = frozenset(),
    head: Mapping[str, str] | None = None,
) -> dict[str, int]:
    """The site factor each pending job of the plan should carry (jobs left alone are absent).

    ``reachable``: the types each job may run on (its competitors are the placed jobs planned
    for one of them; a job sent to one type competes on that type only). ``head``: overdue
    gangs -> the type whose GPUs are kept for them (:mod:`..reserve`): every other job
    competing for that type, placed or not, goes just below the gang (the gang is not raised)."""
    prio = {j: natural(jobs[j], owned.get((j, "site_factor"))) for j in plans if j in jobs}
    floor = _floors({j: jp.planned_type for j, jp in plans.items() if jp.placed}, prio)
    tops = _floors({j: k for j, k in (head or {}).items() if j in plans and plans[j].planned_type == k}, prio)
    out: dict[str, int] = {}
    for j, jp in plans.items():
        sj = jobs.get(j)
        if sj is None or not sj.pending or (j, "site_factor") in released:
            continue
        row = owned.get((j, "site_factor"))
        if prio.get(j) is None:
            # Slurm did not show the factor (sprio did not answer): an unknown value is no reason
            # to give a push back, which would lift it and set it again when sprio answers; the
            # push recorded stays planned (revert and the failsafe give it back from the row)
            if row is not None and row.written is not None:
                out[j] = int(row.written)
            continue
        base = own_factor(sj, row) or 0
        want = base
        if j not in (head or {}):
            types = [jp.planned_type] if jp.planned_type else list(reachable.get(j, ()))
            lows = [tops[k] for k in types if k in tops] + ([] if jp.placed else [floor[k] for k in types if k in floor])
            need = (prio[j] - min(lows) + 1) if lows else 0  # type: ignore[operator]
            pushed = base - (sj.site_factor or 0)
            if need > 0:
                keep = need <= pushed <= KEEP * max(need, MIN_PUSH) or (not jp.placed and need <= pushed)
                want = base - (pushed if keep else _pow2(need))
            elif not jp.placed and pushed > 0:
                want = base - pushed  # still held back by the plan: its push stays
        out[j] = max(-SITE_FACTOR_MAX, want)
    return out


def _floors(planned: Mapping[str, str | None], prio: Mapping[str, int | None]) -> dict[str, int]:
    """Type -> the lowest known priority among the jobs planned for it."""
    out: dict[str, int] = {}
    for j, k in planned.items():
        p = prio.get(j)
        if k and p is not None:
            out[k] = min(out.get(k, p), p)
    return out
