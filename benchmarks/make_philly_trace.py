"""Derive the small Philly trace used by docs/results.md from Gavel's msr traces (MIT).

For each of six virtual clusters (tenants) of ``traces/msr/seed=0``: its first 40 jobs that
fit on 8 GPUs; arrival times linearly compressed so that every tenant's 40 arrivals span the
same 48 hours (the raw VCs start weeks apart, so they would barely compete); ``total_steps``
divided by 10 so that 240 jobs on 24 GPUs finish in days, not months. Both changes are ours.

    python benchmarks/make_philly_trace.py GAVEL/scheduler/traces/msr/seed=0 \
        > benchmarks/traces/philly_6vc_240.csv

Other seeds and virtual clusters make held-out workloads (docs/speeds.md):
``make_philly_trace.py GAVEL/scheduler/traces/msr/seed=1 --vcs 2869ce,6214e9,6c71a0,7f04ca,ed69ec,ee9e8c``.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

VCS = ("0e4a51", "103959", "11cb48", "b436b2", "e13805", "ee9e8c")
PER_TENANT = 40
SPAN_S = 48 * 3600.0
STEP_SCALE = 0.1


def main(directory: str, vcs: tuple[str, ...] = VCS) -> None:
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(["tenant", "job_id", "job_type", "gpus", "total_steps", "arrival_s"])
    for vc in vcs:
        rows = []
        for lineno, line in enumerate(Path(directory, f"{vc}.trace").read_text().splitlines(), start=1):
            f = line.split("\t")
            if int(f[6]) <= 8:
                rows.append((lineno, f[0], int(f[6]), float(f[4]), float(f[5])))
            if len(rows) == PER_TENANT:
                break
        last = rows[-1][4] or 1.0
        for lineno, job_type, gpus, steps, arrival in rows:
            writer.writerow([vc, lineno, job_type, gpus, max(1, round(steps * STEP_SCALE)),
                             round(arrival / last * SPAN_S, 1)])


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) == 3 and args[1] == "--vcs":
        main(args[0], tuple(args[2].split(",")))
    elif len(args) == 1:
        main(args[0])
    else:
        sys.exit("usage: make_philly_trace.py MSR_SEED_DIR [--vcs VC,VC,...]")
