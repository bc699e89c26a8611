"""``slurm-fair report``: what each tenant was owed, what it got, and why (issue 7).

Thin: parse options, load inputs through the port, compute (:mod:`slurm_fair.report.tables`),
render, write. Definitions of every figure: ``docs/reports.md``.
"""

from __future__ import annotations

import difflib

import click

from .. import config as config_mod
from ..errors import UserError
from ..report import data, render, tables
from ..report.window import Window, window as make_window
from ..slurm import make_port
from ..slurm.port import SlurmPort
from .options import config_option, output_option, shadow_option, since_option, tenant_option
from .output import check_distinct, write_output


def _shadow(config: config_mod.Config, win: Window, fmt: str, open_end: bool) -> str:
    """``--shadow``: read from the controller's store (read-only) and audit log, not Slurm
    (``open_end``: no --until, so every cycle until now counts, the current second included)."""
    import time

    from ..controller.audit import AuditLog
    from ..controller.state import StateStore
    from ..report import shadow

    if fmt not in ("table", "json"):
        raise UserError(f"--shadow supports --format table or json, not {fmt}")
    path = StateStore.existing(config["controller"]["state_dir"], "report --shadow")
    with StateStore.read_only(path) as store:
        doc = shadow.shadow_report(store, AuditLog(config["controller"]["audit_log"]),
                                   win.since.timestamp(), time.time() + 1.0 if open_end else win.until.timestamp())
    return shadow.render_json(doc) if fmt == "json" else shadow.render_text(doc)


def check_tenant(tenant: str, inputs: data.ReportInputs, port: SlurmPort) -> None:
    """An unknown tenant is a user mistake (exit 2, with a suggestion); a known tenant without
    GPU jobs in the window is not: its report says what could not be computed."""
    seen = {r.account for r in inputs.records}
    if tenant in seen:
        return
    try:
        known = seen | {a.name for a in port.accounts()}
    except Exception:  # noqa: BLE001 - accounts are a nicety here; the records decide
        known = seen
    if tenant not in known:
        close = difflib.get_close_matches(tenant, sorted(known), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        listed = ", ".join(sorted(known)) or "none"
        raise UserError(f"unknown tenant {tenant!r}{hint}; tenants: {listed}")


@click.command("report")
@since_option
@click.option("--until", default=None, metavar="T", help="Window end: ISO date/time or relative (default: now).")
@tenant_option
@click.option("--format", "fmt", type=click.Choice(render.FORMATS), default="table", show_default=True,
              help="Output format (html: one self-contained page).")
@shadow_option
@output_option
@config_option
def command(since: str | None, until: str | None, tenant: str | None, fmt: str, shadow: bool, output: str | None,
            config_path: str | None) -> None:
    """Per-tenant fairness report from Slurm accounting (+ the controller's state when present)."""
    check_distinct({"--output": output}, {"--config": config_path or config_mod.default_path()})
    config = config_mod.load(config_path)
    win = make_window(since, until, float(config["report"]["window_days"]))
    if shadow:
        write_output(_shadow(config, win, fmt, open_end=until is None), output)
        return
    port = make_port(config)
    inputs = data.load(port, config, win)
    if tenant is not None:
        check_tenant(tenant, inputs, port)
    report = tables.build(inputs, tenant)
    write_output(render.RENDERERS[fmt](report), output)
