"""The controller's run-time history from a real Slurm's accounting (issue 39, "only what a site
knows"): the learned table's refresh reads each finished run's elapsed time and time limit
(``sacct`` Timelimit) through the adapter, and a job of the group is then predicted from them."""

from __future__ import annotations

import os
import subprocess
import time
from datetime import datetime, timedelta

import pytest

from slurm_fair.controller import learned
from slurm_fair.estimates import runtime
from slurm_fair.slurm.cli import SlurmCli

pytestmark = pytest.mark.slurm


def test_a_groups_finished_runs_give_its_use_ratios_from_real_accounting(testbed):
    env = {**os.environ, **testbed.env}
    port = SlurmCli(env=testbed.env, timeout_s=30, retries=2)
    account = sorted(a.name for a in port.accounts() if a.name != "root")[0]
    name = f"sf-ratio-{os.getpid()}"
    ids = []
    for _ in range(3):
        out = subprocess.run(["sbatch", "--parsable", "--wait", "-o", "/dev/null", "-t", "10", "-A", account,
                              "-J", name, "--gres=gpu:1", "--wrap", "sleep 3"],
                             env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        ids.append(out.stdout.strip().split(";")[0])
    types = sorted({k for n in port.nodes() for k in n.gpus_total})
    for _ in range(30):  # slurmdbd records a job's end a moment after sbatch --wait returns
        table = learned.build(port, types, 1.0, time.time())
        mine = [(g, rs) for g, rs in table.ratios.items() if g[1] == name and g[0] != "*"]
        if mine and len(mine[0][1]) >= 3:
            break
        time.sleep(1)
    (group, ratios), = mine
    assert group[2] == 1 and len(ratios) == 3
    # 3 s (and a little) of a 10-minute limit each
    assert all(0 < r < 30 / 600 for r in ratios), ratios
    got = runtime.expected_run_s(600.0, 0.0, runtime.sample(table.ratios, group, 600.0))
    assert 2.0 <= got <= 30.0
    since = datetime.now() - timedelta(days=1)
    assert {r.job_id for r in port.accounting_history(since).rows} >= set(ids)
