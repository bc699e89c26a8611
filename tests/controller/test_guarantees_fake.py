"""Issue 40 (part B) on the fake: the failsafe and revert keep their promise on every path
(shadow mode, a full or read-only state directory, no sprio, overlapping runs)."""

from __future__ import annotations

import os

from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.failsafe import failsafe
from slurm_fair.controller.state import StateStore

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
