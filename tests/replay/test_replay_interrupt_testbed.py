"""SIGTERM to a running ``slurm-fair testbed replay --policy oef`` on the real testbed.

The replay must leave nothing behind: it exits 143 within a minute, no job of its run is left
pending or running, no ``slurm-fair run --loop`` of its run directory survives, and the QOS
limits its controller set are gone. Other sessions may use the shared testbed meanwhile, so
only this run's jobs (their working directory is the run directory) and processes (the run's
controller.toml on their command line) are looked at.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from slurm_fair.testbed import Testbed
from slurm_fair.testbed.replay.submit import ACTIVE_STATES

pytestmark = pytest.mark.slurm

S = 60.0
JOB_TYPE = "ResNet-18 (batch size 32)"


def _trace(path: Path) -> Path:
    """Four 1-GPU jobs of 20-40 real seconds on a V100, arriving within 2 real seconds."""
    from slurm_fair.estimates import gavel as tt

    v100 = tt.load(None).lookup(JOB_TYPE, 1, "v100")
    rows = ["tenant,job_id,job_type,gpus,total_steps,arrival_s"]
    for i, (tenant, real_s, arrival) in enumerate(
        [("physics", 40, 0), ("biology", 30, 0), ("chemistry", 20, 60), ("physics", 30, 120)], 1
    ):
        rows.append(f"{tenant},{i},{JOB_TYPE},1,{int(v100 * real_s * S)},{arrival}")
    path.write_text("\n".join(rows) + "\n")
    return path


def _our_jobs(tb: Testbed, run_dir: Path) -> dict[str, str]:
    """Job id -> state of this run's jobs Slurm still has pending or running."""
    out = tb.run(["squeue", "-h", "-r", "-t", ",".join(ACTIVE_STATES), "-o", "%i|%T|%Z"], timeout=30).stdout
    jobs = {}
    for line in out.splitlines():
        job_id, state, workdir = line.strip().split("|", 2)
        if workdir == str(run_dir):
            jobs[job_id] = state
    return jobs


def _controllers(config: Path) -> list[psutil.Process]:
    """Live ``slurm-fair run --loop`` processes of this run (its controller.toml on the command line)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if str(config) in cmd and "run" in cmd:
            try:
                if p.status() != psutil.STATUS_ZOMBIE:
                    found.append(p)
            except psutil.NoSuchProcess:
                pass
    return found


def _qos_set(run_dir: Path) -> set[str]:
    """The QOS whose limits this run's controller set (its audit log)."""
    path = run_dir / "controller" / "audit.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    entries = [json.loads(line) for line in lines if line.strip()]
    return {e["target"] for e in entries if e.get("kind") == "ensure_qos" and e.get("applied")}


def _gpu_limits(tb: Testbed, names: set[str]) -> dict[str, str]:
    """QOS of ``names`` that still carry a GPU limit -> their GrpTRES."""
    out = tb.run(["sacctmgr", "-n", "-P", "show", "qos", "format=Name,GrpTRES"], timeout=30).stdout
    rows = dict(line.split("|", 1) for line in out.splitlines() if "|" in line)
    return {n: rows[n] for n in names if n in rows and "gres/gpu" in rows[n]}


def test_sigterm_stops_the_controller_cancels_the_jobs_and_reverts(testbed: Testbed, tmp_path: Path) -> None:
    run_dir = (tmp_path / "run").resolve()
    config = run_dir / "controller.toml"
    log_path = tmp_path / "replay.log"
    argv = [sys.executable, "-m", "slurm_fair.cli", "testbed", "replay", "--trace", str(_trace(tmp_path / "t.csv")),
            "--time-scale", str(S), "--policy", "oef", "--run-dir", str(run_dir), "--timeout", "300",
            "--dir", str(testbed.dir)]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=testbed.client_env())
    try:
        # until the controller has set QOS limits and a job of the run runs
        deadline = time.monotonic() + 120
        while not (_qos_set(run_dir) and "RUNNING" in _our_jobs(testbed, run_dir).values()):
            assert proc.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "no QOS limits and running job within 120 s:\n" + log_path.read_text()
            time.sleep(0.5)
        qos = _qos_set(run_dir)
        assert _controllers(config), "the controller runs"
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
        took = time.monotonic() - sent
        output = log_path.read_text()
        assert rc == 143, output
        assert took < 60
        assert _our_jobs(testbed, run_dir) == {}, output
        assert _controllers(config) == [], output
        assert _gpu_limits(testbed, qos) == {}, output
        last = output.strip().splitlines()[-1]
        assert last.startswith("slurm-fair: interrupted by SIGTERM; cancelled "), output
        assert "controller stopped (exit 0)" in last and "revert" in last, output
    finally:
        _leave_nothing(testbed, proc, run_dir, config)


def _leave_nothing(tb: Testbed, proc: subprocess.Popen, run_dir: Path, config: Path) -> None:
    """When the test failed half-way: what the replay should have cleaned up."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)
    for p in _controllers(config):
        p.kill()
    left = sorted(_our_jobs(tb, run_dir))
    if left:
        tb.run(["scancel", *left], timeout=30, check=False)
    if _gpu_limits(tb, _qos_set(run_dir)):
        subprocess.run([sys.executable, "-m", "slurm_fair.cli", "revert", "--config", str(config)],
                       env=tb.client_env(), capture_output=True, timeout=120, check=False)
