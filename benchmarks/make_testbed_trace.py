"""Derive the Philly workloads of the real-testbed benchmark from Gavel's msr traces (MIT).

Same recipe as ``make_philly_trace.py`` (the simulator's trace), cut to what a 24-GPU testbed
runs in a few minutes of real time:

* three virtual clusters (tenants) of ``traces/msr/seed=0``, each its first ``PER_TENANT`` jobs
  that fit on one testbed node (at most 4 GPUs: the v100/p100 nodes have 4);
* arrivals linearly compressed so every tenant's arrivals span ``SPAN_S`` (the raw VCs start
  weeks apart and would barely compete);
* ``total_steps`` times ``STEP_SCALE``, and capped so that no job runs longer than ``CAP_S``
  alone on a V100 (Philly's tail reaches weeks; one such job would be the whole makespan).

Job types, GPU counts, the order of arrivals and the relative sizes of the jobs below the cap
are Philly's. All three changes are ours. Usage::

    python benchmarks/make_testbed_trace.py DIR > benchmarks/traces/philly_testbed_45.csv
    python benchmarks/make_testbed_trace.py DIR --per-tenant 3 --span-h 0.3 --cap-h 0.4 \
        > benchmarks/traces/demo_testbed_9.csv

where ``DIR`` is Gavel's ``traces/msr/seed=0``.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slurm_fair import throughput_table as tt  # noqa: E402

VCS = ("0e4a51", "103959", "e13805")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("directory")
    p.add_argument("--per-tenant", type=int, default=15)
    p.add_argument("--span-h", type=float, default=1.5)
    p.add_argument("--step-scale", type=float, default=0.1)
    p.add_argument("--cap-h", type=float, default=2.5)
    p.add_argument("--max-gpus", type=int, default=4)
    a = p.parse_args(argv)
    table = tt.load(None)
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(["tenant", "job_id", "job_type", "gpus", "total_steps", "arrival_s"])
    for vc in VCS:
        rows = []
        for lineno, line in enumerate(Path(a.directory, f"{vc}.trace").read_text().splitlines(), start=1):
            f = line.split("\t")
            if int(f[6]) <= a.max_gpus:
                rows.append((lineno, f[0], int(f[6]), float(f[4]), float(f[5])))
            if len(rows) == a.per_tenant:
                break
        first, last = rows[0][4], rows[-1][4]
        span = (last - first) or 1.0
        for lineno, job_type, gpus, steps, arrival in rows:
            cap = a.cap_h * 3600.0 * table.lookup(job_type, gpus, "v100")
            writer.writerow([vc, lineno, job_type, gpus, max(1, round(min(steps * a.step_scale, cap))),
                             round((arrival - first) / span * a.span_h * 3600.0, 1)])


if __name__ == "__main__":
    main()
