"""The metrics of docs/fairness.md as pure functions over job records and round samples.

Two inputs, both plain data, so the same code scores a simulation and a real cluster (where the
records come from Slurm accounting):

* :class:`JobRecord` - one job: tenant, arrival/start/end, GPU type and count; optionally its
  total work and throughput per type (needed for finish-time fairness, latency ratios and
  slowdowns) and its GPU-seconds per type (for shares; default: ``gpus * (end - start)`` on
  ``gpu_type``).
* :class:`RoundSample` - one scheduling round: busy GPUs per type, normalised throughput,
  fragmented GPUs, fairness checks. :func:`samples_from_records` derives the time-based part
  and the fragmentation from job records when no simulator log exists.

Definitions that are our own choices (docs/fairness.md leaves them open) are written at each function
and in ``docs/simulator.md``.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from .. import fairness
from ..model import frozen_map, normalised_throughput


@dataclass(frozen=True)
class JobRecord:
    """One job's life. ``end_s`` is None for a job that did not finish."""

    job_id: str
    tenant: str
    arrival_s: float
    start_s: float | None
    end_s: float | None
    gpu_type: str | None
    gpus: int
    weight: float = 1.0
    #: total work (steps) of the job, when known
    work: float | None = None
    #: isolated throughput T_jk (steps/s) per GPU type, when known
    throughput: Mapping[str, float] = field(default_factory=dict)
    #: GPU-seconds per type actually used (default: gpus * run time on gpu_type)
    gpu_seconds: Mapping[str, float] = field(default_factory=dict)
    #: the runs of a job that was stopped and restarted: ``(start, end, gpu_type)`` each (empty:
    #: one run from ``start_s`` to ``end_s`` on ``gpu_type``)
    runs: tuple[tuple[float, float, str], ...] = ()
    #: seconds it held GPUs (None: the sum of ``runs``, else ``end - start``); the simulator
    #: knows it exactly (a job stopped and restarted between rounds has no ``runs``)
    run_s: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "throughput", frozen_map(self.throughput))
        object.__setattr__(self, "gpu_seconds", frozen_map(self.gpu_seconds))
        object.__setattr__(self, "runs", tuple(self.runs))

    def running_at(self, t: float) -> str | None:
        """The GPU type it runs on at time ``t`` (None: not running then)."""
        if self.runs:
            return next((k for a, b, k in self.runs if a <= t < b), None)
        if self.start_s is None or self.start_s > t or (self.end_s is not None and self.end_s <= t):
            return None
        return self.gpu_type

    @property
    def finished(self) -> bool:
        return self.end_s is not None

    @property
    def jct_s(self) -> float | None:
        return None if self.end_s is None else self.end_s - self.arrival_s

    def ran_s(self) -> float | None:
        """Seconds it held GPUs (start latencies included: Slurm shows the job running then)."""
        if self.run_s is not None:
            return self.run_s
        if self.runs:
            return sum(max(0.0, b - a) for a, b, _ in self.runs)
        if self.start_s is None or self.end_s is None:
            return None
        return max(0.0, self.end_s - self.start_s)

    @property
    def wait_s(self) -> float | None:
        """Hops' ``W``: a finished job's time in the system not running, ``JCT - ran_s`` (the
        wait before its first start plus every wait after a stop; None while unfinished)."""
        jct, ran = self.jct_s, self.ran_s()
        return None if jct is None or ran is None else fairness.wait_s(jct, ran)

    def used_gpu_seconds(self) -> dict[str, float]:
        if self.gpu_seconds:
            return dict(self.gpu_seconds)
        if self.start_s is None or self.end_s is None or not self.gpu_type:
            return {}
        return {self.gpu_type: self.gpus * max(0.0, self.end_s - self.start_s)}


@dataclass(frozen=True)
class RoundSample:
    """One round of ``duration_s`` seconds starting at ``start_s``."""

    start_s: float
    duration_s: float
    capacity: Mapping[str, int]
    busy: Mapping[str, int]
    #: GPU-seconds actually held by running jobs (None: ``busy`` GPUs for the whole round)
    busy_gpu_s: float | None = None
    #: sum over running jobs of their normalised throughput (n_jk of the speed realised)
    effective_throughput: float = 0.0
    #: idle GPUs after the round's placement, of the types some waiting job can run on (0 when
    #: no job waits); :func:`round_metrics` averages it over the rounds (Hops' Avg.frag)
    fragmented_gpus: int = 0
    #: None when not checked
    si_ok: bool | None = None
    ef_ok: bool | None = None
    #: GPUs per tenant in this round (for shares over time)
    tenant_gpus: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "capacity", frozen_map(self.capacity))
        object.__setattr__(self, "busy", frozen_map(self.busy))
        object.__setattr__(self, "tenant_gpus", frozen_map(self.tenant_gpus))


# --------------------------------------------------------------------------------------------
# job-level measures
# --------------------------------------------------------------------------------------------


def _stats(values: Sequence[float]) -> tuple[float | None, float | None, float | None, float | None]:
    """(mean, p50, p99, max) with numpy's linear percentiles; Nones for an empty list."""
    if not values:
        return None, None, None, None
    arr = np.asarray(values, dtype=float)
    return float(arr.mean()), float(np.percentile(arr, 50)), float(np.percentile(arr, 99)), float(arr.max())


def jct_stats(records: Iterable[JobRecord]) -> dict[str, float | None]:
    """Average, median and 99th percentile JCT of the finished jobs."""
    mean, p50, p99, _ = _stats([r.jct_s for r in records if r.jct_s is not None])
    return {"avg_jct_s": mean, "p50_jct_s": p50, "p99_jct_s": p99}


def makespan(records: Iterable[JobRecord]) -> float | None:
    """Last completion minus first arrival (None when no job finished)."""
    recs = list(records)
    ends = [r.end_s for r in recs if r.end_s is not None]
    if not ends:
        return None
    return max(ends) - min(r.arrival_s for r in recs)


def spans(records: Sequence[JobRecord]) -> list[fairness.JobSpan]:
    """The records as :class:`slurm_fair.fairness.JobSpan` (the per-job measures' input)."""
    return [fairness.JobSpan(r.job_id, r.tenant, r.weight, r.gpus, r.throughput, r.arrival_s, r.end_s, r.work)
            for r in records]


def ftf_rhos(records: Sequence[JobRecord], capacity: Mapping[str, int]) -> dict[str, float]:
    """``rho_j = JCT_j / JCT_j^iso`` for every finished job whose baseline is known
    (:func:`slurm_fair.fairness.rhos_at_arrival`: the baseline over the jobs in the system at
    the job's arrival). Jobs without work or throughputs have none."""
    return fairness.rhos_at_arrival(spans(records), capacity)


def job_slowdown(record: JobRecord) -> float | None:
    """:func:`slurm_fair.fairness.slowdown` of a finished job: its JCT over ``work / max_k
    T_jk``. Without work and throughputs (real-cluster records) the denominator is the job's own
    run time."""
    if record.end_s is None:
        return None
    best = max(record.throughput.values(), default=0.0)
    if record.work is not None and best > 0:
        alone = record.work / best
    else:
        alone = record.ran_s() or 0.0
    return fairness.slowdown(record.end_s - record.arrival_s, alone) if alone > 0 else None


def job_age(record: JobRecord, capacity: Mapping[str, int]) -> float | None:
    """Hops' age ``A`` of the job (:func:`slurm_fair.fairness.age_s`: its no-wait run time
    averaged over the cluster's types by GPU share), from its total work and throughputs.
    Without them (a real-cluster record), or when it can run on no type of ``capacity`` (the
    report's rule too), the best estimate of its no-wait run time is the time it ran."""
    if record.work is not None:
        age = fairness.age_s(record.work, record.throughput, capacity)
        if math.isfinite(age):
            return age
    return record.ran_s()


def job_latency_ratio(record: JobRecord, capacity: Mapping[str, int]) -> float | None:
    """Hops' latency ratio ``LR = W / A`` of a finished job (:func:`slurm_fair.fairness.
    latency_ratio` of :attr:`JobRecord.wait_s` and :func:`job_age`); None while unfinished."""
    wait, age = record.wait_s, job_age(record, capacity)
    return None if wait is None or age is None else fairness.latency_ratio(wait, age)


def wait_lr_stats(records: Iterable[JobRecord], capacity: Mapping[str, int]) -> dict[str, float | None]:
    """Average wait, mean and max latency ratio of the finished jobs (Hops' Table 3/4 columns),
    and the max over jobs of at least one round (``latency_ratio_max_1round``,
    :func:`slurm_fair.fairness.worst_latency_ratio`)."""
    recs = [r for r in records if r.finished]
    waits = [w for w in (r.wait_s for r in recs) if w is not None]
    pairs = [(r.wait_s, a) for r in recs if r.wait_s is not None and (a := job_age(r, capacity)) is not None]
    lrs = [fairness.latency_ratio(w, a) for w, a in pairs]
    lr_mean, _, _, lr_max = _stats(lrs)
    return {"avg_wait_s": float(np.mean(waits)) if waits else None,
            "latency_ratio_mean": lr_mean, "latency_ratio_max": lr_max,
            "latency_ratio_max_1round": fairness.worst_latency_ratio(pairs, fairness.LR_MIN_AGE_S)}


def normalised(record: JobRecord, gpu_type: str) -> float:
    """The record's ``n_jk`` (:func:`slurm_fair.model.normalised_throughput`); 1 when its
    throughputs are unknown (a real-cluster record: every GPU counts the same, *flat*)."""
    return normalised_throughput(record.throughput, gpu_type) if record.throughput else 1.0


# --------------------------------------------------------------------------------------------
# round-level measures
# --------------------------------------------------------------------------------------------


def round_metrics(samples: Sequence[RoundSample]) -> dict[str, float | int | None]:
    """Utilisation, effective throughput, fragmentation and SI/EF violation rounds.

    Utilisation: GPU-seconds held by running jobs (restart overheads included) over GPU-seconds
    offered during the simulated rounds. Effective throughput: time-weighted mean over rounds of
    the round's sum of ``n_jk``. Fragmentation is Hops' Avg.frag: the mean over all rounds of
    :attr:`RoundSample.fragmented_gpus` (a round where nobody waits counts 0).
    """
    total = sum(s.duration_s for s in samples)
    if not samples or total <= 0:
        return {"utilization": None, "effective_throughput": None, "fragmentation": None,
                "si_violation_rounds": 0, "ef_violation_rounds": 0, "rounds": 0}
    held = sum(s.busy_gpu_s if s.busy_gpu_s is not None else s.duration_s * sum(s.busy.values()) for s in samples)
    offered = sum(s.duration_s * sum(s.capacity.values()) for s in samples)
    util = held / offered if offered > 0 else None
    eff = sum(s.duration_s * s.effective_throughput for s in samples) / total
    return {
        "utilization": util,
        "effective_throughput": eff,
        "fragmentation": sum(s.fragmented_gpus for s in samples) / len(samples),
        "si_violation_rounds": sum(1 for s in samples if s.si_ok is False),
        "ef_violation_rounds": sum(1 for s in samples if s.ef_ok is False),
        "rounds": len(samples),
    }


def samples_from_records(records: Sequence[JobRecord], capacity: Mapping[str, int], round_s: float = 360.0) -> list[RoundSample]:
    """Round samples from job records alone (real clusters): a job counts as busy in a round when
    it runs at the round's midpoint (in one of its runs, for a job that was requeued); its
    effective throughput is ``n_jk`` of its type when the throughputs are known, else 1. A job
    waits in a round when it has arrived, not finished and does not run at the midpoint; the
    round's fragmentation is then the idle GPUs of the types some waiting job can run on (every
    type for a job whose throughputs are unknown), as the simulator counts it. Fairness checks
    are not derivable here."""
    starts = [r.start_s for r in records if r.start_s is not None]
    ends = [r.end_s for r in records if r.end_s is not None]
    if not starts or not ends:
        return []
    t0, t1 = min(r.arrival_s for r in records), max(ends)
    # one sweep over the rounds: the runs and the jobs in the system at each midpoint are kept
    # as events come, so a round costs what is running and waiting then, not the whole history
    runs = sorted(((a, b, k, i) for i, r in enumerate(records) for a, b, k in _runs_of(r)), key=lambda x: x[0])
    norm: dict[tuple[int, str], float] = {}
    stays = sorted(range(len(records)), key=lambda i: records[i].arrival_s)
    running: dict[tuple[int, int], tuple[float, str, int]] = {}
    run_ends: list[tuple[float, int, int]] = []
    present: dict[int, float] = {}
    stay_ends: list[tuple[float, int]] = []
    next_run = next_stay = 0
    samples: list[RoundSample] = []
    n_rounds = max(1, math.ceil((t1 - t0) / round_s))
    for n in range(n_rounds):
        mid = t0 + (n + 0.5) * round_s
        while next_run < len(runs) and runs[next_run][0] <= mid:
            a, b, k, i = runs[next_run]
            running[(i, next_run)] = (b, k, i)
            heapq.heappush(run_ends, (b, i, next_run))
            next_run += 1
        while run_ends and run_ends[0][0] <= mid:
            _, i, j = heapq.heappop(run_ends)
            running.pop((i, j), None)
        while next_stay < len(stays) and records[stays[next_stay]].arrival_s <= mid:
            i = stays[next_stay]
            end = records[i].end_s
            present[i] = math.inf if end is None else end
            heapq.heappush(stay_ends, (present[i], i))
            next_stay += 1
        while stay_ends and stay_ends[0][0] <= mid:
            present.pop(heapq.heappop(stay_ends)[1], None)
        busy: dict[str, int] = {}
        eff = 0.0
        tenants: dict[str, int] = {}
        on: set[int] = set()
        for _, k, i in running.values():
            if i in on:  # runs of one job do not overlap; a record's first run at mid counts
                continue
            on.add(i)
            r = records[i]
            busy[k] = busy.get(k, 0) + r.gpus
            tenants[r.tenant] = tenants.get(r.tenant, 0) + r.gpus
            if (i, k) not in norm:
                norm[(i, k)] = normalised(r, k)
            eff += norm[(i, k)]
        wanted: set[str] = set()
        for i in present:
            if i not in on:
                r = records[i]
                wanted |= {t for t, v in r.throughput.items() if v > 0} if r.throughput else set(capacity)
                if len(wanted) == len(capacity):
                    break
        frag = sum(max(0, c - busy.get(k, 0)) for k, c in capacity.items() if k in wanted)
        samples.append(RoundSample(t0 + n * round_s, round_s, capacity, busy, effective_throughput=eff,
                                   fragmented_gpus=frag, tenant_gpus=tenants))
    return samples


def _runs_of(r: JobRecord) -> list[tuple[float, float, str]]:
    """The intervals a record ran, ``[start, end)`` on a type (end inf while it has not ended),
    as :meth:`JobRecord.running_at` reads them."""
    if r.runs:
        return [(a, b, k) for a, b, k in r.runs]
    if r.start_s is None or not r.gpu_type:
        return []
    return [(r.start_s, math.inf if r.end_s is None else r.end_s, r.gpu_type)]


# --------------------------------------------------------------------------------------------
# per tenant and everything at once
# --------------------------------------------------------------------------------------------


def tenant_breakdown(records: Sequence[JobRecord], capacity: Mapping[str, int],
                     rhos: Mapping[str, float] | None = None) -> dict[str, dict[str, object]]:
    """Per tenant: jobs, finished, mean JCT, mean rho, average wait and mean/max latency ratio
    (:func:`wait_lr_stats`), share of all GPU-seconds used on each type, and utility (GPU-seconds
    weighted by the job's normalised throughput on that type, divided by the tenant's
    GPU-seconds: 1.0 means every GPU-second was on the job's best type)."""
    rhos = ftf_rhos(records, capacity) if rhos is None else rhos
    used_by_type: dict[str, float] = {}
    per: dict[str, dict[str, float]] = {}
    for r in records:
        for k, s in r.used_gpu_seconds().items():
            used_by_type[k] = used_by_type.get(k, 0.0) + s
            per.setdefault(r.tenant, {})
            per[r.tenant][k] = per[r.tenant].get(k, 0.0) + s
    out: dict[str, dict[str, object]] = {}
    by_tenant: dict[str, list[JobRecord]] = {}
    for r in records:
        by_tenant.setdefault(r.tenant, []).append(r)
    for tenant in sorted(by_tenant):
        mine = by_tenant[tenant]
        jcts = [r.jct_s for r in mine if r.jct_s is not None]
        my_rhos = [rhos[r.job_id] for r in mine if r.job_id in rhos]
        seconds = per.get(tenant, {})
        weighted = 0.0
        for r in mine:
            for k, s in r.used_gpu_seconds().items():
                weighted += s * normalised(r, k)
        total = sum(seconds.values())
        out[tenant] = {
            "jobs": len(mine),
            "jobs_completed": len(jcts),
            "avg_jct_s": float(np.mean(jcts)) if jcts else None,
            "ftf_rho_mean": float(np.mean(my_rhos)) if my_rhos else None,
            **wait_lr_stats(mine, capacity),
            "gpu_share": {k: (seconds.get(k, 0.0) / used_by_type[k]) for k in sorted(used_by_type) if used_by_type[k] > 0},
            "gpu_seconds": {k: seconds[k] for k in sorted(seconds)},
            "utility": weighted / total if total > 0 else None,
        }
    return out


def summarize(records: Sequence[JobRecord], samples: Sequence[RoundSample], capacity: Mapping[str, int]) -> dict[str, object]:
    """Every metric of the issue in one dict (JSON-ready; None where undefined)."""
    by_job = ftf_rhos(records, capacity)
    rhos = list(by_job.values())
    slowdowns = [x for x in (job_slowdown(r) for r in records) if x is not None]
    out: dict[str, object] = {}
    out.update(jct_stats(records))
    out["makespan_s"] = makespan(records)
    rho_mean, _, _, rho_max = _stats(rhos)
    out["ftf_rho_mean"] = rho_mean
    out["ftf_rho_max"] = rho_max
    out.update(wait_lr_stats(records, capacity))
    out.update(round_metrics(samples))
    out["max_slowdown"] = max(slowdowns) if slowdowns else None
    out["jobs_completed"] = sum(1 for r in records if r.finished)
    out["jobs"] = len(records)
    out["tenants"] = tenant_breakdown(records, capacity, by_job)
    return out
