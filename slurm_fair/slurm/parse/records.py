"""Records of command output: ``n`` fields split on a random per-call separator.

Free text (job names and comments) is user-controlled and may hold newlines: the separator is a
token the user cannot know, so no byte a user can type breaks a record.
"""

from __future__ import annotations

from typing import Iterator

from ...errors import SlurmOutputError


def split_records(text: str, fs: str, nfields: int) -> list[list[str]]:
    """Split command output into records of exactly ``nfields`` fields separated by ``fs``.

    Fields may contain newlines (job names and comments are user text). ``fs`` is a random
    token the user cannot know, so it never occurs inside a field. A record is complete once it
    holds ``nfields - 1`` separators; after that, a line *without* ``fs`` continues its last
    field, a line with ``fs`` starts the next record. A trailing newline is Slurm's, not data.
    """
    if nfields < 1:
        raise ValueError("nfields must be >= 1")
    records: list[list[str]] = []
    current: str | None = None
    count = 0
    if text.endswith("\n"):
        text = text[:-1]  # the newline Slurm ends its output with
    for line in text.split("\n"):
        if current is None:
            if line == "":
                continue
            current, count = line, line.count(fs)
        elif count < nfields - 1 or fs not in line:
            current += "\n" + line
            count += line.count(fs)
        else:
            records.append(_finish(current, fs, nfields))
            current, count = line, line.count(fs)
    if current is not None:
        records.append(_finish(current, fs, nfields))
    return records


def _finish(record: str, fs: str, nfields: int) -> list[str]:
    fields = record.split(fs)
    if len(fields) != nfields:
        raise SlurmOutputError(
            f"expected {nfields} fields, got {len(fields)} in {record[:120]!r}"
        )
    return fields


def iter_lines(text: str) -> Iterator[str]:
    """Non-empty lines (for the simple commands that print one value per line)."""
    return (line for line in text.splitlines() if line.strip())
