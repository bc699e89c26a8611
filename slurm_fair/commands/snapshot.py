"""``slurm-fair snapshot [--json]``: what the controller sees, read from Slurm now.

``--json`` prints the problem the controller would solve now, as a valid PROBLEM.json
(docs/fairness.md): the controller's own builder (:func:`slurm_fair.controller.decide.observe`)
over the jobs of ``[controller].accounts``, with the controller's history read read-only from
its state store (empty when it never ran), so ``snapshot --json | slurm-fair solve`` gives the
allocation ``run --dry-run`` starts from. Extra per-job fields for people (state, partition,
request, estimate sources...) are ignored by ``solve``. Without ``--json``: readable tables of
nodes/GPUs per type and of GPU jobs. Slurm is found through ``[slurm]`` of
the configuration plus the process environment (``SLURM_CONF``), so
``eval "$(slurm-fair testbed env)"; slurm-fair snapshot`` reads the testbed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Mapping

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .. import config as config_mod
from ..controller import learned
from ..controller.cycle import decide_settings
from ..controller.decide import observe
from ..controller.scope import Scope, read_pilot
from ..controller.history import read_history_at
from ..controller.problem import configured_weights, tenant_weights
from ..controller.settings import Settings
from ..estimates.estimate import Estimate
from ..model import Problem
from ..problem_io import problem_to_dict
from ..slurm import backend_info, make_port
from ..slurm.model import SlurmJob, Snapshot
from ..slurm.port import SlurmPort
from .options import config_option, json_option
from .output import json_text


def job_extra(job: SlurmJob, estimate: Estimate | None) -> dict[str, Any]:
    """Fields beside the standard ones, for people (``solve`` ignores them)."""
    req = job.gpu_request
    extra: dict[str, Any] = {
        "state": job.state.lower(),
        "name": job.name,
        "partition": job.partition,
        "qos": job.qos,
        "requested_type": req.gpu_type if req else None,
        "original_request": req.raw if req else "",
        "per": req.per if req else "",
    }
    if job.nodes:
        extra["nodes"] = list(job.nodes)
    if job.gpu_type_running:
        extra["running_type"] = job.gpu_type_running
    if job.tags:
        extra["tags"] = dict(job.tags)
    if estimate is not None:
        extra["class"] = estimate.klass
        extra["class_source"] = estimate.class_source
        extra["sources"] = dict(estimate.sources)
        # the runs a learned (completed) or failing (failed) number rests on, per type
        extra["runs"] = dict(estimate.runs)
    return extra


def controller_problem(port: SlurmPort, cfg: config_mod.Config) -> Problem:
    """The problem the controller would solve now (module docstring), with :func:`job_extra`."""
    s = Settings.from_config(cfg)
    ds = replace(decide_settings(cfg, s, port), learned=learned.load(s.state_dir).speeds)
    history = read_history_at(s.state_dir, s.policy)
    pilot = read_pilot(port.snapshot(), history.owned, Scope.of(s.accounts, s.partitions))
    snapshot = pilot.view.snapshot
    obs = observe(pilot, history, ds)
    by_id = {j.job_id: j for j in snapshot.jobs}
    jobs = tuple(replace(j, extra=job_extra(by_id[j.id], obs.estimates.get(j.id))) for j in obs.built.problem.jobs)
    return replace(obs.built.problem, jobs=jobs)


def _gpus(jobs: Iterable[SlurmJob]) -> int:
    """The GPUs the jobs ask for."""
    return sum(j.gpu_request.total for j in jobs if j.gpu_request)


def render(snapshot: Snapshot, console: Console, configured: Mapping[str, float]) -> None:
    """Rich tables: capacity per GPU type, nodes, tenants (every Slurm account, with the weight
    the controller would use, :func:`~slurm_fair.controller.problem.tenant_weights`, and its
    share of the sum), GPU jobs."""
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
    # every Slurm account (a tenant with nothing queued still has its share), and any account
    # of a job that the association list did not show
    tenants = sorted({j.account for j in jobs} | {a.name for a in snapshot.accounts})
    weights = tenant_weights(tenants, configured, {a.name: a.shares for a in snapshot.accounts})
    total_weight = sum(weights.values()) or 1.0
    # short headers and values, the words in the caption: the table fits an 80-column terminal
    t = Table(title="Tenants (Slurm accounts): weight and share of the GPUs")
    for col in ("tenant", "weight", "share", "from", "jobs", "running", "pending"):
        t.add_column(col, justify="left" if col in ("tenant", "from") else "right")
    for u in tenants:
        mine = [j for j in jobs if j.account == u]
        t.add_row(u, f"{weights[u]:g}", f"{weights[u] / total_weight:.0%}",
                  "config" if u in configured else "shares", str(len(mine)),
                  str(_gpus(j for j in mine if j.running)), str(_gpus(j for j in mine if j.pending)))
    console.print(t)
    console.print(escape("from: config ([tenants.NAME].weight) or shares (Slurm's fairshare, 1 if unset)"))
    console.print("jobs: its GPU jobs; running, pending: the GPUs they ask for")

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
    """Show what the controller sees: GPUs per type, tenants, GPU jobs (--json: the PROBLEM.json
    the controller would solve now)."""
    cfg = config_mod.load(config_path)
    port = make_port(cfg)
    if as_json:  # a PROBLEM.json and nothing else (a fallback from pyslurm still warns on stderr)
        problem = controller_problem(port, cfg)
        click.echo(json_text(problem_to_dict(problem)), nl=False)
    else:
        backend = backend_info(port)
        console = Console(soft_wrap=True)
        console.print(escape(f"Slurm backend: {backend['backend']} ({backend['note']})"))
        render(port.snapshot(), console, configured_weights(cfg))
