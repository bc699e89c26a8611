"""SIGTERM to a running ``slurm-fair testbed replay --policy oef`` on the real testbed.

The replay must leave nothing behind: it exits 143 within a minute, no job of its run is left
pending or running, no ``slurm-fair run --loop`` of its run directory survives, and its
controller's revert ran (nothing of the controller's is left on any job). Other sessions may use the shared testbed meanwhile, so
only this run's jobs (their working directory is the run directory) and processes (the run's
controller.toml on their command line) are looked at.
"""

from __future__ import annotations

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


def _cycled(run_dir: Path) -> bool:
    """Whether this run's controller has completed a cycle (its state store says so)."""
    from slurm_fair.controller.state import StateStore

    path = run_dir / "controller" / "state.sqlite"
    if not path.exists():
        return False
    try:
        with StateStore.read_only(path) as store:
            return store.last_completed_at() is not None
    except Exception:  # noqa: BLE001 - being created right now: not yet
        return False


def _held_fields(run_dir: Path) -> list[tuple[str, str]]:
    """(job, field) the controller's store still holds as its own, not released."""
    from slurm_fair.controller.state import StateStore

    path = run_dir / "controller" / "state.sqlite"
    if not path.exists():
        return []
    with StateStore.read_only(path) as store:
        return sorted(k for k, r in store.owned().items() if not r.released)


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
        # until the controller has completed a cycle and a job of the run runs
        deadline = time.monotonic() + 120
        while not (_cycled(run_dir) and "RUNNING" in _our_jobs(testbed, run_dir).values()):
            assert proc.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "no controller cycle and running job within 120 s:\n" + log_path.read_text()
            time.sleep(0.5)
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
        assert not [k for k in _held_fields(run_dir) if k[0] in _our_jobs(testbed, run_dir)], output
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
    if _held_fields(run_dir):
        subprocess.run([sys.executable, "-m", "slurm_fair.cli", "revert", "--config", str(config)],
                       env=tb.client_env(), capture_output=True, timeout=120, check=False)
