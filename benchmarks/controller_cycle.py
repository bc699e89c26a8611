"""Wall time of one controller cycle per phase on the fake Slurm port (no Slurm commands).

Measures slurm-fair's own share of a cycle: estimates, policy + rounding, plan, diff and apply
against the in-memory fake. Usage::

    python benchmarks/controller_cycle.py --jobs 50 200 --policy oef --repeat 3
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

from slurm_fair.config import validate
from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.estimates import load_class_table
from slurm_fair.model import Account, Node, Qos
from slurm_fair.slurm.fake import FakeSlurm


def cluster() -> FakeSlurm:
    nodes = [Node(f"{k}-{i}", "idle", {k: 4}, {}, ("gpu",), (), 32) for k in ("v100", "p100", "k80") for i in range(1, 10)]
    tenants = [f"t{i}" for i in range(6)]
    return FakeSlurm(nodes=nodes, accounts=[Account(t, 1.0, ("normal",), "normal") for t in tenants],
                     qos=[Qos("normal")], now=datetime(2026, 1, 1, 12))


def one(n_jobs: int, policy: str, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    classes = list(load_class_table(None).rows)
    fake = cluster()
    for _ in range(n_jobs):
        fake.submit(f"t{rng.randrange(6)}", f"--gres=gpu:{rng.choice([1, 1, 2, 4])}", hold=False,
                    comment=f"fair:class={rng.choice(classes)}")
    with tempfile.TemporaryDirectory() as tmp:
        config = validate({"controller": {"policy": policy, "state_dir": tmp, "audit_log": str(Path(tmp) / "a.jsonl")}})
        first = run_cycle(fake, config)
        fake.now += timedelta(seconds=60)
        second = run_cycle(fake, config)
    out = {f"first.{k}": v for k, v in first.timings.items()}
    out.update({f"second.{k}": v for k, v in second.timings.items()})
    out["first.actions"] = len(first.results)
    out["second.actions"] = len(second.results)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, nargs="+", default=[50, 200])
    ap.add_argument("--policy", default="oef")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    for n in a.jobs:
        runs = [one(n, a.policy, s) for s in range(a.repeat)]
        keys = sorted(runs[0])
        print(f"jobs={n} policy={a.policy} repeat={a.repeat} (median)")
        for k in keys:
            vals = [r.get(k, 0.0) for r in runs]
            unit = "" if k.endswith("actions") else " s"
            print(f"  {k:24s} {statistics.median(vals):.4f}{unit}")


if __name__ == "__main__":
    main()
