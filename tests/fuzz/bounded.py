"""Two guards of area (c)'s fuzz tests: a run that does not end, and a temporary file left.

``bounded(seconds)`` fails the example instead of hanging the suite (``--round-s 1e-9`` once ran
forever); ``scratch()`` points :mod:`tempfile` at an empty directory of its own for one example
and asserts it is empty afterwards (a solve once left ``slurm-fair-lp-*`` folders in /tmp).
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from pathlib import Path
from typing import Iterator


class TookTooLong(AssertionError):
    """The command under test ran past its bound: a hang in the making."""


@contextlib.contextmanager
def bounded(seconds: int) -> Iterator[None]:
    """Fail with :class:`TookTooLong` when the body runs longer than ``seconds``."""

    def expire(signum: int, frame: object) -> None:
        raise TookTooLong(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    """A fresh working directory; TMPDIR (``tempfile.tempdir``) is its ``tmp/``, which must be
    empty again at the end."""
    with tempfile.TemporaryDirectory() as root:
        work, tmp = Path(root) / "work", Path(root) / "tmp"
        work.mkdir()
        tmp.mkdir()
        saved, saved_env = tempfile.tempdir, os.environ.get("TMPDIR")
        tempfile.tempdir, os.environ["TMPDIR"] = str(tmp), str(tmp)
        try:
            yield work
        finally:
            tempfile.tempdir = saved
            if saved_env is None:
                os.environ.pop("TMPDIR", None)
            else:
                os.environ["TMPDIR"] = saved_env
        left = sorted(p.name for p in tmp.iterdir())
        assert not left, f"temporary files left behind: {left}"
