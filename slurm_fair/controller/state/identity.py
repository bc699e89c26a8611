"""Whether a file is this controller's state store, decided before anything opens it for writing.

Why: SQLite opens any file. The writer's ``CREATE TABLE IF NOT EXISTS`` would add the
controller's tables to another program's database (``revert --dry-run`` did), and a reader hits
``no such table: meta`` after Slurm has been read. So every opening goes through
:func:`check_store` first: a missing file is "no store yet" (only the writer creates one), and
an existing file must be an SQLite database stamped with :data:`APPLICATION_ID` (the SQLite
``application_id`` header field, set on stores created since this check) or, for older stores,
one holding the ``meta`` table with a ``schema_version``. Anything else (an empty file, a text
file, another program's database) is a :class:`~slurm_fair.errors.UserError` naming the file;
it is never written to.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from contextlib import closing
from pathlib import Path

from ...errors import UserError

#: ``PRAGMA application_id`` of a slurm-fair state store: "SlFa" in ASCII
APPLICATION_ID = 0x536C4661

#: the first 16 bytes of every SQLite 3 database file
_MAGIC = b"SQLite format 3\x00"


def _refuse(path: Path, why: str) -> UserError:
    return UserError(f"{path}: not a slurm-fair state store ([controller].state_dir): {why}; "
                     "move it away or choose another state_dir (it was not written to)")


def check_store(path: str | Path) -> bool:
    """True when ``path`` is a slurm-fair state store, False when there is no file there;
    a UserError naming ``path`` for anything else. Reads only (the header, then ``meta``
    through a ``mode=ro`` connection for stores older than the application id)."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _refuse(p, f"cannot read it: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(p, "not a regular file")
    if st.st_size == 0:
        raise _refuse(p, "an empty file (only a missing store is created)")
    try:
        with open(p, "rb") as fh:
            header = fh.read(100)
    except OSError as exc:
        raise _refuse(p, f"cannot read it: {exc.strerror or exc}") from None
    if not header.startswith(_MAGIC):
        raise _refuse(p, "not an SQLite database")
    app_id = int.from_bytes(header[68:72], "big") if len(header) >= 72 else 0
    if app_id == APPLICATION_ID:
        return True
    if app_id != 0:
        raise _refuse(p, f"another program's SQLite database (application_id 0x{app_id:08x})")
    if not _has_meta(p):
        raise _refuse(p, "another program's SQLite database (no slurm-fair meta table)")
    return True


def _has_meta(path: Path) -> bool:
    """Whether the database at ``path`` holds slurm-fair's ``meta`` table with a schema version
    (a store written before the application id, or one whose stamp is still in the WAL)."""
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)) as db:
            if db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone() is None:
                return False
            return db.execute("SELECT 1 FROM meta WHERE key='schema_version'").fetchone() is not None
    except sqlite3.Error:
        return False
