"""Where each tenant stands against its share right now, and the displacement right (pure).

The report measures sharing incentive moment by moment (docs/reports.md, "The equal share is a
rate, not a budget"): at every moment a tenant with waiting jobs is owed what its weighted equal
slice of every GPU type would give those jobs. The rounding step keeps a running job that has
not yet run ``min_run`` (hysteresis: a requeue costs Slurm's hold and a restart), so when the
allocation moves GPUs to a tenant that just got new jobs, those jobs wait up to a round behind
gangs of a tenant far above its share. On the testbed that waiting was the whole of the weight-2
tenant's shortfall in ``make demo`` (its 1-GPU jobs, sent to the P100s the allocation gave it,
waited a round behind two 4-GPU gangs of a tenant holding three times its share).

**The displacement right.** A tenant is *below* its share when it has a waiting job and what its
running jobs give it now, ``U_u = sum_j n_j(type it runs on)``, is less than ``(1 - eps)`` of
``V_u(equal share)`` (docs/fairness.md's best use of ``(w_u / W) C`` by its jobs in the problem,
the value SI compares with). A running job that opted in to requeues is *displaceable* when its
tenant is not below and stays at or above its own equal share's value without it (its
*surplus*, what it holds beyond that value, covers the job's ``n``). For a waiting job of a
tenant below its share, the controller may requeue displaceable jobs before their ``min_run``
and between round boundaries (:func:`.requeue.make_room` with these victims), never more of one
tenant than its surplus.

Why this cannot thrash: the victim's tenant stays at or above its share, so it never gains the
right against the taker's tenant in return, and a tenant below its share is never a victim.

**No rotation away from a tenant not above its share.** Time-sharing (:mod:`.requeue`'s make
room) stops a running job so that another job of the round runs. When the two jobs belong to
different tenants and the victim's tenant holds no more than its equal share's value, the
rotation puts that tenant below its share at once, and the report counts it (a tenant whose jobs
all fit in its share can never make it up: its share already runs all of them). So a job is
rotated away for another tenant's job only out of its tenant's surplus (its value beyond its
share's), like the displacement right; except a gang larger than its tenant's equal share of
the type, which that tenant can never hold within its share (a gang cannot be split): it may go
while any surplus is left. A tenant not above its share with no waiting job of its own keeps
its running jobs whole (:func:`keeps`: the rounding step keeps them where they are, so it does
not plan another tenant's job into their GPUs); so does one whose waiting jobs all are
predicted to run longer than the running job and have not waited their own run yet (a rotation
inside a tenant pays only for a shorter or a long-waiting job: :func:`..hysteresis.swap_pays`,
which :func:`.plan.make_plan` applies to each pair too). Counting GPUs of a type instead of value let a
tenant holding one V100 beyond its share of V100s (and less than its share of P100s) lose that
job to another tenant's, which put it below its share in ``make demo``. On the testbed, ``make demo``'s
weight-2 tenant lost a 1-GPU job to another tenant's new job this way, then waited out Slurm's
requeue hold while holding exactly its share.

**A turn is not taken back.** The exception for gangs larger than their tenant's share breaks
the argument above: a round may rotate such a gang away while its tenant has only a little
surplus, leaving that tenant below its share, and the displacement right would then let it
requeue the job that just got the turn at once. On the testbed a chemistry 8-GPU gang a few
minutes from its end got the K80 node this way and was requeued by biology's right after 194
trace seconds, then again after 53, and finished 10 500 s after it arrived (491 s alone). So a
job that got its GPUs by requeues of another tenant's jobs (:meth:`..state.StateStore.turns`)
is out of the reach of *that* tenant's right until it has run ``min_run`` (the same hysteresis
every rotation obeys); a third tenant below its share may still displace it
(:func:`.plan.turn_owed`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..estimates.tags import preemptible
from ..fairness import bundle_value, equal_share, tenant_utilities
from ..hysteresis import swap_pays
from ..model import Job, Problem
from ..slurm.model import Snapshot, SlurmJob

#: a tenant is below its share when it gets less than (1 - BELOW_EPS) of its equal share's value
BELOW_EPS = 0.02


@dataclass(frozen=True)
class Standing:
    """Each tenant against its equal share now (module docstring)."""

    #: tenants with a waiting job whose running jobs give less than (1 - eps) of their share's value
    below: frozenset[str] = frozenset()
    #: tenant -> how much its running jobs give beyond its equal share's value (> 0 only)
    surplus: Mapping[str, float] = field(default_factory=dict)
    #: running job -> its value to its tenant now, ``n`` on the type it runs on
    value: Mapping[str, float] = field(default_factory=dict)
    #: tenants with a waiting job in the problem
    waiting: frozenset[str] = frozenset()
    #: tenant -> its equal share, GPUs per type
    share: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    #: False for the empty standing of a controller with ``displace`` off: nobody is protected
    known: bool = False

    def tenant_below(self, tenant: str) -> bool:
        return tenant in self.below

    def above(self, tenant: str) -> bool:
        """Whether ``tenant``'s running jobs give it more than its equal share's value now."""
        return self.surplus.get(tenant, 0.0) > 1e-9


def standing(problem: Problem, running: Mapping[str, str], eps: float = BELOW_EPS) -> Standing:
    """The tenants below their share and everyone else's surplus, from ``running`` (job -> the
    type it runs on now) and the problem's jobs (the jobs the tenant has now, waiting or not)."""
    jobs = {j.id: j for j in problem.jobs}
    x = {j: {k: 1.0} for j, k in running.items() if j in jobs and jobs[j].throughput.get(k, 0.0) > 0}
    held = tenant_utilities(problem, x)
    waiting = frozenset(j.tenant for j in problem.jobs if j.id not in running)
    below: set[str] = set()
    surplus: dict[str, float] = {}
    shares: dict[str, dict[str, float]] = {}
    for u in problem.active_tenants:
        shares[u] = equal_share(problem, u)
        owed = bundle_value(problem, u, shares[u])
        if u in waiting and held[u] < (1.0 - eps) * owed - 1e-9:
            below.add(u)
        elif held[u] > owed + 1e-9:
            surplus[u] = held[u] - owed
    value = {j: jobs[j].normalised(running[j]) for j in x}
    return Standing(frozenset(below), surplus, value, waiting, shares, True)


def keeps(st: Standing, tenant: str, job: Job | None = None, waiting: Iterable[Job] = (),
          round_s: float = 0.0) -> bool:
    """A running job of ``tenant`` is kept where it is, whatever the round's rotation (module
    docstring): its tenant is not above its share and has no waiting job of its own, or none of
    its waiting jobs (``waiting``, any tenant's: those of ``tenant`` are read) that a rotation
    inside the tenant would pay for (:func:`slurm_fair.hysteresis.swap_pays` against ``job``)."""
    if not st.known or st.above(tenant):
        return False
    if tenant not in st.waiting:
        return True
    return job is not None and not any(swap_pays(t, job, round_s) for t in waiting if t.tenant == tenant)


def displaceable(snapshot: Snapshot, problem: Problem, st: Standing, fixed: frozenset[str]) -> dict[str, SlurmJob]:
    """Running jobs a waiting job of a tenant below its share may have requeued, whatever their
    ``min_run`` (module docstring): opted in, in the problem, not left to Slurm (``fixed``), of a
    tenant whose surplus covers the job's value. Empty when no tenant is below its share."""
    if not st.below:
        return {}
    tenant = {j.id: j.tenant for j in problem.jobs}
    out = {}
    for sj in snapshot.gpu_jobs():
        if (not sj.running or not sj.gpu_type_running or sj.job_id not in tenant or sj.job_id in fixed
                or not preemptible(sj)):
            continue
        u = tenant[sj.job_id]
        if u not in st.below and st.surplus.get(u, 0.0) >= st.value.get(sj.job_id, 0.0) - 1e-9:
            out[sj.job_id] = sj
    return out
