"""Results of simulation runs: the JSON document and the comparison table.

JSON shape (the contract of ``slurm-fair simulate --json``)::

    {"policies": {NAME: {metric: value, ..., "tenants": {TENANT: {...}}}},
     "workload": {...}, "cluster": {...}, "config": {...}}
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from rich.table import Table

from .cluster import ClusterSpec
from .engine import SimConfig, SimResult
from .metrics import summarize
from .workload import Workload

#: metrics shown in the table, with their headers and formats
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("avg_jct_s", "avg JCT h", "h"),
    ("p50_jct_s", "p50 h", "h"),
    ("p99_jct_s", "p99 h", "h"),
    ("makespan_s", "makespan h", "h"),
    ("ftf_rho_mean", "rho mean", ".2f"),
    ("ftf_rho_max", "rho max", ".2f"),
    ("effective_throughput", "eff. thr.", ".2f"),
    ("utilization", "util", ".0%"),
    ("si_violation_rounds", "SI viol.", "d"),
    ("ef_violation_rounds", "EF viol.", "d"),
    ("avg_wait_s", "avg wait h", "h"),
    ("latency_ratio_mean", "LR mean", ".2f"),
    ("latency_ratio_max", "LR max", ".2f"),
    ("latency_ratio_max_1round", "LR max (>= 1 round)", ".2f"),
    ("max_slowdown", "max slowdown", ".1f"),
    ("fragmentation", "avg frag GPUs", ".2f"),
    ("jobs_completed", "done", "d"),
    ("wall_seconds", "wall s", ".1f"),
)


def policy_metrics(result: SimResult) -> dict[str, Any]:
    """Every metric of one run (docs/fairness.md names) plus the run's own figures."""
    out = summarize(result.records, result.samples, result.capacity)
    tenants = out.pop("tenants")
    out.update(
        wall_seconds=result.wall_seconds,
        solves=result.solves,
        solve_seconds=result.solve_seconds,
        restarts=result.restarts,
        fallback_allocations=result.fallback_allocations,
        throughput_fallbacks=result.throughput_fallbacks,
        unschedulable_jobs=len(result.unschedulable),
    )
    out["tenants"] = tenants
    return out


def document(results: Mapping[str, SimResult], workload: Workload, cluster: ClusterSpec, config: SimConfig,
             throughputs: str) -> dict[str, Any]:
    """The ``--json`` document."""
    first = next(iter(results.values()), None)
    work = workload.describe()
    work["unschedulable"] = list(first.unschedulable) if first else []
    work["throughputs"] = throughputs
    return {
        "policies": {name: policy_metrics(r) for name, r in results.items()},
        "workload": work,
        "cluster": cluster.describe(),
        "config": {**dataclasses.asdict(config), "knowledge": str(config.knowledge)},
    }


def format_metric(value: Any, fmt: str) -> str:
    """A metric as the comparison tables show it (``h``: seconds as hours, ``d``: integer)."""
    if value is None:
        return "-"
    if fmt == "h":
        return f"{value / 3600:.2f}"
    if fmt == "d":
        return f"{int(value)}"
    return format(value, fmt)


def comparison_table(doc: Mapping[str, Any]) -> Table:
    """A rich table: one row per metric of :data:`COLUMNS`, one column per policy (stays
    readable in a narrow terminal for the usual handful of policies)."""
    table = Table(title="simulated policies (times in hours)")
    table.add_column("metric", style="bold")
    for name in doc["policies"]:
        table.add_column(name, justify="right")
    for key, header, fmt in COLUMNS:
        table.add_row(header, *[format_metric(m.get(key), fmt) for m in doc["policies"].values()])
    return table
