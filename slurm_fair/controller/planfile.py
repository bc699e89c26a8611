"""The plan file: what a ``job_submit.lua`` plugin needs to type an untyped GPU request.

Typed ``GrpTRES`` limits do not bind untyped requests (``--gres=gpu:2``), so a job submitted
between two cycles would escape its tenant's limits until the controller types it. The plugin
closes that gap by reading this file at submission. It must be trivial to parse from Lua without
a JSON library, so the file is one flat JSON object, one ``"key": value`` pair per line, keys and
values free of quotes and backslashes::

    {
    "format": 1,
    "generated_at": 1732190000,
    "expires_at": 1732190180,
    "cycle": "20261121T133200Z-1a2b",
    "gpu_type/physics/resnet-50-bs32": "v100",
    "gpu_type/physics/*": "p100",
    "gpu_type/*/resnet-50-bs32": "v100",
    "gpu_type/*/*": "k80"
    }

Lookup for a job of account ``A`` with class ``C`` (from ``fair:class=C`` in its comment, or
``*``): ``gpu_type/A/C``, then ``gpu_type/A/*``, then ``gpu_type/*/C``, then ``gpu_type/*/*``.
``generated_at``/``expires_at`` are integer Unix seconds; a plugin must leave the job untouched
when ``now > expires_at`` (the controller stopped: a stale plan is worse than none) or when the
file is missing. A Lua line pattern that reads it: ``'^"([^"]+)": "?([^",]*)"?,?$'``.

How the types are chosen (per tenant ``A``): for class ``C``, the type with the most room under
``A``'s limits (limit minus GPUs its running and typed pending jobs already ask for), preferring
the class's fastest type among those with room; ``A/*`` is the type of ``A``'s largest bundle
share; ``*/C`` and ``*/*`` (tenants without jobs yet) the type with the most free GPUs, the
class's fastest among them for ``*/C``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Mapping

from ..model import Snapshot
from .estimates import ClassTable
from .plan import Plan, gres_key
from .steer import current_type, partition_types

PLAN_FILE = "plan.json"
FORMAT = 1
_SAFE = re.compile(r"^[A-Za-z0-9._+*/-]+$")


def _best(options: list[str], score: Mapping[str, float], tie: Mapping[str, float]) -> str | None:
    opts = [k for k in options if score.get(k, 0) > 0]
    if not opts:
        return None
    return max(sorted(opts), key=lambda k: (score[k], tie.get(k, 0.0)))


def plan_entries(plan: Plan, snapshot: Snapshot, table: ClassTable) -> dict[str, str]:
    """``{"gpu_type/<tenant>/<class>": type}`` (pure)."""
    types = list(plan.gpu_types)
    capacity = snapshot.capacity()
    used: dict[str, dict[str, int]] = {}
    free = dict(capacity)
    for node in snapshot.nodes:
        if node.schedulable:
            for k, n in node.gpus_used.items():
                free[k] = free.get(k, 0) - int(n)
    ptypes = partition_types(snapshot.nodes)
    for j in snapshot.gpu_jobs():
        # a pending job counts on the type it will get: its typed request or its partition's
        k = j.gpu_type_running if j.running else current_type(j, ptypes)
        if k:
            used.setdefault(j.account, {})
            used[j.account][k] = used[j.account].get(k, 0) + j.gpu_request.total  # type: ignore[union-attr]
    out: dict[str, str] = {}
    free_score = {k: float(max(free.get(k, 0), 0)) for k in types}
    any_type = _best(types, free_score, capacity) or (max(types, key=lambda k: capacity.get(k, 0)) if types else None)
    if any_type:
        out["gpu_type/*/*"] = any_type
    for c, row in table.rows.items():
        if not _SAFE.match(c):
            continue
        with_room = [k for k in types if free_score.get(k, 0) > 0]
        pick = _best(with_room, {k: row.get(k, 0.0) for k in with_room}, free_score)
        if pick:
            out[f"gpu_type/*/{c}"] = pick
    for t, tp in plan.tenants.items():
        if not _SAFE.match(t):
            continue
        room = {k: tp.limits.get(gres_key(k), 0) - used.get(t, {}).get(k, 0) for k in types}
        own = _best(types, dict(tp.bundle), room) or _best(types, {k: float(v) for k, v in room.items()}, capacity)
        if own:
            out[f"gpu_type/{t}/*"] = own
        with_room = [k for k in types if room[k] > 0]
        for c, row in table.rows.items():
            if not _SAFE.match(c):
                continue
            pick = _best(with_room, {k: row.get(k, 0.0) for k in with_room}, room)
            if pick:
                out[f"gpu_type/{t}/{c}"] = pick
    return out


def render(entries: Mapping[str, str], generated_at: float, valid_s: float, cycle_id: str) -> str:
    """The file text: one pair per line (see the module docstring)."""
    head = {"format": FORMAT, "generated_at": int(generated_at),
            "expires_at": int(generated_at + valid_s), "cycle": cycle_id}
    pairs = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in head.items()]
    pairs += [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(entries.items())]
    return "{\n" + ",\n".join(pairs) + "\n}\n"


def write(path: str | Path, text: str) -> None:
    """Atomic replace: the plugin never reads a half-written file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}")
    tmp.write_text(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, p)


def read(path: str | Path) -> dict[str, object]:
    """Parse a plan file (the controller's own reader, for explain and the tests)."""
    return json.loads(Path(path).read_text())
