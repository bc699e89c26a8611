"""Scaling benchmark of ``slurm-fair solve --policy oef`` (and ``oef-noncoop``) against
Gavel's plain per-job LP, over jobs x tenants.

Gavel's scaling-study shape: N jobs on N/4 GPUs of each of v100, p100, k80; job types (model,
batch size, GPU count) drawn with a fixed seed from Gavel's measured throughput table; T tenants
with mixed weights (1, 2, 3 in turn), jobs dealt round-robin. For each (N, T) every program runs
as a separate process on the same PROBLEM.json, and the wall time of each whole process is
measured, wall and CPU (user + system: on a shared machine the figure to compare, since
other processes stretch the wall time of both programs unevenly). Prints a table (and
``--json`` rows); an ``oef`` status ends in ``(time)`` when a stage before the improvement
stages (the CEEI, max E, the answer's PE check) was cut by the time limit. ``E/E*`` is the returned allocation's; for a
two-level policy (``oef``: docs/oef.md, "Two levels") ``top E/E*`` is its tenant level's, the
allocation SI, EF and PE are about (inside a tenant, jobs are then ordered by aging, not by
efficiency).

    .venv/bin/python benchmarks/bench_solve.py --sizes 2048 8192 16384 --tenants 8 32 128 512
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "slurm_fair" / "data" / "gavel_throughputs.json"
TYPES = ("v100", "p100", "k80")
#: oef's improvement stages as ``skipped_for_time`` names them (``oef.improve_s=0`` skips them)
IMPROVEMENT = ("ccp from", "rest of ccp from", "gavel-mmf")


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


def instance(n: int, tenants: int = 8, seed: int = 0, weights: tuple[float, ...] = (1, 2, 3)) -> dict:
    rng = random.Random(seed)
    kinds = job_types()
    jobs = []
    for i in range(n):
        name, gpus, thr = rng.choice(kinds)
        jobs.append({"id": f"j{i}", "tenant": f"t{i % tenants}", "gpus": gpus, "throughput": thr})
    return {
        "gpu_types": {k: n // 4 for k in TYPES},
        "tenants": {f"t{u}": {"weight": weights[u % len(weights)]} for u in range(tenants)},
        "jobs": jobs,
    }


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], timeout: float) -> tuple[float | None, float | None, str]:
    """Wall and CPU seconds (user + system) of one whole process (None, None when it ran past
    ``timeout`` and was killed). The CPU seconds are the figure to compare on a shared machine:
    other processes stretch the wall time of both programs, unevenly."""
    start, cpu = time.perf_counter(), _children_cpu()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return None, None, ""
    return time.perf_counter() - start, _children_cpu() - cpu, done.stdout


def _fmt(v: float | None, spec: str) -> str:
    return "timeout" if v is None else format(v, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2048, 8192, 16384])
    ap.add_argument("--tenants", type=int, nargs="+", default=[8, 32, 128, 512])
    ap.add_argument("--policies", nargs="+", default=["oef", "oef-noncoop"])
    ap.add_argument("--solver", default=None, help="passed to slurm-fair solve (default: its own default)")
    ap.add_argument("--time-limit", type=float, default=None, help="passed to slurm-fair solve")
    ap.add_argument("--policy-option", action="append", default=[], help="passed to slurm-fair solve (oef.improve_s=0)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds before a process is killed")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sf = [sys.executable, "-c", "import sys; from slurm_fair.cli import main; sys.exit(main())"]
    rows = []
    head = f"| {'N':>6} | {'T':>4} | {'classes':>7} | {'plain LP s':>10} | {'cpu s':>6} |"
    for p in args.policies:
        head += (f" {p + ' s':>15} | {'ratio':>6} | {'cpu s':>6} | {'cpu ratio':>6} | {'E/E*':>6} | {'top E/E*':>6} |"
                 f" {'status':>30} |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for n in args.sizes:
        for tenants in args.tenants:
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "problem.json")
                Path(path).write_text(json.dumps(instance(n, tenants)))
                plain_s, plain_cpu, _ = timed([sys.executable, str(ROOT / "benchmarks" / "gavel_plain_lp.py"), path],
                                              args.timeout)
                row: dict = {"n": n, "tenants": tenants, "plain_s": plain_s, "plain_cpu": plain_cpu}
                line = ""
                for p in args.policies:
                    extra = ["--solver", args.solver] if args.solver else []
                    if args.time_limit is not None:
                        extra += ["--time-limit", str(args.time_limit)]
                    extra += [a for o in args.policy_option if o.startswith(p + ".") for a in ("--policy-option", o)]
                    out = os.path.join(tmp, f"{p}.json")
                    secs, cpu, _ = timed(sf + ["solve", "--input", path, "--policy", p, *extra, "--output", out],
                                         args.timeout)
                    res = json.loads(Path(out).read_text()) if secs is not None else {}
                    status = res.get("status", "timeout")
                    top = res.get("tenant_level")
                    if top and res.get("efficiency_bound"):  # two levels: the tenant level's E/E*
                        row.setdefault("tenant_e_ratio", {})[p] = sum(t["value"] for t in top.values()) / res["efficiency_bound"]
                    if p == "oef" and res:
                        cut = [s for s in res.get("skipped_for_time", []) if not s.startswith(IMPROVEMENT)]
                        status = f"{res.get('winner', '?')}" + (" (time)" if cut else "")
                    ratio = None if secs is None or plain_s is None else secs / plain_s
                    cpu_ratio = None if cpu is None or not plain_cpu else cpu / plain_cpu
                    row[p] = {"s": secs, "ratio": ratio, "cpu": cpu, "cpu_ratio": cpu_ratio,
                              "e_ratio": res.get("efficiency_ratio"), "status": status,
                              "classes": res.get("classes")}
                    row["classes"] = res.get("classes") or row.get("classes")
                    e = res.get("efficiency_ratio")
                    te = row.get("tenant_e_ratio", {}).get(p)
                    line += (f" {_fmt(secs, '15.2f')} | {_fmt(ratio, '6.3f')} | {_fmt(cpu, '6.2f')} |"
                             f" {_fmt(cpu_ratio, '6.3f')} | {_fmt(e, '6.4f')} |"
                             f" {'' if te is None else format(te, '6.4f'):>6} | {status[:30]:>30} |")
            rows.append(row)
            print(f"| {n:>6} | {tenants:>4} | {str(row.get('classes')):>7} | {_fmt(plain_s, '10.2f')} |"
                  f" {_fmt(plain_cpu, '6.2f')} |" + line, flush=True)
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
