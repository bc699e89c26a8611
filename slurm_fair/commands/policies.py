"""``slurm-fair policies``: the registered allocation policies, the names ``--policy`` takes."""

from __future__ import annotations

import json

import click

from .. import policies
from .options import json_option


@click.command("policies")
@json_option
def command(as_json: bool) -> None:
    """List the allocation policies: the names --policy (solve, simulate, testbed replay) and
    [controller] policy take."""
    infos = [policies.get(name) for name in policies.names()]
    if as_json:
        click.echo(json.dumps([{"name": i.name, "dynamic": i.dynamic, "description": i.description,
                                "params": {f"{i.name}.{k}": {"default": p.default, "low": p.low, "high": p.high,
                                                             "help": p.help} for k, p in sorted(i.params.items())}}
                               for i in infos], indent=2))
        return
    width = max(len(i.name) for i in infos)
    for i in infos:
        click.echo(f"{i.name:<{width}}  {i.description}{' (uses history)' if i.dynamic else ''}")
