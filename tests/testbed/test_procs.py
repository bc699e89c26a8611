"""Which processes count as ours: a pid file alone is never enough (no Slurm needed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from slurm_fair.testbed.procs import DaemonSpec, owned_process, start, stop, stop_many


@pytest.fixture
def sleeper(tmp_path: Path):
    marker = str(tmp_path / "marker.conf")
    # a stand-in daemon with the marker as an argument (like a daemon's -f <our slurm.conf>)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker])
    yield proc, marker
    proc.kill()
    proc.wait()


def _spec(tmp_path: Path, exe: str, markers: tuple[str, ...], pid: int | None) -> DaemonSpec:
    pid_file = tmp_path / f"{exe}.pid"
    if pid is not None:
        pid_file.write_text(f"{pid}\n")
    return DaemonSpec(exe, exe, (exe,), pid_file, tmp_path / f"{exe}.log", markers=markers)


def _wait_name(pid: int) -> str:
    """The process name once the interpreter has started (right after fork it is still ours)."""
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if len(psutil.Process(pid).cmdline()) >= 3:
            return psutil.Process(pid).name()
        time.sleep(0.02)
    raise AssertionError("child did not start")


def test_pid_file_of_another_program_is_not_ours(tmp_path: Path) -> None:
    assert owned_process(_spec(tmp_path, "slurmctld", ("x",), os.getpid())) is None


def test_right_name_but_other_instance_is_not_ours(tmp_path: Path, sleeper) -> None:
    proc, _ = sleeper
    exe = _wait_name(proc.pid)
    assert owned_process(_spec(tmp_path, exe, ("/other/testbed.conf",), proc.pid)) is None


def test_right_name_and_marker_is_ours(tmp_path: Path, sleeper) -> None:
    proc, marker = sleeper
    found = owned_process(_spec(tmp_path, _wait_name(proc.pid), (marker,), proc.pid))
    assert found is not None and found.pid == proc.pid


def test_missing_or_garbage_pid_file(tmp_path: Path) -> None:
    assert owned_process(_spec(tmp_path, "sleep", ("x",), None)) is None
    spec = _spec(tmp_path, "sleep", ("x",), None)
    spec.pid_file.write_text("not a pid")
    assert owned_process(spec) is None


def test_stop_never_signals_a_process_that_is_not_ours(tmp_path: Path, sleeper) -> None:
    proc, _ = sleeper
    spec = _spec(tmp_path, _wait_name(proc.pid), ("/other/testbed.conf",), proc.pid)
    assert stop(spec, timeout=2) is False
    assert proc.poll() is None  # still alive
    assert not spec.pid_file.exists()  # the stale pid file is gone


def test_stop_many_ends_ours_and_kills_a_stubborn_one(tmp_path: Path) -> None:
    marker = str(tmp_path / "m")
    # a process that ignores SIGTERM: stop must fall back to SIGKILL after the timeout
    code = "import signal, time, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    stubborn = subprocess.Popen([sys.executable, "-c", code, marker], stdout=subprocess.PIPE, text=True)
    assert stubborn.stdout.readline().strip() == "ready"
    polite = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker])
    exe = _wait_name(stubborn.pid)
    s1 = DaemonSpec("stubborn", exe, (exe,), tmp_path / "a.pid", tmp_path / "a.log", markers=(marker,))
    s2 = DaemonSpec("polite", _wait_name(polite.pid), (exe,), tmp_path / "b.pid", tmp_path / "b.log", markers=(marker,))
    s1.pid_file.write_text(str(stubborn.pid))
    s2.pid_file.write_text(str(polite.pid))
    assert sorted(stop_many([s1, s2], timeout=1)) == ["polite", "stubborn"]
    # both are gone long before their 60 s sleep (psutil reaped them, so no exit status here)
    stubborn.wait(timeout=5)
    polite.wait(timeout=5)
    assert not psutil.pid_exists(stubborn.pid) or psutil.Process(stubborn.pid).status() == psutil.STATUS_ZOMBIE


def test_start_of_a_foreground_daemon_reports_an_early_exit(tmp_path: Path) -> None:
    spec = DaemonSpec(
        "false", "false", ("false",), tmp_path / "f.pid", tmp_path / "f.log", forks=False, markers=("x",)
    )
    with pytest.raises(Exception, match="exited at start"):
        start(spec, tmp_path, timeout=5)


def test_up_and_down_of_one_directory_are_serialised(tmp_path: Path) -> None:
    from slurm_fair.errors import TestbedError
    from slurm_fair.testbed import Testbed, validate

    cfg = validate({"timeouts": {"start_s": 0.5}}, "t")
    first, second = Testbed(dir=tmp_path, config=cfg), Testbed(dir=tmp_path, config=cfg)
    with first._locked():
        with pytest.raises(TestbedError, match="another process holds"):
            with second._locked():
                pass
    with second._locked():  # released: free again
        pass
