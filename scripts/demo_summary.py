"""``make demo``'s "what the controller did" section, in sentences a newcomer can read.

Input: the replay's JSON (``testbed replay --json -o FILE``) and the controller's state store,
read through :class:`~slurm_fair.controller.state.StateStore` opened read-only (never its SQL).
Kept out of the shell script so each line's form is tested (tests/core/test_demo.py).

    python scripts/demo_summary.py REPLAY.json STATE.sqlite
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from slurm_fair.controller.state import StateStore


def requeue_counts(store_path: Path) -> Counter[tuple[str, str, str]]:
    """(reason, from type, to type) -> requeues the controller applied; empty without a store."""
    if not store_path.is_file():
        return Counter()
    try:
        with StateStore.read_only(store_path) as store:
            rows = store.table("requeues")
    except (sqlite3.Error, KeyError):
        return Counter()
    return Counter((r["reason"], r["from_type"] or "?", r["to_type"] or "") for r in rows)


def summary(doc: dict[str, Any], requeues: Counter[tuple[str, str, str]]) -> list[str]:
    """The section's lines: where jobs ran, requeues, the controller's cycles, the outcome."""
    jobs_on: Counter[str] = Counter()
    for j in doc.get("jobs", []):
        runs = j.get("types_run") or ([j["gpu_type"]] if j.get("gpu_type") else [])
        jobs_on.update(set(runs))
    lines = ["jobs that ran on each GPU type: "
             + (", ".join(f"{k} {n}" for k, n in sorted(jobs_on.items())) or "none")]
    for (reason, src, dst), n in sorted(requeues.items()):
        what = f"moved up from {src} to the faster {dst}" if reason == "move-up" else f"requeued on {src} to make room"
        lines.append(f"{n} job(s) {what}")
    if not requeues:
        lines.append("no job was requeued")
    c = doc.get("replay", {}).get("controller") or {}
    if c:
        mean = c.get("cycle_seconds_mean")
        took = f", {mean:.2f} s each on average" if mean is not None else ""
        lines.append(f"{c.get('cycles', 0)} controller cycles ({c.get('cycles_ok', 0)} ok{took}); "
                     f"{c.get('gpu_type_steers', 0)} times a job was sent to a GPU type's partition")
        lines.append(f"slurm-fair revert at the end: {c.get('revert') or 'not run'}")
    else:
        lines.append("no controller ran (policy none)")
    m = doc.get("metrics") or {}
    if m.get("jobs"):
        jct, span = m.get("avg_jct_s"), m.get("makespan_s")
        lines.append(f"{m.get('jobs_completed', 0)} of {m['jobs']} jobs done; average job completion time "
                     f"{jct / 3600:.2f} h, makespan {span / 3600:.2f} h (trace time)"
                     if jct is not None and span is not None else
                     f"{m.get('jobs_completed', 0)} of {m['jobs']} jobs done")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: demo_summary.py REPLAY.json STATE.sqlite", file=sys.stderr)
        return 2
    try:
        doc = json.loads(Path(argv[0]).read_text())
    except (OSError, ValueError) as e:
        print(f"demo: no replay result to summarise ({argv[0]}: {e})", file=sys.stderr)
        return 2
    for line in summary(doc, requeue_counts(Path(argv[1]))):
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
