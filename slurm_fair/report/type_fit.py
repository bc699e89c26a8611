"""The report's "type fit" section: jobs that ran on a GPU type at least 2x slower for them than
another type that sat idle when they started.

A job's speed per type is the report's ``n_jk`` (:mod:`.data`: the controller's estimate, the
class table, learned speeds or the type priors; the source is listed beside it). A type *sat
idle* when, at the job's start, its installed GPUs minus those held by the runs of the window
that were running then were at least the job's GPUs. Accounting has no record of drained nodes
over time, so "idle" is an upper bound: the section lists candidates to look at, not proof.
"""

from __future__ import annotations

import pandas as pd

from .data import UNTYPED, ReportInputs

#: how much faster the idle type must be for the job to be listed
FIT_RATIO = 2.0
COLUMNS = ["job_id", "tenant", "gpu_type", "gpus", "start", "better_type", "speedup", "idle_gpus", "speed_source"]


def _busy_at(runs: pd.DataFrame, gpu_type: str, t: pd.Timestamp) -> int:
    """GPUs of ``gpu_type`` held at ``t`` by the runs of the window."""
    on = runs[(runs["gpu_type"] == gpu_type) & (runs["start"] <= t) & (runs["end"].isna() | (runs["end"] > t))]
    return int(on["gpus"].sum())


def type_fit_frame(jobs: pd.DataFrame, inputs: ReportInputs) -> pd.DataFrame:
    """One row per (job, faster idle type) with the best such type (module docstring)."""
    if jobs.empty:
        return pd.DataFrame(columns=COLUMNS)
    runs = jobs[jobs["start"].notna()]
    rows = []
    for j in runs.to_dict("records"):
        sp = inputs.speeds.get(j["job_id"])
        k = j["gpu_type"]
        if sp is None or k == UNTYPED or sp.n.get(k, 0) <= 0 or sp.source == "flat":
            continue
        best = None
        for other, n in sp.n.items():
            if other == k or n < FIT_RATIO * sp.n[k]:
                continue
            idle = int(inputs.capacity.get(other, 0)) - _busy_at(runs, other, j["start"])
            if idle >= j["gpus"] and (best is None or n > best[1]):
                best = (other, n, idle)
        if best is not None:
            rows.append({"job_id": j["job_id"], "tenant": j["tenant"], "gpu_type": k, "gpus": j["gpus"],
                         "start": j["start"], "better_type": best[0], "speedup": best[1] / sp.n[k],
                         "idle_gpus": best[2], "speed_source": sp.source})
    return pd.DataFrame(rows, columns=COLUMNS)
