"""The controller against the real local Slurm 22.05 (marker ``slurm``).

The testbed is shared (other tests, benchmarks and the demo run on it), so every test works in
Slurm accounts of its own, created for the test and deleted afterwards, and runs the controller
with ``[controller] manage_accounts = [...]`` set to them: the real scoping feature an
administrator uses to pilot slurm-fair on some accounts. The controller therefore sees, plans
and touches only the test's jobs. Each test has a private state_dir/audit log and cancels its
jobs in teardown (tests may; the controller never does).

Test jobs wait with a begin time two hours ahead (``--begin``), not held: a held job is its
owner's to release and the controller leaves it alone; ``start_now`` lets them start.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import secrets
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
from slurm_fair.controller.steer import partition_types, type_partitions
from slurm_fair.errors import LockHeld
from slurm_fair.slurm import make_port

pytestmark = pytest.mark.slurm

TYPES = ("v100", "p100", "k80")


class Hooked:
    """A port that runs ``after_snapshot`` right after reading Slurm: fault injection between
    the controller's read and its writes (a test device, not a feature)."""

    def __init__(self, port, after_snapshot):
        self.port, self.after = port, after_snapshot

    def snapshot(self):
        s = self.port.snapshot()
        self.after()
        return s

    def __getattr__(self, name):
        return getattr(self.port, name)


def _run(argv, env, check=True, timeout=60):
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, check=check)


@pytest.fixture
def tb_env(slurm_env):
    tb, env = slurm_env
    return tb, env, {**os.environ, **env}


@pytest.fixture
def accounts(tb_env):
    """Two fresh Slurm accounts (root is a member of both), deleted with their jobs and any
    ``fair_`` QOS left behind after the test."""
    _, _, full = tb_env
    tag = secrets.token_hex(3)
    names = [f"sft{tag}a", f"sft{tag}b"]
    for a in names:
        _run(["sacctmgr", "-i", "add", "account", a, "parent=root", "fairshare=1"], full)
        _run(["sacctmgr", "-i", "add", "user", "root", f"account={a}"], full)
    # slurmctld learns new associations from slurmdbd asynchronously
    deadline = time.time() + 30
    while time.time() < deadline:
        out = _run(["scontrol", "show", "assoc_mgr", "flags=assoc", f"accounts={names[-1]}"], full, check=False)
        if "UserName=root" in out.stdout:
            break
        time.sleep(0.5)
    yield names
    for a in names:
        _run(["scancel", "-A", a], full, check=False)
    deadline = time.time() + 60
    while time.time() < deadline:
        q = _run(["squeue", "-h", "-A", ",".join(names), "-o", "%i"], full, check=False)
        if not q.stdout.strip():
            break
        time.sleep(1)
    # slurmdbd refuses to delete what ended jobs still reference while slurmctld keeps them
    # (MinJobAge): retry until the accounts and their QOS are gone
    deadline = time.time() + 120
    while time.time() < deadline:
        for a in names:
            _run(["sacctmgr", "-i", "delete", "user", "root", f"account={a}"], full, check=False)
            _run(["sacctmgr", "-i", "delete", "account", a], full, check=False)
            _run(["sacctmgr", "-i", "delete", "qos", f"fair_{a}"], full, check=False)
        left = _run(["sacctmgr", "-n", "-P", "show", "assoc", "format=Account"], full, check=False).stdout.split()
        left += _run(["sacctmgr", "-n", "-P", "show", "qos", "format=Name"], full, check=False).stdout.split()
        if not {*names, *(f"fair_{a}" for a in names)} & set(left):
            break
        time.sleep(3)


def cfg(tmp_path, accounts, **slurm):
    return validate({
        "controller": {"state_dir": str(tmp_path / "state"), "audit_log": str(tmp_path / "audit.jsonl"),
                       "manage_accounts": list(accounts)},
        "slurm": {"command_timeout_s": 10, **slurm},
    }, str(tmp_path / "slurm-fair.toml"))


@pytest.fixture
def sub(tb_env):
    """``sub(account, *sbatch_args, comment="")``: a GPU job that waits for its begin time two
    hours ahead (``--gres=gpu:1`` unless a GPU option is given); ``sub.ids`` lists them."""
    _, env, full = tb_env
    ids: list[str] = []

    def submit(account: str, *args: str, comment: str = "") -> str:
        gpu = [a for a in args if a.startswith(("--gres", "--gpus"))] or ["--gres=gpu:1"]
        rest = [a for a in args if not a.startswith(("--gres", "--gpus"))]
        argv = ["sbatch", "--parsable", "--begin=now+7200", "-A", account, "-N1", *gpu, *rest, "-o", "/dev/null",
                "--wrap", "sleep 600"]
        if comment:
            argv.insert(2, f"--comment={comment}")
        ids.append(_run(argv, full, timeout=30).stdout.strip().split(";")[0])
        return ids[-1]

    submit.env = env  # type: ignore[attr-defined]
    submit.full_env = full  # type: ignore[attr-defined]
    submit.ids = ids  # type: ignore[attr-defined]
    return submit


def start_now(ids, env) -> None:
    """Let jobs of ``sub`` start (their begin time now)."""
    _run(["scontrol", "update", f"JobId={','.join(ids)}", "StartTime=now"], env)


def jobs_view(port, ids):
    """What "as if slurm-fair never ran" means for a job: partition, GPU request, node list,
    nice, QOS, site factor. (Not the pending reason: Slurm sets it asynchronously.)"""
    return {j.job_id: (j.partition, j.gpu_request.raw, j.gpu_request.gpu_type, j.req_nodes, j.nice, j.qos,
                       j.site_factor or 0)
            for j in port.jobs() if j.job_id in ids}


def accounts_view(port, names):
    acc = {a.name: (tuple(sorted(a.qos)), a.default_qos) for a in port.accounts() if a.name in names}
    qos = {q.name: dict(q.grp_tres) for q in port.qos() if q.name in {f"fair_{a}" for a in names}}
    return acc, qos


def test_steer_noop_revert_and_run_on_real_slurm(sub, accounts, tmp_path, slurm_version):
    """The default mechanism of each version: partitions on 22.05 (a typed request cannot be
    undone there), the typed request itself on 24.11 (``pin_gres_type = "auto"``). No QOS is
    made or changed, no association touched."""
    a, b = accounts
    config = cfg(tmp_path, accounts)
    port = make_port(config, env=sub.env)
    pinned = port.can_retype_gpu()
    assert pinned is (slurm_version != "22.05")
    free = [sub(a), sub(a, "--gres=gpu:2"), sub(b, "--gpus=1", comment="fair:class=resnet-50-bs32")]
    typed = sub(b, "--gres=gpu:k80:1")          # the user chose the type
    chose = sub(a, "-p", "p100")                # the user chose a one-type partition
    ids = [*free, typed, chose]
    before_jobs, before_acc = jobs_view(port, ids), accounts_view(port, accounts)
    qos_before = sorted(q.name for q in port.qos())
    assert set(before_jobs) == set(ids) and not before_acc[1]
    nodes = port.nodes()
    tp, ptypes = type_partitions(nodes), partition_types(nodes)
    assert {tp[k] for k in TYPES} and all(ptypes[tp[k]] == {k} for k in TYPES)

    res = run_cycle(port, config)
    assert (res.status, res.exit_code) == ("ok", 0), res.to_dict()
    kinds = {r.action.kind for r in res.results}
    assert kinds & {"set_gpu_type" if pinned else "set_partition"}
    assert kinds <= {"set_gpu_type", "set_partition", "set_site_factor", "set_nodes"}, kinds
    assert ("set_partition" if pinned else "set_gpu_type") not in kinds
    assert {r.action.tenant for r in res.results} <= set(accounts)  # nothing outside the scope
    now = {j.job_id: j for j in port.jobs() if j.job_id in ids}
    for j in free:
        planned = res.plan.jobs[j].planned_type
        assert planned in TYPES
        if pinned:  # typed: the request names the planned type, count and form kept
            assert now[j].partition == before_jobs[j][0] and now[j].gpu_request.gpu_type == planned
            assert now[j].gpu_request.raw.split("=", 1)[0] == before_jobs[j][1].split("=", 1)[0]
        else:  # steered: into the partition of its planned type, request still untyped
            assert now[j].partition == tp[planned], (j, planned, now[j].partition)
            assert now[j].gpu_request.raw == before_jobs[j][1] and now[j].gpu_request.gpu_type is None
        assert now[j].qos == before_jobs[j][5]  # the job's own QOS, never replaced
    assert [now[j].gpu_request.total for j in free] == [1, 2, 1]
    # fixed types are kept: neither the typed request nor the user's partition moves
    assert (now[typed].partition, now[typed].gpu_request.gpu_type) == (before_jobs[typed][0], "k80")
    assert now[chose].partition == "p100" and res.plan.jobs[chose].planned_type == "p100"
    assert res.plan.jobs[typed].planned_type == "k80"
    # nothing in accounting: no QOS made, no association changed (read back from slurmdbd)
    assert sorted(q.name for q in port.qos()) == qos_before
    assert accounts_view(port, accounts) == before_acc

    again = run_cycle(port, config)
    assert again.exit_code == 0 and again.results == [], [r.to_dict() for r in again.results]

    rv = revert(port, config)
    assert rv.exit_code == 0, (rv.failed, rv.problems)
    after = jobs_view(port, ids)
    assert after == before_jobs, [(j, before_jobs[j], after[j]) for j in ids if after[j] != before_jobs[j]]
    with StateStore.in_dir(tmp_path / "state") as store:
        assert store.owned() == {} and store.managed_qos() == {}

    # steered again, started: each job runs on the GPU type it was steered to
    res = run_cycle(port, config)
    assert res.exit_code == 0, res.to_dict()
    planned = {j: res.plan.jobs[j].planned_type for j in ids}
    start_now(ids, sub.full_env)
    got: dict[str, str | None] = {}
    deadline = time.time() + 180
    while time.time() < deadline and len(got) < len(ids):
        for j in port.jobs():
            if j.job_id in ids and j.running:
                got[j.job_id] = j.gpu_type_running
        time.sleep(1)
    assert got == planned, (got, planned)


def test_job_ending_mid_cycle_is_harmless(sub, accounts, tmp_path):
    a, _ = accounts
    config = cfg(tmp_path, accounts)
    ids = [sub(a), sub(a)]

    def cancel_first():
        _run(["scancel", ids[0]], sub.full_env)
        time.sleep(1)

    port = make_port(config, env=sub.env)
    res = run_cycle(Hooked(port, cancel_first), config)
    assert res.exit_code == 0, res.to_dict()
    gone = [r for r in res.results if r.action.job == ids[0]]
    assert gone and all(not r.applied for r in gone) and gone[0].skipped
    assert all(r.applied for r in res.results if r.action.job == ids[1])
    assert revert(port, config).exit_code == 0


def _slurmctld_pid(tb) -> int:
    for d in tb.status().daemons:
        if d.name == "slurmctld" and d.running and d.pid:
            return d.pid
    pytest.skip("slurmctld pid unknown")


def test_slurmctld_stopped_mid_cycle_gives_clean_error(sub, accounts, tb_env, tmp_path, monkeypatch):
    tb, _, _ = tb_env
    # writes in doubt for 20 s, not the minute of the default (revert waits for them; the late
    # write seen here lands within about a second of slurmctld resuming)
    monkeypatch.setattr("slurm_fair.controller.apply.IN_DOUBT_S", 20.0)
    a, b = accounts
    config = cfg(tmp_path, accounts, command_timeout_s=3, retries=0)
    ids = [sub(a), sub(b)]
    port = make_port(config, env=sub.env)
    before = jobs_view(port, ids)
    pid = _slurmctld_pid(tb)
    paused = []

    def pause():
        os.kill(pid, signal.SIGSTOP)
        paused.append(pid)

    try:
        res = run_cycle(Hooked(port, pause), config)
    finally:
        for p in paused:
            os.kill(p, signal.SIGCONT)
    assert res.exit_code == 1 and res.status == "partial", res.to_dict()
    # job writes go to slurmctld: none was applied, and the result says why
    assert not [r for r in res.results if r.action.job and r.applied]
    assert res.results and all(r.error for r in res.results)  # each says why (timeout, not attempted)
    entries = [e for e in AuditLog(tmp_path / "audit.jsonl").entries() if not e.get("intent")]
    assert len(entries) == len(res.results)
    with StateStore.in_dir(tmp_path / "state") as store:
        assert store.last_plan() is None  # a partial cycle is not a good plan
    assert not (tmp_path / "state" / "plan.json").exists()
    deadline = time.time() + 90
    while time.time() < deadline and not tb.is_healthy():
        time.sleep(1)
    assert tb.is_healthy()
    # a write that timed out may be carried out once slurmctld resumes, even after later
    # writes (seen here on 22.05): it is in doubt in the store, so the next cycle and revert
    # know it is slurm-fair's when it lands
    with StateStore.in_dir(tmp_path / "state") as store:
        held = {j for (j, _), r in store.owned().items() if r.doubt is not None}
    changed = {j for j, v in jobs_view(port, ids).items() if v != before[j]}
    assert changed <= held, (changed, held)
    # the next cycle completes, and revert (which waits for writes in doubt) gets back to
    # where we started
    ok = cfg(tmp_path, accounts)
    assert run_cycle(make_port(ok, env=sub.env), ok).exit_code == 0
    assert revert(make_port(ok, env=sub.env), ok).exit_code == 0
    assert jobs_view(port, ids) == before


def _cycle_in_child(tmp: str, accounts: list, env: dict, q) -> None:
    config = cfg(Path(tmp), accounts)
    try:
        res = run_cycle(make_port(config, env=env), config)
        q.put(("ran", res.exit_code))
    except LockHeld:
        q.put(("locked", 1))


def test_two_concurrent_controllers_do_not_both_act(sub, accounts, tmp_path):
    a, b = accounts
    ids = [sub(a), sub(b), sub(a, "--gres=gpu:2")]
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_cycle_in_child, args=(str(tmp_path), accounts, sub.env, q)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    outcomes = sorted(q.get(timeout=5) for _ in procs)
    assert ("ran", 0) in outcomes, outcomes
    with StateStore.in_dir(tmp_path / "state") as store:
        cycles = sorted((c["started_at"], c["finished_at"], c["applied"]) for c in store.cycles() if not c["dry_run"])
    # whoever ran, never at the same time, and only one of them had anything to apply
    for (_s1, e1, _), (s2, _, _) in zip(cycles, cycles[1:]):
        assert e1 <= s2
    assert sum(1 for c in cycles if c[2]) == 1, cycles
    entries = [e for e in AuditLog(tmp_path / "audit.jsonl").entries() if e.get("applied")]
    assert len({e["cycle"] for e in entries}) == 1
    config = cfg(tmp_path, accounts)
    assert revert(make_port(config, env=sub.env), config).exit_code == 0
    assert len(ids) == 3


def test_hostile_comment_changes_nothing_it_should_not(sub, accounts, tmp_path):
    a, _ = accounts
    marker = tmp_path / "pwned"
    config = cfg(tmp_path, accounts)
    comment = f'fair:class=";scancel 1" fair:preemptible fair:tput=nan fair:auto $(touch {marker}) `id` |x'
    evil = sub(a, comment=comment)
    ok = sub(a)
    port = make_port(config, env=sub.env)
    before = jobs_view(port, [evil, ok])
    res = run_cycle(port, config)
    assert res.exit_code == 0, res.to_dict()
    assert not marker.exists()
    kinds = {r.action.kind for r in res.results if r.action.job == evil}
    assert kinds <= {"set_partition", "set_gpu_type", "set_site_factor"}
    # the malformed class tag is ignored: the type priors, or what the shared testbed's own
    # accounting history taught about this user's job name (other tests' jobs)
    assert res.estimates[evil].source in ("prior", "learned")
    jobs = {j.job_id: j for j in port.jobs() if j.job_id in (evil, ok)}
    assert set(jobs) == {evil, ok}
    assert jobs[evil].comment == comment
    if port.can_retype_gpu():  # 24.11: typed by the controller, count kept
        assert jobs[evil].gpu_request.gpu_type == res.plan.jobs[evil].planned_type
        assert jobs[evil].gpu_request.total == 1
    else:
        assert jobs[evil].gpu_request.raw == before[evil][1]
    assert revert(port, config).exit_code == 0
    assert jobs_view(port, [evil, ok]) == before
