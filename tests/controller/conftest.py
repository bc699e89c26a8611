"""Fixtures of the controller tests: a fake cluster and a private configuration per test."""

from __future__ import annotations

from datetime import datetime

import pytest

from slurm_fair.config import validate
from slurm_fair.slurm.fake import FakeSlurm
from slurm_fair.slurm.model import Account, Qos

from .builders import cluster


def make_config(tmp_path, **controller):
    """A configuration whose state and audit log live in ``tmp_path``."""
    values = {"state_dir": str(tmp_path / "state"), "audit_log": str(tmp_path / "audit.jsonl")}
    values.update(controller)
    return validate({"controller": values}, str(tmp_path / "slurm-fair.toml"))


@pytest.fixture
def config(tmp_path):
    return make_config(tmp_path)


@pytest.fixture
def fake():
    """Two tenants on 4 v100 + 4 p100 + 8 k80, Slurm 22.05 (jobs are steered by partition;
    ``pin_gres_type = "auto"`` types requests only where Slurm can undo it)."""
    return FakeSlurm(
        slurm_version="22.05",
        nodes=cluster(v100=4, p100=4, k80=8),
        accounts=[Account("alice", 1.0, ("normal",), "normal"), Account("bob", 1.0, ("normal",), "normal")],
        qos=[Qos("normal")],
        now=datetime(2026, 1, 1, 12, 0, 0),
    )


@pytest.fixture
def slurm_env(testbed):
    """The session testbed (tests/conftest.py, one per Slurm version) and its client environment."""
    return testbed, dict(testbed.env)
