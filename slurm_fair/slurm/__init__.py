"""Everything slurm-fair reads from or writes to Slurm: the port, the real adapter, the fake.

:func:`make_port` is how the rest of the project gets a port for a configuration; nothing
outside this package runs a Slurm command.
"""

from __future__ import annotations

from typing import Mapping

from .port import SlurmPort


def make_port(config, env: Mapping[str, str | None] | None = None) -> SlurmPort:
    """The SlurmPort of a configuration: Slurm's own commands (``[slurm] backend = "cli"``, the
    only value configuration validation accepts)."""
    from .cli import SlurmCli

    return SlurmCli.from_config(config, env=env)


__all__ = ["SlurmPort", "make_port"]
