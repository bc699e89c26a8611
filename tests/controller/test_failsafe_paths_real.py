"""Issue 40 (the failsafe's paths) on the real testbeds (22.05 and 24.11): the failsafe fails open on every
path a site takes (live -> shadow, a full state disk with the loop killed -9, no sprio), and
what the controller writes late or learns cannot hurt the loop.

Each test fails on the code before issue 40 (checked once against that code)."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from slurm_fair.config import load, validate
from slurm_fair.controller import learned
from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.failsafe import failsafe
from slurm_fair.controller.revert import revert
from slurm_fair.controller.state.fields import IN_DOUBT_S
from slurm_fair.errors import SlurmUnavailable
from slurm_fair.slurm import make_port
from slurm_fair.testbed.jobs import submit_job, wait_job_state

from .test_pilot_real import config, jobs, runnable
from .test_testbed import _run, accounts, sub, tb_env  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slurm


def test_live_then_shadow_the_failsafe_still_gives_everything_back(sub, accounts, tmp_path):
    """Live cycles steer; the site switches to shadow and its cycles go on completing; past
    fail_open_after_s after the last live cycle the failsafe leaves no pending job where the
    live cycles put it (before issue 40 shadow cycles reset the clock: nothing was lifted)."""
    a, b = accounts
    cfg = config(tmp_path, accounts)
    port = make_port(cfg, env=sub.env)
    ids = [sub((a, b)[i % 2], comment=("fair:class=resnet-50-bs32", "fair:class=a3c")[i % 2]) for i in range(8)]
    before = {j: x.partition for j, x in jobs(port, ids).items()}
    t0 = time.time()
    assert run_cycle(port, cfg, clock=lambda: t0).exit_code == 0
    moved = [j for j, x in jobs(port, ids).items() if x.partition != before[j]]
    assert moved
    for k in range(1, 4):  # shadow cycles, the last well inside fail_open_after_s of the failsafe's run
        res = run_cycle(port, cfg, clock=lambda k=k: t0 + 200 * k, shadow=True)
        assert res.status == "ok", res.to_dict()
    assert [j for j, x in jobs(port, ids).items() if x.partition != before[j]] == moved
    res = failsafe(port, cfg, clock=lambda: t0 + 200 * 3 + 60)
    assert res.exit_code == 0 and res.lifted is not None, res.to_dict()
    assert {j: x.partition for j, x in jobs(port, ids).items()} == before
    assert not runnable(port, ids)


@contextlib.contextmanager
def small_disk(where: Path, size: str = "4m"):
    """A tmpfs of ``size`` mounted at ``where`` (root only), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system for the state directory needs root")
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)], check=True,
                   timeout=30)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False, timeout=30)


def fill(disk: Path) -> None:
    """Write a file until the file system is full (ENOSPC)."""
    chunk = b"\0" * 65536
    try:
        fh = open(disk / "filler", "wb")
    except OSError as exc:  # the controller's own state already filled it
        assert exc.errno == errno.ENOSPC, exc
        sizes = {str(f.relative_to(disk)): f.stat().st_size for f in disk.rglob("*") if f.is_file()}
        print("state directory full before the filler:", sorted(sizes.items(), key=lambda kv: -kv[1])[:8])
    else:
        _fill_with(fh, chunk)
    with pytest.raises(OSError):
        (disk / "probe").write_bytes(chunk)


def _fill_with(fh, chunk: bytes) -> None:
    try:  # closing flushes what the last write left in the buffer: ENOSPC there too
        with fh:
            while True:
                fh.write(chunk)
                fh.flush()
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc


def loop_config(tmp_path: Path, state: Path, manage) -> Path:
    path = tmp_path / "slurm-fair.toml"
    path.write_text(
        f'[controller]\nstate_dir = "{state}"\naudit_log = "{state / "audit.jsonl"}"\n'
        f'manage_accounts = {list(manage)!r}\npin_gres_type = false\ninterval_s = 1\nfail_open_after_s = 60\n'
        '[slurm]\ncommand_timeout_s = 15\n'.replace("'", '"'))
    return path


def steer_with_the_loop(sub, cfg_path: Path, ids: list[str], before: dict[str, str]) -> list[str]:
    """``run --loop`` until it has steered some of ``ids``, then kill -9 (its whole group)."""
    env = {**sub.full_env, "SLURM_FAIR_CONFIG": str(cfg_path)}
    exe = Path(sys.executable).with_name("slurm-fair")
    loop = subprocess.Popen([str(exe), "run", "--loop"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    port = make_port(validate({}, "x"), env=sub.env)
    try:
        deadline = time.time() + 90
        while time.time() < deadline and not any(j.partition != before[i] for i, j in jobs(port, ids).items()):
            time.sleep(0.5)
        time.sleep(1.5)
    finally:
        os.killpg(loop.pid, signal.SIGKILL)
        loop.wait(30)
    return [i for i, j in jobs(port, ids).items() if j.partition != before[i]]


def test_a_full_state_disk_and_the_loop_killed_then_the_failsafe_gives_everything_back(sub, accounts, tmp_path):
    """The state directory is on a small file system that fills up; the loop is killed -9. The
    failsafe (past fail_open_after_s) must leave no job as the controller set it (before issue
    40 it stopped at opening the store: every steered job stayed)."""
    a, b = accounts
    with small_disk(tmp_path / "state") as disk:
        cfg_path = loop_config(tmp_path, disk, accounts)
        ids = [sub((a, b)[i % 2], comment=("fair:class=resnet-50-bs32", "fair:class=a3c")[i % 2]) for i in range(8)]
        port = make_port(validate({}, "x"), env=sub.env)
        before = {j: x.partition for j, x in jobs(port, ids).items()}
        assert steer_with_the_loop(sub, cfg_path, ids, before)
        killed = time.time()
        fill(disk)
        # the command the timer runs, once fail_open_after_s (60 s) has passed
        time.sleep(max(0.0, killed + 62 - time.time()))
        env = {**sub.full_env, "SLURM_FAIR_CONFIG": str(cfg_path)}
        exe = Path(sys.executable).with_name("slurm-fair")
        out = subprocess.run([str(exe), "failsafe"], env=env, capture_output=True, text=True, timeout=180)
        assert out.returncode == 0 and "gave back" in out.stdout, out.stdout + out.stderr
        assert "note:" in out.stdout  # it said what it could not record
        assert {j: x.partition for j, x in jobs(port, ids).items()} == before
        assert not runnable(port, ids)


def test_revert_on_a_read_only_state_directory(sub, accounts, tmp_path):
    """The state directory's file system is remounted read-only after cycles steered: revert
    reads the store read-only and gives everything back (before issue 40: exit 2, nothing)."""
    a, b = accounts
    with small_disk(tmp_path / "state") as disk:
        cfg_path = loop_config(tmp_path, disk, accounts)
        cfg = load(str(cfg_path))
        port = make_port(cfg, env=sub.env)
        ids = [sub((a, b)[i % 2], comment=("fair:class=resnet-50-bs32", "fair:class=a3c")[i % 2]) for i in range(8)]
        before = {j: x.partition for j, x in jobs(port, ids).items()}
        assert run_cycle(port, cfg).exit_code == 0
        assert [j for j, x in jobs(port, ids).items() if x.partition != before[j]]
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True, timeout=30)
        env = {**sub.full_env, "SLURM_FAIR_CONFIG": str(cfg_path)}
        exe = Path(sys.executable).with_name("slurm-fair")
        out = subprocess.run([str(exe), "revert"], env=env, capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stdout + out.stderr
        assert {j: x.partition for j, x in jobs(port, ids).items()} == before
        assert not runnable(port, ids)


def test_the_adapter_reads_the_site_factor_plugin(sub):
    """The testbeds set no PrioritySiteFactorPlugin (slurm.conf leaves it unset: "(null)"), so
    the controller pushes; `scontrol show config` is read on both versions."""
    port = make_port(validate({}, "x"), env=sub.env)
    assert port.site_factor_plugin() == ""


class SacctTimesOut:
    """The real port, but its accounting history times out (a 90-day sacct on a loaded slurmdbd)."""

    def __init__(self, port):
        self.port, self.calls = port, 0

    def accounting_history(self, since):
        self.calls += 1
        raise SlurmUnavailable("sacct timed out after 15 s")

    def __getattr__(self, name):
        return getattr(self.port, name)


def test_a_failed_refresh_of_the_learned_table_is_not_retried_every_cycle(sub, accounts, tmp_path):
    """Cycles every minute against real Slurm while sacct keeps failing: one try, then a back-off
    (before issue 40 every cycle ran the 90-day sacct again)."""
    a, b = accounts
    cfg = config(tmp_path, accounts)
    port = SacctTimesOut(make_port(cfg, env=sub.env))
    sub(a, comment="fair:class=resnet-50-bs32")
    sub(b, comment="fair:class=a3c")
    t0 = time.time()
    for k in range(5):
        res = run_cycle(port, cfg, clock=lambda k=k: t0 + 60 * k)
        assert res.exit_code == 0, res.to_dict()
    assert port.calls == 1
    assert run_cycle(port, cfg, clock=lambda: t0 + 60 * 4 + learned.RETRY_S).exit_code == 0
    assert port.calls == 2


def test_one_failed_run_marks_a_type_only_for_a_bound(testbed, accounts, tmp_path):
    """A group completes on v100 and fails once on k80 (real runs, real accounting): k80 is
    marked at once and a week later, and offered again after FAIL_MARK_DAYS (before issue 40:
    marked for the 90 days of history, and never offered, so never cleared)."""
    a, _ = accounts
    name = f"fm{secrets.token_hex(3)}"
    done = [submit_job(testbed, a, "sleep 1", gres="gpu:v100:1", extra=["-J", name]) for _ in range(2)]
    bad = submit_job(testbed, a, "exit 3", gres="gpu:k80:1", extra=["-J", name])
    for j in done:
        assert wait_job_state(testbed, j, timeout=120) == "COMPLETED"
    assert wait_job_state(testbed, bad, timeout=120) == "FAILED"
    cfg = config(tmp_path, accounts)
    port = make_port(cfg, env=testbed.env)
    types = ["k80", "p100", "v100"]
    state = tmp_path / "state"
    state.mkdir()
    deadline = time.time() + 60
    while True:  # slurmdbd records the ends a moment later
        table = learned.build(port, types, 1.0, time.time())
        group = [g for g in table.speeds if g[1] == name and g[0] != learned.ANY_USER]
        if (group and table.speeds[group[0]].fails) or time.time() > deadline:
            break
        time.sleep(1)
    assert group and table.speeds[group[0]].fails == {"k80": 1}, table.to_doc()

    def k80(days):
        t, _ = learned.refresh(port, cfg, state, types, False, time.time() + days * 86400)
        return t.speeds[group[0]]["k80"]

    assert k80(0) == 0 and k80(7) == 0
    assert k80(learned.FAIL_MARK_DAYS + 1) > 0


def test_a_write_landing_after_its_doubt_window_is_still_given_back(sub, accounts, tb_env, tmp_path):
    """slurmctld stalls (SIGSTOP) right after the cycle's read: its partition writes time out
    and land once it resumes. Read later than IN_DOUBT_S after, the landed value is still the
    controller's: revert gives it back (before issue 40 it was taken for someone else's change
    and left where the controller had put it)."""
    tb, _, _ = tb_env
    a, b = accounts
    cfg = validate({
        "controller": {"state_dir": str(tmp_path / "state"), "audit_log": str(tmp_path / "audit.jsonl"),
                       "manage_accounts": list(accounts), "pin_gres_type": False},
        "slurm": {"command_timeout_s": 3, "retries": 0},
    }, str(tmp_path / "slurm-fair.toml"))
    port = make_port(cfg, env=sub.env)
    ids = [sub((a, b)[i % 2], comment=("fair:class=resnet-50-bs32", "fair:class=a3c")[i % 2]) for i in range(6)]
    before = {j: x.partition for j, x in jobs(port, ids).items()}
    pid = int(tb.layout.pid_file("slurmctld").read_text().split()[0])

    class Stalls:  # slurmctld stops just as the first partition write goes out
        stalled = False

        def update_jobs(self, job_ids, fields):
            if "Partition" in fields and not self.stalled:
                self.stalled = True
                os.kill(pid, signal.SIGSTOP)
                threading.Timer(6.0, os.kill, (pid, signal.SIGCONT)).start()
            return port.update_jobs(job_ids, fields)

        def __getattr__(self, name):
            return getattr(port, name)

    try:
        res = run_cycle(Stalls(), cfg)
    finally:
        time.sleep(6.5)
        os.kill(pid, signal.SIGCONT)
    assert res.exit_code != 0 and any(r.uncertain for r in res.results), res.to_dict()
    deadline = time.time() + 30
    while time.time() < deadline and all(x.partition == before[j] for j, x in jobs(port, ids).items()):
        time.sleep(0.5)
    landed = [j for j, x in jobs(port, ids).items() if x.partition != before[j]]
    assert landed, "no write landed after slurmctld resumed"
    rv = revert(port, cfg, clock=lambda: time.time() + IN_DOUBT_S + 60)
    assert rv.exit_code == 0, rv.to_dict()
    assert {j: x.partition for j, x in jobs(port, ids).items()} == before


def test_speeds_learn_reads_slurm_through_the_port(testbed, accounts, tmp_path):
    """`speeds learn --from-slurm` (and the controller's learned table) read the accounting
    history through the port's accounting_history, on both versions."""
    a, _ = accounts
    name = f"sl{secrets.token_hex(3)}"
    runs = [submit_job(testbed, a, "sleep 1", gres=f"gpu:{k}:1", extra=["-J", name]) for k in ("v100", "k80")]
    for j in runs:
        assert wait_job_state(testbed, j, timeout=120) == "COMPLETED"
    port = make_port(validate({}, "x"), env=testbed.env)
    deadline = time.time() + 60
    while time.time() < deadline:
        history = port.accounting_history(datetime.now() - timedelta(hours=1))
        if len([r for r in history.rows if r.job_name == name]) == 2:
            break
        time.sleep(1)
    assert {r.gpu_type for r in history.rows if r.job_name == name} == {"v100", "k80"}
    exe = Path(sys.executable).with_name("slurm-fair")
    env = {**os.environ, **testbed.env}
    env.pop("SLURM_FAIR_CONFIG", None)
    out = subprocess.run([str(exe), "speeds", "learn", "--from-slurm", "--since", "1h", "--json"], env=env,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0 and name in out.stdout, out.stdout[-2000:] + out.stderr
