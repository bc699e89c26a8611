"""Who holds which GPUs inside a simulated round: the GPUs still free per node, the jobs running
with their members, and the load they add up to (per type, per tenant, normalised speed).

:class:`~.playout.RoundPlay` takes and gives back GPUs through these as members start and end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping

from ..gangs import Shape, choose_nodes
from ..model import NodeCapacity, relative_speed

if TYPE_CHECKING:  # playout imports this module
    from .playout import JobState


class FreeGpus:
    """GPUs free per node of each type (one pool per type for a cluster without nodes)."""

    def __init__(self, capacity: Mapping[str, int], nodes: Iterable[NodeCapacity]) -> None:
        self.by_type = {k: int(c) for k, c in capacity.items()}
        self.by_node: dict[str, dict[str, int]] = {}
        for n in nodes:
            self.by_node.setdefault(n.gpu_type, {})[n.name] = int(n.gpus)

    @property
    def any(self) -> bool:
        return any(v > 0 for v in self.by_type.values())

    def fit(self, shape: Shape, gpu_type: str) -> dict[str, int] | None:
        """``{node: gpus}`` the gang would take on ``gpu_type`` now ({} without nodes), or None."""
        if self.by_type.get(gpu_type, 0) < shape.gpus:
            return None
        if not self.by_node:
            return {}
        return choose_nodes(shape, self.by_node.get(gpu_type, {}))

    def change(self, gpu_type: str, node_gpus: Mapping[str, int], gpus: int, sign: int) -> None:
        """Take (``sign=-1``) or give back (``+1``) a member's GPUs."""
        self.by_type[gpu_type] = self.by_type.get(gpu_type, 0) + sign * gpus
        nodes = self.by_node.get(gpu_type, {})
        for n, g in node_gpus.items():
            nodes[n] = nodes.get(n, 0) + sign * g


@dataclass
class Member:
    """One member holding GPUs in this round; times are offsets from the round start."""

    id: str
    gpu_type: str
    node_gpus: Mapping[str, int]
    start: float
    ready: float
    speed: float


@dataclass
class Group:
    """A job running in this round with its members (several: HadarE copies)."""

    job: JobState
    members: list[Member]
    factor: float
    done_at: float | None
    started_at: float = 0.0


@dataclass
class Load:
    """GPUs held per type and per tenant and the sum of normalised speeds, at one instant."""

    busy: dict[str, int] = field(default_factory=dict)
    tenants: dict[str, int] = field(default_factory=dict)
    eff: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.busy.values())

    def change(self, group: Group, sign: int) -> None:
        g, tenant = group.job.trace.gpus, group.job.trace.tenant
        for m in group.members:
            self.busy[m.gpu_type] = self.busy.get(m.gpu_type, 0) + sign * g
            self.tenants[tenant] = self.tenants.get(tenant, 0) + sign * g
            self.eff += sign * group.factor * relative_speed(m.speed, group.job.throughput)

    def copy(self) -> Load:
        return Load({k: v for k, v in self.busy.items() if v}, {u: v for u, v in self.tenants.items() if v}, self.eff)
