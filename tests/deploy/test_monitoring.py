"""The Grafana dashboard and Prometheus alert rules of ``render-config``: every metric they use
is exported, the PromQL parses (``promtool``), and the alerts fire exactly where an
independent computation over the same samples says they should."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from slurm_fair.cli import main
from slurm_fair.deploy.monitoring import LIVE_METRICS, expressions

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "slurm_fair"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus)")
METRIC_RE = re.compile(r"\bslurm_fair_[a-z0-9_]+")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("mon")
    cfg = tmp / "c.toml"
    cfg.write_text('[controller]\ninterval_s = 120\n[cluster]\nname = "prod"\n')
    out = tmp / "out"
    assert main(["render-config", "--config", str(cfg), "--inventory", str(REPO / "conf" / "testbed.toml"),
                 "--output-dir", str(out)]) == 0
    return {p.name: p.read_text() for p in out.iterdir()}


def rules(rendered: dict[str, str]) -> dict[str, dict]:
    doc = yaml.safe_load(rendered["slurm-fair-alerts.yml"])
    return {r["alert"]: r for g in doc["groups"] for r in g["rules"]}


def used_metrics(rendered: dict[str, str]) -> set[str]:
    exprs = [r["expr"] for r in rules(rendered).values()]
    exprs += expressions(json.loads(rendered["slurm-fair-dashboard.json"]))
    return {m for e in exprs for m in METRIC_RE.findall(e)}


def exporter_strings() -> set[str]:
    """Every string constant of the package outside ``deploy/`` (f-string pieces included):
    an exporter names a family either in full or as the part after ``slurm_fair_``."""
    out: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if "deploy" in path.relative_to(PACKAGE).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.add(node.value)
    return out


def not_exported(names: set[str], strings: set[str]) -> set[str]:
    """Names neither a known exporter string (full or without the prefix) nor in LIVE_METRICS."""
    return {n for n in names if n not in LIVE_METRICS and n not in strings
            and n.removeprefix("slurm_fair_") not in strings}


def test_every_metric_used_is_exported(rendered):
    used = used_metrics(rendered)
    assert set(LIVE_METRICS) <= used  # each live gauge is shown or alerted on
    assert "slurm_fair_gpu_type_capacity_gpus" in used and len(used) >= 12
    strings = exporter_strings()
    assert not_exported(used, strings) == set()
    # the check can fail: a misspelt family is caught
    assert not_exported(used | {"slurm_fair_tenant_entitled_gpu", "slurm_fair_gpu_type_utilization_ratio"},
                        strings) == {"slurm_fair_tenant_entitled_gpu", "slurm_fair_gpu_type_utilization_ratio"}


def test_every_live_metric_is_exported():
    """LIVE_METRICS is the contract with `slurm-fair metrics`' live gauges (report/live.py):
    every name the dashboard and the rules use is one the exporter writes."""
    strings = exporter_strings()
    missing = {n for n in LIVE_METRICS if n not in strings and n.removeprefix("slurm_fair_") not in strings}
    assert missing == set(), f"LIVE_METRICS names no exporter writes: {sorted(missing)}"


def test_dashboard_model(rendered):
    dash = json.loads(rendered["slurm-fair-dashboard.json"])
    assert dash["uid"] == "slurm-fair-prod" and dash["title"] == "slurm-fair: prod"
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    titles = " | ".join(p["title"] for p in dash["panels"])
    for words in ("allocated, entitled", "Pending GPUs", "Utilisation per GPU type", "last successful cycle",
                  "Cycle duration", "Actions"):
        assert words in titles
    # no two panels overlap on the 24-column grid
    cells: set[tuple[int, int]] = set()
    for p in dash["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, p["title"]
        cells |= mine
    variables = {v["name"] for v in dash["templating"]["list"]}
    used_vars = set(re.findall(r"\$(\w+)", rendered["slurm-fair-dashboard.json"])) - {"__all"}
    assert used_vars <= variables, used_vars - variables
    stale = next(p for p in dash["panels"] if p["title"] == "Since the last successful cycle")
    assert [s["value"] for s in stale["fieldConfig"]["defaults"]["thresholds"]["steps"]] == [None, 240, 360]


def test_alert_rules_shape(rendered):
    r = rules(rendered)
    assert set(r) == {"SlurmFairControllerStale", "SlurmFairControllerMetricsAbsent", "SlurmFairActionsFailing",
                      "SlurmFairCyclesFailing", "SlurmFairTenantBelowEntitlement", "SlurmFairGpusIdleWhileJobsWait"}
    assert r["SlurmFairControllerStale"]["expr"] == (
        "time() - slurm_fair_controller_last_success_timestamp_seconds > 3 * 120")
    assert r["SlurmFairTenantBelowEntitlement"]["for"] == "900s"  # max(5 x 120 s, 15 min)
    assert "{{ $labels.account }}" in r["SlurmFairTenantBelowEntitlement"]["annotations"]["summary"]


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60, cwd=cwd)


@needs_promtool
def test_promtool_checks_rules_and_dashboard_queries(rendered, tmp_path):
    (tmp_path / "alerts.yml").write_text(rendered["slurm-fair-alerts.yml"])
    proc = promtool("check", "rules", "alerts.yml", cwd=tmp_path)
    assert proc.returncode == 0 and "SUCCESS: 6 rules found" in proc.stdout, proc.stdout + proc.stderr
    # the dashboard's queries as recording rules (Grafana variables replaced by what "All" sends)
    exprs = expressions(json.loads(rendered["slurm-fair-dashboard.json"]))
    exprs = [e.replace("$account", ".*").replace("$gpu_type", ".*") for e in exprs if "label_values" not in e]
    doc = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:q{i}", "expr": e}
                                                      for i, e in enumerate(exprs)]}]}
    (tmp_path / "dash.yml").write_text(yaml.safe_dump(doc))
    proc = promtool("check", "rules", "dash.yml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # and promtool is a real check: a broken expression fails
    (tmp_path / "bad.yml").write_text(yaml.safe_dump(
        {"groups": [{"name": "b", "rules": [{"record": "b:q", "expr": "sum by (account (x)"}]}]}))
    assert promtool("check", "rules", "bad.yml", cwd=tmp_path).returncode != 0


# samples of one moment: (account, gpu_type) -> entitled, allocated, pending; capacity per type
ENTITLED = {("a", "v100"): 3, ("a", "k80"): 1, ("b", "v100"): 2.5, ("b", "p100"): 1, ("c", "v100"): 2.5,
            ("c", "p100"): 1}
ALLOCATED = {("a", "v100"): 1, ("b", "v100"): 2, ("b", "p100"): 1, ("c", "v100"): 2, ("c", "p100"): 1}
PENDING = {("a", "v100"): 2, ("a", "k80"): 1, ("b", "v100"): 4, ("c", "p100"): 1}
CAPACITY = {"v100": 8, "p100": 2, "k80": 4}


def expected_below() -> dict[str, float]:
    out = {}
    for u in {a for a, _ in ENTITLED}:
        short = sum(v for (a, _), v in ENTITLED.items() if a == u) - sum(v for (a, _), v in ALLOCATED.items() if a == u)
        if short >= 1 and sum(v for (a, _), v in PENDING.items() if a == u) > 0:
            out[u] = short
    return out


def expected_idle() -> dict[str, float]:
    out = {}
    for k, cap in CAPACITY.items():
        idle = cap - sum(v for (_, t), v in ALLOCATED.items() if t == k)
        if idle >= 1 and sum(v for (_, t), v in PENDING.items() if t == k) > 0:
            out[k] = idle
    return out


@needs_promtool
def test_alerts_fire_where_an_independent_computation_says(rendered, tmp_path):
    r = rules(rendered)
    assert expected_below() == {"a": 3} and expected_idle() == {"v100": 3, "k80": 4}  # the cases covered
    series = []
    for name, data in (("entitled", ENTITLED), ("allocated", ALLOCATED), ("pending", PENDING)):
        series += [{"series": f'slurm_fair_tenant_{name}_gpus{{account="{a}",gpu_type="{t}"}}', "values": f"{v}x10"}
                   for (a, t), v in data.items()]
    series += [{"series": f'slurm_fair_gpu_type_capacity_gpus{{gpu_type="{t}"}}', "values": f"{v}x10"}
               for t, v in CAPACITY.items()]
    series += [{"series": 'slurm_fair_controller_last_success_timestamp_seconds{instance="fresh"}', "values": "0+60x10"},
               {"series": 'slurm_fair_controller_last_success_timestamp_seconds{instance="stuck"}', "values": "0x10"}]

    def case(alert: str, label: str, expected: dict[str, float]) -> dict:
        return {"expr": r[alert]["expr"], "eval_time": "10m",
                "exp_samples": [{"labels": f'{{{label}="{k}"}}', "value": v} for k, v in sorted(expected.items())]}

    tests = {"rule_files": [], "evaluation_interval": "1m", "tests": [{"interval": "1m", "input_series": series,
             "promql_expr_test": [
                 case("SlurmFairTenantBelowEntitlement", "account", expected_below()),
                 case("SlurmFairGpusIdleWhileJobsWait", "gpu_type", expected_idle()),
                 case("SlurmFairControllerStale", "instance", {"stuck": 600}),  # time() - 0 at 10 min
             ]}]}
    (tmp_path / "t.yml").write_text(yaml.safe_dump(tests))
    proc = promtool("test", "rules", "t.yml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
