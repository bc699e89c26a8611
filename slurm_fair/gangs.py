"""How a gang of GPUs is cut over nodes: one definition for every layer.

A job of ``g`` GPUs runs on GPUs of one type, but on real servers: ``--gres=gpu:8`` (per node)
needs one node with 8 GPUs free, ``-N 2 --gres=gpu:4`` two nodes with 4 each, ``--gpus=8``
any nodes whose free GPUs add up to 8 (at most ``-N`` of them when that is given). Counting GPUs
per type only is how a gang gets sent where no node can hold it (Slurm then keeps it pending
with ``BadConstraints`` for ever). The policies' problem, the rounding step, the controller's
steering and the simulator all ask the two questions of this module:

* :func:`can_hold`: could the type's nodes hold the gang at all (every GPU free)? A type that
  cannot gets ``T_jk = 0`` in the problem, so no policy ever gives the job time there;
* :func:`choose_nodes`: which nodes, given what is free now (``None``: it does not fit now).

A :class:`Shape` is the gang's geometry; :class:`~slurm_fair.model.Job` carries one. CPUs and
memory are a property of a (job, node) pair, not of the shape: a caller passes only the nodes
that can host one part of the job (:attr:`Job.hosts <slurm_fair.model.Job.hosts>`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence


@dataclass(frozen=True)
class Shape:
    """``gpus`` in total; ``per_node`` GPUs on each of ``gpus / per_node`` nodes, or any split
    over at most ``max_nodes`` nodes (None: as many as needed)."""

    gpus: int
    per_node: int | None = None
    max_nodes: int | None = None

    @property
    def nodes_needed(self) -> int | None:
        """Exact node count of a per-node gang; None for a free split."""
        if self.per_node:
            return max(1, math.ceil(self.gpus / self.per_node))
        return None


def choose_nodes(
    shape: Shape,
    free: Mapping[str, int],
    wanted: Sequence[str] = (),
) -> dict[str, int] | None:
    """``{node: gpus}`` taking ``shape`` out of ``free`` (GPUs free per node), or None.

    Choice, in order: the ``wanted`` nodes when they hold the whole gang (a policy's hint, or
    the nodes a running job already has, so it is not moved for nothing); one node when one
    fits (the fullest that fits: best fit keeps big holes for big gangs); else, for a per-node
    gang, the fullest nodes with ``per_node`` free; for a free split, the largest free nodes
    first (the fewest nodes), within ``max_nodes``. ``free`` is not modified.
    """
    g = shape.gpus
    if g <= 0:
        return {}
    if sum(v for v in free.values() if v > 0) < g:
        return None
    hinted = [n for n in dict.fromkeys(wanted) if free.get(n, 0) > 0]
    if hinted:
        got = _cut(shape, {n: free[n] for n in hinted})
        if got is not None:
            return got
    return _cut(shape, free)


def _cut(shape: Shape, free: Mapping[str, int]) -> dict[str, int] | None:
    g = shape.gpus
    order = sorted(free, key=lambda n: (free[n], n))  # fullest (least free) first
    if shape.per_node:
        need, p = shape.nodes_needed or 1, shape.per_node
        fitting = [n for n in order if free[n] >= p]
        if len(fitting) < need:
            return None
        chosen = fitting[:need]
        out, left = {}, g
        for n in chosen:
            use = min(p, left)
            out[n] = use
            left -= use
        return out
    single = [n for n in order if free[n] >= g]
    if single:
        return {single[0]: g}
    limit = shape.max_nodes or len(free)
    out, left = {}, g
    for n in sorted(free, key=lambda n: (-free[n], n)):
        if left <= 0 or len(out) >= limit:
            break
        if free[n] <= 0:
            continue
        use = min(free[n], left)
        out[n] = use
        left -= use
    return out if left <= 0 else None


def can_hold(shape: Shape, node_gpus: Iterable[int]) -> bool:
    """Whether nodes with these GPU counts (all free) could hold the gang."""
    sizes = {f"n{i}": int(c) for i, c in enumerate(node_gpus) if c > 0}
    return choose_nodes(shape, sizes) is not None
