"""What the three ``reproduce_*.py`` scripts share: run policies on a scenario, read metrics
whether or not a key exists yet, print a markdown table beside a paper's numbers, plot a sweep.

The runs go through the same assembly as ``slurm-fair simulate`` (``sim.scenario.build``) and
the same metrics (``sim.results.policy_metrics``, the ``--json`` document's per-policy dict), so
a figure here is the figure ``simulate --json`` prints for the same options. Metric keys are
looked up by name and shown as ``-`` when absent, so the scripts run before and after the
metrics of issue 15 (``latency_ratio_max``, ``avg_wait_s``, ``fragmentation``) land.
"""

from __future__ import annotations

import platform
import shlex
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from slurm_fair import policies
from slurm_fair.sim.engine import SimConfig, simulate
from slurm_fair.sim.results import format_metric as fmt, policy_metrics
from slurm_fair.sim.scenario import ClusterSource, Scenario, WorkloadSource, build
from slurm_fair.solver import fastest_available

Metrics = dict[str, Any]


@dataclass(frozen=True)
class Column:
    """One table column: header, the metric keys tried in order, and the format
    (``h``: seconds shown as hours)."""

    header: str
    keys: tuple[str, ...]
    fmt: str = ".2f"

    def value(self, metrics: Mapping[str, Any]) -> Any:
        return next((metrics[k] for k in self.keys if metrics.get(k) is not None), None)

    def show(self, metrics: Mapping[str, Any]) -> str:
        return fmt(self.value(metrics), self.fmt)


#: the paper's five metrics (Hops Tables 3-4) plus what our simulator adds; Avg.frag is the
#: issue-15 ``fragmentation``; our old JCT-over-time-alone figure is a slowdown, not an LR
PAPER_COLUMNS = (
    Column("makespan h", ("makespan_s",), "h"),
    Column("avg JCT h", ("avg_jct_s",), "h"),
    Column("avg wait h", ("avg_wait_s",), "h"),
    Column("max LR", ("latency_ratio_max",), ".2f"),
    Column("mean LR", ("latency_ratio_mean",), ".2f"),
    Column("Avg.frag", ("fragmentation",), ".2f"),
    Column("max slowdown", ("max_slowdown",), ".1f"),
    Column("util", ("utilization",), ".2f"),
    Column("done", ("jobs_completed",), "d"),
    Column("wall s", ("wall_seconds",), ".0f"),
)


def machine() -> str:
    """One line naming what the figures were measured on (runtime depends on it)."""
    import os

    return (f"{platform.machine()}, {os.cpu_count()} cores (shared), Python {platform.python_version()}, "
            f"solver {fastest_available()}")


def command_line() -> str:
    """The command that produced the output, for the doc."""
    return "PYTHONPATH=. python " + " ".join(shlex.quote(a) for a in sys.argv)


def scenario(workload: WorkloadSource, cluster: ClusterSource) -> Scenario:
    """Workload, cluster and the embedded Gavel table, checked against each other."""
    return build(workload, cluster)


def available(names: Iterable[str]) -> list[str]:
    """The registered policies among ``names`` (a policy renamed or dropped is skipped, not fatal)."""
    known = set(policies.names())
    return [n for n in names if n in known]


def run(scn: Scenario, names: Sequence[str], config: SimConfig,
        log: Callable[[str], None] | None = None) -> dict[str, Metrics]:
    """Each policy of ``names`` over ``scn``: its metrics dict, as ``simulate --json`` has it."""
    out: dict[str, Metrics] = {}
    for name in available(names):
        started = time.perf_counter()
        result = simulate(scn.workload, scn.cluster, scn.table, policies.get(name), config)
        out[name] = policy_metrics(result)
        if log:
            log(f"  {name}: {time.perf_counter() - started:.0f} s")
    return out


def markdown(rows: Sequence[tuple[str, Mapping[str, Any]]], columns: Sequence[Column],
             first: str = "policy") -> str:
    """A markdown table, one row per (label, metrics)."""
    lines = ["| " + " | ".join([first] + [c.header for c in columns]) + " |",
             "|" + "---|" * (len(columns) + 1)]
    for label, metrics in rows:
        lines.append("| " + " | ".join([label] + [c.show(metrics) for c in columns]) + " |")
    return "\n".join(lines)


def paper_rows(paper: Mapping[str, Mapping[str, float]]) -> list[tuple[str, Metrics]]:
    """The paper's numbers (hours and ratios as printed) as metrics dicts, labelled ``paper: X``."""
    return [(f"paper: {name}", dict(values)) for name, values in paper.items()]


def ratio(a: Any, b: Any) -> str:
    """``a / b`` as ``1.23x``, or ``-`` when either is missing or ``b`` is 0."""
    if a is None or b is None or not b:
        return "-"
    return f"{a / b:.2f}x"


def plot_sweep(path: str, loads: Sequence[float], series: Mapping[str, Mapping[str, Sequence[float | None]]],
               xlabel: str, title: str) -> None:
    """One panel per metric (``series[metric][policy]`` = values over ``loads``; None = missing),
    one line per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [m for m, by_policy in series.items() if any(v is not None for vs in by_policy.values() for v in vs)]
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(5.5 * max(1, len(panels)), 4), squeeze=False)
    for ax, metric in zip(axes[0], panels):
        for name, values in series[metric].items():
            pts = [(x, v) for x, v in zip(loads, values) if v is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=name)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(metric)
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def mean(values: Iterable[Any]) -> float | None:
    """Mean of the present values (None when none is)."""
    xs = [v for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None


def engine(round_s: float = 360.0, checks: bool = False, horizon_h: float | None = None) -> SimConfig:
    """The engine settings of the reproductions: Gavel's 6-minute rounds, 30 s restart, no
    per-round SI/EF checks (the papers report none, and they cost time at 512 GPUs)."""
    return SimConfig(round_s=round_s, check_fairness=checks, solver=fastest_available(),
                     horizon_s=horizon_h * 3600 if horizon_h else None)
