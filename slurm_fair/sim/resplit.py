"""A stale two-level answer kept up to date cheaply: the tenant-level bundles of the last solve
stay, the inside level is shared again for the tenants whose jobs changed.

Why: with bounded staleness (``--stale-s``) the last solution stands while jobs come and go; a
job that arrived since has no share and only takes GPUs nobody else holds, and the share of a
job that left stays idle until the next solve. For a policy in two levels (``oef``, and
``<policy>.inside=1``; :mod:`slurm_fair.policies._inside`) the expensive part is the tenant
level (oef's market, envy cuts and climbs: seconds at 50 tenants); the inside level (each
tenant's bundle shared among its jobs by latency-ratio aging) is one small LP per tenant. So
between solves the tenant-level bundles ``y_u`` of the last solve are kept and the inside level
is run again, by the policy's own :func:`~slurm_fair.policies._inside.two_level` with the
policy's parameters, for exactly the tenants whose active jobs changed since the previous
round: a new job competes for its own tenant's bundle as it would after a solve, and what a
finished job held goes to its tenant's other jobs. Tenants that had no bundle at the solve (new
since) get none until the next solve (their jobs take GPUs nobody holds, as before).

What it costs in guarantees: the bundles were SI and EF for the jobs of the solve, not for the
jobs of the round; docs/simulator.md ("Long histories") and docs/performance.md compare runs.
"""

from __future__ import annotations

from typing import Mapping

from .. import fairness
from ..model import Job, Problem
from ..policies import PolicyInfo, PolicyOptions
from ..policies import _inside as inside

XMap = Mapping[str, Mapping[str, float]]

#: the policy state key the inside level keeps its jobs' isolated JCTs under
_ISO = "oef.iso_jct"


def two_level_policy(policy: PolicyInfo, options: PolicyOptions) -> bool:
    """Whether ``policy`` answers in two levels with these options (its ``inside`` on)."""
    return "inside" in policy.params and options.param(policy.name, "inside") >= 0.5


def changed_tenants(before: Problem, after: Problem) -> set[str]:
    """Tenants whose active jobs differ between two problems (arrived or left)."""
    def ids(p: Problem) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for j in p.jobs:
            out.setdefault(j.tenant, set()).add(j.id)
        return out

    a, b = ids(before), ids(after)
    return {u for u in a.keys() | b.keys() if a.get(u) != b.get(u)}


def resplit(problem: Problem, bundles: Mapping[str, Mapping[str, float]], previous: XMap, tenants: set[str],
            name: str, options: PolicyOptions) -> dict[str, dict[str, float]]:
    """The rows of ``problem``'s jobs: ``previous``'s rows for the tenants not in ``tenants``
    (and for jobs of tenants without a bundle); for each tenant of ``tenants`` holding a bundle
    in ``bundles``, its jobs' shares of that bundle by the policy's inside level. The policy
    state's isolated JCTs (``oef.iso_jct``) gain the new jobs, as a solve would add them."""
    out = {j.id: dict(previous.get(j.id, {})) for j in problem.jobs}
    redo = [u for u in problem.active_tenants if u in tenants and any(v > 1e-12 for v in bundles.get(u, {}).values())]
    if not redo:
        return out
    # each tenant's bundle put on its first job: the inside level reads only the sums per type
    first: dict[str, Job] = {}
    for j in problem.jobs:
        first.setdefault(j.tenant, j)
    x0 = {first[u].id: {k: float(v) / first[u].gpus for k, v in bundles[u].items() if v > 1e-12} for u in redo}
    # as the policy's two_level does: the jobs seen before this call, then the isolated JCTs
    # (of the whole problem: a job's isolated share depends on every active tenant)
    seen = set(options.state.get(_ISO, {}))
    iso = inside.isolated_jcts(problem, options.state)
    rows: dict[str, dict[str, float]] = {}
    for u in redo:
        got, _, _ = inside.share_bundle(problem, u, x0, options, options.param(name, "keep_bonus"),
                                        options.param(name, "rho_weight"), iso, options.param(name, "inside_eps"),
                                        options.param(name, "turn_after_lr") or None, seen,
                                        options.param(name, "turn_first_lr") or None,
                                        options.param(name, "turn_min_speed"))
        rows.update(got)
    jobs = [j for j in problem.jobs if j.tenant in redo]
    for u in redo:
        mine = [j for j in jobs if j.tenant == u]
        if not all(_sound(rows.get(j.id, {}), j.throughput) for j in mine):
            continue  # the inside solve failed and kept the stand-in row: keep the previous rows
        for j in mine:
            out[j.id] = {k: v for k, v in rows.get(j.id, {}).items() if v > 0}
    return out


def _sound(row: Mapping[str, float], throughput: Mapping[str, float]) -> bool:
    """A job's row: at most all of its time, only on types it runs on."""
    return sum(row.values()) <= 1.0 + 1e-9 and all(throughput.get(k, 0.0) > 0 for k, v in row.items() if v > 0)


def bundles_of(problem: Problem, tenant_x: XMap) -> dict[str, dict[str, float]]:
    """The tenant-level bundles ``y_u`` of an answer (:func:`slurm_fair.fairness.tenant_bundles`)."""
    return fairness.tenant_bundles(problem, tenant_x)
