"""One contract, two backends: the fake and a real Slurm must behave the same.

Each scenario submits jobs, acts through the port and reads the effect back *through Slurm*
(``squeue``/``sacctmgr`` on the real backend), never from what the adapter believes it did.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from slurm_fair.errors import JobGone, SlurmCommandError

from slurm_harness import Harness, gpu_types_of

#: sbatch GPU options -> (count, type, per, total GPUs)
SYNTAXES = {
    "--gres=gpu:2": (2, None, "node", 2),
    "--gres=gpu:{t}:1": (1, "{t}", "node", 1),
    "--gpus=3": (3, None, "job", 3),
    "--gpus={t}:2": (2, "{t}", "job", 2),
    "--gpus-per-node=2 -N 2": (2, None, "node", 4),
    "--gpus-per-node={t}:1": (1, "{t}", "node", 1),
    "--gpus-per-task=1 -n 2": (1, None, "task", 2),
}


def test_submit_each_syntax_for_several_tenants(cluster: Harness):
    t = gpu_types_of(cluster)[0]
    for tenant in cluster.tenants[:2]:
        for args, (count, gtype, per, total) in SYNTAXES.items():
            job = cluster.job(cluster.submit(tenant, args.format(t=t)))
            r = job.gpu_request
            assert job.account == tenant and job.pending, args
            want_type = gtype.format(t=t) if gtype else None
            assert (r.count, r.gpu_type, r.per, r.total) == (count, want_type, per, total), args
            assert job.is_gpu_job


def test_cpu_only_job_is_not_a_gpu_job(cluster: Harness):
    if not cluster.real:
        pytest.skip("the fake's submit models GPU jobs only")
    job = cluster.job(cluster.submit(cluster.tenants[0], "-n 1"))
    assert job.gpu_request is None and not job.is_gpu_job


@pytest.mark.parametrize("args", ["--gres=gpu:2", "--gpus=3", "--gpus-per-node=1 -N 2", "--gpus-per-task=1 -n 2"])
def test_pin_keeps_count_and_form(cluster: Harness, args):
    t = gpu_types_of(cluster)[0]
    job = cluster.job(cluster.submit(cluster.tenants[0], args))
    original = job.gpu_request
    if original.per == "task" and not cluster.port.can_retype_gpu():
        with pytest.raises(SlurmCommandError, match="per task"):
            cluster.port.set_gpu_type(job, t)
        assert cluster.job(job.job_id).gpu_request == original
        return
    cluster.port.set_gpu_type(job, t)
    r = cluster.job(job.job_id).gpu_request
    assert (r.gpu_type, r.count, r.per, r.total) == (t, original.count, original.per, original.total)
    assert cluster.job(job.job_id).pending


def test_retype_and_restore_follow_the_release_rules(cluster: Harness):
    """Before 23.11 a typed request cannot change: refused up front, job untouched.
    Newer releases (the fake of a 24.05 recording): re-type, un-type and restore work."""
    a, b = gpu_types_of(cluster)[:2]
    job = cluster.job(cluster.submit(cluster.tenants[0], "--gres=gpu:2"))
    original = job.gpu_request
    cluster.port.set_gpu_type(job, a)
    pinned = cluster.job(job.job_id)
    if not cluster.port.can_retype_gpu():
        for action in (
            lambda: cluster.port.set_gpu_type(pinned, b),
            lambda: cluster.port.set_gpu_type(pinned, None),
            lambda: cluster.port.restore_gpu_request(pinned, original.raw),
        ):
            with pytest.raises(SlurmCommandError, match="cannot change a typed"):
                action()
        after = cluster.job(job.job_id)
        # untouched: the same request, not held; the pending reason is Slurm's own and moves by
        # itself (None, then BeginTime a moment later, was seen under load)
        assert after.gpu_request.raw == pinned.gpu_request.raw and after.gpu_request.gpu_type == a
        assert after.state == pinned.state and "held" not in (after.reason or "").lower()
        return
    cluster.port.set_gpu_type(pinned, b)
    assert cluster.job(job.job_id).gpu_request.gpu_type == b
    cluster.port.set_gpu_type(cluster.job(job.job_id), None)
    assert cluster.job(job.job_id).gpu_request.gpu_type is None
    cluster.port.set_gpu_type(cluster.job(job.job_id), a)
    cluster.port.restore_gpu_request(cluster.job(job.job_id), original.raw)
    r = cluster.job(job.job_id).gpu_request
    assert (r.gpu_type, r.count, r.per, r.total) == (original.gpu_type, original.count, original.per, original.total)


def test_gpu_types_of_many_jobs_in_one_go_and_the_jobs_that_could_not(cluster: Harness):
    """``set_gpu_types``/``restore_gpu_requests``: every job that can take its type gets it (one
    update per new request where Slurm replaces a request at once, >= 23.11), each job that
    cannot is named with its own error, and the others' requests keep count and form."""
    a, b = gpu_types_of(cluster)[:2]
    tenant = cluster.tenants[0]
    ids = [cluster.submit(tenant, args) for args in ("--gres=gpu:1", "--gres=gpu:1", "--gpus=2", "--gres=gpu:2")]
    gone = cluster.submit(tenant, "--gres=gpu:1")
    jobs = [cluster.job(j) for j in [*ids, gone]]
    cluster.cancel(gone)
    failed = cluster.port.set_gpu_types([(j, a if i % 2 == 0 else b) for i, j in enumerate(jobs)])
    assert set(failed) == {gone} and isinstance(failed[gone], JobGone)
    for i, (j, before) in enumerate(zip(ids, jobs)):
        r = cluster.job(j).gpu_request
        assert (r.gpu_type, r.count, r.per) == (a if i % 2 == 0 else b, before.gpu_request.count, before.gpu_request.per)
    back = cluster.port.restore_gpu_requests([(cluster.job(j), before.gpu_request.raw) for j, before in zip(ids, jobs)])
    if not cluster.port.can_retype_gpu():  # before 23.11 a typed request stays typed: each job named
        assert set(back) == set(ids) and all(isinstance(e, SlurmCommandError) for e in back.values())
        assert [cluster.job(j).gpu_request.gpu_type for j in ids] == [a, b, a, b]
        return
    assert back == {}
    assert all(cluster.job(j).gpu_request.gpu_type is None and cluster.job(j).gpu_request.count ==
               before.gpu_request.count for j, before in zip(ids, jobs))


def test_priority_nice_hold_release(cluster: Harness):
    job_id = cluster.submit(cluster.tenants[0], "--gres=gpu:1")
    cluster.port.set_priority(job_id, 4242)
    assert cluster.job(job_id).priority == 4242
    cluster.port.set_priority(job_id, None)  # back to multifactor
    assert cluster.job(job_id).priority not in (0, 4242)
    cluster.port.set_nice(job_id, 100)
    assert cluster.job(job_id).nice == 100
    cluster.port.hold(job_id)
    held = cluster.job(job_id)
    assert held.priority == 0 and "Held" in held.reason
    cluster.port.release(job_id)
    released = cluster.job(job_id)
    assert released.priority > 0 and "Held" not in released.reason


def test_set_priority_none_keeps_a_user_hold(cluster: Harness):
    job_id = cluster.submit(cluster.tenants[0], "--gres=gpu:1", held=True)
    before = cluster.job(job_id).reason
    cluster.port.set_priority(job_id, None)
    after = cluster.job(job_id)
    assert after.priority == 0 and after.reason == before


def test_update_partition(cluster: Harness):
    job_id = cluster.submit(cluster.tenants[0], "--gres=gpu:1")
    nodes = cluster.port.nodes()
    target = next(p for n in nodes for p in n.partitions if p != cluster.job(job_id).partition)
    cluster.port.update_job(job_id, {"Partition": target})
    assert cluster.job(job_id).partition == target


def test_update_jobs_changes_every_listed_job_and_names_those_it_could_not(cluster: Harness):
    tenant = cluster.tenants[0]
    ids = [cluster.submit(tenant, "--gres=gpu:1") for _ in range(3)]
    gone = cluster.submit(tenant, "--gres=gpu:1")
    cluster.cancel(gone)
    target = next(p for n in cluster.port.nodes() for p in n.partitions if p != cluster.job(ids[0]).partition)
    failed = cluster.port.update_jobs([ids[0], gone, ids[1], ids[2]], {"Partition": target})
    assert set(failed) == {gone} and isinstance(failed[gone], JobGone)
    assert [cluster.job(j).partition for j in ids] == [target] * 3
    assert cluster.port.update_jobs(ids, {"Nice": "7"}) == {}
    assert [cluster.job(j).nice for j in ids] == [7, 7, 7]
    for bad in ({"Nice": "7\nPriority=1"}, {"Priority": "high"}, {"Account": "x"}, {"QOS": "a b"}):
        with pytest.raises(ValueError):
            cluster.port.update_jobs(ids, bad)  # refused before anything runs
    assert [cluster.job(j).nice for j in ids] == [7, 7, 7]


def test_node_list_set_read_back_and_cleared(cluster: Harness):
    """Hops' placements are written as ReqNodeList, one job per call (a list of jobs is refused
    for it), read back by squeue's ReqNodes (folded, e.g. ``v100-[1-2]``), cleared with ""."""
    tenant = cluster.tenants[0]
    job_id = cluster.submit(tenant, "--gres=gpu:1")
    assert cluster.job(job_id).req_nodes == ()
    names = sorted(n.name for n in cluster.port.nodes() if cluster.job(job_id).partition in n.partitions)[:2]
    cluster.port.update_job(job_id, {"ReqNodeList": ",".join(names)})
    assert cluster.job(job_id).req_nodes == tuple(names)
    cluster.port.update_job(job_id, {"ReqNodeList": ""})
    assert cluster.job(job_id).req_nodes == ()
    with pytest.raises(ValueError):
        cluster.port.update_jobs([job_id], {"ReqNodeList": names[0]})  # never batched


def test_ensure_qos_with_what_the_caller_knows(cluster: Harness):
    t = gpu_types_of(cluster)[0]
    q = cluster.new_qos_name()
    cluster.port.ensure_qos(q, {f"gres/gpu:{t}": 3, "gres/gpu": 5}, exists=False)  # created with its limits
    assert dict({x.name: x for x in cluster.port.qos()}[q].grp_tres) == {f"gres/gpu:{t}": 3, "gres/gpu": 5}
    # a stale "missing" (someone created it meanwhile) still ends with the limits asked for
    cluster.port.ensure_qos(q, {f"gres/gpu:{t}": 4}, exists=False)
    assert dict({x.name: x for x in cluster.port.qos()}[q].grp_tres) == {f"gres/gpu:{t}": 4, "gres/gpu": 5}
    cluster.port.ensure_qos(q, {"gres/gpu": None}, exists=True)
    assert dict({x.name: x for x in cluster.port.qos()}[q].grp_tres) == {f"gres/gpu:{t}": 4}


def test_qos_limits_attach_and_effect_on_new_jobs(cluster: Harness):
    t = gpu_types_of(cluster)[0]
    q = cluster.new_qos_name()
    cluster.port.ensure_qos(q, {f"gres/gpu:{t}": 2})
    assert dict({x.name: x for x in cluster.port.qos()}[q].grp_tres) == {f"gres/gpu:{t}": 2}
    cluster.port.ensure_qos(q, {f"gres/gpu:{t}": 6, "gres/gpu": 8})
    assert dict({x.name: x for x in cluster.port.qos()}[q].grp_tres) == {f"gres/gpu:{t}": 6, "gres/gpu": 8}
    cluster.port.ensure_qos(q, {"gres/gpu": None})  # None removes one limit
    assert dict({x.name: x for x in cluster.port.qos()}[q].grp_tres) == {f"gres/gpu:{t}": 6}

    tenant = cluster.tenants[0]
    cluster.port.attach_qos(tenant, q)
    acc = {a.name: a for a in cluster.port.accounts()}[tenant]
    assert q in acc.qos and acc.default_qos == q
    # the effect Slurm shows: a new job of that tenant runs under the QOS
    assert cluster.job(cluster.submit(tenant, "--gres=gpu:1")).qos == q
    # and a pending job can be moved to it
    other = cluster.submit(tenant, "--gpus=1")
    cluster.port.update_job(other, {"QOS": q})
    assert cluster.job(other).qos == q
    cluster.port.update_job(other, {"QOS": "normal"})

    cluster.port.detach_qos(tenant, q)
    acc = {a.name: a for a in cluster.port.accounts()}[tenant]
    assert q not in acc.qos and acc.default_qos != q


def test_job_that_ended_is_gone_not_an_error(cluster: Harness):
    job_id = cluster.submit(cluster.tenants[0], "--gres=gpu:1")
    job = cluster.job(job_id)
    cluster.cancel(job_id)
    for action in (
        lambda: cluster.port.set_nice(job_id, 5),
        lambda: cluster.port.set_priority(job_id, 5),
        lambda: cluster.port.set_gpu_type(job, gpu_types_of(cluster)[0]),
        lambda: cluster.port.hold(job_id),
    ):
        with pytest.raises(JobGone):
            action()


def test_hostile_comment_executes_nothing_and_breaks_no_parse(cluster: Harness, tmp_path: Path):
    marker = tmp_path / f"pwned-{uuid.uuid4().hex[:6]}"
    comment = (
        f"fair:class=resnet50 $(touch {marker}) `touch {marker}`; touch {marker} | "
        "\"double' single \\ back |pipe|| %s %n ${HOME}\n"
        "2|PD|forged|line on a new line\n"
    )
    tenant_a, tenant_b = cluster.tenants[0], cluster.tenants[1]
    evil = cluster.submit(tenant_a, "--gres=gpu:2", comment=comment, name="evil|name;$(x)\nline2")
    after = cluster.submit(tenant_b, "--gpus=1", name="next")
    jobs = {j.job_id: j for j in cluster.port.jobs()}
    assert not marker.exists()
    e, n = jobs[evil], jobs[after]
    assert e.comment == comment and e.name == "evil|name;$(x)\nline2"
    assert (e.account, e.gpu_request.total, e.tags.get("class")) == (tenant_a, 2, "resnet50")
    assert (n.account, n.name, n.gpu_request.total, n.gpu_request.per) == (tenant_b, "next", 1, "job")
    # snapshot -> the controller's problem survives it too
    from slurm_fair.commands.snapshot import controller_problem
    from slurm_fair.config import validate

    config = validate({"controller": {"state_dir": str(tmp_path / "state")}}, "slurm-fair.toml")
    problem = controller_problem(cluster.port, config)
    assert {evil, after} <= {j.id for j in problem.jobs}
    assert not marker.exists()


def test_pinned_job_runs_on_the_pinned_type(cluster: Harness):
    """The write must change what Slurm schedules, not only the string it shows."""
    if not cluster.real:
        pytest.skip("the fake does not schedule")
    import time

    types = gpu_types_of(cluster)
    for t in types:
        job_id = cluster.submit(cluster.tenants[0], "--gres=gpu:1", held=True)
        cluster.port.set_gpu_type(cluster.job(job_id), t)
        cluster.port.release(job_id)
        for _ in range(100):
            job = cluster.job(job_id)
            if job.running:
                break
            time.sleep(0.2)
        assert job.running and job.gpu_type_running == t, (t, job)
        cluster.cancel(job_id)


def test_accounting_reports_tenant_type_and_gpus(cluster: Harness):
    from datetime import datetime, timedelta

    from slurm_fair.slurm.accounting import usage_by_tenant_type

    t = gpu_types_of(cluster)[-1]
    tenant = cluster.tenants[1]
    since = (cluster.port.now if getattr(cluster.port, "now", None) else datetime.now()) - timedelta(hours=1)
    comment = "fair:class=resnet50 | $(touch /nonexistent) ;x"
    job_id = cluster.run_to_completion(tenant, t, 2, comment=comment)
    until = since + timedelta(hours=2)
    rec = None
    for _ in range(50):  # slurmdbd may take a moment to store the end record
        recs = {r.job_id: r for r in cluster.port.accounting(since, until)}
        rec = recs.get(job_id)
        if rec is not None and rec.end_time is not None:
            break
        time.sleep(0.2)
    assert rec is not None and rec.end_time is not None
    assert (rec.account, rec.gpu_type, rec.gpus) == (tenant, t, 2)
    assert rec.comment == comment  # AccountingStoreFlags=job_comment: reports can read fair:class
    assert rec.elapsed_s >= 1
    usage = usage_by_tenant_type([rec], since, until)
    assert usage == {tenant: {t: pytest.approx(2 * (rec.end_time - rec.start_time).total_seconds())}}


def test_job_outlook_and_priority_factors_as_slurm_sees_them(cluster: Harness):
    """squeue's state/reason/start and sprio's factors for one job. A held job and a job that
    ended have no factors (sprio lists only eligible pending jobs): an empty answer, never an
    error. A pending job's factors, when listed, are its own and carry the nice we set."""
    held = cluster.submit(cluster.tenants[0], "--gres=gpu:1", held=True)
    o = cluster.port.job_outlook(held)
    assert (o.job_id, o.state) == (held, "PENDING") and "Held" in o.reason and o.priority == 0
    assert cluster.port.job_priority_factors(held) == []
    waiting = cluster.submit(cluster.tenants[1], "--gres=gpu:1")
    cluster.port.set_nice(waiting, 50)
    o = cluster.port.job_outlook(waiting)
    assert o.state == "PENDING" and o.reason and o.priority > 0
    assert o.start is None or o.start.year >= 2000
    for f in cluster.port.job_priority_factors(waiting):
        assert f.job_id == waiting and f.nice == 50 and f.priority >= 0
        assert set(f.factors) == {"age", "fairshare", "jobsize", "partition", "qos", "site"}
    cluster.cancel(waiting)
    assert cluster.port.job_priority_factors(waiting) == []
    try:
        after = cluster.port.job_outlook(waiting)
    except JobGone:
        pass  # slurmctld forgot it (the fake at once, Slurm after MinJobAge)
    else:
        assert after.state not in ("PENDING", "RUNNING")


def test_partitions_carry_the_rules_steering_needs(cluster: Harness):
    parts = {p.name: p for p in cluster.port.partitions()}
    for n in cluster.port.nodes():
        for p in n.partitions:
            assert n.name in parts[p].nodes, (n.name, p)
    assert sum(p.default for p in parts.values()) == 1
    assert all(p.state == "UP" and p.allow_accounts is None and p.max_time_min is None for p in parts.values())
    # a QOS that exists: 26.05 refuses a deny list naming an unknown one ("Invalid qos
    # specification"), 22.05 and 24.11 took any name
    deny = sorted(q.name for q in cluster.port.qos())[0]
    rules = (f"AllowAccounts={cluster.tenants[0]} DenyQos={deny} MaxTime=90 MaxNodes=1 "
             "PriorityTier=5 AllowGroups=root")
    with cluster.down_partition(rules) as name:
        if not cluster.real:
            return  # the rules come from scontrol: only a real Slurm can say how it prints them
        p = {p.name: p for p in cluster.port.partitions()}[name]
        assert (p.state, p.allow_accounts, p.allow_groups, p.max_time_min, p.max_nodes, p.priority_tier) == (
            "DOWN", frozenset({cluster.tenants[0]}), frozenset({"root"}), 90, 1, 5)
        # Slurm shows a deny list instead of AllowQos
        assert p.allow_qos is None and p.deny_qos == frozenset({deny})


def test_site_factor_is_set_in_batches_and_read_back(cluster: Harness):
    """The order the controller gives pending jobs is Slurm's admin-only site factor (added
    to the multifactor priority; sprio's weighted ``site``): set for many jobs in one call,
    read back for pending jobs eligible to start."""
    with cluster.down_partition() as part:
        ids = [cluster.submit(cluster.tenants[0], f"--gres=gpu:1 -p {part}", eligible=True) for _ in range(3)]
        before = {j: cluster.job(j) for j in ids}
        assert [before[j].site_factor for j in ids] == [0, 0, 0]
        assert cluster.port.update_jobs(ids[:2], {"SiteFactor": "-700"}) == {}
        after = {j: cluster.job(j) for j in ids}
        assert [after[j].site_factor for j in ids] == [-700, -700, 0]
        # multifactor recomputes at once; age may add a point meanwhile
        assert abs(after[ids[0]].priority - max(1, before[ids[0]].priority - 700)) <= 5
        assert abs(after[ids[2]].priority - before[ids[2]].priority) <= 5
        with pytest.raises(ValueError):
            cluster.port.update_jobs(ids, {"SiteFactor": "-1 Priority=1"})


def test_a_users_choices_are_read_back(cluster: Harness):
    """What the controller must never narrow: an exclude list, a node list, a time limit,
    a dependency, two partitions."""
    t0 = cluster.tenants[0]
    nodes = sorted(n.name for n in cluster.port.nodes())
    job = cluster.job(cluster.submit(t0, f"--gres=gpu:1 -x {nodes[0]} -t 90"))
    assert job.exc_nodes == (nodes[0],) and job.time_limit_min == 90
    assert job.req_nodes == () and job.reservation == "" and job.features == "" and job.dependency == ""
    pinned = cluster.job(cluster.submit(t0, f"--gres=gpu:1 -w {nodes[-1]}"))
    assert pinned.req_nodes == (nodes[-1],) and pinned.exc_nodes == ()
    dep = cluster.job(cluster.submit(t0, f"--gres=gpu:1 -d afterok:{job.job_id}"))
    assert dep.dependency.startswith(f"afterok:{job.job_id}")
    names = sorted({p for n in cluster.port.nodes() for p in n.partitions})[:2]
    two = cluster.job(cluster.submit(t0, f"--gres=gpu:1 -p {','.join(names)}"))
    assert set(two.partition.split(",")) == set(names)
