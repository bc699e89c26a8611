"""The emulator's arithmetic and checkpoint logic, with a fake clock (no Slurm, no sleeping)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from slurm_fair.testbed import emulator as em


class FakeClock:
    """time() and sleep() of a clock that only moves when slept on (plus an optional lag)."""

    def __init__(self, start: float = 1000.0, lag: float = 0.0) -> None:
        self.now, self.lag, self.slept = start, lag, []

    def time(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s + self.lag


def test_real_seconds_follow_the_time_scale() -> None:
    # 600 steps at 2 steps per trace second = 300 trace seconds = 5 real seconds at S=60
    assert em.real_seconds_left(600, 2.0, 60.0) == pytest.approx(5.0)
    assert em.real_seconds_left(-1, 2.0, 60.0) == 0.0
    with pytest.raises(ValueError):
        em.real_seconds_left(10, 0.0, 60.0)


def test_a_job_runs_total_steps_over_throughput_divided_by_scale(tmp_path: Path) -> None:
    clock = FakeClock()
    ck = em.run(tmp_path / "c.json", 600, 2.0, "v100", 60.0, tick_s=0.25, clock=clock.time, sleep=clock.sleep)
    assert ck.finished and ck.steps_done == 600
    assert clock.now - 1000.0 == pytest.approx(5.0)
    assert len(ck.segments) == 1 and ck.segments[0].gpu_type == "v100"
    assert ck.segments[0].ended - ck.segments[0].started == pytest.approx(5.0)


def test_late_wakeups_do_not_change_the_run_time_by_more_than_one_lag(tmp_path: Path) -> None:
    clock = FakeClock(lag=0.05)  # every sleep overshoots by 50 ms
    em.run(tmp_path / "c.json", 600, 2.0, "v100", 60.0, tick_s=0.25, clock=clock.time, sleep=clock.sleep)
    assert 5.0 <= clock.now - 1000.0 <= 5.0 + 0.05 + 1e-9


def test_resume_after_a_stop_continues_from_the_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    clock = FakeClock()
    ticks = iter(range(100))
    # first run on a k80 (0.5 steps/trace s), stopped after 4 ticks of 0.25 s = 1 real s = 30 steps
    ck = em.run(path, 600, 0.5, "k80", 60.0, tick_s=0.25, clock=clock.time, sleep=clock.sleep,
                stop=lambda: next(ticks) >= 4)
    assert not ck.finished and ck.steps_done == pytest.approx(30.0)
    stored = em.Checkpoint.from_json(path.read_text())
    assert stored.steps_done == pytest.approx(30.0) and stored.runs == 1
    # requeued onto a v100 (2 steps/trace s): the remaining 570 steps take 570/120 real s
    t1 = clock.now
    ck = em.run(path, 600, 2.0, "v100", 60.0, tick_s=0.25, clock=clock.time, sleep=clock.sleep)
    assert ck.finished and ck.runs == 2
    assert clock.now - t1 == pytest.approx(570 / 120)
    assert [s.gpu_type for s in ck.segments] == ["k80", "v100"]
    assert [round(s.steps) for s in ck.segments] == [30, 570]
    assert ck.seconds_by_type() == pytest.approx({"k80": 1.0, "v100": 570 / 120})


def test_a_finished_checkpoint_is_not_run_again(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    clock = FakeClock()
    em.run(path, 60, 1.0, "p100", 60.0, clock=clock.time, sleep=clock.sleep)
    before = clock.now
    ck = em.run(path, 60, 1.0, "p100", 60.0, clock=clock.time, sleep=clock.sleep)
    assert ck.finished and ck.runs == 1 and clock.now == before


def test_a_checkpoint_of_another_job_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    em.save_checkpoint(path, em.Checkpoint(100.0, 10.0))
    with pytest.raises(ValueError, match="checkpoint is for 100"):
        em.load_checkpoint(path, 200.0)


def test_checkpoint_writes_are_atomic_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    ck = em.Checkpoint(10.0, 4.0, False, [em.Segment("k80", "k80-1", 1.0, 2.0, 4.0, "7", "0")])
    em.save_checkpoint(path, ck)
    assert not (tmp_path / "c.json.tmp").exists()
    assert em.Checkpoint.from_json(path.read_text()) == ck


def test_landed_type_comes_from_the_node_slurmd_names() -> None:
    nodes = {"v100-1": "v100", "k80-1": "k80"}
    assert em.landed_type({"SLURMD_NODENAME": "k80-1"}, nodes) == ("k80", "k80-1")
    assert em.landed_type({"SLURM_JOB_NODELIST": "v100-1"}, nodes) == ("v100", "v100-1")
    with pytest.raises(LookupError):
        em.landed_type({"SLURMD_NODENAME": "x-1"}, nodes)


def test_parse_map_rejects_malformed_items() -> None:
    assert em.parse_map("v100=2,k80=0.5", "--tput", True) == {"v100": 2.0, "k80": 0.5}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        em.parse_map("v100", "--tput", True)


def test_command_line_runs_and_refuses_an_unusable_type(tmp_path: Path) -> None:
    ck = tmp_path / "c.json"
    argv = [sys.executable, "-m", "slurm_fair.testbed.emulator", "--steps", "30", "--tput", "v100=100",
            "--gpu-type", "v100", "--time-scale", "100", "--checkpoint", str(ck), "--tick", "0.05"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(ck.read_text())["finished"] is True
    bad = subprocess.run(argv[:-6] + ["--gpu-type", "k80", "--checkpoint", str(tmp_path / "d.json")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == em.EXIT_BAD_PLACEMENT and "k80" in bad.stderr


def test_the_emulator_runs_as_a_plain_script(tmp_path):
    """Slurm runs ``python emulator.py`` on the nodes: it must import nothing of the package
    (a relative import made every replay job fail at once)."""
    import subprocess
    import sys

    from slurm_fair.testbed import emulator

    done = subprocess.run([sys.executable, emulator.__file__, "--help"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
