"""Fixtures of the simulator tests (builders live in ``simhelpers``)."""

from __future__ import annotations

import pytest

from slurm_fair.policies import PolicyInfo

from simhelpers import oldest_first, standin


@pytest.fixture
def oldest() -> PolicyInfo:
    return standin("oldest", oldest_first)
