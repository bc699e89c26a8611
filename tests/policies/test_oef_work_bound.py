"""oef's improvement stages bounded by work (``oef.improve_lps``): the bound scales with the
tenant pairs, binds, and makes the answer independent of how fast the machine runs; the
simulator raises the wall-time bound ``oef.improve_s`` to a safety net.

SI and EF of the answers are checked by the independent LPs (tests/policies/_independent.py)."""

from __future__ import annotations

import itertools
import json
import sys
import time
from pathlib import Path
from unittest import mock

import pytest

from slurm_fair import policies
from slurm_fair.estimates import gavel
from slurm_fair.policies import PolicyOptions, _oef_search, simulation_params
from slurm_fair.problem_io import parse_problem
from slurm_fair.sim.cluster import parse_cluster
from slurm_fair.sim.engine import SimConfig, Simulator
from slurm_fair.sim.synthetic import generate

from . import _independent as ind

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_solve import instance  # noqa: E402  (the benchmark's own problem generator)

PROBLEM = parse_problem(json.dumps(instance(64, 8)))


def _oef(params: dict[str, float]) -> policies.Allocation:
    return policies.allocate("oef", PROBLEM, PolicyOptions(solver="highs", params={"oef.inside": 0, **params}))


def _x(a: policies.Allocation) -> dict[str, dict[str, float]]:
    return {j: dict(r) for j, r in a.x.items()}


def test_the_budget_is_lps_per_tenant_pair_with_a_floor_and_binds() -> None:
    T = len(PROBLEM.active_tenants)
    full = _oef({"oef.improve_s": 86400.0, "oef.improve_lps": 1e9})
    cut = _oef({"oef.improve_s": 86400.0, "oef.improve_lps": 0.05})
    assert _oef({})
    assert _oef({"oef.improve_lps": 2.0}).info["improve_lp_budget"] == 2 * max(T * (T - 1), _oef_search._MIN_PAIRS)
    assert cut.info["improve_lp_budget"] == int(0.05 * max(T * (T - 1), _oef_search._MIN_PAIRS))
    assert any("oef.improve_lps" in s for s in cut.info["skipped_for_time"])
    assert not any("oef.improve_lps" in s for s in full.info["skipped_for_time"])
    assert cut.info["improve_lps_spent"] < full.info["improve_lps_spent"]
    for a in (full, cut):  # cut short or not, the answer is verified SI and EF
        assert ind.capacity_ok(PROBLEM, _x(a)) and ind.si_ok(PROBLEM, _x(a)) and ind.ef_ok(PROBLEM, _x(a))


def _slow_clock(step_s: float):  # noqa: ANN202 - a perf_counter that runs fast: a loaded machine
    calls = itertools.count()
    real = time.perf_counter
    return lambda: real() + step_s * next(calls)


@pytest.mark.parametrize("lps", [0.2, 3.0])
def test_on_a_slow_machine_the_work_bound_gives_the_same_answer(lps: float) -> None:
    """Every clock reading 50 ms later than the last (a machine so slow that this solve takes
    some 10-20 s, its improvement stages 8-16 s, within the 30 s time limit): with the simulator's
    safety net (oef.improve_s 30 s) the answer is the one of the real clock, where a bound of 3 s
    of wall time (the controller's) cuts stages."""
    params = {"oef.improve_lps": lps, **simulation_params(policies.get("oef"))}
    fast = _oef(params)
    with mock.patch.object(time, "perf_counter", _slow_clock(0.05)):
        slow = _oef(params)
    assert _x(slow) == _x(fast) and slow.info["skipped_for_time"] == fast.info["skipped_for_time"]
    with mock.patch.object(time, "perf_counter", _slow_clock(0.05)):
        cut = _oef({"oef.improve_lps": lps, "oef.improve_s": 3.0})
    assert cut.info["skipped_for_time"] != fast.info["skipped_for_time"]


def test_the_simulator_raises_the_wall_time_bound_to_a_safety_net_unless_the_run_sets_it() -> None:
    table = gavel.load(None)
    workload = generate(4, 2, 1, rate_per_hour=30, table=table, max_duration_s=3600)
    cluster = parse_cluster("v100=4", 4)
    got = Simulator(workload, cluster, table, policies.get("oef"), SimConfig())._policy_options()
    assert got.param("oef", "improve_s") == 30.0 > policies.get("oef").params["improve_s"].default
    mine = Simulator(workload, cluster, table, policies.get("oef"),
                     SimConfig(policy_params={"oef.improve_s": 2.0}))._policy_options()
    assert mine.param("oef", "improve_s") == 2.0
    assert Simulator(workload, cluster, table, policies.get("fifo"), SimConfig())._policy_options().params == {}
