"""What the controller owns in Slurm: one row per (job, field) it has written.

A job field (its partition, its GPU request, its site factor, its node list) belongs to the
site until the controller first writes it. From then on the row says what the field held
before (``original``), what the controller last wrote and saw there (``written``), and what it
is writing right now (``intent``, set *before* the write and cleared once it is confirmed), so
a cycle killed between the write and its record leaves a row the next cycle can settle: Slurm
shows the intent (the write happened), the old value (it did not), or something else (someone
changed it). A write Slurm did not answer in time is *in doubt*: slurmctld may still carry it
out once it resumes, and not in order (on the 22.05 testbed a request sent before a pause landed
a second after writes sent later), so its value is kept in ``doubt`` until ``doubt_until``
(:data:`IN_DOUBT_S` after the timeout): seeing it in Slurm then means the controller's own late
write, and the row is kept (not forgotten, even once given back) until then, so a late landing
is still the controller's to give back. Past that window the value stays recorded as a *late*
write (the row is kept, nothing written, until the job ends): a write that lands later still, and
shows exactly that value, is recognised as the controller's and given back, never taken for
someone else's change. When anyone else changes a field after the controller (a user's or an admin's
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

#: how long a write Slurm did not answer in time is expected to land (module docstring):
#: slurmctld carries out a request it received before it stalled once it gets its locks back,
#: which took about a second on the testbeds; a minute covers a loaded slurmctld's backlog.
#: ``revert`` waits this long for such writes; one landing even later is still matched by its
#: value (a *late* write) and given back.
IN_DOUBT_S = 60.0

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
    #: the value of a write that timed out, which may still land until ``doubt_until``
    doubt: str | None = None
    doubt_until: float = 0.0

    def doubt_open(self, at: float) -> str | None:
        """The value of a write that timed out and may still land at time ``at`` (else None)."""
        return self.doubt if self.doubt is not None and at < self.doubt_until else None


class FieldTables(Tables):
    """The ``job_fields`` table."""

    def owned(self) -> dict[tuple[str, str], Owned]:
        rows = self._exec("SELECT * FROM job_fields").fetchall()
        # a store of 0.2.0 read read-only (a dry-run revert) has no doubt columns
        doubts = bool(rows) and "doubt" in rows[0].keys()
        return {(r["job_id"], r["field"]): Owned(r["job_id"], r["field"], r["account"], r["original"],
                                                 r["written"], r["intent"], bool(r["released"]),
                                                 bool(r["legacy"]), r["doubt"] if doubts else None,
                                                 float(r["doubt_until"] or 0.0) if doubts else 0.0)
                for r in rows}

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

    def settle(self, updates: Mapping[tuple[str, str], Owned], at: float) -> None:
        """A cycle's reading of its rows: each key's row as it stands now."""
        self._many("UPDATE job_fields SET written = ?, intent = ?, released = ?, doubt = ?, doubt_until = ?,"
                   " updated_at = ? WHERE job_id = ? AND field = ?",
                   ((r.written, r.intent, int(r.released), r.doubt, r.doubt_until, at, j, f)
                    for (j, f), r in updates.items()))

    def in_doubt(self, keys: Iterable[tuple[str, str]], until: float) -> None:
        """The writes of ``keys`` timed out: each intent becomes a doubt until ``until``."""
        self._many("UPDATE job_fields SET doubt = intent, doubt_until = ?, intent = NULL"
                   " WHERE job_id = ? AND field = ? AND intent IS NOT NULL", ((until, j, f) for j, f in keys))

    def drop_intents(self, keys: Iterable[tuple[str, str]]) -> None:
        """The writes of ``keys`` failed: no intent stays (a row never written, with nothing in
        doubt, goes)."""
        keys = list(keys)
        self._many("UPDATE job_fields SET intent = NULL WHERE job_id = ? AND field = ?", keys)
        self._many("DELETE FROM job_fields WHERE job_id = ? AND field = ? AND written IS NULL"
                   " AND intent IS NULL AND doubt IS NULL AND released = 0 AND legacy = 0", keys)

    def given_back(self, keys: Iterable[tuple[str, str]], at: float) -> None:
        """The fields of ``keys`` hold their original again (a give-back that worked): the rows
        go, except those with a write still in doubt at ``at``, kept (nothing written, nothing
        intended) so a late landing is recognised as the controller's."""
        keys = list(keys)
        self._many("DELETE FROM job_fields WHERE job_id = ? AND field = ? AND doubt IS NULL", keys)
        self._many("UPDATE job_fields SET written = NULL, intent = NULL WHERE job_id = ? AND field = ?", keys)

    def forget_fields(self, keys: Iterable[tuple[str, str]]) -> None:
        """Given back (reverted, or the job ended): the rows go."""
        self._many("DELETE FROM job_fields WHERE job_id = ? AND field = ?", keys)

    def forget_jobs(self, job_ids: Iterable[str]) -> None:
        self._many("DELETE FROM job_fields WHERE job_id = ?", ((j,) for j in job_ids))
