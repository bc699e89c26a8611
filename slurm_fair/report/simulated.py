"""Simulated (or replayed) job records as the report's accounting, so a what-if's fairness is
``report``'s own: one home for the sharing-incentive ratio (``simulate --what-if``).

``report`` scores Slurm's accounting (:class:`~slurm_fair.slurm.model.AccountingRecord`, one per
run) with :mod:`slurm_fair.report.window_fairness`: each tenant's sharing-incentive ratio
``U_u / V_u``, its GPU-hours weighted by ``n_jk`` over the value of its equal share summed over
slices of the window. Here a run's job record (:class:`slurm_fair.sim.metrics.JobRecord`, read
through :class:`RunRecord`: the report never imports the simulator) is written as the accounting
Slurm would have kept for it (one record per run, the times as datetimes from ``origin``, the
job's relative speeds as its ``n``), and the report's functions compute the figure: nothing is
re-implemented, so ``report`` over the same jobs gives the same number
(``tests/report/test_simulated.py``).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Mapping, Sequence

from typing import Any, Protocol

from ..slurm.model import AccountingRecord
from .data import JobSpeed, ReportInputs
from .jobs import jobs_frame
from .missing import NotComputed
from .usage import tenant_type_frame
from .window import Window
from .window_fairness import fairness_frames


class RunRecord(Protocol):
    """What a simulated job's record holds that its accounting needs."""

    @property
    def job_id(self) -> str: ...

    @property
    def tenant(self) -> str: ...

    @property
    def arrival_s(self) -> float: ...

    @property
    def start_s(self) -> float | None: ...

    @property
    def end_s(self) -> float | None: ...

    @property
    def gpu_type(self) -> str | None: ...

    @property
    def gpus(self) -> int: ...

    @property
    def throughput(self) -> Mapping[str, float]: ...

    @property
    def runs(self) -> tuple[tuple[float, float, str], ...]: ...

#: time 0 of a simulated run when the history gives no date
EPOCH = datetime(2026, 1, 1)


def _at(origin: datetime, s: float | None) -> datetime | None:
    return None if s is None else origin + timedelta(seconds=s)


def accounting(records: Sequence[RunRecord], origin: datetime = EPOCH) -> list[AccountingRecord]:
    """Each run of each record as Slurm's accounting of it (a job stopped and restarted has
    one record per run, as ``sacct -D`` shows a requeued job)."""
    out = []
    for r in records:
        if r.start_s is None:
            out.append(AccountingRecord(r.job_id, r.tenant, "", "PENDING", r.gpu_type, r.gpus,
                                        _at(origin, r.arrival_s), None, None, 0.0))
            continue
        runs = r.runs or ((r.start_s, r.end_s, r.gpu_type or ""),)
        for i, (a, b, k) in enumerate(runs):
            last = i == len(runs) - 1
            state = "RUNNING" if b is None else ("COMPLETED" if last else "REQUEUED")
            # Slurm resets a requeued job's SubmitTime to its requeue
            submit = r.arrival_s if i == 0 else runs[i - 1][1]
            out.append(AccountingRecord(r.job_id, r.tenant, "", state, k, r.gpus, _at(origin, submit), _at(origin, a),
                                        _at(origin, b), 0.0 if b is None else b - a))
    return out


def report_inputs(records: Sequence[RunRecord], capacity: Mapping[str, int], weights: Mapping[str, float],
                  origin: datetime = EPOCH) -> ReportInputs:
    """The report's inputs over the run: its window from the first arrival to the last end,
    each job's ``n_jk`` its relative speeds (fastest 1), the cluster's capacity."""
    acct = accounting(records, origin)
    times = [t for a in acct for t in (a.submit_time, a.start_time, a.end_time) if t is not None]
    since = min(times, default=origin)
    until = max(times, default=origin) + timedelta(seconds=1)
    speeds = {}
    for r in records:
        top = max(r.throughput.values(), default=0.0)
        if top > 0:
            speeds[r.job_id] = JobSpeed({k: v / top for k, v in r.throughput.items()}, "simulated")
    return ReportInputs(window=Window(since, until), records=tuple(acct), capacity=dict(capacity),
                        weights={r.tenant: float(weights.get(r.tenant, 1.0)) for r in records}, speeds=speeds,
                        now=until)


def si_ratios(records: Sequence[RunRecord], capacity: Mapping[str, int], weights: Mapping[str, float],
              origin: datetime = EPOCH) -> dict[str, float | None]:
    """Each tenant's sharing-incentive ratio over the run, as ``report`` computes it
    (:func:`slurm_fair.report.window_fairness.fairness_frames`); None where undefined."""
    inputs = report_inputs(records, capacity, weights, origin)
    jobs = jobs_frame(inputs)
    if jobs.empty:
        return {}
    missing: list[NotComputed] = []
    si, _, _ = fairness_frames(jobs, tenant_type_frame(jobs, inputs), inputs, missing)
    return {str(row.tenant): (None if not math.isfinite(row.si_ratio) else float(row.si_ratio))
            for row in si.itertuples(index=False)}


def add_si(metrics: dict[str, Any], records: Sequence[RunRecord], capacity: Mapping[str, int],
           weights: Mapping[str, float]) -> None:
    """Put each tenant's ``si_ratio`` in a run's per-tenant figures (``metrics["tenants"]``)."""
    for t, v in si_ratios(records, capacity, weights).items():
        metrics.setdefault("tenants", {}).setdefault(t, {})["si_ratio"] = v
