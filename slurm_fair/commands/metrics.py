"""``slurm-fair metrics``: the report's shares, fairness ratios and controller timings in
Prometheus text format, written atomically for node_exporter's textfile collector (issue 7)."""

from __future__ import annotations

import click

from .. import config as config_mod
from ..report import data, tables
from ..report.prometheus import render_metrics
from ..report.window import window as make_window
from . import report as report_cmd
from .options import config_option, output_option, since_option
from .output import write_output


@click.command("metrics")
@output_option
@since_option
@config_option
def command(output: str | None, since: str | None, config_path: str | None) -> None:
    """Prometheus text exposition of per-tenant/per-type shares and fairness ratios.

    For node_exporter's textfile collector: -o <textfile dir>/slurm_fair.prom.
    """
    config = config_mod.load(config_path)
    win = make_window(since, None, float(config["report"]["window_days"]))
    port = report_cmd.make_port(config)
    report = tables.build(data.load(port, config, win))
    write_output(render_metrics(report), output)
