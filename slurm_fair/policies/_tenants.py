"""oef's view of a class solution by tenant: utilities, bundles, the SI constants, the envy
bounds (:mod:`._envy`) and the exact SI/EF/PE check every oef candidate must pass."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from .. import fairness
from ..jobgroups import JobGroup
from ..model import Problem
from ._envy import EnvyBounds

ClassX = Mapping[int, Mapping[str, float]]


def class_utilities(classes: list[JobGroup], X: ClassX) -> dict[str, float]:
    """``U_u`` of a class solution."""
    out: dict[str, float] = {}
    for c in classes:
        out[c.tenant] = out.get(c.tenant, 0.0) + sum(c.n.get(k, 0.0) * v for k, v in X.get(c.key, {}).items())
    return out


def class_bundles(classes: list[JobGroup], X: ClassX, types: list[str]) -> dict[str, dict[str, float]]:
    """``y_uk`` of a class solution."""
    out: dict[str, dict[str, float]] = {}
    for c in classes:
        row = out.setdefault(c.tenant, {k: 0.0 for k in types})
        for k, v in X.get(c.key, {}).items():
            row[k] += c.gpus * v
    return out


def class_efficiency(classes: list[JobGroup], X: ClassX) -> float:
    """``E`` of a class solution."""
    return sum(class_utilities(classes, X).values())


class Tenants:
    """Per-tenant class lists, weights, the SI constants and the envy bounds of one problem."""

    def __init__(self, problem: Problem, classes: list[JobGroup]):
        self.problem = problem
        self.classes = classes
        self.names = problem.active_tenants
        self.types = problem.types
        self.mine: dict[str, list[JobGroup]] = {u: [] for u in self.names}
        for c in classes:
            self.mine.setdefault(c.tenant, []).append(c)
        self.weight = {u: problem.weight(u) for u in self.names}
        self.value_of = {u: fairness.BestUseModel(self.mine[u], problem.types) for u in self.names}
        self.envy = EnvyBounds(self.names, self.types, self.mine, self.weight, self.value_of)
        self.si: dict[str, float] = {}
        #: the equal split with best use (:func:`._lp.equal_split_classes`), a by-product of SI
        self.equal_split: dict[int, dict[str, float]] = {}
        for i, u in enumerate(self.names):
            at_share = self.value_of[u](fairness.equal_share(problem, u))
            self.si[u] = at_share.value
            self.equal_split.update(at_share.z)
            # the equal share's duals clear every pair at the equal split: v's bundle, scaled to
            # u's weight, is inside u's equal share
            self.envy.add(i, np.array([at_share.p.get(k, 0.0) for k in self.types]))
        self.si_vec = np.array([self.si[u] for u in self.names])
        self._class_tenant = {c.key: self.envy.index[c.tenant] for c in classes}
        self._class_gpus = {c.key: float(c.gpus) for c in classes}
        self._class_n = {c.key: c.n for c in classes}
        self._type_index = {k: i for i, k in enumerate(self.types)}

    def arrays(self, X: ClassX) -> tuple[np.ndarray, np.ndarray]:
        """Utilities ``U`` (``T``) and bundles ``Y`` (``T x K``) of a class solution, tenant order."""
        U = np.zeros(len(self.names))
        Y = np.zeros((len(self.names), len(self.types)))
        for ck, row in X.items():
            i = self._class_tenant.get(ck)
            if i is None:
                continue
            n, g = self._class_n[ck], self._class_gpus[ck]
            for k, v in row.items():
                U[i] += n.get(k, 0.0) * v
                Y[i, self._type_index[k]] += g * v
        return U, Y

    def fair(self, X: ClassX) -> bool:
        """SI and EF of a class solution, exactly as docs/fairness.md checks them: pooled dual
        bounds decide most pairs; the others get their exact LP (and the first envious pair
        ends the check)."""
        U, Y = self.arrays(X)
        # fairness.eps is elementwise on arrays (its formula is arithmetic only)
        if np.any(U < self.si_vec - fairness.eps(self.si_vec)):  # type: ignore[arg-type]
            return False
        bound, _, _ = self.envy.pooled(Y)
        # V <= bound <= U + eps(U) implies U >= V - eps(V) (eps grows with its argument)
        undecided = bound > (U + fairness.eps(U))[:, None]  # type: ignore[arg-type]
        np.fill_diagonal(undecided, False)
        for i, j in np.argwhere(undecided):
            value, _, _ = self.envy.exact(i, self.envy.scale[i, j] * Y[j])
            if U[i] < value - fairness.eps(value):
                return False
        return True


def pareto_ok(problem: Problem, t: Tenants, X: ClassX) -> tuple[bool, float]:
    """Exact PE check of a class solution: ``max E s.t. U_u >= U_u(X)`` is at most ``E + eps``
    (the maximum bounded from above by :func:`slurm_fair.fairness.pareto_bound`, which relaxes
    the floors against round-off and takes the relaxation back out with the floors' duals)."""
    util = class_utilities(t.classes, X)
    e = sum(util.values())
    best = fairness.pareto_bound(problem, t.classes, util)
    gap = max(0.0, best - e)
    return gap <= fairness.eps(e), gap
