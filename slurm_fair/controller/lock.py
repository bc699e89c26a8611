"""One controller per cluster: a lock file in ``state_dir`` naming its holder.

Two controllers acting on one cluster would fight (each undoing the other's rewrites), and cron
happily starts a second ``run --once`` while a slow first one still runs. The lock file holds the
holder's pid and process start time; the start time tells a live holder from a recycled pid.

* Creation is atomic: the content is written to a private temporary file which is then
  hard-linked to the lock name (``link`` fails when the name exists), so nobody ever reads a
  half-written lock.
* A lock whose holder is gone (no such pid, or a pid now used by a process that started at
  another time, checked with psutil) is *stale* and taken over. Take-over is serialised by an
  ``flock`` on a guard file so two newcomers cannot both take over the same stale lock.
* A live holder means :class:`~slurm_fair.errors.LockHeld`: the caller does nothing at all.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from pathlib import Path
from types import TracebackType

import psutil

from ..errors import LockHeld

LOCK_NAME = "controller.lock"


def _me() -> dict[str, object]:
    proc = psutil.Process()
    return {"pid": proc.pid, "start": proc.create_time(), "host": socket.gethostname()}


def holder_alive(info: dict[str, object]) -> bool:
    """True when the process described by a lock file still runs (same pid *and* start time)."""
    try:
        pid = int(info.get("pid", -1))  # type: ignore[arg-type]
        start = float(info.get("start", -1.0))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    if pid <= 0 or info.get("host", socket.gethostname()) != socket.gethostname():
        # a lock from another host cannot be checked here: treat it as live (safe side)
        return pid > 0
    try:
        return abs(psutil.Process(pid).create_time() - start) < 1.0
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def read_lock(path: Path) -> dict[str, object] | None:
    """The content of a lock file, ``{}`` when unreadable/garbage, None when there is none."""
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


class ControllerLock:
    """Context manager holding the cluster lock for one cycle (or one loop)."""

    def __init__(self, state_dir: str | Path):
        self.dir = Path(state_dir)
        self.path = self.dir / LOCK_NAME
        self.info = _me()
        self.held = False

    def acquire(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self._create():
            return
        guard = os.open(self.dir / (LOCK_NAME + ".guard"), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(guard, fcntl.LOCK_EX)
            current = read_lock(self.path)
            if current is None:
                if self._create():
                    return
                current = read_lock(self.path) or {}
            if holder_alive(current):
                raise LockHeld(
                    f"another slurm-fair controller holds {self.path} "
                    f"(pid {current.get('pid')}); nothing was done"
                )
            # stale: replace it atomically while holding the guard
            tmp = self._write_tmp()
            os.replace(tmp, self.path)
            self.held = True
        finally:
            os.close(guard)

    def _write_tmp(self) -> Path:
        tmp = self.dir / f".{LOCK_NAME}.{os.getpid()}"
        tmp.write_text(json.dumps(self.info))
        return tmp

    def _create(self) -> bool:
        tmp = self._write_tmp()
        try:
            os.link(tmp, self.path)
        except FileExistsError:
            return False
        finally:
            tmp.unlink(missing_ok=True)
        self.held = True
        return True

    def release(self) -> None:
        """Remove the lock if it is still ours (never someone else's)."""
        if not self.held:
            return
        current = read_lock(self.path)
        if current and current.get("pid") == self.info["pid"] and current.get("start") == self.info["start"]:
            self.path.unlink(missing_ok=True)
        self.held = False

    def __enter__(self) -> "ControllerLock":
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
