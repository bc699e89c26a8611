"""Benchmark: ``snapshot()`` of a queue with many held GPU jobs on a real Slurm.

    eval "$(slurm-fair testbed env)"
    python benchmarks/bench_snapshot.py --jobs 10000 --repeat 5

Submits ``--jobs`` held jobs as job arrays (``sbatch --hold --array``; ``squeue -r`` shows each
task as its own job), one array per tenant and GPU syntax, waits until squeue shows them all,
then times ``SlurmCli.snapshot()``: total wall time, wall time inside Slurm's commands
(subprocess), and slurm-fair's own time (the rest: parsing, building the model). Also times
Snapshot -> Problem. Cancels exactly the arrays it submitted, also on error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

from slurm_fair.config import validate
from slurm_fair.controller.decide import DecideSettings, observe
from slurm_fair.controller.history import History
from slurm_fair.controller.settings import Settings
from slurm_fair.estimates.classes import load_class_table
from slurm_fair.estimates.rules import Rules
from slurm_fair.slurm.cli import SlurmCli

SYNTAXES = ["--gres=gpu:1", "--gpus=2", "--gpus-per-node=v100:1", "--gres=gpu:k80:2"]


def submit(env: dict[str, str], tenants: list[str], jobs: int) -> list[str]:
    """Arrays spread over tenants x syntaxes, ``jobs`` tasks in total."""
    combos = [(t, s) for t in tenants for s in SYNTAXES]
    per, extra = divmod(jobs, len(combos))
    ids = []
    for i, (tenant, syntax) in enumerate(combos):
        n = per + (1 if i < extra else 0)
        if n == 0:
            continue
        argv = ["sbatch", "--parsable", "--hold", f"--array=0-{n - 1}", "-A", tenant, "-J", "bench-snap",
                "-o", "/dev/null", "--comment=fair:class=resnet50 bench", syntax, "--wrap", "sleep 1"]
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=True)
        ids.append(out.stdout.strip().split(";")[0])
    return ids


def submit_individual(env: dict[str, str], tenants: list[str], jobs: int) -> list[str]:
    """``jobs`` separate held jobs (each its own record in slurmctld), 4 sbatch at a time."""
    from concurrent.futures import ThreadPoolExecutor

    combos = [(t, s) for t in tenants for s in SYNTAXES]

    def one(i: int) -> str:
        tenant, syntax = combos[i % len(combos)]
        argv = ["sbatch", "--parsable", "--hold", "-A", tenant, "-J", "bench-snap", "-o", "/dev/null",
                f"--comment=fair:class=resnet50 bench {i}", syntax, "--wrap", "sleep 1"]
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=True)
        return out.stdout.strip().split(";")[0]

    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(one, range(jobs)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--mode", choices=["array", "individual"], default="array",
                    help="held job arrays (fast to submit) or separate jobs (one record each)")
    args = ap.parse_args()
    env = dict(os.environ)
    if "SLURM_CONF" not in env:
        print("set SLURM_CONF (eval \"$(slurm-fair testbed env)\")", file=sys.stderr)
        return 2
    port = SlurmCli(env={"SLURM_CONF": env["SLURM_CONF"]}, timeout_s=120)
    tenants = sorted(a.name for a in port.accounts())
    baseline = len(port.jobs())
    t0 = time.perf_counter()
    ids = (submit if args.mode == "array" else submit_individual)(env, tenants, args.jobs)
    submit_s = time.perf_counter() - t0
    try:
        for _ in range(120):
            if len(port.jobs()) >= baseline + args.jobs:
                break
            time.sleep(1)
        config = validate({}, "defaults")
        ds = DecideSettings(Settings.from_config(config), load_class_table(None), Rules.from_config(config))
        rows = []
        for _ in range(args.repeat):
            port.runner.stats.reset()
            t = time.perf_counter()
            snap = port.snapshot()
            total = time.perf_counter() - t
            slurm = port.runner.stats.seconds
            t = time.perf_counter()
            problem = observe(snap, History(), ds).built.problem  # what snapshot --json prints
            problem_s = time.perf_counter() - t
            rows.append((total, slurm, total - slurm, problem_s, dict(port.runner.stats.by_command)))
        mine = sum(1 for j in snap.jobs if j.name == "bench-snap")
        print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
        print(f"Slurm: {subprocess.run(['scontrol', '--version'], env=env, capture_output=True, text=True).stdout.strip()}")
        print(f"jobs in snapshot: {len(snap.jobs)} (bench: {mine}), GPU jobs in problem: {len(problem.jobs)}; "
              f"submitted {args.jobs} ({args.mode}) as {len(ids)} sbatch calls in {submit_s:.1f} s")
        print()
        print(f"{'run':>3} {'total s':>8} {'in Slurm s':>10} {'own s':>7} {'Slurm %':>8} {'problem s':>12}  per command (s)")
        for i, (total, slurm, own, tp, by) in enumerate(rows, 1):
            cmds = " ".join(f"{k}={v:.2f}" for k, v in sorted(by.items()))
            print(f"{i:>3} {total:>8.2f} {slurm:>10.2f} {own:>7.2f} {100 * slurm / total:>7.0f}% {tp:>12.2f}  {cmds}")
        med = lambda k: statistics.median(r[k] for r in rows)  # noqa: E731
        print(f"med {med(0):>8.2f} {med(1):>10.2f} {med(2):>7.2f} {100 * med(1) / med(0):>7.0f}% {med(3):>12.2f}")
    finally:
        for i in range(0, len(ids), 1000):
            subprocess.run(["scancel", *ids[i:i + 1000]], env=env, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
