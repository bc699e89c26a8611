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


def junit_id(nodeid: str) -> tuple[str, str]:
    """A pytest node id as JUnit names it: ``tests/a/test_b.py::C::test_d[x]`` ->
    (``tests.a.test_b.C``, ``test_d[x]``)."""
    path, *parts = nodeid.split("::")
    module = path.removesuffix(".py").replace("/", ".")
    return ".".join([module, *parts[:-1]]), parts[-1]


def outcomes(report: str) -> tuple[dict[tuple[str, str], str], int]:
    """Each test of a JUnit report with the outcome of its last record, and how many records
    more there were than tests: a test run again (pytest-rerunfailures) has a record per run,
    the first one looking passed, and a failure with a teardown error may have two."""
    last: dict[tuple[str, str], str] = {}
    records = 0
    for case in ET.parse(report).getroot().iter("testcase"):
        records += 1
        last[(case.get("classname") or "", case.get("name") or "")] = (
            "skipped" if case.find("skipped") is not None
            else "failed" if case.find("failure") is not None or case.find("error") is not None else "passed")
    return last, records - len(last)


def summary(found: dict[tuple[str, str], str], again: int) -> str:
    n = {k: sum(1 for v in found.values() if v == k) for k in ("passed", "failed", "skipped")}
    return (f"{len(found)} ({n['passed']} passed, {n['failed']} failed, {n['skipped']} skipped"
            + (f"; {again} more record{'s' if again != 1 else ''}: a test run again" if again else "") + ")")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", required=True, help="the lanes' common name, for the message")
    ap.add_argument("collected", help="pytest --collect-only -q of the whole selection")
    ap.add_argument("a", help="JUnit report of --slurm-lane a")
    ap.add_argument("b", help="JUnit report of --slurm-lane b")
    args = ap.parse_args()
    with open(args.collected) as fh:
        wanted = {junit_id(line.strip()) for line in fh if "::" in line and not line.startswith(" ")}
    (in_a, again_a), (in_b, again_b) = outcomes(args.a), outcomes(args.b)
    a, b = set(in_a), set(in_b)
    dropped, doubled, extra = wanted - a - b, a & b, (a | b) - wanted
    print(f"ci-lanes: {args.name} split: {len(wanted)} collected = a {summary(in_a, again_a)} "
          f"+ b {summary(in_b, again_b)}")
    for what, found in (("ran in neither half", dropped), ("ran in both halves", doubled),
                        ("ran but were not collected", extra)):
        if found:
            print(f"ci-lanes: {args.name} split: {len(found)} {what}: "
                  + ", ".join(f"{c}::{n}" for c, n in sorted(found)[:10]))
    return 1 if dropped or doubled or extra else 0


if __name__ == "__main__":
    sys.exit(main())
