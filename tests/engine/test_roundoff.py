"""Problems on which solver round-off once made a model of ``oef`` infeasible, so that ``oef``
fell back to the equal split (benchmarks/bench_fairness_price.py, seed 0):

* problem 41: the PE check ``max E s.t. U_u >= U_u(X)`` with floors from a CBC solution that
  used 2.00000001 of 2 GPUs (CBC prints 8 significant digits), floors relaxed by 1e-9 only;
* problem 52: the Pareto polish on the climb's model, same cause.

Fixed by making every candidate exactly feasible before it is checked or gives floors, and by
relaxing every constraint built from a computed value by ``fairness.slack`` (eps / 10). Checked
with both solvers and the independent scipy LPs.
"""

from __future__ import annotations

import json
import os

import pytest

from slurm_fair import policies
from slurm_fair.policies import PolicyOptions
from slurm_fair.problem_io import load_problem

from . import _independent as ind

_DATA = os.path.join(os.path.dirname(__file__), "data", "roundoff_problems.json")
with open(_DATA, encoding="utf-8") as _f:
    PROBLEMS = json.load(_f)


@pytest.mark.parametrize("solver", ["cbc", "highs"])
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_oef_survives_round_off(name: str, solver: str) -> None:
    problem = load_problem(json.dumps(PROBLEMS[name]), source=name)
    a = policies.allocate("oef", problem, PolicyOptions(solver=solver))
    assert a.status == "optimal", a.info.get("fallback_reason")
    assert not a.info["degraded"], a.info["degraded"]
    assert a.info["pareto_efficient"] is True
    x = {j: dict(r) for j, r in a.x.items()}
    assert ind.capacity_ok(problem, x)
    assert ind.si_ok(problem, x) and ind.ef_ok(problem, x)
    e = sum(ind.utilities(problem, x).values())
    assert ind.pe_gap(problem, x) <= ind.tol(e)
