"""Hadar's makespan claim ("1.20x total duration vs Gavel") and HadarE's utilisation claim
(x1.45), on Philly-derived traces.

    PYTHONPATH=. python benchmarks/reproduce_hadar.py
    PYTHONPATH=. python benchmarks/reproduce_hadar.py --quick        # 10 jobs per tenant, seconds

The paper's "total time duration" is the time to finish every job of the trace: our
``makespan_s`` (last end - first arrival). Gavel stands for its heterogeneity-aware max-min
policy, ``gavel-mmf``; ``max-throughput`` is shown as the bound a makespan-minded policy is
measured against. Three workloads, so no one trace decides:

* ``philly_6vc_240`` as in docs/results.md (240 jobs, 6 tenants, arrivals over 48 h) on
  ``v100=8,p100=8,k80=8``, 4 GPUs per node;
* the same jobs all at time 0 (``--static``: the batch makespan experiment);
* two raw Gavel/Philly virtual clusters (``b436b2``, ``e13805``; jobs arriving in their first
  week, at most 60 each) on ``v100=4x8,p100=4x8,k80=4x8``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).parent))

from reproduce_common import available, command_line, engine, fmt, machine, ratio, run, scenario  # noqa: E402
from slurm_fair.sim.scenario import ClusterSource, WorkloadSource  # noqa: E402

ROOT = Path(__file__).resolve().parent
#: two of Gavel's Philly-derived msr traces (seed=0), copied with Gavel's MIT licence (traces/LICENSE.gavel)
MSR = Path(__file__).resolve().parent / "traces" / "msr"
POLICIES = ("hadar", "hadare", "gavel-mmf", "max-throughput")
PAPER = {"makespan gavel-mmf / hadar": 1.20, "utilisation hadare / hadar": 1.45}


@dataclass(frozen=True)
class Case:
    """One workload and its cluster, and the ``simulate`` options that give them."""

    label: str
    workload: WorkloadSource
    cluster: ClusterSource
    options: str


def cases(quick: bool) -> list[Case]:
    """The three workloads (the raw-VC one only where Gavel's traces are present)."""
    trace = os.path.relpath(ROOT / "traces" / "philly_6vc_240.csv")
    cap = 10 if quick else None
    small = ClusterSource(spec="v100=8,p100=8,k80=8", gpus_per_node=4)
    out = [
        Case("philly_6vc_240", WorkloadSource(traces=(trace,), max_jobs=cap), small,
             f"--trace {trace} --cluster v100=8,p100=8,k80=8 --gpus-per-node 4"),
        Case("philly_6vc_240 --static", WorkloadSource(traces=(trace,), max_jobs=cap, static=True), small,
             f"--trace {trace} --static --cluster v100=8,p100=8,k80=8 --gpus-per-node 4"),
    ]
    vcs = tuple(str(MSR / f"{vc}.trace") for vc in ("b436b2", "e13805"))
    if all(Path(v).exists() for v in vcs):
        src = WorkloadSource(traces=vcs, window="0:604800", max_jobs=10 if quick else 60)
        out.append(Case("msr b436b2+e13805, week 1", src, ClusterSource(spec="v100=4x8,p100=4x8,k80=4x8"),
                        f"--trace {vcs[0]} --trace {vcs[1]} --window 0:604800 --max-jobs {src.max_jobs} "
                        "--cluster v100=4x8,p100=4x8,k80=4x8"))
    return out


def compare(selected: Sequence[Case], names: Sequence[str], log: Any = None) -> tuple[str, dict]:
    """Makespan and utilisation per policy and workload, the claim's ratios beside the paper's."""
    data = {}
    for case in selected:
        if log:
            log(f"{case.label}:")
        data[case.label] = run(scenario(case.workload, case.cluster), names, engine(), log)
    cols = [f"{n} makespan h" for n in names] + [f"{n} util" for n in names]
    lines = ["| workload | " + " | ".join(cols) + " | gavel-mmf / hadar | gavel-mmf / hadare | hadare / hadar util |",
             "|" + "---|" * (len(cols) + 4)]
    for label, res in data.items():
        cells = [fmt(res[n].get("makespan_s"), "h") for n in names] + [fmt(res[n].get("utilization"), ".2f") for n in names]

        def get(n, k, res=res):
            return res.get(n, {}).get(k)

        lines.append(f"| {label} | " + " | ".join(cells)
                     + f" | {ratio(get('gavel-mmf', 'makespan_s'), get('hadar', 'makespan_s'))}"
                     + f" | {ratio(get('gavel-mmf', 'makespan_s'), get('hadare', 'makespan_s'))}"
                     + f" | {ratio(get('hadare', 'utilization'), get('hadar', 'utilization'))} |")
    lines.append("| paper | " + " | ".join("" for _ in cols)
                 + f" | {PAPER['makespan gavel-mmf / hadar']:.2f}x | - | {PAPER['utilisation hadare / hadar']:.2f}x |")
    return "\n".join(lines), data


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10 jobs per tenant")
    parser.add_argument("--policy", action="append", default=None, help="policies (default hadar, hadare, "
                        "gavel-mmf, max-throughput)")
    parser.add_argument("--json", default=None, help="write every metric to this file")
    args = parser.parse_args(argv)
    names = available(args.policy or POLICIES)
    if not names:
        parser.error("none of the --policy names is a registered policy")
    started = time.perf_counter()
    print(f"command: {command_line()}")
    print(f"machine: {machine()}")
    selected = cases(args.quick)
    pols = " ".join(f"--policy {n}" for n in names)
    for case in selected:
        print(f"{case.label} as simulate: slurm-fair simulate {case.options}"
              f"{f' --max-jobs {case.workload.max_jobs}' if case.workload.max_jobs and '--max-jobs' not in case.options else ''}"
              f" --no-fairness-checks {pols} --json")
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    text, data = compare(selected, names, log)
    print()
    print(text)
    print(f"\ntotal wall time: {time.perf_counter() - started:.0f} s")
    if args.json:
        slim = {w: {n: {k: v for k, v in m.items() if k != "tenants"} for n, m in r.items()} for w, r in data.items()}
        Path(args.json).write_text(json.dumps(slim, indent=1))
    return {"text": text, "data": data}


if __name__ == "__main__":
    main()
