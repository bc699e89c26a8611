"""Everything slurm-fair reads from or writes to Slurm: the port, the real adapter, the fake.

:func:`make_port` is how the rest of the project gets a port for a configuration; nothing
outside this package runs a Slurm command.
"""

from __future__ import annotations

from typing import Mapping

from .port import SlurmPort


def make_port(config, env: Mapping[str, str | None] | None = None) -> SlurmPort:
    """The SlurmPort of ``[slurm] backend`` (only ``cli`` exists; ``pyslurm`` is refused with
    a clear error until a backend matching the installed Slurm is written)."""
    from ..errors import ConfigError, Finding
    from .cli import SlurmCli

    backend = config["slurm"]["backend"]
    if backend != "cli":
        raise ConfigError(config.source, [Finding("slurm.backend", f"backend {backend!r} is not available; use 'cli'")])
    return SlurmCli.from_config(config, env=env)


__all__ = ["SlurmPort", "make_port"]
