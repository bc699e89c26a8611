"""Issue 40's chaos tests on the real testbeds (22.05 and 24.11): a user's later move always
wins, and an empty plan field gives the controller's value back.

* a job the submit plugin routed and its user then moved (to one partition, to several, out of
  the pilot) is never steered again, and ``revert`` leaves it where they put it;
* a steered job whose user then excludes every node of its type goes back to the partition it
  asked for, and runs;
* ``order = "none"`` gives back every push an earlier cycle made.

Each of these failed on the code before controller/asked.py (the plugin's record beat the
user's move; a plan field left empty left the controller's value in place).
"""

from __future__ import annotations

import time

import pytest

from slurm_fair.controller.apply import apply
from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.diff import field_action
from slurm_fair.controller.revert import revert
from slurm_fair.controller.state import StateStore
from slurm_fair.slurm import make_port

from .test_pilot_real import config, jobs, runnable
from .test_testbed import _run, accounts, start_now, sub, tb_env  # noqa: F401 (fixtures)
from .test_testbed_mechanisms import running, wait_for

pytestmark = pytest.mark.slurm

RESNET = "fair:class=resnet-50-bs32"


def test_a_routed_job_its_user_moves_stays_where_they_put_it(sub, accounts, tb_env, tmp_path):
    tb, _, full = tb_env
    a, _ = accounts
    # the plan the testbed's submit plugin reads (it routes only where every type of the asked
    # partition is the pilot's); the pilot then narrows to every partition but k80, so a job
    # moved there has left it
    first = config(tmp_path, [a], plan_file=str(tb.layout.plan_file))
    cfg = config(tmp_path, [a], plan_file=str(tb.layout.plan_file), manage_partitions=["gpu", "v100", "p100"])
    port = make_port(cfg, env=sub.env)
    try:
        assert run_cycle(port, first).exit_code == 0
        one, several, out, kept = (sub(a, comment=RESNET) for _ in range(4))
        ids = [one, several, out, kept]
        routed = jobs(port, ids)
        for j in ids:  # the plugin chose the partition and recorded what it asked and gave
            assert routed[j].partition != "gpu" and "slurm-fair:routed=" in routed[j].admin_comment, routed[j]
        # its user moves each job somewhere the plan would not send it
        moves = {one: "p100", several: "p100,k80", out: "k80"}
        for j, p in moves.items():
            _run(["scontrol", "update", f"JobId={j}", f"Partition={p}"], full)
        for _ in range(2):
            res = run_cycle(port, cfg)
            assert res.exit_code == 0, res.to_dict()
            now = jobs(port, ids)
            for j, p in moves.items():
                assert sorted(now[j].partition.split(",")) == sorted(p.split(",")), (j, now[j].partition)
                assert not [r for r in res.results if r.action.job == j and r.action.kind == "set_partition"]
            # moved out of the pilot: not managed any more, nothing of it written
            assert not [r for r in res.results if r.action.job == out]
            assert out not in res.plan.jobs
        rv = revert(port, cfg)
        assert rv.exit_code == 0, (rv.failed, rv.problems)
        after = jobs(port, ids)
        for j, p in moves.items():  # revert leaves the user's latest choice
            assert sorted(after[j].partition.split(",")) == sorted(p.split(",")), (j, after[j].partition)
        assert after[kept].partition == "gpu"  # the plugin's own routing is given back
        assert not runnable(port, ids)
    finally:
        tb.layout.plan_file.unlink(missing_ok=True)


def test_a_steered_job_whose_user_excludes_its_types_nodes_goes_back_and_runs(sub, accounts, tb_env, tmp_path):
    """Steered by a cycle, or routed by the submit plugin: either is slurm-fair's partition, and
    an exclusion of every node of its type gives it back."""
    tb, _, _ = tb_env
    a, _ = accounts
    cfg = config(tmp_path, [a], plan_file=str(tb.layout.plan_file))
    port = make_port(cfg, env=sub.env)
    try:
        ids = [sub(a, comment=RESNET) for _ in range(3)]  # before any plan: in gpu
        res = run_cycle(port, cfg)  # steers them, and writes the plan the plugin reads
        assert res.exit_code == 0, res.to_dict()
        routed = sub(a, comment=RESNET)
        ids.append(routed)
        now = jobs(port, ids)
        steered = [j for j in ids[:3] if now[j].partition != "gpu"]
        assert steered and "slurm-fair:routed=" in now[routed].admin_comment, now
        chosen = {steered[0]: now[steered[0]].partition, routed: now[routed].partition}
        excluded = {}
        for job, k in chosen.items():  # its user excludes every node of the type it was sent to
            excluded[job] = sorted(n.name for n in port.nodes() if set(k.split(",")) & set(n.partitions))
            _run(["scontrol", "update", f"JobId={job}", f"ExcNodeList={','.join(excluded[job])}"], sub.full_env)
            assert sorted(jobs(port, [job])[job].exc_nodes) == excluded[job]
        res = run_cycle(port, cfg)
        assert res.exit_code == 0, res.to_dict()
        for job in chosen:
            back = jobs(port, [job])[job]
            assert back.partition == "gpu" and sorted(back.exc_nodes) == excluded[job], back
            assert [(r.action.kind, r.action.params["give_back"]) for r in res.results if r.action.job == job
                    and r.action.kind == "set_partition"] == [("set_partition", True)]
        # they can run: on a type their user left them
        start_now(list(chosen), sub.full_env)
        for job, k in chosen.items():
            ran = wait_for(port, job, lambda j: j.running, timeout=60)
            assert ran.gpu_type_running not in k.split(",") and not set(ran.nodes) & set(excluded[job]), ran
        rv = revert(port, cfg)
        assert rv.exit_code == 0, (rv.failed, rv.problems)
        assert not runnable(port, ids)
    finally:
        tb.layout.plan_file.unlink(missing_ok=True)


def test_order_none_gives_back_every_push(sub, accounts, tmp_path):
    a, _ = accounts
    port = make_port(config(tmp_path, [a]), env=sub.env)
    # the k80 node is busy (an 8-GPU job of the tenant's, not opted in to time-sharing): its
    # 8-GPU gang waits, planned, eligible, so sprio lists it and its site factor can be read
    blocker = running(sub, a, "-p", "k80", "--gres=gpu:8")
    wait_for(port, blocker, lambda j: j.running, timeout=60)
    gang = running(sub, a, "-p", "k80", "--gres=gpu:8", comment=RESNET)
    shown = wait_for(port, gang, lambda j: j.pending and j.site_factor is not None, timeout=60)
    # a push as a live cycle with order = "site_factor" makes it: through the controller's own
    # write path, recorded in its state store first
    cfg = config(tmp_path, [a], order="none")
    with StateStore.in_dir(tmp_path / "state") as store:
        snap = port.snapshot()
        push = field_action(shown, "site_factor", str((shown.site_factor or 0) - 64), {})
        (done,) = apply([push], port, snap, store, "seed", time.time())
        assert done.applied, done
    assert wait_for(port, gang, lambda j: j.site_factor is not None).site_factor == (shown.site_factor or 0) - 64
    res = run_cycle(port, cfg)
    assert res.exit_code == 0, res.to_dict()
    assert gang in res.plan.jobs and res.plan.jobs[gang].site_factor is None  # planned, no order
    assert [(r.action.kind, r.action.params["give_back"], r.applied) for r in res.results
            if r.action.job == gang] == [("set_site_factor", True, True)]
    assert wait_for(port, gang, lambda j: j.site_factor is not None).site_factor == (shown.site_factor or 0)
    with StateStore.in_dir(tmp_path / "state") as store:
        assert (gang, "site_factor") not in store.owned()
    # the next cycle writes nothing
    res = run_cycle(port, cfg)
    assert res.exit_code == 0 and not [r for r in res.results if r.action.job == gang], res.to_dict()


def test_the_submit_plugin_leaves_what_it_cannot_judge_to_the_controller(sub, accounts, tb_env, tmp_path):
    """The plugin reads memory and CPUs per GPU from the job description slurmctld hands it
    (which the plan's node shapes cannot check) and leaves such jobs to the controller, as it
    leaves a held job and one with a dependency (the user's choice: the rule the controller
    applies, steer.user_choice)."""
    tb, _, _ = tb_env
    a, _ = accounts
    cfg = config(tmp_path, [a], plan_file=str(tb.layout.plan_file))
    port = make_port(cfg, env=sub.env)
    try:
        assert run_cycle(port, cfg).exit_code == 0
        control = sub(a, comment=RESNET)
        mem, cpus = sub(a, "--mem-per-gpu=1000", comment=RESNET), sub(a, "--cpus-per-gpu=2", comment=RESNET)
        held, dep = sub(a, "-H", comment=RESNET), sub(a, f"--dependency=afterok:{control}", comment=RESNET)
        ids = [control, mem, cpus, held, dep]
        now = jobs(port, ids)
        assert now[control].partition != "gpu" and now[control].admin_comment  # the plugin steers
        for j in (mem, cpus, held, dep):
            assert (now[j].partition, now[j].admin_comment) == ("gpu", ""), now[j]
        res = run_cycle(port, cfg)
        assert res.exit_code == 0, res.to_dict()
        after = jobs(port, ids)
        for j in (held, dep):  # their owner's: left where they asked
            assert after[j].partition == "gpu" and not [r for r in res.results if r.action.job == j], j
        rv = revert(port, cfg)
        assert rv.exit_code == 0, (rv.failed, rv.problems)
        assert all(x.partition == "gpu" for x in jobs(port, ids).values())
        assert not runnable(port, ids)
    finally:
        tb.layout.plan_file.unlink(missing_ok=True)
