"""``slurm-fair metrics``: the report's window figures and the last cycle's live gauges in
Prometheus text format (issues 7, 16), for node_exporter's textfile collector.

One ``prometheus_client`` registry holds two collectors: the window families of
:mod:`slurm_fair.report.prometheus` (accounting over ``--since``) and the live gauges of
:mod:`slurm_fair.report.live` (the state store, read-only). ``generate_latest`` renders it; ``-o``
writes it through :func:`slurm_fair.atomic.write_text` (not ``write_to_textfile``, whose rename
would replace ``/dev/null`` run as root).
"""

from __future__ import annotations

from pathlib import Path

import click
from prometheus_client import generate_latest

from .. import config as config_mod
from ..controller.state import DB_NAME
from ..report import data, tables
from ..report.live import live_families
from ..report.prometheus import backend_families, families, registry
from ..slurm import backend_info
from ..report.window import window as make_window
from . import report as report_cmd
from .options import config_option, output_option, since_option
from .output import check_distinct, write_output


@click.command("metrics")
@output_option
@since_option
@config_option
def command(output: str | None, since: str | None, config_path: str | None) -> None:
    """Prometheus text exposition: per-tenant/per-type shares and fairness ratios over the
    window, and the last controller cycle's entitled, allocated, limit and pending GPUs.

    For node_exporter's textfile collector: -o <textfile dir>/slurm_fair.prom.
    """
    check_distinct({"--output": output}, {"--config": config_path or config_mod.default_path()})
    config = config_mod.load(config_path)
    win = make_window(since, None, float(config["report"]["window_days"]))
    port = report_cmd.make_port(config)
    report = tables.build(data.load(port, config, win))
    store = Path(config["controller"]["state_dir"]) / DB_NAME
    backend = backend_info(port)
    reg = registry(lambda: families(report), lambda: live_families(store), lambda: backend_families(backend))
    write_output(generate_latest(reg).decode("utf-8"), output)
