"""``slurm-fair failsafe``: give everything back when the controller has stopped (run every
minute by the rendered cron entry or systemd timer)."""

from __future__ import annotations

import click

from ..config import load
from ..controller.failsafe import failsafe
from ..errors import SlurmFairError
from ..slurm import make_port
from .options import config_option, dry_run_option, json_option
from .output import json_line
from .revert import show_steps
from .steps import stop_on_signals


class _FailsafeIncomplete(SlurmFairError):
    pass


@click.command("failsafe")
@dry_run_option
@config_option
@json_option
def command(dry_run: bool, config_path: str | None, as_json: bool) -> None:
    """Fail open: once no cycle has completed for [controller] fail_open_after_s, give back
    everything the controller set (as revert does); otherwise do nothing."""
    config = load(config_path, policies=False)  # they run no policy (controller/failsafe.py)
    with stop_on_signals() as stop:
        res = failsafe(make_port(config), config, dry_run=dry_run, stop=stop)
    if as_json:
        click.echo(json_line(res.to_dict()))
    else:
        if res.lifted is not None:
            show_steps(res.lifted, dry_run)
        for note in res.notes:
            click.echo(f"note: {note}")
        click.echo(f"failsafe: {res.message}")
    if res.exit_code:
        assert res.lifted is not None
        raise _FailsafeIncomplete("failsafe could not give everything back: "
                                  + "; ".join(res.lifted.problems or [s["target"] for s in res.lifted.failed]))
