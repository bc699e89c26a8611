"""How a replay ends when a signal comes: :class:`SignalGuard` turns SIGINT/SIGTERM/SIGHUP into
:class:`Interrupted`, and :class:`Cleanup` records what the run undid on its way out.

The run loop (:mod:`.run`) holds the guard; its cleanup is the one way out of every run.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from types import FrameType
from typing import Any, Iterator, Sequence

#: the signals that end a run through its cleanup (Ctrl-C, ``kill``, a closed terminal)
INTERRUPT_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A run was stopped by a signal (raised by the handlers :meth:`.run.Replay.run` installs).

    A KeyboardInterrupt, so whatever lets Ctrl-C through (``except Exception`` does not catch it,
    pytest stops) treats SIGTERM and SIGHUP the same way. ``cleanup`` is what the run undid before
    the exception left :meth:`.run.Replay.run`.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = int(signum)
        self.cleanup: Cleanup | None = None

    @property
    def signame(self) -> str:
        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"

    @property
    def exit_code(self) -> int:
        """The shell's convention: 128 + signal number (130 for Ctrl-C, 143 for SIGTERM)."""
        return 128 + self.signum

    def summary(self) -> str:
        done = self.cleanup.summary() if self.cleanup else "nothing cleaned up"
        return f"interrupted by {self.signame}; {done}"


@dataclass
class Cleanup:
    """What the end of a run undid; recorded in the result JSON as ``replay.cleanup``."""

    reason: str  # finished, timeout, SIGINT/SIGTERM/SIGHUP, or error: <exception type>
    jobs_cancelled: list[str] = field(default_factory=list)
    controller_started: bool = False
    controller_exit_code: int | None = None
    controller_killed: bool = False  # did not stop on SIGTERM in time: SIGKILL to its process group
    revert: str | None = None  # ok, exit N, timed out, failed: ...; None without a controller
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line for people: jobs cancelled, controller stopped, revert result."""
        n = len(self.jobs_cancelled)
        parts = [f"cancelled {n} job(s)" + (f" ({', '.join(self.jobs_cancelled)})" if n else "")]
        if self.controller_started:
            how = "killed" if self.controller_killed else "stopped"
            parts.append(f"controller {how} (exit {self.controller_exit_code})")
            parts.append(f"revert {self.revert}")
        else:
            parts.append("no controller")
        parts += [f"error: {e}" for e in self.errors]
        return ", ".join(parts)


class SignalGuard:
    """Turns SIGINT/SIGTERM/SIGHUP into :class:`Interrupted` while a run is in progress.

    Without it SIGTERM kills the replay and leaves its controller (own session) looping with its
    steering in place and the jobs running. Handlers are installed only in the main thread
    (Python refuses them elsewhere and delivers signals there only; the replay is also a library)
    and the previous ones come back on exit. Inside :meth:`deferred` a signal is only recorded
    and raised when the block ends, so an ``sbatch`` whose job id we would never learn, or a
    controller whose process we would never hold, cannot slip through the cleanup. Only the first
    signal raises: later ones (a second Ctrl-C during the cleanup) are recorded, never raised.
    """

    def __init__(self, signals: Sequence[int] = INTERRUPT_SIGNALS) -> None:
        self.signals = tuple(signals)
        self.received: list[int] = []
        self._saved: dict[int, Any] = {}
        self._depth = 0
        self._raised = False

    @property
    def installed(self) -> bool:
        return bool(self._saved)

    def __enter__(self) -> "SignalGuard":
        if threading.current_thread() is threading.main_thread():
            for s in self.signals:
                prev = signal.signal(s, self._handle)
                self._saved[s] = signal.SIG_DFL if prev is None else prev  # None: not set from Python
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth += 1  # from here on a signal is only recorded...
        while self._saved:
            s, prev = self._saved.popitem()
            signal.signal(s, prev)
        if self.received and not self._raised:  # ...and handed to the previous handler, never lost
            self._raised = True
            signal.raise_signal(self.received[0])

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        if self._depth == 0:
            self._raise_pending()

    def _raise_pending(self) -> None:
        if self.received and not self._raised:
            self._raised = True
            raise Interrupted(self.received[0])

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Signals in this block wait for its end (its own exception, if any, becomes the cause)."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._raise_pending()


def end_reason(exc: BaseException) -> str:
    """Why a run ended early, for :attr:`Cleanup.reason`."""
    if isinstance(exc, Interrupted):
        return exc.signame
    if isinstance(exc, KeyboardInterrupt):
        return "SIGINT"
    return f"error: {type(exc).__name__}"
