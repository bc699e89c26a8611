"""What the controller owns in Slurm: one row per (job, field) it has written.

A job field (its partition, its GPU request, its site factor, its node list) belongs to the
site until the controller first writes it. From then on the row says what the field held
before (``original``), what the controller last wrote and saw there (``written``), and what it
is writing right now (``intent``, set *before* the write and cleared once it is confirmed), so
a cycle killed between the write and its record leaves a row the next cycle can settle: Slurm
shows the intent (the write happened), the old value (it did not), or something else (someone
changed it). When anyone else changes a field after the controller (a user's or an admin's
``scontrol update``) the field is ``released``: the controller never writes it again and
``revert`` leaves it as they set it. A row goes once the job has ended or the field is given
back.

Rows copied from an older store's ``original_requests`` are ``legacy``: what that version wrote
was not recorded, so such a field counts as ours while it differs from its original, as that
version's revert assumed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from .base import Tables

#: the fields a cycle writes; ``qos``, ``nice`` and ``priority`` only appear in rows of older
#: versions (which set them), given back by revert and by a cycle's clean-up
FIELDS = ("partition", "gres", "site_factor", "nodes")
LEGACY_FIELDS = ("qos", "nice", "priority")


@dataclass(frozen=True)
class Owned:
    """One field of one job the controller wrote (module docstring)."""

    job_id: str
    field: str
    account: str
    original: str
    written: str | None = None
    intent: str | None = None
    released: bool = False
    legacy: bool = False


class FieldTables(Tables):
    """The ``job_fields`` table."""

    def owned(self) -> dict[tuple[str, str], Owned]:
        return {(r["job_id"], r["field"]): Owned(r["job_id"], r["field"], r["account"], r["original"],
                                                 r["written"], r["intent"], bool(r["released"]),
                                                 bool(r["legacy"]))
                for r in self._exec("SELECT * FROM job_fields")}

    def record_intents(self, rows: Iterable[tuple[str, str, str, str, str]], cycle_id: str, at: float) -> None:
        """Before writes: ``(job, field, account, value now, value to write)`` per field, in one
        transaction. A new row takes the value now as its original; an existing one keeps its
        original and gets the new intent."""
        self._many(
            "INSERT INTO job_fields (job_id, field, account, original, written, intent, released, cycle_id,"
            " updated_at) VALUES (?, ?, ?, ?, NULL, ?, 0, ?, ?)"
            " ON CONFLICT (job_id, field) DO UPDATE SET intent = excluded.intent,"
            " cycle_id = excluded.cycle_id, updated_at = excluded.updated_at",
            ((j, f, a, now, want, cycle_id, at) for j, f, a, now, want in rows),
        )

    def confirm(self, keys: Iterable[tuple[str, str]], at: float) -> None:
        """The intents of ``keys`` were written: they are what the controller wrote."""
        self._many("UPDATE job_fields SET written = intent, intent = NULL, updated_at = ?"
                   " WHERE job_id = ? AND field = ? AND intent IS NOT NULL",
                   ((at, j, f) for j, f in keys))

    def settle(self, updates: Mapping[tuple[str, str], tuple[str | None, str | None, bool]], at: float) -> None:
        """A cycle's reading of its rows: ``(written, intent, released)`` per key."""
        self._many("UPDATE job_fields SET written = ?, intent = ?, released = ?, updated_at = ?"
                   " WHERE job_id = ? AND field = ?",
                   ((w, i, int(r), at, j, f) for (j, f), (w, i, r) in updates.items()))

    def drop_intents(self, keys: Iterable[tuple[str, str]]) -> None:
        """The writes of ``keys`` failed: no intent stays (a row never written goes)."""
        keys = list(keys)
        self._many("UPDATE job_fields SET intent = NULL WHERE job_id = ? AND field = ?", keys)
        self._many("DELETE FROM job_fields WHERE job_id = ? AND field = ? AND written IS NULL"
                   " AND intent IS NULL AND released = 0 AND legacy = 0", keys)

    def forget_fields(self, keys: Iterable[tuple[str, str]]) -> None:
        """Given back (reverted, or the job ended): the rows go."""
        self._many("DELETE FROM job_fields WHERE job_id = ? AND field = ?", keys)

    def forget_jobs(self, job_ids: Iterable[str]) -> None:
        self._many("DELETE FROM job_fields WHERE job_id = ?", ((j,) for j in job_ids))
