"""The output formats: JSON schema, long CSV, rich table, Prometheus text (parsed back)."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from slurm_fair.report import prometheus, render, tables

from . import tiny


@pytest.fixture(scope="module")
def report() -> tables.Report:
    return tables.build(tiny.inputs())


def test_json_schema_is_stable(report):
    doc = json.loads(render.render_json(report))
    assert doc["schema"] == "slurm-fair/report/v2"
    assert set(doc) == {"schema", "generated_at", "window", "tenant_filter", "cluster", "tenants", "jobs",
                        "controller", "type_fit", "not_computed", "notes"}
    bob = next(t for t in doc["tenants"] if t["tenant"] == "bob")
    assert set(render.TENANT_FIELDS) <= set(bob)
    assert bob["si_ratio"] == pytest.approx(12 / 18.5)
    assert bob["envy"] == {"alice": pytest.approx(10 / 12)}
    assert {t["gpu_type"]: t["gpu_hours"] for t in bob["types"]} == {"k80": 20.0, "v100": 2.0}
    assert doc["cluster"]["efficiency"] == pytest.approx(22 / 26.5)
    # b2 waited 04:00-05:00; its work is 2 h on v100 (its fastest), its age (Eq. 9) over 2 v100 +
    # 2 k80 at n = 1 and 0.5: 1/2 * 7200 + 1/2 * 7200 / 0.5 = 10800 s, so LR = 3600 / 10800
    assert bob["latency_ratio_max"] == pytest.approx(1 / 3) and bob["latency_ratio_mean"] == pytest.approx(1 / 6)
    assert doc["cluster"]["wait_mean_s"] == pytest.approx(1200.0)
    assert doc["cluster"]["latency_ratio_mean"] == pytest.approx(1 / 9)
    assert doc["cluster"]["latency_ratio_max"] == pytest.approx(1 / 3)
    b2 = next(j for j in doc["jobs"] if j["job_id"] == "b2")
    assert b2["age_s"] == pytest.approx(10800.0) and b2["wait_s"] == 3600.0
    assert doc["not_computed"][0]["figure"].startswith("controller")
    assert len(doc["jobs"]) == 3 and doc["jobs"][0]["submit"] == "2024-05-01T00:00:00"


def test_json_has_no_nan(report):
    text = render.render_json(tables.build(tiny.inputs(), tenant="alice"))
    assert "NaN" not in text and "Infinity" not in text
    json.loads(text)


def test_csv_is_long_and_complete(report):
    rows = list(csv.DictReader(io.StringIO(render.render_csv(report))))
    assert list(rows[0]) == render.CSV_COLUMNS
    got = {(r["section"], r["tenant"], r["gpu_type"], r["other"], r["metric"]): r["value"] for r in rows}
    assert float(got["tenant_type", "bob", "k80", "", "nt_hours"]) == 10.0
    assert float(got["envy", "alice", "", "bob", "envy_ratio"]) == pytest.approx(0.25)
    assert float(got["cluster", "", "v100", "", "utilisation"]) == pytest.approx(0.6)
    assert float(got["cluster", "", "", "", "latency_ratio_max"]) == pytest.approx(1 / 3)
    assert float(got["tenant", "bob", "", "", "latency_ratio_mean"]) == pytest.approx(1 / 6)
    assert float(got["job", "bob", "v100", "b2", "latency_ratio"]) == pytest.approx(1 / 3)
    assert any(r["section"] == "not_computed" for r in rows)


def test_table_mentions_every_tenant_and_the_missing_figures(report):
    text = render.render_table(report)
    assert "alice" in text and "bob" in text
    assert "0.65" in text  # bob's SI ratio
    assert "0.17/0.33" in text  # bob's latency ratio mean/max
    assert "wait mean 20m00s, latency ratio W/A mean/max 0.11/0.33" in text
    assert "Not computed:" in text and "controller" in text


def test_html_is_self_contained(report):
    html = render.render_html(report)
    assert html.count("data:image/png;base64,") == 2
    assert not re.search(r'src="(?!data:)', html) and "<link" not in html and "<script" not in html


def test_html_escapes_names():
    inputs = tiny.inputs()
    rec = tiny.record("x1", "<b>evil</b>", "v100", 1, 1, 1, 2)
    r = tables.build(type(inputs)(**{**inputs.__dict__, "records": inputs.records + (rec,)}))
    html = render.render_html(r)
    assert "<b>evil</b>" not in html and "&lt;b&gt;evil&lt;/b&gt;" in html


# --- Prometheus text format ------------------------------------------------------------------

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\\\|\\"|\\n)*"'
_SAMPLE = re.compile(rf"^({_NAME})(?:\{{((?:{_LABEL})(?:,{_LABEL})*)?\}})? (\S+)$")


def parse_exposition(text: str) -> dict[str, dict]:
    """A strict little parser of the text format: HELP/TYPE before samples, valid names,
    escaped label values, float values, no duplicate series."""
    families: dict[str, dict] = {}
    seen: set[tuple] = set()
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split(" ", 3)[2]
            assert re.fullmatch(_NAME, name) and name not in families
            families[name] = {"type": None, "samples": []}
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name in families and kind in ("gauge", "counter", "untyped")
            families[name]["type"] = kind
        else:
            m = _SAMPLE.match(line)
            assert m, f"bad sample line {line!r}"
            name, labels, value = m.groups()
            assert name in families and families[name]["type"], f"{name} before its HELP/TYPE"
            lab = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', labels or ""))
            key = (name, tuple(sorted(lab.items())))
            assert key not in seen
            seen.add(key)
            families[name]["samples"].append((lab, float(value)))
    return families


def test_metrics_parse_and_carry_the_figures(report):
    fams = parse_exposition(prometheus.render_metrics(report))
    assert all(n.startswith("slurm_fair_") for n in fams)
    si = {s[0]["tenant"]: s[1] for s in fams["slurm_fair_tenant_sharing_incentive_ratio"]["samples"]}
    assert si == {"alice": pytest.approx(1.6), "bob": pytest.approx(12 / 18.5)}
    gpu = {(s[0]["tenant"], s[0]["gpu_type"]): s[1] for s in fams["slurm_fair_tenant_gpu_seconds"]["samples"]}
    assert gpu[("bob", "k80")] == 20 * 3600
    lr = {s[0]["tenant"]: s[1] for s in fams["slurm_fair_tenant_latency_ratio_max_ratio"]["samples"]}
    assert lr == {"alice": 0.0, "bob": pytest.approx(1 / 3)}
    assert fams["slurm_fair_cluster_wait_mean_seconds"]["samples"][0][1] == pytest.approx(1200.0)
    assert fams["slurm_fair_cluster_latency_ratio_mean_ratio"]["samples"][0][1] == pytest.approx(1 / 9)
    assert "slurm_fair_report_not_computed" in fams
    assert "slurm_fair_controller_cycles" not in fams  # no store: absent, and listed as not computed


def test_metrics_escape_label_values():
    inputs = tiny.inputs()
    rec = tiny.record("q1", 'we"ird\\ten\nant', "v100", 1, 1, 1, 2)
    r = tables.build(type(inputs)(**{**inputs.__dict__, "records": inputs.records + (rec,)}))
    fams = parse_exposition(prometheus.render_metrics(r))
    tenants = {s[0]["tenant"] for s in fams["slurm_fair_tenant_jobs"]["samples"]}
    assert 'we\\"ird\\\\ten\\nant' in tenants


def test_the_controller_line_is_a_sentence_not_a_dict():
    from slurm_fair.report.render import controller_line

    c = {"store": "s.sqlite", "cycles": 12, "failed_cycles": 1, "cycle_seconds_mean": 0.84,
         "cycle_seconds_max": 2.5, "last_cycle_at": "2026-11-23T10:00:00", "last_policy": "oef",
         "last_cycle_status": "ok", "last_cycle_seconds": 0.7,
         "last_cycle_phases": {"snapshot": 0.2, "policy": 0.4, "apply": 0.05, "record": 0.01}}
    line = controller_line(c)
    assert line.startswith("Controller: 12 cycles (1 failed), 0.84 s on average, 2.50 s at most")
    assert "slowest phases: policy 0.4 s, snapshot 0.2 s, apply 0.05 s" in line
    assert "{" not in line and "record" not in line
    assert "no finished cycle" in controller_line({"store": "s.sqlite", "cycles": 0})
