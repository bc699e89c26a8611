"""What a simulation runs on: a workload, a cluster and a throughput table, from the
``simulate`` options (or any caller's), checked against each other.

Kept out of the command so the same assembly serves ``simulate``, benchmarks and tests, and so
traces and ``--synthetic`` go through one selection (window, jobs per tenant, static arrivals,
weights) instead of two.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..estimates import gavel as tt
from ..errors import UserError
from ..inputs import number_problem, parse_number, shown
from ..estimates.gavel import ThroughputTable
from .cluster import ClusterSpec, parse_cluster, with_speeds
from .synthetic import generate, synthetic_tenants
from .workload import Workload, check_weights, load_traces, make_workload, parse_window, select


#: largest node speed factor (``--node-speed``): a node 100 times nominal is a typo
MAX_NODE_SPEED = 100.0


@dataclass(frozen=True)
class WorkloadSource:
    """Where the jobs come from: trace files, or ``synthetic`` jobs of Gavel's mix; then which
    of them are kept (arrival window ``START:END``, at most ``max_jobs`` per tenant, all at time 0
    when ``static``) and the tenant weights that override the traces' weight column."""

    traces: tuple[str, ...] = ()
    synthetic: int | None = None
    tenants: int = 4
    seed: int = 0
    rate_per_hour: float = 20.0
    max_duration_h: float | None = None
    job_mix: str = "philly"
    window: str | None = None
    max_jobs: int | None = None
    static: bool = False
    weights: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterSource:
    """The ``--cluster`` spec (docs/simulator.md), nodes for plain counts, node speed factors."""

    spec: str
    gpus_per_node: int | None = None
    node_speeds: Mapping[str, float] = field(default_factory=dict)
    node_speed_spread: float = 0.0


@dataclass(frozen=True)
class Scenario:
    workload: Workload
    cluster: ClusterSpec
    table: ThroughputTable


def parse_speeds(items: Iterable[str]) -> dict[str, float]:
    """``["v100-1=0.8"]`` -> node speed factors; a UserError naming the bad item."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        speed = parse_number(value) if sep else None
        if speed is None or number_problem(speed, lo=0, lo_open=True, hi=MAX_NODE_SPEED):
            raise UserError(f"--node-speed {item[:80]!r}: expected NODE=FACTOR with 0 < FACTOR <= "
                            f"{MAX_NODE_SPEED:g}, e.g. v100-1=0.8")
        out[name.strip()] = speed
    return out


def build_cluster(source: ClusterSource, table: ThroughputTable, seed: int = 0) -> ClusterSpec:
    """The cluster of ``source``, spread speeds drawn with ``seed``; every GPU type must be in
    ``table``."""
    cluster = parse_cluster(source.spec, source.gpus_per_node)
    if source.node_speeds or source.node_speed_spread:
        cluster = with_speeds(cluster, source.node_speeds, source.node_speed_spread, seed)
    unknown = sorted(set(cluster.capacity) - set(table.gpu_types))
    if unknown:
        raise UserError(f"--cluster: GPU type {unknown[0]!r} is not in the throughput table {table.source} "
                        f"({', '.join(shown(k) for k in table.gpu_types)})")
    return cluster


def build_workload(source: WorkloadSource, table: ThroughputTable) -> Workload:
    """The jobs of ``source``: exactly one of traces or ``synthetic``."""
    if bool(source.traces) == (source.synthetic is not None):
        raise UserError("give either --trace FILE... or --synthetic N")
    window = parse_window(source.window) if source.window is not None else None  # '' is refused
    if source.traces:
        return load_traces(source.traces, table, window, source.max_jobs, source.static, source.weights)
    max_duration_s = source.max_duration_h * 3600 if source.max_duration_h else None
    generated = generate(source.synthetic or 0, source.tenants, source.seed, source.rate_per_hour, table,
                         max_duration_s, source.job_mix)
    check_weights(source.weights, synthetic_tenants(source.tenants), f"--synthetic (--tenants {source.tenants})")
    selected = select(generated.jobs, window, source.max_jobs, source.static)
    if not selected:
        raise UserError(f"--window {source.window}: no synthetic job arrives inside it "
                        f"(arrivals span 0 to {max(j.arrival_s for j in generated.jobs):g} s)")
    return make_workload(selected, source.weights, generated.sources)


def build(workload: WorkloadSource, cluster: ClusterSource, throughputs: str | None = None) -> Scenario:
    """Table first (the cluster's types and the jobs' types are checked against it); one seed,
    the workload's, for everything drawn."""
    table = tt.load(throughputs)
    built_cluster = build_cluster(cluster, table, workload.seed)
    return Scenario(build_workload(workload, table), built_cluster, table)
