"""``slurm-fair speeds learn``: each recurring job group's relative speed per GPU type, learned
from the accounting history (docs/speeds.md).

The history is ``sacct -P -X`` text with its header: a file (``--sacct-file``), or read from
Slurm (``--from-slurm --since 90d``) through the adapter. Node types for runs without typed
gres come from Slurm (``--from-slurm``), an inventory file (``--inventory``, the shape of
``conf/testbed.toml``) or ``--node-type HOSTLIST=TYPE``. The learner is
:func:`slurm_fair.estimates.learn.learn`, the same the controller and the simulator use.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime
from typing import Any, Sequence

import click
from rich.console import Console
from rich.table import Table

from ..errors import Finding, UserError
from ..estimates.history import failures_from_history, runs_from_history
from ..estimates.learn import Model, learn
from ..inputs import read_text
from ..slurm.parse.fields import expand_hostlist
from ..slurm.parse.history import History, parse_history
from .options import (config_option, from_slurm_option, inventory_option, json_option, node_type_option, output_option,
                      sacct_file_option, since_option, strict_option)
from .output import json_text, write_output

#: ``--since`` when reading Slurm without one
DEFAULT_SINCE = "90d"
#: junk lines named on stderr (the rest are counted)
SHOWN_JUNK = 5


def parse_node_types(items: tuple[str, ...], option: str = "--node-type",
                     expected: str = "HOSTLIST=TYPE, e.g. gpu[01-04]=a100") -> dict[str, str]:
    """``("gpu[01-04]=a100",)`` -> ``{"gpu01": "a100", ...}``; a UserError naming a bad item."""
    out: dict[str, str] = {}
    for item in items:
        hosts, sep, gpu_type = item.partition("=")
        try:
            nodes = expand_hostlist(hosts) if sep and gpu_type.strip() else ()
        except Exception:
            nodes = ()
        if not nodes:
            raise UserError(f"{option} {item[:80]!r}: expected {expected}")
        out.update({n: gpu_type.strip() for n in nodes})
    return out


def _inventory_types(path: str) -> dict[str, str]:
    from ..deploy.inventory import load

    return {n.name: n.gpu_type for n in load(path).nodes}


def _from_slurm(config_path: str | None, since: str | None) -> tuple[History, dict[str, str]]:
    from .. import config as config_mod
    from ..report.window import parse_time
    from ..slurm import make_port

    start = parse_time(since or DEFAULT_SINCE, datetime.now(), "--since")
    port = make_port(config_mod.load(config_path))
    history = port.accounting_history(start)
    nodes = {n.name: next(iter(n.gpus_total)) for n in port.nodes() if len(n.gpus_total) == 1}
    return history, nodes


def report_junk(history: History, source: str, extra: Sequence[Finding] = ()) -> None:
    """The unreadable rows on stderr (the first :data:`SHOWN_JUNK` named, the rest counted)."""
    junk = [*history.junk, *extra]
    for finding in junk[:SHOWN_JUNK]:
        click.echo(f"slurm-fair: warning: {source}: {finding.where}: {finding.what}; skipped", err=True)
    if len(junk) > SHOWN_JUNK:
        click.echo(f"slurm-fair: warning: {len(junk) - SHOWN_JUNK} more unreadable rows skipped", err=True)


def model_document(model: Model, skipped: Counter, usable: int) -> dict[str, Any]:
    """The ``--json`` document: groups, the pooled spread, slow nodes, what was left out."""
    return {
        "groups": [g.to_dict() for g in model.groups.values()],
        # every user's runs of one job name and GPU count (user "*"): a new user's first belief
        "pools": [g.to_dict() for g in model.pools.values()],
        "runs_used": usable, "skipped": dict(skipped), "sigma": round(model.sigma, 4),
        "slow_nodes": {n: round(e, 4) for n, e in sorted(model.node_excess.items())},
        "warnings": list(model.warnings),
        # the site's level, learned across groups: how often each family's priors fit its groups,
        # and how far each type runs from its prior here (log); groups seen on one type lean on them
        "site": {"family_mix": {f: round(v, 4) for f, v in sorted(model.family_mix.items())},
                 "type_offsets": {k: round(v, 4) for k, v in sorted(model.type_offsets.items())},
                 # how far one group's speed on a type strays from its family's prior (log sd)
                 "group_spread": round(model.group_spread, 4)},
    }


def model_table(model: Model, types: list[str]) -> Table:
    """One row per group: speed per type (learned numbers bold, priors dim), runs, family."""
    table = Table(title="learned speeds (fastest type = 1.00; dim: prior, not learned; "
                        "fails: the group failed there, never sent there; user *: every user's runs of the name)")
    for c in ("user", "job name", "GPUs", *types, "runs", "family", "fails on (runs)"):
        table.add_column(c, justify="right" if c not in ("user", "job name", "family", "fails on (runs)") else "left")
    for g in [*model.groups.values(), *model.pools.values()]:
        cells = [_cell(g.speed[k], g.sources[k]) for k in types]
        fails = ", ".join(f"{k} ({n})" for k, n in sorted(g.fails_on.items()))
        table.add_row(g.group[0], g.group[1], str(g.group[2]), *cells, str(sum(g.runs.values())), g.family, fails)
    return table


def site_line(model: Model) -> str:
    """The site's level in one line: the family mix and each type against its prior (x factor)."""
    mix = ", ".join(f"{f} {v:.0%}" for f, v in sorted(model.family_mix.items(), key=lambda fv: -fv[1]))
    offsets = ", ".join(f"{k} x{math.exp(v):.2f}" for k, v in sorted(model.type_offsets.items()))
    return (f"site: family mix {mix or '-'}; types against their priors {offsets or '-'}; "
            f"groups stray from their family by x{math.exp(model.group_spread):.2f} (one sd)")


def _cell(speed: float, source: str) -> str:
    if source == "fails":
        return "[red]fails[/red]"
    return f"[bold]{speed:.2f}[/bold]" if source == "learned" else f"[dim]{speed:.2f}[/dim]"


@click.group("speeds")
def command() -> None:
    """GPU speed knowledge: what the controller believes about each job group's speed per type."""


@command.command("learn")
@sacct_file_option
@from_slurm_option
@since_option
@inventory_option
@node_type_option
@strict_option
@json_option
@output_option
@config_option
def learn_command(sacct_file: str | None, from_slurm: bool, since: str | None, inventory: str | None,
                  node_type: tuple[str, ...], strict: bool, as_json: bool, output: str | None,
                  config_path: str | None) -> None:
    """Learn each group's (user + job name + GPUs) relative speed per GPU type from completed runs."""
    if bool(sacct_file) == from_slurm:
        raise UserError("give either --sacct-file FILE or --from-slurm")
    if since and not from_slurm:
        raise UserError("--since applies to --from-slurm (filter a file's rows before)")
    node_types = _inventory_types(inventory) if inventory else {}
    node_types.update(parse_node_types(node_type))
    if sacct_file:
        history = parse_history(read_text(sacct_file, "sacct history"), sacct_file, strict=strict)
    else:
        history, slurm_nodes = _from_slurm(config_path, since)
        node_types = {**slurm_nodes, **node_types}
    report_junk(history, sacct_file or "sacct")
    runs, more = runs_from_history(history.rows, node_types)
    failures = failures_from_history(history.failed, node_types)
    skipped = history.skipped + more
    if not runs:
        raise UserError(f"{sacct_file or 'sacct'}: no completed GPU run with a known GPU type "
                        f"(left out: {dict(skipped) or 'nothing'})")
    types = sorted({r.gpu_type for r in runs} | {f.gpu_type for f in failures})
    model = learn(runs, types, failures)
    for w in model.warnings:
        click.echo(f"slurm-fair: warning: {w}", err=True)
    if as_json:
        write_output(json_text(model_document(model, skipped, len(runs))), output)
        return
    console = Console(width=200, record=bool(output))
    console.print(model_table(model, types))
    console.print(f"{len(runs)} runs used; left out: {dict(skipped)}; run spread sigma {model.sigma:.3f}")
    console.print(site_line(model))
    if output:
        write_output(console.export_text(), output)
