"""oef's tenant level: the candidate search of docs/oef.md ("Cooperative oef"), one method per
stage so each stays short. Every candidate is made exactly feasible and checked exactly (SI, EF
with ``eps``; PE with :func:`slurm_fair.fairness.pareto_bound`) before it counts."""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
from typing import Callable

from .. import fairness
from ..errors import SolverError
from ..jobgroups import JobGroup
from ..model import Allocation, Problem
from . import PolicyOptions
from ._ceei import ceei
from ._ceei_price import price_ceei
from ._ceei_market import Equilibrium
from ._climb import Climb
from ._lp import fallback_allocation, feasible_classes, max_min_classes, max_throughput_classes, result
from ._tenants import ClassX, Tenants, class_efficiency, pareto_ok


#: classes from which the CEEI is tried in price space first: below, the budget iteration's LPs
#: are small and it is the one the sweeps of docs/oef.md measured (500/500 exact)
_PRICE_FROM_CLASSES = 200
#: the price-space CEEI's closing error below which its point is checked as a candidate
_PRICE_CLOSED = 1e-7
#: the improvement stages' work bound counts at least this many tenant pairs (``oef.improve_lps``)
_MIN_PAIRS = 400


class Search:
    """The candidates of one problem, the verified ones, and what happened to each."""

    def __init__(self, problem: Problem, options: PolicyOptions, classes: list[JobGroup], t: Tenants,
                 started: float) -> None:
        self.problem, self.options, self.classes, self.t = problem, options, classes, t
        self.started = started
        self.deadline = started + options.time_limit_s
        self.tried: dict[str, str] = {}
        self.degraded: dict[str, str] = {}
        #: verified candidates: (E, name, X, pareto gap or None when PE was not verified)
        self.fair_points: list[tuple[float, str, ClassX, float | None]] = []
        self.passing: list[tuple[float, str, ClassX]] = []
        self.skipped: list[str] = []
        self.rounds = 0
        self.e_star: float | None = None
        self._lp: Climb | None = None
        self.eq: Equilibrium | None = None
        #: what the price-space CEEI did (steps, closing error, warm start, timed out)
        self.price_info: dict[str, object] = {}
        #: why the improvement stages did not run ("": they ran, as far as time allowed)
        self.not_improved = ""
        #: the improvement stages' work bound: LPs they may solve (None until they start)
        self.lp_budget: int | None = None

    @property
    def lp(self) -> Climb:
        """The climb's warm model, built at the first climb (not when max E is the answer)."""
        if self._lp is None:
            self._lp = Climb(self.problem, self.t, self.options)
        return self._lp

    def clean(self, X: ClassX) -> ClassX:
        return feasible_classes(self.problem, self.classes, X)

    def consider(self, name: str, X: ClassX | None,
                 pe_gain: "Callable[[ClassX], float | None] | None" = None, check_pe: bool = True) -> bool:
        """Check candidate ``X`` exactly; True when it is SI, EF and PE. ``pe_gain(X)``, when
        given, is a certified upper bound on what a Pareto improvement could add to ``E`` (the
        equilibrium's dual certificate, :func:`._ceei_price.pareto_bound_gain`): PE is then
        decided by it when it is at most ``eps(E)``, else (or when None) by the LP check.
        ``check_pe=False`` (the equal split: rarely PE, and its PE check is an LP over all
        classes) keeps an SI+EF point whose PE is checked only if it becomes the answer."""
        if X is None:
            self.tried.setdefault(name, "failed")
            return False
        X = self.clean(X)
        try:
            if not self.t.fair(X):
                self.tried[name] = "not SI+EF"
                return False
        except SolverError as exc:
            self.tried[name] = "check failed"
            self.degraded[f"check of {name}"] = str(exc)
            return False
        e = class_efficiency(self.classes, X)
        if not check_pe:
            self.tried[name] = "SI+EF (PE checked if it is the answer)"
            self.fair_points.append((e, name, X, None))
            return False
        gain = None if pe_gain is None else pe_gain(X)
        try:
            pe, gap = (True, gain) if gain is not None and gain <= fairness.eps(e) else pareto_ok(self.problem, self.t, X)
        except SolverError as exc:
            self.tried[name] = "SI+EF, PE check failed"
            self.degraded[f"PE check of {name}"] = str(exc)
            self.fair_points.append((e, name, X, None))
            return False
        self.fair_points.append((e, name, X, gap))
        if not pe:
            self.tried[name] = f"SI+EF, not PE (gap {gap:.3g})"
            return False
        self.tried[name] = "SI+EF+PE"
        self.passing.append((e, name, X))
        return True

    def max_e(self) -> ClassX | None:
        """Stage 0, the efficiency bound: the answer itself when it is SI and EF (skipped when
        the time limit has passed: ``E*`` is then not known, ``efficiency_ratio`` None)."""
        if time.perf_counter() >= self.deadline:
            self.skipped.append("max-throughput")
            return None
        try:
            top = self.clean(max_throughput_classes(self.problem, self.options, self.classes))
            self.e_star = class_efficiency(self.classes, top)
            if self.t.fair(top):
                return top
            self.tried["max-throughput"] = "not SI+EF"
        except SolverError as exc:
            self.tried["max-throughput"] = "failed"
            self.degraded["max-throughput"] = str(exc)
        return None

    def climb(self, name: str, X: ClassX) -> None:
        """max E s.t. SI+EF (convex-concave) from the fair point X, then a Pareto polish."""
        if self.lp.first_step_seconds(self.clean(X)) > self.deadline - time.perf_counter():
            self.skipped.append(f"ccp from {name} (its first step alone would pass the time limit)")
            return
        X, _, more, why = self.lp.climb(self.clean(X), class_efficiency(self.classes, self.clean(X)), self.deadline)
        self.rounds += more
        if why == "time limit":
            self.skipped.append(f"rest of ccp from {name}" + (" (oef.improve_lps)" if self.out_of_work() else ""))
            if more == 0:
                return  # not one verified step: the starting point was considered already
        elif why is not None:
            self.degraded[f"ccp from {name}"] = why
        try:
            better, _ = self.lp.polish(X)
        except SolverError as exc:
            self.degraded[f"polish from {name}"] = str(exc)
            self.tried[f"ccp+polish from {name}"] = "failed"
            self.consider(f"ccp from {name}", X)
            return
        if not self.consider(f"ccp+polish from {name}", X if better is None else better) and better is not None:
            # the polish broke SI/EF: the climb's own answer may still be PE
            self.consider(f"ccp from {name}", X)

    def at_bound(self) -> bool:
        """A verified candidate reaches E*: no other candidate can be more efficient."""
        e_star = self.e_star
        return e_star is not None and any(e >= e_star - fairness.eps(e_star) for e, _, _ in self.passing)

    def good(self, X: ClassX) -> bool:
        """SI, EF and PE (the CEEI's early stop)."""
        X = self.clean(X)
        try:
            return self.t.fair(X) and pareto_ok(self.problem, self.t, X)[0]
        except SolverError:
            return False

    def ceei(self) -> None:
        """Stage 2: the CEEI, SI+EF+PE by construction (the anytime point): from
        :data:`_PRICE_FROM_CLASSES` classes first in price space (:mod:`._ceei_price`,
        warm-started from ``options.state['oef.ceei_prices']``, until the time limit or a
        stall), candidate ``ceei-price`` when its closing LP reached an exact equilibrium; else
        the Eisenberg-Gale budget iteration (:mod:`._ceei`) until the time limit. The price
        iteration's best prices (closed or not) and those of a budget CEEI that passes are left
        in ``options.state`` for the next call."""
        if len(self.classes) >= _PRICE_FROM_CLASSES:
            self.price_stage()
            if self.eq is not None:
                return
        if time.perf_counter() >= self.deadline:
            self.skipped.append("ceei")
            return
        try:
            self.eq = ceei(self.problem, self.classes, good_enough=self.good, deadline=self.deadline)
        except SolverError as exc:
            self.degraded["ceei"] = str(exc)
        if self.eq is not None and time.perf_counter() >= self.deadline and self.eq.error > 1e-10:
            self.skipped.append(f"rest of ceei (spending error {self.eq.error:.2g})")
        if self.consider("ceei", None if self.eq is None else self.eq.X) and self.eq is not None:
            self.options.state["oef.ceei_prices"] = dict(self.eq.prices)

    def price_stage(self) -> None:
        """The CEEI in price space; ``self.eq`` when it closed and passed the check."""
        warm = self.options.state.get("oef.ceei_prices")
        try:
            got = price_ceei(self.problem, self.classes, self.deadline,
                             warm if isinstance(warm, dict) else None)
        except SolverError as exc:
            self.degraded["ceei-price"] = str(exc)
            got = None
        if got is not None:
            # closed or not, the next call continues from here (a controller's next cycle)
            self.options.state["oef.ceei_prices"] = dict(got.prices)
            self.price_info = {"steps": got.steps, "spending_error": got.eq.error, "warm_start": bool(warm),
                               "timed_out": got.timed_out}
            if got.timed_out:
                self.skipped.append("rest of ceei-price's price iteration")
            if got.eq.error <= _PRICE_CLOSED:
                self._certify(got.prices, got.lam)
            if got.eq.error <= _PRICE_CLOSED and self.consider("ceei-price", got.eq.X, got.pe_gain):
                self.eq = got.eq
                return
            self.tried.setdefault("ceei-price", f"not closed (error {got.eq.error:.2g})")

    def _certify(self, prices: dict[str, float], lam: dict[str, float]) -> None:
        """Put each tenant's equilibrium certificate ``p / lambda_u`` in its envy pool: at a
        CEEI it bounds every bundle the tenant can afford (``(w_u/w_v) y_v`` among them) by
        ``U_u``, so the exact check clears all pairs without a pair LP. Any prices give a valid
        bound (:class:`._envy.EnvyBounds` computes their ``Q_u``), so this only saves LPs."""
        for u, lu in lam.items():
            i = self.t.envy.index.get(u)
            if i is not None and math.isfinite(lu) and lu > 0:
                self.t.envy.add(i, np.array([prices.get(k, 0.0) / lu for k in self.t.types]))

    def gavel(self, X0: ClassX) -> None:
        """gavel-mmf's answer, and the climb from it when it is SI+EF and a better start."""
        gm: ClassX | None = None
        left = self.deadline - time.perf_counter()
        # its HiGHS models stop at the time left (no prediction: a max-min LP over thousands of
        # classes on a small cluster took 9 s where the max-throughput LP of the same classes took 0.3 s)
        bounded = dataclasses.replace(self.options, time_limit_s=max(0.05, left))
        try:
            _, gm, _ = max_min_classes(self.problem, bounded, "oef_gavel", agnostic=False)
        except SolverError as exc:
            if time.perf_counter() >= self.deadline:
                self.skipped.append("gavel-mmf (stopped at the time limit)")
                return
            self.degraded["gavel-mmf"] = str(exc)
        self.consider("gavel-mmf", gm)
        if gm is not None and self.tried["gavel-mmf"].startswith("SI+EF") and \
                class_efficiency(self.classes, self.clean(gm)) > class_efficiency(self.classes, X0):
            self.climb("gavel-mmf", gm)

    def out_of_work(self) -> bool:
        """The improvement stages solved the LPs their work bound allows."""
        return self.lp_budget is not None and self._lp is not None and self._lp.lp_limit is not None and \
            self._lp.spent() >= self._lp.lp_limit

    def start_work_bound(self) -> None:
        """Bound the improvement stages by work: at most ``oef.improve_lps`` LP solves (the
        climbs' and the exact envy LPs) per ordered pair of tenants, counting at least
        :data:`_MIN_PAIRS` pairs (a climb step needs an exact LP for up to every pair). A count,
        not seconds: the same answer and the same cost on an idle or a loaded machine, so a
        simulation is repeatable; ``oef.improve_s`` stays as a safety net in wall time."""
        per_pair = self.options.param("oef", "improve_lps")
        T = len(self.t.names)
        self.lp_budget = int(per_pair * max(T * (T - 1), _MIN_PAIRS))
        self.lp.lp_limit = self.lp.spent() + self.lp_budget

    def improve(self, X0: ClassX) -> None:
        """Stage 3, most promising first, while work and time are left: the climbs from the
        CEEI and from the equal split, then gavel-mmf's answer and the climb from it; for at
        most the work bound (:meth:`start_work_bound`) and ``oef.improve_s`` seconds (and never
        past the time limit)."""
        below = self.options.param("oef", "improve_below_classes")
        if self.tried.get("ceei-price") == "SI+EF+PE" and len(self.classes) >= below:
            # measured (docs/oef.md, "Time limit"): from a few hundred classes on, the stages
            # never moved E above the closed price equilibrium; they only cost time
            self.not_improved = f"the price space closed at {len(self.classes)} classes (oef.improve_below_classes)"
            return
        self.deadline = min(self.deadline, time.perf_counter() + self.options.param("oef", "improve_s"))
        self.start_work_bound()
        eq = self.eq
        stages: list[tuple[str, Callable[[], None]]] = []
        src = "ceei-price" if self.tried.get("ceei-price") == "SI+EF+PE" else "ceei"
        if eq is not None and self.tried.get(src, "").startswith("SI+EF") and \
                class_efficiency(self.classes, self.clean(eq.X)) > class_efficiency(self.classes, X0):
            stages.append((f"ccp from {src}", lambda: self.climb(src, eq.X)))
        stages.append(("ccp from equal-split", lambda: self.climb("equal-split", X0)))
        stages.append(("gavel-mmf", lambda: self.gavel(X0)))
        for name, run in stages:
            if self.at_bound():
                break
            if self.out_of_work():
                self.skipped.append(f"{name} (oef.improve_lps)")
                continue
            if time.perf_counter() >= self.deadline:
                self.skipped.append(name)
                continue
            run()

    def answer(self) -> Allocation:
        """The most efficient SI+EF+PE candidate; else the most efficient SI+EF one (reported
        as not verified PE); the documented fallback when nothing was verified."""
        if self.passing:
            self.passing.sort(key=lambda r: r[0], reverse=True)
            e_best, winner, X = self.passing[0]
            pe, gap = True, 0.0  # type: tuple[bool, float | None]
        elif not self.fair_points:  # every check failed: nothing verified, the documented fallback
            why = "; ".join(f"{k}: {v}" for k, v in self.degraded.items()) or "no candidate could be verified"
            return fallback_allocation(self.problem, "oef", SolverError(f"oef: no verified candidate ({why})", None,
                                                                        "Error"), self.started)
        else:
            self.fair_points.sort(key=lambda r: r[0], reverse=True)
            e_best, winner, X, g = self.fair_points[0]
            pe, gap = False, g
            if g is None and time.perf_counter() >= self.deadline:
                self.skipped.append(f"PE check of {winner}")
            elif g is None:  # its PE was not checked (or the check failed): once more, for the answer
                try:
                    pe, gap = pareto_ok(self.problem, self.t, X)
                except SolverError as exc:
                    self.degraded[f"PE check of {winner}"] = str(exc)
            if not pe:
                winner = f"{winner} (SI+EF, not verified PE)"
        info = {"winner": winner, "candidates": self.tried, "ccp_rounds": self.rounds,
                "time_limit_s": self.options.time_limit_s, "skipped_for_time": self.skipped,
                "exact_envy_lps": self.t.envy.exact_solves,
                "pareto_efficient": pe, "pareto_gap": gap,
                "efficiency_ratio": None if self.e_star is None else fairness.efficiency_ratio(e_best, self.e_star),
                "ceei_spending_error": None if self.eq is None else self.eq.error, "ceei_price": self.price_info,
                "improvement_skipped": self.not_improved, "improve_lp_budget": self.lp_budget,
                "improve_lps_spent": None if self._lp is None or self._lp.lp_limit is None or self.lp_budget is None
                else self._lp.spent() - (self._lp.lp_limit - self.lp_budget), "degraded": self.degraded}
        return result(self.problem, "oef", self.classes, X, self.options, self.started, info,
                      efficiency_bound=self.e_star)
