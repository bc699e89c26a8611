"""Everything slurm-fair reads from or writes to Slurm: the port, the real adapter, the fake.

:func:`make_port` is how the rest of the project gets a port for a configuration; nothing
outside this package runs a Slurm command.
"""

from __future__ import annotations

from typing import Mapping

from .port import SlurmPort


def make_port(config, env: Mapping[str, str | None] | None = None) -> SlurmPort:
    """The SlurmPort of a configuration's ``[slurm] backend``: ``cli`` (Slurm's own commands),
    ``pyslurm`` or ``auto`` (pyslurm when it imports and matches the running Slurm, else the
    commands with a warning: :func:`.pyslurm_port.choose`)."""
    from .cli import SlurmCli

    cli = SlurmCli.from_config(config, env=env)
    backend = config["slurm"].get("backend", "cli")
    if backend == "cli":
        return cli
    from .pyslurm_port import choose

    port: SlurmPort = choose(cli, backend)
    return port


def backend_info(port: object) -> dict[str, str]:
    """Which backend a port is and why it was taken: ``{"backend": "pyslurm", "note": ...}``
    (what ``snapshot``, ``run --json`` and ``metrics`` show)."""
    name = str(getattr(port, "backend", "") or type(port).__name__)
    return {"backend": name, "note": str(getattr(port, "backend_note", "") or name)}


__all__ = ["SlurmPort", "backend_info", "make_port"]
