"""The docker-compose test cluster's files (``render-config --target docker``, issue 8).

slurm.conf, gres.conf and slurmdbd.conf are rendered from the *same* ``templates/slurm/*.j2`` as
the native testbed, with the testbed's own context (:func:`.render.testbed_context`) and only
the documented container differences (:data:`DOCKER_OVERRIDES`: hostnames, standard ports,
Debian paths), plus job_submit.lua, the accounts list and the QOS bootstrap script of
:mod:`slurm_fair.deploy.render`. It lives beside the testbed because it is built from the
testbed's context: ``testbed`` imports ``deploy``, never the other way round.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from ..config import Config
from ..deploy.render import DeployOptions, check_options, common_context, raise_unsafe, render_template
from ..errors import ConfigError, Finding
from .layout import Layout
from .render import testbed_context

#: rendered file name -> (template, mode)
DOCKER_FILES: dict[str, tuple[str, int]] = {
    "slurm.conf": ("slurm/slurm.conf.j2", 0o644),
    "gres.conf": ("slurm/gres.conf.j2", 0o644),
    "slurmdbd.conf": ("slurm/slurmdbd.conf.j2", 0o600),
    "job_submit.lua": ("deploy/job_submit.lua.j2", 0o644),
    "accounts.txt": ("deploy/accounts.txt.j2", 0o644),
    "bootstrap.sh": ("deploy/bootstrap.sh.j2", 0o755),
}

#: the docker cluster's database password: a throwaway test cluster on a private network
DOCKER_DB_PASSWORD = "slurm-fair-test-only"

#: what the docker cluster changes in the testbed's context (documented in docs/deployment.md)
DOCKER_OVERRIDES: dict[str, Any] = {
    "control_host": "slurmctld",
    "control_addr": "",
    "slurmctld_port": 6817,
    "slurm_user": "slurm",
    "munge_socket": "",
    "paths": {
        "state_save": "/var/spool/slurmctld",
        "slurmd_spool": "/var/spool/slurmd",
        "slurmctld_pid": "/run/slurmctld.pid",
        "slurmd_pid": "/run/slurmd.pid",
        "slurmctld_log": "/var/log/slurm/slurmctld.log",
        "slurmd_log": "/var/log/slurm/slurmd.log",
        "slurmdbd_pid": "/run/slurmdbd.pid",
        "slurmdbd_log": "/var/log/slurm/slurmdbd.log",
    },
    "slurmdbd_host": "slurmdbd",
    "slurmdbd_addr": "slurmdbd",
    "slurmdbd_port": 6819,
    "job_submit_lua": True,
    "storage": {
        "host": "mariadb",
        "port": 3306,
        "user": "slurm",
        "password": DOCKER_DB_PASSWORD,
        "database": "slurm_acct_db",
    },
}

def docker_context(testbed_cfg: Any, config: Config) -> dict[str, Any]:
    """The testbed's context for ``testbed_cfg`` with :data:`DOCKER_OVERRIDES` (and docker nodes).

    Built *from* :func:`testbed_context` so a variable the testbed adds later reaches the docker
    files too; only the documented keys differ.
    """
    with tempfile.TemporaryDirectory(prefix="sf-render-") as tmp:
        ctx = testbed_context(testbed_cfg, Layout(Path(tmp)))
    ctx.update({k: (dict(v) if isinstance(v, dict) else v) for k, v in DOCKER_OVERRIDES.items()})
    ctx["nodes"] = [
        {**node, "hostname": node["name"], "addr": "", "port": None,
         "device_files": _docker_devices(node["gpus"])}
        for node in ctx["nodes"]
    ]
    problems: list[Finding] = []
    check_options(config, DeployOptions(), problems)
    if problems:
        raise ConfigError(config.source, problems)
    ctx.update(common_context(config, dict(testbed_cfg.tenants), config["controller"]["state_dir"]))
    ctx.update({"cluster_where": testbed_cfg.cluster_name, "run_as": "root", "admin_level": "administrator"})
    # the testbed validated its own values; check what this module adds or changes
    raise_unsafe({k: ctx[k] for k in ("accounts", "plan_path", "nodes", "gpu_types")}, config.source)
    return ctx


def _docker_devices(count: int) -> str:
    return "/dev/nvidia0" if count == 1 else f"/dev/nvidia[0-{count - 1}]"


def render_docker(testbed_cfg: Any, config: Config) -> dict[str, str]:
    """Output file name -> text for the docker-compose cluster (``docker/rendered/``)."""
    ctx = docker_context(testbed_cfg, config)
    return {name: render_template(tpl, ctx) for name, (tpl, _mode) in DOCKER_FILES.items()}
