"""``make demo`` without a testbed: every slurm-fair command of scripts/demo.sh parses with the
options it is given, the script reads no SQL itself, and its "what the controller did" section
(scripts/demo_summary.py) says each thing in a sentence, from a real state store."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

import click

from slurm_fair import cli
from slurm_fair.controller.state import StateStore

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "demo.sh"


def load_summary():
    spec = importlib.util.spec_from_file_location("demo_summary", ROOT / "scripts" / "demo_summary.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def sf_lines(text: str) -> list[str]:
    """The script's ``$SF ...`` commands (also inside ``$(...)``), continuation lines joined."""
    text = text.replace("\\\n", " ")
    inner = ["$SF " + m for m in re.findall(r"\$\(\$SF ([^)]*)\)", text)]
    return inner + [line.strip() for line in text.splitlines() if line.strip().startswith("$SF ")]


def test_every_slurm_fair_command_of_the_demo_parses(tmp_path):
    (tmp_path / "controller.toml").write_text("")
    trace = ROOT / "benchmarks" / "traces" / "demo_testbed_24.csv"
    values = {"$TRACE": str(trace), "$SCALE": "30", "$POLICY": "oef", "$RUN_DIR": str(tmp_path),
              "$SINCE": "2026-01-01T00:00:00", "$UNTIL": "2026-01-01T01:00:00"}
    lines = sf_lines(SCRIPT.read_text())
    seen = set()
    for line in lines:
        line = re.sub(r"\$\(\(.*?\)\)", "600", line.split("||")[0])
        for k, v in values.items():
            line = line.replace(k, v)
        args = shlex.split(line)[1:]
        cmd: click.Command = cli.cli
        path = []
        while isinstance(cmd, click.Group):
            path.append(args.pop(0))
            cmd = cmd.get_command(click.Context(cmd), path[-1])
            assert cmd is not None, line
        cmd.make_context(" ".join(path), args)  # raises on an unknown option or a bad value
        seen.add(" ".join(path))
    assert {"testbed up", "testbed env", "snapshot", "testbed replay", "report"} <= seen
    assert any("--format html -o" in line for line in lines)


def test_the_demo_reads_no_sql_and_prints_the_html_path():
    text = SCRIPT.read_text()
    assert "sqlite" not in text.replace("state.sqlite", "") and "<<" not in text and "sshare" not in text
    assert 'echo "The report as a web page: $RUN_DIR/report.html"' in text
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_demo_summary_from_a_state_store(tmp_path):
    m = load_summary()
    path = tmp_path / "state.sqlite"
    with StateStore(path) as store:
        store.record_requeue("1", "c1", 1.0, "k80", ["5"])
        store.record_requeue("2", "c1", 1.0, "k80", ["6"])
        store.record_requeue("3", "c2", 2.0, "k80", reason="move-up", to_type="v100")
    counts = m.requeue_counts(path)
    assert counts == Counter({("make-room", "k80", ""): 2, ("move-up", "k80", "v100"): 1})
    doc = {"jobs": [{"types_run": ["k80", "v100"], "gpu_type": "v100"}, {"types_run": [], "gpu_type": "p100"},
                    {"types_run": [], "gpu_type": None}],
           "replay": {"controller": {"cycles": 12, "cycles_ok": 11, "cycle_seconds_mean": 0.4321,
                                     "gpu_type_steers": 7, "revert": "ok"}},
           "metrics": {"jobs": 3, "jobs_completed": 2, "avg_jct_s": 5400.0, "makespan_s": 7200.0}}
    lines = m.summary(doc, counts)
    assert lines == [
        "jobs that ran on each GPU type: k80 1, p100 1, v100 1",
        "2 job(s) requeued on k80 to make room",
        "1 job(s) moved up from k80 to the faster v100",
        "12 controller cycles (11 ok, 0.43 s each on average); 7 times a job was sent to a GPU type's partition",
        "slurm-fair revert at the end: ok",
        "2 of 3 jobs done; average job completion time 1.50 h, makespan 2.00 h (trace time)",
    ]
    assert not any("{" in line for line in lines)  # no raw dicts


def test_demo_summary_without_controller_store_or_result(tmp_path, capsys):
    m = load_summary()
    assert m.requeue_counts(tmp_path / "missing.sqlite") == Counter()
    assert not (tmp_path / "missing.sqlite").exists()
    lines = m.summary({"jobs": [], "replay": {"controller": None}, "metrics": {"jobs": 0}}, Counter())
    assert lines == ["jobs that ran on each GPU type: none", "no job was requeued", "no controller ran (policy none)"]
    assert m.main([str(tmp_path / "none.json"), str(tmp_path / "s.sqlite")]) == 2
    assert "no replay result" in capsys.readouterr().err
    doc = tmp_path / "r.json"
    doc.write_text(json.dumps({"jobs": [], "replay": {}, "metrics": {}}))
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo_summary.py"), str(doc), "x.sqlite"],
                         capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)})
    assert out.returncode == 0 and out.stdout.startswith("  jobs that ran on each GPU type: none")
