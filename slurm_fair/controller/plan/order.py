"""The plan's order in Slurm's queue: the site factor, pushed down (an overdue gang raised) (pure).

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
  type: it is **raised** just above the highest pending pilot job competing for that type (the
  one exception to pushing down only, :func:`_raises` says why), and every other pending pilot
  job competing for that type, placed or not, that is still above it is pushed just below it,
  so Slurm's backfill scheduler reserves the gang's nodes and starts the others only where
  they do not delay it.
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
    gangs -> the type whose GPUs are kept for them (:mod:`..reserve`): the gang is raised just
    above the pilot's other jobs competing for that type, and any still above it, placed or
    not, goes just below it."""
    prio = {j: natural(jobs[j], owned.get((j, "site_factor"))) for j in plans if j in jobs}
    floor = _floors({j: jp.planned_type for j, jp in plans.items() if jp.placed}, prio)
    heads = {j: k for j, k in (head or {}).items() if j in plans and plans[j].planned_type == k}
    raised = _raises(heads, plans, jobs, owned, reachable, prio, released)
    tops = _floors(heads, {j: (p + raised.get(j, 0) if p is not None else None) for j, p in prio.items()})
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
        want = base + raised.get(j, 0)
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
        out[j] = max(-SITE_FACTOR_MAX, min(SITE_FACTOR_MAX, want))
    return out


def _competes(jp: JobPlan, k: str, reachable: Mapping[str, Iterable[str]], j: str) -> bool:
    """Whether the job competes for type ``k``: planned there, or unplaced and able to run there."""
    return jp.planned_type == k or (not jp.placed and not jp.planned_type and k in tuple(reachable.get(j, ())))


def _raises(heads: Mapping[str, str], plans: Mapping[str, JobPlan], jobs: Mapping[str, SlurmJob],
            owned: Mapping[tuple[str, str], Owned], reachable: Mapping[str, Iterable[str]],
            prio: Mapping[str, int | None], released: frozenset[tuple[str, str]]) -> dict[str, int]:
    """Head gang -> how far it is raised: just above the highest pending job of the pilot that
    competes for its type (0: it is the highest already), a power of two, an existing raise
    kept within the band (age drift) and while the gang waits. Why raise at all (issue 39): the
    pushes below reach only the jobs a cycle saw; a job submitted after it with a priority above
    the gang was above it until the next cycle, and Slurm started it in a GPU of the gang's node
    as soon as one freed, so on a loaded testbed a stream of such jobs kept the node from ever
    draining (the gang waited past 300 s in 3 of 5 full runs). Raised above the pilot's top
    competitor, the gang is also above every later job of those tenants with the same QOS and
    nice (a new job has no age), which no longer need a cycle to go below it."""
    out: dict[str, int] = {}
    for h, k in heads.items():
        sj, p = jobs.get(h), prio.get(h)
        if sj is None or p is None or (h, "site_factor") in released:
            continue
        top = max((q for j, q in prio.items() if j != h and j not in heads and q is not None and j in jobs
                   and jobs[j].pending and _competes(plans[j], k, reachable, j)), default=None)
        need = (top - p + 1) if top is not None else 0
        row = owned.get((h, "site_factor"))
        up = (sj.site_factor or 0) - (own_factor(sj, row) or 0)  # the raise it carries
        if need > 0:
            out[h] = up if need <= up <= KEEP * max(need, MIN_PUSH) else _pow2(need)
        elif up > 0:
            out[h] = up  # kept while it waits: competitors come and go (no write every cycle)
    return out


def _floors(planned: Mapping[str, str | None], prio: Mapping[str, int | None]) -> dict[str, int]:
    """Type -> the lowest known priority among the jobs planned for it."""
    out: dict[str, int] = {}
    for j, k in planned.items():
        p = prio.get(j)
        if k and p is not None:
            out[k] = min(out.get(k, p), p)
    return out
