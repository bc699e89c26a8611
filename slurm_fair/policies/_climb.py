"""oef's climb: the convex-concave procedure over SI and linearised EF cuts, and the Pareto
polish, on one warm in-memory group LP (docs/oef.md)."""

from __future__ import annotations

import time

import numpy as np

from .. import fairness
from ..errors import SolverError
from ..model import Problem
from ..solver import INF
from . import PolicyOptions
from ._lp import class_lp, feasible_classes
from ._tenants import ClassX, Tenants, class_bundles, class_efficiency, class_utilities

MAX_ROUNDS = 25
_REL_IMPROVEMENT = 1e-7


class Climb:
    """The convex-concave climb and the Pareto polish on one warm in-memory LP.

    Rows: capacity and demand, one SI row per tenant (``U_u >= V_u((w_u/W) C)``, or the floor
    ``U_u >= U_u^0`` in the polish), then the EF cuts of the current linearisation (replaced at
    every step), then the polish's rows. Columns: ``X_ck``, then ``d_uk >= 0`` (the polish's
    bundle moves; free and unused before). Only the pairs whose cut binds or is violated are in
    the model: the cuts of the pairs with slack are checked at every answer and added when
    violated, then the model is re-solved warm, so the answer is that of the full cut set.
    """

    def __init__(self, problem: Problem, t: Tenants, options: PolicyOptions):
        self.problem, self.t = problem, t
        self.cm = class_lp(problem, "oef_climb", t.classes, options)
        self.dev = {(u, k): self.cm.add_col() for u in t.names for k in problem.types}
        self.cm.set_objective(self.cm.efficiency())
        self.si_rows = self.cm.add_floors(t.si)  # SI: U_u >= V_u((w_u/W) C), re-bounded per step
        self.base = len(self.cm.lp.rows)
        self.solves = 0
        #: the work bound (:meth:`spent`): a step or climb stops with :class:`OutOfTime` once this
        #: many LPs are solved, as at the deadline (None: no bound but the deadline)
        self.lp_limit: int | None = None
        #: per tenant: its columns, their type index and their classes' GPU counts (cut rows)
        self.tenant_cols: list[tuple[list[int], np.ndarray, np.ndarray]] = []
        tix = {k: i for i, k in enumerate(t.types)}
        for u in t.names:
            cols, types, gpus = [], [], []
            for c in t.mine[u]:
                for k, col in self.cm.by_class.get(c.key, {}).items():
                    cols.append(col)
                    types.append(tix[k])
                    gpus.append(float(c.gpus))
            self.tenant_cols.append((cols, np.array(types, dtype=int), np.array(gpus)))

    def _solve(self) -> None:
        self.cm.solve()
        self.solves += 1

    def spent(self) -> int:
        """LPs solved so far by the climbs and the tenants' exact envy LPs: the work that
        :attr:`lp_limit` bounds (a count, so the bound is the same on a loaded machine)."""
        return self.solves + self.t.envy.exact_solves

    def _out(self, deadline: float | None) -> bool:
        """Past the work bound or the deadline."""
        return (self.lp_limit is not None and self.spent() >= self.lp_limit) or \
            (deadline is not None and time.perf_counter() >= deadline)

    def step(self, X: ClassX, deadline: float | None = None) -> dict[int, dict[str, float]]:
        """One linearisation: max E s.t. capacity, demand, SI and an EF cut per pair valid at ``X``.

        Pair ``(u, v)``'s cut is ``U_u >= s_uv p.y_v + Q_u(p)`` for a price vector ``p`` whose
        bound clears the pair at ``X`` (:mod:`._envy`; so ``X`` stays feasible and ``E`` never
        decreases). Cuts enter the model only when the answer violates them; a cut from the pool
        that binds is replaced by the exact LP's certificate at ``X`` (tight there, the
        convex-concave linearisation) and the model re-solved, so the answer is that of the
        linearisation wherever it matters, while exact LPs are solved for binding pairs only.

        With many tenants a step can need an exact LP for most of the ``T^2`` pairs; past the
        ``deadline`` it stops with :class:`OutOfTime` (the step's point is not used).
        """
        t, cm, envy = self.t, self.cm, self.t.envy

        def exact(i: int, j: int) -> None:
            if (self.lp_limit is not None and self.spent() >= self.lp_limit) or \
                    (deadline is not None and envy.exact_solves % 32 == 0 and time.perf_counter() >= deadline):
                raise OutOfTime
            _, P[i, j], Q[i, j] = envy.exact(i, envy.scale[i, j] * Y[j])

        cm.lp.truncate(self.base)
        U, Y = t.arrays(X)
        self._hold_si(U)
        T = len(t.names)
        off = ~np.eye(T, dtype=bool)
        bound, P, Q = envy.pooled(Y)
        tight = np.zeros((T, T), dtype=bool)
        # a pooled cut is used only with room to spare (its constant then needs no lowering below
        # Q_u(p), which keeps it a valid bound); the other pairs get the exact certificate
        for i, j in np.argwhere(envy.needs_exact(bound, U)):
            exact(i, j)
            tight[i, j] = True
        const = np.zeros((T, T))

        def set_const(i: int, j: int) -> None:
            # never let round-off cut X itself off (X is verified SI+EF): at most the cut's value
            # at X, less slack (eps/10; the answer is checked with eps)
            at_x = U[i] - envy.scale[i, j] * float(P[i, j] @ Y[j])
            const[i, j] = min(Q[i, j], at_x) - fairness.slack(U[i])

        for i, j in np.argwhere(off):
            set_const(i, j)
        rows: dict[tuple[int, int], int] = {}

        def add(i: int, j: int) -> None:
            terms = dict(cm.utility(t.names[i]))
            cols, tix, gpus = self.tenant_cols[j]
            coef = envy.scale[i, j] * P[i, j][tix] * gpus
            for col, c in zip(cols, coef):
                if c != 0.0:
                    terms[col] = terms.get(col, 0.0) - float(c)
            rows[i, j] = cm.add_row(terms, float(const[i, j]), INF)

        for i, j in np.argwhere(tight):
            add(i, j)
        while True:
            if self._out(deadline):
                raise OutOfTime
            self._solve()
            X_new = feasible_classes(self.problem, t.classes, cm.values())
            U2, Y2 = t.arrays(X_new)
            lhs = U2[:, None] - envy.scale * np.einsum("ijk,jk->ij", P, Y2)
            tol = 1e-9 * (1.0 + np.abs(const))
            late = (lhs < const - tol) & off
            for key in rows:
                late[key] = False
            if late.any():
                for i, j in np.argwhere(late):
                    add(i, j)
                continue
            loose = [(i, j) for (i, j) in rows if not tight[i, j] and lhs[i, j] <= const[i, j] + 1e-7 * (1.0 + abs(const[i, j]))]
            if not loose:
                return X_new
            for i, j in loose:
                exact(i, j)
                tight[i, j] = True
                cm.lp.set_row_bounds(rows[i, j], -INF, INF)  # retire the pooled cut
                set_const(i, j)
                add(i, j)

    def _hold_si(self, U: np.ndarray) -> None:
        """Each tenant's SI row at its floor, lowered to its utility at the step's point when
        round-off put that below: the point is SI (up to eps) and stays feasible; the answer is
        re-verified."""
        for i, u in enumerate(self.t.names):
            si = min(self.t.si[u], float(U[i]))
            self.cm.lp.set_row_bounds(self.si_rows[u], si - fairness.slack(si), INF)

    def polish(self, X: ClassX) -> tuple[ClassX | None, float]:
        """A Pareto improvement of ``X`` (or None) and the gap ``max E' - E`` found.

        Stage 1: ``max E`` with ``U_u >= U_u(X)``; stage 2: at that ``E``, move the bundles as
        little as possible (L1) from ``X``'s, which keeps envy away when it can be kept away.
        Floors and the ``E`` row are relaxed by ``fairness.slack``; the model is restored to the
        climb's rows even when a solve fails.
        """
        try:
            return self._polish(X)
        except SolverError:
            self.cm.lp.reset()  # rebuild the in-memory model from scratch for the next solve
            raise
        finally:
            self.cm.lp.truncate(self.base)
            self.cm.set_objective(self.cm.efficiency())

    def _polish(self, X: ClassX) -> tuple[ClassX | None, float]:
        t, cm = self.t, self.cm
        cm.lp.truncate(self.base)
        util = class_utilities(t.classes, X)
        e_now = sum(util.values())
        for u in t.names:
            floor = util.get(u, 0.0)
            cm.lp.set_row_bounds(self.si_rows[u], floor - fairness.slack(floor), INF)
        cm.set_objective(cm.efficiency())
        self._solve()
        e_max = cm.lp.objective
        gap = max(0.0, e_max - e_now)
        if gap <= fairness.eps(e_now):
            return None, gap
        cm.add_row(cm.efficiency(), e_max - fairness.slack(e_max), INF)
        bundles = class_bundles(t.classes, X, self.problem.types)
        gpus = {c.key: c.gpus for c in t.classes}
        for u in t.names:
            for k in self.problem.types:
                terms = {cm.by_class[c.key][k]: float(gpus[c.key]) for c in t.mine[u] if k in cm.by_class[c.key]}
                d = self.dev[u, k]
                cm.add_row({**terms, d: -1.0}, -INF, bundles[u][k])
                cm.add_row({**terms, d: 1.0}, bundles[u][k], INF)
        cm.set_objective({d: -1.0 for d in self.dev.values()})
        self._solve()
        X_near = feasible_classes(self.problem, t.classes, cm.values())
        cm.lp.truncate(self.base)
        cm.set_objective(cm.efficiency())
        return X_near, gap

    def first_step_seconds(self, X: ClassX) -> float:
        """An estimate of one climb step from ``X``: its exact envy LPs at the average time of
        those solved so far, times :data:`_STEP_PER_EXACT` for the rows they add and the
        re-solves. With hundreds of tenants this is most of the ``T^2`` pairs."""
        envy = self.t.envy
        U, Y = self.t.arrays(X)
        pairs = envy.undecided(U, Y)
        # too few timed so far: time a few of the pairs the step needs anyway (their duals
        # join the pools, so the step does not pay for them again)
        for i, j in pairs[:max(0, _TIMED_SAMPLE - envy.exact_solves)]:
            envy.exact(int(i), envy.scale[i, j] * Y[j])
        per = envy.exact_seconds / envy.exact_solves if envy.exact_solves else 0.0
        return len(pairs) * per * _STEP_PER_EXACT

    def climb(self, X: ClassX, e: float, deadline: float | None = None) -> tuple[ClassX, float, int, str | None]:
        """Iterate the linearised LP from the SI+EF point ``X`` until ``E`` stops improving (or
        the ``deadline``, a ``time.perf_counter()`` value, passes: every iterate is verified, so
        stopping early returns a verified point).

        The last value says why the climb stopped early when a step's solve failed (the last
        verified point is kept): None when it ran to its end."""
        rounds = 0
        for rounds in range(1, MAX_ROUNDS + 1):
            if self._out(deadline):
                return X, e, rounds - 1, "time limit"
            try:
                X_new = self.step(X, deadline)
            except OutOfTime:
                return X, e, rounds - 1, "time limit"
            except SolverError as exc:
                self.cm.lp.reset()
                return X, e, rounds, str(exc)
            e_new = class_efficiency(self.t.classes, X_new)
            improved = e_new > e + _REL_IMPROVEMENT * (1 + e)
            if not improved:
                break
            if not self.t.fair(X_new):  # round-off broke a property: keep the last verified point
                break
            X, e = X_new, e_new
        return X, e, rounds, None


#: a climb step's cost over that of its exact envy LPs alone (2.8 measured with 200 tenants and
#: 7,207 classes: 23 s for the step, 8.2 s in the 37,840 exact LPs)
_STEP_PER_EXACT = 3.0
#: exact LPs timed before the first estimate of a step
_TIMED_SAMPLE = 16


class OutOfTime(Exception):
    """A climb step passed the deadline: its point is dropped, the last verified one kept."""
