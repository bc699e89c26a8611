"""A ``simulate`` sweep run as a real Slurm job array on the testbed (issue 42).

``simulate --array-script`` writes the script; ``sbatch`` runs it on the testbed (its slurmd
start the tasks on this host, each running this checkout's ``slurm-fair``); ``simulate-merge``
builds one report from the parts, which must be the report of one ``simulate`` over the same
policies.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time

import pytest
from click.testing import CliRunner

from slurm_fair.cli import cli
from slurm_fair.slurm.cli import SlurmCli
from slurm_fair.testbed import rootfs

pytestmark = pytest.mark.slurm

HISTORY = """JobID|User|Account|JobName|Partition|AllocTRES|NodeList|NNodes|Submit|Start|End|Elapsed|Timelimit|State
1|ann|physics|train|gpu|billing=1,gres/gpu=2,gres/gpu:v100=2,node=1|v100-1|1|2026-01-05T00:00:00|2026-01-05T00:00:00|2026-01-05T02:00:00|02:00:00|04:00:00|COMPLETED
2|ann|physics|train|gpu|billing=1,gres/gpu=2,gres/gpu:k80=2,node=1|k80-1|1|2026-01-05T00:10:00|2026-01-05T00:10:00|2026-01-05T06:10:00|06:00:00|08:00:00|COMPLETED
3|bob|biology|fold|gpu|billing=1,gres/gpu=4,gres/gpu:v100=4,node=1|v100-1|1|2026-01-05T00:20:00|2026-01-05T02:00:00|2026-01-05T03:00:00|01:00:00|02:00:00|COMPLETED
4|bob|biology|fold|gpu|billing=1,gres/gpu=4,gres/gpu:k80=4,node=1|k80-1|1|2026-01-05T00:30:00|2026-01-05T00:30:00|2026-01-05T03:30:00|03:00:00|04:00:00|COMPLETED
5|cat|chemistry|md|gpu|billing=1,gres/gpu=1,gres/gpu:v100=1,node=1|v100-1|1|2026-01-05T01:00:00|2026-01-05T03:00:00|2026-01-05T03:30:00|00:30:00|01:00:00|COMPLETED
"""


def test_a_sweep_runs_as_a_job_array_and_merges(testbed, slurm_version, tmp_path, monkeypatch):
    if not rootfs.version(slurm_version).host:
        # the array's tasks run where that version's slurmd runs, in its root filesystem, whose
        # libraries this checkout's virtualenv (built on the host) cannot load: a site runs the
        # sweep with a slurm-fair installed on its own nodes
        pytest.skip(f"Slurm {slurm_version}'s jobs run in its root filesystem, without this virtualenv")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "h.txt").write_text(HISTORY)
    port = SlurmCli(env=testbed.env, timeout_s=30, retries=2)
    account = sorted(a.name for a in port.accounts() if a.name != "root")[0]
    args = ["simulate", "--sacct-file", "h.txt", "--policy", "agnostic", "--policy", "fifo", "--policy", "oef"]
    res = CliRunner().invoke(cli, [*args, "--array-script", "sweep.sh", f"--sbatch-option=--account={account}",
                                   "--sbatch-option=--time=5"])
    assert res.exit_code == 0, res.output
    env = {**os.environ, **testbed.env}
    out = subprocess.run(["sbatch", "--parsable", "--wait", "sweep.sh"], env=env, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr + "".join(p.read_text() for p in (tmp_path / "sweep.sweep" / "logs").iterdir())
    array = out.stdout.strip().split(";")[0]
    for _ in range(30):  # slurmdbd records the tasks a moment after sbatch --wait returns
        q = subprocess.run(["sacct", "-n", "-X", "-P", "-j", array, "-o", "JobID,State"], env=env, capture_output=True,
                           text=True, timeout=30)
        states = dict(line.split("|") for line in q.stdout.split())
        if len(states) == 3 and set(states.values()) == {"COMPLETED"}:
            break
        time.sleep(1)
    assert states == {f"{array}_{i}": "COMPLETED" for i in range(3)}
    merged = CliRunner().invoke(cli, ["simulate-merge", "sweep.sweep", "--json", "--output", "m.json"])
    assert merged.exit_code == 0, merged.output
    direct = CliRunner().invoke(cli, [*args, "--json", "--output", "d.json", "--quiet"])
    assert direct.exit_code == 0, direct.output
    m, d = json.loads((tmp_path / "m.json").read_text()), json.loads((tmp_path / "d.json").read_text())
    assert list(m["policies"]) == ["agnostic", "fifo", "oef"]
    for p, figures in d["policies"].items():
        assert math.isclose(m["policies"][p]["avg_jct_s"], figures["avg_jct_s"])
        assert m["policies"][p]["jobs_completed"] == figures["jobs_completed"] == 5
