"""Count what a pytest run really ran, from its JUnit reports (``scripts/pyslurm-rootfs.sh``).

    python scripts/junit_counts.py --version 24.11 NAME=REPORT.xml[:MODULE] ...

For each NAME: the test cases of REPORT (only those of MODULE, a test module's name, when given)
that passed, failed, errored and were skipped. Prints one line each and exits 1 unless every
NAME ran at least one test and none failed or was skipped: the pyslurm arm exists to run, and a
skip there (pyslurm missing, a version mismatch) would pass unseen in pytest's exit status.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET


def counts(report: str, module: str | None) -> dict[str, int]:
    """passed/failed/skipped of the test cases of ``report`` (of ``module`` only, when given)."""
    out = {"passed": 0, "failed": 0, "skipped": 0}
    for case in ET.parse(report).getroot().iter("testcase"):
        if module and module not in (case.get("classname") or ""):
            continue
        if case.find("skipped") is not None:
            out["skipped"] += 1
        elif case.find("failure") is not None or case.find("error") is not None:
            out["failed"] += 1
        else:
            out["passed"] += 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", required=True, help="the Slurm version the tests ran against")
    ap.add_argument("--took", type=int, default=None, help="seconds the whole arm took")
    ap.add_argument("reports", nargs="+", help="NAME=REPORT.xml[:MODULE]")
    args = ap.parse_args()
    ok = True
    for item in args.reports:
        name, _, spec = item.partition("=")
        report, _, module = spec.partition(":")
        c = counts(report, module or None)
        good = c["passed"] > 0 and c["failed"] == 0 and c["skipped"] == 0
        ok &= good
        print(f"pyslurm-rootfs: {name}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped "
              f"with backend=pyslurm on Slurm {args.version}{'' if good else '  <- expected all to run and pass'}")
    if args.took is not None:
        print(f"pyslurm-rootfs: the pyslurm arm on Slurm {args.version} took {args.took} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
