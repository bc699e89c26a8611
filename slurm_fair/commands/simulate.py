"""``slurm-fair simulate``: run policies over one workload and compare them (issue 5).

Thin: the options are folded into groups (:mod:`.sim_options`), the scenario is assembled by
:mod:`slurm_fair.sim.scenario`, the runs are :mod:`slurm_fair.sim.engine`'s. Every policy sees
the same workload, cluster and throughput table; the comparison goes to stdout as a table (or
JSON with ``--json``), ``--plot`` and ``--save-workload`` write files of their own.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Callable, Mapping
import dataclasses
import sys
import time

import click
from rich.console import Console, Group
from rich.table import Table
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from .. import policies
from ..sim import results as sim_results, scenario
from ..sim.engine import SimConfig, SimResult, simulate
from ..sim.workload import csv_text
from ..errors import UserError
from ..inputs import FiniteFloat, Integer
from ..sim.accounting import HistorySource, Replay, build_replay
from ..sim.cluster import ClusterSpec
from ..sim.slurmlike import Node, SlurmModel, simulate_slurm
from .options import (config_option, json_option, output_option, policies_option, quiet_option, throughputs_option,
                      what_if_option)
from .output import check_distinct, check_file_output, check_plot, table_or_json
from .sim_options import cluster_options, engine_options, history_options, workload_options


@click.command("simulate")
@policies_option
@workload_options
@history_options
@cluster_options
@throughputs_option
@engine_options
@json_option
@output_option
@click.option("--plot", "plot_out", type=click.Path(dir_okay=False), default=None, metavar="FILE", callback=check_plot,
              help="Also write JCT CDFs and tenant shares as a picture (PNG; .pdf, .svg, ... by extension).")
@click.option("--save-workload", type=click.Path(dir_okay=False), default=None, metavar="FILE", callback=check_file_output,
              help="Also write the simulated workload as a trace CSV.")
@click.option("--jobs", "parallel", type=Integer(1, 64), default=1, show_default=True, metavar="N",
              help="Run the policies in N processes at once (the results merge into one report; no --plot).")
@what_if_option
@click.option("--draws", type=Integer(1, 100), default=1, show_default=True, metavar="K",
              help="With a history: also run every policy on K draws of the speeds of groups on types they never "
                   "completed on (--seed S, S+1, ...): the table and what-if show each policy's mean and range, "
                   "overall and per tenant (the report's other figures are the first draw's).")
@click.option("--bf-jitter", type=FiniteFloat(0, 3600), default=0.0, show_default=True, metavar="S",
              help="With --agnostic-as slurm: also run agnostic with the backfill interval S and S/2 seconds either "
                   "side of --slurm-bf-interval (a history does not say the phase of Slurm's backfill timer); "
                   "shown as with --draws.")
@click.option("--array-script", type=click.Path(dir_okay=False), default=None, metavar="FILE", callback=check_file_output,
              help="Run nothing: write an sbatch script whose array tasks each run one policy (and --array-seed) "
                   "with these options, and its manifest; merge the parts with `slurm-fair simulate-merge DIR`.")
@click.option("--array-dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="With --array-script: where the manifest, parts/ and logs/ go (default: FILE with .sweep).")
@click.option("--array-seed", "array_seeds", type=Integer(0, 2**64 - 1), multiple=True, metavar="S",
              help="With --array-script: also one task per seed (--seed S of each task).")
@click.option("--sbatch-option", "sbatch_options", multiple=True, metavar="OPT",
              help="With --array-script: an #SBATCH line of the script (sbatch options, e.g. -A ACCOUNT or -t 2:00:00).")
@click.option("--array-part", type=click.Path(dir_okay=False), default=None, metavar="FILE", callback=check_file_output,
              help="What an array task writes: this one policy's figures and JCTs (and the history's) as a part "
                   "for simulate-merge.")
@quiet_option
@config_option
def command(policy_names: tuple[str, ...], workload: scenario.WorkloadSource, history: HistorySource,
            cluster: scenario.ClusterSource, throughputs: str | None, engine: SimConfig, as_json: bool,
            output: str | None, plot_out: str | None, save_workload: str | None, what_if_out: str | None,
            parallel: int, quiet: bool, config_path: str | None, array_script: str | None, array_dir: str | None,
            array_seeds: tuple[int, ...], sbatch_options: tuple[str, ...], array_part: str | None,
            draws: int = 1, bf_jitter: float = 0.0) -> None:
    """Simulate policies on a trace and compare JCT, fairness and efficiency.

    Repeat --policy to compare several. Jobs come from --trace files, --synthetic N, or the site's
    own accounting (--sacct-file FILE, --from-slurm --days N: the history is replayed and shown
    beside the simulated policies).
    """
    check_distinct({"--output": output, "--plot": plot_out, "--save-workload": save_workload, "--what-if": what_if_out},
                   {"--trace": workload.traces, "--throughputs": throughputs, "--sacct-file": history.sacct_file})
    infos = [policies.get(name) for name in dict.fromkeys(policy_names)]
    policies.check_params_run(engine.policy_params, [info.name for info in infos])
    replay = None
    _check_spread(draws, bf_jitter, history, array_script, array_part)
    if what_if_out and not history.given:
        raise UserError("--what-if compares a history with the policies: give --sacct-file FILE or --from-slurm")
    if history.given:
        replays = replay_draws(history, workload, cluster, throughputs, config_path,
                               [workload.seed + d for d in range(draws)])
        replay = replays[0]
        scene = scenario.Scenario(replay.workload, replay.cluster, replay.table)
    else:
        if history.days is not None or history.inventory or history.node_types or history.strict \
                or history.tenant_by != "account":
            raise UserError("--days, --inventory, --node-type, --tenant-by and --strict apply to a history "
                            "(--sacct-file FILE or --from-slurm)")
        if not cluster.spec:
            raise UserError("give --cluster SPEC (or replay a history: --sacct-file FILE, --from-slurm)")
        scene = scenario.build(workload, cluster, throughputs)
    engine = dataclasses.replace(engine, knowledge_seed=workload.seed)
    if array_script:
        _write_sweep(array_script, array_dir, [i.name for i in infos], array_seeds, sbatch_options,
                     bool(output or as_json or plot_out or what_if_out or save_workload or array_part), console_quiet=quiet)
        return
    if array_dir or array_seeds or sbatch_options:
        raise UserError("--array-dir, --array-seed and --sbatch-option go with --array-script FILE")
    if array_part and len(infos) != 1:
        raise UserError("--array-part is one array task's output: give exactly one --policy")
    also: dict[str, tuple[str, str | bytes]] = {}
    if save_workload:
        also["--save-workload"] = (save_workload, csv_text(scene.workload))
    console = Console(stderr=True)
    if parallel > 1 and plot_out:
        raise UserError("--plot draws every job's record: give it with --jobs 1 (the runs of --jobs N send back "
                        "their figures only)")
    results: Mapping[str, SimResult | sim_results.Summary]
    slurm = _slurm_baseline(replay, history)
    si = bool(what_if_out or array_part)
    if parallel > 1 and len(infos) > 1:
        results = parallel_runs(scene, [i.name for i in infos], engine, parallel, console, quiet, slurm, si)
    else:
        results = _run(scene, infos, engine, console, quiet, slurm)
    doc = sim_results.document(results, scene.workload, scene.cluster, engine, scene.table.source,
                               replay=replay)
    if replay is not None and (draws > 1 or bf_jitter > 0):
        doc["spread"] = _spread(replays, infos, engine, slurm, results, parallel, console, quiet, bf_jitter)
    if replay is not None:
        prio = slurm[1].priority + (f" ({slurm[1].fairshare})" if slurm[1].priority == "fairshare" else "") \
            if slurm else ""
        doc["agnostic_as"] = (f"the site's Slurm as modelled ({prio} priority, backfill by time limits, "
                              "nodes in name order)" if slurm else "slurm-fair's agnostic policy")
    if si and replay is not None:
        _add_si(doc, results, replay, scene)
    if plot_out:
        from ..sim.plot import path_format, picture

        also["--plot"] = (plot_out, picture(results, path_format(plot_out)))  # type: ignore[arg-type]
    # every file at once, all or nothing (a full disk leaves the old ones as they were)
    if what_if_out and replay is not None:
        also["--what-if"] = (what_if_out, _what_if(doc, results, replay, what_if_out))
    if array_part:
        also["--array-part"] = (array_part, _part(doc, results, replay, workload.seed))
    table_or_json(_shown(doc), doc, as_json, output, also)
    for note in _notes(results):
        console.print(f"note: {note}")


def _check_spread(draws: int, bf_jitter: float, history: HistorySource, array_script: str | None,
                  array_part: str | None) -> None:
    """``--draws`` and ``--bf-jitter`` vary a replay run here (a sweep's tasks are one run each)."""
    if draws == 1 and bf_jitter == 0:
        return
    if not history.given:
        raise UserError("--draws and --bf-jitter vary a replay: give --sacct-file FILE or --from-slurm")
    if bf_jitter > 0 and history.agnostic_as != "slurm":
        raise UserError("--bf-jitter varies the modelled Slurm's backfill: it needs --agnostic-as slurm")
    if array_script or array_part:
        raise UserError("--array-script sweeps draws as tasks (--array-seed S, one task per draw) and "
                        "--array-part is one run: no --draws or --bf-jitter with them")


def _shown(doc: dict) -> "Table | Group":
    """The comparison table; with a history, the per-tenant table; with ``--draws`` or
    ``--bf-jitter``, the spread's."""
    shown = sim_results.comparison_table(doc)
    if "history" not in doc:
        return shown
    if "spread" in doc:
        from ..sim.spread import spread_table

        return Group(sim_results.with_tenants(shown, doc), spread_table(doc))
    return sim_results.with_tenants(shown, doc)


def replay_history(history: HistorySource, workload: scenario.WorkloadSource, cluster: scenario.ClusterSource,
                   throughputs: str | None, config_path: str | None) -> Replay:
    """The history of ``--sacct-file`` or ``--from-slurm`` read by the one sacct parser (the rows
    ``speeds learn`` reads, its junk named the same way) and made a workload."""
    return replay_draws(history, workload, cluster, throughputs, config_path, [workload.seed])[0]


def replay_draws(history: HistorySource, workload: scenario.WorkloadSource, cluster: scenario.ClusterSource,
                 throughputs: str | None, config_path: str | None, seeds: list[int]) -> list[Replay]:
    """:func:`replay_history` with the unseen speeds drawn with each of ``seeds`` (the history
    read once)."""
    from ..inputs import read_text
    from ..sim.workload import check_weights
    from ..slurm.parse.history import parse_history
    from .speeds import _from_slurm, report_junk

    if history.sacct_file and history.from_slurm:
        raise UserError("give either --sacct-file FILE or --from-slurm")
    if history.days is not None and not history.from_slurm:
        raise UserError("--days applies to --from-slurm (filter a file's rows before)")
    if workload.traces or workload.synthetic is not None:
        raise UserError("a history (--sacct-file, --from-slurm) is the workload: no --trace or --synthetic with it")
    if cluster.spec or throughputs:
        raise UserError("with a history the cluster comes from it (or --inventory) and the speeds from its runs: "
                        "no --cluster or --throughputs")
    node_types: dict[str, str] = {}
    built = None
    nodes = None
    if history.inventory:
        built, node_types = inventory_cluster(history.inventory)
        nodes = inventory_nodes(history.inventory)
    node_types.update(history.node_types)
    if history.sacct_file:
        parsed = parse_history(read_text(history.sacct_file, "sacct history"), history.sacct_file,
                               strict=history.strict)
        name = history.sacct_file
    else:
        parsed, slurm_nodes = _from_slurm(config_path, f"{history.days or 90:g}d")
        node_types = {**slurm_nodes, **node_types}
        name = "sacct"
    if history.strict and parsed.ended_junk:
        from ..errors import InputError

        raise InputError(name, parsed.ended_junk)
    report_junk(parsed, name, parsed.ended_junk)
    out = []
    for seed in seeds:
        replay = build_replay(parsed, name, node_types, built, history.tenant_by, nodes,
                              vary_unseen=history.unseen_speeds == "drawn", draw_seed=seed)
        if workload.weights:
            check_weights(workload.weights, replay.workload.tenants, name)
            replay = dataclasses.replace(replay, workload=dataclasses.replace(replay.workload,
                                                                              weights=dict(workload.weights)))
        out.append(replay)
    return out


def _spread(replays: list[Replay], infos: list[policies.PolicyInfo], engine: SimConfig,
            slurm: "tuple[Replay, SlurmModel] | None", results: Mapping[str, SimResult | sim_results.Summary],
            parallel: int, console: Console, quiet: bool, bf_jitter: float) -> dict:
    """``--draws K`` / ``--bf-jitter S``: every policy on every draw (``agnostic`` as the
    modelled Slurm at each backfill interval too), the first draw at the site's interval being
    the run already made; reduced to a mean and range (:mod:`slurm_fair.sim.spread`)."""
    from ..sim.spread import bf_intervals, spread

    intervals = bf_intervals(slurm[1].bf_interval_s, bf_jitter) if slurm else [0.0]
    tasks: list[tuple[int, str, float]] = []
    for d in range(len(replays)):
        for info in infos:
            for i, bf in enumerate(intervals if slurm and info.name == "agnostic" else intervals[:1]):
                if d or i:
                    tasks.append((d, info.name, bf))
    scenes = [scenario.Scenario(r.workload, r.cluster, r.table) for r in replays]
    models = [(r, slurm[1]) if slurm else None for r in replays]
    metrics: dict[str, list[dict]] = {info.name: [sim_results.summary(results[info.name]).metrics] for info in infos}
    if not quiet:
        console.print(f"spread: {len(tasks)} more run(s) ({len(replays)} draw(s), backfill intervals "
                      f"{', '.join(f'{v:g}' for v in intervals)} s)")
    for (_, name, _), m in zip(tasks, _spread_runs(scenes, models, engine, tasks, parallel)):
        metrics[name].append(m)
    return spread(metrics, len(replays), intervals if slurm else [])


#: what a forked worker of ``--draws`` runs (set before the pool forks)
_DRAWS: "tuple[list[scenario.Scenario], list[tuple[Replay, SlurmModel] | None], SimConfig] | None" = None


def _one_draw(task: tuple[int, str, float]) -> dict:
    """One (draw, policy, backfill interval) run in a worker: its metrics only."""
    assert _DRAWS is not None
    scenes, models, engine = _DRAWS
    d, name, bf = task
    slurm = models[d]
    if slurm is not None:
        slurm = (slurm[0], dataclasses.replace(slurm[1], bf_interval_s=bf))
    return sim_results.summary(run_policy(scenes[d], policies.get(name), engine, slurm)).metrics


def _spread_runs(scenes: list[scenario.Scenario], models: "list[tuple[Replay, SlurmModel] | None]",
                 engine: SimConfig, tasks: list[tuple[int, str, float]], processes: int) -> list[dict]:
    """The runs of ``tasks`` in order, in ``processes`` forked processes (``--jobs N``)."""
    global _DRAWS
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    _DRAWS = (scenes, models, engine)
    try:
        if processes <= 1 or len(tasks) <= 1:
            return [_one_draw(t) for t in tasks]
        with ProcessPoolExecutor(min(processes, len(tasks)), mp_context=multiprocessing.get_context("fork")) as pool:
            return list(pool.map(_one_draw, tasks))
    finally:
        _DRAWS = None


def _add_si(doc: dict, results: Mapping[str, SimResult | sim_results.Summary], replay: Replay,
            scene: scenario.Scenario) -> None:
    """Each tenant's sharing-incentive ratio, ``report``'s (:mod:`slurm_fair.report.simulated`), in
    the history's and each run's per-tenant figures (a run of another process brought its own)."""
    from ..report.simulated import add_si

    capacity, weights = dict(scene.cluster.capacity), dict(scene.workload.weights)
    add_si(doc["history"], replay.history, capacity, weights)
    for name, r in results.items():
        if isinstance(r, SimResult):
            add_si(doc["policies"][name], r.records, capacity, weights)


def _write_sweep(script: str, directory: str | None, names: list[str], seeds: tuple[int, ...],
                 sbatch: tuple[str, ...], outputs: bool, console_quiet: bool) -> None:
    """``--array-script``: the sbatch script and manifest (:mod:`.sweep`), nothing run."""
    from .sweep import inherited_argv, write_array

    if outputs:
        raise UserError("--array-script runs nothing: its tasks write the parts; give --json, --output, --plot, "
                        "--what-if and --save-workload to simulate-merge (or the task's own run)")
    manifest = write_array(script, directory, inherited_argv(click.get_current_context()), names, list(seeds), sbatch)
    where = str(Path(manifest["script"]).with_suffix(".sweep")) if directory is None else directory
    if not console_quiet:
        click.echo(f"{len(manifest['tasks'])} array task(s): sbatch {manifest['script']}\n"
                   f"then: slurm-fair simulate-merge {where}")


def _part(doc: dict, results: Mapping[str, SimResult | sim_results.Summary], replay: Replay | None,
          seed: int) -> str:
    """``--array-part``: one task's part of a sweep (:func:`.sweep.part_document`)."""
    from .output import json_text
    from .sweep import part_document

    name, result = next(iter(results.items()))
    history = {r.job_id: r.jct_s for r in replay.history if r.jct_s is not None} if replay else None
    return json_text(part_document(name, seed, doc, sim_results.jcts_of(result), history,
                                   replay.jobs if replay else None))


def _what_if(doc: dict, results: Mapping[str, SimResult | sim_results.Summary], replay: Replay, path: str) -> str:
    """The what-if file's text: HTML for a ``.html`` name, else JSON."""
    from ..sim import whatif
    from .output import json_text

    jcts = {name: sim_results.jcts_of(r) for name, r in results.items()}
    history = {r.job_id: r.jct_s for r in replay.history if r.jct_s is not None}
    doc_w = whatif.what_if(doc, jcts, history, replay.jobs)
    return whatif.render_html(doc_w) if path.lower().endswith((".html", ".htm")) else json_text(doc_w)


def inventory_nodes(path: str) -> list[Node]:
    """The GPU nodes of an inventory file in Slurm's order (by name: slurm.conf's node order
    when no weight differs), for the modelled Slurm."""
    from ..deploy.inventory import load

    return sorted((Node(n.name, n.gpu_type, n.gpus) for n in load(path).nodes if n.gpus > 0), key=lambda n: n.name)


def inventory_cluster(path: str) -> tuple[ClusterSpec, dict[str, str]]:
    """The cluster of an inventory file (the shape of conf/testbed.toml) and its node types;
    nodes of one type take its largest node size (:class:`ClusterSpec` has one per type)."""
    import math

    from ..deploy.inventory import load

    inv = load(path)
    largest: dict[str, int] = {}
    for n in inv.nodes:
        largest[n.gpu_type] = max(largest.get(n.gpu_type, 0), n.gpus)
    capacity = inv.capacity()
    return (ClusterSpec({k: largest[k] * math.ceil(c / largest[k]) for k, c in capacity.items() if c > 0},
                        node_gpus=dict(largest)),
            {n.name: n.gpu_type for n in inv.nodes})


def _slurm_baseline(replay: Replay | None, history: HistorySource) -> "tuple[Replay, SlurmModel] | None":
    """With a history and ``--agnostic-as slurm``: the replay and the Slurm that runs
    ``agnostic`` (docs/simulator.md, "The agnostic arm is the site's Slurm")."""
    if replay is None or history.agnostic_as != "slurm":
        if history.node_weights or history.slurm_priority != "fifo" or history.slurm_fairshare != "fair-tree" \
                or history.slurm_billing:
            raise UserError("--node-weight, --slurm-priority, --slurm-fairshare and --slurm-billing describe the "
                            "Slurm that runs agnostic in a replay (--agnostic-as slurm)")
        return None
    unknown = sorted(set(history.node_weights) - {n.name for n in replay.nodes})
    if unknown:
        raise UserError(f"--node-weight: no node {', '.join(unknown[:5])} in the replayed cluster")
    unknown = sorted(set(history.slurm_billing) - {n.gpu_type for n in replay.nodes})
    if unknown:
        raise UserError(f"--slurm-billing: no GPU type {', '.join(unknown[:5])} in the replayed cluster")
    order = {n.name: i for i, n in enumerate(replay.nodes)}
    nodes = sorted(replay.nodes, key=lambda n: (history.node_weights.get(n.name, 1.0), order[n.name]))
    return (dataclasses.replace(replay, nodes=tuple(nodes)),
            SlurmModel(priority=history.slurm_priority, fairshare=history.slurm_fairshare,
                       bf_interval_s=history.slurm_bf_interval_s, billing=dict(history.slurm_billing)))


def run_policy(scene: scenario.Scenario, info: policies.PolicyInfo, engine: SimConfig,
               slurm: "tuple[Replay, SlurmModel] | None" = None,
               progress: Callable[[float], None] | None = None,
               where: Callable[[float, int, int], None] | None = None) -> SimResult:
    """One policy over the scenario; ``agnostic`` over a history is the modelled Slurm
    (:func:`slurm_fair.sim.slurmlike.simulate_slurm`) when ``slurm`` is given."""
    if slurm is not None and info.name == "agnostic":
        replay, model = slurm
        users = {jid: meta.user for jid, meta in replay.jobs.items()}
        return simulate_slurm(scene.workload, replay.nodes, scene.table, replay.limits, scene.cluster.capacity, model,
                              replay.prior_rel, engine.round_s, users=users)
    return simulate(scene.workload, scene.cluster, scene.table, info, engine, progress, where)


def _run(scene: scenario.Scenario, infos: list[policies.PolicyInfo], engine: SimConfig, console: Console,
         quiet: bool, slurm: "tuple[Replay, SlurmModel] | None" = None) -> dict[str, SimResult]:
    """Each policy over the scenario, with a progress bar per policy on stderr."""
    results = {}
    with Progress(TextColumn("{task.description:>14}"), BarColumn(), TextColumn("{task.percentage:>5.1f}% jobs done"),
                  TimeElapsedColumn(), console=console, disable=quiet, transient=False) as progress:
        for info in infos:
            task = progress.add_task(info.name, total=1.0)
            results[info.name] = run_policy(scene, info, engine, slurm, partial(_advance, progress, task))
            progress.update(task, completed=1.0)
    return results


def _advance(progress: Progress, task: TaskID, fraction: float) -> None:
    """The engine's progress callback: the fraction of the trace simulated so far."""
    progress.update(task, completed=fraction)


#: the scenario a forked worker runs (set before the pool forks, so it is not pickled)
_SCENE: "tuple[scenario.Scenario, SimConfig, tuple[Replay, SlurmModel] | None, bool, bool] | None" = None


def _one(name: str) -> sim_results.Summary:
    """One policy over the inherited scenario, in a worker process: its figures only (the
    records stay in the worker; the tenants' SI ratios, which need them, are computed here)."""
    assert _SCENE is not None
    scene, engine, slurm, si, quiet = _SCENE
    result = run_policy(scene, policies.get(name), engine, slurm, where=None if quiet else _Where(name))
    out = sim_results.summary(result)
    if si:
        from ..report.simulated import add_si

        add_si(out.metrics, result.records, dict(scene.cluster.capacity), dict(scene.workload.weights))
    return out


class _Where:
    """A worker's progress line on stderr about every minute: the simulated day it reached, its
    solves and reused rounds, its CPU seconds so far (so a run stopped early says where it was)."""

    def __init__(self, name: str, every_s: float = 60.0) -> None:
        self.name, self.every_s, self.last = name, every_s, time.monotonic()

    def __call__(self, sim_s: float, solves: int, reused: int) -> None:
        now = time.monotonic()
        if now - self.last < self.every_s:
            return
        self.last = now
        print(f"{self.name}: day {sim_s / 86400:.1f}, {solves} solves, {reused} reused rounds, "
              f"{time.process_time():.0f} CPU s", file=sys.stderr, flush=True)


def parallel_runs(scene: scenario.Scenario, names: list[str], engine: SimConfig, processes: int, console: Console,
                  quiet: bool, slurm: "tuple[Replay, SlurmModel] | None" = None,
                  si: bool = False) -> dict[str, sim_results.Summary]:
    """Each policy in its own process (at most ``processes`` at once, forked: the scenario is
    shared, not copied through a pipe); the summaries in the order asked."""
    global _SCENE
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    _SCENE = (scene, engine, slurm, si, quiet)
    try:
        with ProcessPoolExecutor(min(processes, len(names)), mp_context=multiprocessing.get_context("fork")) as pool:
            futures = {pool.submit(_one, name): name for name in names}
            done: dict[str, sim_results.Summary] = {}
            for f in as_completed(futures):
                done[futures[f]] = f.result()
                if not quiet:
                    console.print(f"{futures[f]}: done")
    finally:
        _SCENE = None
    return {name: done[name] for name in names}


def _notes(results: Mapping[str, SimResult | sim_results.Summary]) -> list[str]:
    """What a reader of the table should know: jobs not simulated, throughput fallbacks."""
    first = next(iter(results.values()))
    notes = []
    if first.unschedulable:
        notes.append(f"{len(first.unschedulable)} job(s) fit on no GPU type (more GPUs, or GPUs per node, than its nodes "
                     "have) and were not simulated")
    fallbacks = max(r.throughput_fallbacks for r in results.values())
    if fallbacks:
        notes.append(f"{fallbacks} throughput lookup(s) used the documented fallback (unmeasured job type x GPU count)")
    return notes
