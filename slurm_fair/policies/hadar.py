"""Hadar and HadarE (IPDPS'24 / arXiv 2503.10918): price-based online allocation per task type.

**Hadar.** An online primal-dual allocation. Every GPU type ``k`` has a price that rises
exponentially with its load ``y_k`` (GPUs already given this round) on top of a *backlog*
``b_k`` carried from round to round in ``options.state["hadar"]``:
``p_k(y) = L * (U / L) ** ((y + b_k) / (C_k + b_k))``, where ``U`` is the largest and ``L``
half the smallest per-GPU utility density on offer this round (the classic online-knapsack
price of Buchbinder and Naor that Hadar's primal-dual analysis rests on). Repeatedly, the
(job, type) pair with the largest surplus ``d_jk - p_k(y_k)`` is granted, if that surplus is
positive and the gang fits; prices are updated after each grant. The utility density of job
``j`` on type ``k`` is ``d_jk = (w_u / m_u) * n_jk * (1 + STARVE * starved_j) * long_j / g_j``:
the tenant weight split over its ``m_u`` active jobs (fair across tenants), the job's
normalised throughput there (task-level heterogeneity), Hadar's time dimension
``starved_j = wait_s / max(attained_s, round_s)`` (time waited over time run, at least a
round: it grows without bound while a job waits, so a gang whose per-GPU density is a
fraction of a 1-GPU job's is not left waiting for ever), and ``long_j = (R_j / mean R) **
REMAINING``, ``R_j`` the job's remaining time at its best speed (off by default). The
allocation is integral.

The dual prices are carried across rounds, not reset (the paper's prices live over time
slots): after the pass, ``demand_k`` is the GPUs of the jobs whose best density is on ``k``
and ``b_k <- min(CAP * C_k, BETA * b_k + (1 - BETA) * max(0, demand_k - C_k))``
(:func:`carry`): a type asked for beyond its capacity starts the next round dearer, so only
the jobs that value it most take it; once demand falls below capacity the backlog decays
geometrically back to the plain price. The cap matters: without it the backlog settles at the
whole excess demand (hundreds of GPUs on 8 V100s in a Philly trace), the price of an *empty*
fast type starts near ``U``, Hadar grants it to almost no one and leaves it to the rounding
step's work conservation - the fast GPUs no longer go to the jobs that gain most from them.
With ``CAP = 1/8`` an empty contended type costs at most ``L (U/L)^(1/9)``.

The knobs ``beta``, ``cap``, ``remaining`` and ``starve`` are policy parameters
(:data:`PARAMS`; ``--policy-option hadar.cap=0.25``, ``hadare.*`` for HadarE). Their defaults
were tuned on ``philly_6vc_240`` and its ``--static`` variant only (docs/policies/hadar.md).

**HadarE.** Hadar, then *forking*: GPUs no waiting job can use are given to copies of running
jobs, on other types (hence other nodes): a copy of ``j`` on ``k`` is added when it raises the
job's combined rate ``(1 - sync) * sum of members' n``, at most :data:`MAX_COPIES` per job, the
largest gain first. Copies appear in ``x`` under ``"<job>#fork<i>"`` and in
``Allocation.forks = {copy: job}``; the simulator places them with the shared rounding step and
combines their progress (see ``docs/simulator.md``). ``sync`` is ``options.fork_sync``
(default 0.1), set by the simulator from its configuration. Slurm cannot run one job as several
cooperating allocations, so HadarE is a simulator-only policy.

Our own choices (no public code exists): the density formula (its starvation and remaining-time
terms), ``L`` = half the smallest density, the surplus-greedy order, the backlog form of the
carried price with ``BETA`` and ``CAP``, the copy rule. See ``docs/policies/hadar.md``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, MutableMapping

from .. import fairness
from ..model import Allocation, Job, Problem
from . import Param, PolicyOptions, register
from ..statuses import AllocationStatus

#: extra copies per job at most (HadarE)
MAX_COPIES = 2
#: how much of a type's backlog survives a round (the rest is the round's excess demand)
BETA = 0.5
#: the carried backlog of a type is at most this many times its capacity (tuned: 0.25 and below
#: are alike on the tuning workloads, 0.5 and above lengthen the makespan, unbounded by 5-8 %)
CAP = 0.125
#: exponent of a job's remaining time (at its best speed, over the round's mean) in its density
REMAINING = 0.0
#: weight of the starvation term ``starved_j`` (wait over time run) in the density (tuned)
STARVE = 0.3
#: where the carried prices live in ``options.state``
KEY = "hadar"

#: the knobs of the price rule and the density (``--policy-option hadar.beta=0.5``; HadarE
#: declares the same ones under ``hadare.``)
PARAMS = {
    "beta": Param(BETA, 0.0, 1.0, "share of a type's carried backlog that survives a round (0: only the "
                  "last round's excess demand; 1: never decays)"),
    "cap": Param(CAP, 0.0, None, "the carried backlog of a type is at most this many times its "
                 "capacity (0: prices reset every round)"),
    "remaining": Param(REMAINING, 0.0, 2.0, "exponent of a job's remaining time (at its best speed, over "
                       "the round's mean) in its utility density (0: not used)"),
    "starve": Param(STARVE, 0.0, 10.0, "weight of the starvation term (time waited over time run, at least a "
                    "round) in the utility density (0: not used)"),
}


@dataclass(frozen=True)
class Knobs:
    """The values of :data:`PARAMS` for one round."""

    beta: float = BETA
    cap: float = CAP
    remaining: float = REMAINING
    starve: float = STARVE

    @classmethod
    def of(cls, policy: str, options: PolicyOptions) -> "Knobs":
        return cls(**{k: options.param(policy, k) for k in PARAMS})


def remaining_s(job: Job) -> float | None:
    """Seconds the job still needs at its best speed, as a site knows it
    (:func:`slurm_fair.fairness.known_remaining_s`: its time limit when its size is hidden;
    None: neither known)."""
    return fairness.known_remaining_s(job)


def densities(problem: Problem, knobs: Knobs | None = None, round_s: float = 360.0) -> dict[tuple[str, str], float]:
    """``d_jk`` for every job and type it can run on and fits in; ``round_s``: the round length,
    the least time run a job's wait is measured against."""
    round_s = max(1.0, float(round_s))
    knobs = knobs or Knobs()
    count = {u: len(problem.jobs_of(u)) for u in problem.active_tenants}
    rem = {j.id: remaining_s(j) for j in problem.jobs}
    known = [r for r in rem.values() if r]
    mean_rem = sum(known) / len(known) if known else 0.0
    out: dict[tuple[str, str], float] = {}
    for j in problem.jobs:
        age = float(j.age_s or 0.0)
        starved = max(0.0, age - j.attained_s) / max(j.attained_s, round_s)
        weight = problem.weight(j.tenant) / count[j.tenant]
        r = rem[j.id]
        # a job done (r == 0) or of unknown length counts as an average one
        long = (r / mean_rem) ** knobs.remaining if knobs.remaining and r and mean_rem > 0 else 1.0
        for k in problem.types:
            n = j.normalised(k)
            if n > 0 and j.gpus <= problem.gpu_types[k]:
                out[j.id, k] = weight * n * (1.0 + knobs.starve * starved) * long / j.gpus
    return out


def price(load: float, capacity: float, low: float, high: float, backlog: float = 0.0) -> float:
    """``p(y) = L (U/L)^((y + b)/(C + b))``: L when empty without backlog, U when full."""
    if capacity <= 0:
        return float("inf")
    b = max(0.0, backlog)
    return float(low * (high / low) ** ((min(load, capacity) + b) / (capacity + b)))


def carry(state: MutableMapping[str, Any], problem: Problem, dens: dict[tuple[str, str], float],
          knobs: Knobs | None = None) -> dict[str, float]:
    """The online dual update: each type's backlog after this round (stored in ``state``).

    ``b_k <- min(cap C_k, beta b_k + (1 - beta) max(0, demand_k - C_k))``, ``demand_k`` the GPUs
    of the jobs whose best density is on ``k``: raised by load beyond capacity up to the cap,
    decaying when there is none."""
    book = state.setdefault(KEY, {}).setdefault("backlog", {})
    best: dict[str, tuple[float, str]] = {}
    for (jid, k), d in dens.items():
        if jid not in best or (d, k) > best[jid]:
            best[jid] = (d, k)
    gpus = {j.id: j.gpus for j in problem.jobs}
    demand = {k: 0.0 for k in problem.types}
    for jid, (_, k) in best.items():
        demand[k] += gpus[jid]
    knobs = knobs or Knobs()
    for k in problem.types:
        cap = float(problem.gpu_types[k])
        excess = max(0.0, demand[k] - cap)
        b = knobs.beta * float(book.get(k, 0.0)) + (1.0 - knobs.beta) * excess
        book[k] = min(b, knobs.cap * cap)
    return dict(book)


def hadar_assign(
    problem: Problem, backlog: dict[str, float] | None = None, knobs: Knobs | None = None,
    round_s: float = 360.0,
) -> tuple[dict[str, str], dict[str, float], dict[str, float]]:
    """The primal-dual pass from the carried ``backlog`` per type: ``(job -> type, load per type,
    final price per type)``."""
    dens = densities(problem, knobs, round_s)
    load = {k: 0.0 for k in problem.types}
    if not dens:
        return {}, load, {k: 0.0 for k in problem.types}
    back = {k: float((backlog or {}).get(k, 0.0)) for k in problem.types}
    high = max(dens.values())
    low = min(dens.values()) / 2.0
    caps = {k: float(c) for k, c in problem.gpu_types.items()}
    gpus = {j.id: j.gpus for j in problem.jobs}
    chosen: dict[str, str] = {}
    while True:
        best: tuple[float, str, str] | None = None
        prices = {k: price(load[k], caps[k], low, high, back[k]) for k in problem.types}
        for (jid, k), d in dens.items():
            if jid in chosen or load[k] + gpus[jid] > caps[k]:
                continue
            surplus = d - prices[k]
            if surplus > 0 and (best is None or (surplus, jid, k) > (best[0], best[1], best[2])):
                best = (surplus, jid, k)
        if best is None:
            break
        _, jid, k = best
        chosen[jid] = k
        load[k] += gpus[jid]
    final = {k: price(load[k], caps[k], low, high, back[k]) for k in problem.types}
    return chosen, load, final


def _round(
    problem: Problem, options: PolicyOptions, policy: str = "hadar",
) -> tuple[dict[str, str], dict[str, float], dict[str, float], dict[str, float]]:
    """One round of Hadar from the carried state: ``(job -> type, load, prices, backlog used)``;
    the state is advanced for the next round."""
    knobs = Knobs.of(policy, options)
    book = options.state.get(KEY, {}).get("backlog", {})
    used = {k: min(float(book.get(k, 0.0)), knobs.cap * float(c)) for k, c in problem.gpu_types.items()}
    chosen, load, prices = hadar_assign(problem, used, knobs, options.round_s)
    carry(options.state, problem, densities(problem, knobs, options.round_s), knobs)
    return chosen, load, prices, used


@register("hadar", "Hadar: per-type prices rising with load; each job on the type with the best utility minus price",
          dynamic=True, params=PARAMS)
def hadar(problem: Problem, options: PolicyOptions) -> Allocation:
    started = time.perf_counter()
    chosen, load, prices, backlog = _round(problem, options)
    x = {j.id: ({chosen[j.id]: 1.0} if j.id in chosen else {}) for j in problem.jobs}
    return Allocation("hadar", x, AllocationStatus.HEURISTIC, "none", time.perf_counter() - started,
                      info={"prices": prices, "load": load, "backlog": backlog})


def _fork_gain(job: Job, members: list[str], extra: str, sync: float) -> float:
    """Rise of the job's combined normalised rate when a copy on ``extra`` joins ``members``."""
    now = sum(job.normalised(k) for k in members)
    now = now if len(members) == 1 else (1 - sync) * now
    after = (1 - sync) * (sum(job.normalised(k) for k in members) + job.normalised(extra))
    return after - now


@register("hadare",
          "HadarE: Hadar plus forking jobs into copies on otherwise idle GPUs of other types (simulator only)",
          dynamic=True, params=PARAMS)
def hadare(problem: Problem, options: PolicyOptions) -> Allocation:
    started = time.perf_counter()
    sync = options.fork_sync
    chosen, load, prices, backlog = _round(problem, options, "hadare")
    caps = {k: float(c) for k, c in problem.gpu_types.items()}
    free = {k: caps[k] - load[k] for k in problem.types}
    # GPUs a waiting job could still use are not forked into: copies never displace jobs
    for j in problem.jobs:
        if j.id not in chosen:
            for k in problem.types:
                if j.normalised(k) > 0 and j.gpus <= free[k]:
                    free[k] = 0.0
    members: dict[str, list[str]] = {jid: [k] for jid, k in chosen.items()}
    jobs = {j.id: j for j in problem.jobs}
    forks: dict[str, str] = {}
    x: dict[str, dict[str, float]] = {j.id: ({chosen[j.id]: 1.0} if j.id in chosen else {}) for j in problem.jobs}
    while True:
        best: tuple[float, str, str] | None = None
        for jid, ks in members.items():
            if len(ks) > MAX_COPIES:
                continue
            job = jobs[jid]
            for k in problem.types:
                if k in ks or job.normalised(k) <= 0 or job.gpus > free[k]:
                    continue
                gain = _fork_gain(job, ks, k, sync)
                if gain > 1e-9 and (best is None or (gain, jid, k) > best):
                    best = (gain, jid, k)
        if best is None:
            break
        _, jid, k = best
        copy_id = f"{jid}#fork{len(members[jid])}"
        members[jid].append(k)
        forks[copy_id] = jid
        x[copy_id] = {k: 1.0}
        free[k] -= jobs[jid].gpus
    return Allocation("hadare", x, AllocationStatus.HEURISTIC, "none", time.perf_counter() - started,
                      forks=forks, info={"prices": prices, "load": load, "backlog": backlog})
