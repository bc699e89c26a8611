"""One way to write a file: atomically, and never over something that is not a regular file.

Every file slurm-fair writes is read by something that must never see half of it: node_exporter's
textfile collector (``metrics -o``), ``job_submit.lua`` (the plan file), cron mail and scripts
(reports), Slurm (rendered configuration). So each is written to a temporary file in the same
directory (a rename across filesystems is not atomic), flushed to disk with ``fsync``, given its
mode, then renamed over the target.

A rename replaces whatever has the target's name, so the target is checked first: a new path or a
regular file (a symlink to one is followed, so the link stays a link). ``-o /dev/null`` or
``-o /dev/stdout`` run as root would otherwise *replace the device node* with a regular file.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from .errors import UserError


class AtomicWriteError(UserError):
    """The target cannot be written (not a regular file, no such directory, no permission);
    the message names the path and the reason. A user's path or a configured one: exit 2."""


def target_path(path: str | Path) -> Path:
    """The path to rename onto: ``path`` itself, or the file a symlink points to; raises
    :class:`AtomicWriteError` when that exists and is not a regular file."""
    p = Path(path)
    if p.is_symlink():
        p = Path(os.path.realpath(p))
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return p
    except OSError as exc:
        raise AtomicWriteError(f"{path}: cannot write: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise AtomicWriteError(f"{path}: {kind}; refusing to replace it")
    return p


def write_bytes(path: str | Path, data: bytes, mode: int = 0o644, fsync: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically (temp file in the same directory, fsync, rename);
    returns the path written. On any failure the old file is left as it was and no temp file
    remains. ``fsync=False`` only for files rewritten several times a second whose loss in a
    power cut costs nothing (the testbed emulator's progress)."""
    p = target_path(path)
    directory = p.parent if str(p.parent) else Path(".")
    if not directory.is_dir():
        raise AtomicWriteError(f"{path}: directory {directory} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=str(directory))
    except OSError as exc:
        raise AtomicWriteError(f"{path}: cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, p)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise AtomicWriteError(f"{path}: cannot write: {exc.strerror or exc}") from None
        raise
    return p


def write_text(path: str | Path, text: str, mode: int = 0o644, fsync: bool = True) -> Path:
    """:func:`write_bytes` of ``text`` in UTF-8."""
    return write_bytes(path, text.encode("utf-8"), mode, fsync)
