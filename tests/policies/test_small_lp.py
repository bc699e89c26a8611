"""The in-process HiGHS models' solver settings (``solver.SmallLP``): primal re-solves after cost
changes reach the optimum of the same LP (checked against scipy's own solver, independently),
and the one-thread request falls back when the process's HiGHS scheduler already runs another
count (a fresh interpreter each, since HiGHS fixes that count per process)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("highspy")
from scipy.optimize import linprog  # noqa: E402

from slurm_fair.solver import INF, SmallLP  # noqa: E402

_coef = st.floats(min_value=0.0, max_value=5.0, allow_nan=False)


@st.composite
def lps(draw: st.DrawFn) -> tuple[list[list[float]], list[float], list[float], list[list[float]]]:
    """``A`` (rows x cols, >= 0), ``b`` (> 0), upper bounds, and a sequence of cost vectors."""
    n = draw(st.integers(2, 8))
    m = draw(st.integers(1, 6))
    A = [[draw(_coef) for _ in range(n)] for _ in range(m)]
    b = [draw(st.floats(min_value=0.5, max_value=20.0)) for _ in range(m)]
    ub = [draw(st.floats(min_value=0.1, max_value=10.0)) for _ in range(n)]
    costs = [[draw(st.floats(min_value=-1.0, max_value=5.0)) for _ in range(n)] for _ in range(draw(st.integers(1, 6)))]
    return A, b, ub, costs


def _scipy_max(A: list[list[float]], b: list[float], ub: list[float], c: list[float]) -> float:
    res = linprog([-v for v in c], A_ub=A, b_ub=b, bounds=[(0.0, u) for u in ub], method="highs")
    assert res.status == 0
    return float(-res.fun)


@settings(max_examples=40, deadline=None)
@given(lps())
def test_primal_resolves_reach_the_same_optimum(lp: tuple[list[list[float]], list[float], list[float],
                                                          list[list[float]]]) -> None:
    A, b, ub, costs = lp
    rows = [([j for j in range(len(r)) if r[j]], [v for v in r if v], -INF, bi) for r, bi in zip(A, b)]
    primal = SmallLP(list(costs[0]), [0.0] * len(ub), list(ub), [(list(c), list(v), lo, hi) for c, v, lo, hi in rows])
    primal.simplex = "primal"
    for c in costs:
        for j, v in enumerate(c):
            primal.set_cost(j, v)
        primal.solve()
        want = _scipy_max(A, b, ub, c)
        assert primal.objective == pytest.approx(want, rel=1e-7, abs=1e-7)
        # the answer is feasible and its value is the objective
        x = primal.x
        assert all(-1e-9 <= xi <= u + 1e-9 for xi, u in zip(x, ub))
        assert all(sum(a * xi for a, xi in zip(r, x)) <= bi + 1e-7 for r, bi in zip(A, b))
        assert sum(ci * xi for ci, xi in zip(c, x)) == pytest.approx(want, rel=1e-7, abs=1e-7)


_SCRIPT = """
import highspy, numpy as np
from slurm_fair import solver
if {first_threads} is not None:
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", {first_threads})
    lp = highspy.HighsLp()
    lp.num_col_ = 1
    lp.col_cost_ = np.array([-1.0]); lp.col_lower_ = np.zeros(1); lp.col_upper_ = np.ones(1)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise; lp.a_matrix_.start_ = np.zeros(2, dtype=np.int32)
    h.passModel(lp)
    assert h.run() == highspy.HighsStatus.kOk
m = solver.SmallLP([1.0, 2.0], [0.0, 0.0], [solver.INF, solver.INF], [([0, 1], [1.0, 1.0], -solver.INF, 3.0)]).solve()
m2 = solver.SmallLP([3.0, 1.0], [0.0, 0.0], [solver.INF, solver.INF], [([0, 1], [1.0, 2.0], -solver.INF, 4.0)]).solve()
print(m.objective, m.duals[0], m2.objective, solver._SMALL_LP_THREADS)
"""


@pytest.mark.parametrize("first_threads, flag", [(None, 1), (2, 0)])
def test_one_thread_or_the_schedulers_count(first_threads: int | None, flag: int) -> None:
    """Without another HiGHS model first, the small models run with one thread; after a model
    that started HiGHS' scheduler with two, they fall back to the default and still solve."""
    out = subprocess.run([sys.executable, "-c", _SCRIPT.format(first_threads=first_threads)], capture_output=True,
                         text=True, timeout=120, check=True).stdout.split()
    assert [float(v) for v in out[-4:-1]] == pytest.approx([6.0, 2.0, 12.0])
    assert int(out[-1]) == flag
