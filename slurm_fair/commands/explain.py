"""``slurm-fair explain JOBID``: why a job got its GPU type and its place in line."""

from __future__ import annotations

import json

import click

from ..config import load
from ..controller.explain import explain, render
from .options import config_option, json_option


@click.command("explain")
@click.argument("job_id")
@config_option
@json_option
def command(job_id: str, config_path: str | None, as_json: bool) -> None:
    """Show the controller's latest decision about JOB_ID and the actions applied to it."""
    e = explain(load(config_path), job_id)
    click.echo(json.dumps(e, default=str) if as_json else render(e))
