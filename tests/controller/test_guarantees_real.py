"""Issue 40 (part B) on the real testbeds (22.05 and 24.11): the failsafe fails open on every
path a site takes (live -> shadow, a full state disk with the loop killed -9, no sprio), and
what the controller writes late or learns cannot hurt the loop.

Each test fails on the code before issue 40 (checked once against that code)."""

from __future__ import annotations

import time

import pytest

from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.failsafe import failsafe
from slurm_fair.slurm import make_port

from .test_pilot_real import config, jobs, runnable
from .test_testbed import _run, accounts, sub, tb_env  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slurm


def test_live_then_shadow_the_failsafe_still_gives_everything_back(sub, accounts, tmp_path):
    """Live cycles steer; the site switches to shadow and its cycles go on completing; past
    fail_open_after_s after the last live cycle the failsafe leaves no pending job where the
    live cycles put it (before issue 40 shadow cycles reset the clock: nothing was lifted)."""
    a, b = accounts
    cfg = config(tmp_path, accounts)
    port = make_port(cfg, env=sub.env)
    ids = [sub((a, b)[i % 2], comment=("fair:class=resnet-50-bs32", "fair:class=a3c")[i % 2]) for i in range(8)]
    before = {j: x.partition for j, x in jobs(port, ids).items()}
    t0 = time.time()
    assert run_cycle(port, cfg, clock=lambda: t0).exit_code == 0
    moved = [j for j, x in jobs(port, ids).items() if x.partition != before[j]]
    assert moved
    for k in range(1, 4):  # shadow cycles, the last well inside fail_open_after_s of the failsafe's run
        res = run_cycle(port, cfg, clock=lambda k=k: t0 + 200 * k, shadow=True)
        assert res.status == "ok", res.to_dict()
    assert [j for j, x in jobs(port, ids).items() if x.partition != before[j]] == moved
    res = failsafe(port, cfg, clock=lambda: t0 + 200 * 3 + 60)
    assert res.exit_code == 0 and res.lifted is not None, res.to_dict()
    assert {j: x.partition for j, x in jobs(port, ids).items()} == before
    assert not runnable(port, ids)
