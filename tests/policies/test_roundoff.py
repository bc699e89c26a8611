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

from slurm_fair import fairness, policies
from slurm_fair.model import Job, Problem
from slurm_fair.policies import PolicyOptions

from . import _independent as ind

_DATA = os.path.join(os.path.dirname(__file__), "data", "roundoff_problems.json")
with open(_DATA, encoding="utf-8") as _f:
    PROBLEMS = json.load(_f)


def _problem(doc: dict) -> Problem:
    """The benchmark's problem as it was generated: built directly, not read as PROBLEM.json,
    because some of its jobs ask for more GPUs than any type has (the benchmark keeps them, the
    policies give them nothing; PROBLEM.json refuses them since issue 18)."""
    jobs = [Job(j["id"], j["tenant"], j["gpus"], j["throughput"]) for j in doc["jobs"]]
    return Problem(doc["gpu_types"], {t: v["weight"] for t, v in doc["tenants"].items()}, jobs)


@pytest.mark.parametrize("solver", ["cbc", "highs"])
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_oef_survives_round_off(name: str, solver: str) -> None:
    problem = _problem(PROBLEMS[name])
    a = policies.allocate("oef", problem, PolicyOptions(solver=solver))
    assert a.status == "optimal", a.info.get("fallback_reason")
    assert not a.info["degraded"], a.info["degraded"]
    assert a.info["pareto_efficient"] is True
    x = {j: dict(r) for j, r in (a.tenant_x or a.x).items()}  # the tenant level (docs/oef.md)
    assert ind.capacity_ok(problem, x)
    assert ind.si_ok(problem, x) and ind.ef_ok(problem, x)
    e = sum(ind.utilities(problem, x).values())
    assert ind.pe_gap(problem, x) <= ind.tol(e)


def _job(jid: str, tenant: str, gpus: int, thr: dict) -> Job:
    return Job(jid, tenant, gpus, thr)


# Reduced from the sweep's hypothesis problem 235 (weights 1 and 100, throughput ratios up to
# 1000): the CEEI is SI+EF+PE, but the floors' duals are large, so relaxing the floors of
# the PE check by slack (1e-7) without taking the relaxation back out (fairness.pareto_bound)
# raised max E by 6e-6 > eps and rejected the CEEI; oef then answered a point 0.0098 from PE.
WEIGHTED = Problem(
    {"g0": 4, "g1": 1, "g2": 2}, {"u0": 1.0, "u1": 100.0, "u2": 100.0, "u3": 1.0},
    [_job("u0-0", "u0", 4, {"g0": 2.5, "g1": 2.5, "g2": 0.5}),
     _job("u1-0", "u1", 1, {"g0": 2.5, "g1": 0.01}),
     _job("u2-1", "u2", 4, {"g0": 10.0, "g1": 0.01}),
     _job("u2-2", "u2", 8, {"g0": 10.0, "g1": 2.5}),
     _job("u3-0", "u3", 2, {"g0": 0.01, "g1": 10.0, "g2": 1.0}),
     _job("u3-2", "u3", 1, {"g0": 0.01})],
)

# The sweep's hypothesis problem 125: oef's answer is SI+EF+PE, but HiGHS' presolve called the
# PE check's LP (floors at the answer's utilities, which the answer itself satisfies exactly)
# infeasible; a second run without presolve decides (solver.SmallLP and _independent).
ONE_TYPE = Problem(
    {"g0": 10}, {"u0": 1.0, "u1": 100.0, "u2": 1.0, "tiny": 1.0},
    [_job("u0-0", "u0", 8, {"g0": 10.0}), _job("u0-1", "u0", 4, {"g0": 0.5}),
     _job("u0-2", "u0", 2, {"g0": 1.0}), _job("u1-0", "u1", 1, {"g0": 10.0}),
     _job("u1-1", "u1", 1, {"g0": 1.0}), _job("u1-2", "u1", 4, {"g0": 2.5}),
     _job("u1-3", "u1", 1, {"g0": 7.0}), _job("u2-0", "u2", 2, {"g0": 0.5}),
     _job("u2-1", "u2", 8, {"g0": 10.0}), _job("u2-2", "u2", 4, {"g0": 2.5}),
     _job("u2-3", "u2", 1, {"g0": 2.5}), _job("tiny", "tiny", 1, {"g0": 0.002})],
)


@pytest.mark.parametrize("solver", ["cbc", "highs"])
@pytest.mark.parametrize("problem", [WEIGHTED, ONE_TYPE], ids=["weighted", "one-type"])
def test_oef_pe_checks_agree_under_round_off(problem: Problem, solver: str) -> None:
    a = policies.allocate("oef", problem, PolicyOptions(solver=solver))
    assert a.status == "optimal" and a.info["pareto_efficient"] is True, dict(a.info)
    x = {j: dict(r) for j, r in (a.tenant_x or a.x).items()}  # the tenant level (docs/oef.md)
    assert ind.capacity_ok(problem, x)
    assert ind.si_ok(problem, x) and ind.ef_ok(problem, x)
    e = sum(ind.utilities(problem, x).values())
    assert ind.pe_gap(problem, x) <= ind.tol(e)
    assert fairness.pareto_gap(problem, x) <= fairness.eps(e)  # the package's own judge agrees
