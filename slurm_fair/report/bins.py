"""Time arithmetic of the report: how much of each job's interval falls in the window, or in
each of a set of bins (the timeline's equal bins, the fairness figures' slices).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .window import Window


def overlap_s(start: pd.Series, end: pd.Series, w: Window) -> pd.Series:
    """Seconds of ``[start, end)`` inside the window (0 when empty or start unknown)."""
    s = start.clip(lower=pd.Timestamp(w.since))
    e = end.clip(upper=pd.Timestamp(w.until))
    return ((e - s).dt.total_seconds()).fillna(0.0).clip(lower=0.0)


def bin_edges(w: Window, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends of ``bins`` equal bins of the window (datetime64 arrays, for :func:`overlap_h`)."""
    edges = pd.date_range(w.since, w.until, periods=bins + 1)
    return edges[:-1].to_numpy(dtype="datetime64[ns]"), edges[1:].to_numpy(dtype="datetime64[ns]")


def overlap_h(start: pd.Series, end: pd.Series, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Hours of every ``[start, end)`` (rows) inside every bin ``[lo, hi)`` (columns); 0 for NaT."""
    s = start.to_numpy(dtype="datetime64[ns]")
    e = end.to_numpy(dtype="datetime64[ns]")
    a = np.maximum(s[:, None], lo[None, :])
    b = np.minimum(e[:, None], hi[None, :])
    ov = np.nan_to_num((b - a).astype("timedelta64[ns]").astype(float) / 3.6e12, nan=0.0)
    return np.where((np.isnat(s) | np.isnat(e))[:, None], 0.0, np.clip(ov, 0.0, None))
