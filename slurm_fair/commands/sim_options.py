"""The ``simulate`` options in three groups, each folded into one object before the command
runs: the workload (:class:`~slurm_fair.sim.scenario.WorkloadSource`), the cluster
(:class:`~slurm_fair.sim.scenario.ClusterSource`) and the engine
(:class:`~slurm_fair.sim.engine.SimConfig`).

A group is one decorator: its options are declared together (and listed together by ``--help``),
and the command receives ``workload=``, ``cluster=``, ``engine=`` instead of 25 parameters.
"""

from __future__ import annotations

import math

import functools
from typing import Any, Callable

import click

from ..inputs import FiniteFloat, Integer
from ..model import MAX_GPUS
from ..errors import UserError
from ..sim.accounting import UNSEEN_SPEEDS, HistorySource
from ..sim.fairtree import FAIRSHARE_ALGORITHMS
from ..sim.slurmlike import PRIORITIES
from ..sim.engine import SimConfig
from ..sim.scenario import ClusterSource, WorkloadSource, parse_speeds
from ..sim.synthetic import MIXES
from ..sim.workload import parse_weights
from .options import (from_slurm_option, inventory_option, node_type_option, policy_params_option, round_option,
                      sacct_file_option, solver_option, strict_option, traces_option)

F = Callable[..., Any]

#: most jobs (and tenants) --synthetic draws: a trace of a million jobs is already days of simulation
MAX_SYNTHETIC_JOBS = 1_000_000
#: shortest --max-duration-h: one second (1e-12 h drew jobs of 0 steps, and "LR mean inf")
MIN_DURATION_H = 1 / 3600
#: longest start latency or requeue hold (a day: longer is an outage, not a cost of a restart)
MAX_LATENCY_S = 86400.0


def _group(options: list[Callable[[F], F]], name: str, fold: Callable[[dict[str, Any]], Any]) -> Callable[[F], F]:
    """Apply ``options`` (in the order written) and pass ``fold(their values)`` as ``name``."""

    def decorate(f: F) -> F:
        params: set[str] = set()

        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = {key: kwargs.pop(key) for key in params}
            return f(*args, **{name: fold(values)}, **kwargs)

        for option in reversed(options):
            before = len(getattr(wrapper, "__click_params__", []))
            wrapper = option(wrapper)  # type: ignore[assignment]
            params.update(p.name for p in wrapper.__click_params__[before:])  # type: ignore[attr-defined]
        return wrapper

    return decorate


workload_options = _group([
    traces_option,
    click.option("--synthetic", type=Integer(1, MAX_SYNTHETIC_JOBS), default=None, metavar="N",
                 help="Generate N jobs of Gavel's mix instead of reading traces."),
    click.option("--tenants", type=Integer(1, MAX_SYNTHETIC_JOBS), default=4, show_default=True,
                 help="Tenants of --synthetic."),
    click.option("--seed", type=Integer(0, 2**64 - 1), default=0, show_default=True,
                 help="Seed of --synthetic and --node-speed-spread, and of a history's drawn speeds "
                      "(--unseen-speeds drawn; 0: the draw of earlier releases)."),
    click.option("--rate", type=FiniteFloat(1e-3, 1e6), default=20.0, show_default=True,
                 help="Arrivals per hour of --synthetic (Poisson)."),
    click.option("--max-duration-h", type=FiniteFloat(MIN_DURATION_H, 1e6), default=None,
                 help="Cap the durations drawn by --synthetic (hours; at least one second, 0.000278)."),
    click.option("--job-mix", type=click.Choice(MIXES), default="philly", show_default=True,
                 help="GPU counts and durations of --synthetic: Philly's distribution, or Gavel's generator "
                      "(the mix of Gavel's and Hops' load sweeps)."),
    click.option("--window", default=None, metavar="START:END", help="Keep arrivals in [START, END) seconds, re-based to START."),
    click.option("--max-jobs", type=Integer(1), default=None, help="Keep at most N jobs per tenant (after --window)."),
    click.option("--static", is_flag=True, help="All jobs arrive at time 0 (makespan experiments)."),
    click.option("--weight", "weights", multiple=True, metavar="TENANT=W",
                 help="Tenant weight (default 1, or the CSV weight column)."),
], "workload", lambda v: WorkloadSource(
    traces=v["traces"], synthetic=v["synthetic"], tenants=v["tenants"], seed=v["seed"], rate_per_hour=v["rate"],
    max_duration_h=v["max_duration_h"], job_mix=v["job_mix"], window=v["window"], max_jobs=v["max_jobs"], static=v["static"],
    weights=parse_weights(v["weights"]),
))

cluster_options = _group([
    click.option("--cluster", "spec", default=None, metavar="SPEC",
                 help="GPUs per type: v100=8,p100=8,k80=8, nodes x GPUs per node: v100=2x4,k80=1x8, or Gavel's "
                      "36:36:36 (v100:p100:k80). Required but with a history (--sacct-file, --from-slurm)."),
    click.option("--gpus-per-node", type=Integer(1, MAX_GPUS), default=None,
                 help="Cut the types given as a plain count into nodes of this many GPUs."),
    click.option("--node-speed", "node_speeds", multiple=True, metavar="NODE=FACTOR",
                 help="Speed factor of a node (needs nodes: --gpus-per-node or NODESxGPUS)."),
    click.option("--node-speed-spread", type=FiniteFloat(0, 1, hi_open=True), default=0.0, show_default=True,
                 help="Draw node speed factors uniformly in [1-S, 1+S] (needs nodes; seeded by --seed)."),
], "cluster", lambda v: ClusterSource(
    spec=v["spec"], gpus_per_node=v["gpus_per_node"], node_speeds=parse_speeds(v["node_speeds"]),
    node_speed_spread=v["node_speed_spread"],
))

history_options = _group([
    sacct_file_option,
    from_slurm_option,
    click.option("--days", type=FiniteFloat(0, 3650, lo_open=True), default=None,
                 help="With --from-slurm: the last N days (default 90)."),
    inventory_option,
    node_type_option,
    click.option("--tenant-by", type=click.Choice(("account", "user")), default="account", show_default=True,
                 help="With a history: who a tenant is."),
    strict_option,
    click.option("--agnostic-as", type=click.Choice(("slurm", "policy")), default="slurm", show_default=True,
                 help="With a history: run `agnostic` as the site's own Slurm would (priority, backfill by time "
                      "limits, nodes in name order, no preemption), or as slurm-fair's agnostic policy."),
    click.option("--slurm-priority", type=click.Choice(PRIORITIES), default="fifo", show_default=True,
                 help="With a history and --agnostic-as slurm: the site's PriorityType (fifo: priority/basic; "
                      "fairshare: priority/multifactor with fair share and age; shares: --weight)."),
    click.option("--slurm-fairshare", type=click.Choice(FAIRSHARE_ALGORITHMS), default="fair-tree",
                 show_default=True,
                 help="With --slurm-priority fairshare: the site's fair-share factor (fair-tree: Slurm's default, "
                      "accounts then their users ranked by level fair-share; classic: 2^(-U/S), "
                      "PriorityFlags=NO_FAIR_TREE)."),
    click.option("--slurm-bf-interval", type=FiniteFloat(0, 86400, lo_open=True), default=30.0, show_default=True,
                 metavar="S", help="With --agnostic-as slurm: the site's backfill interval (bf_interval, seconds)."),
    click.option("--node-weight", "node_weights", multiple=True, metavar="HOSTLIST=W",
                 help="With --agnostic-as slurm: the nodes' Weight in slurm.conf (Slurm fills the lowest first; "
                      "default: all equal, nodes in name order)."),
    click.option("--slurm-billing", "slurm_billing", multiple=True, metavar="TYPE=W",
                 help="With --slurm-priority fairshare: the partition's TRESBillingWeights for a GPU type "
                      "(GRES/gpu:TYPE=W): the fair-share usage a GPU-second there charges (default 1 on every type)."),
    click.option("--unseen-speeds", type=click.Choice(UNSEEN_SPEEDS), default="drawn", show_default=True,
                 help="With a history: a group's speed on a type it never completed a run on: the learned "
                      "value with a deviation drawn from the site's between-group spread (a site like this "
                      "one: its total gain is right, not which job gains), or the learned value alone (every "
                      "group of a family alike there: less for a policy to gain). One draw is one site like "
                      "this one: --seed S draws another (--array-seed S sweeps them)."),
], "history", lambda v: _history_source(**v))


def _history_source(sacct_file: str | None, from_slurm: bool, days: float | None, inventory: str | None,
                    node_type: tuple[str, ...], tenant_by: str, strict: bool, agnostic_as: str,
                    slurm_priority: str, slurm_bf_interval: float, node_weights: tuple[str, ...],
                    unseen_speeds: str = "drawn", slurm_fairshare: str = "fair-tree",
                    slurm_billing: tuple[str, ...] = ()) -> HistorySource:
    from .speeds import parse_node_types

    weights: dict[str, float] = {}
    for item in node_weights:
        for node, w in parse_node_types((item,), "--node-weight", "HOSTLIST=W, e.g. v100-[1-2]=1").items():
            try:
                weights[node] = float(w)
            except ValueError:
                raise UserError(f"--node-weight {item[:80]!r}: the weight {w!r} is not a number") from None
    billing: dict[str, float] = {}
    for item in slurm_billing:
        kind, eq, w = item.partition("=")
        try:
            value = float(w) if eq and kind.strip() else -1.0
        except ValueError:
            value = -1.0
        if not math.isfinite(value) or value < 0:
            raise UserError(f"--slurm-billing {item[:80]!r}: expected TYPE=W with W a number >= 0, e.g. k80=0.25")
        billing[kind.strip()] = value
    return HistorySource(sacct_file, from_slurm, days, inventory, parse_node_types(node_type), tenant_by, strict,
                         agnostic_as, slurm_priority, slurm_fairshare, slurm_bf_interval, weights, unseen_speeds,
                         billing)


engine_options = _group([
    round_option,
    click.option("--restart-s", type=FiniteFloat(0, MAX_LATENCY_S), default=30.0, show_default=True,
                 help="Start latency of a start, type change or resume."),
    click.option("--requeue-hold-s", type=FiniteFloat(0, MAX_LATENCY_S), default=0.0, show_default=True,
                 help="A job that leaves its GPUs may start again only this long after (Slurm's requeue hold: "
                      "cred_expire + 1)."),
    click.option("--fill-between-rounds", is_flag=True,
                 help="Start waiting jobs on GPUs freed, and arrivals, inside a round (as Slurm does), not at the "
                      "next round."),
    click.option("--reserve-after-lr", type=FiniteFloat(0, 1e6), default=2.0, show_default=True,
                 help="A waiting gang (more than one GPU) allocated time whose wait passes this many times its age "
                      "goes first, and the nodes it needs are kept idle until it fits (0: never)."),
    click.option("--fork-sync", type=FiniteFloat(0, 1, hi_open=True), default=0.10, show_default=True,
                 help="Progress lost by a job running as several copies (HadarE)."),
    click.option("--resolve-every", type=Integer(1), default=1, show_default=True,
                 help="Dynamic policies are solved again every N rounds (and whenever the job set changes)."),
    click.option("--stale-s", type=FiniteFloat(0, 30 * 86400), default=0.0, show_default=True,
                 help="Bounded staleness: reuse a static policy's last solution while jobs arrive and leave, for up "
                      "to S simulated seconds (new jobs take leftover GPUs until the next solve; 0: solve at every "
                      "change). For long histories."),
    click.option("--stale-changes", type=FiniteFloat(0, 1), default=0.25, show_default=True,
                 help="With --stale-s: solve again once this fraction of the active jobs arrived or left."),
    click.option("--horizon-h", type=FiniteFloat(0, 1e6, lo_open=True), default=None,
                 help="Stop after this many simulated hours."),
    click.option("--no-fairness-checks", is_flag=True, help="Skip the per-round SI/EF checks (faster)."),
    policy_params_option,
    click.option("--knowledge", default="oracle", show_default=True, metavar="oracle|untagged|tagged=F",
                 help="What policies know of job speeds: oracle (the true speeds), untagged (type priors, then "
                      "what is learned from finished jobs), tagged=F (a seeded fraction F of jobs tagged)."),
    solver_option,
], "engine", lambda v: _sim_config(**v))


def _sim_config(round_s: float, restart_s: float, requeue_hold_s: float, fill_between_rounds: bool,
                reserve_after_lr: float, fork_sync: float, resolve_every: int, stale_s: float, stale_changes: float,
                horizon_h: float | None,
                no_fairness_checks: bool, solver: str, policy_options: tuple[str, ...] = (),
                knowledge: str = "oracle") -> SimConfig:
    from ..policies import parse_params
    from ..sim.knowledge import parse_knowledge
    from ..solver import resolve

    return SimConfig(
        round_s=round_s, restart_s=restart_s, requeue_hold_s=requeue_hold_s,
        fill_between_rounds=fill_between_rounds, reserve_after_lr=reserve_after_lr or None,
        fork_sync=fork_sync, resolve_every=resolve_every, stale_s=stale_s, stale_changes=stale_changes,
        horizon_s=horizon_h * 3600 if horizon_h else None, check_fairness=not no_fairness_checks,
        solver=resolve(solver), policy_params=parse_params(policy_options), knowledge=parse_knowledge(knowledge),
    )
