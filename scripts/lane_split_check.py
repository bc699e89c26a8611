"""Check that the two lanes of one Slurm version's split real tests ran each test exactly once.

    python scripts/lane_split_check.py --name slurm-22.05 COLLECTED.txt A.xml B.xml

COLLECTED is ``pytest --collect-only -q`` of the whole selection (both halves' tests); A and B
are the JUnit reports of ``--slurm-lane a`` and ``--slurm-lane b`` (``scripts/ci-lanes.sh``).
Prints one line with each half's counts and exits 1 when a collected test ran in neither half
(dropped) or in both (doubled), or a half ran a test the collection does not have.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET

from junit_counts import counts


def junit_id(nodeid: str) -> tuple[str, str]:
    """A pytest node id as JUnit names it: ``tests/a/test_b.py::C::test_d[x]`` ->
    (``tests.a.test_b.C``, ``test_d[x]``)."""
    path, *parts = nodeid.split("::")
    module = path.removesuffix(".py").replace("/", ".")
    return ".".join([module, *parts[:-1]]), parts[-1]


def ran(report: str) -> set[tuple[str, str]]:
    """The tests a JUnit report has (a test reported twice, as a failure and a teardown error, once)."""
    return {(c.get("classname") or "", c.get("name") or "") for c in ET.parse(report).getroot().iter("testcase")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", required=True, help="the lanes' common name, for the message")
    ap.add_argument("collected", help="pytest --collect-only -q of the whole selection")
    ap.add_argument("a", help="JUnit report of --slurm-lane a")
    ap.add_argument("b", help="JUnit report of --slurm-lane b")
    args = ap.parse_args()
    with open(args.collected) as fh:
        wanted = {junit_id(line.strip()) for line in fh if "::" in line and not line.startswith(" ")}
    a, b = ran(args.a), ran(args.b)
    dropped, doubled, extra = wanted - a - b, a & b, (a | b) - wanted
    ca, cb = counts(args.a, None), counts(args.b, None)
    print(f"ci-lanes: {args.name} split: {len(wanted)} collected = {len(a)} in a "
          f"({ca['passed']} passed, {ca['failed']} failed, {ca['skipped']} skipped) + {len(b)} in b "
          f"({cb['passed']} passed, {cb['failed']} failed, {cb['skipped']} skipped)")
    for what, found in (("ran in neither half", dropped), ("ran in both halves", doubled),
                        ("ran but were not collected", extra)):
        if found:
            print(f"ci-lanes: {args.name} split: {len(found)} {what}: "
                  + ", ".join(f"{c}::{n}" for c, n in sorted(found)[:10]))
    return 1 if dropped or doubled or extra else 0


if __name__ == "__main__":
    sys.exit(main())
