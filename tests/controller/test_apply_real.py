"""A batch with a job that cannot take its change, on the real testbeds (22.05 and 24.11).

Between the controller's read and its writes one job of the batch starts: Slurm refuses the
change for that job alone ("Job is no longer pending execution for job N") and makes it for the
others of the same ``scontrol update JobId=<list>``. The state store must then hold exactly what
happened: the others' fields as written, nothing for the started job (its intent dropped), and
``revert`` must give every change back.
"""

from __future__ import annotations

import time

import pytest

from slurm_fair.config import validate
from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.revert import revert
from slurm_fair.controller.state import StateStore
from slurm_fair.slurm import make_port

from .test_testbed import Hooked, _run, accounts, start_now, sub, tb_env  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slurm

CLASSES = ("resnet-50-bs32", "a3c", "lm-bs20")


def wait_running(job: str, env: dict[str, str], timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if _run(["squeue", "-h", "-j", job, "-o", "%T"], env, check=False).stdout.strip() == "RUNNING":
            return
        time.sleep(0.5)
    raise AssertionError(f"job {job} did not start within {timeout} s")


def partitions(ids: list[str], env: dict[str, str]) -> dict[str, str]:
    out = _run(["squeue", "-h", "-j", ",".join(ids), "-o", "%i %P"], env).stdout
    return dict(line.split() for line in out.splitlines())


def test_a_job_that_starts_mid_batch_is_recorded_apart_and_revert_gives_the_rest_back(tmp_path, accounts, sub):  # noqa: F811
    env, full = sub.env, sub.full_env
    config = validate({  # steered by partition on both versions
        "controller": {"state_dir": str(tmp_path / "state"), "audit_log": str(tmp_path / "audit.jsonl"),
                       "manage_accounts": list(accounts), "pin_gres_type": False},
        "slurm": {"command_timeout_s": 15},
    }, str(tmp_path / "slurm-fair.toml"))
    ids = [sub(accounts[i % 2], comment=f"fair:class={CLASSES[i % 3]}") for i in range(6)]
    starter = ids[0]

    def start_one() -> None:
        start_now([starter], full)
        wait_running(starter, full)

    res = run_cycle(Hooked(make_port(config, env=env), start_one), config)
    moves = {r.action.job: r for r in res.results if r.action.kind == "set_partition"}
    assert set(moves) == set(ids), res.message  # every job was pending when read: all planned
    assert moves[starter].skipped and not moves[starter].applied and "no longer pending" in moves[starter].error
    assert all(moves[j].applied for j in ids[1:])
    now = partitions(ids, full)
    assert now[starter] == "gpu"  # a running job is never moved
    assert all(now[j] == moves[j].action.params["partition"] != "gpu" for j in ids[1:])
    with StateStore.in_dir(config["controller"]["state_dir"]) as store:
        owned = store.owned()
    assert (starter, "partition") not in owned
    assert all((owned[(j, "partition")].original, owned[(j, "partition")].written, owned[(j, "partition")].intent)
               == ("gpu", now[j], None) for j in ids[1:])
    rv = revert(make_port(config, env=env), config)
    assert rv.exit_code == 0, rv.problems
    assert set(partitions(ids, full).values()) == {"gpu"}
    with StateStore.in_dir(config["controller"]["state_dir"]) as store:
        assert not [k for k in store.owned() if k[1] == "partition"]
