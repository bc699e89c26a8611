"""Render the Slurm/MariaDB configuration files from ``templates/slurm/*.j2``.

The templates know nothing about the testbed: hostnames, addresses, ports and paths are all
variables, so the deployment work (a real cluster, docker-compose) renders the *same* files with
another context. :func:`testbed_context` builds the context for the local testbed.

Where the templates are found (one copy of each, never duplicated into the package):
1. ``$SLURM_FAIR_TEMPLATES`` (a directory holding ``slurm/``),
2. ``templates/`` beside the ``slurm_fair`` package (a source checkout or an editable install),
3. ``<sys.prefix>/share/slurm-fair/templates`` (where a packaged install puts data files).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

from .. import templating
from ..deploy.weights import billing_weights, speed_order
from ..estimates.priors import prior_speeds
from ..errors import ConfigError, TestbedError
from ..estimates.gavel import load as load_table
from .config import TestbedConfig, TestbedNode
from .layout import Layout

#: rendered file name -> template name (under templates/slurm/)
FILES: dict[str, str] = {
    "slurm.conf": "slurm.conf.j2",
    "gres.conf": "gres.conf.j2",
    "slurmdbd.conf": "slurmdbd.conf.j2",
    "my.cnf": "my.cnf.j2",
}


def templates_dir() -> Path:
    """Find the templates directory (search order: :mod:`slurm_fair.templating`)."""
    found = templating.templates_dir("slurm/slurm.conf.j2")
    if found is None:
        raise TestbedError(templating.not_found("slurm/slurm.conf.j2"))
    return found


def environment() -> jinja2.Environment:
    """A jinja2 environment over templates/ that fails on any missing variable."""
    return templating.environment(templates_dir(), autoescape=False)


def render(template: str, context: Mapping[str, Any]) -> str:
    """Render ``templates/slurm/<template>``; a missing variable is a TestbedError."""
    try:
        return environment().get_template(f"slurm/{template}").render(**context)
    except jinja2.UndefinedError as exc:
        raise TestbedError(f"template slurm/{template}: {exc}") from None


def testbed_context(cfg: TestbedConfig, layout: Layout) -> dict[str, Any]:
    """The template variables for the local testbed: everything on 127.0.0.1, state in one dir."""
    nodes, billing, _rank = _nodes(cfg, layout)
    return {
        "cluster_name": cfg.cluster_name,
        "control_host": "localhost",
        "control_addr": "127.0.0.1",
        "slurmctld_port": cfg.ports["slurmctld"],
        "slurm_user": "root",
        "munge_socket": str(layout.munge_socket),
        "paths": _paths(layout),
        **_slurm_settings(cfg),
        **_accounting(cfg, layout),
        **_gres_kinds(cfg),
        "nodes": nodes,
        "all_nodes": ",".join(n.name for n in cfg.nodes),
        "default_partition": "gpu",
        # fair-share charges a GPU-hour by the type's measured speed; fastest type = 1
        "billing": {t: f"{w:g}" for t, w in billing.items()},
        **_partitions(cfg, billing),
    }


def _slurm_types(cfg: TestbedConfig) -> list[str]:
    """The GPU types Slurm knows on this cluster: every typed one, every extra one, file order."""
    out: dict[str, None] = {}
    for n in cfg.nodes:
        if n.typed:
            out[n.gpu_type] = None
        for name, t, _c in n.extra_gres:
            if name == "gpu":
                out[t] = None
    return list(out)


def _gres_kinds(cfg: TestbedConfig) -> dict[str, Any]:
    """``GresTypes`` and the typed GPU TRES slurmdbd tracks (``gpu_types``)."""
    shards = any(name == "shard" for n in cfg.nodes for name, _t, _c in n.extra_gres)
    return {"gres_types": "gpu,shard" if shards else "gpu", "gpu_types": _slurm_types(cfg),
            "accounting_tres": ["gres/shard"] if shards else []}


def _partitions(cfg: TestbedConfig, billing: Mapping[str, float]) -> dict[str, Any]:
    """One partition per GPU type (unless ``type_partitions = false``) and the site's own.

    Billing weights name only types Slurm knows (an untyped type has none: its GPUs bill as
    plain ``gres/gpu``). Every partition on one PriorityTier: a job steered into a type's
    partition is never evaluated (or preempting) ahead of jobs of the partition it asked for.
    """
    typed = set(_slurm_types(cfg))
    weights = {t: f"{w:g}" for t, w in billing.items() if t in typed}
    parts = []
    if cfg.type_partitions:
        parts += [{"name": t, "nodes": ",".join(n.name for n in cfg.nodes_of(t)), "tier": 1,
                   "billing": {t: weights[t]} if t in weights else {}} for t in cfg.gpu_types]
    for name, members in cfg.partitions.items():
        kinds = {n.gpu_type for n in cfg.nodes if n.name in members}
        parts.append({"name": name, "nodes": ",".join(members), "tier": 1,
                      "billing": {t: w for t, w in weights.items() if t in kinds}})
    return {"partitions": parts, "default_billing": weights}


def _nodes(cfg: TestbedConfig, layout: Layout) -> tuple[list[dict[str, Any]], dict[str, float], dict[str, int]]:
    """The nodes' variables, with their speed rank as Slurm's node ``Weight`` (the fastest type
    filled first), the billing weights and the rank they come from."""
    nodes: list[dict[str, Any]] = []
    for n in cfg.nodes:
        devices = layout.device_files(n.name, n.device_count)
        node: dict[str, Any] = {
            "name": n.name,
            "hostname": "localhost",
            "addr": "127.0.0.1",
            "port": n.port,
            "cpus": n.cpus,
            "memory_mb": cfg.memory_mb,
            "gpu_type": n.gpu_type,
            "gpus": n.gpus,
            "gres": n.gres,
            "device_files": _device_expr(devices),
        }
        if not n.typed or n.extra_gres:
            node.update(_site_gres(n, devices))
        nodes.append(node)
    try:
        billing = billing_weights(list(cfg.gpu_types), load_table(None), source=cfg.source)
    except ConfigError:  # a type the measured table does not know: price by the type priors
        speeds = prior_speeds(list(cfg.gpu_types)).speed
        billing = {t: round(speeds[t], 4) for t in cfg.gpu_types}
    rank = speed_order(billing)
    for node in nodes:
        node["weight"] = rank[node["gpu_type"]]
    return nodes, billing, rank


def _site_gres(n: TestbedNode, devices: list[Path]) -> dict[str, Any]:
    """A node of a site shape: its gres.conf lines (``gres_lines``).

    Untyped GPUs have no ``Type=``; every further GPU item gets the next device files; shards
    are spread by Slurm over the node's GPUs (``Count=`` only).
    """
    items = [("gpu", n.gpu_type if n.typed else "", n.gpus), *n.extra_gres]
    lines, first = [], 0
    for name, t, count in items:
        if name == "gpu":
            typ = f" Type={t}" if t else ""
            lines.append(f"Name=gpu{typ} File={_device_expr(devices[first:first + count])}")
            first += count
        else:
            lines.append(f"Name={name} Count={count}")
    return {"gres_lines": lines}


def _paths(layout: Layout) -> dict[str, str]:
    """Every daemon's state, pid and log file, under the testbed's directory."""
    return {
        "state_save": str(layout.ctld_state),
        "slurmd_spool": str(layout.spool / "slurmd-%n"),
        "slurmctld_pid": str(layout.pid_file("slurmctld")),
        "slurmd_pid": str(layout.run / "slurmd-%n.pid"),
        "slurmctld_log": str(layout.log_file("slurmctld")),
        "slurmd_log": str(layout.log / "slurmd-%n.log"),
        "slurmdbd_pid": str(layout.pid_file("slurmdbd")),
        "slurmdbd_log": str(layout.log_file("slurmdbd")),
    }


def _slurm_settings(cfg: TestbedConfig) -> dict[str, Any]:
    """slurm.conf's plugins, limits, timeouts and priority weights for a one-machine cluster."""
    return {
        "proctrack_type": "proctrack/linuxproc",
        "task_plugin": "task/none",
        "config_overrides": True,
        "scheduler_parameters": "sched_interval=2,bf_interval=2,defer_batch",
        "max_job_count": cfg.max_job_count,
        "max_array_size": cfg.max_job_count + 1,
        "min_job_age": cfg.min_job_age_s,
        "cred_expire": cfg.cred_expire_s,
        "job_submit_lua": cfg.job_submit_lua,
        "timeouts": {"slurmctld": 30, "slurmd": 30, "kill_wait": 5},
        "priority": {
            "type": cfg.priority_type,
            "decay_half_life": "1-0",
            "calc_period": 1,
            "weight_fairshare": 100000,
            "weight_age": 1000,
            "weight_job_size": 0,
            "weight_partition": 0,
            "weight_qos": 10000,
        },
    }


def _accounting(cfg: TestbedConfig, layout: Layout) -> dict[str, Any]:
    """slurmdbd and its MariaDB, on the testbed's own ports and directory."""
    return {
        "slurmdbd_host": "localhost",
        "slurmdbd_addr": "127.0.0.1",
        "slurmdbd_port": cfg.ports["slurmdbd"],
        "storage": {
            "host": "127.0.0.1",
            "port": cfg.ports["mariadb"],
            "user": "slurm",
            "password": layout.db_password(),
            "database": "slurm_acct_db",
        },
        "mariadb": {
            "datadir": str(layout.mysql_data),
            "socket": str(layout.mysql_socket),
            "port": cfg.ports["mariadb"],
            "bind": "127.0.0.1",
            "pid_file": str(layout.pid_file("mariadbd")),
            "log_file": str(layout.log_file("mariadbd")),
            "user": "root",
        },
    }


def _device_expr(files: list[Path]) -> str:
    """``dir/nvidia[0-3]`` for a run of files (Slurm accepts the bracket range in File=)."""
    if len(files) == 1:
        return str(files[0])
    first = int(files[0].name.removeprefix("nvidia"))
    return f"{files[0].parent}/nvidia[{first}-{first + len(files) - 1}]"


def render_all(cfg: TestbedConfig, layout: Layout) -> dict[str, str]:
    """Rendered file name -> text, for every file the testbed writes into ``etc/``."""
    ctx = testbed_context(cfg, layout)
    return {name: render(tpl, ctx) for name, tpl in FILES.items()}
