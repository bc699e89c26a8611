"""Fairness over the report's window: each tenant's sharing-incentive ratio ``U_u / V_u``, the
envy matrix and the cluster efficiency ``E / E*``, with docs/fairness.md's bundle values
(:func:`slurm_fair.fairness.best_use`) summed over slices of the window (docs/reports.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .. import fairness
from ..jobgroups import JobGroup
from .bins import bin_edges, overlap_h
from .data import ReportInputs
from .missing import NotComputed
from .window import Window


#: the most slices the window's fairness LPs are summed over (more events: equal slices)
MAX_SLICES = 256


@dataclass(frozen=True)
class _Units(JobGroup):
    """A class of 1-GPU units whose demand is a number of GPU-hours, not a job count.

    ``fairness.best_use`` bounds ``sum_k z_ck <= count``; over a window a gang of ``g`` GPUs
    active for ``A`` hours is, in the LP, exactly ``g`` units of ``A`` hours each (same ``n``),
    so the demand is ``g * A`` and the objective counts normalised GPU-hours (= NTH).
    """

    demand_h: float = 0.0

    @property
    def count(self) -> float:  # type: ignore[override]
        return self.demand_h


def unit_groups(jobs: pd.DataFrame, inputs: ReportInputs, types: list[str],
                 demand_h: np.ndarray | None = None) -> dict[str, list[JobGroup]]:
    """Each tenant's demand as 1-GPU unit classes (grouped by identical speed vectors); the
    demand of a row is ``gpus x demand_h`` (default: its active hours in the window)."""
    out: dict[str, list[JobGroup]] = {}
    groups: dict[tuple[str, tuple[float, ...]], float] = {}
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


def _slices(jobs: pd.DataFrame, w: Window, stop: pd.Timestamp) -> tuple[np.ndarray, np.ndarray]:
    """The window cut where any job is submitted, starts or ends (between two cuts who is
    active and who runs does not change, so a slice's value is exact); equal slices instead
    when there would be more than :data:`MAX_SLICES`."""
    since, until = pd.Timestamp(w.since), pd.Timestamp(w.until)
    times = pd.concat([jobs["submit"], jobs["start"], jobs["end"].fillna(stop)]).dropna()
    cuts = sorted({since, until, *(t for t in times if since < t < until)})
    if len(cuts) - 1 > MAX_SLICES:
        return bin_edges(w, MAX_SLICES)
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
    classes = unit_groups(jobs, inputs, types)
    utility = jobs.groupby("tenant")["nt_hours"].sum().to_dict() if tenants else {}
    equal_value = {u: 0.0 for u in tenants}
    envy_value = {(u, v): 0.0 for u in tenants for v in tenants if u != v}
    if tenants and types:
        stop = min(pd.Timestamp(inputs.window.until), pd.Timestamp(inputs.now))
        lo, hi = _slices(jobs, inputs.window, stop)
        bin_h = (hi - lo).astype("timedelta64[ns]").astype(float) / 3.6e12
        end_eff = jobs["end"].fillna(stop)
        active = overlap_h(jobs["submit"].fillna(jobs["start"]), end_eff, lo, hi)
        ran = overlap_h(jobs["start"], end_eff, lo, hi)
        tenant_of = jobs["tenant"].to_numpy()
        gpus = jobs["gpus"].to_numpy(dtype=float)
        kind = jobs["gpu_type"].to_numpy()
        for b in range(len(lo)):
            per = unit_groups(jobs, inputs, types, active[:, b])
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
