"""``slurm-fair report --shadow``: what Slurm gave each tenant while the controller only watched
(``[controller] mode = "shadow"``), beside what the controller's plan would have given.

Per tenant and GPU type over the window's shadow cycles:

* ``slurm_gpus``: GPUs the tenant's running jobs held on average (the GPU-seconds the cycles
  counted, ``received_log``, over the time the shadow cycles span), ``slurm_gpu_s`` the sum;
* ``plan_gpus``: the tenant's bundle in the plans of those cycles (``sum_j g_j x_jk``), averaged
  over the cycles (a cycle without the tenant counts 0);

and the jobs the plans would have moved (a partition, GPU request or node list the shadow cycle
would have written: the audit log's ``shadow`` entries). An admin watches this for a while
before switching ``mode`` to ``live``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from rich.console import Console
from rich.table import Table

from ..controller.audit import AuditLog
from ..controller.state import StateStore

#: actions that would move a job (the order is not a move)
MOVES = ("set_partition", "set_gpu_type", "set_nodes")


def shadow_report(store: StateStore, audit: AuditLog, since: float, until: float) -> dict[str, Any]:
    """The figures of the module docstring, plain JSON."""
    cycles = [c for c in store.cycles_between(since, until) if c.get("mode") == "shadow" and not c["dry_run"]]
    ids = {c["cycle_id"] for c in cycles}
    span = (max(c["started_at"] for c in cycles) - min(c["started_at"] for c in cycles)) if len(cycles) > 1 else 0.0
    plan: dict[tuple[str, str], float] = defaultdict(float)
    given: dict[tuple[str, str], float] = defaultdict(float)
    for c in cycles:
        for t in store.tenants_of(c["cycle_id"]):
            for k, v in (t.get("bundle") or {}).items():
                plan[(t["tenant"], k)] += float(v) / len(cycles)
    for r in store.received_between(since, until):
        if r["cycle_id"] in ids:
            given[(r["tenant"], r["gpu_type"])] += float(r["gpu_seconds"])
    rows = [{"tenant": t, "gpu_type": k, "plan_gpus": round(plan.get((t, k), 0.0), 4),
             "slurm_gpus": round(given.get((t, k), 0.0) / span, 4) if span > 0 else None,
             "slurm_gpu_s": round(given.get((t, k), 0.0), 3)}
            for t, k in sorted(set(plan) | set(given))]
    moves = sorted({str(e.get("job")) for e in audit.entries()
                    if e.get("shadow") and e.get("cycle") in ids and e.get("kind") in MOVES and e.get("job")},
                   key=lambda j: (len(j), j))
    return {"cycles": len(cycles), "span_s": span, "tenants": rows, "would_move": moves}


def render_text(doc: dict[str, Any]) -> str:
    """The report for people (a rich table, plain text)."""
    console = Console(width=100, record=True, file=open("/dev/null", "w"), color_system=None)  # noqa: SIM115
    if not doc["cycles"]:
        return "no shadow cycle in this window ([controller] mode = \"shadow\" or run --shadow)\n"
    table = Table(title=f"Shadow mode: {doc['cycles']} cycles over {doc['span_s'] / 3600:.1f} h")
    for col in ("tenant", "GPU type", "Slurm gave (GPUs)", "plan (GPUs)", "Slurm GPU-hours"):
        table.add_column(col, justify="left" if col in ("tenant", "GPU type") else "right")
    for r in doc["tenants"]:
        gave = "-" if r["slurm_gpus"] is None else f"{r['slurm_gpus']:.2f}"
        table.add_row(r["tenant"], r["gpu_type"], gave, f"{r['plan_gpus']:.2f}", f"{r['slurm_gpu_s'] / 3600:.2f}")
    console.print(table)
    moved = doc["would_move"]
    console.print(f"{len(moved)} job(s) would have moved: " + (", ".join(moved[:50]) or "none")
                  + (", ..." if len(moved) > 50 else ""))
    return console.export_text()


def render_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1) + "\n"
