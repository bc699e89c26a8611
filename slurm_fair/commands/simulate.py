"""``slurm-fair simulate``: run policies over one workload and compare them (issue 5).

Thin: the options are folded into groups (:mod:`.sim_options`), the scenario is assembled by
:mod:`slurm_fair.sim.scenario`, the runs are :mod:`slurm_fair.sim.engine`'s. Every policy sees
the same workload, cluster and throughput table; the comparison goes to stdout as a table (or
JSON with ``--json``), ``--plot`` and ``--save-workload`` write files of their own.
"""

from __future__ import annotations

from functools import partial
import dataclasses

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from .. import policies
from ..sim import results as sim_results, scenario
from ..sim.engine import SimConfig, SimResult, simulate
from ..sim.workload import csv_text
from .options import json_option, output_option, policies_option, quiet_option, throughputs_option
from .output import check_distinct, check_file_output, check_plot, table_or_json
from .sim_options import cluster_options, engine_options, workload_options


@click.command("simulate")
@policies_option
@workload_options
@cluster_options
@throughputs_option
@engine_options
@json_option
@output_option
@click.option("--plot", "plot_out", type=click.Path(dir_okay=False), default=None, metavar="FILE", callback=check_plot,
              help="Also write JCT CDFs and tenant shares as a picture (PNG; .pdf, .svg, ... by extension).")
@click.option("--save-workload", type=click.Path(dir_okay=False), default=None, metavar="FILE", callback=check_file_output,
              help="Also write the simulated workload as a trace CSV.")
@quiet_option
def command(policy_names: tuple[str, ...], workload: scenario.WorkloadSource, cluster: scenario.ClusterSource,
            throughputs: str | None, engine: SimConfig, as_json: bool, output: str | None, plot_out: str | None,
            save_workload: str | None, quiet: bool) -> None:
    """Simulate policies on a trace and compare JCT, fairness and efficiency.

    Repeat --policy to compare several. Jobs come from --trace files or --synthetic N.
    """
    check_distinct({"--output": output, "--plot": plot_out, "--save-workload": save_workload},
                   {"--trace": workload.traces, "--throughputs": throughputs})
    infos = [policies.get(name) for name in dict.fromkeys(policy_names)]
    policies.check_params_run(engine.policy_params, [info.name for info in infos])
    scene = scenario.build(workload, cluster, throughputs)
    engine = dataclasses.replace(engine, knowledge_seed=workload.seed)
    also: dict[str, tuple[str, str | bytes]] = {}
    if save_workload:
        also["--save-workload"] = (save_workload, csv_text(scene.workload))
    console = Console(stderr=True)
    results = _run(scene, infos, engine, console, quiet)
    doc = sim_results.document(results, scene.workload, scene.cluster, engine, scene.table.source)
    if plot_out:
        from ..sim.plot import path_format, picture

        also["--plot"] = (plot_out, picture(results, path_format(plot_out)))
    # every file at once, all or nothing (a full disk leaves the old ones as they were)
    table_or_json(sim_results.comparison_table(doc), doc, as_json, output, also)
    for note in _notes(results):
        console.print(f"note: {note}")


def _run(scene: scenario.Scenario, infos: list[policies.PolicyInfo], engine: SimConfig, console: Console,
         quiet: bool) -> dict[str, SimResult]:
    """Each policy over the scenario, with a progress bar per policy on stderr."""
    results = {}
    with Progress(TextColumn("{task.description:>14}"), BarColumn(), TextColumn("{task.percentage:>5.1f}% jobs done"),
                  TimeElapsedColumn(), console=console, disable=quiet, transient=False) as progress:
        for info in infos:
            task = progress.add_task(info.name, total=1.0)
            results[info.name] = simulate(scene.workload, scene.cluster, scene.table, info, engine,
                                          partial(_advance, progress, task))
            progress.update(task, completed=1.0)
    return results


def _advance(progress: Progress, task: TaskID, fraction: float) -> None:
    """The engine's progress callback: the fraction of the trace simulated so far."""
    progress.update(task, completed=fraction)


def _notes(results: dict[str, SimResult]) -> list[str]:
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
