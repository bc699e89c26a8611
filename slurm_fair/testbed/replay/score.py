"""Scoring a replay from Slurm accounting, with the simulator's own metrics.

Each job becomes a simulator :class:`~slurm_fair.sim.metrics.JobRecord` in *trace* seconds
(``(t - t0) * S``) from ``sacct`` (read through the real adapter,
:class:`~slurm_fair.slurm.cli.SlurmCli`) and the emulator's checkpoint: a requeued job keeps its
job id and ``sacct`` shows its last run only, so its first start and per-type GPU time come from
the checkpoint's segments. The metrics are :func:`~slurm_fair.sim.metrics.summarize`'s, plus
what only a real run has (requeues, emulation error).
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, overload

from ...sim.metrics import JobRecord, samples_from_records, summarize
from ...slurm.model import AccountingRecord
from ..emulator import Checkpoint, load_checkpoint
from .plan import ReplayJob


@overload
def to_trace(t: datetime | float, t0: float, time_scale: float) -> float: ...
@overload
def to_trace(t: None, t0: float, time_scale: float) -> None: ...
@overload
def to_trace(t: datetime | float | None, t0: float, time_scale: float) -> float | None: ...


def to_trace(t: datetime | float | None, t0: float, time_scale: float) -> float | None:
    """A wall-clock time -> trace seconds since the run's start."""
    if t is None:
        return None
    wall = t.timestamp() if isinstance(t, datetime) else float(t)
    return (wall - t0) * time_scale


def read_accounting(tb: Any, since: datetime, ids: set[str], clock: Callable[[], float],
                    sleep: Callable[[float], None], wait_s: float = 60.0,
                    every: list[AccountingRecord] | None = None) -> dict[str, AccountingRecord]:
    """The last run's sacct record of each of ``ids``, waiting until slurmdbd has every end
    time (earlier runs of a requeued job come from the emulator's checkpoint segments);
    ``every``, when given, receives every run's record of ``ids`` (what ``report`` reads)."""
    from ...slurm.cli import SlurmCli

    port = SlurmCli(env=dict(tb.env), cluster=tb.config.cluster_name)
    deadline = clock() + wait_s
    while True:
        # one record per run (sacct -D) in the order they ran: keep each job's last run
        runs = [r for r in port.accounting(since) if r.job_id in ids]
        recs = {r.job_id: r for r in runs}
        complete = set(recs) >= ids and all(r.end_time is not None for r in recs.values())
        if complete or clock() > deadline:
            if every is not None:
                every[:] = runs
            return recs
        sleep(1.0)


def read_checkpoints(jobs: Sequence[ReplayJob], run_dir: Path) -> dict[str, Checkpoint]:
    """Trace job id -> the emulator's checkpoint (jobs that never ran, or left an unreadable
    one, have none)."""
    cks: dict[str, Checkpoint] = {}
    for j in jobs:
        path = run_dir / "ckpt" / f"{j.slug}.json"
        if not path.is_file():
            continue
        try:
            cks[j.trace_id] = load_checkpoint(path, j.total_steps)
        except (ValueError, json.JSONDecodeError):
            pass
    return cks


def job_record(
    job: ReplayJob,
    acct: AccountingRecord | None,
    ck: Checkpoint | None,
    t0: float,
    time_scale: float,
) -> JobRecord:
    """One job as the simulator scores it, from sacct (+ the checkpoint's segments for requeues).

    Arrival is sacct's Submit (a requeue may move Submit: the earliest of it and the time the
    replay submitted wins); start is the first start; end is sacct's End of a COMPLETED job.
    The time it ran (for its wait, ``JCT - ran``) is ``end - start`` of a job that ran once.
    """
    arrival = to_trace(acct.submit_time if acct else None, t0, time_scale)
    if job.submitted_wall is not None:
        own = math.floor(job.submitted_wall)  # sacct stores whole seconds
        submitted = to_trace(own, t0, time_scale)
        arrival = submitted if arrival is None else min(arrival, submitted)
    start = to_trace(acct.start_time if acct else None, t0, time_scale)
    segs = ck.segments if ck else []
    if segs:
        first = to_trace(math.floor(min(s.started for s in segs)), t0, time_scale)
        start = first if start is None else min(start, first)
    done = acct is not None and acct.state.upper().startswith("COMPLETED") and acct.end_time is not None
    end = to_trace(acct.end_time, t0, time_scale) if done and acct is not None else None
    gpu_seconds: dict[str, float] = {}
    runs: list[tuple[float, float, str]] = []
    run_s: float | None = None
    if len(segs) > 1 and ck is not None:
        for k, s in ck.seconds_by_type().items():
            gpu_seconds[k] = s * time_scale * job.gpus
        for seg in segs:
            if seg.ended is not None:
                runs.append((to_trace(seg.started, t0, time_scale), to_trace(seg.ended, t0, time_scale), seg.gpu_type))
        if done and acct is not None and acct.start_time is not None and acct.end_time is not None:
            # Slurm's own last run (launch included, as a plain job's start..end) plus the
            # emulator's earlier runs: the time it held GPUs, so its wait is JCT minus this
            last = acct.start_time.timestamp()
            earlier = sum(seg.ended - seg.started for seg in segs if seg.ended is not None and seg.ended <= last)
            run_s = (acct.end_time.timestamp() - last + earlier) * time_scale
    return JobRecord(
        job_id=job.trace_id, tenant=job.account, arrival_s=float(arrival or 0.0), start_s=start, end_s=end,
        gpu_type=(acct.gpu_type if acct and acct.gpu_type else (segs[-1].gpu_type if segs else None)),
        gpus=job.gpus, weight=job.weight, work=job.total_steps, throughput=job.tput, gpu_seconds=gpu_seconds,
        runs=tuple(runs), run_s=run_s,
    )


def emulation_errors(jobs: Sequence[ReplayJob], accts: Mapping[str, AccountingRecord],
                     cks: Mapping[str, Checkpoint], time_scale: float,
                     min_real_s: float = 10.0) -> list[dict[str, Any]]:
    """For each completed single-run job: Slurm's elapsed time vs ``total_steps / T(type)``.

    Both in trace seconds; sacct's ElapsedRaw is whole seconds (resolution ``S`` trace s), so
    jobs shorter than ``min_real_s`` real seconds are left out (one second would be >10%).
    """
    out = []
    for j in jobs:
        a, ck = accts.get(j.slurm_id), cks.get(j.trace_id)
        if a is None or ck is None or ck.runs != 1 or not a.state.upper().startswith("COMPLETED") or not a.gpu_type:
            continue
        seg = ck.segments[0]
        if a.start_time is None or abs(a.start_time.timestamp() - seg.started) > 2.0:
            continue  # sacct's last run is not the emulator's run (requeued before it started)
        expected = j.expected_s(a.gpu_type)
        if expected / time_scale < min_real_s:
            continue
        measured = a.elapsed_s * time_scale
        out.append({"job": j.trace_id, "gpu_type": a.gpu_type, "expected_s": expected, "elapsed_s": measured,
                    "rel_error": (measured - expected) / expected})
    return out


def score(jobs: Sequence[ReplayJob], accts: Mapping[str, AccountingRecord], cks: Mapping[str, Checkpoint],
          capacity: Mapping[str, int], t0: float, time_scale: float,
          round_s: float) -> tuple[list[JobRecord], dict[str, Any], list[dict[str, Any]]]:
    """(records, metrics, emulation errors): the simulator's metrics of the run, plus the mean
    and max emulation error and the number of requeued jobs."""
    records = [job_record(j, accts.get(j.slurm_id), cks.get(j.trace_id), t0, time_scale) for j in jobs]
    samples = samples_from_records(records, capacity, round_s)
    metrics = summarize(records, samples, capacity)
    errors = emulation_errors(jobs, accts, cks, time_scale)
    abs_err = [abs(e["rel_error"]) for e in errors]
    metrics["emulation_rel_error_mean"] = sum(abs_err) / len(abs_err) if abs_err else None
    metrics["emulation_rel_error_max"] = max(abs_err, default=None)
    metrics["requeued_jobs"] = sum(1 for c in cks.values() if c.runs > 1)
    return records, metrics, errors


def tenant_fairness(jobs: Sequence[ReplayJob], runs: Sequence[AccountingRecord], capacity: Mapping[str, int],
                    weights: Mapping[str, float], since: datetime, until: datetime,
                    node_sizes: Mapping[str, list[int]] | None = None) -> dict[str, dict[str, Any]]:
    """Each tenant's sharing-incentive ratio and largest envy over the run, by the report's own
    definitions (:func:`slurm_fair.report.tables.build`, docs/reports.md: ``U_u / V_u`` of its
    weighted equal share summed over slices of the window, envy ``V_u(scaled y_v) / U_u``), on
    the run's sacct records (``runs``: every run of every job, as ``report`` reads them) with
    each job's true normalised speeds (the emulator's table), so ``report`` over the same window
    and these figures agree. ``node_sizes`` (GPUs of each node per type): as the report does
    (:func:`slurm_fair.report.data.gang_feasible`), a type none of whose nodes could hold a job's
    gang is worth nothing to it, and its speeds are relative to the best type that could (without
    it, an 8-GPU job that can only run on the one 8-GPU node was owed the 4-GPU nodes' faster
    GPUs and its tenant's ratio fell far below the report's). Keyed by Slurm account;
    ``envy_of`` names the tenant envied most."""
    from ...model import normalised_throughput
    from ...report.data import JobSpeed, ReportInputs, gang_feasible
    from ...report.tables import build
    from ...report.window import Window

    speeds = {j.slurm_id: JobSpeed({k: normalised_throughput(j.tput, k) for k in j.tput}, "replay")
              for j in jobs if j.slurm_id}
    if node_sizes:
        speeds = gang_feasible(speeds, list(runs), node_sizes)
    inputs = ReportInputs(Window(since, until), tuple(runs), dict(capacity), dict(weights), speeds, now=until)
    rep = build(inputs)
    out: dict[str, dict[str, Any]] = {}
    for row in rep.tenants.itertuples(index=False):
        u = str(row.tenant)
        si = float(row.si_ratio) if row.si_ratio == row.si_ratio else None  # NaN: not computed
        row_u = {str(v): float(e) for v, e in rep.envy.loc[u].items() if v != u and e == e} if u in rep.envy.index else {}
        worst = max(row_u, key=lambda v: row_u[v]) if row_u else None
        out[u] = {"si_ratio": si, "envy_max": row_u[worst] if worst is not None else None, "envy_of": worst}
    return out


def job_row(job: ReplayJob, acct: AccountingRecord | None, ck: Checkpoint | None, rec: JobRecord) -> dict[str, Any]:
    """One job of the result JSON's ``jobs`` list."""
    return {
        "job": job.trace_id, "slurm_id": job.slurm_id, "tenant": job.account, "trace_tenant": job.trace_tenant,
        "job_type": job.job_type, "gpus": job.gpus, "arrival_s": rec.arrival_s, "start_s": rec.start_s,
        "end_s": rec.end_s, "jct_s": rec.jct_s, "state": acct.state if acct else None,
        "gpu_type": rec.gpu_type, "runs": ck.runs if ck else 0,
        "types_run": [s.gpu_type for s in ck.segments] if ck else [],
        "expected_s": {k: job.expected_s(k) for k in sorted(job.tput)},
    }
