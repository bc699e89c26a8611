"""Issue 27's chaos suite on the real testbeds (22.05 and 24.11): a careful admin's pilot.

Each test works in fresh accounts (see test_testbed.py) and checks, against real slurmctld and
slurmdbd, that the controller keeps the site's choices, stays inside the pilot, never strands a
job (every job's QOS, partition and account exist and it can run), survives a kill -9 and fails
open, and that revert gives back exactly what it took (a user's later change included).
Steering is by partition on both versions (``pin_gres_type = false``), so the same
expectations hold. Every test runs through both Slurm backends (``[slurm] backend``: the
commands, and pyslurm where pyslurm for that Slurm is installed; skipped, saying why, elsewhere).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurm_fair.config import validate
from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.failsafe import failsafe
from slurm_fair.controller.revert import revert
from slurm_fair.controller.state import StateStore
from slurm_fair.commands.snapshot import controller_problem
from slurm_fair.slurm import make_port

from .test_testbed import _run, accounts, start_now, sub, tb_env  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slurm

#: the backend of the running test (set by the ``backend`` fixture, read by :func:`config`)
_BACKEND = {"name": "cli"}


@pytest.fixture(autouse=True, params=["cli", "pyslurm"])
def backend(request, slurm_version, monkeypatch):
    """Each test through Slurm's commands, then through pyslurm (when pyslurm for this Slurm is
    here: its major.minor is Slurm's). A port that falls back to the commands fails the
    pyslurm arm (it would test the commands twice), as does a failed side process."""
    from slurm_fair.slurm import pyslurm_port
    from slurm_fair.slurm.pyslurm_port import installed_version, major_minor

    if request.param == "pyslurm":
        have = installed_version()
        if have is None:
            pytest.skip("pyslurm is not installed (make pyslurm builds it from ../shared/vendor)")
        if major_minor(have) != major_minor(slurm_version):
            pytest.skip(f"pyslurm {have} is not for Slurm {slurm_version}")
        monkeypatch.setattr(pyslurm_port.log, "warning", lambda msg, *a: pytest.fail(f"no pyslurm port: {msg}"))
        # the side process from the first job read on (not only at a big queue), so that the
        # later reads go a big queue's way (docs/slurm-adapter.md)
        monkeypatch.setattr(pyslurm_port, "SIDE_AFTER_S", 0.0)
        monkeypatch.setattr(pyslurm_port, "SIDE_AFTER_READS", 1)
    _BACKEND["name"] = request.param
    yield request.param
    _BACKEND["name"] = "cli"


def config(tmp_path, manage, **controller):
    return validate({
        "controller": {"state_dir": str(tmp_path / "state"), "audit_log": str(tmp_path / "audit.jsonl"),
                       "manage_accounts": list(manage), "pin_gres_type": False, **controller},
        "slurm": {"command_timeout_s": 15, "backend": _BACKEND["name"]},
    }, str(tmp_path / "slurm-fair.toml"))


def jobs(port, ids):
    return {j.job_id: j for j in port.jobs() if j.job_id in ids}


def runnable(port, ids) -> list[str]:
    """Problems that would keep a job from ever running: a QOS, partition or account that does
    not exist (the check of revert, computed here independently from Slurm's own lists)."""
    qos = {q.name for q in port.qos()}
    parts = {p.name for p in port.partitions()}
    accts = {a.name for a in port.accounts()}
    out = []
    for j in jobs(port, ids).values():
        if j.qos not in qos:
            out.append(f"{j.job_id}: QOS {j.qos}")
        out += [f"{j.job_id}: partition {p}" for p in j.partition.split(",") if p not in parts]
        if j.account not in accts:
            out.append(f"{j.job_id}: account {j.account}")
    return out


def test_users_choices_stay_and_a_later_change_wins(sub, accounts, tmp_path):
    a, _ = accounts
    full = sub.full_env
    qos = f"sq{a[-8:]}"
    _run(["sacctmgr", "-i", "add", "qos", qos], full, check=False)
    try:
        _run(["sacctmgr", "-i", "modify", "account", a, "set", f"qos+={qos}"], full)
        _run(["sacctmgr", "-i", "modify", "user", "root", "where", f"account={a}", "set", f"qos+={qos}"], full)
        time.sleep(2)
        plain, later = sub(a), sub(a)
        with_qos = sub(a, f"--qos={qos}")
        pinned = sub(a, "-w", "k80-1")
        several = sub(a, "-p", "v100,p100")
        excl = sub(a, "-x", "v100-1")
        ids = [plain, later, with_qos, pinned, several, excl]
        cfg = config(tmp_path, [a])
        port = make_port(cfg, env=sub.env)
        before = jobs(port, ids)
        res = run_cycle(port, cfg)
        assert res.exit_code == 0, res.to_dict()
        now = jobs(port, ids)
        for j in (plain, later, with_qos):
            assert now[j].partition in ("v100", "p100", "k80"), (j, now[j].partition)
        assert now[with_qos].qos == qos  # the user's QOS is never replaced
        for j in (pinned, several, excl):  # where they asked to run: untouched
            assert (now[j].partition, now[j].req_nodes, now[j].exc_nodes) == (
                before[j].partition, before[j].req_nodes, before[j].exc_nodes), j
            assert not [r for r in res.results if r.action.job == j and r.action.kind != "set_site_factor"]
        # the user moves one job and renices another after the controller
        other = next(p for p in ("v100", "p100", "k80") if p != now[plain].partition)
        _run(["scontrol", "update", f"JobId={plain}", f"Partition={other}"], full)
        _run(["scontrol", "update", f"JobId={later}", "Nice=50"], full)
        res = run_cycle(port, cfg)
        assert res.exit_code == 0 and any(f"job {plain}: its partition" in w for w in res.warnings)
        assert jobs(port, [plain])[plain].partition == other  # theirs wins, now and later
        assert not [r for r in res.results if r.action.job == plain and r.action.kind == "set_partition"]
        assert jobs(port, [later])[later].nice == 50
        rv = revert(port, cfg)
        assert rv.exit_code == 0, (rv.failed, rv.problems)
        after = jobs(port, ids)
        assert after[plain].partition == other  # revert leaves the user's latest choice
        assert after[later].nice == 50
        for j in (later, with_qos, pinned, several, excl):
            assert after[j].partition == before[j].partition and after[j].qos == before[j].qos, j
        assert not runnable(port, ids)
    finally:
        _run(["scancel", "-A", a], full, check=False)
        _run(["sacctmgr", "-i", "modify", "user", "root", "where", f"account={a}", "set", f"qos-={qos}"], full,
             check=False)
        _run(["sacctmgr", "-i", "modify", "account", a, "set", f"qos-={qos}"], full, check=False)
        _run(["sacctmgr", "-i", "delete", "qos", qos], full, check=False)


def test_outside_the_pilot_nothing_is_touched_and_its_gpus_are_not_handed_out(sub, accounts, tmp_path):
    mine, theirs = accounts
    cfg = config(tmp_path, [mine])
    port = make_port(cfg, env=sub.env)
    # an outsider runs on the four V100s of v100-1; outsiders also wait
    outsider_run = sub(theirs, "--gres=gpu:4", "-w", "v100-1")
    start_now([outsider_run], sub.full_env)
    deadline = time.time() + 60
    while time.time() < deadline and not jobs(port, [outsider_run])[outsider_run].running:
        time.sleep(0.5)
    assert jobs(port, [outsider_run])[outsider_run].running
    waiting = [sub(theirs), sub(theirs, "--gres=gpu:2")]
    ids = [sub(mine) for _ in range(4)] + [sub(mine, "--gres=gpu:2")]
    before = jobs(port, waiting)
    whole = port.snapshot().capacity()
    problem = controller_problem(port, cfg)
    assert problem.gpu_types["v100"] == whole["v100"] - 4  # the outsider's GPUs are not planned
    assert {j.tenant for j in problem.jobs} == {mine}
    res = run_cycle(port, cfg)
    assert res.exit_code == 0, res.to_dict()
    assert {r.action.tenant for r in res.results} == {mine}
    after = jobs(port, waiting)
    for j in waiting:  # not moved, not reordered
        assert (after[j].partition, after[j].site_factor or 0, after[j].nice) == (
            before[j].partition, before[j].site_factor or 0, before[j].nice)
    # no job of the pilot is pushed up: a site factor is only ever lowered
    assert all((j.site_factor or 0) <= 0 for j in jobs(port, ids).values())
    assert revert(port, cfg).exit_code == 0


def test_a_partition_the_rules_close_is_never_a_target(sub, accounts, tb_env, tmp_path):
    a, b = accounts
    cfg = config(tmp_path, [a])
    port = make_port(cfg, env=sub.env)
    full = sub.full_env
    try:  # only b may use the k80 partition; p100's MaxTime is below the jobs' limit
        _run(["scontrol", "update", "PartitionName=k80", f"AllowAccounts={b}"], full)
        _run(["scontrol", "update", "PartitionName=p100", "MaxTime=30"], full)
        ids = [sub(a, "-t", "120", comment="fair:class=a3c") for _ in range(6)]
        res = run_cycle(port, cfg)
        assert res.exit_code == 0, res.to_dict()
        parts = {j.partition for j in jobs(port, ids).values()}
        assert parts <= {"gpu", "v100"}, parts
        assert not runnable(port, ids)
        assert revert(port, cfg).exit_code == 0
    finally:
        _run(["scontrol", "update", "PartitionName=k80", "AllowAccounts=ALL"], full, check=False)
        _run(["scontrol", "update", "PartitionName=p100", "MaxTime=UNLIMITED"], full, check=False)


def test_revert_after_a_0_1_controller_strands_no_job(sub, accounts, tmp_path):
    """The reported failure: 0.1 made fair_<account> the default QOS, jobs submitted meanwhile
    carried it, and its revert deleted it under them (InvalidQOS for ever). Now revert moves every
    job off it, restores the defaults, then deletes it; every job then runs."""
    a, _ = accounts
    full = sub.full_env
    qos = f"fair_{a}"
    _run(["sacctmgr", "-i", "add", "qos", qos, "set", "GrpTRES=gres/gpu:v100=2"], full)
    _run(["sacctmgr", "-i", "modify", "account", a, "set", f"qos+={qos}", f"defaultqos={qos}"], full)
    _run(["sacctmgr", "-i", "modify", "user", "root", "where", f"account={a}", "set", f"qos+={qos}",
          f"defaultqos={qos}"], full)
    time.sleep(3)
    ids = [sub(a) for _ in range(4)]
    cfg = config(tmp_path, [a])
    port = make_port(cfg, env=sub.env)
    assert {j.qos for j in jobs(port, ids).values()} == {qos}
    state = tmp_path / "state"
    with StateStore.in_dir(state) as store:  # what 0.1 recorded about its QOS
        from slurm_fair.controller.state.originals import ManagedQos
        store.record_qos(ManagedQos(qos, a, False, False, "normal", {}), 1.0)
    res = revert(port, cfg)
    assert res.exit_code == 0, ([(s["kind"], s["error"]) for s in res.failed], res.problems)
    assert {j.qos for j in jobs(port, ids).values()} == {"normal"}
    assert qos not in {q.name for q in port.qos()}
    assert {x.name: x.default_qos for x in port.accounts()}[a] == "normal"
    assert not runnable(port, ids)
    start_now(ids, full)
    deadline = time.time() + 90
    while time.time() < deadline and not all(j.running for j in jobs(port, ids).values()):
        time.sleep(1)
    assert all(j.running for j in jobs(port, ids).values()), {j.job_id: j.reason for j in jobs(port, ids).values()}


def test_a_signal_mid_revert_leaves_what_the_next_revert_completes(sub, accounts, tmp_path):
    a, b = accounts
    cfg = config(tmp_path, accounts)
    port = make_port(cfg, env=sub.env)
    ids = [sub((a, b)[i % 2], comment=("fair:class=resnet-50-bs32", "fair:class=a3c")[i % 2]) for i in range(8)]
    before = {j: x.partition for j, x in jobs(port, ids).items()}
    assert run_cycle(port, cfg).exit_code == 0
    moved = [j for j, x in jobs(port, ids).items() if x.partition != before[j]]
    assert moved
    calls = []

    def stop() -> bool:  # SIGTERM right after the first write
        calls.append(1)
        return len(calls) > 1

    first = revert(port, cfg, stop=stop)
    assert first.exit_code == 1 and any("interrupted" in s["error"] for s in first.steps)
    second = revert(port, cfg)
    assert second.exit_code == 0, (second.failed, second.problems)
    assert {j: x.partition for j, x in jobs(port, ids).items()} == before
    with StateStore.in_dir(tmp_path / "state") as store:
        assert store.owned() == {}


def test_kill_9_then_failsafe_fails_open(sub, accounts, tmp_path):
    """The loop is killed -9 mid-flight; past fail_open_after_s the failsafe gives back every
    steering, so no job waits for a GPU type while another type it may use sits idle."""
    a, _ = accounts
    cfg_path = tmp_path / "slurm-fair.toml"
    cfg_path.write_text(
        f'[controller]\nstate_dir = "{tmp_path / "state"}"\naudit_log = "{tmp_path / "audit.jsonl"}"\n'
        f'manage_accounts = ["{a}"]\npin_gres_type = false\ninterval_s = 1\nfail_open_after_s = 60\n'
        f'[slurm]\ncommand_timeout_s = 15\nbackend = "{_BACKEND["name"]}"\n')
    ids = [sub(a, comment="fair:class=resnet-50-bs32") for _ in range(6)]
    env = {**sub.full_env, "SLURM_FAIR_CONFIG": str(cfg_path)}
    exe = Path(sys.executable).with_name("slurm-fair")
    loop = subprocess.Popen([str(exe), "run", "--loop"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 90
        port = make_port(validate({"slurm": {"backend": _BACKEND["name"]}}, "x"), env=sub.env)
        while time.time() < deadline and not any(j.partition != "gpu" for j in jobs(port, ids).values()):
            time.sleep(0.5)
        time.sleep(1.5)
    finally:
        os.killpg(loop.pid, signal.SIGKILL)
        loop.wait(30)
    steered = [j for j, x in jobs(port, ids).items() if x.partition != "gpu"]
    assert steered
    from slurm_fair.config import load
    cfg = load(str(cfg_path))
    quiet = subprocess.run([str(exe), "failsafe"], env=env, capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 0 and "nothing to do" in quiet.stdout, quiet.stdout + quiet.stderr
    res = failsafe(port, cfg, clock=lambda: time.time() + 120)
    assert res.exit_code == 0 and res.lifted is not None, res.to_dict()
    assert all(x.partition == "gpu" for x in jobs(port, ids).values())
    assert not runnable(port, ids)
    again = subprocess.run([str(exe), "revert"], env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
