"""``scontrol show node -o``: one line of ``Key=Value`` pairs per node -> :class:`Node`.

The adapter reads nodes with ``sinfo -N -O`` (:mod:`.sinfo`); this reader is for what a site
hands over as it is (``scontrol show nodes -o`` saved to a file) and for checking the gres
readers against real output of other versions. GPUs installed come from ``Gres=``; GPUs in use
from ``GresUsed=`` when the line has it (older Slurm), else from ``AllocTRES=`` (``gres/gpu:TYPE=N``,
or the untyped ``gres/gpu=N`` when the node has one GPU type). ``State`` is kept whole
(``MIXED+DRAIN``, ``IDLE+CLOUD+POWERED_DOWN``): :func:`~slurm_fair.slurm.model.node_state_schedulable`
reads it.
"""

from __future__ import annotations

from ...errors import SlurmOutputError
from ..model import Node
from .fields import NONE, parse_int, parse_memory_mb
from .gres import UNTYPED, gpus_by_type, parse_tres_map
from .partitions import key_values


def _used_from_tres(alloc: str, total: dict[str, int]) -> dict[str, int]:
    """GPUs in use per type from a node's ``AllocTRES``."""
    tres = {k.replace("gres:", "gres/", 1): v for k, v in parse_tres_map(alloc).items()}
    typed = {k.split(":", 1)[1]: parse_int(v) for k, v in tres.items() if k.startswith("gres/gpu:")}
    if typed:
        return typed
    n = parse_int(tres.get("gres/gpu", "0"))
    if n and len(total) == 1:
        return {next(iter(total)): n}
    return {UNTYPED: n} if n else {}


def parse_node_line(line: str) -> Node:
    kv = key_values(line)
    name = kv.get("NodeName", "").split(" ")[0]
    if not name:
        raise SlurmOutputError(f"scontrol show node: no NodeName in {line[:120]!r}")
    total = gpus_by_type(kv.get("Gres", ""))
    if "GresUsed" in kv:
        used = gpus_by_type(kv["GresUsed"])
    else:
        used = _used_from_tres(kv.get("AllocTRES", ""), total)
    features = kv.get("ActiveFeatures", kv.get("AvailableFeatures", ""))
    partitions = kv.get("Partitions", "")
    return Node(
        name=name,
        state=kv.get("State", "").split(" ")[0],
        gpus_total=total,
        gpus_used=used,
        partitions=tuple(p for p in partitions.split(",") if p and p.lower() not in NONE),
        features=tuple(f for f in features.split(",") if f and f.lower() not in NONE),
        cpus=parse_int(kv.get("CPUTot", "0")),
        memory_mb=parse_memory_mb(kv.get("RealMemory", "0")),
    )


def parse_nodes(text: str) -> list[Node]:
    """Every node of ``scontrol show nodes -o`` (lines not starting with ``NodeName=`` skipped)."""
    return [parse_node_line(ln.strip()) for ln in text.splitlines() if ln.strip().startswith("NodeName=")]
