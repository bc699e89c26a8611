"""Options shared by several commands, defined once (pip-tools' ``scripts/options.py``)."""

from __future__ import annotations

import click

from ..testbed.rootfs import VERSIONS

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Configuration file (default: $SLURM_FAIR_CONFIG, ./conf/slurm-fair.toml, "
    "/etc/slurm-fair/slurm-fair.toml).",
)

json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")

#: ``--slurm VERSION`` of the testbed commands (``testbed up|down|status|env|replay``)
slurm_option = click.option(
    "--slurm",
    "slurm",
    type=click.Choice(list(VERSIONS)),
    default=None,
    help="Slurm version: 22.05 (the host's packages, the default) or 24.11 (Debian trixie's, in a "
    "root filesystem made once under the testbed directory). Another version than the "
    "description's moves every port (by +1000 for 24.11) and, without --dir, uses .testbed-<version>.",
)
