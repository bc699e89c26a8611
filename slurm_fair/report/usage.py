"""Who used what: GPU-hours, entitled and received shares per tenant and type, per tenant, the
utilisation per type and the share-over-time series (docs/reports.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .bins import bin_edges, overlap_h
from .data import ReportInputs
from .missing import NotComputed


#: number of time bins of the share-over-time series
TIMELINE_BINS = 48


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


def tenant_frame(jobs: pd.DataFrame, si: pd.DataFrame, tt: pd.DataFrame, inputs: ReportInputs) -> pd.DataFrame:
    """One row per tenant: totals, shares, SI ratio, waiting time, JCT, rho and latency ratio
    statistics."""
    cols = ["tenant", "weight", "entitled_share", "received_share", "gpu_hours", "nt_hours",
            "equal_share_value", "si_ratio", "jobs", "completed", "wait_mean_s", "wait_max_s",
            "jct_mean_s", "ftf_rho_mean", "ftf_rho_max", "latency_ratio_mean", "latency_ratio_max"]
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
        "latency_ratio_mean": g["latency_ratio"].mean(),
        "latency_ratio_max": g["latency_ratio"].max(),
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
    lo, hi = bin_edges(w, bins)
    index = pd.Index(pd.to_datetime(lo), name="bin_start")
    total_gpus = sum(inputs.capacity.values())
    if jobs.empty or total_gpus <= 0:
        return pd.DataFrame(index=index)
    stop = min(pd.Timestamp(w.until), pd.Timestamp(inputs.now))
    ov = overlap_h(jobs["start"], jobs["end"].fillna(stop), lo, hi)
    bin_h = (hi - lo).astype("timedelta64[ns]").astype(float) / 3.6e12
    held = ov * jobs["gpus"].to_numpy()[:, None] / (bin_h[None, :] * total_gpus)
    df = pd.DataFrame(held, columns=index)
    df["tenant"] = jobs["tenant"].to_numpy()
    out = df.groupby("tenant").sum().T
    out.index.name = "bin_start"
    return out
