"""``slurm-fair revert``: give back every change slurm-fair made to Slurm."""

from __future__ import annotations

import click

from ..config import load
from ..controller.revert import RevertResult, revert
from ..controller.state import StateStore
from ..errors import SlurmFairError
from ..slurm import make_port
from .options import config_option, dry_run_option, json_option
from .output import json_line
from .steps import fmt, stop_on_signals


class _RevertIncomplete(SlurmFairError):
    pass


def show_steps(res: RevertResult, dry_run: bool) -> None:
    for s in res.steps:
        state = "applied" if s["applied"] else ("skipped" if s["skipped"] else ("would apply" if dry_run else "FAILED"))
        err = f" ({s['error']})" if s["error"] else ""
        click.echo(f"{s['kind']} {s['target']}: {fmt(s['before'])} -> {fmt(s['after'])}: {state}{err}")
    for p in res.problems:
        click.echo(f"PROBLEM: {p}")


@click.command("revert")
@dry_run_option
@config_option
@json_option
def command(dry_run: bool, config_path: str | None, as_json: bool) -> None:
    """Give back every field slurm-fair holds on a pending job (partition, GPU request, node
    list, site factor) and what older versions made (QOS), then check that every job can run."""
    config = load(config_path, policies=False)  # they run no policy (controller/failsafe.py)
    # nothing recorded, nothing to undo: a misspelt state_dir is said, not answered with an
    # empty store created there
    StateStore.existing(config["controller"]["state_dir"], "revert to undo")
    with stop_on_signals() as stop:
        res = revert(make_port(config), config, dry_run=dry_run, stop=stop,
                     notify=lambda m: click.echo(m, err=True))
    if as_json:
        click.echo(json_line(res.to_dict()))
    else:
        show_steps(res, dry_run)
        for n in res.notes:
            click.echo(f"note: {n}")
        if dry_run:
            click.echo(f"revert (dry run, nothing changed): {len(res.steps)} steps")
        else:
            click.echo(f"revert: {len(res.steps)} steps, {len(res.failed)} failed, {len(res.problems)} problems")
    if res.exit_code:
        named = [f"{s['kind']} {s['target']}: {s['error']}" for s in res.failed] + res.problems
        raise _RevertIncomplete(f"{len(named)} thing(s) could not be given back ({'; '.join(named[:10])}"
                                f"{'; ...' if len(named) > 10 else ''}); run revert again")
