"""``sinfo -N -O``: the columns asked for and records -> :class:`~slurm_fair.model.Node`."""

from __future__ import annotations

from ..model import Node
from .fields import NONE, expand_hostlist, parse_int, parse_memory_mb
from .gres import gpus_by_type
from .records import split_records

#: sinfo -N -O fields
SINFO_FIELDS: tuple[str, ...] = (
    "NodeList",
    "StateComplete",
    "CPUs",
    "Gres",
    "GresUsed",
    "Partition",
    "Features",
    "Memory",
    "PriorityTier",
)


def parse_sinfo(text: str, fs: str) -> list[Node]:
    """sinfo -N lists a node once per partition: merge those lines into one Node each."""
    merged: dict[str, dict] = {}
    for f in split_records(text, fs, len(SINFO_FIELDS)):
        nodelist, state, cpus, gres, gres_used, partition, features, memory, tier = f
        for name in expand_hostlist(nodelist):
            n = merged.get(name)
            if n is None:
                n = merged[name] = {
                    "name": name,
                    "state": state.strip().lower(),
                    "gpus_total": gpus_by_type(gres),
                    "gpus_used": gpus_by_type(gres_used),
                    "partitions": [],
                    "features": tuple(
                        x for x in features.strip().split(",") if x and x.lower() not in NONE
                    ),
                    "cpus": parse_int(cpus),
                    "memory_mb": parse_memory_mb(memory),
                    "tiers": {},
                }
            p = partition.strip().rstrip("*")
            if p and p not in n["partitions"]:
                n["partitions"].append(p)
                n["tiers"][p] = parse_int(tier)
    return [Node(**{**n, "partitions": tuple(n["partitions"])}) for n in merged.values()]
