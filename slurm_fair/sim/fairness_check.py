"""Per-round SI/EF checks of a policy's allocation, memoised so long simulations stay cheap.

What is checked: the policy's own ``x`` of the round (the shares it asked for, before the
rounding step), with :mod:`slurm_fair.fairness`'s definitions and tolerance. Checking ``x``
judges the policy's decision; the integral placement of one round violates SI for almost any
policy (a tenant whose only job waits this round has utility 0), which says nothing.

Why memoise: SI and EF need ``V_u(b)`` (a small LP) for every tenant and every ordered pair of
tenants. Within a run the same tenant job sets meet the same bundles again and again (same
active set, same allocation), so ``V_u`` is cached on (tenant's job classes, bundle), and a
whole check on (problem job ids, x). The answers are exactly those of
:func:`slurm_fair.fairness.is_sharing_incentive` / :func:`~slurm_fair.fairness.is_envy_free`.
"""

from __future__ import annotations

from typing import Mapping

from .. import fairness
from ..jobclasses import JobClass, classes_of
from ..model import Problem


def _bundle_key(bundle: Mapping[str, float]) -> tuple:
    return tuple(sorted((k, round(float(v), 9)) for k, v in bundle.items()))


class FairnessChecker:
    """Memoised SI/EF checks over the rounds of one simulation."""

    def __init__(self) -> None:
        self._values: dict[tuple, float] = {}
        self._checks: dict[tuple, tuple[bool, bool]] = {}

    def _value(self, classes: list[JobClass], signature: tuple, bundle: Mapping[str, float]) -> float:
        key = (signature, _bundle_key(bundle))
        if key not in self._values:
            self._values[key] = fairness.best_use(classes, bundle).value
        return self._values[key]

    def check(self, problem: Problem, x: Mapping[str, Mapping[str, float]]) -> tuple[bool, bool]:
        """(SI holds, EF holds) for allocation ``x`` of ``problem``."""
        xkey = (
            tuple(sorted(j.id for j in problem.jobs)),
            tuple(sorted((j, _bundle_key(row)) for j, row in x.items())),
            _bundle_key(problem.gpu_types),
            tuple(sorted(problem.tenants.items())),
        )
        if xkey in self._checks:
            return self._checks[xkey]
        utilities = fairness.tenant_utilities(problem, x)
        bundles = fairness.tenant_bundles(problem, x)
        tenants = problem.active_tenants
        classes = {u: classes_of(problem, problem.jobs_of(u)) for u in tenants}
        sigs = {
            u: tuple(sorted((c.gpus, tuple(sorted(c.n.items())), c.count) for c in classes[u]))
            for u in tenants
        }
        si = True
        for u in tenants:
            gap = self._value(classes[u], sigs[u], fairness.equal_share(problem, u)) - utilities[u]
            if gap > fairness.eps(utilities[u] + gap):
                si = False
                break
        ef = True
        for u in tenants:
            for v in tenants:
                if u == v:
                    continue
                scale = problem.weight(u) / problem.weight(v)
                envy = self._value(classes[u], sigs[u], {k: scale * y for k, y in bundles[v].items()}) - utilities[u]
                if envy > fairness.eps(utilities[u] + envy):
                    ef = False
                    break
            if not ef:
                break
        self._checks[xkey] = (si, ef)
        return si, ef
