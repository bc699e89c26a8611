"""Per-round SI/EF checks of a policy's allocation, memoised so long simulations stay cheap.

Two levels (``Allocation.tenant_x``, docs/oef.md): SI and EF are properties of the tenants'
bundles, so the tenant-level allocation is checked, and each tenant's bundle in ``x`` must lie
inside its tenant-level bundle (``y_uk(x) <= y_uk(tenant_x) + eps``, per type): a tenant holding
more than it was given fails both checks.

What is checked: the policy's own ``x`` of the round (the shares it asked for, before the
rounding step), with :func:`slurm_fair.fairness.is_sharing_incentive` and
:func:`~slurm_fair.fairness.is_envy_free` themselves. Checking ``x`` judges the policy's
decision; the integral placement of one round violates SI for almost any policy (a tenant whose
only job waits this round has utility 0), which says nothing.

Why memoise: SI and EF need ``V_u(b)`` (a small LP) for every tenant and every ordered pair of
tenants. Within a run the same tenant job sets meet the same bundles again and again (same
active set, same allocation), so the checks get a :data:`~slurm_fair.fairness.Valuer` that caches
``V_u`` on (tenant's job groups, bundle), and a whole check is cached on (the jobs with their
throughputs, capacities, weights, x).
"""

from __future__ import annotations

from typing import Mapping

from .. import fairness
from ..jobgroups import groups_of
from ..model import Problem


def _bundle_key(bundle: Mapping[str, float]) -> tuple:
    return tuple(sorted((k, round(float(v), 9)) for k, v in bundle.items()))


class FairnessChecker:
    """Memoised SI/EF checks over the rounds of one simulation."""

    def __init__(self) -> None:
        self._values: dict[tuple, float] = {}
        self._checks: dict[tuple, tuple[bool, bool]] = {}

    def valuer(self, problem: Problem) -> fairness.Valuer:
        """``V_u(b)`` of ``problem``'s tenants, cached across problems: two tenants (of any
        round) whose job groups agree in gang size, ``n`` and count share their values."""
        classes = {u: groups_of(problem, problem.jobs_of(u)) for u in problem.active_tenants}
        sigs = {
            u: tuple(sorted((c.gpus, tuple(sorted(c.n.items())), c.count) for c in cs))
            for u, cs in classes.items()
        }

        def value(u: str, bundle: Mapping[str, float]) -> float:
            key = (sigs[u], _bundle_key(bundle))
            if key not in self._values:
                self._values[key] = fairness.best_use(classes[u], bundle).value
            return self._values[key]

        return value

    def check(self, problem: Problem, x: Mapping[str, Mapping[str, float]],
              tenant_x: Mapping[str, Mapping[str, float]] | None = None) -> tuple[bool, bool]:
        """(SI holds, EF holds) for allocation ``x`` of ``problem``; with ``tenant_x`` (two
        levels) for ``tenant_x``, and both False when a tenant's bundle in ``x`` passes its
        bundle in ``tenant_x``."""
        if tenant_x is not None:
            if not within_bundles(problem, x, tenant_x):
                return False, False
            x = tenant_x
        xkey = (
            tuple(sorted((j.id, j.tenant, j.gpus, tuple(sorted(j.throughput.items()))) for j in problem.jobs)),
            tuple(sorted((j, _bundle_key(row)) for j, row in x.items())),
            _bundle_key(problem.gpu_types),
            tuple(sorted(problem.tenants.items())),
        )
        if xkey not in self._checks:
            value = self.valuer(problem)
            self._checks[xkey] = (fairness.is_sharing_incentive(problem, x, value),
                                  fairness.is_envy_free(problem, x, value))
        return self._checks[xkey]


def within_bundles(problem: Problem, x: Mapping[str, Mapping[str, float]],
                   tenant_x: Mapping[str, Mapping[str, float]]) -> bool:
    """Every tenant's bundle in ``x`` inside its bundle in ``tenant_x`` (``eps`` per type)."""
    inner, outer = fairness.tenant_bundles(problem, x), fairness.tenant_bundles(problem, tenant_x)
    return all(v <= outer.get(u, {}).get(k, 0.0) + fairness.eps(outer.get(u, {}).get(k, 0.0))
               for u, row in inner.items() for k, v in row.items())
