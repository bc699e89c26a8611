"""PROBLEM.json reading, the solve command's exit codes, the solver boundary, rounding."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pulp
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypo_profiles import scaled

from slurm_fair import policies, rounding
from slurm_fair.grouplp import GroupLP
from slurm_fair.cli import cli
from slurm_fair.errors import InputError, SolverError
from slurm_fair.model import Job, Problem
from slurm_fair.policies import PolicyOptions
from slurm_fair.problem_io import parse_problem, problem_to_dict
from slurm_fair.solver import solve

from . import _independent as ind
from .strategies import problems


@settings(max_examples=scaled(20), deadline=None)
@given(problems())
def test_round_trip(problem: Problem) -> None:
    runnable = [j for j in problem.jobs if any(problem.gpu_types.get(k, 0) >= j.gpus and v > 0 for k, v in j.throughput.items())]
    p = Problem(problem.gpu_types, problem.tenants, runnable)
    assert parse_problem(json.dumps(problem_to_dict(p))) == p


BAD = {
    "gpus": ({"id": "j1", "tenant": "a", "gpus": 0, "throughput": {"v100": 1}}, "job j1.gpus"),
    "fraction": ({"id": "j1", "tenant": "a", "gpus": 1.5, "throughput": {"v100": 1}}, "job j1.gpus"),
    "type": ({"id": "j1", "tenant": "a", "gpus": 1, "throughput": {"a100": 1}}, "job j1.throughput.a100"),
    "negative": ({"id": "j1", "tenant": "a", "gpus": 1, "throughput": {"v100": -2}}, "job j1.throughput.v100"),
    "nowhere": ({"id": "j1", "tenant": "a", "gpus": 1, "throughput": {"v100": 0}}, "job j1.throughput"),
    "missing": ({"id": "j1", "tenant": "a", "gpus": 1}, "job j1.throughput"),
    "age": ({"id": "j1", "tenant": "a", "gpus": 1, "throughput": {"v100": 1}, "age_s": -1}, "job j1.age_s"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_job_is_named(case: str) -> None:
    job, where = BAD[case]
    with pytest.raises(InputError) as err:
        parse_problem(json.dumps({"gpu_types": {"v100": 2}, "jobs": [job]}))
    assert where in err.value.message()


def test_duplicates_and_malformed_json() -> None:
    job = {"id": "j1", "tenant": "a", "gpus": 1, "throughput": {"v100": 1}}
    with pytest.raises(InputError, match="duplicate"):
        parse_problem(json.dumps({"gpu_types": {"v100": 2}, "jobs": [job, job]}))
    with pytest.raises(InputError, match="malformed JSON"):
        parse_problem('{"gpu_types": ')


def _write(tmp_path, doc) -> str:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return str(path)


def test_cli_bad_input_exit_2_runner_and_subprocess(tmp_path) -> None:
    from slurm_fair.cli import main

    path = _write(tmp_path, {"gpu_types": {"v100": 2}, "jobs": [BAD["type"][0]]})
    assert main(["solve", "--input", path, "--policy", "oef"]) == 2
    done = subprocess.run([sys.executable, "-c", "import sys; from slurm_fair.cli import main; sys.exit(main())",
                           "solve", "--input", path, "--policy", "oef"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "job j1.throughput.a100" in done.stderr and "Traceback" not in done.stderr


def test_cli_solve_outputs_fairness_format(tmp_path) -> None:
    doc = {"gpu_types": {"v100": 2, "k80": 2}, "tenants": {"a": {"weight": 1}},
           "jobs": [{"id": "j1", "tenant": "a", "gpus": 1, "throughput": {"v100": 3, "k80": 1}},
                    {"id": "j2", "tenant": "b", "gpus": 2, "throughput": {"k80": 1}}]}
    res = CliRunner().invoke(cli, ["solve", "--input", _write(tmp_path, doc), "--policy", "oef", "--solver", "highs"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    for key in ("policy", "status", "solver", "solve_seconds", "allocation", "tenants", "efficiency",
                "efficiency_bound", "efficiency_ratio", "placement"):
        assert key in out
    assert set(out["tenants"]["a"]) == {"bundle", "utility"}


def test_cli_solve_gives_the_tenant_levels_efficiency_beside_the_allocations(tmp_path) -> None:
    """Two levels: the allocation's E/E* counts what the aging inside a tenant gives up; the
    tenant level's is that of the bundles, E* computed independently here."""
    jobs = [{"id": f"a{i}", "tenant": "a", "gpus": g, "throughput": {"v100": 4 * g, "k80": g}}
            for i, g in enumerate([1, 4, 1, 4])]
    jobs += [{"id": f"b{i}", "tenant": "b", "gpus": 1, "throughput": {"v100": 2, "k80": 1}} for i in range(4)]
    doc = {"gpu_types": {"v100": 4, "k80": 4}, "tenants": {"a": {"weight": 1}, "b": {"weight": 1}}, "jobs": jobs}
    res = CliRunner().invoke(cli, ["solve", "--input", _write(tmp_path, doc), "--policy", "oef"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    e_star = ind.max_efficiency(parse_problem(json.dumps(doc)))
    top = sum(t["value"] for t in out["tenant_level"].values())
    assert out["tenant_level_efficiency_ratio"] == pytest.approx(top / e_star, rel=1e-6)
    assert out["efficiency_ratio"] == pytest.approx(out["efficiency"] / e_star, rel=1e-6)
    assert out["tenant_level_efficiency_ratio"] >= out["efficiency_ratio"] - 1e-9


def test_solver_failure_keeps_lp_file(tmp_path) -> None:
    m = pulp.LpProblem("infeasible", pulp.LpMaximize)
    v = pulp.LpVariable("v", lowBound=0)
    m += v
    m += v <= -1
    with pytest.raises(SolverError) as err:
        solve(m, "cbc", 10, str(tmp_path))
    assert err.value.status == "Infeasible"
    assert err.value.lp_file and os.path.exists(err.value.lp_file)


def _break_policy_models(monkeypatch) -> None:
    """Every policy's group LP fails to solve; the measures' (best use, max efficiency) still do."""
    real = GroupLP.solve

    def solve(self):
        if self.lp.name in ("best_use", "max_efficiency"):
            return real(self)
        raise SolverError("forced", "kept.lp", "Not Solved")

    monkeypatch.setattr(GroupLP, "solve", solve)


def test_fallback_is_si_and_ef(monkeypatch) -> None:
    _break_policy_models(monkeypatch)
    p = ind.random_problem(__import__("random").Random(5))
    a = policies.allocate("gavel-mmf", p, PolicyOptions(solver="highs"))
    assert a.status == "fallback"
    x = {j: dict(r) for j, r in (a.tenant_x or a.x).items()}  # the tenant level (docs/oef.md)
    assert ind.capacity_ok(p, x) and ind.si_ok(p, x) and ind.ef_ok(p, x)


def test_oef_degrades_to_a_verified_candidate(monkeypatch) -> None:
    """With every main model failing, oef does not drop to the fallback: it returns the best
    candidate it could still verify (the equal split or the CEEI, whose LPs are separate) and
    names the failed stages in info['degraded']."""
    _break_policy_models(monkeypatch)
    p = ind.random_problem(__import__("random").Random(5))
    a = policies.allocate("oef", p, PolicyOptions(solver="highs"))
    assert a.status == "optimal"
    assert {"max-throughput", "ccp from equal-split", "gavel-mmf"} <= set(a.info["degraded"])
    assert a.info["candidates"]["equal-split"].startswith("SI+EF")
    x = {j: dict(r) for j, r in (a.tenant_x or a.x).items()}  # the tenant level (docs/oef.md)
    assert ind.capacity_ok(p, x) and ind.si_ok(p, x) and ind.ef_ok(p, x)
    if a.info["pareto_efficient"]:  # claimed PE only when verified
        assert ind.pe_gap(p, x) <= ind.tol(sum(ind.utilities(p, x).values()))


@settings(max_examples=scaled(30), deadline=None)
@given(problems())
def test_rounding_never_exceeds_capacity(problem: Problem) -> None:
    a = policies.allocate("gavel-mmf", problem, PolicyOptions(solver="highs"))
    pl = rounding.place(problem, a)
    used = pl.gpus_used(problem)
    assert all(used.get(k, 0) <= c for k, c in problem.gpu_types.items())
    jobs = {j.id: j for j in problem.jobs}
    assert all(jobs[j].throughput.get(k, 0) > 0 for j, k in pl.types.items())


def test_rounding_honours_deficits_and_nodes() -> None:
    p = Problem({"v100": 2}, {}, [Job("a", "a", 2, {"v100": 1}), Job("b", "b", 2, {"v100": 1})])
    from slurm_fair.model import Allocation, NodeCapacity

    alloc = Allocation("t", {"a": {"v100": 0.5}, "b": {"v100": 0.5}})
    # a already ran 60% of the time, b 20%: b is furthest behind and runs
    pl = rounding.place(p, alloc, received={"a": {"v100": 0.6}, "b": {"v100": 0.2}})
    assert dict(pl.types) == {"b": "v100"}
    assert pl.priority["b"] > pl.priority["a"]
    pn = Problem({"v100": 4}, {}, [Job("big", "a", 3, {"v100": 1})],
                 nodes=(NodeCapacity("n1", "v100", 2), NodeCapacity("n2", "v100", 2)))
    pl = rounding.place(pn, Allocation("t", {"big": {"v100": 1.0}}))
    assert dict(pl.node_gpus["big"]) in ({"n1": 2, "n2": 1}, {"n2": 2, "n1": 1})
