"""``slurm-fair snapshot [--json]``: what the controller sees, read from Slurm now.

``--json`` prints a valid PROBLEM.json (docs/fairness.md) with extra per-job fields; without it,
readable tables of nodes/GPUs per type and of GPU jobs. Slurm is found through ``[slurm]`` of
the configuration plus the process environment (``SLURM_CONF``), so
``eval "$(slurm-fair testbed env)"; slurm-fair snapshot`` reads the testbed.
"""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from .. import config as config_mod
from ..model import Snapshot
from ..problem_io import problem_to_dict
from ..slurm import make_port
from ..slurm.to_problem import snapshot_to_problem
from .options import config_option, json_option


def render(snapshot: Snapshot, console: Console) -> None:
    """Rich tables: capacity per GPU type, nodes, GPU jobs."""
    cap = snapshot.capacity()
    total: dict[str, int] = {}
    used: dict[str, int] = {}
    for n in snapshot.nodes:
        for k, v in n.gpus_total.items():
            total[k] = total.get(k, 0) + v
        for k, v in n.gpus_used.items():
            used[k] = used.get(k, 0) + v
    t = Table(title=f"GPUs per type ({snapshot.taken_at:%Y-%m-%d %H:%M:%S})")
    for col in ("type", "schedulable", "total", "in use"):
        t.add_column(col, justify="right" if col != "type" else "left")
    for k in sorted(total):
        t.add_row(k, str(cap.get(k, 0)), str(total[k]), str(used.get(k, 0)))
    console.print(t)

    t = Table(title="Nodes")
    for col in ("node", "state", "GPUs", "used", "partitions", "features"):
        t.add_column(col)
    for n in sorted(snapshot.nodes, key=lambda n: n.name):
        fmt = lambda m: ",".join(f"{k}:{v}" for k, v in sorted(m.items())) or "-"  # noqa: E731
        state = n.state + ("" if n.schedulable else " (not schedulable)")
        t.add_row(n.name, state, fmt(n.gpus_total), fmt(n.gpus_used), ",".join(n.partitions), ",".join(n.features))
    console.print(t)

    jobs = snapshot.gpu_jobs()
    t = Table(title=f"GPU jobs ({len(jobs)}; {len(snapshot.jobs) - len(jobs)} other jobs not shown)")
    for col in ("job", "tenant", "state", "GPUs", "per", "type", "priority", "nice", "reason/nodes", "name"):
        t.add_column(col)
    for j in jobs:
        r = j.gpu_request
        assert r is not None
        where = ",".join(j.nodes) if j.nodes else j.reason
        t.add_row(j.job_id, j.account, j.state.lower(), str(r.total), r.per,
                  j.gpu_type_running or r.gpu_type or "any", str(j.priority), str(j.nice),
                  where, j.name)
    console.print(t)


@click.command("snapshot")
@config_option
@json_option
def command(config_path: str | None, as_json: bool) -> None:
    """Show what the controller sees: GPUs per type, tenants, GPU jobs (--json: PROBLEM.json)."""
    cfg = config_mod.load(config_path)
    snapshot = make_port(cfg).snapshot()
    if as_json:
        problem = snapshot_to_problem(snapshot, cfg.tenants)
        click.echo(json.dumps(problem_to_dict(problem), indent=2, sort_keys=False))
    else:
        render(snapshot, Console(soft_wrap=True))
