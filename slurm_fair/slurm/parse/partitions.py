"""``scontrol show partition -o``: one line of ``Key=Value`` pairs per partition -> :class:`Partition`.

Only the keys the controller's steering rules read are kept (who may use the partition, its
limits, its tier, its state and nodes). Values are split at the spaces before a ``Key=``: no
value of these keys contains a space (names, lists, limits), and keys this parser does not
use are skipped whatever they hold. ``ALL`` means "no restriction" (None).
"""

from __future__ import annotations

import re

from ...errors import SlurmOutputError
from ..model import Partition
from .fields import NONE, expand_hostlist, parse_int, parse_minutes

#: a ``Key=`` at the start of the line or after a space
_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_]*)=")


def key_values(line: str) -> dict[str, str]:
    """``Key=Value`` pairs of one ``scontrol show ... -o`` line (values end at the next ``Key=``)."""
    keys = list(_KEY.finditer(line))
    out = {}
    for i, m in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(line)
        out[m.group(1)] = line[m.end():end].strip()
    return out


def _names(value: str | None) -> frozenset[str] | None:
    """``ALL`` (or nothing) -> None; ``a,b`` -> {a, b}."""
    if value is None or value.strip().upper() == "ALL" or value.strip().lower() in NONE:
        return None
    return frozenset(v for v in value.split(",") if v)


def _limit(value: str | None) -> int | None:
    if value is None or value.strip().upper() in {"UNLIMITED", "INFINITE"}:
        return None
    return parse_int(value) or None


def parse_partition_line(line: str) -> Partition:
    kv = key_values(line)
    name = kv.get("PartitionName", "")
    if not name:
        raise SlurmOutputError(f"scontrol show partition: no PartitionName in {line[:120]!r}")
    nodes = kv.get("Nodes", "")
    return Partition(
        name=name,
        nodes=expand_hostlist(nodes) if nodes and nodes.lower() not in NONE else (),
        state=kv.get("State", "UP").upper(),
        priority_tier=parse_int(kv.get("PriorityTier", "1"), 1),
        allow_accounts=_names(kv.get("AllowAccounts")),
        deny_accounts=_names(kv.get("DenyAccounts")) or frozenset(),
        allow_qos=_names(kv.get("AllowQos")),
        deny_qos=_names(kv.get("DenyQos")) or frozenset(),
        allow_groups=_names(kv.get("AllowGroups")),
        max_time_min=parse_minutes(kv.get("MaxTime", "UNLIMITED")),
        max_nodes=_limit(kv.get("MaxNodes")),
        default=kv.get("Default", "NO").upper() == "YES",
    )


def parse_partitions(text: str) -> list[Partition]:
    """Every partition of ``scontrol show partition -o`` (blank lines and "No partitions" skipped)."""
    out = []
    for line in text.splitlines():
        if not line.strip() or not line.lstrip().startswith("PartitionName="):
            continue
        out.append(parse_partition_line(line.strip()))
    return out
