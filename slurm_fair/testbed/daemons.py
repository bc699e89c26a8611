"""The daemons of one testbed, in start order, and what ``status`` reports about them.

munged and MariaDB first, then slurmdbd, slurmctld and one slurmd per virtual node. Every
daemon carries markers (its config path on the command line, or ``SLURM_CONF`` in its
environment) so :mod:`.procs` signals only the processes of *this* testbed, never by name alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .config import TestbedConfig
from .layout import Layout
from .procs import DaemonSpec

#: node states (sinfo %T, lower case) that mean "slurmd registered and responding"
RESPONDING = {"idle", "mixed", "allocated", "completing", "reserved", "planned", "drained", "draining"}


@dataclass(frozen=True)
class DaemonStatus:
    name: str
    running: bool
    pid: int | None
    port: int | None
    log_file: Path


@dataclass(frozen=True)
class Status:
    """What runs: each daemon, and the node states when slurmctld answers."""

    dir: Path
    daemons: tuple[DaemonStatus, ...]
    nodes: Mapping[str, str]  # node -> state ({} when slurmctld is not reachable)

    @property
    def all_running(self) -> bool:
        return all(d.running for d in self.daemons)

    @property
    def healthy(self) -> bool:
        return self.all_running and bool(self.nodes) and all(
            s in RESPONDING for s in self.nodes.values()
        )


def daemon_specs(config: TestbedConfig, layout: Layout, program: Callable[[str], str]) -> list[DaemonSpec]:
    """Every daemon in start order; ``program`` says how to call one of them (the testbed's
    wrapper for another Slurm version, else the host's own)."""
    L = layout
    conf = str(L.slurm_conf)
    slurm_env = {"SLURM_CONF": conf}
    specs = [
        DaemonSpec(
            "munged", "munged",
            (program("munged"), f"--socket={L.munge_socket}", f"--key-file={L.munge_key}",
             f"--pid-file={L.pid_file('munged')}", f"--log-file={L.log_file('munged')}",
             f"--seed-file={L.run / 'munged.seed'}", "--force"),
            L.pid_file("munged"), L.log_file("munged"),
            markers=(f"--socket={L.munge_socket}",),
        ),
        DaemonSpec(
            "mariadbd", "mariadbd",
            (program("mariadbd"), f"--defaults-file={L.my_cnf}"),
            L.pid_file("mariadbd"), L.log_file("mariadbd"), port=config.ports["mariadb"],
            forks=False, markers=(f"--defaults-file={L.my_cnf}",),
        ),
        DaemonSpec(
            "slurmdbd", "slurmdbd", (program("slurmdbd"),),
            L.pid_file("slurmdbd"), L.log_file("slurmdbd"), port=config.ports["slurmdbd"],
            env_conf=conf, env=slurm_env,
        ),
        DaemonSpec(
            "slurmctld", "slurmctld", (program("slurmctld"), "-f", conf),
            L.pid_file("slurmctld"), L.log_file("slurmctld"), port=config.ports["slurmctld"],
            markers=(conf,), env=slurm_env,
        ),
    ]
    for node in config.nodes:
        name = f"slurmd:{node.name}"
        specs.append(
            DaemonSpec(
                name, "slurmd", (program("slurmd"), "-f", conf, "-N", node.name),
                L.pid_file(name), L.log_file(name), port=node.port,
                markers=(conf, node.name), env=slurm_env,
            )
        )
    return specs
