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

from slurm_harness import FakeHarness, Harness, RealHarness


def real_env(request, version: str) -> dict[str, str]:
    conf = os.environ.get("SLURM_FAIR_TEST_SLURM_CONF")
    if conf:
        return {"SLURM_CONF": conf}
    return dict(request.getfixturevalue("testbeds")(version).env)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``cluster``: the fake, then the real testbed of each Slurm version of --slurm-versions."""
    if "cluster" not in metafunc.fixturenames:
        return
    option = str(metafunc.config.getoption("--slurm-versions"))  # checked by tests/conftest.py
    versions = ["site"] if os.environ.get("SLURM_FAIR_TEST_SLURM_CONF") else [
        v.strip() for v in option.split(",") if v.strip()]
    params = [pytest.param("fake", id="fake")] + [
        pytest.param(f"slurm{v}", marks=pytest.mark.slurm, id=f"slurm{v}") for v in versions
    ]
    metafunc.parametrize("cluster", params, indirect=True)


@pytest.fixture
def cluster(request) -> Iterator[Harness]:
    """The contract suite's backend: the fake, then each real Slurm."""
    kind = request.param
    h: Harness = FakeHarness() if kind == "fake" else RealHarness(real_env(request, kind.removeprefix("slurm")))
    try:
        yield h
    finally:
        h.close()
