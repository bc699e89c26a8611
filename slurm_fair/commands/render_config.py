"""``slurm-fair render-config``: the files an admin installs to deploy slurm-fair.

From the configuration and the cluster's GPU inventory (an inventory file, e.g.
``conf/testbed.toml``, or ``--from-slurm``), render into ``--output-dir``: the slurm.conf fragment,
gres.conf, job_submit.lua, the QOS bootstrap script, the hardened systemd service and its timer,
the cron entry, the logrotate rule, Prometheus alert rules and a Grafana dashboard
(``--target cluster``); or the docker-compose cluster's configs
(``--target docker``, written to ``docker/rendered/`` by ``make docker-configs``).
Bad configuration or inventory: every problem listed, exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .. import atomic, config as config_mod
from ..deploy import inventory as inv_mod
from ..deploy.render import CLUSTER_FILES, DeployOptions, path_problem, render_cluster, run_as_problem, write
from ..testbed.docker import DOCKER_FILES, render_docker
from ..errors import ConfigError, Finding, UserError
from ..estimates.gavel import load as load_table
from .options import config_option, throughputs_option, from_slurm_option, inventory_option
from .output import check_distinct


def _checked(problem: Any) -> Any:
    """A click callback refusing a value ``problem(value)`` objects to, as a usage error (exit 2,
    one line naming the option) before anything is read or rendered."""
    def callback(ctx: click.Context, param: click.Parameter, value: str) -> str:
        if (msg := problem(value)):
            raise click.BadParameter(msg, ctx, param)
        return value

    return callback


def _output_dir_problem(value: str) -> str | None:
    """An empty name, an existing non-directory, or a name the file system cannot hold
    (:func:`slurm_fair.atomic.directory_problem`)."""
    if not value:
        return "an empty directory name"
    return atomic.directory_problem(value)


@click.command("render-config")
@click.option("--output-dir", "output_dir", type=click.Path(file_okay=False), default="slurm-fair-deploy",
              show_default=True, callback=_checked(_output_dir_problem), metavar="DIR",
              help="Directory to write the rendered files into.")
@config_option
@inventory_option
@from_slurm_option
@click.option("--target", type=click.Choice(["cluster", "docker"]), default="cluster", show_default=True,
              help="cluster: files for a real cluster; docker: the docker-compose cluster's configs.")
@throughputs_option
@click.option("--executable", default=DeployOptions.executable, show_default=True, callback=_checked(path_problem),
              help="Path of the slurm-fair program on the controller host.")
@click.option("--installed-config", default=DeployOptions.config_path, show_default=True,
              callback=_checked(path_problem),
              help="Where the configuration file lives on the controller host.")
@click.option("--run-as", default=DeployOptions.run_as, show_default=True, callback=_checked(run_as_problem),
              help="Dedicated system user the controller runs as (the unit's User=, the cron entry's).")
@click.option("--admin-level", type=click.Choice(["operator", "administrator"]),
              default=DeployOptions.admin_level, show_default=True,
              help="AdminLevel the QOS bootstrap grants a --run-as user that is not root/SlurmUser "
                   "(administrator: slurmdbd requires it for the controller's QOS writes).")
def command(output_dir: str, config_path: str | None, inventory: str | None, from_slurm: bool, target: str,
            throughputs: str | None, executable: str, installed_config: str, run_as: str,
            admin_level: str) -> None:
    """Render the deployment files (slurm.conf fragment, job_submit.lua, units, alerts, dashboard, ...)."""
    out = Path(output_dir)
    rendered = DOCKER_FILES if target == "docker" else CLUSTER_FILES
    # before anything is read: a rendered file must not replace --config or --inventory
    check_distinct({f"--output-dir {name}": out / name for name in rendered},
                   {"--config": config_path or config_mod.default_path(), "--inventory": inventory,
                    "--throughputs": throughputs})
    config = config_mod.load(config_path)
    if target == "docker":
        if from_slurm:
            raise UserError("--target docker renders a testbed description (--inventory), not --from-slurm")
        from ..testbed import config as tb_config
        from ..testbed.config import default_config_path

        path = inventory if inventory else default_config_path()
        # the one inventory reader (TOML or JSON, by extension), as --target cluster reads it
        tb = tb_config.validate(inv_mod.read_description(path), str(path)) if path else tb_config.load(None)
        if path is not None and not tb.raw.get("gpu_types"):
            # the testbed fills in its own GPU types: an empty file would render those, silently
            raise ConfigError(str(path), [Finding("gpu_types", "missing: the inventory names no GPU type "
                                                  "([gpu_types.TYPE] with nodes and gpus_per_node)")])
        files = render_docker(tb, config)
        written = write(files, out, DOCKER_FILES)
    else:
        if bool(inventory) == from_slurm:
            raise UserError("give exactly one of --inventory FILE or --from-slurm")
        if from_slurm:
            from ..slurm import make_port

            inv = inv_mod.from_snapshot(make_port(config).snapshot())
        else:
            inv = inv_mod.load(inventory)  # type: ignore[arg-type]
        opts = DeployOptions(executable, installed_config, run_as, admin_level)
        files = render_cluster(config, inv, load_table(throughputs), opts)
        written = write(files, out, CLUSTER_FILES)
    for path in written:
        click.echo(f"wrote {path}")
