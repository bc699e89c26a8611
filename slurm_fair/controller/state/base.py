"""The connection every table group of the state store shares, and its two ways to write."""

from __future__ import annotations

import sqlite3
from typing import Any, Iterable


class Tables:
    """What the per-topic table groups of :class:`~slurm_fair.controller.state.StateStore` share:
    the connection the store opens, in autocommit mode (``isolation_level=None``).
    """

    _db: sqlite3.Connection

    def _exec(self, sql: str, args: Iterable[Any] = ()) -> sqlite3.Cursor:
        return self._db.execute(sql, tuple(args))

    def _many(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        """``sql`` for every row, in one transaction: one commit, and all rows or none. (The
        connection is in autocommit mode, where ``with connection`` opens no transaction and
        each row would be committed, and synced, alone.)"""
        batch: list[tuple[Any, ...]] = [tuple(r) for r in rows]
        if not batch:
            return
        self._db.execute("BEGIN")
        try:
            self._db.executemany(sql, batch)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
