"""``slurm-fair explain JOBID``: why a job got its GPU type and its place in line, beside Slurm's
own view (pending reason, priority factors, expected start). Reads the state store read-only."""

from __future__ import annotations


import click

from ..config import load
from ..controller.explain import explain, render
from ..slurm import make_port
from .options import config_option, json_option
from .output import json_line


@click.command("explain")
@click.argument("job_id")
@config_option
@json_option
def command(job_id: str, config_path: str | None, as_json: bool) -> None:
    """Show the controller's latest decision about JOB_ID, the actions applied to it, and
    Slurm's view now (pending reason, priority factors, expected start)."""
    cfg = load(config_path)
    e = explain(cfg, job_id, make_port(cfg))
    click.echo(json_line(e) if as_json else render(e))
