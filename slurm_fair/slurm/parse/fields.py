"""Scalar columns of Slurm's output: times, integers, memory sizes, durations, hostlists.

Every parser maps Slurm's ways of saying "nothing" (``N/A``, ``(null)``, ``Unknown``, ...:
:data:`NONE`) to an empty value instead of failing.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache
from typing import Sequence

from ClusterShell.NodeSet import NodeSet, NodeSetException

from ...errors import SlurmOutputError

#: how Slurm prints "nothing" in a column (compared lower-cased)
NONE = {"", "n/a", "none", "unknown", "(null)", "invalid"}


def parse_time(text: str) -> datetime | None:
    """``2024-05-01T12:00:00`` (``SLURM_TIME_FORMAT=standard``); Unknown/N/A/None -> None."""
    t = text.strip()
    if t.lower() in NONE:
        return None
    try:
        return datetime.fromisoformat(t)
    except ValueError:
        raise SlurmOutputError(f"not a Slurm time: {t!r}") from None


def parse_int(text: str, default: int = 0) -> int:
    """An integer field; N/A and friends give ``default``."""
    t = text.strip()
    if t.lower() in NONE:
        return default
    try:
        return int(t)
    except ValueError:
        try:
            return int(float(t))
        except ValueError:
            raise SlurmOutputError(f"not an integer: {t!r}") from None


#: a size, with the per-CPU / per-node mark (``c``/``n``) sacct printed in ReqMem before 21.08
_MEM = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)[cn]?$", re.IGNORECASE)
_MEM_MB = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}


def parse_memory_mb(text: str) -> int:
    """``1000M``, ``4G``, ``64000`` (MB), ``4000Mc`` (per CPU, sacct < 21.08) -> MB; N/A and
    friends -> 0."""
    t = text.strip()
    if t.lower() in NONE:
        return 0
    m = _MEM.match(t)
    if not m:
        raise SlurmOutputError(f"not a Slurm memory size: {t!r}")
    return int(round(float(m.group(1)) * _MEM_MB[m.group(2).upper()]))


def parse_elapsed(text: str) -> float:
    """``[D-]HH:MM:SS[.sss]``, ``MM:SS`` or plain seconds -> seconds."""
    t = text.strip()
    if t.lower() in NONE or t.upper() in {"INVALID", "UNLIMITED"}:
        return 0.0
    days = 0
    if "-" in t:
        d, t = t.split("-", 1)
        days = int(d)
    parts = [float(p) for p in t.split(":")]
    seconds = 0.0
    for p in parts:
        seconds = seconds * 60 + p
    return days * 86400 + seconds


def parse_minutes(text: str) -> int | None:
    """A time limit (``UNLIMITED``, ``1-00:00:00``, ``30:00``, ``10``: minutes) -> whole minutes
    (rounded up); None for unlimited or not set."""
    t = text.strip()
    if t.lower() in NONE or t.upper() in {"UNLIMITED", "INFINITE", "PARTITION_LIMIT"}:
        return None
    if re.fullmatch(r"\d+", t):  # a bare number is minutes (MaxTime=60, squeue's %l never)
        return int(t)
    try:
        return int(-(-parse_elapsed(t) // 60))
    except ValueError:
        raise SlurmOutputError(f"not a Slurm time limit: {t!r}") from None


@lru_cache(maxsize=4096)
def fold_hostlist(nodes: Sequence[str]) -> str:
    """Node names -> Slurm's folded hostlist (``v100-[1-2]``); "" for none."""
    return str(NodeSet.fromlist(list(nodes))) if nodes else ""


@lru_cache(maxsize=8192)
def expand_hostlist(text: str) -> tuple[str, ...]:
    """``a100-[1-2],v100-1`` -> node names (ClusterShell NodeSet; empty/None -> (); sacct's
    ``None assigned`` for a job that never ran -> ()). Cached: a queue's jobs name the same few
    node lists over and over, and a snapshot expands every one of them (an immutable tuple)."""
    t = text.strip()
    if t.lower() in NONE or t.startswith("(") or t.lower() == "none assigned":
        return ()
    try:
        return tuple(NodeSet(t))
    except NodeSetException as exc:
        raise SlurmOutputError(f"bad hostlist {t!r}: {exc}") from None
