"""The controller's cycles in the report's window, from its state store: counts, failures and
timings (none, with a reason, where the controller has not run).
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

import numpy as np

from .data import ReportInputs
from .missing import NotComputed
from ..statuses import OK_CYCLES


#: cycle statuses of the controller that are not failures (docs/controller.md)
OK_CYCLE_STATUSES = OK_CYCLES


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
