"""Which half of one Slurm version's real tests a test runs in (``pytest --slurm-lane a|b``).

CI runs the real tests of its longest Slurm version as two lanes side by side, each on a testbed
of its own (``scripts/ci-lanes.sh``). ``tests/slurm-lane-b.txt`` names the tests of half b, test
files or single tests by node id, chosen by measured durations (docs/performance.md, "CI time");
half a is every other test. The halves are complements, so each test is in exactly one, and a
new test file is in a until the list names it; ``scripts/lane_split_check.py`` checks what the two
lanes really ran against the whole collection.
"""

from __future__ import annotations

from pathlib import Path

#: the tests of half b
LANE_B_LIST = Path(__file__).with_name("slurm-lane-b.txt")


class ListError(Exception):
    """The list names a file that does not exist, or an entry twice."""


def lane_b_entries(path: Path = LANE_B_LIST) -> list[str]:
    """The node ids (``tests/x/test_y.py`` or ``tests/x/test_y.py::test_z``) the list names; ``#``
    starts a comment. An entry whose file does not exist, or one named twice, is a ListError: a
    typo would otherwise move its tests to half a unseen."""
    root = path.parent.parent
    entries: list[str] = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        file = entry.split("::", 1)[0]
        if not (root / file).is_file():
            raise ListError(f"{path.name} line {n}: no test file {file}")
        if entry in entries:
            raise ListError(f"{path.name} line {n}: {entry} named twice")
        entries.append(entry)
    return entries


def in_lane_b(nodeid: str, entries: list[str]) -> bool:
    """True when an entry names the test ``nodeid``: its file, or the test (all its parameters)."""
    return any(nodeid == e or nodeid.startswith((e + "::", e + "[")) for e in entries)
