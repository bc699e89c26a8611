"""``speeds learn``'s history read from a real Slurm: sacct -P -X with its header, through the adapter.

Runs a few short jobs (typed and untyped GPU requests, one cancelled) on the testbed, reads
them back with :meth:`SlurmCli.sacct_history` and checks what the parser makes of them. With
``SLURM_FAIR_RECORD_HISTORY=FILE`` the real text (``|`` delimited) is saved for the fast test
``tests/estimates/test_history_recorded.py``.
"""

from __future__ import annotations

import os
import subprocess
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from slurm_fair.estimates.history import runs_from_history
from slurm_fair.slurm.cli import SlurmCli
from slurm_fair.slurm.parse.history import parse_history

pytestmark = pytest.mark.slurm


def _sbatch(env, *args):
    argv = ["sbatch", "--parsable", "-o", "/dev/null", "-t", "5", *args]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().split(";")[0]


def test_completed_runs_come_back_with_their_type_and_group(testbed):
    env = {**os.environ, **testbed.env}
    since = datetime.now() - timedelta(seconds=5)
    port = SlurmCli(env=testbed.env, timeout_s=30, retries=2)
    account = sorted(a.name for a in port.accounts() if a.name != "root")[0]
    typed = [_sbatch(env, "--wait", "-A", account, "-J", "sf-learn", f"--gres=gpu:{k}:1", "--wrap", "sleep 2")
             for k in ("v100", "k80")]
    untyped = _sbatch(env, "--wait", "-A", account, "-J", "sf-learn", "--gres=gpu:1", "--wrap", "sleep 1")
    cancelled = _sbatch(env, "-A", account, "-J", "sf-learn", "--gres=gpu:1", "--begin=now+3600", "--wrap", "sleep 1")
    subprocess.run(["scancel", cancelled], env=env, capture_output=True, timeout=30)
    for _ in range(30):  # slurmdbd records a job's end a moment after sbatch --wait returns
        text, fs = port.sacct_history(since)
        history = parse_history(text, "sacct", fs)
        rows = {r.job_id: r for r in history.rows}
        if set(typed + [untyped]) <= set(rows):
            break
        time.sleep(1)
    assert set(typed + [untyped]) <= set(rows)
    assert [rows[j].gpu_type for j in typed] == ["v100", "k80"]
    assert rows[untyped].gpus == 1 and rows[untyped].nodes
    assert cancelled not in rows  # never ran: sacct lists it cancelled or not at all
    assert all(rows[j].elapsed_s >= 1 for j in typed) and history.junk == []
    node_types = {n.name: next(iter(n.gpus_total)) for n in port.nodes() if n.gpus_total}
    runs, _ = runs_from_history([rows[j] for j in typed + [untyped]], node_types)
    assert {r.gpu_type for r in runs} >= {"v100", "k80"} and all(r.group[1] == "sf-learn" for r in runs)
    if record := os.environ.get("SLURM_FAIR_RECORD_HISTORY"):
        Path(record).write_text(text.replace(fs, "|"))


def test_a_run_that_fails_on_one_type_marks_that_type_for_its_group(testbed):
    """A group completes on V100 and exits non-zero at once on K80: sacct says FAILED, the
    learner marks K80 for that group (speed 0), not for another group."""
    from slurm_fair.estimates.history import failures_from_history
    from slurm_fair.estimates.learn import learn

    env = {**os.environ, **testbed.env}
    since = datetime.now() - timedelta(seconds=5)
    port = SlurmCli(env=testbed.env, timeout_s=30, retries=2)
    account = sorted(a.name for a in port.accounts() if a.name != "root")[0]
    ok = [_sbatch(env, "--wait", "-A", account, "-J", "sf-fails", "--gres=gpu:v100:1", "--wrap", "sleep 1")
          for _ in range(2)]
    bad = subprocess.run(["sbatch", "--parsable", "-o", "/dev/null", "-t", "5", "--wait", "-A", account,
                          "-J", "sf-fails", "--gres=gpu:k80:1", "--wrap", "exit 3"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0  # sbatch --wait passes the job's exit code on
    bad_id = bad.stdout.strip().split(";")[0]
    for _ in range(30):
        text, fs = port.sacct_history(since)
        history = parse_history(text, "sacct", fs)
        if {r.job_id for r in history.failed} >= {bad_id} and {r.job_id for r in history.rows} >= set(ok):
            break
        time.sleep(1)
    (row,) = [r for r in history.failed if r.job_id == bad_id]
    assert (row.state, row.gpu_type, row.job_name) == ("FAILED", "k80", "sf-fails")
    node_types = {n.name: next(iter(n.gpus_total)) for n in port.nodes() if n.gpus_total}
    runs, _ = runs_from_history([r for r in history.rows if r.job_id in ok], node_types)
    model = learn(runs, ["k80", "p100", "v100"], failures_from_history(history.failed, node_types))
    (group,) = [g for g in model.groups.values() if g.group[1] == "sf-fails"]
    assert group.fails_on == {"k80": 1} and group.speed["k80"] == 0 and group.speed["v100"] == 1.0
