"""Phase 1 (lock) and phase 7's state store."""

from __future__ import annotations

import json
import subprocess
import sys

import psutil
import pytest

from slurm_fair.controller.lock import LOCK_NAME, ControllerLock, read_lock
from slurm_fair.controller.state import StateStore
from slurm_fair.controller.state.originals import OriginalRequest
from slurm_fair.estimates.online import OnlineEstimate, fold
from slurm_fair.errors import LockHeld


def test_second_holder_is_refused_and_lock_is_released(tmp_path):
    with ControllerLock(tmp_path):
        with pytest.raises(LockHeld):
            ControllerLock(tmp_path).acquire()
    assert not (tmp_path / LOCK_NAME).exists()
    with ControllerLock(tmp_path):
        pass


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    start = psutil.Process(proc.pid).create_time() if psutil.pid_exists(proc.pid) else 1.0
    proc.wait()
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": proc.pid, "start": start}))
    with ControllerLock(tmp_path) as lock:
        assert read_lock(tmp_path / LOCK_NAME)["pid"] == lock.info["pid"]


def test_recycled_pid_with_another_start_time_is_stale(tmp_path):
    me = psutil.Process()
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": me.pid, "start": me.create_time() - 1000}))
    with ControllerLock(tmp_path):
        held = json.loads((tmp_path / LOCK_NAME).read_text())
        assert held["pid"] == psutil.Process().pid  # taken over, now ours
        assert held["start"] == psutil.Process().create_time()


def test_garbage_lock_file_is_stale(tmp_path):
    (tmp_path / LOCK_NAME).write_text("not json")
    with ControllerLock(tmp_path):
        held = json.loads((tmp_path / LOCK_NAME).read_text())
        assert held["pid"] == psutil.Process().pid  # taken over, now ours
        assert held["start"] == psutil.Process().create_time()


def test_live_lock_of_another_process(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        info = {"pid": proc.pid, "start": psutil.Process(proc.pid).create_time()}
        (tmp_path / LOCK_NAME).write_text(json.dumps(info))
        with pytest.raises(LockHeld, match=str(proc.pid)):
            ControllerLock(tmp_path).acquire()
        assert read_lock(tmp_path / LOCK_NAME) == info  # untouched
    finally:
        proc.kill()
        proc.wait()


def orig(job_id, nice=0):
    return OriginalRequest(job_id, "a", "TresPerNode=gres:gpu:2", None, 2, "node", 100, nice, "gpu", "normal")


def test_first_original_wins(tmp_path):
    with StateStore.in_dir(tmp_path) as s:
        assert s.record_original(orig("1", nice=0), "c1", 1.0)
        assert not s.record_original(orig("1", nice=99), "c2", 2.0)
        assert s.original("1").nice == 0
    with StateStore.in_dir(tmp_path) as s:  # survives a new process
        assert s.originals()["1"].gres_raw == "TresPerNode=gres:gpu:2"


def test_ewma_and_repeated_reports(tmp_path):
    one = fold({}, {}, [("1", "resnet", "v100", 10.0)], 0.5, 1.0)
    with StateStore.in_dir(tmp_path) as s:
        s.save_online(one)
    with StateStore.in_dir(tmp_path) as s:  # read back as the next cycle does
        online, reported = s.online_estimates(), s.reported_tputs()
    assert online == {"resnet": {"v100": OnlineEstimate(10.0, 1, 1.0)}}
    # the same report again is not new; another job's is, folded in order
    two = fold(online, reported, [("1", "resnet", "v100", 10.0), ("2", "resnet", "v100", 20.0),
                                  ("2", "resnet", "v100", 20.0)], 0.5, 3.0)
    assert dict(two.estimates) == {("resnet", "v100"): OnlineEstimate(15.0, 2, 3.0)}
    assert dict(two.reported) == {("2", "v100"): 20.0}
    with StateStore.in_dir(tmp_path) as s:
        s.save_online(two)
        assert s.estimates() == {"resnet": {"v100": 15.0}}


def test_received_accumulates(tmp_path):
    with StateStore.in_dir(tmp_path) as s:
        s.add_received("c1", 1.0, {"a": {"v100": 10.0}})
        s.add_received("c2", 2.0, {"a": {"v100": 5.0, "k80": 1.0}})
        assert s.received() == {"a": {"v100": 15.0, "k80": 1.0}}
        assert len(s.table("received_log")) == 3
