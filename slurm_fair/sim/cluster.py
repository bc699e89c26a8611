"""The simulated cluster: GPUs per type, optionally cut into nodes with a speed factor each.

Spec syntax: ``v100=8,p100=8,k80=8`` or Gavel's ``36:36:36`` (v100:p100:k80). With
``gpus_per_node`` the GPUs of each type are cut into nodes ``<type>-1``, ``<type>-2``, ... (the
last one smaller when the count does not divide), so placement and fragmentation are real.
Node speed factors model Hops' server-level heterogeneity (same GPU, different host): given per
node name, or drawn uniformly from ``[1 - spread, 1 + spread]`` with a seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Mapping

from ..errors import UserError
from ..model import NodeCapacity, frozen_map

GAVEL_ORDER = ("v100", "p100", "k80")


@dataclass(frozen=True)
class ClusterSpec:
    capacity: Mapping[str, int]
    gpus_per_node: int | None = None
    speeds: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "capacity", frozen_map(self.capacity))
        object.__setattr__(self, "speeds", frozen_map(self.speeds))

    @property
    def total_gpus(self) -> int:
        return sum(self.capacity.values())

    def nodes(self) -> tuple[NodeCapacity, ...]:
        """Node structure for :class:`~slurm_fair.model.Problem` (empty without gpus_per_node)."""
        if not self.gpus_per_node:
            return ()
        out: list[NodeCapacity] = []
        for gpu_type in sorted(self.capacity):
            left, i = int(self.capacity[gpu_type]), 1
            while left > 0:
                n = min(left, self.gpus_per_node)
                name = f"{gpu_type}-{i}"
                out.append(NodeCapacity(name, gpu_type, n, float(self.speeds.get(name, 1.0))))
                left -= n
                i += 1
        return tuple(out)

    def describe(self) -> dict[str, object]:
        return {
            "capacity": dict(self.capacity),
            "gpus_per_node": self.gpus_per_node,
            "node_speeds": {n.name: n.speed for n in self.nodes() if n.speed != 1.0},
        }


def parse_cluster(spec: str, gpus_per_node: int | None = None) -> ClusterSpec:
    """Parse ``v100=8,p100=8,k80=8`` or ``36:36:36``; a UserError naming the bad part."""
    text = spec.strip()
    capacity: dict[str, int] = {}
    if "=" not in text and ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise UserError(f"--cluster {spec!r}: Gavel's form is V100:P100:K80, e.g. 36:36:36")
        for gpu_type, raw in zip(GAVEL_ORDER, parts):
            capacity[gpu_type] = _count(raw, spec)
    else:
        for item in filter(None, (p.strip() for p in text.split(","))):
            name, sep, raw = item.partition("=")
            if not sep or not name.strip():
                raise UserError(f"--cluster {spec!r}: expected TYPE=COUNT items, e.g. v100=8,p100=8")
            if name.strip() in capacity:
                raise UserError(f"--cluster {spec!r}: type {name.strip()!r} given twice")
            capacity[name.strip()] = _count(raw, spec)
    capacity = {k: v for k, v in capacity.items() if v > 0}
    if not capacity:
        raise UserError(f"--cluster {spec!r}: no GPUs")
    if gpus_per_node is not None and gpus_per_node < 1:
        raise UserError(f"--gpus-per-node {gpus_per_node}: must be >= 1")
    return ClusterSpec(capacity, gpus_per_node)


def _count(raw: str, spec: str) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise UserError(f"--cluster {spec!r}: {raw.strip()!r} is not a whole number of GPUs") from None
    if value < 0:
        raise UserError(f"--cluster {spec!r}: negative GPU count {value}")
    return value


def with_speeds(cluster: ClusterSpec, speeds: Mapping[str, float] | None = None, spread: float = 0.0, seed: int = 0) -> ClusterSpec:
    """``cluster`` with node speed factors: explicit ones win, the others drawn from the spread."""
    if not cluster.gpus_per_node and (speeds or spread):
        raise UserError("node speed factors need --gpus-per-node (they are per node)")
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
    return ClusterSpec(cluster.capacity, cluster.gpus_per_node, out)
