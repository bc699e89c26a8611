"""Accuracy of ``speeds learn`` on synthetic histories (benchmarks/make_sacct_history.py).

For each seed: a history, ``slurm-fair speeds learn --sacct-file H --node-type ... --json`` run
as a user would (the real command, in-process), and the issue's measure: the learned ratio of two
types a group completed on at least twice each, against the truth. Prints a table per seed and
the pooled median / p90 error; the latest result is in docs/speeds.md.

    .venv/bin/python benchmarks/bench_learn.py --seeds 1-10
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from click.testing import CliRunner
from ClusterShell.NodeSet import NodeSet

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_sacct_history import generate, ratio_errors  # noqa: E402

from slurm_fair.cli import cli  # noqa: E402


def quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def run_seed(seed: int, groups: int, tmp: Path, inventory: bool = True) -> list[float]:
    h = generate(seed, groups)
    path = tmp / f"history-{seed}.txt"
    path.write_text("\n".join(h.lines) + "\n")
    by_type: dict[str, list[str]] = {}
    for n, k in h.nodes.items():
        by_type.setdefault(k, []).append(n)
    args = ["speeds", "learn", "--sacct-file", str(path), "--json"]
    for k, ns in by_type.items() if inventory else ():
        args += ["--node-type", f"{NodeSet.fromlist(ns)}={k}"]
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    if res.exit_code != 0:
        raise SystemExit(f"seed {seed}: exit {res.exit_code}: {res.output}")
    return ratio_errors(json.loads(res.stdout), h.truth)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="1-10")
    ap.add_argument("--groups", type=int, default=80)
    ap.add_argument("--no-inventory", action="store_true", help="no --node-type: untyped rows typed by the history")
    a = ap.parse_args()
    lo, _, hi = a.seeds.partition("-")
    pooled: list[float] = []
    print("| seed | pairs | median error | p90 error |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for seed in range(int(lo), int(hi or lo) + 1):
            errs = run_seed(seed, a.groups, Path(d), not a.no_inventory)
            pooled += errs
            print(f"| {seed} | {len(errs)} | {statistics.median(errs):.3f} | {quantile(errs, 0.9):.3f} |")
    print(f"| all | {len(pooled)} | {statistics.median(pooled):.3f} | {quantile(pooled, 0.9):.3f} |")


if __name__ == "__main__":
    main()
