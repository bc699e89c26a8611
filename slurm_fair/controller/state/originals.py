"""The QOS versions of slurm-fair before 0.2 created or changed, with the account state before
they did: what a cycle and ``revert`` give back (:mod:`..legacy`). (Those versions' per-job
records are migrated into :mod:`.fields` by :mod:`.schema`.)"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

from .base import Tables


@dataclass(frozen=True)
class ManagedQos:
    """A QOS slurm-fair created or changed, and the account state before it did."""

    name: str
    account: str
    existed_before: bool
    account_had_qos: bool
    prev_default_qos: str
    prev_grp_tres: Mapping[str, int]


class OriginalTables(Tables):
    """The ``managed_qos`` table."""

    # --- QOS slurm-fair manages ---------------------------------------------------------------
    def record_qos(self, q: ManagedQos, at: float) -> None:
        """Remember a QOS before its first change (later calls keep the first record)."""
        self._exec(
            "INSERT OR IGNORE INTO managed_qos VALUES (?, ?, ?, ?, ?, ?, ?)",
            (q.name, q.account, at, int(q.existed_before), int(q.account_had_qos),
             q.prev_default_qos, json.dumps(dict(q.prev_grp_tres))),
        )

    def managed_qos(self) -> dict[str, ManagedQos]:
        return {
            r["name"]: ManagedQos(
                r["name"], r["account"], bool(r["existed_before"]), bool(r["account_had_qos"]),
                r["prev_default_qos"], json.loads(r["prev_grp_tres_json"]),
            )
            for r in self._exec("SELECT * FROM managed_qos")
        }

    def forget_qos(self, name: str) -> None:
        self._exec("DELETE FROM managed_qos WHERE name = ?", (name,))
