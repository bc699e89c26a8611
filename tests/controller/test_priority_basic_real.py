"""A site on ``PriorityType=priority/basic`` (no sprio, no site factors), on a private testbed of
each Slurm version (``[priority] type = "basic"`` of the testbed description): cycles steer
without pushes, and revert and the failsafe complete. (Before issue 40 the snapshot failed at
sprio, so cycles, revert and the failsafe all stopped at "cannot read Slurm".)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from slurm_fair.config import validate as validate_config
from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.failsafe import failsafe
from slurm_fair.controller.revert import revert
from slurm_fair.slurm import make_port
from slurm_fair.testbed import Testbed, validate
from slurm_fair.testbed.procs import free_ports

pytestmark = pytest.mark.slurm






@pytest.fixture
def basic(slurm_version: str, testbeds, tmp_path: Path):
    """A private testbed of ``slurm_version`` with priority/basic (its own ports and directory;
    another version's root filesystem is the one of the shared testbed of this run, read-only: every
    program runs in a mount namespace of its own)."""
    cfg = validate({
        "cluster": {"name": "basictb", "cpus_per_node": 4, "slurm": slurm_version, "job_submit_lua": False},
        "gpu_types": {"v100": {"nodes": "bv100-1", "gpus_per_node": 2}, "k80": {"nodes": "bk80-1", "gpus_per_node": 2}},
        "tenants": {"alpha": {}, "beta": {}},
        "ports": free_ports(2),
        "timeouts": {"start_s": 180, "stop_s": 15},
        "priority": {"type": "basic"},
    }, "<priority/basic test testbed>")
    root = tmp_path / "tb"
    root.mkdir()
    shared = testbeds(slurm_version).layout.rootfs
    if shared.exists():
        (root / "rootfs").symlink_to(shared)
    tb = Testbed(dir=root, config=cfg)
    try:
        tb.up()
        yield tb
    finally:
        tb.down()


def test_priority_basic_cycles_steer_without_pushes_and_revert_and_failsafe_complete(basic, tmp_path):
    assert basic.run(["sprio", "-h"], check=False).returncode != 0  # there is no sprio here
    cfg = validate_config({
        "controller": {"state_dir": str(tmp_path / "state"), "audit_log": str(tmp_path / "audit.jsonl"),
                       "pin_gres_type": False},
        "slurm": {"command_timeout_s": 15},
    }, str(tmp_path / "slurm-fair.toml"))
    port = make_port(cfg, env=basic.env)
    ids = []
    for i in range(6):  # more than the GPUs, held two hours so none starts
        out = basic.run(["sbatch", "--parsable", "--begin=now+7200", "-A", ("alpha", "beta")[i % 2], "-N1",
                         "--gres=gpu:1", f"--comment=fair:class={('resnet-50-bs32', 'a3c')[i % 2]}",
                         "-o", "/dev/null", "--wrap", "sleep 600"])
        ids.append(out.stdout.strip().split(";")[0])
    before = {j.job_id: j.partition for j in port.jobs() if j.job_id in ids}
    assert set(before) == set(ids)
    res = run_cycle(port, cfg)
    assert res.exit_code == 0, res.to_dict()
    now = {j.job_id: j.partition for j in port.jobs() if j.job_id in ids}
    assert any(now[j] != before[j] for j in ids)  # steered
    assert not [r for r in res.results if r.action.kind == "set_site_factor"]  # no pushes: none to see
    rv = revert(port, cfg)
    assert rv.exit_code == 0, rv.to_dict()
    assert {j.job_id: j.partition for j in port.jobs() if j.job_id in ids} == before
    assert run_cycle(port, cfg).exit_code == 0
    assert {j.job_id: j.partition for j in port.jobs() if j.job_id in ids} != before
    fs = failsafe(port, cfg, clock=lambda: time.time() + 700)
    assert fs.exit_code == 0 and fs.lifted is not None, fs.to_dict()
    assert {j.job_id: j.partition for j in port.jobs() if j.job_id in ids} == before
