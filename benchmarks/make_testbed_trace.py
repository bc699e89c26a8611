"""Derive the Philly workloads of the real-testbed benchmark from Gavel's msr traces (MIT).

Same recipe as ``make_philly_trace.py`` (the simulator's trace), cut to what a 24-GPU testbed
runs in minutes of real time:

* ``--vcs`` virtual clusters (tenants) of ``traces/msr/seed=0``; of each, after skipping its first
  ``--skip`` eligible jobs, the next ``--per-tenant`` jobs of 1 to ``--max-gpus`` GPUs (at most
  ``--max-big`` of them larger than a 4-GPU node: those fit on the 8-GPU node only);
* every job a single-node gang (``nodes`` column = 1, as Philly's jobs of up to 8 GPUs are);
* arrivals linearly compressed so every tenant's arrivals span ``--span-h`` (the raw VCs start
  weeks apart and would barely compete);
* ``total_steps`` times ``--step-scale``, and capped so that no job runs longer than
  ``--cap-h`` alone on the fastest testbed type whose nodes can hold it (Philly's tail reaches
  weeks; one such job would be the whole makespan).

Job types, GPU counts, the order of arrivals and the relative sizes of the jobs below the cap
are Philly's; the cut, the compression and the cap are ours. Usage::

    python benchmarks/make_testbed_trace.py DIR > benchmarks/traces/philly_testbed_42.csv
    python benchmarks/make_testbed_trace.py DIR --vcs 0e4a51,103959,e13805 --per-tenant 15 \\
        --max-gpus 4 --span-h 1.5 --cap-h 2.5 > benchmarks/traces/philly_testbed_45.csv

where ``DIR`` is Gavel's ``traces/msr/seed=0``.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slurm_fair.estimates import gavel as tt  # noqa: E402

#: the testbed's nodes: GPUs per node of each type (conf/testbed.toml)
NODE_GPUS = {"v100": 4, "p100": 4, "k80": 8}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("directory")
    p.add_argument("--vcs", default="0e4a51,b436b2,e13805")
    p.add_argument("--per-tenant", type=int, default=14)
    p.add_argument("--skip", type=int, default=0, help="eligible jobs of each VC to skip first")
    p.add_argument("--span-h", type=float, default=1.5)
    p.add_argument("--step-scale", type=float, default=0.1)
    p.add_argument("--cap-h", type=float, default=2.5)
    p.add_argument("--max-gpus", type=int, default=8)
    p.add_argument("--max-big", type=int, default=2, help="jobs per tenant larger than 4 GPUs")
    p.add_argument("--nodes-column", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--one-at-a-time", type=float, default=None, metavar="GAP_H",
                   help="a sparse workload: jobs (all tenants, in arrival order) arrive one after the "
                        "other, each GAP_H after the previous one would end on its fastest type")
    a = p.parse_args(argv)
    table = tt.load(None)
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(["tenant", "job_id", "job_type", "gpus", "total_steps", "arrival_s"]
                    + (["nodes"] if a.nodes_column else []))
    out = []
    for vc in a.vcs.split(","):
        rows, skipped, big = [], 0, 0
        for lineno, line in enumerate(Path(a.directory, f"{vc}.trace").read_text().splitlines(), start=1):
            f = line.split("\t")
            gpus = int(f[6])
            if gpus > a.max_gpus or gpus not in (1, 2, 4, 8):
                continue
            if skipped < a.skip:
                skipped += 1
                continue
            if gpus > 4:
                if big >= a.max_big:
                    continue
                big += 1
            rows.append((lineno, f[0], gpus, float(f[4]), float(f[5])))
            if len(rows) == a.per_tenant:
                break
        first, last = rows[0][4], rows[-1][4]
        span = (last - first) or 1.0
        for lineno, job_type, gpus, steps, arrival in rows:
            fastest = max(table.lookup(job_type, gpus, k) for k, per in NODE_GPUS.items() if per >= gpus)
            total = max(1, round(min(steps * a.step_scale, a.cap_h * 3600.0 * fastest)))
            out.append([vc, lineno, job_type, gpus, total, round((arrival - first) / span * a.span_h * 3600.0, 1),
                        total / fastest])
    if a.one_at_a_time is not None:
        t = 0.0
        for row in sorted(out, key=lambda r: (r[5], r[0], r[1])):
            row[5] = round(t, 1)
            t += row[6] + a.one_at_a_time * 3600.0
    for row in out:
        writer.writerow(row[:6] + ([1] if a.nodes_column else []))


if __name__ == "__main__":
    main()
