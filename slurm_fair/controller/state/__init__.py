"""The controller's memory: one SQLite file in ``state_dir``.

Why SQLite: the controller runs from cron as a fresh process each cycle, so everything it must
remember between cycles (what a job looked like before we first touched it, what each tenant
received, the online throughput estimates, the last plan that worked) has to live on disk, be
written atomically and be readable by the reports and ``explain`` while a cycle runs. The
standard library's ``sqlite3`` does all of that without a server.

:class:`StateStore` is the one class callers open; its methods are grouped by topic, one module
each, over the one connection of :class:`.base.Tables`:

* :mod:`.identity`: whether a file is a store (an empty file or another program's database is
  refused before it is opened, never written to);
* :mod:`.schema`: the tables, :data:`.schema.SCHEMA_VERSION` and the migration of older stores;
* :mod:`.fields`: every job field the controller wrote, with its value before and the intent in
  flight (what ``revert`` puts back, and which fields someone else changed since);
* :mod:`.originals`: the QOS versions before 0.2 managed (and their per-job records, migrated
  into :mod:`.fields`);
* :mod:`.service`: GPU-seconds received per tenant and per job, jobs seen;
* :mod:`.observations`: requeues, types Slurm refused, online throughput estimates;
* :mod:`.cycles`: cycles, per-cycle decisions (``explain``, reports), the last good plans.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

from ...errors import UserError
from .cycles import CycleTables
from .fields import FieldTables
from .identity import APPLICATION_ID, check_store
from .observations import ObservationTables
from .originals import OriginalTables
from .schema import SCHEMA, SCHEMA_VERSION, migrate
from .service import ServiceTables

DB_NAME = "state.sqlite"


class StateStore(FieldTables, OriginalTables, ServiceTables, ObservationTables, CycleTables):
    """Thin typed access to the SQLite file; one short transaction per call.

    Every write commits at once: a cycle that dies half-way leaves a consistent store (the
    original requests recorded before a write are never lost).
    """

    def __init__(self, path: str | Path, read_only: bool = False):
        self.path = Path(path)
        self.is_read_only = read_only
        #: a read-only store copied elsewhere to be read (:meth:`_open_read_only`)
        self._copy_dir: Path | None = None
        # another program's database, an empty or a text file: refused before SQLite opens it
        # (the writer's CREATE TABLE IF NOT EXISTS would add our tables to it)
        exists = check_store(self.path)
        if read_only:
            # SQLite's mode=ro: never creates, migrates, or writes the file (the controller may
            # be running a cycle on it)
            self._db = self._open_read_only()
            self._db.row_factory = sqlite3.Row
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), timeout=10.0, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        if not exists or self._db.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
            # stamped before WAL mode, so the id is in the file's header for check_store
            self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)
        migrate(self._db)
        self._db.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
            (str(SCHEMA_VERSION),),
        )

    def _open_read_only(self) -> sqlite3.Connection:
        """SQLite's ``mode=ro``; where that cannot read (a WAL store on a read-only or full file
        system: SQLite must map or create its ``-shm`` file beside it), a copy of the store and
        its WAL in a temporary directory elsewhere (the WAL holds the last cycles' records, which
        a writer killed -9 did not fold back into the file), or, when even that fails, the file
        as ``immutable`` (all there is when no WAL was left). The failsafe and revert read the
        store on every path."""
        uri = f"{self.path.resolve().as_uri()}?mode=ro"
        db = sqlite3.connect(uri, uri=True, timeout=5.0, isolation_level=None)
        try:
            db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            return db
        except sqlite3.OperationalError:
            db.close()
        wal = self.path.with_name(self.path.name + "-wal")
        try:
            copy = Path(tempfile.mkdtemp(prefix="slurm-fair-state-"))
            self._copy_dir = copy
            shutil.copyfile(self.path, copy / self.path.name)
            if wal.exists():
                shutil.copyfile(wal, copy / wal.name)
            db = sqlite3.connect(str(copy / self.path.name), timeout=5.0, isolation_level=None)
            db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            return db
        except (OSError, sqlite3.Error):
            self._drop_copy()
        return sqlite3.connect(uri + "&immutable=1", uri=True, timeout=5.0, isolation_level=None)

    def _drop_copy(self) -> None:
        copy, self._copy_dir = self._copy_dir, None
        if copy is not None:
            shutil.rmtree(copy, ignore_errors=True)

    @classmethod
    def read_only(cls, path: str | Path) -> "StateStore":
        """Open an existing store for reading only (reports, ``snapshot --json``); raises
        sqlite3.Error when it cannot be read, a UserError when the file is not a store."""
        return cls(path, read_only=True)

    @classmethod
    def in_dir(cls, state_dir: str | Path) -> "StateStore":
        """Open (create when new) the store of ``state_dir`` for a cycle or ``revert``; a state
        directory that cannot hold it (a file, no permission, a full disk, a file that is not a
        database) is a UserError naming it, not a traceback."""
        path = Path(state_dir) / DB_NAME
        try:
            return cls(path)
        except (OSError, sqlite3.Error) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise UserError(f"cannot open the controller state store {path} ([controller].state_dir): "
                            f"{reason}") from None

    @staticmethod
    def existing(state_dir: str | Path, command: str) -> Path:
        """The store of ``state_dir`` for a command that only reads what a controller recorded
        (``explain``, ``revert``); a UserError naming the path when there is none, so a misspelt
        state_dir is said, never answered from (or by creating) an empty store."""
        path = Path(state_dir) / DB_NAME
        if not check_store(path):
            raise UserError(f"no controller state at {path}: the controller has not run with this "
                            f"[controller].state_dir (misspelt? or pass the --config it runs with); "
                            f"nothing for {command}")
        return path

    def close(self) -> None:
        self._db.close()
        self._drop_copy()

    def __enter__(self) -> "StateStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- meta ---------------------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self._exec("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row["value"] if row else default

    def set_meta(self, key: str, value: str) -> None:
        self._exec("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def table(self, name: str) -> list[dict[str, Any]]:
        """All rows of one table (reports, tests); ``name`` must be a known table."""
        known = {r["name"] for r in self._exec("SELECT name FROM sqlite_master WHERE type='table'")}
        if name not in known:
            raise KeyError(name)
        with closing(self._db.execute(f"SELECT * FROM {name}")) as cur:  # noqa: S608 (checked)
            return [dict(r) for r in cur]
