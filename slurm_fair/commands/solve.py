"""``slurm-fair solve``: one cycle's allocation from a PROBLEM.json, as docs/fairness.md's JSON.

Thin on purpose: read and validate the problem, run the named policy, add the efficiency bound
``E*`` and ``E / E*`` and this round's placement, write JSON. Bad input exits 2 through
:class:`~slurm_fair.errors.InputError`; a solver failure that the policy replaced by its fallback
is reported on stderr and in ``status``/``fallback_reason``.
"""

from __future__ import annotations

import time

import click

from .. import fairness, policies, rounding
from ..errors import SolverError
from ..inputs import FiniteFloat
from ..policies import PolicyOptions
from ..problem_io import allocation_to_dict, load_problem
from .options import keep_lp_dir_option, output_option, policy_option, policy_params_option, solver_option
from .output import check_distinct, json_text, write_output
from ..statuses import AllocationStatus

#: longest --time-limit: a day per LP (a model that needs longer is a problem of its own)
MAX_TIME_LIMIT_S = 86400.0


@click.command("solve")
@click.option("--input", "input_path", required=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="PROBLEM.json to solve (docs/fairness.md); - reads standard input.")
@policy_option
@solver_option
@click.option("--time-limit", "time_limit", type=FiniteFloat(0.1, MAX_TIME_LIMIT_S), default=60.0, show_default=True,
              help="Seconds allowed per LP solve; for oef also its whole search: every stage stops at "
                   "it, the best verified candidate is returned and the stages cut are listed "
                   "(skipped_for_time, docs/oef.md).")
@policy_params_option
@output_option
@keep_lp_dir_option
def command(input_path: str, policy: str, solver: str, time_limit: float, policy_options: tuple[str, ...],
            output: str | None, keep_lp_dir: str | None) -> None:
    """Compute one cycle's allocation (docs/fairness.md's output format)."""
    check_distinct({"--output": output}, {"--input": input_path})
    started = time.perf_counter()
    info = policies.get(policy)  # unknown policy: UserError before any work
    params = policies.parse_params(policy_options)  # a bad option: UserError (exit 2) before any work
    policies.check_params_run(params, [info.name])
    problem = load_problem(input_path)
    options = PolicyOptions(solver=solver, time_limit_s=time_limit, keep_lp_dir=keep_lp_dir, params=params)
    allocation = info.allocate(problem, options)
    out = allocation_to_dict(problem, allocation)
    bound = allocation.efficiency_bound
    if bound is None:
        try:
            bound = fairness.efficiency_bound(problem)
        except SolverError:
            bound = None
    out["efficiency_bound"] = bound
    out["efficiency_ratio"] = None if bound is None else fairness.efficiency_ratio(out["efficiency"], bound)
    if "tenant_level" in out:  # two levels: E/E* of the bundles (the allocation's own ratio is
        # at least 1 - inside_eps of it: a tenant's jobs are ordered by aging within that room)
        top = sum(t["value"] for t in out["tenant_level"].values())
        out["tenant_level_efficiency_ratio"] = None if bound is None else fairness.efficiency_ratio(top, bound)
    placement = rounding.place(problem, allocation)
    out["placement"] = {"types": dict(placement.types), "priority": dict(placement.priority)}
    out["total_seconds"] = round(time.perf_counter() - started, 6)
    if allocation.status == AllocationStatus.FALLBACK:
        click.echo(
            f"slurm-fair: warning: the {policy} model could not be solved; using the equal split "
            f"with best use instead ({allocation.fallback_reason})",
            err=True,
        )
    write_output(json_text(out), output)
