"""What ``revert`` puts back: each job's request before our first change, and each QOS
slurm-fair created or changed with the account state before it did."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .base import Tables


@dataclass(frozen=True)
class OriginalRequest:
    """A job as it was before slurm-fair first rewrote it: what ``revert`` puts back."""

    job_id: str
    account: str
    gres_raw: str
    gpu_type: str | None
    gpu_count: int
    gpu_per: str
    priority: int
    nice: int
    partition: str
    qos: str
    #: the nodes it had to run on (a folded hostlist, "" for any)
    req_nodes: str = ""


@dataclass(frozen=True)
class ManagedQos:
    """A QOS slurm-fair created or changed, and the account state before it did."""

    name: str
    account: str
    existed_before: bool
    account_had_qos: bool
    prev_default_qos: str
    prev_grp_tres: Mapping[str, int]


_INSERT_ORIGINAL = (
    "INSERT OR IGNORE INTO original_requests (job_id, account, gres_raw, gpu_type,"
    " gpu_count, gpu_per, priority, nice, partition, qos, recorded_at, cycle_id, req_nodes)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _original_row(o: OriginalRequest, cycle_id: str, at: float) -> tuple[Any, ...]:
    return (o.job_id, o.account, o.gres_raw, o.gpu_type, o.gpu_count, o.gpu_per, o.priority,
            o.nice, o.partition, o.qos, at, cycle_id, o.req_nodes)


class OriginalTables(Tables):
    """The ``original_requests`` and ``managed_qos`` tables."""

    # --- original requests --------------------------------------------------------------------
    def record_original(self, orig: OriginalRequest, cycle_id: str, at: float) -> bool:
        """Remember ``orig`` unless this job already has a record; True when newly recorded.

        Only the first record counts: it is the job as the user submitted it.
        """
        cur = self._exec(_INSERT_ORIGINAL, _original_row(orig, cycle_id, at))
        return cur.rowcount == 1

    def record_originals(self, origs: Iterable[OriginalRequest], cycle_id: str, at: float) -> None:
        """:meth:`record_original` for many jobs in one transaction (before a batched write)."""
        self._many(_INSERT_ORIGINAL, (_original_row(o, cycle_id, at) for o in origs))

    def originals(self, include_reverted: bool = False) -> dict[str, OriginalRequest]:
        sql = "SELECT * FROM original_requests"
        if not include_reverted:
            sql += " WHERE reverted = 0"
        return {r["job_id"]: _orig(r) for r in self._exec(sql)}

    def original(self, job_id: str) -> OriginalRequest | None:
        row = self._exec("SELECT * FROM original_requests WHERE job_id = ?", (job_id,)).fetchone()
        return _orig(row) if row else None

    def forget_originals(self, job_ids: Iterable[str]) -> None:
        """After a revert (or when the jobs ended) their records are no longer needed: one
        transaction for all of them."""
        self._many("DELETE FROM original_requests WHERE job_id = ?", ((j,) for j in job_ids))

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


def _orig(r: sqlite3.Row) -> OriginalRequest:
    return OriginalRequest(
        r["job_id"], r["account"], r["gres_raw"], r["gpu_type"], r["gpu_count"], r["gpu_per"],
        r["priority"], r["nice"], r["partition"], r["qos"], r["req_nodes"],
    )
