"""``slurm-fair run``: one controller cycle (cron) or a loop of them (systemd)."""

from __future__ import annotations

import re
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import click
from prometheus_client import start_http_server

from ..config import DAY, load
from ..controller.cycle import CycleResult, run_cycle
from ..controller.state import DB_NAME
from ..errors import SlurmFairError, UserError
from ..inputs import FiniteFloat, Integer, fullmatch
from ..report.live import live_families
from ..report.prometheus import backend_families, registry
from ..slurm import backend_info, make_port
from .options import config_option, dry_run_option, json_option, shadow_option
from .output import json_line
from .steps import Stop, fmt, stop_on_signals  # noqa: F401 (stop_on_signals: importable from here)


def _text(res: CycleResult) -> str:
    d = res.to_dict()
    c = d["counts"]
    lines = [f"cycle {res.cycle_id}: {res.status} (policy {res.policy}); "
             f"{c['actions']} actions, {c['applied']} applied, {c['skipped']} skipped, {c['failed']} failed"]
    if res.message:
        lines.append(f"  {res.message}")
    for w in res.warnings:
        lines.append(f"  warning: {w}")
    if res.dry_run and res.plan is not None:
        lines.append("  plan (dry run, nothing changed):")
        for t, tp in sorted(res.plan.tenants.items()):
            lines.append(f"    tenant {t}: bundle {fmt(dict(sorted(tp.bundle.items())))}; "
                         f"fair share {fmt({k: round(v, 2) for k, v in sorted(tp.fair_share.items())})}")
        for jp in sorted(res.plan.jobs.values(), key=lambda p: p.rank):
            order = f"site factor {jp.site_factor}" if jp.site_factor is not None else "priority left to Slurm"
            if jp.gpu_type:
                how = "gres request"
            elif jp.partition:
                how = f"partition {jp.partition}"
            else:
                how = "its own"
            lines.append(f"    #{jp.rank} job {jp.job_id} ({jp.tenant}): type {jp.planned_type or jp.gpu_type or '?'}"
                         f" ({how}), {order}" + (", placed this round" if jp.placed else ""))
        for job in res.plan.requeue:
            lines.append(f"    requeue {job}")
    for a in d["actions"]:
        state = "applied" if a["applied"] else ("skipped" if a["skipped"] else ("would apply" if res.dry_run else "NOT applied"))
        err = f" ({a['error']})" if a["error"] else ""
        lines.append(f"  {a['kind']} {a['target']}: {fmt(a['before'])} -> {fmt(a['after'])}: {state}{err}")
    t = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in res.timings.items())
    lines.append(f"  timings: {t}")
    return "\n".join(lines)


#: a host name or an IP address ``--metrics-addr`` may listen on (an empty one would mean every
#: interface to the HTTP server: ``0.0.0.0`` says so explicitly)
_ADDR = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}|[0-9A-Fa-f:.]{2,45}")


def _addr(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not fullmatch(_ADDR, value):
        raise click.BadParameter(f"{value[:60]!r} is not a host name or an IP address", ctx, param)
    return value


@click.command("run")
@click.option("--once", is_flag=True, help="Run one cycle (cron; the default).")
@click.option("--loop", is_flag=True, help="Run cycles until SIGTERM (systemd).")
@click.option("--interval", type=FiniteFloat(lo=1, hi=DAY), default=None, metavar="SECONDS",
              help="Seconds between cycles with --loop, 1 to 86400 (default: [controller].interval_s).")
@click.option("--metrics-port", type=Integer(0, 65535), default=None,
              help="With --loop: serve the live gauges of `slurm-fair metrics` over HTTP on this port.")
@click.option("--metrics-addr", default="127.0.0.1", show_default=True, callback=_addr,
              help="Address --metrics-port listens on (0.0.0.0: every interface).")
@shadow_option
@dry_run_option
@config_option
@json_option
def command(once: bool, loop: bool, interval: float | None, metrics_port: int | None, metrics_addr: str,
            shadow: bool, dry_run: bool, config_path: str | None, as_json: bool) -> None:
    """Reconcile Slurm with the fair allocation: read, decide, diff, apply, record."""
    if once and loop:
        raise click.UsageError("--once and --loop are mutually exclusive (one cycle, or cycles until SIGTERM)")
    mode = "loop" if loop else "once"
    if metrics_port is not None and mode != "loop":
        raise click.UsageError("--metrics-port needs --loop (a single cycle exits before anyone scrapes it)")
    if interval is not None and mode != "loop":
        raise click.UsageError("--interval needs --loop (a single cycle has no interval)")
    config = load(config_path)
    port = make_port(config)

    def show(res: CycleResult) -> None:  # with the Slurm backend ([slurm] backend = "auto": what it took)
        click.echo(json_line({**res.to_dict(), "slurm_backend": backend_info(port)}) if as_json else _text(res))

    if mode == "once":
        with stop_on_signals() as asked:
            res = run_cycle(port, config, dry_run=dry_run, shadow=True if shadow else None, stop=asked)
        show(res)
        if res.exit_code:
            raise _CycleFailed(res)
        return
    if metrics_port is not None:
        serve_metrics(metrics_addr, metrics_port, Path(config["controller"]["state_dir"]) / DB_NAME,
                      lambda: backend_info(port))
    stop = Stop()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    every = interval if interval is not None else float(config["controller"]["interval_s"])
    while not stop.requested:
        started = time.monotonic()
        try:
            show(run_cycle(port, config, dry_run=dry_run, shadow=True if shadow else None, stop=stop.asked))
        except UserError:
            raise  # configuration or input problems do not fix themselves
        except SlurmFairError as exc:  # lock held, Slurm gone...: log and try again next cycle
            click.echo(f"slurm-fair: cycle failed: {exc.message()}", err=True)
        sys.stdout.flush()
        while not stop.requested and time.monotonic() - started < every:
            time.sleep(min(0.5, every))
    click.echo("slurm-fair: stopped", err=True)


def serve_metrics(addr: str, port: int, store: Path,
                  backend: Callable[[], Mapping[str, str]] | None = None) -> Any:
    """Serve the live gauges (:mod:`slurm_fair.report.live`) on ``addr:port`` from a daemon
    thread; returns the server (``server_port`` is the port bound, for port 0). The store is read
    at each scrape, so the gauges are those of the last cycle that finished. The window figures
    stay with ``slurm-fair metrics`` (they cost a sacct query). ``backend``: which Slurm backend
    the cycles read through, asked at each scrape (``slurm_fair_slurm_backend_info``)."""
    sources = [lambda: live_families(store)]
    if backend is not None:
        sources.append(lambda: backend_families(backend()))
    reg = registry(*sources)
    try:
        server, _thread = start_http_server(port, addr=addr, registry=reg)
    except OSError as exc:
        raise UserError(f"--metrics-port {port} on {addr}: {exc.strerror or exc}") from None
    click.echo(f"slurm-fair: metrics on http://{addr}:{server.server_port}/metrics", err=True)
    return server


class _CycleFailed(SlurmFairError):
    """The cycle ran and reported a failure (already printed): exit with its code."""

    def __init__(self, res: CycleResult):
        self.exit_code = res.exit_code
        super().__init__(f"cycle {res.cycle_id} {res.status}: {res.message or 'see the actions above'}")
