"""Accounts and QOS kept across a port's snapshots (:mod:`slurm_fair.slurm.dbd_cache`) against the
real slurmdbd, through both backends (pyslurm where it is built for this Slurm; 24.11's inside
its root filesystem: scripts/pyslurm-rootfs.sh).

A port keeping them 300 s reads slurmdbd at its first snapshot only; an account the site adds
is not in the next snapshot (the documented bound: ttl_s) until a job names it, and then is, at
once; a QOS the port makes itself is in its next snapshot, and gone from the one after it
deletes it. Each read is counted by the port and checked against what slurmdbd holds.
"""

from __future__ import annotations

import os
import subprocess
import time
from contextlib import suppress

import pytest

from slurm_fair.slurm.cli import SlurmCli

from slurm_harness import pyslurm_skip_reason

pytestmark = pytest.mark.slurm


def _run(env, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=60)
    assert not check or out.returncode == 0, (argv, out.stderr)
    return out


@pytest.mark.parametrize("backend", ["cli", "pyslurm"])
def test_accounts_kept_until_a_job_names_a_new_one_and_the_ports_qos_writes_show(testbed, slurm_version, backend):
    if backend == "pyslurm" and (why := pyslurm_skip_reason(slurm_version)):
        pytest.skip(why)
    env = {**os.environ, **testbed.env}
    port = SlurmCli(env=dict(testbed.env), timeout_s=60, accounts_ttl_s=300)
    if backend == "pyslurm":
        from slurm_fair.slurm.pyslurm_port import PyslurmPort

        port = PyslurmPort(port)
    dbd = port.cli.dbd if backend == "pyslurm" else port.dbd
    tag = f"{os.getpid() % 100000}{backend[0]}"
    account, qos = f"sfttl{tag}", f"sfttlq{tag}"
    ids: list[str] = []
    try:
        first = port.snapshot()
        assert dbd.reads == 1 and account not in {a.name for a in first.accounts}
        _run(env, "sacctmgr", "-i", "add", "account", account, "parent=root", "fairshare=3")
        _run(env, "sacctmgr", "-i", "add", "user", "root", f"account={account}")
        kept = port.snapshot()
        assert dbd.reads == 1  # kept: no job names the new account yet
        assert {a.name for a in kept.accounts} == {a.name for a in first.accounts}
        deadline = time.monotonic() + 30
        while True:  # slurmctld learns the association from slurmdbd
            out = _run(env, "sbatch", "--parsable", "-o", "/dev/null", "-A", account, "--hold", "--gres=gpu:1",
                       "--wrap", "sleep 1", check=False)
            if out.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert out.returncode == 0, out.stderr
        ids.append(out.stdout.strip().split(";")[0])
        seen = port.snapshot()
        assert dbd.reads == 2  # a job names an account not kept: read at once
        assert {a.name: a.shares for a in seen.accounts}.get(account) == 3
        assert ids[0] in {j.job_id for j in seen.jobs}
        port.snapshot()
        assert dbd.reads == 2
        port.ensure_qos(qos, {"gres/gpu": 2})
        made = port.snapshot()
        assert dbd.reads == 3 and qos in {q.name for q in made.qos}
        port.delete_qos(qos)
        gone = port.snapshot()
        assert dbd.reads == 4 and qos not in {q.name for q in gone.qos}
        # what is kept is slurmdbd's: the same as the port reads it fresh
        assert {a.name: a for a in gone.accounts} == {a.name: a for a in port.accounts()}
    finally:
        if ids:
            _run(env, "scancel", *ids, check=False)
        with suppress(Exception):
            _run(env, "sacctmgr", "-i", "delete", "qos", qos, check=False)
        deadline = time.monotonic() + 30  # the cancelled job leaves slurmctld's association first
        while time.monotonic() < deadline:
            _run(env, "sacctmgr", "-i", "delete", "user", "root", f"account={account}", check=False)
            _run(env, "sacctmgr", "-i", "delete", "account", account, check=False)
            left = _run(env, "sacctmgr", "-n", "-P", "show", "account", account, "format=Account", check=False)
            if not left.stdout.strip():
                break
            time.sleep(2)
