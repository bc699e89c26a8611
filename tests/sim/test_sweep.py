"""``simulate --array-script``: a sweep as a Slurm job array, and ``simulate-merge`` of its parts.

The tasks are run here as the script runs them (the argv of its ``case`` line for each index),
without Slurm; the real array job is ``tests/slurm/test_sweep_real.py``. The merged report must
be the report of one ``simulate`` with every policy, and a missing or broken part an exit 2
naming the file and the array task to rerun.
"""

from __future__ import annotations

import json
import math
import re
import shlex

import pytest
from click.testing import CliRunner

from slurm_fair.cli import cli, main

from test_accounting import history_text

POLICIES = ["agnostic", "fifo", "oef"]


@pytest.fixture()
def sweep(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "h.txt").write_text(history_text())
    args = ["simulate", "--sacct-file", "h.txt", "--round-s", "600", *sum((["--policy", p] for p in POLICIES), [])]
    res = CliRunner().invoke(cli, [*args, "--array-script", "sweep.sh", "--sbatch-option=-t 10",
                                   "--sbatch-option=--account='it s mine'"])
    assert res.exit_code == 0, res.output
    return tmp_path, args


def task_argv(script: str, index: int) -> list[str]:
    """The argv array task ``index`` runs (its ``case`` line, as bash would split it)."""
    line = next(ln for ln in script.splitlines() if ln.strip().startswith(f"{index}) exec "))
    words = shlex.split(line.strip()[len(f"{index}) exec "):].rsplit(";;", 1)[0])
    return words[words.index("simulate"):]


def run_tasks(root, indices, name="sweep.sh"):
    script = (root / name).read_text()
    for i in indices:
        res = CliRunner().invoke(cli, task_argv(script, i))
        assert res.exit_code == 0, res.output


def test_the_script_has_one_quoted_task_per_policy(sweep):
    root, _ = sweep
    script = (root / "sweep.sh").read_text()
    assert script.startswith("#!/bin/bash\n") and "#SBATCH --array=0-2" in script
    assert "#SBATCH '--account=it s mine'" in script  # quoted
    assert "#SBATCH -t 10" in script
    manifest = json.loads((root / "sweep.sweep" / "sweep.json").read_text())
    assert [t["policy"] for t in manifest["tasks"]] == POLICIES
    for i, p in enumerate(POLICIES):
        argv = task_argv(script, i)
        assert argv[argv.index("--policy") + 1] == p and argv.count("--policy") == 1
        assert argv[argv.index("--sacct-file") + 1] == "h.txt" and "--round-s" in argv
        assert argv[-1].endswith(f"sweep.sweep/parts/{p}.json")


def test_merged_parts_are_the_report_of_one_run(sweep):
    root, args = sweep
    run_tasks(root, range(3))
    merged = CliRunner().invoke(cli, ["simulate-merge", str(root / "sweep.sweep"), "--json", "--output", "m.json",
                                      "--what-if", "w.json"])
    assert merged.exit_code == 0, merged.output
    direct = CliRunner().invoke(cli, [*args, "--json", "--output", "d.json", "--what-if", "dw.json", "--quiet"])
    assert direct.exit_code == 0, direct.output
    m, d = json.loads((root / "m.json").read_text()), json.loads((root / "d.json").read_text())
    assert list(m["policies"]) == POLICIES
    for p in POLICIES:
        for key in ("avg_jct_s", "avg_wait_s", "makespan_s", "jobs_completed", "ftf_rho_mean"):
            a, b = m["policies"][p][key], d["policies"][p][key]
            assert a == b or math.isclose(a, b), (p, key)
    assert m["history"]["avg_jct_s"] == d["history"]["avg_jct_s"]
    wm, wd = json.loads((root / "w.json").read_text()), json.loads((root / "dw.json").read_text())
    assert wm["tenants"] == wd["tenants"] and wm["gains"] == wd["gains"]
    assert any(c["si_ratio"] is not None for t in wm["tenants"].values() for c in t.values())


def test_a_missing_part_names_the_file_and_the_task(sweep, capsys):
    root, _ = sweep
    run_tasks(root, [0, 2])
    assert main(["simulate-merge", str(root / "sweep.sweep")]) == 2
    err = capsys.readouterr().err
    assert "1 of 3 part(s) missing" in err and "parts/fifo.json (array task 1)" in err
    assert re.search(r"sbatch --array=1 \S+sweep\.sh", err)


def test_a_broken_part_or_manifest_is_named(sweep, capsys):
    root, _ = sweep
    run_tasks(root, range(3))
    part = root / "sweep.sweep" / "parts" / "oef.json"
    part.write_text(part.read_text()[:200])  # a task killed while writing would leave no file (atomic); a copy might
    assert main(["simulate-merge", str(root / "sweep.sweep")]) == 2
    assert f"{part}: not a whole sweep part" in capsys.readouterr().err
    part.write_text(json.dumps({"format": "slurm-fair-sweep-part/1", "doc": {"policies": {"fifo": {}}}}))
    assert main(["simulate-merge", str(root / "sweep.sweep")]) == 2
    assert "not the part of array task 2 (oef)" in capsys.readouterr().err
    assert main(["simulate-merge", str(root)]) == 2
    assert "sweep.json: no such sweep manifest" in capsys.readouterr().err


def test_array_options_are_checked(sweep, capsys):
    root, args = sweep
    assert main([*args, "--array-script", "s2.sh", "--json"]) == 2
    assert "--array-script runs nothing" in capsys.readouterr().err
    assert main([*args, "--array-script", "s3.sh", "--sbatch-option", "-J 'x"]) == 2
    assert "--sbatch-option \"-J 'x\": No closing quotation" in capsys.readouterr().err
    assert main([*args, "--array-seed", "3"]) == 2
    assert "go with --array-script" in capsys.readouterr().err
    assert main([*args, "--array-part", "p.json"]) == 2
    assert "exactly one --policy" in capsys.readouterr().err


def test_a_seed_sweep_has_a_task_per_policy_and_seed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["simulate", "--synthetic", "6", "--cluster", "v100=4,k80=4", "--policy", "fifo",
                                   "--policy", "agnostic", "--array-seed", "1", "--array-seed", "2",
                                   "--array-script", "s.sh"])
    assert res.exit_code == 0, res.output
    manifest = json.loads((tmp_path / "s.sweep" / "sweep.json").read_text())
    assert [(t["name"], t["seed"]) for t in manifest["tasks"]] == [
        ("fifo seed 1", 1), ("agnostic seed 1", 1), ("fifo seed 2", 2), ("agnostic seed 2", 2)]
    script = (tmp_path / "s.sh").read_text()
    run_tasks(tmp_path, range(4), "s.sh")
    assert task_argv(script, 3)[task_argv(script, 3).index("--seed") + 1] == "2"
    merged = CliRunner().invoke(cli, ["simulate-merge", str(tmp_path / "s.sweep"), "--json", "--output", "m.json"])
    assert merged.exit_code == 0, merged.output
    assert list(json.loads((tmp_path / "m.json").read_text())["policies"]) == [t["name"] for t in manifest["tasks"]]
