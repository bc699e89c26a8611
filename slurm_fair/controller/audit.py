"""The audit log: one JSON object per line for every action the controller decided.

Why JSONL: administrators grep it, ``jq`` reads it, log shippers tail it, and an append of one
line is as close to atomic as a plain file gets, so a crash never corrupts earlier entries.

Each line::

    {"ts": 1732190000.1, "cycle": "20261121T133200Z-1a2b", "kind": "set_gpu_type",
     "job": "42", "tenant": "physics", "target": "42", "before": "gres:gpu:2",
     "after": "v100", "applied": true, "skipped": false, "dry_run": false, "error": ""}

``job`` is empty for tenant-level actions (QOS), ``tenant`` is always set.
"""

from __future__ import annotations

import json
import os
import secrets
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping


def new_cycle_id(now: float) -> str:
    """The id of a cycle (or a revert, a failsafe run): its UTC start and a random tail. Here,
    beside the log it keys, so revert and the failsafe need nothing of the cycle's modules."""
    stamp = datetime.fromtimestamp(now, tz=timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


class AuditLog:
    """Append-only JSONL file; created with its directory on first write."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def write(self, entries: list[Mapping[str, Any]]) -> None:
        if not entries:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(dict(e), sort_keys=True, default=str) + "\n" for e in entries)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    def entries(self) -> Iterator[dict[str, Any]]:
        """Every entry in order; lines that do not parse (a torn last line) are skipped."""
        try:
            fh = open(self.path, encoding="utf-8")
        except FileNotFoundError:
            return
        with fh:
            for line in fh:
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(entry, dict):
                    yield entry

    def for_job(self, job_id: str) -> list[dict[str, Any]]:
        return [e for e in self.entries() if str(e.get("job", "")) == str(job_id)]
