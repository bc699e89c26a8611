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

Why certificates: EF is ``T (T - 1)`` values per check (1,560 LPs at 40 tenants, a sixth of a
solve's time on a site's history). The duals ``(p, q)`` of tenant ``u``'s best use of its *own*
bundle bound ``V_u(b) <= p.b + sum_c m_c q_c`` for every bundle ``b`` (weak duality,
:meth:`slurm_fair.fairness.BestUse.bound`), so one LP per tenant clears every pair whose bound
is within ``eps(U_u)`` of ``U_u``; only the others get their LP. The verdict is the one of
:func:`slurm_fair.fairness.is_envy_free` (a cleared pair's true envy is below its bound;
``tests/sim/test_fairness_check.py`` compares the two on random problems).
"""

from __future__ import annotations

from typing import Mapping

from .. import fairness
from ..jobgroups import JobGroup, groups_of
from ..model import Problem


def _bundle_key(bundle: Mapping[str, float]) -> tuple:
    return tuple(sorted((k, round(float(v), 9)) for k, v in bundle.items()))


def _signature(classes: list[JobGroup]) -> tuple:
    """What ``V_u`` depends on: the job groups' gang size, rates and count."""
    return tuple(sorted((c.gpus, tuple(sorted(c.n.items())), c.count) for c in classes))


class FairnessChecker:
    """Memoised SI/EF checks over the rounds of one simulation."""

    def __init__(self) -> None:
        self._values: dict[tuple, float] = {}
        self._checks: dict[tuple, tuple[bool, bool]] = {}
        self._certs: dict[tuple, fairness.BestUse] = {}

    def valuer(self, problem: Problem) -> fairness.Valuer:
        """``V_u(b)`` of ``problem``'s tenants, cached across problems: two tenants (of any
        round) whose job groups agree in gang size, ``n`` and count share their values."""
        classes = {u: groups_of(problem, problem.jobs_of(u)) for u in problem.active_tenants}
        sigs = {u: _signature(cs) for u, cs in classes.items()}

        def value(u: str, bundle: Mapping[str, float]) -> float:
            key = (sigs[u], _bundle_key(bundle))
            if key not in self._values:
                self._values[key] = fairness.best_use(classes[u], bundle).value
            return self._values[key]

        return value

    def certificate(self, classes: list[JobGroup], bundle: Mapping[str, float]) -> fairness.BestUse:
        """The best use of a tenant's own ``bundle`` by its job groups ``classes``, with its
        repaired duals, cached like the values (on the groups and the bundle)."""
        key = (_signature(classes), _bundle_key(bundle))
        if key not in self._certs:
            self._certs[key] = fairness.best_use(classes, bundle)
        return self._certs[key]

    def envy_free(self, problem: Problem, x: Mapping[str, Mapping[str, float]]) -> bool:
        """:func:`slurm_fair.fairness.is_envy_free`, with the pairs that a dual certificate
        already at hand clears skipped (module docstring): the envious tenant's own bundle's,
        then those of the exact LPs solved for it so far."""
        utilities = fairness.tenant_utilities(problem, x)
        bundles = fairness.tenant_bundles(problem, x)
        names = problem.active_tenants
        for u in names:
            own = utilities[u]
            mine = groups_of(problem, problem.jobs_of(u))
            pool = [self.certificate(mine, bundles[u])]
            for v in names:
                if u == v:
                    continue
                b = fairness.envied_bundle(problem.weight(u), problem.weight(v), bundles[v])
                # bound - U <= eps(U) <= eps(V) when V >= U, and nothing to show when V < U
                if any(c.bound(b, mine) - own <= fairness.eps(own) for c in pool):
                    continue
                exact = self.certificate(mine, b)
                pool.append(exact)
                e = exact.value - own
                if not e <= fairness.eps(own + e):
                    return False
        return True

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
                                  self.envy_free(problem, x))
        return self._checks[xkey]


def within_bundles(problem: Problem, x: Mapping[str, Mapping[str, float]],
                   tenant_x: Mapping[str, Mapping[str, float]]) -> bool:
    """Every tenant's bundle in ``x`` inside its bundle in ``tenant_x`` (``eps`` per type)."""
    inner, outer = fairness.tenant_bundles(problem, x), fairness.tenant_bundles(problem, tenant_x)
    return all(v <= outer.get(u, {}).get(k, 0.0) + fairness.eps(outer.get(u, {}).get(k, 0.0))
               for u, row in inner.items() for k, v in row.items())
