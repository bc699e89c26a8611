"""The simulated cluster: GPUs per type, optionally cut into nodes with a speed factor each.

Spec syntax: items ``TYPE=COUNT`` or ``TYPE=NODESxGPUS`` (``v100=2x4,p100=2x4,k80=1x8``: real
clusters mix node sizes, and a gang of 8 GPUs on one node fits only where a node has 8), or
Gavel's ``36:36:36`` (v100:p100:k80, each part COUNT or NODESxGPUS). ``gpus_per_node`` cuts the
types given as a plain COUNT into nodes of that size (the last one smaller when the count does
not divide); a ``NODESxGPUS`` item keeps its own size. Either every type has nodes or none does
(a type without nodes would have no GPUs a gang could be placed on), so a plain COUNT among
``NODESxGPUS`` items needs ``gpus_per_node``. Nodes are named ``<type>-1``, ``<type>-2``, ...

Node speed factors model Hops' server-level heterogeneity (same GPU, different host): given per
node name, or drawn uniformly from ``[1 - spread, 1 + spread]`` with a seed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field, replace
from typing import Mapping

from ..errors import UserError
from ..inputs import fullmatch
from ..model import MAX_GPUS, NodeCapacity, frozen_map

GAVEL_ORDER = ("v100", "p100", "k80")
_NODES_X_GPUS = re.compile(r"\s*([0-9]+)\s*[xX]\s*([0-9]+)\s*")
_COUNT = re.compile(r"\s*[0-9]+\s*")


@dataclass(frozen=True)
class ClusterSpec:
    """GPUs per type; nodes of ``node_gpus[type]`` GPUs (else ``gpus_per_node``) when either is set."""

    capacity: Mapping[str, int]
    gpus_per_node: int | None = None
    speeds: Mapping[str, float] = field(default_factory=dict)
    #: GPUs per node of the types given as NODESxGPUS (they override ``gpus_per_node``)
    node_gpus: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "capacity", frozen_map(self.capacity))
        object.__setattr__(self, "speeds", frozen_map(self.speeds))
        object.__setattr__(self, "node_gpus", frozen_map(self.node_gpus))
        if self.node_gpus and not self.gpus_per_node:
            bare = sorted(set(self.capacity) - set(self.node_gpus))
            if bare:
                raise ValueError(f"type {bare[0]!r} has no node size while others have (set gpus_per_node)")

    @property
    def total_gpus(self) -> int:
        return sum(self.capacity.values())

    @property
    def has_nodes(self) -> bool:
        """Whether the GPUs are cut into nodes (placement per node) or only counted per type."""
        return bool(self.gpus_per_node or self.node_gpus)

    def node_size(self, gpu_type: str) -> int | None:
        """GPUs per node of a type (the last node of a plain COUNT may hold fewer)."""
        return self.node_gpus.get(gpu_type, self.gpus_per_node)

    def layout(self, gpu_type: str) -> list[int]:
        """GPUs of each node of a type, in node-name order (empty without nodes)."""
        size = self.node_size(gpu_type)
        if not size:
            return []
        full, rest = divmod(int(self.capacity[gpu_type]), size)
        return [size] * full + ([rest] if rest else [])

    def nodes(self) -> tuple[NodeCapacity, ...]:
        """Node structure for :class:`~slurm_fair.model.Problem` (empty without nodes)."""
        out: list[NodeCapacity] = []
        for gpu_type in sorted(self.capacity):
            for i, gpus in enumerate(self.layout(gpu_type), start=1):
                name = f"{gpu_type}-{i}"
                out.append(NodeCapacity(name, gpu_type, gpus, float(self.speeds.get(name, 1.0))))
        return tuple(out)

    def describe(self) -> dict[str, object]:
        """JSON-friendly: capacity, node layout per type (``"2x4"``, ``"2x4+1x2"``), speeds."""
        return {
            "capacity": dict(self.capacity),
            "gpus_per_node": self.gpus_per_node,
            "nodes": {k: _layout_text(self.layout(k)) for k in sorted(self.capacity)} if self.has_nodes else {},
            "node_speeds": {n.name: n.speed for n in self.nodes() if n.speed != 1.0},
        }


def _layout_text(sizes: list[int]) -> str:
    """``[4, 4, 2]`` -> ``"2x4+1x2"``."""
    groups: dict[int, int] = {}
    for size in sizes:
        groups[size] = groups.get(size, 0) + 1
    return "+".join(f"{n}x{size}" for size, n in groups.items())


def parse_cluster(spec: str, gpus_per_node: int | None = None) -> ClusterSpec:
    """Parse ``v100=8,p100=2x4`` or ``36:36:36``; a UserError naming the bad item."""
    text = spec.strip()
    if gpus_per_node is not None and gpus_per_node < 1:
        raise UserError(f"--gpus-per-node {gpus_per_node}: must be >= 1")
    items: list[tuple[str, str, str]] = []  # (type, amount, the item as written)
    if "=" not in text and ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise UserError(f"--cluster {spec!r}: Gavel's form is V100:P100:K80, e.g. 36:36:36")
        items = [(k, raw, raw.strip()) for k, raw in zip(GAVEL_ORDER, parts)]
    else:
        for item in filter(None, (p.strip() for p in text.split(","))):
            name, sep, raw = item.partition("=")
            if not sep or not name.strip():
                raise UserError(f"--cluster {spec!r}: item {item!r}: expected TYPE=COUNT or TYPE=NODESxGPUS, e.g. v100=8,k80=1x8")
            if name.strip() in {k for k, _, _ in items}:
                raise UserError(f"--cluster {spec!r}: item {item!r}: type {name.strip()!r} given twice")
            items.append((name.strip(), raw, item))
    capacity: dict[str, int] = {}
    node_gpus: dict[str, int] = {}
    bare: list[str] = []
    for gpu_type, raw, item in items:
        total, size = _amount(raw, item, spec)
        if total <= 0:
            continue
        capacity[gpu_type] = total
        if size is None:
            bare.append(item)
        else:
            node_gpus[gpu_type] = size
    if not capacity:
        raise UserError(f"--cluster {spec!r}: no GPUs")
    if node_gpus and bare and gpus_per_node is None:
        raise UserError(f"--cluster {spec!r}: item {bare[0]!r} has no node size while others have: "
                        f"write it as TYPE=NODESxGPUS or give --gpus-per-node")
    return ClusterSpec(capacity, gpus_per_node, node_gpus=node_gpus)


def _amount(raw: str, item: str, spec: str) -> tuple[int, int | None]:
    """``COUNT`` -> (COUNT, None); ``NODESxGPUS`` -> (NODES * GPUS, GPUS)."""
    shaped = _NODES_X_GPUS.fullmatch(raw)
    if shaped and len(raw) < 40:
        nodes, gpus = int(shaped.group(1)), int(shaped.group(2))
        if gpus < 1:
            raise UserError(f"--cluster {spec!r}: item {item!r}: a node needs at least 1 GPU")
        _check_total(nodes * gpus, item, spec)
        return nodes * gpus, gpus
    if not fullmatch(_COUNT, raw) or len(raw) >= 40:  # ASCII digits only (int() takes "٤" and "1_0")
        raise UserError(f"--cluster {spec!r}: item {item!r}: {raw.strip()!r} is neither a whole number of GPUs "
                        f"nor NODESxGPUS")
    value = int(raw)
    _check_total(value, item, spec)
    return value, None


def _check_total(gpus: int, item: str, spec: str) -> None:
    if gpus > MAX_GPUS:
        raise UserError(f"--cluster {spec!r}: item {item!r}: {gpus} GPUs, more than the {MAX_GPUS:,} a type may have")


def with_speeds(
    cluster: ClusterSpec, speeds: Mapping[str, float] | None = None, spread: float = 0.0, seed: int = 0,
) -> ClusterSpec:
    """``cluster`` with node speed factors: explicit ones win, the others drawn from the spread."""
    if not cluster.has_nodes and (speeds or spread):
        raise UserError("node speed factors need nodes (--gpus-per-node or TYPE=NODESxGPUS items): they are per node")
    if not 0 <= spread < 1:
        raise UserError(f"--node-speed-spread {spread}: must be in [0, 1)")
    rng = random.Random(seed)
    names = [n.name for n in cluster.nodes()]
    unknown = sorted(set(speeds or {}) - set(names))
    if unknown:
        raise UserError(f"--node-speed: unknown node {unknown[0]!r}; nodes are {', '.join(names)}")
    out: dict[str, float] = {}
    for name in names:
        drawn = 1.0 + rng.uniform(-spread, spread) if spread else 1.0
        value = float((speeds or {}).get(name, drawn))
        if not value > 0:
            raise UserError(f"--node-speed {name}={value}: must be > 0")
        out[name] = round(value, 6)
    return replace(cluster, speeds=out)
