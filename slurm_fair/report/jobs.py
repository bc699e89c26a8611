"""The jobs table: one row per accounting record with its window figures, then each job's wait
and each completed job's JCT, finish-time fairness ``rho = JCT / JCT_iso`` and Hops' latency
ratio ``W / A`` (docs/reports.md: jobs).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import fairness
from ..model import Job
from .bins import overlap_s
from .data import UNTYPED, ReportInputs
from .missing import NotComputed

def jobs_frame(inputs: ReportInputs) -> pd.DataFrame:
    """One row per accounting record with its window figures (docs/reports.md: jobs).

    A job requeued (time-sharing) has one record per run (``sacct -D``): each run counts its own
    GPU-hours and its own active time (Slurm resets Submit at a requeue, so the runs' active
    times follow each other); ``first_submit``/``first_start`` and ``final`` tie the runs of one
    job together for its waiting time, JCT and finish-time fairness."""
    w = inputs.window
    cols = ["job_id", "tenant", "user", "state", "gpu_type", "gpus", "submit", "start", "end",
            "elapsed_s", "run_s", "active_s", "gpu_hours", "n", "nt_hours", "speed_source", "class",
            "first_submit", "first_start", "final"]
    if not inputs.records:
        return pd.DataFrame(columns=cols)
    stop = min(pd.Timestamp(w.until), pd.Timestamp(inputs.now))
    rows = []
    for r in inputs.records:
        k = r.gpu_type or UNTYPED
        sp = inputs.speeds.get(r.job_id)
        rows.append({
            "job_id": r.job_id, "tenant": r.account, "user": r.user, "state": r.state,
            "gpu_type": k, "gpus": int(r.gpus),
            "submit": r.submit_time, "start": r.start_time, "end": r.end_time,
            "elapsed_s": float(r.elapsed_s),
            "n": float(sp.n.get(k, 1.0)) if sp else 1.0,
            "speed_source": sp.source if sp else "flat", "class": sp.klass if sp else None,
        })
    df = pd.DataFrame(rows)
    for c in ("submit", "start", "end"):
        df[c] = pd.to_datetime(df[c])
    end_eff = df["end"].fillna(stop)
    clipped = overlap_s(df["start"], end_eff, w)
    inside = (
        df["start"].notna() & df["end"].notna()
        & (df["start"] >= pd.Timestamp(w.since)) & (df["end"] <= pd.Timestamp(w.until))
    )
    # fully inside: sacct's own Elapsed, so the report equals sacct exactly
    df["run_s"] = np.where(inside, df["elapsed_s"], clipped)
    df["active_s"] = np.maximum(overlap_s(df["submit"].fillna(df["start"]), end_eff, w), df["run_s"])
    df["gpu_hours"] = df["gpus"] * df["run_s"] / 3600.0
    df["nt_hours"] = df["gpu_hours"] * df["n"]
    by_job = df.groupby("job_id")
    df["first_submit"] = by_job["submit"].transform("min")
    df["first_start"] = by_job["start"].transform("min")
    # the final run: the one still running, else the one that ended last
    running = df["end"].isna()
    still = running.groupby(df["job_id"]).transform("any")
    latest = df["end"].eq(by_job["end"].transform("max"))
    df["final"] = np.where(still, running, latest) & ~df.duplicated(["job_id", "end"], keep="last")
    return df[cols]


# --- waiting, JCT, finish-time fairness ------------------------------------------------------


def ftf_frame(jobs: pd.DataFrame, inputs: ReportInputs, missing: list[NotComputed]) -> pd.DataFrame:
    """Wait of each job that started; JCT, ``rho``, age and latency ratio of each completed job;
    all on its final run's row (earlier runs of a requeued job: NaN); ``JCT_iso`` as in
    docs/reports.md. A job's JCT is from its first submission to its end, its wait the part of
    that (up to now for a job not ended) it did not run (the simulator's wait: the gaps between
    the runs of a requeued job count), its work the elapsed time of all its runs."""
    df = jobs.copy()
    now = pd.Timestamp(inputs.now)
    # a run still going has run from its start until now (sacct's Elapsed so far)
    so_far = df["elapsed_s"].where(df["end"].notna(), (now - df["start"]).dt.total_seconds().clip(lower=0.0))
    ran = so_far.groupby(df["job_id"]).transform("sum")
    span = (df["end"].fillna(now) - df["first_submit"]).dt.total_seconds()
    waits = np.vectorize(fairness.wait_s, otypes=[float])(span, ran)
    df["wait_s"] = np.where(df["final"] & df["first_start"].notna(), waits, np.nan)
    df["jct_s"] = (df["end"] - df["first_submit"]).dt.total_seconds()
    done = (df["final"] & df["state"].eq("COMPLETED") & df["end"].notna() & df["start"].notna()
            & df["first_submit"].notna())
    df.loc[~done, "jct_s"] = np.nan
    for c in ("jct_iso_s", "ftf_rho", "age_s", "latency_ratio"):
        df[c] = np.nan
    if not done.any():
        missing.append(NotComputed("JCT, finish-time fairness and latency ratio", "no completed jobs in the window"))
        return df
    if not inputs.capacity:
        missing.append(NotComputed("finish-time fairness and latency ratio", "no GPU capacity known"))
        return df
    types = sorted(inputs.capacity)
    # Job objects built once; the per-job measures' one definition (fairness.rhos_at_arrival)
    # takes each completed job's baseline over the jobs in the system at its first submission
    all_jobs = [
        Job(r.job_id, r.tenant, int(r.gpus), _speed(inputs, r.job_id, r.gpu_type, types))
        for r in df.itertuples(index=False)
    ]
    # seconds on its fastest type, over all its runs
    work = (df["elapsed_s"] * df["n"]).groupby(df["job_id"]).transform("sum").to_numpy()
    jct = df["jct_s"].to_numpy()
    final = df["final"].to_numpy()
    submit = df["first_submit"].fillna(df["first_start"])
    t0 = submit.min()
    done_np = done.to_numpy()
    spans = []
    ends = df["end"]
    for i in np.flatnonzero(final & submit.notna().to_numpy()):
        # seconds from the first submission; a job that ended without completing leaves the
        # system at its end (no rho of its own: work None), one still running stays in it
        arrive = (submit.iloc[i] - t0).total_seconds()
        end = None if pd.isna(ends.iloc[i]) else (ends.iloc[i] - t0).total_seconds()
        spans.append(fairness.JobSpan(
            str(i), all_jobs[i].tenant, float(inputs.weights.get(all_jobs[i].tenant, 1.0)), all_jobs[i].gpus,
            all_jobs[i].throughput, arrive, end, float(work[i]) if done_np[i] else None))
    rhos = fairness.rhos_at_arrival(spans, inputs.capacity)
    iso = np.full(len(df), np.nan)
    rho = np.full(len(df), np.nan)
    for key, value in rhos.items():
        rho[int(key)] = value  # a run shorter than sacct's second has no measurable rho
        iso[i] = jct[i] / value if value > 0 else np.nan
    df["jct_iso_s"] = iso
    df["ftf_rho"] = rho
    _latency_ratios(df, done.to_numpy(), all_jobs, work, inputs)
    if df.loc[done, "ftf_rho"].isna().any():
        missing.append(NotComputed("finish-time fairness of some jobs",
                                   "the job's GPU type has no capacity now, so its isolated share is 0"))
    return df


def _latency_ratios(df: pd.DataFrame, done: np.ndarray, all_jobs: list[Job], work: np.ndarray,
                    inputs: ReportInputs) -> None:
    """Hops' age ``A`` (:func:`slurm_fair.fairness.age_s` of the job's work in seconds on its
    fastest type, its ``n_jk`` and the cluster's capacity) and ``LR = W / A`` of each completed
    job. A job that can run on no GPU type with capacity now has its run time as its age."""
    age = np.full(len(df), np.nan)
    lr = np.full(len(df), np.nan)
    wait = df["wait_s"].to_numpy()
    for i in np.flatnonzero(done):
        a = fairness.age_s(float(work[i]), all_jobs[i].throughput, inputs.capacity)
        age[i] = a if math.isfinite(a) else float(work[i])
        lr[i] = fairness.latency_ratio(float(wait[i]), age[i])
    df["age_s"] = age
    df["latency_ratio"] = lr


def wait_summary(jobs: pd.DataFrame) -> dict[str, float | None]:
    """Over all jobs of the report: mean wait (jobs that started), mean and max latency ratio
    (completed jobs), and the max over completed jobs of at least one round."""
    def stat(col: str, how: str) -> float | None:
        v = jobs[col].dropna() if col in jobs else pd.Series(dtype=float)
        return float(getattr(v, how)()) if len(v) else None

    pairs = [] if "age_s" not in jobs else [
        (float(w), float(a)) for w, a in zip(jobs["wait_s"], jobs["age_s"]) if pd.notna(w) and pd.notna(a)]
    return {"wait_mean_s": stat("wait_s", "mean"), "latency_ratio_mean": stat("latency_ratio", "mean"),
            "latency_ratio_max": stat("latency_ratio", "max"),
            # the simulator's latency_ratio_max_1round: jobs of at least one round (360 s)
            "latency_ratio_max_1round": fairness.worst_latency_ratio(pairs, fairness.LR_MIN_AGE_S)}


def _speed(inputs: ReportInputs, job_id: str, gpu_type: str, types: list[str]) -> dict[str, float]:
    sp = inputs.speeds.get(job_id)
    return {k: float(sp.n.get(k, 0.0)) for k in types} if sp else {gpu_type: 1.0}
