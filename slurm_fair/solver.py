"""The PuLP boundary: every model of slurm-fair is solved here and nowhere else.

Why one place: a solve can fail in many ways (infeasible, unbounded, time limit, a crashed
solver binary). Gavel's max-min code printed a warning and carried on with ``None``; we always
read PuLP's status, raise :class:`~slurm_fair.errors.SolverError` naming it, and keep the model
as an ``.lp`` file so the failure can be reproduced with any LP solver, in the directory the
caller names (``keep_lp_dir``: the controller's state directory, ``solve --keep-lp-dir``); without
one nothing is written, so no solve leaves a file in the temporary directory.

Solvers:
    ``auto``   the default everywhere (policy options, ``solve``/``simulate``, the controller's
               ``[controller].solver``): ``highs`` when ``highspy`` is installed, else ``cbc``.
    ``cbc``    PuLP's bundled CBC (always there), messages off, time limit passed on.
    ``highs``  HiGHS through PuLP's in-process ``highspy`` API; needs the optional extra
               (``pip install 'slurm-fair[highs]'``), a :class:`UserError` otherwise.
"""

from __future__ import annotations

import os
import sys
import re
import time
from dataclasses import dataclass
from typing import Any, Mapping

import pulp

from .errors import SolverError, UserError, printable

SOLVERS = ("cbc", "highs")
#: what a user may ask for: a solver, or ``auto`` (see :func:`resolve`)
SOLVER_CHOICES = ("auto",) + SOLVERS


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


def resolve(solver: str | None) -> str:
    """The one default rule: ``auto`` (or None) is ``highs`` in-process when ``highspy`` is
    installed, else ``cbc``; ``cbc`` and ``highs`` are kept as asked (forcing)."""
    if solver in (None, "auto"):
        return fastest_available()
    if solver not in SOLVERS:
        raise UserError(f"unknown solver {solver!r}; choose one of: {', '.join(SOLVER_CHOICES)}")
    return solver


def make_solver(solver: str, time_limit_s: float | None, gap_rel: float | None = None) -> pulp.LpSolver:
    """A configured PuLP solver object; messages off, the time limit and the relative MIP gap
    (None: the solver's default) passed to the solver."""
    solver = resolve(solver)
    limit = None if time_limit_s is None else max(1, int(round(time_limit_s)))
    if solver == "cbc":
        return pulp.PULP_CBC_CMD(msg=False, timeLimit=limit, gapRel=gap_rel)
    if solver == "highs":
        if not highs_available():
            raise UserError(
                "solver 'highs' needs highspy: pip install 'slurm-fair[highs]' (or use --solver cbc)"
            )
        _new_highs()  # PuLP's HiGHS makes its own Highs: the process's banner is spent here first
        return pulp.HiGHS(msg=False, timeLimit=time_limit_s, gapRel=gap_rel)
    raise UserError(f"unknown solver {solver!r}; choose one of: {', '.join(SOLVER_CHOICES)}")


def _keep_model(model: pulp.LpProblem, keep_lp_dir: str | None) -> str | None:
    """Write ``model`` as an .lp file for diagnosis into ``keep_lp_dir`` and return its path;
    None without a directory (a solve leaves no file behind unless asked to: a fallback or a
    user's bad input must not litter the temporary directory)."""
    if not keep_lp_dir:
        return None
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", model.name or "model")
    path = os.path.join(keep_lp_dir, f"{name}-{os.getpid()}-{time.time_ns()}.lp")
    try:  # keeping the model is a diagnosis: its failure must not replace the solve's error
        os.makedirs(keep_lp_dir, exist_ok=True)
        model.writeLP(path)
    except Exception as exc:  # noqa: BLE001 - any failure (no space, a file in the way) is only a note
        return f"(could not keep the model in {printable(keep_lp_dir)}: {printable(str(exc))})"
    return path


def solve(
    model: pulp.LpProblem,
    solver: str = "auto",
    time_limit_s: float | None = 30.0,
    keep_lp_dir: str | None = None,
    gap_rel: float | None = None,
) -> SolveResult:
    """Solve ``model`` in place; return a :class:`SolveResult` or raise :class:`SolverError`.

    Only a proven optimum is accepted: a solution stopped by the time limit is feasible at best,
    and a policy promising fairness properties cannot hand that on silently. ``gap_rel`` (a MIP's
    relative gap, e.g. Hops' 0.01) makes "optimal" mean "proven within that gap".
    """
    solver = resolve(solver)
    backend = make_solver(solver, time_limit_s, gap_rel)
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
    sign = -1.0 if (resolve(solver) == "highs" and model.sense == pulp.LpMaximize) else 1.0
    rows = model.constraints
    keys = names if names is not None else list(rows)
    return {k: sign * float(rows[k].pi or 0.0) for k in keys}


def _highs_error():
    import highspy

    return highspy.HighsStatus.kError


# --- small LPs in-process -----------------------------------------------------------------------

INF = float("inf")


_BANNER_SHOWN = False

#: threads of the in-process HiGHS models: 1 unless the process's HiGHS scheduler was started
#: with more by someone else (then HiGHS refuses a run asking for another count, and the models
#: go back to HiGHS' default). The small LPs are solved by HiGHS' serial dual simplex whatever
#: this says (its threads serve the parallel simplex variants, IPM and MIP); asking for one
#: skips the per-run thread bookkeeping: measured 106 -> 71 us per warm re-solve of a best-use
#: LP, the same answers (docs/performance.md, "oef's solve at site scale").
_SMALL_LP_THREADS = 1


def _new_highs():
    """A ``highspy.Highs`` without its banner on standard output.

    highspy 1.16 prints "Running HiGHS ..." from C++ to file descriptor 1 when the first model
    of a process is created, before any option can switch logging off; ``slurm-fair solve``
    prints its JSON there, so the first construction runs with fd 1 pointed at /dev/null."""
    global _BANNER_SHOWN
    import highspy

    if _BANNER_SHOWN:
        return highspy.Highs()
    _BANNER_SHOWN = True
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # no fd 1 (a daemon): nothing to protect
        return highspy.Highs()
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
            return highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _threads_refused(h: Any) -> None:
    """A run HiGHS refused before solving: when the model asked for its own thread count and
    the process's scheduler runs another (started by another model with HiGHS' default), the
    model and every later one use the default, and the run is done again."""
    global _SMALL_LP_THREADS
    asked = h.getOptionValue("threads")
    if (asked[1] if isinstance(asked, tuple) else asked) != 0:  # highspy 1.16 returns (status, value)
        _SMALL_LP_THREADS = 0
        h.setOptionValue("threads", 0)
        h.run()


@dataclass
class SmallLP:
    """A small maximisation LP kept in memory: ``max c.x`` s.t. ``lo_r <= A_r x <= hi_r``,
    ``lb <= x <= ub``. Rows can be added and costs changed between solves.

    Solved with HiGHS in-process (``highspy``; the model is kept and re-solved warm) when it is
    installed, otherwise through PuLP with the ``fallback`` solver (CBC): the internal LPs of the
    policies (bundle values, fairness checks, market prices) are many and small, and starting a
    solver process for each one costs more than solving it.

    ``duals[r]`` is the price of row ``r`` in the usual sign for a maximisation: ``>= 0`` for a
    binding ``<=`` row, ``<= 0`` for a binding ``>=`` row.
    """

    cost: list[float]
    lb: list[float]
    ub: list[float]
    rows: list[tuple[list[int], list[float], float, float]]
    name: str = "small_lp"
    fallback: str = "cbc"
    #: "highs" or "cbc" to force a backend; None: HiGHS in-process when installed
    backend: str | None = None
    #: seconds allowed per solve (None: no limit); a solve stopped by it raises SolverError
    time_limit_s: float | None = None
    #: where a failed model is written for diagnosis (None: not written)
    keep_lp_dir: str | None = None
    #: HiGHS' simplex for the re-solves: None its default (dual), "primal" for a model whose
    #: re-solves mostly change costs (the last basis stays primal feasible, so primal simplex
    #: starts from it where dual simplex has to restore dual feasibility first: the CEEI's
    #: Eisenberg-Gale LP took 634 dual iterations a re-solve, 110 primal ones). The first
    #: solve of a model is HiGHS' default either way.
    simplex: str | None = None

    def __post_init__(self) -> None:
        self._h: Any = None  # a highspy.Highs (untyped)
        self._h_rows = 0
        self.x: list[float] = []
        self.duals: list[float] = []
        self.objective = 0.0

    @property
    def solver_name(self) -> str:
        """The backend the next solve uses: ``highs`` (in-process) or ``cbc`` (through PuLP)."""
        return "highs" if self.backend != "cbc" and highs_available() else self.fallback

    def reset(self) -> None:
        """Forget the in-memory solver model (the next solve starts from scratch)."""
        self._h = None
        self._h_rows = 0

    def add_row(self, cols: list[int], vals: list[float], lo: float, hi: float) -> int:
        self.rows.append((list(cols), list(vals), lo, hi))
        return len(self.rows) - 1

    def truncate(self, nrows: int) -> None:
        """Drop the rows from ``nrows`` on (the in-memory model keeps its basis for the rest)."""
        if nrows >= len(self.rows):
            return
        if self._h is not None and self._h_rows > nrows:
            import numpy as np

            gone = np.arange(nrows, self._h_rows, dtype=np.int32)
            if self._h.deleteRows(len(gone), gone) == _highs_error():
                raise SolverError(f"solver highs could not delete rows of model {self.name!r}", None, "Error")
            self._h_rows = nrows
        del self.rows[nrows:]

    def set_row_bounds(self, row: int, lo: float, hi: float) -> None:
        cols, vals, _, _ = self.rows[row]
        self.rows[row] = (cols, vals, lo, hi)
        if self._h is not None and row < self._h_rows:
            import highspy

            inf = highspy.kHighsInf
            self._h.changeRowBounds(row, -inf if lo == -INF else lo, inf if hi == INF else hi)

    def set_cost(self, col: int, value: float) -> None:
        self.cost[col] = value
        if self._h is not None:
            self._h.changeColCost(col, -value)

    def solve(self, infeasible_ok: bool = False) -> "SmallLP":
        """Solve; raise :class:`SolverError` unless optimal.

        With ``infeasible_ok`` an infeasible model is an answer, not a failure: ``self.infeasible``
        is set and nothing is written (feasibility probes such as gavel-ftf's bisection expect
        many infeasible models and must not leave a model file behind for each).
        """
        self.infeasible = False
        if self.solver_name == "highs":
            self._solve_highs(infeasible_ok)
            return self
        try:
            self._solve_pulp()
        except SolverError as exc:
            if not (infeasible_ok and exc.status == "Infeasible"):
                raise
            self.infeasible = True
        return self

    def _fail_highs(self, status: str) -> None:
        path = None
        if self.keep_lp_dir:  # kept only where asked (see _keep_model)
            try:
                os.makedirs(self.keep_lp_dir, exist_ok=True)
                name = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.name)
                path = os.path.join(self.keep_lp_dir, f"{name}-{os.getpid()}-{time.time_ns()}.mps")
                self._h.writeModel(path)
            except Exception:  # pragma: no cover - writing a model should not fail
                path = None
        raise SolverError(f"solver highs returned status {status!r} on model {self.name!r}", path, status)

    def _solve_highs(self, infeasible_ok: bool = False) -> None:
        import highspy
        import numpy as np

        inf = highspy.kHighsInf
        big = lambda v: inf if v == INF else (-inf if v == -INF else v)  # noqa: E731
        if self._h is None:
            h = _new_highs()
            h.setOptionValue("output_flag", False)
            h.setOptionValue("primal_feasibility_tolerance", 1e-9)
            h.setOptionValue("dual_feasibility_tolerance", 1e-9)
            if _SMALL_LP_THREADS:
                h.setOptionValue("threads", _SMALL_LP_THREADS)
            if self.time_limit_s is not None:
                h.setOptionValue("time_limit", float(self.time_limit_s))
            n = len(self.cost)
            lp = highspy.HighsLp()
            lp.num_col_ = n
            lp.num_row_ = 0
            lp.col_cost_ = np.array([-c for c in self.cost], dtype=float)
            lp.col_lower_ = np.array([big(v) for v in self.lb], dtype=float)
            lp.col_upper_ = np.array([big(v) for v in self.ub], dtype=float)
            lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
            lp.a_matrix_.start_ = np.zeros(n + 1, dtype=np.int32)
            h.passModel(lp)
            self._h, self._h_rows = h, 0
        h = self._h
        new = self.rows[self._h_rows:]
        if new:
            starts: list[int] = []
            index: list[int] = []
            value: list[float] = []
            for cols, vals, _, _ in new:
                starts.append(len(index))
                index.extend(cols)
                value.extend(vals)
            status = h.addRows(len(new), np.array([big(r[2]) for r in new], dtype=float),
                      np.array([big(r[3]) for r in new], dtype=float), len(index),
                      np.array(starts, dtype=np.int32), np.array(index, dtype=np.int32),
                      np.array(value, dtype=float))
            if status == highspy.HighsStatus.kError:
                raise SolverError(f"solver highs rejected the rows of model {self.name!r}", None, "Error")
            self._h_rows = len(self.rows)
        if self.simplex == "primal" and h.getBasis().valid:
            h.setOptionValue("simplex_strategy", 4)
        if h.run() == highspy.HighsStatus.kError and h.getModelStatus() == highspy.HighsModelStatus.kNotset:
            _threads_refused(h)
        status = h.getModelStatus()
        if status == highspy.HighsModelStatus.kInfeasible and not infeasible_ok:
            # HiGHS' presolve can call a feasible LP with nearly dependent rows infeasible (seen
            # with floors taken from a feasible allocation): decide once more without it
            h.setOptionValue("presolve", "off")
            h.run()
            status = h.getModelStatus()
            h.setOptionValue("presolve", "choose")
        if infeasible_ok and status == highspy.HighsModelStatus.kInfeasible:
            self.infeasible = True
            return
        if status != highspy.HighsModelStatus.kOptimal:
            self._fail_highs(h.modelStatusToString(status))
        sol = h.getSolution()
        self.x = list(sol.col_value)
        self.duals = [-d for d in sol.row_dual]
        self.objective = -h.getObjectiveValue()

    def _solve_pulp(self) -> None:
        model = pulp.LpProblem(self.name, pulp.LpMaximize)
        xs = [pulp.LpVariable(f"x{i}", lowBound=None if lo == -INF else lo, upBound=None if hi == INF else hi)
              for i, (lo, hi) in enumerate(zip(self.lb, self.ub))]
        model += pulp.LpAffineExpression({xs[i]: c for i, c in enumerate(self.cost) if c})
        names: list[tuple[str, ...]] = []
        for r, (cols, vals, lo, hi) in enumerate(self.rows):
            expr = pulp.LpAffineExpression({xs[i]: v for i, v in zip(cols, vals)})
            if lo == hi:
                model += pulp.LpConstraint(expr, pulp.LpConstraintEQ, f"r{r}", lo)
                names.append((f"r{r}",))
                continue
            pair = []
            if hi != INF:
                model += pulp.LpConstraint(expr, pulp.LpConstraintLE, f"r{r}u", hi)
                pair.append(f"r{r}u")
            if lo != -INF:
                model += pulp.LpConstraint(expr, pulp.LpConstraintGE, f"r{r}l", lo)
                pair.append(f"r{r}l")
            names.append(tuple(pair))
        solve(model, self.fallback, time_limit_s=self.time_limit_s, keep_lp_dir=self.keep_lp_dir)
        d = duals(model, self.fallback)
        self.x = [float(v.varValue or 0.0) for v in xs]
        self.duals = [sum(d.get(nm, 0.0) for nm in pair) for pair in names]
        self.objective = float(pulp.value(model.objective) or 0.0)
