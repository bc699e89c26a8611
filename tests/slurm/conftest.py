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


def real_env(request) -> dict[str, str]:
    conf = os.environ.get("SLURM_FAIR_TEST_SLURM_CONF")
    if conf:
        return {"SLURM_CONF": conf}
    try:
        testbed = request.getfixturevalue("testbed")
    except pytest.FixtureLookupError:
        pytest.skip("no real Slurm: the testbed fixture is not available")
    return dict(testbed.env)


@pytest.fixture(params=["fake", pytest.param("slurm", marks=pytest.mark.slurm)])
def cluster(request) -> Iterator[Harness]:
    """The contract suite's backend: the fake, then the real Slurm."""
    h: Harness = FakeHarness() if request.param == "fake" else RealHarness(real_env(request))
    try:
        yield h
    finally:
        h.close()
