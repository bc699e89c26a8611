"""``slurm-fair revert``: undo every change slurm-fair made to Slurm."""

from __future__ import annotations


import click

from ..config import load
from ..controller.revert import revert
from ..controller.state import StateStore
from ..errors import SlurmFairError
from ..slurm import make_port
from .options import config_option, dry_run_option, json_option
from .output import json_line
from .run import fmt


class _RevertIncomplete(SlurmFairError):
    pass


@click.command("revert")
@dry_run_option
@config_option
@json_option
def command(dry_run: bool, config_path: str | None, as_json: bool) -> None:
    """Restore every job's original GPU request, QOS, nice and priority; remove our QOS."""
    config = load(config_path)
    # nothing recorded, nothing to undo: a misspelt state_dir is said, not answered with an
    # empty store created there
    StateStore.existing(config["controller"]["state_dir"], "revert to undo")
    res = revert(make_port(config), config, dry_run=dry_run)
    if as_json:
        click.echo(json_line(res.to_dict()))
    else:
        for s in res.steps:
            state = "applied" if s["applied"] else ("skipped" if s["skipped"] else ("would apply" if dry_run else "FAILED"))
            err = f" ({s['error']})" if s["error"] else ""
            click.echo(f"{s['kind']} {s['target']}: {fmt(s['before'])} -> {fmt(s['after'])}: {state}{err}")
        if dry_run:
            click.echo(f"revert (dry run, nothing changed): {len(res.steps)} steps")
        else:
            click.echo(f"revert: {len(res.steps)} steps, {len(res.failed)} failed")
    if res.exit_code:
        raise _RevertIncomplete(f"{len(res.failed)} step(s) could not be restored; run revert again")
