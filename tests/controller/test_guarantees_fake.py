"""Issue 40 (part B) on the fake: the failsafe and revert keep their promise on every path
(shadow mode, a full or read-only state directory, no sprio, overlapping runs)."""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta

import pytest

from slurm_fair.cli import main
from slurm_fair.config import load
from slurm_fair.controller.audit import AuditLog
from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.failsafe import failsafe
from slurm_fair.controller.lock import ControllerLock, FailsafeLock
from slurm_fair.controller.revert import revert
from slurm_fair.controller.state import StateStore
from slurm_fair.controller.state.fields import IN_DOUBT_S, FieldTables
from slurm_fair.controller import learned
from slurm_fair.errors import ConfigError, SlurmUnavailable, UserError
from slurm_fair.slurm.fake import FakeSlurm
from slurm_fair.slurm.model import Account, Qos

from .builders import cluster
from .conftest import make_config

from .test_cycle_fake import submit_mix


def test_shadow_cycles_do_not_disarm_the_failsafe(fake, config):
    """live -> shadow: shadow cycles keep nothing in Slurm up to date, so they do not reset the
    failsafe's clock; once the last live cycle is fail_open_after_s old, everything goes back."""
    ids = submit_mix(fake)
    t0 = fake.now.timestamp()
    assert run_cycle(fake, config, clock=lambda: t0).status == "ok"
    steered = {i: fake.job(i).partition for i in ids}
    assert all(p != "gpu" for p in steered.values())
    plan = config["controller"]["state_dir"] + "/plan.json"
    for k in range(1, 12):  # ten minutes of shadow cycles, one a minute
        res = run_cycle(fake, config, clock=lambda k=k: t0 + 60 * k, shadow=True)
        assert res.status == "ok", res.to_dict()
        assert any("shadow mode" in w and "still set by earlier live cycles" in w for w in res.warnings)
    assert not os.path.exists(plan)  # the submit plugin stops steering at the first shadow cycle
    assert {i: fake.job(i).partition for i in ids} == steered  # shadow writes nothing
    with StateStore.read_only(StateStore.existing(config["controller"]["state_dir"], "test")) as ro:
        assert ro.last_completed_at() == t0
    lifted = failsafe(fake, config, clock=lambda: t0 + 60 * 12)
    assert lifted.exit_code == 0 and lifted.lifted is not None, lifted.to_dict()
    assert all(fake.job(i).partition == "gpu" for i in ids)
    # the shadow loop goes on: it still writes nothing, and the failsafe finds nothing more
    assert run_cycle(fake, config, clock=lambda: t0 + 60 * 13, shadow=True).status == "ok"
    assert all(fake.job(i).partition == "gpu" for i in ids)
    assert "nothing to lift" in failsafe(fake, config, clock=lambda: t0 + 60 * 14).message


def _steered(fake, config):
    ids = submit_mix(fake)
    t0 = fake.now.timestamp()
    assert run_cycle(fake, config, clock=lambda: t0).status == "ok"
    assert all(fake.job(i).partition != "gpu" for i in ids)
    return ids, t0


def test_the_failsafe_gives_back_when_the_state_directory_cannot_be_written(fake, config, monkeypatch):
    """A full disk: the store cannot be opened for writing and the audit log cannot be
    appended. The failsafe reads the store read-only and gives everything back anyway."""
    ids, t0 = _steered(fake, config)

    def cannot(*_a, **_kw):
        raise UserError("cannot open the controller state store (state_dir): database or disk is full")

    def full(*_a, **_kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(StateStore, "in_dir", classmethod(cannot))
    monkeypatch.setattr(AuditLog, "write", full)
    res = failsafe(fake, config, clock=lambda: t0 + 700)
    assert res.exit_code == 0 and res.lifted is not None, res.to_dict()
    assert all(fake.job(i).partition == "gpu" for i in ids)
    assert any("read read-only" in n for n in res.notes) and any("audit log" in n for n in res.notes)
    monkeypatch.undo()
    # the store still has the rows; the next revert settles them from Slurm, nothing to write
    assert revert(fake, config).exit_code == 0
    with StateStore.in_dir(config["controller"]["state_dir"]) as store:
        assert not [r for r in store.owned().values() if r.written and not r.released]


def test_a_store_that_fails_mid_give_back_does_not_stop_it(fake, config, monkeypatch):
    """The disk fills up between the give-back's intents: revert goes on unrecorded."""
    ids, _ = _steered(fake, config)

    def full(self, *a, **kw):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(FieldTables, "record_intents", full)
    monkeypatch.setattr(FieldTables, "settle", full)
    res = revert(fake, config)
    assert res.exit_code == 0, res.to_dict()
    assert all(fake.job(i).partition == "gpu" for i in ids)
    assert any("disk is full" in n for n in res.notes)


def test_overlapping_failsafe_runs_take_the_lock(fake, config):
    """A failsafe run that finds another one giving back does nothing; a loop stuck holding the
    controller lock does not stop the failsafe."""
    ids, t0 = _steered(fake, config)
    state = config["controller"]["state_dir"]
    other = FailsafeLock(state)
    assert other.acquire() is True
    try:
        res = failsafe(fake, config, clock=lambda: t0 + 700)
        assert res.lifted is None and "another failsafe run" in res.message
        assert all(fake.job(i).partition != "gpu" for i in ids)
    finally:
        other.release()
    stuck = ControllerLock(state)
    stuck.acquire()
    try:
        res = failsafe(fake, config, clock=lambda: t0 + 700)
    finally:
        stuck.release()
    assert res.exit_code == 0 and all(fake.job(i).partition == "gpu" for i in ids)
    assert any("goes on without the lock" in n for n in res.notes)


def test_an_interval_at_or_above_fail_open_after_is_refused(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[controller]\ninterval_s = 600\nfail_open_after_s = 600\n")
    with pytest.raises(ConfigError) as err:
        load(str(cfg))
    assert err.value.exit_code == 2 and "controller.fail_open_after_s" in err.value.message()
    assert main(["failsafe", "--config", str(cfg)]) == 2
    cfg.write_text("[controller]\ninterval_s = 60\nfail_open_after_s = 120\n")
    assert load(str(cfg))["controller"]["fail_open_after_s"] == 120


def test_revert_and_the_failsafe_load_nothing_of_the_cycle(tmp_path):
    """The failsafe must work when the policy stack does not: with every policy module, the
    cycle, the decision and the plan made unimportable, `failsafe` and `revert` still load."""
    code = textwrap.dedent("""
        import sys
        BLOCKED = ("slurm_fair.controller.cycle", "slurm_fair.controller.decide", "slurm_fair.controller.plan",
                   "slurm_fair.rounding", "slurm_fair.fairness", "slurm_fair.grouplp")
        class Block:
            def find_spec(self, name, path, target=None):
                if name in BLOCKED or name.startswith(tuple(b + "." for b in BLOCKED + ("slurm_fair.policies",))):
                    raise ImportError("blocked: " + name)
        sys.meta_path.insert(0, Block())
        import slurm_fair.commands.failsafe, slurm_fair.commands.revert
        from slurm_fair.cli import main
        sys.exit(main(["failsafe", "--config", sys.argv[1]]))
    """)
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[controller]\nstate_dir = "{tmp_path / "state"}"\n')
    out = subprocess.run([sys.executable, "-c", code, str(cfg)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "nothing to lift" in out.stdout, out.stdout + out.stderr


def _crowd(fake):
    """More GPUs asked than the cluster has, so some jobs wait and get pushed down."""
    return [fake.submit(("alice", "bob")[i % 2], "--gres=gpu:2", hold=False, comment="fair:class=resnet-50-bs32")
            for i in range(14)]


def test_a_site_factor_plugin_is_noticed_and_nothing_is_pushed(fake, config, tmp_path):
    _crowd(fake)
    pushes = [r for r in run_cycle(fake, config).results if r.action.kind == "set_site_factor"]
    assert pushes  # without a plugin this crowd is ordered by pushes
    other = FakeSlurm(slurm_version="22.05", nodes=cluster(v100=4, p100=4, k80=8),
                      accounts=[Account("alice", 1.0, ("normal",), "normal"), Account("bob", 1.0, ("normal",), "normal")],
                      qos=[Qos("normal")], now=datetime(2026, 1, 1, 12, 0, 0))
    other.site_factor_plugin_name = "site_factor/example"
    _crowd(other)
    res = run_cycle(other, make_config(tmp_path / "other"))
    assert res.status == "ok", res.to_dict()
    assert not [r for r in res.results if r.action.kind == "set_site_factor"]
    assert any("PrioritySiteFactorPlugin=site_factor/example" in w for w in res.warnings)
    assert [r for r in res.results if r.action.kind == "set_partition"]  # it still steers


class _SacctFails:
    """A port whose accounting history times out (a 90-day sacct on a loaded slurmdbd)."""

    def __init__(self, port):
        self.port, self.calls = port, 0

    def accounting_history(self, since):
        self.calls += 1
        raise SlurmUnavailable("sacct timed out after 30 s")

    def __getattr__(self, name):
        return getattr(self.port, name)


def test_a_failed_refresh_of_the_learned_table_backs_off(fake, config):
    submit_mix(fake)
    port = _SacctFails(fake)
    t0 = fake.now.timestamp()
    first = run_cycle(port, config, clock=lambda: t0)
    assert first.status == "ok" and any("not refreshed" in w and "next try in 900 s" in w for w in first.warnings)
    for k in range(1, 15):  # cycles every minute for 14 minutes: no second sacct
        run_cycle(port, config, clock=lambda k=k: t0 + 60 * k)
    assert port.calls == 1
    run_cycle(port, config, clock=lambda: t0 + 901)
    assert port.calls == 2  # then it backs off for twice as long
    for k in range(1, 30):
        run_cycle(port, config, clock=lambda k=k: t0 + 901 + 60 * k)
    assert port.calls == 2
    run_cycle(port, config, clock=lambda: t0 + 901 + 1801)
    assert port.calls == 3


def _ran(fake, gpu_type, node, minutes, name="rn128", state="COMPLETED"):
    j = fake.submit("alice", "--gres=gpu:1", hold=False, name=name)
    fake.start(j, node, gpu_type)
    fake.now += timedelta(minutes=minutes)
    fake.finish(j, state=state)


def test_a_failing_type_is_offered_again_after_a_bound_and_a_new_failure_marks_it_again(tmp_path, fake):
    config = make_config(tmp_path)
    for _ in range(2):
        _ran(fake, "v100", "v100-1", 30)
    _ran(fake, "k80", "k80-1", 1, state="FAILED")  # one FAILED run where it completed elsewhere
    state = tmp_path / "state"
    state.mkdir()

    def k80_speed(days):
        when = fake.now.timestamp() + days * 86400
        table, _ = learned.refresh(fake, config, state, ["k80", "p100", "v100"], False, when)
        (group,) = [g for g in table.speeds if g[1] == "rn128" and g[0] != learned.ANY_USER]
        return table.speeds[group]["k80"]

    assert k80_speed(0) == 0  # marked: never sent there
    assert k80_speed(7) == 0  # a week later, still marked (the failure is in the 90-day history)
    assert k80_speed(learned.FAIL_MARK_DAYS + 2) > 0  # offered again after the bound
    _ran(fake, "k80", "k80-1", 1, state="FAILED")  # it fails there again: marked again
    assert k80_speed(learned.FAIL_MARK_DAYS + 4) == 0
    assert k80_speed(2 * learned.FAIL_MARK_DAYS + 6) > 0


def test_a_late_negative_site_factor_is_given_back(fake, config, monkeypatch):
    """The site-factor push times out and lands more than IN_DOUBT_S later, after a revert
    already ran: it is still the controller's, and the next revert gives it back."""
    _crowd(fake)
    real = fake.update_jobs
    late: list[tuple[list[str], dict]] = []

    def update_jobs(job_ids, fields):
        if "SiteFactor" in fields and int(fields["SiteFactor"]) < 0:
            late.append((list(job_ids), dict(fields)))
            raise SlurmUnavailable("scontrol did not answer within 30 s")
        return real(job_ids, fields)

    monkeypatch.setattr(fake, "update_jobs", update_jobs)
    res = run_cycle(fake, config)
    assert late and any(r.uncertain for r in res.results)
    pushed = late[0][0]
    monkeypatch.setattr(fake, "update_jobs", real)
    t = time.time() + IN_DOUBT_S + 60
    assert revert(fake, config, clock=lambda: t).exit_code == 0
    job_ids, fields = late.pop()
    real(job_ids, fields)  # lands now, long after its window
    assert all((fake.job(j).site_factor or 0) < 0 for j in pushed)
    rv = revert(fake, config, clock=lambda: t + 120)
    assert rv.exit_code == 0, rv.to_dict()
    assert all((fake.job(j).site_factor or 0) == 0 for j in pushed)


def test_a_shadow_only_controller_costs_the_failsafe_no_reading_of_slurm(fake, config):
    """Weeks of shadow cycles before going live: the failsafe (every minute) finds nothing held
    and reads nothing from Slurm, although no live cycle ever completed."""
    submit_mix(fake)
    t0 = fake.now.timestamp()
    assert run_cycle(fake, config, clock=lambda: t0, shadow=True).status == "ok"
    reads = []

    class Counting:
        def snapshot(self):
            reads.append("snapshot")
            return fake.snapshot()

        def __getattr__(self, name):
            return getattr(fake, name)

    res = failsafe(Counting(), config, clock=lambda: t0 + 7200)
    assert res.lifted is None and "nothing to lift" in res.message
    assert not reads
    # the same controller once live, then stopped: the failsafe reads Slurm and lifts
    assert run_cycle(fake, config, clock=lambda: t0 + 7260).status == "ok"
    assert failsafe(Counting(), config, clock=lambda: t0 + 7260 + 700).lifted is not None and reads
