"""How the controller's state store grows, and where ``[controller] keep_days`` stops it.

Runs controller cycles on the in-memory fake Slurm (no Slurm commands) with a steady churn of
jobs: every cycle some running jobs end, some pending jobs start and new ones arrive, with
``--minutes`` of cluster time between cycles. Prints the store's size as cycles accumulate, for
a ``keep_days`` long enough never to prune and for a short one, so the difference is the
pruning. SQLite reuses the pages of deleted rows, so a pruned store stops growing rather than
shrinking::

    python benchmarks/store_growth.py --jobs 200 --cycles 600 --minutes 10 --keep-days 1
"""

from __future__ import annotations

import argparse
import random
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

from rich.console import Console
from rich.table import Table

from slurm_fair.config import validate
from slurm_fair.controller.cycle import run_cycle
from slurm_fair.slurm.fake import FakeSlurm
from slurm_fair.slurm.model import Account, Node, Qos

CLASSES = ("resnet-50-bs32", "a3c", "lm-bs20", "transformer-bs32", "cyclegan-bs1")


def cluster() -> list[Node]:
    nodes = []
    for k, n in (("v100", 4), ("p100", 4), ("k80", 4)):
        for i in range(n):
            nodes.append(Node(f"{k}-{i + 1}", "idle", {k: 4}, {}, ("gpu", k), (), 32))
    return nodes


def run(jobs: int, cycles: int, minutes: float, keep_days: float, every: int, seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    tenants = [f"t{i}" for i in range(6)]
    fake = FakeSlurm(slurm_version="22.05", nodes=cluster(), now=datetime(2026, 1, 1),
                     accounts=[Account(t, 1.0, ("normal",), "normal") for t in tenants], qos=[Qos("normal")])
    with tempfile.TemporaryDirectory() as tmp:
        config = validate({"controller": {"state_dir": f"{tmp}/state", "audit_log": f"{tmp}/audit.jsonl",
                                          "keep_days": keep_days, "time_limit_s": 10}}, f"{tmp}/sf.toml")

        def submit() -> None:
            fake.submit(rng.choice(tenants), f"--gres=gpu:{rng.choice((1, 1, 2, 4))}", hold=False,
                        comment=f"fair:class={rng.choice(CLASSES)}")

        for _ in range(jobs):
            submit()
        sizes = []
        for c in range(1, cycles + 1):
            run_cycle(fake, config, clock=lambda: fake.now.timestamp())
            for j in fake.jobs():  # churn: a tenth of the running jobs end, as many new arrive
                if j.running and rng.random() < 0.1:
                    fake.finish(j.job_id)
                    submit()
            free = {n.name: 4 for n in fake.nodes()}
            for j in fake.jobs():
                for n in j.nodes:
                    free[n] -= j.gpu_request.total if j.running else 0
            for j in [j for j in fake.jobs() if j.pending][:8]:
                node = next((n for n, f in free.items() if f >= j.gpu_request.total
                             and n.split("-")[0] in j.partition.split(",") + ["gpu"]), None)
                if node and j.partition != "gpu":
                    fake.start(j.job_id, node, node.split("-")[0])
                    free[node] -= j.gpu_request.total
            fake.now += timedelta(minutes=minutes)
            if c % every == 0:
                sizes.append((c, (Path(tmp) / "state" / "state.sqlite").stat().st_size
                              + sum(p.stat().st_size for p in (Path(tmp) / "state").glob("state.sqlite-wal"))))
        return sizes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--cycles", type=int, default=600)
    ap.add_argument("--minutes", type=float, default=10.0, help="cluster time between cycles")
    ap.add_argument("--keep-days", type=float, default=1.0, help="the pruning arm's keep_days")
    ap.add_argument("--every", type=int, default=100, help="print the size every this many cycles")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    never = run(a.jobs, a.cycles, a.minutes, 3650.0, a.every, a.seed)
    pruned = run(a.jobs, a.cycles, a.minutes, a.keep_days, a.every, a.seed)
    t = Table(title=f"state.sqlite size ({a.jobs} jobs, a cycle every {a.minutes:g} min of cluster time)")
    for col in ("cycles", "cluster days", "keep_days 3650", f"keep_days {a.keep_days:g}"):
        t.add_column(col, justify="right")
    for (c, n), (_, p) in zip(never, pruned):
        t.add_row(str(c), f"{c * a.minutes / 1440:.1f}", f"{n / 1024:.0f} KiB", f"{p / 1024:.0f} KiB")
    Console().print(t)
    (c0, n0), (c1, n1) = never[0], never[-1]
    print(f"growth without pruning: {(n1 - n0) / max(c1 - c0, 1) / 1024:.1f} KiB per cycle")


if __name__ == "__main__":
    main()
