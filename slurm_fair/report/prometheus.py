"""The report as Prometheus metrics, exposed by ``prometheus_client`` (text format, escaping,
``# HELP``/``# TYPE`` lines are the library's, not ours).

Naming follows Prometheus conventions: the ``slurm_fair_`` prefix, base units in the name
(``_seconds``, ``_ratio``), gauges throughout (every figure is over the report window, not a
monotonic counter). The families are built here as plain :class:`Family` values (testable
without a registry); :class:`FamiliesCollector` hands them to a ``CollectorRegistry``, which
``metrics`` renders with ``generate_latest`` and ``run --metrics-port`` serves over HTTP. The
last cycle's live gauges are :mod:`.live`.
GPU-time is exported in GPU-seconds (``..._gpu_seconds``), the base unit, not GPU-hours.
Figures that could not be computed are absent, and listed by
``slurm_fair_report_not_computed{figure="..."} 1`` so an alert can see why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from .tables import Report


@dataclass
class Family:
    """One metric family: name, help text, and its samples (labels, value)."""

    name: str
    help: str
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)

    def add(self, value: Any, **labels: str) -> None:
        """Add a sample unless the value is missing or not finite (not computed)."""
        try:
            v = float(value)
        except (TypeError, ValueError):
            return
        if math.isfinite(v):
            self.samples.append((labels, v))


class _Families:
    """The families being filled, in the order they are declared (the exposition's order)."""

    PREFIX = "slurm_fair_"

    def __init__(self) -> None:
        self.out: list[Family] = []

    def __call__(self, name: str, help: str) -> Family:
        self.out.append(Family(self.PREFIX + name, help))
        return self.out[-1]


def families(r: Report) -> list[Family]:
    """Every exported family, filled from the report's tables: the window, then per tenant,
    per GPU type and the cluster, then the controller, then what could not be computed."""
    fam = _Families()
    fam("report_window_seconds", "Length of the report window.").add(r.window.seconds)
    fam("report_generated_timestamp_seconds", "When the report was made (Unix time).").add(
        r.generated_at.timestamp())
    _tenant_families(fam, r)
    _cluster_families(fam, r)
    _controller_families(fam, r.controller)
    nc = fam("report_not_computed", "A figure the report could not compute (reason in the label).")
    for n in r.not_computed:
        nc.add(1, figure=n.figure, reason=n.reason)
    return fam.out


def _tenant_families(fam: _Families, r: Report) -> None:
    """Per tenant, per tenant and GPU type, and envy per pair of tenants."""
    entitled = fam("tenant_entitled_share_ratio", "Tenant weight over the sum of weights of tenants active in the window.")
    received = fam("tenant_received_share_ratio", "Tenant GPU-time over all GPU-time used in the window.")
    gpu_s = fam("tenant_gpu_seconds", "GPU-seconds used by the tenant in the window, per GPU type.")
    nt_s = fam("tenant_normalised_throughput_seconds",
               "GPU-seconds weighted by each job's normalised speed on the type (n_jk), per GPU type.")
    t_ent = fam("tenant_type_entitled_gpu_seconds", "Tenant's weighted equal share of the type's capacity over the window.")
    t_rec = fam("tenant_type_received_share_ratio", "Tenant GPU-time on the type over all GPU-time used on the type.")
    si = fam("tenant_sharing_incentive_ratio",
             "Normalised throughput received over the best use of the tenant's weighted equal share (>= 1: SI held).")
    envy = fam("tenant_envy_ratio", "V_u((w_u/w_v) Y_v) / U_u over the window (> 1: tenant envies other).")
    wait = fam("tenant_wait_mean_seconds", "Mean time since first submission not running, of the tenant's jobs that started.")
    jct = fam("tenant_job_completion_mean_seconds", "Mean JCT (end - submit) of the tenant's completed jobs.")
    ftf_mean = fam("tenant_finish_time_fairness_mean_ratio", "Mean rho = JCT / isolated JCT of completed jobs.")
    ftf_max = fam("tenant_finish_time_fairness_max_ratio", "Largest rho = JCT / isolated JCT of completed jobs.")
    lr_mean = fam("tenant_latency_ratio_mean_ratio", "Mean Hops latency ratio wait / age of completed jobs.")
    lr_max = fam("tenant_latency_ratio_max_ratio", "Largest Hops latency ratio wait / age of completed jobs.")
    jobs = fam("tenant_jobs", "GPU jobs of the tenant in the window.")
    for row in r.tenants.to_dict("records"):
        u = row["tenant"]
        entitled.add(row["entitled_share"], tenant=u)
        received.add(row["received_share"], tenant=u)
        si.add(row["si_ratio"], tenant=u)
        wait.add(row["wait_mean_s"], tenant=u)
        jct.add(row["jct_mean_s"], tenant=u)
        ftf_mean.add(row["ftf_rho_mean"], tenant=u)
        ftf_max.add(row["ftf_rho_max"], tenant=u)
        lr_mean.add(row["latency_ratio_mean"], tenant=u)
        lr_max.add(row["latency_ratio_max"], tenant=u)
        jobs.add(row["jobs"], tenant=u)
    for row in r.tenant_type.to_dict("records"):
        labels = {"tenant": row["tenant"], "gpu_type": row["gpu_type"]}
        gpu_s.add(row["gpu_hours"] * 3600.0, **labels)
        nt_s.add(row["nt_hours"] * 3600.0, **labels)
        t_ent.add(row["entitled_gpu_hours"] * 3600.0, **labels)
        t_rec.add(row["received_share"], **labels)
    for u, row in r.envy.iterrows():
        for v, x in row.items():
            if u != v:
                envy.add(x, tenant=str(u), other=str(v))


def _cluster_families(fam: _Families, r: Report) -> None:
    """Per GPU type, and the cluster's efficiency, wait and latency ratios."""
    util = fam("gpu_type_utilisation_ratio", "GPU-time used over capacity x window, per GPU type.")
    cap = fam("gpu_type_capacity_gpus", "GPUs of the type on the cluster's nodes.")
    for c in r.cluster.to_dict("records"):
        util.add(c["utilisation"], gpu_type=c["gpu_type"])
        cap.add(c["gpus"], gpu_type=c["gpu_type"])
    fam("cluster_efficiency_ratio", "E / E*: normalised throughput over the max-throughput bound of the window.").add(
        r.summary.get("efficiency"))
    fam("cluster_normalised_throughput_seconds", "E: normalised-throughput GPU-seconds of all jobs.").add(
        (r.summary.get("nt_hours") or math.nan) * 3600.0)
    fam("cluster_wait_mean_seconds", "Mean time since first submission not running, of all jobs that started.").add(
        r.summary.get("wait_mean_s"))
    fam("cluster_latency_ratio_mean_ratio", "Mean Hops latency ratio wait / age of all completed jobs.").add(
        r.summary.get("latency_ratio_mean"))
    fam("cluster_latency_ratio_max_ratio", "Largest Hops latency ratio wait / age of all completed jobs.").add(
        r.summary.get("latency_ratio_max"))


def _controller_families(fam: _Families, c: Mapping[str, Any]) -> None:
    """The controller's cycles in the window and the phases of its last cycle."""
    fam("controller_cycles", "Controller cycles finished in the window.").add(c.get("cycles"))
    fam("controller_failed_cycles", "Controller cycles in the window that did not end ok.").add(c.get("failed_cycles"))
    fam("controller_cycle_mean_seconds", "Mean wall time of a controller cycle in the window.").add(c.get("cycle_seconds_mean"))
    fam("controller_cycle_max_seconds", "Longest controller cycle in the window.").add(c.get("cycle_seconds_max"))
    fam("controller_last_cycle_seconds", "Wall time of the last controller cycle.").add(c.get("last_cycle_seconds"))
    phases = fam("controller_last_cycle_phase_seconds", "Wall time of each phase of the last controller cycle.")
    for phase, s in (c.get("last_cycle_phases") or {}).items():
        phases.add(s, phase=phase)


def backend_families(info: Mapping[str, str]) -> list[Family]:
    """Which Slurm backend the command that rendered the metrics read through (``[slurm]
    backend``; ``auto`` says what it took): one sample of value 1, the backend in its label."""
    fam = _Families()
    fam("slurm_backend_info", "The backend slurm-fair reads Slurm through (cli or pyslurm), value 1.").add(
        1, backend=info.get("backend", ""))
    return fam.out


class FamiliesCollector(Collector):
    """A registry collector over a function returning families, called at every collection
    (each scrape of ``run --metrics-port`` reads the state store anew). A family without
    samples is left out entirely (a figure not computed is absent, not zero)."""

    def __init__(self, source: Callable[[], Iterable[Family]]):
        self.source = source

    def collect(self) -> Iterator[Metric]:
        for f in self.source():
            if not f.samples:
                continue
            m = Metric(f.name, f.help, "gauge")
            for labels, v in f.samples:
                m.add_sample(f.name, labels, v)
            yield m


def registry(*sources: Callable[[], Iterable[Family]]) -> CollectorRegistry:
    """A registry holding one collector per source of families."""
    reg = CollectorRegistry(auto_describe=False)
    for source in sources:
        reg.register(FamiliesCollector(source))
    return reg


def exposition(fams: Iterable[Family]) -> str:
    """Families as Prometheus text (``generate_latest``)."""
    listed = list(fams)
    return generate_latest(registry(lambda: listed)).decode("utf-8")


def render_metrics(r: Report) -> str:
    return exposition(families(r))
