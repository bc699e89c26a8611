"""Results of simulation runs: the JSON document and the comparison table.

JSON shape (the contract of ``slurm-fair simulate --json``)::

    {"policies": {NAME: {metric: value, ..., "tenants": {TENANT: {...}}}},
     "workload": {...}, "cluster": {...}, "config": {...}}
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from rich.console import Group
from rich.table import Table

from .cluster import ClusterSpec
from .engine import SimConfig, SimResult
from .metrics import samples_from_records, summarize
from .workload import Workload

if TYPE_CHECKING:
    from .accounting import Replay

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
        reused_solutions=result.reused_solutions,
        solve_seconds=result.solve_seconds,
        restarts=result.restarts,
        fallback_allocations=result.fallback_allocations,
        throughput_fallbacks=result.throughput_fallbacks,
        unschedulable_jobs=len(result.unschedulable),
    )
    out["tenants"] = tenants
    return out


@dataclass(frozen=True)
class Summary:
    """What the document needs of one run, in plain data: a run made in another process
    (``simulate --jobs N``) sends this back instead of its records."""

    metrics: dict[str, Any]
    unschedulable: list[str]
    throughput_fallbacks: int
    #: each finished job's JCT (for the jobs that would gain most: :mod:`.whatif`)
    jcts: dict[str, float] = dataclasses.field(default_factory=dict)


def summary(result: "SimResult | Summary") -> Summary:
    """A run's :class:`Summary` (computed once: :func:`policy_metrics`)."""
    if isinstance(result, Summary):
        return result
    return Summary(policy_metrics(result), list(result.unschedulable), result.throughput_fallbacks, jcts_of(result))


def jcts_of(result: "SimResult | Summary") -> dict[str, float]:
    """Each finished job's JCT of a run."""
    if isinstance(result, Summary):
        return result.jcts
    return {r.job_id: r.jct_s for r in result.records if r.jct_s is not None}


def history_metrics(replay: "Replay", round_s: float = 360.0) -> dict[str, Any]:
    """The history as it happened, scored by the metrics a run is scored by (:func:`summarize`
    over the accounting's records; rounds sampled from them), with what was replayed and how."""
    records = list(replay.history)
    capacity = dict(replay.cluster.capacity)
    out = summarize(records, samples_from_records(records, capacity, round_s), capacity)
    tenants = out.pop("tenants")
    out.update(replay.describe())
    out["tenants"] = tenants
    return out


def document(results: Mapping[str, "SimResult | Summary"], workload: Workload, cluster: ClusterSpec, config: SimConfig,
             throughputs: str, replay: "Replay | None" = None) -> dict[str, Any]:
    """The ``--json`` document; with a replayed history, ``"history"`` holds its figures as it
    happened (the same metrics, :func:`history_metrics`)."""
    runs = {name: summary(r) for name, r in results.items()}
    first = next(iter(runs.values()), None)
    work = workload.describe()
    work["unschedulable"] = list(first.unschedulable) if first else []
    work["throughputs"] = throughputs
    doc = {
        "policies": {name: r.metrics for name, r in runs.items()},
        "workload": work,
        "cluster": cluster.describe(),
        "config": {**dataclasses.asdict(config), "knowledge": str(config.knowledge)},
    }
    if replay is not None:
        doc["history"] = history_metrics(replay, config.round_s)
    return doc


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
    columns = _columns(doc)
    table = Table(title="simulated policies (times in hours)" + (", beside the history as it ran" if "history" in doc else ""))
    table.add_column("metric", style="bold")
    for name in columns:
        table.add_column(name, justify="right")
    for key, header, fmt in COLUMNS:
        table.add_row(header, *[format_metric(m.get(key), fmt) for m in columns.values()])
    return table


def _columns(doc: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The history (when replayed) first, then every policy."""
    history = {HISTORY: doc["history"]} if "history" in doc else {}
    return {**history, **doc["policies"]}


#: the column of the history as it ran
HISTORY = "history (Slurm)"


def tenant_table(doc: Mapping[str, Any]) -> Table:
    """Per tenant, average JCT and wait: the history beside each policy, and each policy's
    relative error against the history (what an admin checks before trusting a what-if)."""
    columns = _columns(doc)
    table = Table(title="per tenant: average JCT / average wait (hours)")
    table.add_column("tenant", style="bold")
    for name in columns:
        table.add_column(name, justify="right")
    tenants = sorted({t for m in columns.values() for t in m.get("tenants", {})})
    for t in tenants:
        cells = []
        for m in columns.values():
            row = m.get("tenants", {}).get(t, {})
            cells.append(f"{format_metric(row.get('avg_jct_s'), 'h')} / {format_metric(row.get('avg_wait_s'), 'h')}")
        table.add_row(t, *cells)
    return table


def with_tenants(table: Table, doc: Mapping[str, Any]) -> Group:
    """The comparison table, then the per-tenant table."""
    return Group(table, tenant_table(doc))
