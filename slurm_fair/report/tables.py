"""The report's figures, computed with pandas from :class:`~.data.ReportInputs`.

Every definition is written out in ``docs/reports.md``; the short version:

* a job's *run* in the window is ``[start, end)`` clipped to ``[since, until)`` (a running job
  ends at ``min(until, now)``); a job fully inside keeps sacct's own ``Elapsed``, so GPU-hours
  equal ``sacct``'s to the second;
* a job's *active* time is ``[submit, end)`` clipped the same way: the time it wanted GPUs;
* normalised-throughput-hours (NTH) = GPU-hours x ``n_jk`` of the job on the type it ran on;
* window utility ``U_u`` = the tenant's NTH; window bundle value ``V_u(B)`` = docs/fairness.md's
  ``V_u`` with the window as the period: 1-GPU units, demand of a job = ``g_j`` x its active
  hours (the LP is :func:`slurm_fair.fairness.best_use`, unchanged);
* sharing-incentive ratio = ``U_u / V_u((w_u/W) C H)``; envy ``V_u((w_u/w_v) Y_v) / U_u``;
* efficiency = ``E / E*`` with ``E* = V_all(C H)`` (all jobs as one tenant);
* finish-time fairness ``rho = JCT / JCT_iso`` with :func:`slurm_fair.fairness.isolated_jct`
  over the jobs active at the job's submission (the simulator's baseline, frozen then).

Computations never raise for missing data: a figure that cannot be computed is left out and
its reason appended to :attr:`Report.not_computed`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from .. import fairness
from ..jobclasses import JobClass
from ..model import Job, Problem
from .data import UNTYPED, ReportInputs
from .window import Window

#: cycle statuses of the controller that are not failures (docs/controller.md)
OK_CYCLE_STATUSES = frozenset({"ok", "dry-run"})

#: number of time bins of the share-over-time series
TIMELINE_BINS = 48
#: the most slices the window's fairness LPs are summed over (more events: equal slices)
MAX_SLICES = 256


@dataclass(frozen=True)
class _Units(JobClass):
    """A class of 1-GPU units whose demand is a number of GPU-hours, not a job count.

    ``fairness.best_use`` bounds ``sum_k z_ck <= count``; over a window a gang of ``g`` GPUs
    active for ``A`` hours is, in the LP, exactly ``g`` units of ``A`` hours each (same ``n``),
    so the demand is ``g * A`` and the objective counts normalised GPU-hours (= NTH).
    """

    demand_h: float = 0.0

    @property
    def count(self) -> float:  # type: ignore[override]
        return self.demand_h


@dataclass
class NotComputed:
    """A figure the report could not compute, and why (shown in every format)."""

    figure: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"figure": self.figure, "reason": self.reason}


@dataclass
class Report:
    """All tables of one report (pandas frames) plus what could not be computed."""

    window: Window
    generated_at: datetime
    tenant_filter: str | None
    jobs: pd.DataFrame
    tenant_type: pd.DataFrame
    tenants: pd.DataFrame
    envy: pd.DataFrame
    cluster: pd.DataFrame
    summary: dict[str, Any]
    timeline: pd.DataFrame
    controller: dict[str, Any]
    not_computed: list[NotComputed] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --- jobs -------------------------------------------------------------------------------------


def _overlap_s(start: pd.Series, end: pd.Series, w: Window) -> pd.Series:
    """Seconds of ``[start, end)`` inside the window (0 when empty or start unknown)."""
    s = start.clip(lower=pd.Timestamp(w.since))
    e = end.clip(upper=pd.Timestamp(w.until))
    return ((e - s).dt.total_seconds()).fillna(0.0).clip(lower=0.0)


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
    clipped = _overlap_s(df["start"], end_eff, w)
    inside = (
        df["start"].notna() & df["end"].notna()
        & (df["start"] >= pd.Timestamp(w.since)) & (df["end"] <= pd.Timestamp(w.until))
    )
    # fully inside: sacct's own Elapsed, so the report equals sacct exactly
    df["run_s"] = np.where(inside, df["elapsed_s"], clipped)
    df["active_s"] = np.maximum(_overlap_s(df["submit"].fillna(df["start"]), end_eff, w), df["run_s"])
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


# --- per tenant and type --------------------------------------------------------------------


def entitled_shares(inputs: ReportInputs, tenants: list[str]) -> dict[str, float]:
    """``w_u / W`` over the tenants active in the window (docs/fairness.md: only they take part)."""
    total = sum(inputs.weights.get(t, 1.0) for t in tenants)
    return {t: inputs.weights.get(t, 1.0) / total for t in tenants} if total > 0 else {}


def tenant_type_frame(jobs: pd.DataFrame, inputs: ReportInputs) -> pd.DataFrame:
    """GPU-hours, entitled and received share, NTH per (tenant, type)."""
    cols = ["tenant", "gpu_type", "weight", "gpu_hours", "nt_hours", "entitled_share",
            "entitled_gpu_hours", "received_share"]
    if jobs.empty:
        return pd.DataFrame(columns=cols)
    tenants = sorted(jobs["tenant"].unique())
    types = sorted(set(inputs.capacity) | set(jobs["gpu_type"]))
    grid = pd.MultiIndex.from_product([tenants, types], names=["tenant", "gpu_type"])
    agg = jobs.groupby(["tenant", "gpu_type"])[["gpu_hours", "nt_hours"]].sum().reindex(grid, fill_value=0.0)
    df = agg.reset_index()
    ent = entitled_shares(inputs, tenants)
    df["weight"] = df["tenant"].map(lambda t: float(inputs.weights.get(t, 1.0)))
    df["entitled_share"] = df["tenant"].map(ent)
    cap_h = df["gpu_type"].map(lambda k: inputs.capacity.get(k, np.nan) * inputs.window.hours)
    df["entitled_gpu_hours"] = df["entitled_share"] * cap_h
    used = df.groupby("gpu_type")["gpu_hours"].transform("sum")
    df["received_share"] = (df["gpu_hours"] / used.where(used > 0)).fillna(0.0)
    return df[cols]


# --- fairness over the window ---------------------------------------------------------------


def unit_classes(jobs: pd.DataFrame, inputs: ReportInputs, types: list[str],
                 demand_h: np.ndarray | None = None) -> dict[str, list[_Units]]:
    """Each tenant's demand as 1-GPU unit classes (grouped by identical speed vectors); the
    demand of a row is ``gpus x demand_h`` (default: its active hours in the window)."""
    out: dict[str, list[_Units]] = {}
    groups: dict[tuple, float] = {}
    hours = jobs["active_s"].to_numpy() / 3600.0 if demand_h is None else demand_h
    for row, h in zip(jobs.itertuples(index=False), hours):
        if h <= 0:
            continue
        sp = inputs.speeds.get(row.job_id)
        n = {k: float(sp.n.get(k, 0.0)) for k in types} if sp else {row.gpu_type: 1.0}
        key = (row.tenant, tuple(round(n.get(k, 0.0), 12) for k in types))
        groups[key] = groups.get(key, 0.0) + row.gpus * h
    for i, ((tenant, vec), demand) in enumerate(groups.items()):
        n = {k: v for k, v in zip(types, vec) if v > 0}
        if demand > 0 and n:
            out.setdefault(tenant, []).append(_Units(i, tenant, 1, n, (), demand))
    return out


def _bin_edges(w: Window, bins: int) -> tuple[np.ndarray, np.ndarray]:
    edges = pd.date_range(w.since, w.until, periods=bins + 1)
    return edges[:-1].to_numpy(dtype="datetime64[ns]"), edges[1:].to_numpy(dtype="datetime64[ns]")


def _overlap_h(start: pd.Series, end: pd.Series, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Hours of every ``[start, end)`` (rows) inside every bin ``[lo, hi)`` (columns); 0 for NaT."""
    s = start.to_numpy(dtype="datetime64[ns]")
    e = end.to_numpy(dtype="datetime64[ns]")
    a = np.maximum(s[:, None], lo[None, :])
    b = np.minimum(e[:, None], hi[None, :])
    ov = np.nan_to_num((b - a).astype("timedelta64[ns]").astype(float) / 3.6e12, nan=0.0)
    return np.where((np.isnat(s) | np.isnat(e))[:, None], 0.0, np.clip(ov, 0.0, None))


def _slices(jobs: pd.DataFrame, w: Window, stop: pd.Timestamp) -> tuple[np.ndarray, np.ndarray]:
    """The window cut where any job is submitted, starts or ends (between two cuts who is
    active and who runs does not change, so a slice's value is exact); equal slices instead
    when there would be more than :data:`MAX_SLICES`."""
    since, until = pd.Timestamp(w.since), pd.Timestamp(w.until)
    times = pd.concat([jobs["submit"], jobs["start"], jobs["end"].fillna(stop)]).dropna()
    cuts = sorted({since, until, *(t for t in times if since < t < until)})
    if len(cuts) - 1 > MAX_SLICES:
        return _bin_edges(w, MAX_SLICES)
    edges = pd.DatetimeIndex(cuts).to_numpy(dtype="datetime64[ns]")
    return edges[:-1], edges[1:]


def fairness_frames(
    jobs: pd.DataFrame, tt: pd.DataFrame, inputs: ReportInputs, missing: list[NotComputed],
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Per-tenant SI ratios, the envy matrix and the cluster efficiency ``E/E*``.

    The equal share is a rate, not a budget: ``V_u`` is summed over slices of the window (cut
    where any job arrives, starts or ends), each valued with the jobs active in that slice and
    the share ``w_u / W_s`` of the tenants active then (docs/reports.md). Envy values another
    tenant's GPU-hours slice by slice the same way."""
    tenants = sorted(jobs["tenant"].unique()) if not jobs.empty else []
    types = sorted(inputs.capacity)
    H = inputs.window.hours
    classes = unit_classes(jobs, inputs, types)
    utility = jobs.groupby("tenant")["nt_hours"].sum().to_dict() if tenants else {}
    equal_value = {u: 0.0 for u in tenants}
    envy_value = {(u, v): 0.0 for u in tenants for v in tenants if u != v}
    if tenants and types:
        stop = min(pd.Timestamp(inputs.window.until), pd.Timestamp(inputs.now))
        lo, hi = _slices(jobs, inputs.window, stop)
        bin_h = (hi - lo).astype("timedelta64[ns]").astype(float) / 3.6e12
        end_eff = jobs["end"].fillna(stop)
        active = _overlap_h(jobs["submit"].fillna(jobs["start"]), end_eff, lo, hi)
        ran = _overlap_h(jobs["start"], end_eff, lo, hi)
        tenant_of = jobs["tenant"].to_numpy()
        gpus = jobs["gpus"].to_numpy(dtype=float)
        kind = jobs["gpu_type"].to_numpy()
        for b in range(len(lo)):
            per = unit_classes(jobs, inputs, types, active[:, b])
            present = sorted(per)
            total_w = sum(inputs.weights.get(t, 1.0) for t in present)
            used = {v: {k: float((gpus * ran[:, b])[(tenant_of == v) & (kind == k)].sum()) for k in types}
                    for v in tenants}
            gpu_hours = {k: inputs.capacity[k] * bin_h[b] for k in types}
            for u in present:
                w_u = inputs.weights.get(u, 1.0)
                equal_value[u] += fairness.best_use(per[u], fairness.weighted_share(w_u, total_w, gpu_hours)).value
                for v in tenants:
                    if v == u or not any(used[v].values()):
                        continue
                    bundle = fairness.envied_bundle(w_u, inputs.weights.get(v, 1.0), used[v])
                    envy_value[(u, v)] += fairness.best_use(per[u], bundle).value
    rows = []
    for u in tenants:
        v = equal_value[u]
        ratio = utility.get(u, 0.0) / v if v > 0 else np.nan
        if v <= 0:
            missing.append(NotComputed(f"sharing-incentive ratio of {u}",
                                       "its equal share has no value to its jobs (no demand on any known GPU type)"))
        rows.append({"tenant": u, "nt_hours": utility.get(u, 0.0), "equal_share_value": v, "si_ratio": ratio})
    si = pd.DataFrame(rows, columns=["tenant", "nt_hours", "equal_share_value", "si_ratio"])
    envy = pd.DataFrame(np.nan, index=pd.Index(tenants, name="tenant"), columns=pd.Index(tenants, name="of"))
    if len(tenants) < 2:
        missing.append(NotComputed("envy matrix", "fewer than two tenants in the window"))
    for (u, v), value in envy_value.items():
        if classes.get(u):
            envy.loc[u, v] = value / utility[u] if utility.get(u, 0.0) > 0 else (np.inf if value > 0 else 1.0)
    summary: dict[str, Any] = {"tenants": len(tenants), "jobs": int(jobs["job_id"].nunique()) if tenants else 0}
    e = float(jobs.loc[jobs["gpu_type"].isin(types), "nt_hours"].sum()) if tenants else 0.0
    every = [c for cs in classes.values() for c in cs]
    summary["nt_hours"] = e
    unknown = sorted(set(jobs["gpu_type"]) - set(types)) if tenants else []
    if unknown:
        missing.append(NotComputed("efficiency of types " + ", ".join(unknown),
                                   "GPU type used in accounting but not on any node now (no capacity)"))
    if not types:
        missing.append(NotComputed("efficiency E/E*", "no GPU capacity known (no typed GPUs on any node)"))
    elif every:
        e_star = fairness.best_use(every, {k: inputs.capacity[k] * H for k in types}).value
        summary["nt_hours_bound"] = e_star
        summary["efficiency"] = fairness.efficiency_ratio(e, e_star)
    else:
        missing.append(NotComputed("efficiency E/E*", "no GPU jobs in the window"))
    return si, envy, summary


# --- jobs: waiting, JCT, finish-time fairness -------------------------------------------------


def ftf_frame(jobs: pd.DataFrame, inputs: ReportInputs, missing: list[NotComputed]) -> pd.DataFrame:
    """Wait, JCT and ``rho`` of each completed job, on its final run's row (earlier runs of a
    requeued job: NaN); ``JCT_iso`` as in docs/reports.md. A job's wait is from its first
    submission to its first start, its JCT from its first submission to its end, its work the
    elapsed time of all its runs."""
    df = jobs.copy()
    df["wait_s"] = np.where(df["final"], (df["first_start"] - df["first_submit"]).dt.total_seconds(), np.nan)
    df["jct_s"] = (df["end"] - df["first_submit"]).dt.total_seconds()
    done = (df["final"] & df["state"].eq("COMPLETED") & df["end"].notna() & df["start"].notna()
            & df["first_submit"].notna())
    df.loc[~done, "jct_s"] = np.nan
    df["jct_iso_s"] = np.nan
    df["ftf_rho"] = np.nan
    if not done.any():
        missing.append(NotComputed("JCT and finish-time fairness", "no completed jobs in the window"))
        return df
    if not inputs.capacity:
        missing.append(NotComputed("finish-time fairness", "no GPU capacity known"))
        return df
    types = sorted(inputs.capacity)
    stop = pd.Timestamp(inputs.now)
    end_eff = df["end"].fillna(stop).to_numpy(dtype="datetime64[ns]")
    submit = df["first_submit"].fillna(df["first_start"]).to_numpy(dtype="datetime64[ns]")
    final = df["final"].to_numpy()
    # Job objects built once; each completed job's problem is the subset active at its submit
    all_jobs = [
        Job(r.job_id, r.tenant, int(r.gpus), _speed(inputs, r.job_id, r.gpu_type, types))
        for r in df.itertuples(index=False)
    ]
    weights = dict(inputs.weights)
    iso = np.full(len(df), np.nan)
    rho = np.full(len(df), np.nan)
    # seconds on its fastest type, over all its runs
    work = (df["elapsed_s"] * df["n"]).groupby(df["job_id"]).transform("sum").to_numpy()
    jct = df["jct_s"].to_numpy()
    for i in np.flatnonzero(done.to_numpy()):
        t = submit[i]
        active = np.flatnonzero(final & (submit <= t) & (end_eff > t))
        problem = Problem(gpu_types=inputs.capacity, tenants=weights, jobs=tuple(all_jobs[a] for a in active))
        jct_iso = fairness.isolated_jct(problem, all_jobs[i].id, float(work[i]))
        if jct_iso:  # a run shorter than sacct's second has no measurable rho
            iso[i] = jct_iso
            rho[i] = fairness.ftf_rho(jct[i], jct_iso)
    df["jct_iso_s"] = iso
    df["ftf_rho"] = rho
    if df.loc[done, "ftf_rho"].isna().any():
        missing.append(NotComputed("finish-time fairness of some jobs",
                                   "the job's GPU type has no capacity now, so its isolated share is 0"))
    return df


def _speed(inputs: ReportInputs, job_id: str, gpu_type: str, types: list[str]) -> dict[str, float]:
    sp = inputs.speeds.get(job_id)
    return {k: float(sp.n.get(k, 0.0)) for k in types} if sp else {gpu_type: 1.0}


def tenant_frame(jobs: pd.DataFrame, si: pd.DataFrame, tt: pd.DataFrame, inputs: ReportInputs) -> pd.DataFrame:
    """One row per tenant: totals, shares, SI ratio, waiting time, JCT and rho statistics."""
    cols = ["tenant", "weight", "entitled_share", "received_share", "gpu_hours", "nt_hours",
            "equal_share_value", "si_ratio", "jobs", "completed", "wait_mean_s", "wait_max_s",
            "jct_mean_s", "ftf_rho_mean", "ftf_rho_max"]
    if jobs.empty:
        return pd.DataFrame(columns=cols)
    g = jobs.groupby("tenant")
    df = pd.DataFrame({
        "gpu_hours": g["gpu_hours"].sum(),
        "jobs": g["job_id"].nunique(),
        "completed": g["jct_s"].count(),
        "wait_mean_s": g["wait_s"].mean(),
        "wait_max_s": g["wait_s"].max(),
        "jct_mean_s": g["jct_s"].mean(),
        "ftf_rho_mean": g["ftf_rho"].mean(),
        "ftf_rho_max": g["ftf_rho"].max(),
    }).reset_index()
    total = df["gpu_hours"].sum()
    df["received_share"] = df["gpu_hours"] / total if total > 0 else 0.0
    ent = entitled_shares(inputs, list(df["tenant"]))
    df["entitled_share"] = df["tenant"].map(ent)
    df["weight"] = df["tenant"].map(lambda t: float(inputs.weights.get(t, 1.0)))
    df = df.merge(si, on="tenant", how="left")
    return df[cols]


def cluster_frame(jobs: pd.DataFrame, inputs: ReportInputs, missing: list[NotComputed]) -> pd.DataFrame:
    """Utilisation per type: GPU-hours used / (capacity x window hours)."""
    types = sorted(set(inputs.capacity) | (set(jobs["gpu_type"]) if not jobs.empty else set()))
    used = jobs.groupby("gpu_type")["gpu_hours"].sum() if not jobs.empty else pd.Series(dtype=float)
    rows = []
    for k in types:
        cap = inputs.capacity.get(k)
        cap_h = cap * inputs.window.hours if cap else np.nan
        u = float(used.get(k, 0.0))
        if not cap:
            missing.append(NotComputed(f"utilisation of {k}", "no node has this GPU type now (capacity unknown)"))
        rows.append({"gpu_type": k, "gpus": cap or 0, "gpu_hours": u, "capacity_gpu_hours": cap_h,
                     "utilisation": u / cap_h if cap else np.nan})
    return pd.DataFrame(rows, columns=["gpu_type", "gpus", "gpu_hours", "capacity_gpu_hours", "utilisation"])


def timeline_frame(jobs: pd.DataFrame, inputs: ReportInputs, bins: int = TIMELINE_BINS) -> pd.DataFrame:
    """Share of the cluster's GPUs each tenant held, per time bin (rows: bin start)."""
    w = inputs.window
    lo, hi = _bin_edges(w, bins)
    index = pd.Index(pd.to_datetime(lo), name="bin_start")
    total_gpus = sum(inputs.capacity.values())
    if jobs.empty or total_gpus <= 0:
        return pd.DataFrame(index=index)
    stop = min(pd.Timestamp(w.until), pd.Timestamp(inputs.now))
    ov = _overlap_h(jobs["start"], jobs["end"].fillna(stop), lo, hi)
    bin_h = (hi - lo).astype("timedelta64[ns]").astype(float) / 3.6e12
    held = ov * jobs["gpus"].to_numpy()[:, None] / (bin_h[None, :] * total_gpus)
    df = pd.DataFrame(held, columns=index)
    df["tenant"] = jobs["tenant"].to_numpy()
    out = df.groupby("tenant").sum().T
    out.index.name = "bin_start"
    return out


def controller_summary(inputs: ReportInputs, missing: list[NotComputed]) -> dict[str, Any]:
    """Cycle counts and timings from the state store (empty, with a reason, without one)."""
    if inputs.store is None:
        missing.append(NotComputed("controller cycle timings and allocations",
                                   "no controller state store (the controller has not run here)"))
        return {}
    cycles = [c for c in inputs.cycles if c.get("finished_at")]
    if not cycles:
        missing.append(NotComputed("controller cycle timings", "no finished controller cycle in the window"))
        return {"store": inputs.store, "cycles": 0}
    dur = [float(c["finished_at"]) - float(c["started_at"]) for c in cycles]
    last = cycles[-1]
    return {
        "store": inputs.store, "cycles": len(cycles),
        "failed_cycles": sum(1 for c in cycles if c.get("status") not in OK_CYCLE_STATUSES),
        "cycle_seconds_mean": float(np.mean(dur)), "cycle_seconds_max": float(np.max(dur)),
        "last_cycle_status": last.get("status"), "last_policy": last.get("policy"),
        "last_cycle_at": datetime.fromtimestamp(float(last["started_at"])).isoformat(timespec="seconds"),
        "last_cycle_seconds": dur[-1],
        "last_cycle_phases": _timings(last.get("timings_json")),
    }


def _timings(text: Any) -> dict[str, float]:
    """Phase -> seconds of a cycle's ``timings_json`` (bad entries dropped)."""
    try:
        doc = json.loads(text or "{}")
    except (TypeError, json.JSONDecodeError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {str(k): float(v) for k, v in doc.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


# --- the whole report -----------------------------------------------------------------------


def build(inputs: ReportInputs, tenant: str | None = None) -> Report:
    """Compute every table; fairness is computed over all tenants, then ``tenant`` filters."""
    missing: list[NotComputed] = []
    jobs = jobs_frame(inputs)
    jobs = ftf_frame(jobs, inputs, missing) if not jobs.empty else jobs.assign(
        wait_s=[], jct_s=[], jct_iso_s=[], ftf_rho=[])
    tt = tenant_type_frame(jobs, inputs)
    si, envy, summary = fairness_frames(jobs, tt, inputs, missing)
    tenants = tenant_frame(jobs, si, tt, inputs)
    cluster = cluster_frame(jobs, inputs, missing)
    timeline = timeline_frame(jobs, inputs)
    controller = controller_summary(inputs, missing)
    notes = list(inputs.notes)
    if not jobs.empty:
        flat = int((jobs["speed_source"] == "flat").sum())
        if flat:
            notes.append(f"{flat} of {len(jobs)} jobs have no throughput estimate (no fair:class tag, rule "
                         "or controller estimate): counted at the same speed on every GPU type")
    if jobs.empty:
        missing.append(NotComputed("all per-tenant figures", "no GPU jobs in accounting for the window"))
    if tenant is not None:
        jobs = jobs[jobs["tenant"] == tenant]
        tt = tt[tt["tenant"] == tenant]
        tenants = tenants[tenants["tenant"] == tenant]
        envy = envy.loc[[tenant]] if tenant in envy.index else envy.iloc[0:0]
        if tenant in timeline.columns:
            timeline = timeline[[tenant]]
    return Report(
        window=inputs.window, generated_at=inputs.now, tenant_filter=tenant, jobs=jobs,
        tenant_type=tt.reset_index(drop=True), tenants=tenants.reset_index(drop=True), envy=envy,
        cluster=cluster, summary=summary, timeline=timeline, controller=controller,
        not_computed=missing, notes=notes,
    )
