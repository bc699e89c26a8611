"""What every fuzz test asserts about a refused input: the README's promise, checked one way.

A user mistake ends with exit code 2 and a message on stderr that names the problem: one line
(``slurm-fair: FILE: invalid input: WHERE: WHAT``, or ``slurm-fair CMD: Invalid value ...`` for
an option), or a head line and one ``  - `` line per problem when a file has several. Never a
traceback, never an exception escaping ``main``, and nothing lost or half-written: the files a
test names are byte-identical afterwards and no temporary file is left beside them.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from slurm_fair.cli import main


def run(argv: list[str]) -> tuple[int, str, str]:
    """``slurm-fair ARGV`` in this process: (exit code, stdout, stderr). An exception other than
    the ones ``main`` maps to exit codes propagates and fails the test (it would be a traceback)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def assert_refused(rc: int, err: str, *needles: str) -> None:
    """Exit code 2, no traceback, one message (one line, or a head and ``  - `` problem lines)
    that contains every needle (case-insensitive)."""
    assert rc == 2, f"exit code {rc}, stderr: {err!r}"
    assert "Traceback" not in err, err
    lines = err.rstrip("\n").split("\n")
    assert lines and lines[0].startswith("slurm-fair"), f"message does not start with the command: {err!r}"
    assert all(line.startswith("  - ") for line in lines[1:]), f"not one message: {err!r}"
    for needle in needles:
        assert needle.lower() in err.lower(), f"{needle!r} not in {err!r}"


def snapshot_dir(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (relative name → bytes), to compare before and after."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def assert_untouched(directory: Path, before: dict[str, bytes]) -> None:
    """``directory`` holds exactly the files it held, byte for byte: nothing clobbered, nothing
    half-written, no temporary file left."""
    after = snapshot_dir(directory)
    assert sorted(after) == sorted(before), f"files changed: {sorted(set(after) ^ set(before))}"
    for name, data in before.items():
        assert after[name] == data, f"{name} was modified"
