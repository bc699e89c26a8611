"""The pyslurm backend's side process: the job fields only pyslurm's legacy read carries.

pyslurm's fast job read (``Jobs.load``, one RPC, the records left in C until a field is asked
for) lacks the GPU request strings (``tres_per_job``, ``tres_per_task``, ``tres_alloc_str``; in
22.5.3 and 24.11.0 alike) and gives a few fields in a form that loses what squeue prints (a time
limit of ``UNLIMITED`` and ``Partition_Limit`` both None, the dependency parsed into a dict). Its
legacy read (``job().get()``) has them, but turns every field of every job into Python objects:
most of a snapshot's time at 10,000 jobs, and all of it under the interpreter lock.

So :class:`~.pyslurm_port.PyslurmPort` runs the legacy read here, in a process of its own started
once per cluster, while it reads everything else through ``Jobs.load``: both reads are fresh each
snapshot (nothing is cached across snapshots, so a user's ``scontrol update`` of a pending job's
GPU request is seen by the very next snapshot, as through the commands), and the legacy read's
cost runs beside the rest instead of before it. Only the fields of :data:`FIELDS` come back.

The process is this module run by the interpreter that runs the controller
(``python -m slurm_fair.slurm.pyslurm_side``, the cluster's ``SLURM_CONF`` in its environment),
not a ``multiprocessing`` child: those re-import the parent's main script, which a site's own
script need not guard. It answers each line on its standard input with one message on its
standard output (8 bytes of length, then a pickle; the first message says it is ready), and ends
when its input closes (the parent's end). No import of pyslurm at module level: the parent
imports this module for :data:`FIELDS`.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
from typing import IO, Any

#: the legacy record's fields the side process returns, per job id, in this order; the state
#: last (not a field the job is built from: it tells a job that changed state between the reads)
FIELDS = ("tres_per_job", "tres_per_node", "tres_per_task", "tres_alloc_str", "dependency", "time_limit",
          "cpus_per_task", "pn_min_memory", "job_state")

_module: list[Any] = []


def start(conf: str | None) -> None:
    """The side process's initialiser: pyslurm loaded for the cluster's slurm.conf."""
    if conf:
        os.environ["SLURM_CONF"] = conf
    import pyslurm

    _module.append(pyslurm)


def ready() -> bool:
    """A no-op the parent sends first, so that the process is up before a snapshot needs it."""
    return bool(_module)


def legacy_fields() -> tuple[bool, Any]:
    """(True, {job id: the values of :data:`FIELDS`}) from one legacy read of every job, or
    (False, the error's message): pyslurm's exceptions need not cross a process boundary."""
    try:
        records = _module[0].job().get()
    except Exception as exc:  # noqa: BLE001 - any failure is reported to the parent as text
        return False, str(getattr(exc, "msg", "") or exc)
    out = {}
    for job_id, raw in records.items():
        out[int(job_id)] = tuple(raw.get(k) for k in FIELDS)
    return True, out


def send(out: IO[bytes], message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(struct.pack("!Q", len(data)))
    out.write(data)
    out.flush()


def receive(inp: IO[bytes]) -> Any:
    """One message of :func:`send` (EOFError when the other end is gone)."""
    head = inp.read(8)
    if len(head) < 8:
        raise EOFError("pyslurm's side process ended")
    size = struct.unpack("!Q", head)[0]
    data = inp.read(size)
    if len(data) < size:
        raise EOFError("pyslurm's side process ended")
    return pickle.loads(data)


def main() -> int:
    """Serve the parent (module docstring); messages go to the standard output as it was at
    start, anything else printed (by libslurm, pyslurm) to the standard error."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    try:
        start(os.environ.get("SLURM_CONF"))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which reads jobs itself
        send(out, (False, f"{type(exc).__name__}: {exc}"))
        return 1
    send(out, (True, "ready"))
    for _line in sys.stdin.buffer:
        send(out, legacy_fields())
    return 0


if __name__ == "__main__":
    sys.exit(main())
