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

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Mapping

from .errors import UserError, printable


class AtomicWriteError(UserError):
    """The target cannot be written (not a regular file, no such directory, no permission);
    the message names the path and the reason. A user's path or a configured one: exit 2."""


def _stat(path: str | Path, follow: bool = True) -> os.stat_result | None:
    """``os.stat`` (or ``lstat``) of ``path``, None when nothing has that name; any other
    failure (a name longer than the file system allows, no permission on a directory, a loop
    of symlinks) is an :class:`AtomicWriteError` naming the path and the reason, never a
    traceback: every stat of a user's path goes through here."""
    try:
        return os.stat(path) if follow else os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise AtomicWriteError(f"{printable(path)}: cannot write: {_reason(exc)}") from None
    except ValueError:  # an embedded NUL
        raise AtomicWriteError(f"{printable(path)}: not a file name (NUL character)") from None


def _reason(exc: OSError) -> str:
    """The reason of an OSError, with its errno name (``ENAMETOOLONG``) so it can be looked up."""
    name = errno.errorcode.get(exc.errno or 0)
    text = exc.strerror or str(exc)
    return f"{text} ({name})" if name else text


def target_path(path: str | Path) -> Path:
    """The path to rename onto: ``path`` itself, or the file a symlink points to; raises
    :class:`AtomicWriteError` when that exists and is not a regular file (``/dev/stdout`` is
    a symlink to a terminal or a pipe: refused as not a regular file, not followed into /proc)."""
    if not str(path):
        raise AtomicWriteError("an empty file name")
    p = Path(path)
    st = _stat(p)
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise AtomicWriteError(f"{printable(path)}: {kind}; refusing to replace it")
    link = _stat(p, follow=False)
    if link is not None and stat.S_ISLNK(link.st_mode):
        p = Path(os.path.realpath(p))  # the link stays a link; its target is replaced
    return p


def directory_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be a directory to write into, or None: it exists and is not a
    directory, or the file system cannot hold its name (``ENAMETOOLONG``)."""
    try:
        st = _stat(path)
    except AtomicWriteError as exc:
        return str(exc)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        return f"{printable(path)} exists and is not a directory"
    try:
        limit = os.pathconf(_existing_parent(Path(path)), "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    long = [part for part in Path(path).parts if len(os.fsencode(part)) > limit]
    if long:
        return f"{printable(path)}: cannot write: File name too long (ENAMETOOLONG)"
    return None


#: directories of the kernel's own file systems: writable to root, never a place for a file of ours
SYSTEM_DIRS = ("/dev", "/proc", "/sys")


def system_dir_of(path: str | Path) -> str | None:
    """The kernel directory of :data:`SYSTEM_DIRS` that ``path`` is (or is under, as written or
    with symlinks resolved), or None."""
    for p in {os.path.normpath(os.path.abspath(path)), os.path.realpath(path)}:
        for top in SYSTEM_DIRS:
            if p == top or p.startswith(top + "/"):
                return top
    return None


def writable_directory_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be a directory files are kept in (``solve --keep-lp-dir``), or None:
    an existing directory where a file can be created (tried), or a new one whose parent is
    such a directory. Checked when the options are parsed, so a failed solve's model is not
    lost to a path that never worked."""
    if not str(path):
        return "an empty directory name"
    if (msg := directory_problem(path)):
        return msg
    if (top := system_dir_of(path)):
        return f"{printable(path)}: under the system directory {top}; refusing to write there"
    try:
        st = _stat(path)
    except AtomicWriteError as exc:
        return str(exc)
    directory = str(path) if st is not None else (os.path.dirname(os.path.abspath(path)) or ".")
    try:
        parent = _stat(directory)
    except AtomicWriteError as exc:
        return str(exc)
    if parent is None or not stat.S_ISDIR(parent.st_mode):
        return f"{printable(path)}: directory {printable(directory)} does not exist"
    return _creation_problem(path, directory)


def _creation_problem(path: str | Path, directory: str | Path) -> str | None:
    """Why no file can be created in ``directory``, or None. The only sure test, so it is
    tried (a temporary file made and removed): /proc says it is writable, and so does a
    read-only mount to root."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".slurm-fair-probe.", dir=str(directory))
    except OSError as exc:
        return f"{printable(path)}: cannot write in {printable(directory)}: {_reason(exc)}"
    os.close(fd)
    _discard(tmp)
    return None


def _existing_parent(p: Path) -> str:
    """The nearest existing ancestor of ``p`` (for its file system's limits)."""
    p = Path(os.path.abspath(p))
    while not os.path.exists(p) and p.parent != p:
        p = p.parent
    return str(p)


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether writing ``a`` would replace ``b`` (or the reverse): the same existing file (by
    device and inode, through symlinks and hard links), or the same resolved path for a file
    not there yet. An unreadable name is never the same as another."""
    try:
        sa, sb = _stat(a), _stat(b)
    except AtomicWriteError:
        return False
    if sa is not None and sb is not None:
        return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)
    if sa is not None or sb is not None:
        return False
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def check_writable(path: str | Path) -> Path:
    """Raise :class:`AtomicWriteError` now, before any work, when ``path`` could not be written
    later: it exists and is not a regular file, its directory does not exist, or no file can be
    created there (:func:`_creation_problem`). Returns the path a write would rename onto. A
    command calls this when its options are parsed, so ``--json nodir/x.json`` fails before an
    hour of simulation."""
    p = target_path(path)
    if (msg := _creation_problem(path, _directory(path, p))):
        raise AtomicWriteError(msg)
    return p


def _directory(path: str | Path, target: Path) -> Path:
    """The directory ``target`` is renamed into; an :class:`AtomicWriteError` unless it exists."""
    directory = target.parent if str(target.parent) else Path(".")
    st = _stat(directory)
    if st is None or not stat.S_ISDIR(st.st_mode):
        raise AtomicWriteError(f"{printable(path)}: directory {printable(directory)} does not exist")
    return directory


def _stage(path: str | Path, data: bytes, mode: int, fsync: bool) -> tuple[str, Path]:
    """``data`` in a temporary file beside ``path``'s target, flushed and given ``mode``:
    (temporary name, target). Nothing of it is left behind when this raises."""
    p = target_path(path)
    directory = _directory(path, p)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=str(directory))
    except OSError as exc:
        raise AtomicWriteError(f"{printable(path)}: cannot write: {_reason(exc)}") from None
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
            raise AtomicWriteError(f"{printable(path)}: cannot write: {_reason(exc)}") from None
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
                raise AtomicWriteError(f"{printable(shown[i])}: cannot write: {_reason(exc)}") from None
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
            raise AtomicWriteError(f"{printable(out / name)}: not a plain file name")
    created = _make_dirs(out)
    try:
        write_all({out / name: spec for name, spec in files.items()})
    except BaseException:
        for d in reversed(created):
            try:
                d.rmdir()
            except OSError:
                pass
        raise
    return [out / name for name in files]


def write_all(files: Mapping[str | Path, tuple[str | bytes, int]]) -> list[Path]:
    """Write ``files`` (path -> (content, mode)), in any directories, all or nothing: every
    target checked, every file staged and flushed, and only then the renames. A failure (a full
    disk on the third file) leaves every old file intact and no temporary file
    (``simulate --json J --save-workload W --plot P``). Returns the paths written."""
    for path in files:
        target_path(path)
    staged: list[tuple[str, Path]] = []
    try:
        for path, (content, mode) in files.items():
            data = content.encode("utf-8") if isinstance(content, str) else content
            staged.append(_stage(path, data, mode, True))
        _commit(staged, list(files))
    except BaseException:
        for tmp, _ in staged:
            _discard(tmp)
        raise
    return [Path(p) for p in files]


def _make_dirs(out: Path) -> list[Path]:
    """Create ``out`` and its missing parents; the ones created, outermost first."""
    missing: list[Path] = []
    d = out
    while _stat(d, follow=False) is None:
        missing.append(d)
        if d.parent == d:
            break
        d = d.parent
    st = _stat(d)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise AtomicWriteError(f"{printable(out)}: {printable(d)} is not a directory")
    created: list[Path] = []
    for d in reversed(missing):
        try:
            d.mkdir()
        except OSError as exc:
            for c in reversed(created):
                c.rmdir()
            raise AtomicWriteError(f"{printable(out)}: cannot create directory {printable(d)}: {_reason(exc)}") from None
        created.append(d)
    return created
