"""The real testbed: typed GPU inventory, a typed GPU job accounted per type, tenant accounts."""

from __future__ import annotations

import time

import pytest

from slurm_fair.testbed import Testbed
from slurm_fair.testbed.jobs import submit_job, wait_job_state

pytestmark = pytest.mark.slurm


def test_sinfo_shows_typed_gpus_per_node(testbed: Testbed) -> None:
    out = testbed.run(["sinfo", "-h", "-N", "-p", "gpu", "-o", "%N|%G|%T"]).stdout
    seen = {}
    for line in out.splitlines():
        node, gres, state = line.split("|")
        seen[node] = (gres, state)
    for node in testbed.config.nodes:
        assert node.name in seen, f"{node.name} missing from sinfo"
        gres, state = seen[node.name]
        assert gres.split("(")[0] == f"gpu:{node.gpu_type}:{node.gpus}"
        assert not state.endswith("*"), f"{node.name} not responding: {state}"


def test_one_partition_per_gpu_type_plus_default(testbed: Testbed) -> None:
    out = testbed.run(["sinfo", "-h", "-o", "%P|%N"]).stdout
    parts = dict(line.split("|") for line in out.splitlines())
    assert "gpu*" in parts  # the default partition
    assert {p.rstrip("*") for p in parts} == {"gpu", *testbed.config.gpu_types}


def test_typed_gpu_job_runs_and_is_accounted_per_type(testbed: Testbed) -> None:
    job = submit_job(testbed, "biology", "sleep 1", gres="gpu:p100:2")
    assert wait_job_state(testbed, job, timeout=90) == "COMPLETED"
    deadline = time.monotonic() + 30
    row = ""
    while time.monotonic() < deadline:  # slurmdbd receives the record asynchronously
        row = testbed.run(
            ["sacct", "-n", "-X", "-P", "-j", str(job), "-o", "Account,State,AllocTRES"]
        ).stdout.strip()
        if "COMPLETED" in row and "gres/gpu:p100=2" in row:
            break
        time.sleep(0.5)
    account, state, tres = row.split("|")
    assert (account, state) == ("biology", "COMPLETED")
    assert "gres/gpu:p100=2" in tres.split(",")
    assert "gres/gpu=2" in tres.split(",")


def test_tenant_accounts_have_their_shares(testbed: Testbed) -> None:
    out = testbed.run(
        ["sacctmgr", "-n", "-P", "show", "assoc", f"cluster={testbed.config.cluster_name}",
         "format=account,user,fairshare"]
    ).stdout
    account_shares = {}
    members = set()
    for line in out.splitlines():
        account, user, share = line.split("|")[:3]
        if user:
            members.add((account, user))
        else:
            account_shares[account] = int(share)
    for tenant, share in testbed.config.tenants.items():
        assert account_shares.get(tenant) == share
        assert (tenant, "root") in members


def test_second_up_is_quick_and_harmless(testbed: Testbed) -> None:
    pids = {d.name: d.pid for d in testbed.status().daemons}
    testbed.up()
    # no daemon restarted: same pids
    assert {d.name: d.pid for d in testbed.status().daemons} == pids
