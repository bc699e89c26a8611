"""The priority-factors RPC in process (:mod:`slurm_fair.slurm.libslurm_prio`) against sprio, on
the real testbed of each version (24.11 inside its root filesystem: scripts/pyslurm-rootfs.sh).

A queue of what sprio lists and what it leaves out: pending jobs eligible in two DOWN partitions
(each listed once per partition) with site factors negative, positive and none, a nice, one whose
priority an administrator set by hand (22.05's sprio lists it with the unset factor's value), one
held and one waiting for its begin time (not listed). The reader's answer must be sprio's, job by
job, and the pyslurm port's snapshot must carry those factors without starting sprio.
"""

from __future__ import annotations

import os
import subprocess
from contextlib import suppress

import pytest


from slurm_harness import both_backends

pytestmark = pytest.mark.slurm


def _run(env, *argv: str) -> str:
    out = subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, (argv, out.stderr)
    return out.stdout.strip()


def test_pyslurm_site_factors_from_the_rpc_are_sprios(testbed, slurm_version):
    env, cli, ps = both_backends(testbed, slurm_version)
    tenant = sorted(a.name for a in cli.accounts())[0]
    nodes = ",".join(sorted(n.name for n in cli.nodes()))
    parts = [f"sfprio{os.getpid() % 10000}{x}" for x in "ab"]
    for part in parts:
        _run(env, "scontrol", "create", f"PartitionName={part}", f"Nodes={nodes}", "State=DOWN")
    ids: list[str] = []
    try:
        def sbatch(*args: str) -> str:
            job = _run(env, "sbatch", "--parsable", "-o", "/dev/null", "-A", tenant, "-p", ",".join(parts),
                       "--gres=gpu:1", *args, "--wrap", "sleep 60").split(";")[0]
            ids.append(job)
            return job

        negative, positive, plain, nice = sbatch(), sbatch(), sbatch(), sbatch("--nice=20")
        by_hand, held, later = sbatch(), sbatch("--hold"), sbatch("--begin=now+3600")
        _run(env, "scontrol", "update", f"JobId={negative}", "SiteFactor=-250")
        _run(env, "scontrol", "update", f"JobId={positive}", "SiteFactor=40")
        _run(env, "scontrol", "update", f"JobId={by_hand}", "Priority=4321")
        reader = ps._prio_reader()
        assert reader is not None, "the priority factors RPC was not opened (slurm.h)"
        for _ in range(5):  # the same moment for both: nothing changes these jobs between the reads
            sprio = cli._site_factors()
            ours = ps._call("priority factors", reader.read)
            if ours == sprio:
                break
        assert ours == sprio
        assert ours[negative] == -250 and ours[positive] == 40 and ours[plain] == 0 and ours[nice] == 0
        assert held not in ours and later not in ours
        # the port's snapshot: those factors, and no sprio started
        started: list[list[str]] = []
        real_run = ps.cli.runner.run

        def run(argv, *args, **kwargs):
            started.append(list(argv))
            return real_run(argv, *args, **kwargs)

        ps.cli.runner.run = run  # type: ignore[method-assign]
        jobs = {j.job_id: j for j in ps.snapshot().jobs}
        assert not any(a[0] == "sprio" for a in started), started
        assert jobs[negative].site_factor == -250 and jobs[positive].site_factor == 40
        assert jobs[held].site_factor is None and jobs[later].site_factor is None
        theirs = {j.job_id: j.site_factor for j in cli.jobs()}
        assert {j: jobs[j].site_factor for j in ids} == {j: theirs[j] for j in ids}
    finally:
        if ids:
            subprocess.run(["scancel", *ids], env=env, capture_output=True, timeout=60)
        for part in parts:
            with suppress(Exception):
                subprocess.run(["scontrol", "delete", f"PartitionName={part}"], env=env, capture_output=True,
                               timeout=30)
