"""``slurm-fair simulate``: run policies over one workload and compare them (issue 5).

Thin: options are parsed here, the work is in :mod:`slurm_fair.sim`. Every policy sees the
same workload, cluster and throughput table; results go to a rich table, ``--json`` and
``--plot``.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from .. import policies
from ..estimates import gavel as tt
from ..errors import UserError
from ..sim import report
from ..sim.cluster import parse_cluster, with_speeds
from ..sim.engine import SimConfig, simulate
from ..sim.synthetic import generate
from ..sim.workload import load_traces, parse_weights, parse_window, write_csv


def _speeds(items: tuple[str, ...]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise UserError(f"--node-speed {item!r}: expected NODE=FACTOR, e.g. v100-1=0.8") from None
        if not sep:
            raise UserError(f"--node-speed {item!r}: expected NODE=FACTOR, e.g. v100-1=0.8")
    return out


@click.command("simulate")
@click.option("--trace", "traces", multiple=True, type=click.Path(dir_okay=False),
              help="Trace CSV or Gavel .trace file (repeat: one tenant per Gavel file).")
@click.option("--synthetic", type=int, default=None, metavar="N", help="Generate N jobs of Gavel's mix instead of reading traces.")
@click.option("--tenants", type=int, default=4, show_default=True, help="Tenants of --synthetic.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --synthetic and --node-speed-spread.")
@click.option("--rate", type=float, default=20.0, show_default=True, help="Arrivals per hour of --synthetic (Poisson).")
@click.option("--max-duration-h", type=float, default=None, help="Cap the durations drawn by --synthetic (hours).")
@click.option("--cluster", "cluster_spec", required=True,
              help="GPUs per type: v100=8,p100=8,k80=8, nodes x GPUs per node: v100=2x4,k80=1x8, or Gavel's 36:36:36 (v100:p100:k80).")
@click.option("--gpus-per-node", type=int, default=None, help="Cut the types given as a plain count into nodes of this many GPUs.")
@click.option("--node-speed", "node_speeds", multiple=True, metavar="NODE=FACTOR", help="Speed factor of a node (needs --gpus-per-node).")
@click.option("--node-speed-spread", type=float, default=0.0, show_default=True,
              help="Draw node speed factors uniformly in [1-S, 1+S] (needs --gpus-per-node).")
@click.option("--throughputs", type=click.Path(dir_okay=False), default=None,
              help="Gavel-format throughput JSON (default: the embedded measured table).")
@click.option("--policy", "policy_names", multiple=True, required=True, help="Policy to run (repeat to compare).")
@click.option("--round-s", type=float, default=360.0, show_default=True, help="Round length in seconds.")
@click.option("--restart-s", type=float, default=30.0, show_default=True, help="Start latency of a start, type change or resume.")
@click.option("--requeue-hold-s", type=float, default=0.0, show_default=True,
              help="A job that leaves its GPUs may start again only this long after (Slurm's requeue hold: cred_expire + 1).")
@click.option("--fill-between-rounds", is_flag=True,
              help="Start waiting jobs on GPUs freed, and arrivals, inside a round (as Slurm does), not at the next round.")
@click.option("--fork-sync", type=float, default=0.10, show_default=True, help="Progress lost by a job running as several copies (HadarE).")
@click.option("--resolve-every", type=int, default=1, show_default=True,
              help="Dynamic policies are solved again every N rounds (and whenever the job set changes).")
@click.option("--static", is_flag=True, help="All jobs arrive at time 0 (makespan experiments).")
@click.option("--window", default=None, metavar="START:END", help="Keep arrivals in [START, END) seconds, re-based to START.")
@click.option("--max-jobs", type=int, default=None, help="Keep at most N jobs per tenant (after --window).")
@click.option("--weight", "weights", multiple=True, metavar="TENANT=W", help="Tenant weight (default 1, or the CSV weight column).")
@click.option("--solver", type=click.Choice(["auto", "cbc", "highs"]), default="auto", show_default=True,
              help="LP solver: auto (highs in-process when highspy is installed, else cbc), or force cbc or highs.")
@click.option("--horizon-h", type=float, default=None, help="Stop after this many simulated hours.")
@click.option("--no-fairness-checks", is_flag=True, help="Skip the per-round SI/EF checks (faster).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="Write the results as JSON.")
@click.option("--plot", "plot_out", type=click.Path(dir_okay=False), default=None, help="Write JCT CDFs and tenant shares as PNG.")
@click.option("--save-workload", type=click.Path(dir_okay=False), default=None, help="Write the simulated workload as a trace CSV.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def command(traces: tuple[str, ...], synthetic: int | None, tenants: int, seed: int, rate: float,
            max_duration_h: float | None, cluster_spec: str, gpus_per_node: int | None,
            node_speeds: tuple[str, ...], node_speed_spread: float, throughputs: str | None,
            policy_names: tuple[str, ...], round_s: float, restart_s: float, requeue_hold_s: float,
            fill_between_rounds: bool, fork_sync: float, resolve_every: int, static: bool, window: str | None, max_jobs: int | None,
            weights: tuple[str, ...], solver: str, horizon_h: float | None,
            no_fairness_checks: bool, json_out: str | None, plot_out: str | None,
            save_workload: str | None, quiet: bool) -> None:
    """Simulate policies on a trace and compare JCT, fairness and efficiency."""
    from ..solver import resolve

    if bool(traces) == (synthetic is not None):
        raise UserError("give either --trace FILE... or --synthetic N")
    if round_s <= 0 or restart_s < 0 or requeue_hold_s < 0 or not 0 <= fork_sync < 1 or resolve_every < 1:
        raise UserError("--round-s must be > 0, --restart-s and --requeue-hold-s >= 0, --fork-sync in [0, 1), "
                        "--resolve-every >= 1")
    infos = [policies.get(name) for name in dict.fromkeys(policy_names)]
    table = tt.load(throughputs)
    cluster = parse_cluster(cluster_spec, gpus_per_node)
    cluster = with_speeds(cluster, _speeds(node_speeds), node_speed_spread, seed) if (node_speeds or node_speed_spread) else cluster
    unknown = sorted(set(cluster.capacity) - set(table.gpu_types))
    if unknown:
        raise UserError(f"--cluster: GPU type {unknown[0]!r} is not in the throughput table ({', '.join(table.gpu_types)})")
    weight_map = parse_weights(weights)
    if synthetic is not None:
        workload = generate(synthetic, tenants, seed, rate, table, max_duration_h * 3600 if max_duration_h else None)
        if static:
            from dataclasses import replace

            from ..sim.workload import make_workload
            workload = make_workload([replace(j, arrival_s=0.0) for j in workload.jobs], weight_map, workload.sources)
        elif weight_map:
            from ..sim.workload import make_workload
            workload = make_workload(workload.jobs, weight_map, workload.sources)
    else:
        workload = load_traces(traces, table, parse_window(window) if window else None, max_jobs, static, weight_map)
    if save_workload:
        write_csv(workload, save_workload)
    config = SimConfig(
        round_s=round_s, restart_s=restart_s, requeue_hold_s=requeue_hold_s, fill_between_rounds=fill_between_rounds,
        fork_sync=fork_sync, resolve_every=resolve_every,
        horizon_s=horizon_h * 3600 if horizon_h else None, check_fairness=not no_fairness_checks,
        solver=resolve(solver),
    )
    console = Console(stderr=True)
    results = {}
    with Progress(TextColumn("{task.description:>14}"), BarColumn(), TextColumn("{task.percentage:>5.1f}% jobs done"),
                  TimeElapsedColumn(), console=console, disable=quiet, transient=False) as progress:
        for info in infos:
            task = progress.add_task(info.name, total=1.0)
            results[info.name] = simulate(workload, cluster, table, info, config,
                                          lambda f, task=task: progress.update(task, completed=f))
            progress.update(task, completed=1.0)
    doc = report.document(results, workload, cluster, config, table.source)
    Console().print(report.comparison_table(doc))
    first = next(iter(results.values()))
    notes = []
    if first.unschedulable:
        notes.append(f"{len(first.unschedulable)} job(s) fit on no GPU type (more GPUs, or GPUs per node, than its nodes "
                     "have) and were not simulated")
    fallbacks = max(r.throughput_fallbacks for r in results.values())
    if fallbacks:
        notes.append(f"{fallbacks} throughput lookup(s) used the documented fallback (unmeasured job type x GPU count)")
    for note in notes:
        console.print(f"note: {note}")
    if json_out:
        Path(json_out).write_text(json.dumps(doc, indent=2, default=str) + "\n")
    if plot_out:
        from ..sim.plot import plot

        plot(results, plot_out)
