"""Phase 1 (lock) and phase 7's state store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from slurm_fair.controller.lock import LOCK_NAME, ControllerLock, read_lock
from slurm_fair.controller.state import StateStore
from slurm_fair.estimates.online import OnlineEstimate, fold
from slurm_fair.errors import LockHeld


def test_second_holder_is_refused_and_lock_is_released(tmp_path):
    with ControllerLock(tmp_path) as first:
        assert read_lock(tmp_path / LOCK_NAME)["pid"] == os.getpid() == first.info["pid"]
        with pytest.raises(LockHeld, match=f"pid {os.getpid()}"):
            ControllerLock(tmp_path).acquire()
    assert not first.held
    with ControllerLock(tmp_path):  # released: free again
        pass


def _hold_in_child(tmp_path, then: str) -> subprocess.Popen:
    """A child process that takes the lock, says so on stdout, then runs ``then``."""
    code = ("import sys, time; from slurm_fair.controller.lock import ControllerLock; "
            f"lock = ControllerLock({str(tmp_path)!r}); lock.acquire(); print('held', flush=True); {then}")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_live_lock_of_another_process_refuses_and_names_it(tmp_path):
    proc = _hold_in_child(tmp_path, "time.sleep(30)")
    try:
        before = (tmp_path / LOCK_NAME).read_text()
        with pytest.raises(LockHeld, match=f"pid {proc.pid}\\b"):
            ControllerLock(tmp_path).acquire()
        assert (tmp_path / LOCK_NAME).read_text() == before  # the holder's name untouched
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_lock_of_a_dead_process_is_free(tmp_path, how):
    """The kernel releases an flock with its process, however it ends (even SIGKILL, no cleanup)."""
    proc = _hold_in_child(tmp_path, "sys.exit(0)" if how == "exit" else "time.sleep(30)")
    if how == "kill":
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert read_lock(tmp_path / LOCK_NAME)["pid"] == proc.pid  # the file still names it...
    with ControllerLock(tmp_path) as lock:  # ...but the lock is free
        assert read_lock(tmp_path / LOCK_NAME)["pid"] == lock.info["pid"] == os.getpid()


def test_garbage_lock_file_is_free_and_rewritten(tmp_path):
    (tmp_path / LOCK_NAME).write_text("not json, and longer than what the holder writes" * 10)
    with ControllerLock(tmp_path):
        held = json.loads((tmp_path / LOCK_NAME).read_text())
        assert held["pid"] == os.getpid()


def test_job_fields_keep_the_first_original_and_settle_intents(tmp_path):
    with StateStore.in_dir(tmp_path) as s:
        s.record_intents([("1", "partition", "a", "gpu", "v100"), ("2", "partition", "a", "gpu", "k80")], "c1", 1.0)
        s.confirm([("1", "partition")], 2.0)
        s.drop_intents([("2", "partition")])  # never written: the row goes
        s.record_intents([("1", "partition", "a", "v100", "p100")], "c2", 3.0)
    with StateStore.in_dir(tmp_path) as s:  # survives a new process
        rows = s.owned()
    assert set(rows) == {("1", "partition")}
    r = rows[("1", "partition")]
    assert (r.original, r.written, r.intent, r.released) == ("gpu", "v100", "p100", False)


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
