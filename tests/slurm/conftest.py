"""Fixtures of the Slurm adapter tests: a *cluster harness* over the fake or a real Slurm.

The contract suite (``test_contract.py``) is written once against :class:`Harness` and runs
against both backends (PuLP's ``BaseSolverTest`` idea). The real backend is the session
``testbed`` fixture of ``tests/conftest.py``; ``SLURM_FAIR_TEST_SLURM_CONF=/path/slurm.conf``
points it at another Slurm you own instead. Jobs and QOS a test creates are removed afterwards.
"""

from __future__ import annotations

import os
from typing import Iterator

import pytest

from slurm_harness import FakeHarness, Harness, RealHarness, pyslurm_skip_reason


def real_env(request, version: str) -> dict[str, str]:
    conf = os.environ.get("SLURM_FAIR_TEST_SLURM_CONF")
    if conf:
        return {"SLURM_CONF": conf}
    return dict(request.getfixturevalue("testbeds")(version).env)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``cluster``: the fake, then the real testbed of each Slurm version of --slurm-versions,
    each through both backends: Slurm's commands (``slurm22.05``) and pyslurm
    (``slurm22.05-pyslurm``, skipped, saying why, where pyslurm for that Slurm is not here)."""
    if "cluster" not in metafunc.fixturenames:
        return
    option = str(metafunc.config.getoption("--slurm-versions"))  # checked by tests/conftest.py
    versions = ["site"] if os.environ.get("SLURM_FAIR_TEST_SLURM_CONF") else [
        v.strip() for v in option.split(",") if v.strip()]
    params = [pytest.param("fake", id="fake")]
    for v in versions:
        params += [pytest.param(f"slurm{v}", marks=pytest.mark.slurm, id=f"slurm{v}"),
                   pytest.param(f"slurm{v}-pyslurm", marks=pytest.mark.slurm, id=f"slurm{v}-pyslurm")]
    metafunc.parametrize("cluster", params, indirect=True)


@pytest.fixture
def cluster(request) -> Iterator[Harness]:
    """The contract suite's backend: the fake, then each real Slurm through each backend."""
    kind = request.param
    if kind == "fake":
        h: Harness = FakeHarness()
    else:
        version, _, backend = kind.removeprefix("slurm").partition("-")
        if backend == "pyslurm" and (why := pyslurm_skip_reason(None if version == "site" else version)):
            pytest.skip(why)
        h = RealHarness(real_env(request, version), backend=backend or "cli")
    try:
        yield h
    finally:
        h.close()
