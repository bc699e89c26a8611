"""The Grafana dashboard ``render-config`` writes, and the metric names it and the alert rules use.

The dashboard is built here as a Python structure and dumped with :func:`json.dumps` rather
than templated: PromQL and Grafana's ``{{account}}`` legends are full of quotes, braces and
``$``, which a Jinja template would have to escape by hand. The alert rules stay a template
(``templates/deploy/slurm-fair-alerts.yml.j2``: YAML an admin reads and edits).

Both may only use metrics some exporter writes: :data:`LIVE_METRICS` (the controller's last
cycle, exported by ``slurm-fair metrics``) plus the report-window families of
:mod:`slurm_fair.report.prometheus`; ``tests/deploy/test_monitoring.py`` checks every name
they use against those, and the expressions with ``promtool``.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

#: live gauges from the controller's last cycle (labels ``account``, ``gpu_type`` on the tenant ones)
LIVE_METRICS: tuple[str, ...] = (
    "slurm_fair_tenant_entitled_gpus",
    "slurm_fair_tenant_allocated_gpus",
    "slurm_fair_tenant_planned_gpus",
    "slurm_fair_tenant_pending_gpus",
    "slurm_fair_controller_last_success_timestamp_seconds",
    "slurm_fair_controller_cycle_duration_seconds",
    "slurm_fair_controller_actions_applied",
    "slurm_fair_controller_actions_failed",
    "slurm_fair_build_info",
)

#: the Prometheus datasource is a dashboard variable, so the JSON imports on any Grafana
DS = {"type": "prometheus", "uid": "${datasource}"}
ACC = 'account=~"$account"'
TYP = 'gpu_type=~"$gpu_type"'
#: GPUs in use per type now; a type without any allocated sample counts as 0, not as absent
ALLOCATED_BY_TYPE = (f"(sum by (gpu_type) (slurm_fair_tenant_allocated_gpus{{{TYP}}})"
                     f" or 0 * max by (gpu_type) (slurm_fair_gpu_type_capacity_gpus{{{TYP}}}))")
CAPACITY_BY_TYPE = f"max by (gpu_type) (slurm_fair_gpu_type_capacity_gpus{{{TYP}}})"


def _targets(exprs: list[tuple[str, str]], instant: bool = False) -> list[dict[str, Any]]:
    return [{"refId": chr(ord("A") + i), "datasource": DS, "expr": e, "legendFormat": legend,
             **({"instant": True, "format": "table"} if instant else {"range": True})}
            for i, (e, legend) in enumerate(exprs)]


def _panel(kind: str, title: str, grid: tuple[int, int, int, int], exprs: list[tuple[str, str]],
           unit: str = "none", description: str = "", **extra: Any) -> dict[str, Any]:
    x, y, w, h = grid
    defaults: dict[str, Any] = {"unit": unit}
    if "thresholds" in extra:
        defaults["thresholds"] = extra.pop("thresholds")
    return {"type": kind, "title": title, "description": description, "datasource": DS,
            "gridPos": {"x": x, "y": y, "w": w, "h": h},
            "fieldConfig": {"defaults": defaults, "overrides": []},
            "targets": _targets(exprs, instant=kind in ("stat", "table")), **extra}


def _row(title: str, y: int) -> dict[str, Any]:
    return {"type": "row", "title": title, "collapsed": False, "gridPos": {"x": 0, "y": y, "w": 24, "h": 1},
            "panels": []}


def _steps(*pairs: tuple[float | None, str]) -> dict[str, Any]:
    return {"mode": "absolute", "steps": [{"value": v, "color": c} for v, c in pairs]}


def panels(interval_s: int) -> list[dict[str, Any]]:
    """The dashboard's rows and panels, top to bottom (ids are numbered by :func:`dashboard`)."""
    ts = "timeseries"
    return [
        _row("Shares now (the controller's last cycle)", 0),
        _panel(ts, "GPUs of $account: allocated, entitled, planned", (0, 1, 12, 8), [
            (f"sum by (gpu_type) (slurm_fair_tenant_allocated_gpus{{{ACC},{TYP}}})", "allocated {{gpu_type}}"),
            (f"sum by (gpu_type) (slurm_fair_tenant_entitled_gpus{{{ACC},{TYP}}})", "entitled {{gpu_type}}"),
            (f"sum by (gpu_type) (slurm_fair_tenant_planned_gpus{{{ACC},{TYP}}})", "planned {{gpu_type}}"),
        ], description="Running GPUs against the tenant's entitlement and the bundle the controller's "
                        "plan gives it, per GPU type.", repeat="account", repeatDirection="h", maxPerRow=2),
        _panel(ts, "Pending GPUs per tenant and type", (0, 9, 12, 8), [
            (f"sum by (account, gpu_type) (slurm_fair_tenant_pending_gpus{{{ACC},{TYP}}})",
             "{{account}} {{gpu_type}}")], description="GPUs requested by the tenant's pending jobs."),
        _panel(ts, "GPUs short of entitlement (tenants with pending jobs)", (12, 9, 12, 8), [
            (f"(sum by (account) (slurm_fair_tenant_entitled_gpus{{{ACC}}})"
             f" - sum by (account) (slurm_fair_tenant_allocated_gpus{{{ACC}}}))"
             f" and on (account) (sum by (account) (slurm_fair_tenant_pending_gpus{{{ACC}}}) > 0)",
             "{{account}}")], description="Entitled minus allocated GPUs, shown while the tenant waits: "
                                          "what the alert SlurmFairTenantBelowEntitlement watches."),
        _row("GPU types", 17),
        _panel(ts, "Utilisation per GPU type (now)", (0, 18, 8, 8), [
            (f"{ALLOCATED_BY_TYPE} / {CAPACITY_BY_TYPE}", "{{gpu_type}}")], unit="percentunit"),
        _panel(ts, "Utilisation per GPU type (report window)", (8, 18, 8, 8), [
            (f"slurm_fair_gpu_type_utilisation_ratio{{{TYP}}}", "{{gpu_type}}")], unit="percentunit",
            description="GPU-time used over capacity x the report window ([report].window_days)."),
        _panel(ts, "Idle GPUs and pending GPUs per type", (16, 18, 8, 8), [
            (f"{CAPACITY_BY_TYPE} - {ALLOCATED_BY_TYPE}", "idle {{gpu_type}}"),
            (f"sum by (gpu_type) (slurm_fair_tenant_pending_gpus{{{TYP}}})", "pending {{gpu_type}}")],
            description="Both above zero for long: GPUs idle while jobs wait (alert SlurmFairGpusIdleWhileJobsWait)."),
        _row("Controller health", 26),
        _panel("stat", "Since the last successful cycle", (0, 27, 6, 6), [
            ("time() - max(slurm_fair_controller_last_success_timestamp_seconds)", "")], unit="s",
            thresholds=_steps((None, "green"), (2 * interval_s, "orange"), (3 * interval_s, "red")),
            description=f"Red above 3 x interval_s ({3 * interval_s} s): alert SlurmFairControllerStale."),
        _panel(ts, "Cycle duration", (6, 27, 9, 6), [
            ("max(slurm_fair_controller_cycle_duration_seconds)", "last cycle")], unit="s"),
        _panel(ts, "Actions of the last cycle", (15, 27, 9, 6), [
            ("sum(slurm_fair_controller_actions_applied)", "applied"),
            ("sum(slurm_fair_controller_actions_failed)", "failed")]),
        _panel("stat", "Failed cycles (report window)", (0, 33, 6, 5), [
            ("max(slurm_fair_controller_failed_cycles)", "")],
            thresholds=_steps((None, "green"), (1, "orange"))),
        _panel("table", "Build", (6, 33, 18, 5), [("slurm_fair_build_info", "")]),
        _row("Fairness over the report window", 38),
        _panel(ts, "Received vs entitled share", (0, 39, 12, 8), [
            ('slurm_fair_tenant_received_share_ratio{tenant=~"$account"}', "received {{tenant}}"),
            ('slurm_fair_tenant_entitled_share_ratio{tenant=~"$account"}', "entitled {{tenant}}")],
            unit="percentunit"),
        _panel(ts, "Sharing incentive (>= 1: held)", (12, 39, 12, 8), [
            ('slurm_fair_tenant_sharing_incentive_ratio{tenant=~"$account"}', "{{tenant}}")]),
    ]


def _variable(name: str, label: str) -> dict[str, Any]:
    q = f"label_values(slurm_fair_tenant_entitled_gpus, {name})"
    return {"type": "query", "name": name, "label": label, "datasource": DS, "query": {"query": q, "refId": name},
            "definition": q, "refresh": 2, "multi": True, "includeAll": True, "allValue": ".*",
            "current": {"text": "All", "value": "$__all"}, "sort": 1}


def dashboard(ctx: Mapping[str, Any]) -> dict[str, Any]:
    """The Grafana dashboard model (import it, or drop it in a provisioning directory)."""
    out = panels(int(ctx["interval_s"]))
    for i, p in enumerate(out, start=1):
        p["id"] = i
    return {
        "uid": f"slurm-fair-{ctx['cluster_name']}"[:40],
        "title": f"slurm-fair: {ctx['cluster_name']}",
        "description": "Per-tenant GPU shares, pending demand, utilisation and controller health "
                       "(rendered by slurm-fair render-config).",
        "tags": ["slurm", "slurm-fair", "gpu"],
        "editable": True,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "1m",
        "time": {"from": "now-24h", "to": "now"},
        "timezone": "",
        "templating": {"list": [
            {"type": "datasource", "name": "datasource", "label": "Prometheus", "query": "prometheus",
             "current": {}, "hide": 0},
            _variable("account", "Tenant"),
            _variable("gpu_type", "GPU type"),
        ]},
        "annotations": {"list": []},
        "panels": out,
    }


def dashboard_json(ctx: Mapping[str, Any]) -> str:
    return json.dumps(dashboard(ctx), indent=2, allow_nan=False) + "\n"


def expressions(dash: Mapping[str, Any]) -> list[str]:
    """Every PromQL expression of a dashboard (its panels' targets and its variables' queries)."""
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    return exprs + [v["definition"] for v in dash["templating"]["list"] if "definition" in v]
