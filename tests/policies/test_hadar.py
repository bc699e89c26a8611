"""Hadar's dual prices carried across rounds (docs/policies/hadar.md): the backlog state, its
update rule, and what it changes in the next round."""

from __future__ import annotations

import json

import pytest

from slurm_fair import policies
from slurm_fair.model import Job, Problem
from slurm_fair.policies import PolicyOptions
from slurm_fair.policies.hadar import BETA, KEY

hadar = policies.get("hadar").allocate


def _crowd(n: int) -> Problem:
    jobs = tuple(Job(f"j{i}", f"t{i}", 1, {"v100": 10.0, "k80": 2.0}) for i in range(n))
    return Problem({"v100": 8, "k80": 8}, {}, jobs)


@pytest.mark.parametrize("name", ["hadar", "hadare"])
def test_backlog_is_json_and_carried_to_the_next_round(name: str) -> None:
    """16 jobs all best on 8 V100s: 8 GPUs of excess demand, so the backlog is
    ``(1 - BETA) * 8``; the next round starts from it (and from its JSON copy, identically),
    and a lone job then meets a dearer V100 than on a fresh state."""
    allocate = policies.get(name).allocate
    state: dict = {}
    allocate(_crowd(16), PolicyOptions(state=state))
    assert state[KEY]["backlog"] == {"v100": pytest.approx((1 - BETA) * 8), "k80": 0.0}
    copy = json.loads(json.dumps(state))
    assert copy == state
    lone = _crowd(1)
    carried = allocate(lone, PolicyOptions(state=state)).info
    from_json = allocate(lone, PolicyOptions(state=copy)).info
    fresh = allocate(lone, PolicyOptions(state={})).info
    assert carried == from_json
    assert carried["backlog"]["v100"] == pytest.approx((1 - BETA) * 8)
    assert carried["prices"]["v100"] > fresh["prices"]["v100"]


def test_backlog_decays_when_demand_is_below_capacity() -> None:
    """Rounds with no excess demand multiply the backlog by BETA each."""
    state: dict = {}
    hadar(_crowd(16), PolicyOptions(state=state))
    start = state[KEY]["backlog"]["v100"]
    for r in range(1, 5):
        hadar(_crowd(2), PolicyOptions(state=state))
        assert state[KEY]["backlog"]["v100"] == pytest.approx(start * BETA ** r)


def test_a_carried_price_moves_a_marginal_job_to_the_cheaper_type() -> None:
    """A job hardly slower on the K80 (9 vs 10) takes the V100 on a fresh state; after rounds
    in which the V100 was asked for far beyond its capacity, it settles on the K80."""
    job = Job("x", "X", 1, {"v100": 10.0, "k80": 9.0})
    problem = Problem({"v100": 1, "k80": 1}, {}, (job,))
    assert hadar(problem, PolicyOptions(state={})).x["x"] == {"v100": 1.0}
    state = {KEY: {"backlog": {"v100": 10.0, "k80": 0.0}}}
    assert hadar(problem, PolicyOptions(state=state)).x["x"] == {"k80": 1.0}
