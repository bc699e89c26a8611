"""On the real testbed: the report's GPU-hours equal what sacct itself says, job for job.

A known set of short typed GPU jobs runs as three tenants on three GPU types. The expectation is
summed here straight from ``sacct -P -X`` (AllocTRES x ElapsedRaw, parsed by this test, not by
slurm-fair), and compared with the report over the same job ids: other tests may run jobs on the
shared testbed at the same time, so whole-window totals are not compared.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections import defaultdict
from datetime import datetime, timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from slurm_fair.cli import main

pytestmark = pytest.mark.slurm

#: (tenant, GPU type, GPUs, seconds of sleep)
JOBS = [
    ("biology", "p100", 2, 3),
    ("biology", "k80", 1, 4),
    ("physics", "v100", 1, 3),
    ("physics", "k80", 3, 2),
    ("chemistry", "v100", 2, 5),
]
DONE = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


def sh(argv: list[str], env: dict[str, str]) -> str:
    return subprocess.run(argv, env=env, check=True, capture_output=True, text=True, timeout=60).stdout


def sacct_rows(ids: list[str], env: dict[str, str]) -> list[dict[str, str]]:
    fields = ["JobID", "Account", "State", "AllocTRES", "ElapsedRaw", "Start", "End"]
    out = sh(["sacct", "-P", "-X", "-n", "-j", ",".join(ids), f"--format={','.join(fields)}"], env)
    return [dict(zip(fields, line.split("|"))) for line in out.splitlines() if line.strip()]


def typed_gpus(alloc_tres: str) -> tuple[str, int]:
    """``...,gres/gpu:p100=2,gres/gpu=2`` -> ("p100", 2), parsed independently of slurm_fair."""
    m = re.search(r"gres/gpu:([A-Za-z0-9_]+)=(\d+)", alloc_tres)
    assert m, f"no typed GPU in AllocTRES {alloc_tres!r}"
    return m.group(1), int(m.group(2))


@pytest.fixture(scope="module")
def finished_jobs(testbed):
    env = {**os.environ, **testbed.env}
    ids = []
    for tenant, gpu_type, gpus, secs in JOBS:
        out = sh(["sbatch", "--parsable", "-A", tenant, f"--gres=gpu:{gpu_type}:{gpus}", "-J", "sf-report-test",
                  "-o", "/dev/null", "--wrap", f"sleep {secs}"], env)
        ids.append(out.strip().split(";")[0])
    deadline = time.monotonic() + 240
    while True:
        rows = sacct_rows(ids, env)
        if len(rows) == len(ids) and all(r["State"].split()[0] in DONE and r["End"] not in ("", "Unknown") for r in rows):
            break
        assert time.monotonic() < deadline, f"jobs did not finish in time: {rows}"
        time.sleep(2)
    return ids, rows, env


def test_report_gpu_hours_equal_sacct(finished_jobs, tmp_path, monkeypatch, capsys):
    ids, rows, env = finished_jobs
    assert all(r["State"] == "COMPLETED" for r in rows), rows
    expected: dict[tuple[str, str], float] = defaultdict(float)
    for r in rows:
        gpu_type, n = typed_gpus(r["AllocTRES"])
        expected[r["Account"], gpu_type] += n * int(r["ElapsedRaw"]) / 3600.0
    # the jobs ran where they were asked to
    assert set(expected) == {(t, k) for t, k, _, _ in JOBS}

    starts = [datetime.fromisoformat(r["Start"]) for r in rows]
    since = (min(starts) - timedelta(minutes=2)).isoformat(timespec="seconds")
    until = (datetime.now() + timedelta(seconds=5)).isoformat(timespec="seconds")
    cfg = tmp_path / "slurm-fair.toml"
    cfg.write_text(f'[controller]\nstate_dir = "{tmp_path / "no-controller"}"\n')
    monkeypatch.setenv("SLURM_CONF", env["SLURM_CONF"])
    out = tmp_path / "report.json"
    code = main(["report", "--config", str(cfg), "--since", since, "--until", until, "--format", "json",
                 "--output", str(out)])
    assert code == 0, capsys.readouterr().err
    doc = json.loads(out.read_text())
    got: dict[tuple[str, str], float] = defaultdict(float)
    for j in doc["jobs"]:
        if j["job_id"] in ids:
            got[j["tenant"], j["gpu_type"]] += j["gpu_hours"]
    assert sorted(j["job_id"] for j in doc["jobs"] if j["job_id"] in ids) == sorted(ids)
    assert set(got) == set(expected)
    for key, hours in expected.items():
        assert got[key] == pytest.approx(hours, rel=1e-12, abs=1e-12), key
    # without a controller the report says so, and still computes the fairness figures
    assert any("controller" in n["figure"] for n in doc["not_computed"])
    tenants = {t["tenant"] for t in doc["tenants"]}
    assert {"biology", "physics", "chemistry"} <= tenants
    caps = {c["gpu_type"]: c["gpus"] for c in doc["cluster"]["types"]}
    assert caps["v100"] > 0 and caps["k80"] > 0 and caps["p100"] > 0


def test_report_tenant_and_formats_on_testbed(finished_jobs, tmp_path, monkeypatch, capsys):
    ids, rows, env = finished_jobs
    cfg = tmp_path / "slurm-fair.toml"
    cfg.write_text(f'[controller]\nstate_dir = "{tmp_path / "no-controller"}"\n')
    monkeypatch.setenv("SLURM_CONF", env["SLURM_CONF"])
    code = main(["report", "--config", str(cfg), "--since", "1h", "--tenant", "biology"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "biology" in out and "Not computed" in out
    code = main(["report", "--config", str(cfg), "--since", "1h", "--tenant", "no-such-tenant"])
    assert code == 2
    assert "unknown tenant" in capsys.readouterr().err
    prom = tmp_path / "m.prom"
    assert main(["metrics", "--config", str(cfg), "--since", "1h", "--output", str(prom)]) == 0
    gpu_s = {(x.labels["tenant"], x.labels["gpu_type"]) for f in text_string_to_metric_families(prom.read_text())
             if f.name == "slurm_fair_tenant_gpu_seconds" for x in f.samples}
    assert ("biology", "p100") in gpu_s
