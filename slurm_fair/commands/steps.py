"""What the commands that give back share (``revert``, ``failsafe``, ``run``): a stop asked
by SIGTERM/SIGINT and how an action's values read.

Kept apart from ``run.py`` so ``revert`` and ``failsafe`` load nothing of the cycle (the
policies, the solver): the failsafe must work when they do not.
"""

from __future__ import annotations

import contextlib
import signal
from types import FrameType
from typing import Callable, Iterator


def fmt(v: object) -> str:
    """An action's before/after for people: ``v100=4, k80=1, total=5``; ``-`` for nothing."""
    if v is None or v == "":
        return "-"
    if isinstance(v, dict):
        def key(k: str) -> str:
            return "total" if k == "gres/gpu" else k.removeprefix("gres/gpu:")
        return ", ".join(f"{key(str(k))}={fmt(x) if x is not None else 'unlimited'}" for k, x in v.items()) or "-"
    if isinstance(v, (list, tuple)):
        return ",".join(map(str, v)) or "-"
    return str(v)


class Stop:
    """SIGTERM/SIGINT set a flag: the loop stops between cycles, and a cycle (or a revert)
    stops between two writes, its intents recorded (the next cycle or revert completes it)."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def asked(self) -> bool:
        return self.requested


@contextlib.contextmanager
def stop_on_signals() -> Iterator[Callable[[], bool]]:
    """SIGTERM and SIGINT ask the work inside to stop between two writes (:class:`Stop`);
    the previous handlers come back afterwards."""
    stop = Stop()
    old = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop.asked
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
