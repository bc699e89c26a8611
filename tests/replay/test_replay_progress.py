"""A replay's progress for the person watching it: trace time, jobs done, controller cycles."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_fair.commands.replay import trace_time
from slurm_fair.testbed.replay import run as run_module
from slurm_fair.testbed.replay.controller import ControllerProcess
from slurm_fair.testbed.replay.run import Progress

from .test_replay_interrupt import _rig


def test_progress_moves_with_the_run_and_ends_with_every_job_done(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_module, "read_accounting", lambda *a, **kw: {})
    rig = _rig(tmp_path, policy=None)
    seen: list[Progress] = []
    rig.replay.progress = seen.append
    rig.fake_time.hooks[60] = lambda: rig.tb.active.clear()  # every job ends after the last arrival
    rig.replay.run()
    assert seen and all(p.jobs == 3 and p.cycles == 0 for p in seen)
    times = [p.trace_s for p in seen]
    assert times == sorted(times) and times[-1] > 600  # the third job arrives at trace second 600
    assert [p.submitted for p in seen] == sorted(p.submitted for p in seen)
    assert all(p.done <= p.submitted for p in seen)
    assert seen[-1].done == seen[-1].submitted == 3 and seen[0].done == 0


def test_a_failing_display_never_stops_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_module, "read_accounting", lambda *a, **kw: {})
    rig = _rig(tmp_path, policy=None)
    calls: list[Progress] = []

    def broken(p: Progress) -> None:
        calls.append(p)
        raise OSError("terminal gone")

    rig.replay.progress = broken
    rig.fake_time.hooks[60] = lambda: rig.tb.active.clear()
    doc = rig.replay.run().doc
    assert len(calls) == 1 and doc["replay"]["timed_out"] is False


def test_cycles_are_counted_from_the_log_a_whole_line_at_a_time(tmp_path: Path) -> None:
    class Spec:
        run_dir = tmp_path
        interval_real_s = 1.0

    proc = ControllerProcess(None, Spec())  # type: ignore[arg-type]
    assert proc.cycles_so_far() == 0  # no log yet
    proc.log_path.write_text('{"cycle": 1}\nwarning: not a cycle\n{"cycle": 2}\n{"cyc')
    assert proc.cycles_so_far() == 2  # the unfinished line is not counted yet
    with open(proc.log_path, "a") as log:
        log.write('le": 3}\n')
    assert proc.cycles_so_far() == 3
    assert proc.cycles_so_far() == 3


@pytest.mark.parametrize("seconds, text", [(0, "0:00:00"), (59.9, "0:00:59"), (3661, "1:01:01"), (-5, "0:00:00"),
                                           (90000, "25:00:00")])
def test_trace_time_reads_as_hours_minutes_seconds(seconds: float, text: str) -> None:
    assert trace_time(seconds) == text
