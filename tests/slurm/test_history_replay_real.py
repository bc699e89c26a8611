"""``simulate --from-slurm``'s history read from a real Slurm and replayed (issue 42).

Runs a few short jobs on the testbed (typed and untyped, an array of two tasks, one cancelled
while pending), reads them back through the adapter with the timing columns
(:data:`~slurm_fair.slurm.parse.history.TIMING`) and replays them: every job that ran is a job
of the workload with its submit time, gang and time limit; the cancelled one is counted as never
run; the simulated run of a lone job on the type it ran on takes the time it took.
"""

from __future__ import annotations

import os
import subprocess
import time
from datetime import datetime, timedelta

import pytest

from slurm_fair import policies
from slurm_fair.sim.accounting import build_replay
from slurm_fair.sim.cluster import ClusterSpec
from slurm_fair.sim.engine import SimConfig, simulate
from slurm_fair.sim.workload import make_workload
from slurm_fair.slurm.cli import SlurmCli
from slurm_fair.slurm.parse.history import parse_history

pytestmark = pytest.mark.slurm


def _sbatch(env, *args):
    argv = ["sbatch", "--parsable", "-o", "/dev/null", "-t", "7", *args]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().split(";")[0]


def test_a_real_history_is_replayed_with_its_times_gangs_and_limits(testbed):
    env = {**os.environ, **testbed.env}
    since = datetime.now() - timedelta(seconds=5)
    port = SlurmCli(env=testbed.env, timeout_s=30, retries=2)
    account = sorted(a.name for a in port.accounts() if a.name != "root")[0]
    typed = _sbatch(env, "--wait", "-A", account, "-J", "sf-replay", "--gres=gpu:v100:2", "--wrap", "sleep 3")
    untyped = _sbatch(env, "--wait", "-A", account, "-J", "sf-replay", "--gres=gpu:1", "--wrap", "sleep 2")
    array = _sbatch(env, "--wait", "-A", account, "-J", "sf-array", "--array=0-1", "--gres=gpu:p100:1",
                    "--wrap", "sleep 2")
    cancelled = _sbatch(env, "-A", account, "-J", "sf-replay", "--gres=gpu:1", "--begin=now+3600", "--wrap", "sleep 1")
    subprocess.run(["scancel", cancelled], env=env, capture_output=True, timeout=30)
    wanted = {typed, untyped, f"{array}_0", f"{array}_1"}
    for _ in range(30):  # slurmdbd records a job's end a moment after sbatch --wait returns
        text, fs = port.sacct_history(since)
        history = parse_history(text, "sacct", fs)
        if wanted <= {r.job_id for r in history.rows}:
            break
        time.sleep(1)
    assert history.timed and history.junk == [] and history.ended_junk == []
    node_types = {n.name: next(iter(n.gpus_total)) for n in port.nodes() if n.gpus_total}
    replay = build_replay(history, "sacct", node_types)
    jobs = {j.id.split("/", 1)[1]: j for j in replay.workload.jobs}
    assert wanted <= set(jobs)
    assert cancelled not in jobs and replay.counts["array tasks"] >= 2
    assert jobs[typed].gpus == 2 and jobs[typed].nodes == 1
    assert replay.jobs[f"{account}/{typed}"].time_limit_s == 7 * 60
    rec = {r.job_id.split("/", 1)[1]: r for r in replay.history}
    assert rec[typed].gpu_type == "v100" and rec[typed].start_s >= rec[typed].arrival_s
    assert rec[typed].end_s - rec[typed].start_s == pytest.approx(history_elapsed(history, typed))
    # the typed job alone on the v100 nodes it ran on takes the time it took
    v100 = ClusterSpec({"v100": replay.cluster.capacity["v100"]}, node_gpus={"v100": replay.cluster.node_gpus["v100"]})
    one = make_workload([j for j in replay.workload.jobs if j.id.endswith(f"/{typed}")])
    alone = simulate(one, v100, replay.table, policies.get("fifo"), SimConfig(restart_s=0.0, check_fairness=False))
    assert alone.records[0].jct_s == pytest.approx(history_elapsed(history, typed))


def history_elapsed(history, job_id):
    return next(r.elapsed_s for r in history.rows if r.job_id == job_id)


def test_simulate_from_slurm_replays_the_testbed_history(testbed, tmp_path):
    """The command itself: ``simulate --from-slurm --days 1`` through the adapter."""
    import json

    from slurm_fair.cli import main

    env = {**os.environ, **testbed.env}
    port = SlurmCli(env=testbed.env, timeout_s=30, retries=2)
    account = sorted(a.name for a in port.accounts() if a.name != "root")[0]
    job = _sbatch(env, "--wait", "-A", account, "-J", "sf-cli", "--gres=gpu:k80:1", "--wrap", "sleep 1")
    out = tmp_path / "o.json"
    time.sleep(3)  # slurmdbd records the end a moment after sbatch --wait returns
    assert main(["simulate", "--from-slurm", "--days", "1", "--policy", "fifo", "--json", "-o", str(out),
                 "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert doc["history"]["ended"]["COMPLETED"] >= 1 and doc["history"]["tenants"][account]["jobs"] >= 1
    assert doc["policies"]["fifo"]["jobs_completed"] == doc["history"]["jobs_simulated"]
    assert job  # submitted through the testbed's Slurm, read back through the adapter
