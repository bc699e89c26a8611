"""Gres and TRES strings: node gres, job requests, allocated-TRES maps, QOS ``GrpTRES``.

Forms: ``gres:gpu:v100:2`` (Slurm 22.05), ``gres/gpu:v100:2`` (24.05+), ``gpu:v100:2``, untyped
``gres:gpu:2`` / ``gpu``, the TRES form ``gres/gpu:v100=1`` (24.11, ``--gpus-per-task``), node
gres with a ``(S:0-1)``/``(IDX:0,2-3)`` suffix, several items separated by commas.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping

from ...errors import SlurmOutputError
from ..model import GpuRequest
from .fields import NONE, parse_int

#: what an untyped GPU (``Gres=gpu:4`` on a node) is called in capacities and problems
UNTYPED = "gpu"

_COUNT = re.compile(r"^(\d+)([KMGTP]?)$", re.IGNORECASE)
_MULT = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}


def _count(text: str) -> int:
    m = _COUNT.match(text.strip())
    if not m:
        raise SlurmOutputError(f"not a gres count: {text!r}")
    return int(m.group(1)) * _MULT[m.group(2).upper()]


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside parentheses (``gpu:v100:2(IDX:0,2),gpu:a100:1``)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif ch == sep and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return [p for p in (s.strip() for s in out) if p]


@dataclass(frozen=True)
class GresEntry:
    """One ``name[:type][:flags][:count][(suffix)]`` item of a gres or TRES request list."""

    name: str
    gpu_type: str | None
    count: int
    #: ``gres:`` (22.05), ``gres/`` (24.05+) or empty: kept so a rewrite keeps Slurm's form
    prefix: str = ""
    suffix: str = ""
    #: what separates the count: ``:`` (``gpu:v100:2``), or ``=`` in the TRES form Slurm 24.11
    #: prints for ``--gpus-per-task`` (``TresPerTask=gres/gpu:v100=1``); a rewrite keeps it
    count_sep: str = ":"
    #: the flags between type and count (``no_consume``), kept as written for a rewrite
    flags: tuple[str, ...] = ()
    #: the count as Slurm wrote it (``4G``), so a rewrite keeps its unit
    count_text: str = ""


#: the prefix of a gres item in a request (``gres:``, ``gres/``, ``tres:``...)
PREFIX = re.compile(r"^(gres[:/]|tres[:/])", re.IGNORECASE)
#: words Slurm writes between a gres type and its count that are not part of the type
#: (gres.conf ``Flags``/slurm.conf ``Gres=name[:type][:no_consume]:count``)
FLAGS = frozenset({"no_consume"})
#: how Slurm prints "no type" inside a gres item (``gpu:(null):4(IDX:0-3)``: untyped GPUs)
NULL_TYPE = "(null)"


def _split_count(token: str) -> tuple[str, str]:
    """``4(IDX:0-3)`` -> (``4``, ``(IDX:0-3)``): the suffix starts at the first ``(`` of the
    *last* token (a ``(null)`` type is a token of its own, never a suffix)."""
    paren = token.find("(")
    return (token, "") if paren < 0 else (token[:paren], token[paren:])


@lru_cache(maxsize=4096)
def parse_gres(text: str) -> tuple[GresEntry, ...]:
    """Parse a gres/TRES list: every item, GPU or not, typed or not.

    ``gpu`` alone means one GPU; ``gpu:2`` two untyped; ``gpu:v100:2`` two V100;
    ``gpu:v100`` one V100; ``gpu:(null):4(IDX:0-3)`` four untyped (Slurm's ``(null)`` type);
    ``gpu:m60:no_consume:2`` two M60 (``no_consume`` is a flag, not part of the type). A
    ``(S:0-1)``/``(IDX:...)`` suffix is kept, never counted.
    """
    t = text.strip()
    if t.lower() in NONE:
        return ()
    entries = []
    for item in split_top_level(t):
        if item.lower() in NONE:  # ``(null)`` or ``N/A`` as one item of a list
            continue
        m = PREFIX.match(item)
        prefix = m.group(1) if m else ""
        body = item[len(prefix):]
        sep = ":"
        if "=" in body and "(" not in body.partition("=")[0]:  # TRES form: name[:type]=count
            body, _, n = body.partition("=")
            sep, parts = "=", [*split_top_level(body, ":"), n.strip()]
        else:
            parts = split_top_level(body, ":")
        if not parts or not parts[0] or parts[0].startswith("("):
            raise SlurmOutputError(f"empty gres name in {text!r}")
        name, suffix, count_text = parts[0], "", ""
        middle = parts[1:]
        if sep == "=" or (middle and _COUNT.match(_split_count(middle[-1])[0])):
            count_text, suffix = _split_count(middle.pop())
        elif not middle:
            name, suffix = _split_count(name)
        else:  # ``gpu:v100`` (one GPU) or ``gpu:v100(S:0)``
            middle[-1], suffix = _split_count(middle[-1])
        flags = tuple(x for x in middle if x.lower() in FLAGS)
        words = [x for x in middle if x.lower() not in FLAGS and x != NULL_TYPE and x]
        count = _count(count_text) if count_text else 1
        gpu_type = ":".join(words) or None
        entries.append(GresEntry(name, gpu_type, count, prefix, suffix, sep, flags, count_text))
    return tuple(entries)


def gpus_by_type(text: str) -> dict[str, int]:
    """GPUs per type in a node gres string; untyped GPUs count under :data:`UNTYPED`."""
    out: dict[str, int] = {}
    for e in parse_gres(text):
        if e.name == "gpu":
            key = e.gpu_type or UNTYPED
            out[key] = out.get(key, 0) + e.count
    return out


def gpu_request_of(text: str) -> tuple[int, str | None]:
    """(GPU count, type or None) of one TRES request string (``gres:gpu:v100:2``).

    Several typed GPU items (rare) sum their counts; the type is kept only when all agree.
    """
    count, types = 0, set()
    for e in parse_gres(text):
        if e.name == "gpu":
            count += e.count
            types.add(e.gpu_type)
    gpu_type = types.pop() if len(types) == 1 else None
    return count, gpu_type


def retype_request(text: str, gpu_type: str | None) -> str:
    """The same request with every GPU item pinned to ``gpu_type`` (None: untyped).

    Keeps the count, the other gres items and Slurm's own prefix form (``gres:`` or ``gres/``).
    """
    items = []
    for e in parse_gres(text):
        t = gpu_type if e.name == "gpu" else e.gpu_type
        words = [e.name, *([t] if t else []), *e.flags]
        items.append(f"{e.prefix}{':'.join(words)}{e.count_sep}{e.count_text or e.count}")
    return ",".join(items)


def parse_tres_map(text: str) -> dict[str, str]:
    """``cpu=2,mem=4G,gres/gpu:v100=2`` -> ``{"cpu": "2", ..., "gres/gpu:v100": "2"}``."""
    out: dict[str, str] = {}
    t = text.strip()
    if t.lower() in NONE:
        return out
    for item in t.split(","):
        if "=" in item:
            k, v = item.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def gpus_in_tres_map(tres: Mapping[str, str]) -> tuple[int, str | None]:
    """(GPUs, type) from an allocated-TRES map: typed entries win over the untyped total.

    ``gres/gpu=2,gres/gpu:v100=2`` -> (2, "v100"); ``gres/gpu=2`` -> (2, None); two types, or
    fewer typed GPUs than the total (``gres/gpu=4,gres/gpu:a100=2``) -> (total, None).
    """
    typed: dict[str, int] = {}
    total = 0
    for k, v in tres.items():
        key = k.replace("gres:", "gres/", 1)
        if key == "gres/gpu":
            total = parse_int(v)
        elif key.startswith("gres/gpu:"):
            typed[key.split(":", 1)[1]] = typed.get(key.split(":", 1)[1], 0) + parse_int(v)
    typed = {t: n for t, n in typed.items() if n > 0 and t.lower() != NULL_TYPE}
    if len(typed) == 1:
        ((gpu_type, n),) = typed.items()
        if n >= total:
            return n, gpu_type
        # fewer typed than all GPUs: the rest are of a type accounting does not track
        # (AccountingStorageTRES lists only some types): the run's type cannot be told
        return total, None
    return (total or sum(typed.values())), None


def grp_tres_gpus(text: str) -> dict[str, int]:
    """``GrpTRES`` of a QOS -> ``{"gres/gpu:v100": 8, "cpu": 100}`` (ints; others kept too)."""
    out: dict[str, int] = {}
    for k, v in parse_tres_map(text).items():
        try:
            out[k.replace("gres:", "gres/", 1)] = int(v)
        except ValueError:
            continue
    return out


def gpu_request(
    per_job: str, per_node: str, per_task: str, num_nodes: int, num_tasks: int
) -> GpuRequest | None:
    """Normalise the three TRES request columns of a job into one :class:`GpuRequest`.

    ``--gpus`` sets tres-per-job, ``--gres``/``--gpus-per-node`` tres-per-node,
    ``--gpus-per-task`` tres-per-task. ``raw`` is the ``scontrol`` assignment that restores the
    request exactly (``TresPerNode=gres:gpu:2``).
    """
    for field_name, text, per in (
        ("TresPerJob", per_job, "job"),
        ("TresPerNode", per_node, "node"),
        ("TresPerTask", per_task, "task"),
    ):
        count, gpu_type = gpu_request_of(text)
        if count > 0:
            return GpuRequest(
                count=count,
                gpu_type=gpu_type,
                per=per,
                nodes=max(1, num_nodes),
                raw=f"{field_name}={text.strip()}",
                tasks=max(1, num_tasks),
            )
    return None
