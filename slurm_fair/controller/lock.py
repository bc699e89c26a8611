"""One controller per cluster: an ``flock`` on ``state_dir/controller.lock``.

Two controllers acting on one cluster would fight (each undoing the other's rewrites), and cron
happily starts a second ``run --once`` while a slow first one still runs. The kernel's ``flock``
does the hard part: the lock belongs to the open file, so it is released when the holder exits
however it exits (a crash, ``kill -9``), and a dead holder's lock is free with no stale-lock
detection, no pid recycling question. The file itself is never removed (removing it would let a
newcomer lock a fresh file while an old holder still holds the unlinked one); it only carries the
holder's pid and host, written after the lock is taken, so the refusal can name who holds it.

A held lock means :class:`~slurm_fair.errors.LockHeld`: the caller does nothing at all.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from types import TracebackType

from ..errors import LockHeld, UserError

LOCK_NAME = "controller.lock"


def read_lock(path: Path) -> dict[str, object] | None:
    """The holder the lock file names, ``{}`` when empty/unreadable/garbage, None when there is
    no file. (Informative only: whether the lock is held is the kernel's answer, not this.)"""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return {}
    try:
        info = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return info if isinstance(info, dict) else {}


def held_elsewhere(state_dir: str | Path) -> bool:
    """Whether another process holds the lock of ``state_dir`` now (creates nothing: a missing
    lock file is a lock nobody holds)."""
    path = Path(state_dir) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops a lock we may just have taken
    return False


class ControllerLock:
    """Context manager holding the cluster lock for one cycle (or one ``revert``)."""

    def __init__(self, state_dir: str | Path):
        self.dir = Path(state_dir)
        self.path = self.dir / LOCK_NAME
        self.info: dict[str, object] = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock without waiting; raises LockHeld (naming the holder's pid) when taken."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:  # a state_dir that is a file, no permission, a read-only disk
            try:  # an existing lock file locks read-only too (flock needs no write access)
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                raise UserError(f"cannot take the controller lock {self.path} ([controller].state_dir): "
                                f"{exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = read_lock(self.path) or {}
            who = f"pid {holder['pid']}" if holder.get("pid") else "its pid not yet written"
            if holder.get("host") and holder.get("host") != socket.gethostname():
                who += f" on {holder['host']}"
            raise LockHeld(f"another slurm-fair controller holds {self.path} ({who}); nothing was done") from None
        except BaseException:
            os.close(fd)
            raise
        try:  # who holds it: informative only, so a full disk or a read-only file does not matter
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps(self.info).encode())
        except OSError:
            pass
        self._fd = fd

    def release(self) -> None:
        """Unlock (closing the file releases the flock). The file stays, naming its last holder."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        os.close(fd)

    def __enter__(self) -> "ControllerLock":
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


class FailsafeLock:
    """One failsafe run at a time: an ``flock`` on the state directory itself.

    The failsafe goes on without the controller lock when a stuck loop holds it
    (:mod:`.failsafe`), so that lock cannot keep two failsafe runs (a slow one and the next
    minute's) from giving back side by side. A lock on the directory needs no file, so it works
    on a full disk or a read-only state directory too. Where the file system offers no flock on
    a directory, :meth:`acquire` says so (``None``) and the run goes on alone."""

    def __init__(self, state_dir: str | Path):
        self.dir = Path(state_dir)
        self._fd: int | None = None

    def acquire(self) -> bool | None:
        """True: taken; False: another failsafe run holds it; None: cannot lock here."""
        try:
            fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except OSError:
            os.close(fd)
            return None
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

