"""Loading through the port (+ the controller's store) and the two commands end to end."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from slurm_fair.cli import main
from slurm_fair.commands import report as report_cmd
from slurm_fair.config import validate
from slurm_fair.controller.state import StateStore
from slurm_fair.estimates.classes import load_class_table
from slurm_fair.report import data, tables

from . import tiny
from .test_outputs import parse_exposition


def make_config(tmp_path: Path, **extra):
    doc = {"controller": {"state_dir": str(tmp_path / "state")}, **extra}
    return validate(doc, str(tmp_path / "slurm-fair.toml"))


def test_without_a_store_speeds_come_from_the_class_table(tmp_path):
    table = load_class_table(None)
    klass = next(iter(table.rows))
    row = table.rows[klass]
    recs = [tiny.record("t1", "alice", "v100", 1, 0, 0, 1, comment=f"fair:class={klass}"),
            tiny.record("t2", "bob", "k80", 1, 0, 0, 1)]
    port = tiny.FakePort(recs, nodes=[tiny.Node("n", "idle", {"v100": 1, "k80": 1})])
    inputs = data.load(port, make_config(tmp_path), tiny.WINDOW, now=tiny.h(12))
    assert inputs.store is None
    best = max(row["v100"], row["k80"])
    assert inputs.speeds["t1"].source == "class-table"
    assert inputs.speeds["t1"].n["k80"] == pytest.approx(row["k80"] / best)
    assert inputs.speeds["t2"].source == "prior"
    assert inputs.speeds["t2"].n["v100"] == 1.0 > inputs.speeds["t2"].n["k80"]
    r = tables.build(inputs)
    assert any("no throughput estimate" in n for n in r.notes)
    assert any("controller" in n.figure for n in r.not_computed)


def test_store_estimates_and_cycles_are_used_read_only(tmp_path):
    config = make_config(tmp_path)
    state = tmp_path / "state"
    with StateStore.in_dir(state) as st:
        started = tiny.h(1).timestamp()
        st.start_cycle("c1", started, "oef", False)
        st.record_jobs("c1", [{
            "job_id": "b1", "tenant": "bob", "state": "RUNNING", "gpus": 2, "class": "x",
            "estimate": {"throughput": {"v100": 8.0, "k80": 2.0}}, "sources": {}, "allocation": {},
        }])
        st.finish_cycle("c1", started + 1.5, "ok", {"actions": 1}, {"snapshot": 0.5, "policy": 1.0})
    before = (state / "state.sqlite").stat().st_mtime_ns
    inputs = data.load(tiny.FakePort(), config, tiny.WINDOW, now=tiny.h(12))
    assert inputs.speeds["b1"].source == "controller"
    assert inputs.speeds["b1"].n["k80"] == pytest.approx(0.25)
    assert (state / "state.sqlite").stat().st_mtime_ns == before
    r = tables.build(inputs)
    assert r.controller["cycles"] == 1
    assert r.controller["cycle_seconds_mean"] == pytest.approx(1.5)
    assert r.controller["last_cycle_phases"] == {"snapshot": 0.5, "policy": 1.0}


def test_weights_config_beats_slurm_shares(tmp_path):
    config = make_config(tmp_path, tenants={"alice": {"weight": 3}})
    port = tiny.FakePort(accounts=[tiny.Account("alice", 5.0), tiny.Account("bob", 2.0)])
    inputs = data.load(port, config, tiny.WINDOW, now=tiny.h(12))
    assert dict(inputs.weights) == {"alice": 3.0, "bob": 2.0}


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    """The commands against the tiny case's fake port, with a private configuration."""
    cfg = tmp_path / "slurm-fair.toml"
    cfg.write_text(f'[controller]\nstate_dir = "{tmp_path / "state"}"\n[report]\nwindow_days = 1\n')
    monkeypatch.setattr(report_cmd, "make_port", lambda config: tiny.FakePort())
    return cfg


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_report_json_to_file(cli_env, tmp_path, capsys):
    out = tmp_path / "r.json"
    code, _, err = run(capsys, "report", "--config", str(cli_env), "--since", "2024-05-01",
                       "--until", "2024-05-01T10:00:00", "--format", "json", "--output", str(out))
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert {t["tenant"]: t["gpu_hours"] for t in doc["tenants"]} == {"alice": 10.0, "bob": 22.0}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".r.json")]


def test_report_table_for_one_tenant(cli_env, capsys):
    code, out, err = run(capsys, "report", "--config", str(cli_env), "--since", "2024-05-01",
                         "--until", "2024-05-01T10:00:00", "--tenant", "bob")
    assert code == 0, err
    assert "bob" in out and "alice │" not in out.split("Envy")[0].split("Tenants")[1]


@pytest.mark.parametrize("argv, needle", [
    (["--since", "last tuesday"], "--since"),
    (["--tenant", "alcie"], "did you mean 'alice'"),
    (["--format", "pdf"], "pdf"),
    (["--since", "2024-05-02", "--until", "2024-05-01"], "empty window"),
])
def test_report_user_errors_exit_2(cli_env, capsys, argv, needle):
    code, out, err = run(capsys, "report", "--config", str(cli_env), *argv)
    assert code == 2
    assert needle in err + out and "Traceback" not in err


def test_metrics_written_atomically(cli_env, tmp_path, capsys):
    out = tmp_path / "slurm_fair.prom"
    out.write_text("old")
    code, _, err = run(capsys, "metrics", "--config", str(cli_env), "--since", "2024-05-01", "--output", str(out))
    assert code == 0, err
    fams = parse_exposition(out.read_text())
    assert "slurm_fair_tenant_entitled_share_ratio" in fams
    assert oct(os.stat(out).st_mode & 0o777) == "0o644"
