"""One way to write a file: atomically, and never over something that is not a regular file.

Every file slurm-fair writes is read by something that must never see half of it: node_exporter's
textfile collector (``metrics -o``), ``job_submit.lua`` (the plan file), cron mail and scripts
(reports), Slurm (rendered configuration). So each is written to a temporary file in the same
directory (a rename across filesystems is not atomic), flushed to disk with ``fsync``, given its
mode, then renamed over the target. Several files that belong together (``render-config``'s
directory) are written all or nothing: every temporary file first, the renames only when all of
them are on disk (:func:`write_files`).

A rename replaces whatever has the target's name, so the target is checked first: a new path or a
regular file (a symlink to one is followed, so the link stays a link). ``-o /dev/null`` or
``-o /dev/stdout`` run as root would otherwise *replace the device node* with a regular file.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Mapping

from .errors import UserError, printable


class AtomicWriteError(UserError):
    """The target cannot be written (not a regular file, no such directory, no permission);
    the message names the path and the reason. A user's path or a configured one: exit 2."""


def _shown(path: str | Path) -> str:
    return printable(str(path))


def target_path(path: str | Path) -> Path:
    """The path to rename onto: ``path`` itself, or the file a symlink points to; raises
    :class:`AtomicWriteError` when that exists and is not a regular file."""
    p = Path(path)
    if not str(path):
        raise AtomicWriteError("an empty file name")
    if p.is_symlink():
        p = Path(os.path.realpath(p))
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return p
    except OSError as exc:
        raise AtomicWriteError(f"{_shown(path)}: cannot write: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise AtomicWriteError(f"{_shown(path)}: {kind}; refusing to replace it")
    return p


def check_writable(path: str | Path) -> Path:
    """Raise :class:`AtomicWriteError` now, before any work, when ``path`` could not be written
    later: it exists and is not a regular file, its directory does not exist, or no file can be
    created there (tried: a temporary file is made and removed). Returns the path a write would rename onto. A command calls this when its
    options are parsed, so ``--json nodir/x.json`` fails before an hour of simulation."""
    p = target_path(path)
    directory = p.parent if str(p.parent) else Path(".")
    if not directory.is_dir():
        raise AtomicWriteError(f"{_shown(path)}: directory {_shown(directory)} does not exist")
    try:  # the real test (/proc says it is writable, a read-only mount says so to root)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=str(directory))
    except OSError as exc:
        raise AtomicWriteError(f"{_shown(path)}: cannot write in {_shown(directory)}: {exc.strerror or exc}") from None
    os.close(fd)
    _discard(tmp)
    return p


def _stage(path: str | Path, data: bytes, mode: int, fsync: bool) -> tuple[str, Path]:
    """``data`` in a temporary file beside ``path``'s target, flushed and given ``mode``:
    (temporary name, target). Nothing of it is left behind when this raises."""
    p = target_path(path)
    directory = p.parent if str(p.parent) else Path(".")
    if not directory.is_dir():
        raise AtomicWriteError(f"{_shown(path)}: directory {_shown(directory)} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=str(directory))
    except OSError as exc:
        raise AtomicWriteError(f"{_shown(path)}: cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.chmod(tmp, mode)
    except BaseException as exc:
        _discard(tmp)
        if isinstance(exc, OSError):
            raise AtomicWriteError(f"{_shown(path)}: cannot write: {exc.strerror or exc}") from None
        raise
    return tmp, p


def _discard(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass


def _commit(staged: list[tuple[str, Path]], shown: list[str | Path]) -> None:
    """Rename every staged file onto its target; on a failure the ones not yet renamed are
    removed (a rename needs no space, so this fails only when the directory changed under us)."""
    for i, (tmp, target) in enumerate(staged):
        try:
            os.replace(tmp, target)
        except BaseException as exc:
            for rest, _ in staged[i:]:
                _discard(rest)
            if isinstance(exc, OSError):
                raise AtomicWriteError(f"{_shown(shown[i])}: cannot write: {exc.strerror or exc}") from None
            raise


def write_bytes(path: str | Path, data: bytes, mode: int = 0o644, fsync: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically (temp file in the same directory, fsync, rename);
    returns the path written. On any failure the old file is left as it was and no temp file
    remains. ``fsync=False`` only for files rewritten several times a second whose loss in a
    power cut costs nothing (the testbed emulator's progress)."""
    staged = _stage(path, data, mode, fsync)
    _commit([staged], [path])
    return staged[1]


def write_text(path: str | Path, text: str, mode: int = 0o644, fsync: bool = True) -> Path:
    """:func:`write_bytes` of ``text`` in UTF-8."""
    return write_bytes(path, text.encode("utf-8"), mode, fsync)


def write_files(directory: str | Path, files: Mapping[str, tuple[str | bytes, int]]) -> list[Path]:
    """Write ``files`` (name -> (content, mode)) into ``directory``, all or nothing: every
    target is checked, every file staged in a temporary file and flushed, and only then are
    they renamed into place. A failure (a target that is a directory, a full disk) leaves the
    directory as it was: the old files intact, no new file, no temporary file, and a directory
    this call created removed again. Returns the paths written."""
    out = Path(directory)
    for name in files:
        if not name or "/" in name or name in (".", ".."):
            raise AtomicWriteError(f"{_shown(out / name)}: not a plain file name")
    created = _make_dirs(out)
    staged: list[tuple[str, Path]] = []
    try:
        for name in files:
            target_path(out / name)
        for name, (content, mode) in files.items():
            data = content.encode("utf-8") if isinstance(content, str) else content
            staged.append(_stage(out / name, data, mode, True))
        _commit(staged, [out / name for name in files])
    except BaseException:
        for tmp, _ in staged:
            _discard(tmp)
        for d in reversed(created):
            try:
                d.rmdir()
            except OSError:
                pass
        raise
    return [out / name for name in files]


def _make_dirs(out: Path) -> list[Path]:
    """Create ``out`` and its missing parents; the ones created, outermost first."""
    missing: list[Path] = []
    d = out
    while not d.exists() and not d.is_symlink():
        missing.append(d)
        if d.parent == d:
            break
        d = d.parent
    if d.exists() and not d.is_dir():
        raise AtomicWriteError(f"{_shown(out)}: {_shown(d)} is not a directory")
    created: list[Path] = []
    for d in reversed(missing):
        try:
            d.mkdir()
        except OSError as exc:
            for c in reversed(created):
                c.rmdir()
            raise AtomicWriteError(f"{_shown(out)}: cannot create directory {_shown(d)}: {exc.strerror or exc}") from None
        created.append(d)
    return created
