"""Fixtures of the controller tests: a fake cluster and a private configuration per test."""

from __future__ import annotations

from datetime import datetime

import pytest

from slurm_fair.config import validate
from slurm_fair.model import Account, Qos
from slurm_fair.slurm.fake import FakeSlurm

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
    """Two tenants on 4 v100 + 4 p100 + 8 k80."""
    return FakeSlurm(
        nodes=cluster(v100=4, p100=4, k80=8),
        accounts=[Account("alice", 1.0, ("normal",), "normal"), Account("bob", 1.0, ("normal",), "normal")],
        qos=[Qos("normal")],
        now=datetime(2026, 1, 1, 12, 0, 0),
    )


@pytest.fixture
def slurm_env(request):
    """Client environment of the session testbed (tests/conftest.py), or of a private one named
    by $SLURM_FAIR_TESTBED_DIR; skipped when neither exists."""
    import os

    try:
        tb = request.getfixturevalue("testbed")
    except pytest.FixtureLookupError:
        path = os.environ.get("SLURM_FAIR_TESTBED_DIR")
        if not path:
            pytest.skip("no testbed fixture and no $SLURM_FAIR_TESTBED_DIR")
        from slurm_fair.testbed import Testbed

        tb = Testbed(dir=path)
        if not tb.is_healthy():
            pytest.skip(f"testbed in {path} is not healthy")
    env = getattr(tb, "env", None)
    return tb, dict(env() if callable(env) else env)
