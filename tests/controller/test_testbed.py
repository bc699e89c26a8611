"""The controller against the real local Slurm (marker ``slurm``).

Every test scopes the controller to the jobs it submitted (other tests share the cluster), uses
a private state_dir/audit log, and cancels its jobs in teardown (tests may; the controller never
does).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from slurm_fair.config import validate
from slurm_fair.controller.audit import AuditLog
from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.revert import revert
from slurm_fair.controller.state import StateStore
from slurm_fair.errors import LockHeld
from slurm_fair.model import Snapshot
from slurm_fair.slurm import make_port

pytestmark = pytest.mark.slurm


class Scoped:
    """A port that shows the controller only the given jobs (the cluster is shared)."""

    def __init__(self, port, job_ids, after_snapshot=None):
        self.port, self.ids, self.after = port, set(job_ids), after_snapshot

    def snapshot(self) -> Snapshot:
        s = self.port.snapshot()
        s = Snapshot(s.taken_at, s.nodes, tuple(j for j in s.jobs if j.job_id in self.ids),
                     s.accounts, s.qos, s.cluster)
        if self.after:
            self.after()
        return s

    def __getattr__(self, name):
        return getattr(self.port, name)


def cfg(tmp_path, **slurm):
    return validate({
        "controller": {"state_dir": str(tmp_path / "state"), "audit_log": str(tmp_path / "audit.jsonl")},
        "slurm": {"command_timeout_s": 10, **slurm},
    }, str(tmp_path / "slurm-fair.toml"))


@pytest.fixture
def sub(slurm_env):
    """Submit held GPU jobs; cancel them all afterwards."""
    tb, env = slurm_env
    full = {**os.environ, **env}
    ids: list[str] = []

    def submit(account: str, gres: str = "--gres=gpu:1", comment: str = "") -> str:
        argv = ["sbatch", "--parsable", "--hold", "-A", account, "-N1", gres, "-o", "/dev/null",
                "--wrap", "sleep 600"]
        if comment:
            argv.insert(2, f"--comment={comment}")
        out = subprocess.run(argv, env=full, capture_output=True, text=True, timeout=30, check=True)
        ids.append(out.stdout.strip().split(";")[0])
        return ids[-1]

    submit.env = env  # type: ignore[attr-defined]
    submit.full_env = full  # type: ignore[attr-defined]
    submit.ids = ids  # type: ignore[attr-defined]
    yield submit
    if ids:
        subprocess.run(["scancel", *ids], env=full, timeout=30, check=False)


def view(port, ids):
    s = port.snapshot()
    jobs = {j.job_id: (j.gpu_request.gpu_type, j.gpu_request.total, j.qos, j.nice) for j in s.jobs if j.job_id in ids}
    accounts = {a.name: (tuple(sorted(a.qos)), a.default_qos) for a in s.accounts}
    qos = {q.name: dict(q.grp_tres) for q in s.qos}
    return jobs, accounts, qos


def test_type_limit_noop_and_revert_on_real_slurm(sub, tmp_path):
    config = cfg(tmp_path)
    real = make_port(config, env=sub.env)
    ids = [sub("physics"), sub("physics", "--gres=gpu:2"), sub("biology", comment="fair:class=resnet-50-bs32")]
    port = Scoped(real, ids)
    before = view(real, ids)
    res = run_cycle(port, config)
    assert (res.status, res.exit_code) == ("ok", 0), res.to_dict()
    jobs, accounts, qos = view(real, ids)
    assert all(t in ("v100", "p100", "k80") for t, *_ in jobs.values()), jobs
    assert [g for _, g, *_ in jobs.values()] == [1, 2, 1]  # counts kept
    for tenant in ("physics", "biology"):
        limits = qos[f"fair_{tenant}"]
        assert {"gres/gpu:v100", "gres/gpu:p100", "gres/gpu:k80"} <= set(limits)
        assert accounts[tenant][1] == f"fair_{tenant}"
    again = run_cycle(port, config)
    assert again.exit_code == 0 and again.results == [], [r.to_dict() for r in again.results]
    rv = revert(port, config)
    assert rv.exit_code == 0, rv.failed
    assert view(real, ids) == before


def test_job_ending_mid_cycle_is_harmless(sub, tmp_path):
    config = cfg(tmp_path)
    ids = [sub("chemistry"), sub("chemistry")]

    def cancel_first():
        subprocess.run(["scancel", ids[0]], env=sub.full_env, timeout=30, check=True)
        time.sleep(1)

    port = Scoped(make_port(config, env=sub.env), ids, after_snapshot=cancel_first)
    res = run_cycle(port, config)
    assert res.exit_code == 0, res.to_dict()
    gone = [r for r in res.results if r.action.job == ids[0]]
    assert gone and all(not r.applied for r in gone) and gone[0].skipped
    assert all(r.applied for r in res.results if r.action.job == ids[1])
    revert(Scoped(make_port(config, env=sub.env), ids), config)


def _slurmctld_pid(tb) -> int:
    for d in tb.status().daemons:
        if d.name == "slurmctld" and d.running and d.pid:
            return d.pid
    pytest.skip("slurmctld pid unknown")


def test_slurmctld_stopped_mid_cycle_gives_clean_error(sub, slurm_env, tmp_path):
    tb, _ = slurm_env
    config = cfg(tmp_path, command_timeout_s=3, retries=0)
    ids = [sub("biology"), sub("biology")]
    before = view(make_port(config, env=sub.env), ids)
    pid = _slurmctld_pid(tb)
    paused = []

    def pause():
        os.kill(pid, signal.SIGSTOP)
        paused.append(pid)

    try:
        res = run_cycle(Scoped(make_port(config, env=sub.env), ids, after_snapshot=pause), config)
    finally:
        for p in paused:
            os.kill(p, signal.SIGCONT)
    assert res.exit_code == 1 and res.status == "partial", res.to_dict()
    # job writes go to slurmctld: none of them was applied, and the result says so
    assert not [r for r in res.results if r.action.job and r.applied]
    assert any("not attempted" in r.error for r in res.results)
    entries = list(AuditLog(tmp_path / "audit.jsonl").entries())
    assert len(entries) == len(res.results)
    deadline = time.time() + 60
    while time.time() < deadline and not tb.is_healthy():
        time.sleep(1)
    assert tb.is_healthy()
    # the next cycle completes, and revert gets back to where we started
    port = Scoped(make_port(cfg(tmp_path), env=sub.env), ids)
    assert run_cycle(port, cfg(tmp_path)).exit_code == 0
    assert revert(port, cfg(tmp_path)).exit_code == 0
    assert view(make_port(config, env=sub.env), ids)[0] == before[0]


def _cycle_in_child(tmp: str, env: dict, ids: list, q) -> None:
    config = cfg(Path(tmp))
    try:
        res = run_cycle(Scoped(make_port(config, env=env), ids), config)
        q.put(("ran", res.exit_code))
    except LockHeld:
        q.put(("locked", 1))


def test_two_concurrent_controllers_do_not_both_act(sub, tmp_path):
    ids = [sub("physics"), sub("biology")]
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_cycle_in_child, args=(str(tmp_path), sub.env, ids, q)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    outcomes = sorted(q.get(timeout=5) for _ in procs)
    assert ("ran", 0) in outcomes
    with StateStore.in_dir(tmp_path / "state") as store:
        cycles = sorted((c["started_at"], c["finished_at"]) for c in store.cycles() if not c["dry_run"])
    # whoever ran, never at the same time
    for (s1, e1), (s2, _) in zip(cycles, cycles[1:]):
        assert e1 <= s2
    revert(Scoped(make_port(cfg(tmp_path), env=sub.env), ids), cfg(tmp_path))


def test_hostile_comment_changes_nothing_it_should_not(sub, tmp_path):
    marker = tmp_path / "pwned"
    config = cfg(tmp_path)
    evil = sub("chemistry", comment=f'fair:class=";scancel 1" fair:preemptible fair:tput=nan $(touch {marker})')
    ok = sub("chemistry")
    port = Scoped(make_port(config, env=sub.env), [evil, ok])
    res = run_cycle(port, config)
    assert res.exit_code == 0, res.to_dict()
    assert not marker.exists()
    kinds = {r.action.kind for r in res.results if r.action.job == evil}
    assert kinds <= {"set_job_qos", "set_gpu_type", "set_nice"}
    assert res.estimates[evil].source == "flat"
    jobs, _, _ = view(make_port(config, env=sub.env), [evil, ok])
    assert set(jobs) == {evil, ok}
    revert(port, config)
