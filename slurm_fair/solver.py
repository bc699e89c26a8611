"""The PuLP boundary: every model of slurm-fair is solved here and nowhere else.

Why one place: a solve can fail in many ways (infeasible, unbounded, time limit, a crashed
solver binary). Gavel's max-min code printed a warning and carried on with ``None``; we always
read PuLP's status, raise :class:`~slurm_fair.errors.SolverError` naming it, and keep the model
as an ``.lp`` file so the failure can be reproduced with any LP solver.

Solvers:
    ``cbc``    PuLP's bundled CBC (always there), messages off, time limit passed on.
    ``highs``  HiGHS through PuLP's in-process ``highspy`` API; needs the optional extra
               (``pip install 'slurm-fair[highs]'``), a :class:`UserError` otherwise.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass
from typing import Mapping

import pulp

from .errors import SolverError, UserError

SOLVERS = ("cbc", "highs")


@dataclass(frozen=True)
class SolveResult:
    """What a successful solve reports: PuLP's status text, the solver used, wall seconds."""

    status: str
    solver: str
    seconds: float
    objective: float | None = None


def highs_available() -> bool:
    """True when ``highspy`` can be imported (PuLP's HiGHS API needs it)."""
    try:
        import highspy  # noqa: F401
    except ImportError:
        return False
    return True


def fastest_available() -> str:
    """The solver used for small internal LPs (bundle values, checks): HiGHS runs in-process,
    so it avoids CBC's process start per solve; CBC when HiGHS is not installed."""
    return "highs" if highs_available() else "cbc"


def make_solver(solver: str, time_limit_s: float | None) -> pulp.LpSolver:
    """A configured PuLP solver object; messages off, the time limit passed to the solver."""
    limit = None if time_limit_s is None else max(1, int(round(time_limit_s)))
    if solver == "cbc":
        return pulp.PULP_CBC_CMD(msg=False, timeLimit=limit)
    if solver == "highs":
        if not highs_available():
            raise UserError(
                "solver 'highs' needs highspy: pip install 'slurm-fair[highs]' (or use --solver cbc)"
            )
        return pulp.HiGHS(msg=False, timeLimit=time_limit_s)
    raise UserError(f"unknown solver {solver!r}; choose one of: {', '.join(SOLVERS)}")


def _keep_model(model: pulp.LpProblem, keep_lp_dir: str | None) -> str:
    """Write ``model`` as an .lp file for diagnosis and return its path."""
    directory = keep_lp_dir or tempfile.mkdtemp(prefix="slurm-fair-lp-")
    os.makedirs(directory, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", model.name or "model")
    path = os.path.join(directory, f"{name}-{os.getpid()}-{time.time_ns()}.lp")
    try:
        model.writeLP(path)
    except Exception as exc:  # pragma: no cover - writing a model should not fail
        return f"(could not write {path}: {exc})"
    return path


def solve(
    model: pulp.LpProblem,
    solver: str = "cbc",
    time_limit_s: float | None = 30.0,
    keep_lp_dir: str | None = None,
) -> SolveResult:
    """Solve ``model`` in place; return a :class:`SolveResult` or raise :class:`SolverError`.

    Only a proven optimum is accepted: a solution stopped by the time limit is feasible at best,
    and a policy promising fairness properties cannot hand that on silently.
    """
    backend = make_solver(solver, time_limit_s)
    start = time.perf_counter()
    try:
        code = model.solve(backend)
    except pulp.PulpSolverError as exc:
        path = _keep_model(model, keep_lp_dir)
        raise SolverError(f"solver {solver} failed on model {model.name!r}: {exc}", path, "Error") from None
    seconds = time.perf_counter() - start
    status = pulp.LpStatus.get(code, str(code))
    sol_status = getattr(model, "sol_status", pulp.LpSolutionOptimal)
    if status != "Optimal" or sol_status != pulp.LpSolutionOptimal:
        if status == "Optimal":
            status = pulp.LpSolution.get(sol_status, "Not optimal")
        path = _keep_model(model, keep_lp_dir)
        raise SolverError(
            f"solver {solver} returned status {status!r} on model {model.name!r}", path, status
        )
    objective = pulp.value(model.objective) if model.objective is not None else None
    return SolveResult(status="optimal", solver=solver, seconds=seconds, objective=objective)


def duals(
    model: pulp.LpProblem, solver: str, names: list[str] | None = None
) -> Mapping[str, float]:
    """Constraint duals in one sign convention: ``>= 0`` for a binding ``<=`` row of a
    maximisation (the price of one more unit of right-hand side).

    CBC reports them that way; PuLP's HiGHS API hands on HiGHS' own sign, which is the opposite
    for maximisation, so it is flipped here rather than in every caller.
    """
    sign = -1.0 if (solver == "highs" and model.sense == pulp.LpMaximize) else 1.0
    rows = model.constraints
    keys = names if names is not None else list(rows)
    return {k: sign * float(rows[k].pi or 0.0) for k in keys}
