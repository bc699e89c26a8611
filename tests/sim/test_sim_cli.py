"""``slurm-fair simulate`` end to end through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from slurm_fair.cli import cli, main

TRACE = """tenant,job_id,job_type,gpus,total_steps,arrival_s
alice,1,ResNet-18 (batch size 32),1,20000,0
alice,2,LM (batch size 20),2,30000,100
bob,1,A3C,1,5000,0
bob,2,Transformer (batch size 64),1,8000,900
"""


def _trace(tmp_path: Path, text: str = TRACE) -> Path:
    path = tmp_path / "t.csv"
    path.write_text(text)
    return path


def test_simulate_writes_json_and_png(tmp_path: Path) -> None:
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    result = CliRunner().invoke(cli, [
        "simulate", "--trace", str(_trace(tmp_path)), "--cluster", "v100=1,p100=1,k80=2",
        "--gpus-per-node", "2", "--policy", "fifo", "--policy", "hadar", "--weight", "bob=2",
        "--json", "-o", str(out), "--plot", str(png), "--quiet", "--solver", "cbc",
    ], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert set(doc["policies"]) == {"fifo", "hadar"}
    for metrics in doc["policies"].values():
        for key in ("avg_jct_s", "p50_jct_s", "p99_jct_s", "makespan_s", "ftf_rho_mean", "ftf_rho_max",
                    "effective_throughput", "utilization", "si_violation_rounds", "ef_violation_rounds",
                    "max_slowdown", "fragmentation", "avg_wait_s",
                    "latency_ratio_mean", "latency_ratio_max", "jobs_completed", "wall_seconds",
                    "throughput_fallbacks"):
            assert key in metrics
        assert metrics["jobs_completed"] == 4
        assert set(metrics["tenants"]) == {"alice", "bob"}
    assert doc["workload"]["tenants"]["bob"]["weight"] == 2
    # LM at 2 GPUs is measured, nothing needed the fallback
    assert doc["policies"]["fifo"]["throughput_fallbacks"] == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "avg JCT h" in result.output


def test_fallback_counted_in_results(tmp_path: Path) -> None:
    trace = _trace(tmp_path, "tenant,job_id,job_type,gpus,total_steps,arrival_s\na,1,A3C,2,100,0\n")
    out = tmp_path / "r.json"
    result = CliRunner().invoke(cli, ["simulate", "--trace", str(trace), "--cluster", "v100=2",
                                      "--policy", "fifo", "--json", "-o", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    # A3C is measured on 1 GPU only: one fallback lookup for the one cluster type
    assert json.loads(out.read_text())["policies"]["fifo"]["throughput_fallbacks"] == 1


def test_bad_trace_exits_2_with_file_line_and_field(tmp_path: Path, capsys) -> None:
    trace = _trace(tmp_path, "tenant,job_id,job_type,gpus,total_steps,arrival_s\na,1,A3C,two,100,0\n")
    code = main(["simulate", "--trace", str(trace), "--cluster", "v100=2", "--policy", "fifo", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert str(trace) in err and "line 2" in err and "gpus" in err
    assert "Traceback" not in err


def test_bad_options_exit_2(tmp_path: Path, capsys) -> None:
    trace = str(_trace(tmp_path))
    assert main(["simulate", "--trace", trace, "--cluster", "h100=2", "--policy", "fifo", "--quiet"]) == 2
    assert "h100" in capsys.readouterr().err
    assert main(["simulate", "--trace", trace, "--cluster", "v100=2", "--policy", "fiffo", "--quiet"]) == 2
    assert "did you mean 'fifo'" in capsys.readouterr().err
    assert main(["simulate", "--cluster", "v100=2", "--policy", "fifo"]) == 2
    assert main(["simulate", "--trace", trace, "--cluster", "v100=2", "--policy", "fifo", "--window", "9:1"]) == 2


def test_synthetic_static_workload(tmp_path: Path) -> None:
    out, saved = tmp_path / "r.json", tmp_path / "w.csv"
    result = CliRunner().invoke(cli, ["simulate", "--synthetic", "12", "--tenants", "3", "--seed", "4",
                                      "--max-duration-h", "2", "--static", "--cluster", "8:8:8",
                                      "--policy", "max-throughput", "--json", "-o", str(out),
                                      "--save-workload", str(saved), "--quiet"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["workload"]["jobs"] == 12 and doc["workload"]["last_arrival_s"] == 0
    assert doc["policies"]["max-throughput"]["jobs_completed"] == 12
    # the saved workload is a valid trace of the same jobs
    again = CliRunner().invoke(cli, ["simulate", "--trace", str(saved), "--cluster", "8:8:8",
                                     "--policy", "max-throughput", "--json", "-o", str(out), "--quiet"])
    assert again.exit_code == 0
    assert json.loads(out.read_text())["workload"]["jobs"] == 12


SHAPED = """tenant,job_id,job_type,gpus,total_steps,arrival_s,nodes
alice,1,ResNet-18 (batch size 32),8,20000,0,1
bob,1,ResNet-18 (batch size 32),8,20000,0,2
dave,1,A3C,1,5000,30,
carol,1,ResNet-18 (batch size 32),16,100,0,1
"""


def test_simulate_mixed_nodes_shapes_hold_and_filling(tmp_path: Path) -> None:
    """The testbed's layout: alice's 8 GPUs on one node run on the K80 node only, bob's 2x4 on
    V100 or P100 only; carol's 16 GPUs on one node fit nowhere. The saved workload keeps the
    nodes column; the JSON names the node layout and the new costs."""
    out, saved = tmp_path / "r.json", tmp_path / "w.csv"
    result = CliRunner().invoke(cli, [
        "simulate", "--trace", str(_trace(tmp_path, SHAPED)), "--cluster", "v100=2x4,p100=2x4,k80=1x8",
        "--policy", "fifo", "--requeue-hold-s", "11", "--fill-between-rounds", "--json", "-o", str(out),
        "--save-workload", str(saved), "--quiet",
    ], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["cluster"]["nodes"] == {"k80": "1x8", "p100": "2x4", "v100": "2x4"}
    assert doc["config"]["requeue_hold_s"] == 11 and doc["config"]["fill_between_rounds"] is True
    assert doc["workload"]["unschedulable"] == ["carol/1"]
    fifo = doc["policies"]["fifo"]
    assert fifo["jobs_completed"] == 3
    assert set(fifo["tenants"]["alice"]["gpu_seconds"]) == {"k80"}
    assert set(fifo["tenants"]["bob"]["gpu_seconds"]) <= {"v100", "p100"}
    lines = saved.read_text().splitlines()
    assert lines[0].endswith(",nodes") and lines[1].endswith(",1") and any(line.endswith(",") for line in lines)


def test_bad_cluster_item_and_hold_exit_2(tmp_path: Path, capsys) -> None:
    trace = str(_trace(tmp_path))
    assert main(["simulate", "--trace", trace, "--cluster", "v100=2x4,k80=8", "--policy", "fifo", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "'k80=8'" in err and "--gpus-per-node" in err and "Traceback" not in err
    assert main(["simulate", "--trace", trace, "--cluster", "v100=2x0", "--policy", "fifo", "--quiet"]) == 2
    assert "'v100=2x0'" in capsys.readouterr().err
    assert main(["simulate", "--trace", trace, "--cluster", "v100=2", "--policy", "fifo", "--requeue-hold-s", "-1",
                 "--quiet"]) == 2
    assert "--requeue-hold-s" in capsys.readouterr().err


def test_json_on_stdout_table_on_stderr_and_output_file(tmp_path: Path) -> None:
    """The output rule (docs/cli.md): --json puts the document alone on stdout and the table on
    stderr; -o FILE without --json writes the table as text to FILE, stdout stays empty."""
    base = ["simulate", "--trace", str(_trace(tmp_path)), "--cluster", "v100=2,k80=2", "--policy", "fifo", "-q"]
    result = CliRunner().invoke(cli, [*base, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["policies"]["fifo"]["jobs_completed"] == 4
    assert "avg JCT h" in result.stderr
    out = tmp_path / "table.txt"
    result = CliRunner().invoke(cli, [*base, "-o", str(out)], catch_exceptions=False)
    assert result.exit_code == 0 and result.stdout == ""
    assert "avg JCT h" in out.read_text() and "\x1b[" not in out.read_text()
    # the design's form, simulate --json FILE, is short for --json -o FILE; the file is given once
    doc = tmp_path / "doc.json"
    result = CliRunner().invoke(cli, [*base, "--json", str(doc)], catch_exceptions=False)
    assert result.exit_code == 0 and result.stdout == "", result.output
    assert json.loads(doc.read_text())["policies"]["fifo"]["jobs_completed"] == 4
    result = CliRunner().invoke(cli, [*base, "--json", str(doc), "-o", str(out)])
    assert result.exit_code == 2 and "give the file once" in result.output


def test_window_and_max_jobs_apply_to_synthetic_jobs(tmp_path: Path) -> None:
    """One selection for traces and --synthetic (it used to ignore --window and --max-jobs)."""
    out = tmp_path / "r.json"
    result = CliRunner().invoke(cli, ["simulate", "--synthetic", "30", "--tenants", "2", "--seed", "3",
                                      "--max-jobs", "4", "--max-duration-h", "1", "--cluster", "8:8:8",
                                      "--policy", "fifo", "--json", "-o", str(out), "-q"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    tenants = json.loads(out.read_text())["workload"]["tenants"]
    assert sorted(t["jobs"] for t in tenants.values()) == [4, 4]
