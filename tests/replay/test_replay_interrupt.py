"""An interrupted ``testbed replay`` cleans up once: controller stopped, jobs cancelled, revert.

No Slurm: a fake testbed answers sbatch/squeue/scancel, a fake clock and sleep drive the run,
and the "python" of the spec is a small script standing in for ``slurm-fair run --loop`` (a real
process in its own session, with a child in its process group) and ``slurm-fair revert`` (it
only records that it ran). Signals are real: sent to this process from inside the run, while
the replay's handlers are installed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence
from types import SimpleNamespace

import psutil
import pytest

from slurm_fair import cli
from slurm_fair.errors import SlurmCommandError
from slurm_fair.slurm.admin import SlurmAdmin
from slurm_fair.slurm.run import Runner
from slurm_fair.testbed.replay import run as run_module
from slurm_fair.testbed.replay.interrupt import INTERRUPT_SIGNALS, Cleanup, Interrupted, SignalGuard
from slurm_fair.testbed.replay.plan import ReplaySpec
from slurm_fair.testbed.replay.run import Replay

JOB_TYPE = "ResNet-18 (batch size 32)"

FAKE_PYTHON = """#!{python}
import os, signal, subprocess, sys, time
args = sys.argv[3:]  # after "-m slurm_fair.cli"
with open(os.environ["FAKE_REPLAY_LOG"], "a") as f:
    f.write(" ".join(args[:2]) + "\\n")
if args[0] == "revert":
    sys.exit(0)
stop = []
if os.environ.get("FAKE_CONTROLLER") == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:
    signal.signal(signal.SIGTERM, lambda *a: stop.append(a))
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # same process group
with open(os.environ["FAKE_REPLAY_PIDS"], "w") as f:
    f.write(f"{{os.getpid()}} {{child.pid}}\\n")
while not stop:
    time.sleep(0.02)
sys.exit(0)  # leaves its child behind: the replay must kill the group's stragglers
"""


@dataclass
class _Node:
    name: str
    gpu_type: str
    gpus: int


@dataclass
class _Config:
    nodes: list[_Node] = field(default_factory=lambda: [_Node("v100-1", "v100", 4), _Node("p100-1", "p100", 4),
                                                        _Node("k80-1", "k80", 8)])
    tenants: dict[str, float] = field(default_factory=lambda: {"physics": 2.0, "biology": 1.0, "chemistry": 1.0})
    cluster_name: str = "fake"
    cred_expire_s: int = 10


class FakeTestbed:
    """sbatch hands out ids 100, 101, ...; squeue shows them RUNNING until scancel."""

    def __init__(self, extra_env: dict[str, str], state_dir: Path) -> None:
        self.config = _Config()
        self.layout = SimpleNamespace(plan_file=state_dir / "plan.json")
        self.env: dict[str, str] = {}
        self.extra_env = extra_env
        self.calls: list[list[str]] = []
        self.active: set[str] = set()
        self.next_id = 100
        #: command name (or "client_env") -> called before it is answered, once
        self.hooks: dict[str, Callable[[], None]] = {}

    def _hook(self, name: str) -> None:
        hook = self.hooks.pop(name, None)
        if hook:
            hook()

    def client_env(self) -> dict[str, str]:
        self._hook("client_env")
        return {**os.environ, **self.extra_env}

    def run(self, argv: list[str], timeout: float = 30.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        self._hook(argv[0])
        out = ""
        if argv[0] == "sbatch":
            out = f"{self.next_id};fake\n"
            self.active.add(str(self.next_id))
            self.next_id += 1
        elif argv[0] == "squeue":
            fmt = argv[argv.index("-o") + 1]  # %i<fs>%T<fs>%r, the separator chosen per call
            fs = fmt[2:fmt.index("%T")]
            out = "".join(f"{i}{fs}RUNNING{fs}None\n" for i in sorted(self.active))
        elif argv[0] == "scancel":
            self.active -= set(argv[1:])
        elif argv[:3] == ["sacctmgr", "-i", "modify"]:
            pass  # usage reset before the run
        else:
            raise AssertionError(f"unexpected command {argv}")
        return subprocess.CompletedProcess(argv, 0, out, "")

    def commands(self, name: str) -> list[list[str]]:
        return [c for c in self.calls if c[0] == name]

    def admin(self, timeout_s: float = 30.0) -> SlurmAdmin:
        """The package's Slurm commands, answered by :meth:`run`."""
        return SlurmAdmin(runner=_FakeRunner(self))


class _FakeRunner(Runner):
    """A Runner whose commands :meth:`FakeTestbed.run` answers."""

    def __init__(self, tb: FakeTestbed) -> None:
        super().__init__()
        self.tb = tb

    def run(self, argv: Sequence[str], job_id: str | None = None) -> str:
        proc = self.tb.run(list(argv))
        if proc.returncode != 0:
            raise SlurmCommandError(list(argv), proc.returncode, proc.stderr)
        return proc.stdout


class FakeTime:
    """A clock that moves only when the replay sleeps; ``hooks[n]`` runs in the n-th sleep."""

    def __init__(self, hooks: dict[int, Callable[[], None]] | None = None) -> None:
        self.now = 1_000.0
        self.sleeps = 0
        self.hooks = hooks or {}

    def clock(self) -> float:
        return self.now

    def sleep(self, dt: float) -> None:
        self.sleeps += 1
        self.now += dt
        hook = self.hooks.pop(self.sleeps, None)
        if hook:
            hook()


@dataclass
class Rig:
    tb: FakeTestbed
    fake_time: FakeTime
    replay: Replay
    log: Path
    pids: Path

    def ran(self) -> list[str]:
        """What the fake python was asked to do, in order ("run --loop", "revert --config")."""
        return self.log.read_text().splitlines() if self.log.is_file() else []

    def controller_pids(self, timeout: float = 10.0) -> tuple[int, int]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.pids.read_text() if self.pids.is_file() else ""
            if text.endswith("\n"):
                a, c = text.split()
                return int(a), int(c)
            time.sleep(0.02)
        raise AssertionError("the fake controller did not start")


def _trace(path: Path) -> Path:
    rows = ["tenant,job_id,job_type,gpus,total_steps,arrival_s"]
    for i, (tenant, arrival) in enumerate([("physics", 0), ("biology", 0), ("chemistry", 600)], 1):
        rows.append(f"{tenant},{i},{JOB_TYPE},1,10000,{arrival}")
    path.write_text("\n".join(rows) + "\n")
    return path


def _rig(tmp_path: Path, policy: str | None = "oef", controller: str = "polite",
         hooks: dict[int, Callable[[], None]] | None = None, timeout_real_s: float | None = 600.0) -> Rig:
    python = tmp_path / "fake-python"
    python.write_text(FAKE_PYTHON.format(python=sys.executable))
    python.chmod(0o755)
    log, pids = tmp_path / "fake.log", tmp_path / "fake.pids"
    tb = FakeTestbed({"FAKE_REPLAY_LOG": str(log), "FAKE_REPLAY_PIDS": str(pids), "FAKE_CONTROLLER": controller},
                     tmp_path)
    fake_time = FakeTime(hooks)
    spec = ReplaySpec(_trace(tmp_path / "t.csv"), 60.0, policy, tmp_path / "run", timeout_real_s=timeout_real_s,
                       solver="cbc", python=str(python))
    replay = Replay(tb, spec, clock=fake_time.clock, sleep=fake_time.sleep)
    replay.controller.grace_s = 2.0
    return Rig(tb, fake_time, replay, log, pids)


def _gone(pid: int, timeout: float = 10.0) -> bool:
    """True once ``pid`` has ended (a zombie awaiting its new parent counts as ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def _kill_self(signum: int) -> Callable[[], None]:
    return lambda: os.kill(os.getpid(), signum)


def _marker(*_a: Any) -> None:
    """A handler that is not Python's default, to see it come back."""


@pytest.fixture
def handlers() -> Any:
    """SIGTERM/SIGHUP set to a known Python handler for the test, restored afterwards."""
    saved = {s: signal.getsignal(s) for s in INTERRUPT_SIGNALS}
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _marker)
    yield {s: signal.getsignal(s) for s in INTERRUPT_SIGNALS}
    for s, h in saved.items():
        signal.signal(s, h)


def test_sigterm_during_the_loop_stops_the_controller_cancels_and_reverts_once(tmp_path: Path, handlers: Any) -> None:
    rig: Rig

    def deliver() -> None:
        rig.controller_pids()  # the controller's own handler is in place
        os.kill(os.getpid(), signal.SIGTERM)

    # sleeps: 1 after the controller start, 2 up to t0, 3.. in the loop (both first jobs submitted)
    rig = _rig(tmp_path, hooks={4: deliver})
    with pytest.raises(Interrupted) as ei:
        rig.replay.run()
    exc = ei.value
    assert exc.signum == signal.SIGTERM and exc.exit_code == 143
    assert rig.tb.commands("scancel") == [["scancel", "100", "101"]]
    assert rig.ran() == ["run --loop", "revert --config"]  # one controller, one revert
    assert not rig.tb.active
    leader, child = rig.controller_pids()
    assert _gone(leader) and _gone(child)  # the child it left behind was killed with its group
    c = exc.cleanup
    assert c is not None and c is rig.replay.cleanup
    assert (c.reason, c.jobs_cancelled, c.controller_exit_code, c.controller_killed, c.revert) == (
        "SIGTERM", ["100", "101"], 0, False, "ok")
    assert exc.summary() == ("interrupted by SIGTERM; cancelled 2 job(s) (100, 101), "
                             "controller stopped (exit 0), revert ok")
    assert {s: signal.getsignal(s) for s in INTERRUPT_SIGNALS} == handlers


def test_a_controller_that_ignores_sigterm_is_killed_with_its_process_group(tmp_path: Path, handlers: Any) -> None:
    rig: Rig

    def deliver() -> None:
        rig.controller_pids()
        os.kill(os.getpid(), signal.SIGHUP)

    rig = _rig(tmp_path, controller="stubborn", hooks={3: deliver})
    rig.replay.controller.grace_s = 0.5
    with pytest.raises(Interrupted) as ei:
        rig.replay.run()
    c = ei.value.cleanup
    assert ei.value.exit_code == 129 and c is not None
    assert c.controller_killed and c.controller_exit_code == -signal.SIGKILL and c.revert == "ok"
    leader, child = rig.controller_pids()
    assert _gone(leader) and _gone(child)
    assert "controller killed (exit -9)" in ei.value.summary()


def test_a_signal_during_sbatch_waits_until_the_job_id_is_known(tmp_path: Path, handlers: Any) -> None:
    rig = _rig(tmp_path, policy=None)
    rig.tb.hooks["sbatch"] = _kill_self(signal.SIGINT)
    with pytest.raises(Interrupted) as ei:
        rig.replay.run()
    assert ei.value.exit_code == 130
    assert len(rig.tb.commands("sbatch")) == 1  # the second job was never submitted...
    assert rig.tb.commands("scancel") == [["scancel", "100"]]  # ...and the first one is cancelled
    assert ei.value.summary() == "interrupted by SIGINT; cancelled 1 job(s) (100), no controller"
    assert rig.ran() == []  # Slurm alone: nothing to revert


def test_a_signal_while_the_controller_starts_still_stops_and_reverts_it(tmp_path: Path, handlers: Any) -> None:
    rig = _rig(tmp_path)
    rig.tb.hooks["client_env"] = _kill_self(signal.SIGTERM)  # just before its Popen
    with pytest.raises(Interrupted) as ei:
        rig.replay.run()
    c = ei.value.cleanup
    assert c is not None and c.controller_started and c.jobs_cancelled == [] and c.revert == "ok"
    assert rig.replay.controller.process is not None and rig.replay.controller.process.returncode is not None
    assert rig.tb.commands("sbatch") == []
    assert rig.ran()[-1] == "revert --config"


def test_a_second_signal_during_the_cleanup_does_not_cut_it_short(tmp_path: Path, handlers: Any) -> None:
    rig: Rig

    def deliver() -> None:
        rig.controller_pids()
        os.kill(os.getpid(), signal.SIGTERM)

    rig = _rig(tmp_path, hooks={4: deliver})
    rig.tb.hooks["scancel"] = _kill_self(signal.SIGINT)  # Ctrl-C while the cleanup cancels
    with pytest.raises(Interrupted) as ei:
        rig.replay.run()
    assert ei.value.signum == signal.SIGTERM  # the first signal is the one reported
    assert rig.tb.commands("scancel") == [["scancel", "100", "101"]]
    assert rig.ran() == ["run --loop", "revert --config"]
    assert _gone(rig.controller_pids()[0])
    assert {s: signal.getsignal(s) for s in INTERRUPT_SIGNALS} == handlers


def test_the_timeout_takes_the_same_cleanup_and_records_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_module, "read_accounting", lambda *a, **kw: {})
    rig = _rig(tmp_path, timeout_real_s=5.0)  # the third job would arrive at 10 s
    rig.fake_time.hooks[3] = lambda: rig.controller_pids() and None
    doc = rig.replay.run().doc
    assert doc["replay"]["timed_out"] is True
    assert doc["replay"]["cleanup"] == {
        "reason": "timeout", "jobs_cancelled": ["100", "101"], "controller_started": True,
        "controller_exit_code": 0, "controller_killed": False, "revert": "ok", "errors": []}
    assert doc["replay"]["controller"]["exit_code"] == 0 and doc["replay"]["controller"]["revert"] == "ok"
    assert rig.tb.commands("scancel") == [["scancel", "100", "101"]]
    assert rig.ran() == ["run --loop", "revert --config"]


def test_a_finished_run_cancels_nothing_and_records_its_cleanup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_module, "read_accounting", lambda *a, **kw: {})
    rig = _rig(tmp_path, policy=None)
    rig.fake_time.hooks[60] = lambda: rig.tb.active.clear()  # at ~16 s: every job ends after the last arrival
    doc = rig.replay.run().doc
    assert doc["replay"]["timed_out"] is False and len(rig.tb.commands("sbatch")) == 3
    assert rig.tb.commands("scancel") == []
    assert doc["replay"]["cleanup"]["reason"] == "finished" and doc["replay"]["cleanup"]["jobs_cancelled"] == []


def test_exit_codes_are_128_plus_the_signal() -> None:
    assert [Interrupted(s).exit_code for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)] == [130, 143, 129]
    assert isinstance(Interrupted(signal.SIGTERM), KeyboardInterrupt)  # lets Ctrl-C handling through


def test_the_command_exits_with_the_signal_code_and_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from slurm_fair.commands import replay as cmd

    class Stopped:
        def __init__(self, *a: Any, **kw: Any) -> None:
            pass

        def run(self) -> None:
            exc = Interrupted(signal.SIGTERM)
            exc.cleanup = Cleanup("SIGTERM", ["7"], True, 0, False, "ok")
            raise exc

    monkeypatch.setattr(cmd, "Testbed", lambda **kw: None)
    monkeypatch.setattr(cmd, "Replay", Stopped)
    rc = cli.main(["testbed", "replay", "--trace", str(_trace(tmp_path / "t.csv")), "--time-scale", "60",
                   "--policy", "oef", "--run-dir", str(tmp_path / "run"), "-q"])
    assert rc == 143
    assert capsys.readouterr().err.strip().splitlines() == [
        "slurm-fair: interrupted by SIGTERM; cancelled 1 job(s) (7), controller stopped (exit 0), revert ok"]


def test_handlers_are_installed_only_in_the_main_thread_and_restored(handlers: Any) -> None:
    seen: dict[str, Any] = {}

    def in_thread() -> None:
        with SignalGuard() as g:
            seen["installed"] = g.installed
            seen["during"] = signal.getsignal(signal.SIGTERM)

    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    assert seen == {"installed": False, "during": handlers[signal.SIGTERM]}
    with pytest.raises(Interrupted) as ei:
        with SignalGuard() as g:
            assert g.installed and signal.getsignal(signal.SIGTERM) != handlers[signal.SIGTERM]
            with g.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                os.kill(os.getpid(), signal.SIGHUP)
                time.sleep(0.05)  # both arrive inside the block: recorded, not raised
            pytest.fail("the first signal is raised when the deferred block ends")
    assert ei.value.signum == signal.SIGTERM and g.received == [signal.SIGTERM, signal.SIGHUP]
    assert {s: signal.getsignal(s) for s in INTERRUPT_SIGNALS} == handlers
