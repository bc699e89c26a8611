"""``TRESBillingWeights`` per GPU type from measured relative speed.

Slurm's fair-share charges a job its *billing* TRES. With one weight per GPU type, an hour on a
fast GPU costs more than an hour on a slow one, so a tenant that got the fast GPUs has used more
of its share, which is what heterogeneity-aware fairness means.

Our choice (documented in docs/deployment.md): the weight of type ``k`` is the mean, over the job
keys of the throughput table measured with a non-zero value on *every* type of the cluster, of
``T_jk / max_k' T_jk'`` (the normalised throughput ``n_jk`` of docs/fairness.md); the weights are then
divided by the largest so the fastest type has weight 1.0. Measured zeros (out of memory) are
left out: they say nothing about speed. A type the table does not know needs an explicit
``billing_weight`` in the inventory, else a clear error.
"""

from __future__ import annotations

from typing import Mapping

from ..errors import ConfigError, Finding
from ..estimates.gavel import ThroughputTable
from ..model import normalised_throughput


def billing_weights(
    gpu_types: list[str] | tuple[str, ...],
    table: ThroughputTable,
    overrides: Mapping[str, float] | None = None,
    source: str = "<inventory>",
) -> dict[str, float]:
    """``{gpu_type: weight}`` rounded to 4 decimals, fastest measured type = 1.0."""
    overrides = dict(overrides or {})
    measured_types = [k for k in gpu_types if k not in overrides]
    missing = [k for k in measured_types if k not in table.data]
    if missing:
        raise ConfigError(source, [
            Finding(f"gpu_types.{k}.billing_weight",
                    f"GPU type {k!r} is not in the throughput table ({table.source}); "
                    f"set billing_weight (known types: {', '.join(table.gpu_types)})")
            for k in missing
        ])
    weights: dict[str, float] = {}
    if measured_types:
        keys = set.intersection(*(set(table.data[k]) for k in measured_types))
        ratios: dict[str, list[float]] = {k: [] for k in measured_types}
        for key in sorted(keys):
            values = {k: table.data[k][key] for k in measured_types}
            if min(values.values()) <= 0:
                continue
            for k in values:
                ratios[k].append(normalised_throughput(values, k))
        if not ratios[measured_types[0]]:
            raise ConfigError(source, [Finding(
                "gpu_types", f"no job type is measured on all of {', '.join(measured_types)} "
                f"in {table.source}; set billing_weight for each type")])
        mean = {k: sum(r) / len(r) for k, r in ratios.items()}
        top = max(mean.values())
        weights = {k: v / top for k, v in mean.items()}
    weights.update(overrides)
    return {k: round(weights[k], 4) for k in gpu_types}


def speed_order(weights: Mapping[str, float]) -> dict[str, int]:
    """``{gpu_type: rank}``, 1 = fastest (largest billing weight), ties by name.

    Slurm gets this order as node ``Weight=rank`` (Slurm fills the lowest weight first, so a job
    that may run anywhere lands on the fastest free GPUs, not on ``k80-1`` because of its name).
    Partitions all keep one ``PriorityTier``: a tier above the partition a job asked for would
    let the controller's steering put it ahead of other accounts' jobs.
    """
    ordered = sorted(weights, key=lambda k: (-weights[k], k))
    return {k: i for i, k in enumerate(ordered, start=1)}
