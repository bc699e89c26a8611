"""What ``sbatch``'s GPU and shape options become in a pending job's squeue fields (Slurm 22.05).

The fake's :meth:`~slurm_fair.slurm.fake.FakeSlurm.submit` builds its jobs through this and the
real parser (:func:`~slurm_fair.slurm.parse.squeue.job_from_record`), so a test writes the options a
user would type and gets the request Slurm would store (``--gpus`` per job, ``--gres`` and
``--gpus-per-node`` per node, ``--gpus-per-task`` per task).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class SbatchRequest:
    """The squeue fields of a request (``gres:`` forms; "" where the option was not given)."""

    per_job: str = ""
    per_node: str = ""
    per_task: str = ""
    nodes: int = 1
    tasks: int = 1
    cpus: int = 1
    mem: str = "0"
    #: a user's other choices (squeue's forms; "" where not given)
    partition: str = ""
    qos: str = ""
    nodelist: str = ""
    exclude: str = ""
    time_limit: str = ""
    dependency: str = ""
    features: str = ""
    reservation: str = ""


def sbatch_request(gpu_args: Sequence[str] | str) -> SbatchRequest:
    """``--gres``, ``--gpus[-per-node|-per-task]``, ``-N``, ``-n``, ``-c``, ``--mem`` as sbatch
    stores them, and a user's choices the controller must respect (``-p``, ``-q``, ``-w``,
    ``-x``, ``-t`` in minutes, ``-d``, ``-C``, ``--reservation``); ValueError for any other option."""
    args = shlex.split(gpu_args) if isinstance(gpu_args, str) else list(gpu_args)
    per_job = per_node = per_task = ""
    nodes = tasks = cpus = 1
    mem = "0"
    other: dict[str, str] = {}
    pairs: list[tuple[str, str]] = []
    it = iter(args)
    for arg in it:
        if arg.startswith("--") and "=" in arg:
            key, _, value = arg.partition("=")
        else:
            key, value = arg, next(it, "")
        pairs.append((key, value))
    for key, value in pairs:
        if key == "--gres":
            per_node = f"gres:{value}"
        elif key == "--gpus-per-node":
            per_node = f"gres:gpu:{value}"
        elif key == "--gpus":
            per_job = f"gres:gpu:{value}"
        elif key == "--gpus-per-task":
            per_task = f"gres:gpu:{value}"
        elif key in ("-N", "--nodes"):
            nodes = int(value)
        elif key in ("-n", "--ntasks"):
            tasks = int(value)
        elif key in ("-c", "--cpus-per-task"):
            cpus = int(value)
        elif key == "--mem":
            mem = value if value[-1:].isalpha() else f"{value}M"
        elif key in _CHOICES:
            other[_CHOICES[key]] = value
        else:
            raise ValueError(f"fake sbatch does not know {key!r}")
    if "time_limit" in other and other["time_limit"].isdigit():  # sbatch -t 90: minutes
        m = int(other["time_limit"])
        other["time_limit"] = f"{m // 60}:{m % 60:02d}:00"
    return SbatchRequest(per_job, per_node, per_task, nodes, tasks, cpus, mem, **other)


#: sbatch options of a user's choices -> the SbatchRequest field
_CHOICES = {
    "-p": "partition", "--partition": "partition", "-q": "qos", "--qos": "qos",
    "-w": "nodelist", "--nodelist": "nodelist", "-x": "exclude", "--exclude": "exclude",
    "-t": "time_limit", "--time": "time_limit", "-d": "dependency", "--dependency": "dependency",
    "-C": "features", "--constraint": "features", "--reservation": "reservation",
}
