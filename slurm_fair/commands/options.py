"""Options shared by several commands, defined once (pip-tools' ``scripts/options.py``)."""

from __future__ import annotations

import click

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Configuration file (default: $SLURM_FAIR_CONFIG, ./conf/slurm-fair.toml, "
    "/etc/slurm-fair/slurm-fair.toml).",
)

json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
