"""GPU usage per tenant and GPU type over a window, from accounting records (sacct).

``sacct -S since -E until`` returns every job that *overlapped* the window, with its whole
elapsed time. Usage inside the window is the overlap of ``[start, end)`` with ``[since, until)``
(a running job ends "now"), times its GPUs: GPU-seconds per (tenant, type). Jobs without GPUs
are left out; GPUs of unknown type (an untyped cluster) count under the type ``gpu``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Iterable

from .model import AccountingRecord
from .parse.gres import UNTYPED


def gpu_seconds_in_window(record: AccountingRecord, since: datetime, until: datetime) -> float:
    """GPU-seconds of ``record`` inside ``[since, until)``; 0 if it never ran there."""
    if record.gpus <= 0 or record.start_time is None:
        return 0.0
    end = record.end_time or until
    overlap = (min(end, until) - max(record.start_time, since)).total_seconds()
    return record.gpus * max(0.0, overlap)


def usage_by_tenant_type(
    records: Iterable[AccountingRecord], since: datetime, until: datetime
) -> dict[str, dict[str, float]]:
    """``{tenant: {gpu_type: GPU-seconds}}`` inside the window."""
    out: dict[str, dict[str, float]] = {}
    for r in records:
        used = gpu_seconds_in_window(r, since, until)
        if used > 0:
            per_type = out.setdefault(r.account, {})
            key = r.gpu_type or UNTYPED
            per_type[key] = per_type.get(key, 0.0) + used
    return out
