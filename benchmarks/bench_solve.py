"""Scaling benchmark of ``slurm-fair solve --policy oef`` against Gavel's plain per-job LP.

Gavel's scaling-study shape: N jobs on N/4 GPUs of each of v100, p100, k80; job types (model,
batch size, GPU count) drawn with a fixed seed from Gavel's measured throughput table; 8 tenants
of weight 1. For each N both programs run as separate processes on the same PROBLEM.json, and the
wall time of each whole process is measured. Prints a table (and ``--json`` rows).

    .venv/bin/python benchmarks/bench_solve.py --sizes 256 1024 4096 8192
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "slurm_fair" / "data" / "gavel_throughputs.json"
TYPES = ("v100", "p100", "k80")


def job_types() -> list[tuple[str, int, dict[str, float]]]:
    """(name, GPUs, throughput per type) for every table entry that runs somewhere."""
    table = json.loads(TABLE.read_text())
    out = []
    for key in sorted(table["v100"]):
        name, gpus = key.strip("()").rsplit(",", 1)
        thr = {k: float(table[k].get(key, {}).get("null", 0.0)) for k in TYPES}
        thr = {k: v for k, v in thr.items() if v > 0}
        if thr:
            out.append((name.strip().strip("'"), int(gpus), thr))
    return out


def instance(n: int, tenants: int = 8, seed: int = 0) -> dict:
    rng = random.Random(seed)
    kinds = job_types()
    jobs = []
    for i in range(n):
        name, gpus, thr = rng.choice(kinds)
        jobs.append({"id": f"j{i}", "tenant": f"t{i % tenants}", "gpus": gpus, "throughput": thr})
    return {
        "gpu_types": {k: n // 4 for k in TYPES},
        "tenants": {f"t{u}": {"weight": 1} for u in range(tenants)},
        "jobs": jobs,
    }


def timed(argv: list[str], timeout: float) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=True)
    return time.perf_counter() - start, done.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 2048, 4096, 8192])
    ap.add_argument("--solver", default=None, help="passed to slurm-fair solve (default: its own default)")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sf = [sys.executable, "-c", "import sys; from slurm_fair.cli import main; sys.exit(main())"]
    rows = []
    print(f"{'N':>6} {'classes':>7} {'oef s':>8} {'plain LP s':>10} {'ratio':>6} {'E/E*':>6} {'oef status':>10}")
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "problem.json")
            Path(path).write_text(json.dumps(instance(n)))
            solver = ["--solver", args.solver] if args.solver else []
            oef_s, out = timed(sf + ["solve", "--input", path, "--policy", "oef", *solver,
                                     "--output", os.path.join(tmp, "out.json")], args.timeout)
            res = json.loads(Path(tmp, "out.json").read_text())
            plain_s, _ = timed([sys.executable, str(ROOT / "benchmarks" / "gavel_plain_lp.py"), path], args.timeout)
        row = {"n": n, "classes": res.get("classes"), "oef_s": oef_s, "plain_s": plain_s,
               "ratio": oef_s / plain_s, "e_ratio": res["efficiency_ratio"], "status": res["status"]}
        rows.append(row)
        print(f"{n:>6} {row['classes']:>7} {oef_s:>8.2f} {plain_s:>10.2f} {row['ratio']:>6.3f} "
              f"{row['e_ratio']:>6.3f} {row['status']:>10}", flush=True)
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
