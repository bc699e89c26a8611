"""Wall time of one controller cycle (snapshot to apply), per phase.

Two modes:

* fake (default): the in-memory fake Slurm port, no Slurm commands: slurm-fair's own share of a
  cycle (estimates, policy + rounding, plan, diff and apply)::

      python benchmarks/controller_cycle.py --jobs 50 200 --policy oef --repeat 3

  (``--accounts 200`` for many tenants; the fake cycle ends with a ``revert``.)

* ``--real``: a private real testbed (its own directory and ports, so the default testbed may
  run beside it) with ``--accounts`` Slurm accounts (fair-share shares 1, 2, 3 in turn) and
  ``--jobs`` pending GPU jobs submitted with ``sbatch`` (class tags in the comment, counts 1, 2
  or 4, untyped requests). Each repeat runs a *first* cycle (every job new to the controller:
  the whole plan is applied) and a *steady* cycle a minute of cluster time later, then
  ``slurm-fair revert`` puts every job back for the next repeat::

      python benchmarks/controller_cycle.py --real --jobs 10000 --accounts 200 --repeat 3

  ``--slurm 24.11`` runs it on the testbed's other Slurm version. The testbed is taken down at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import random
import statistics
import subprocess
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from slurm_fair.config import load as load_config
from slurm_fair.config import validate
from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.revert import revert
from slurm_fair.estimates.classes import load_class_table
from slurm_fair.slurm import make_port
from slurm_fair.slurm.fake import FakeSlurm
from slurm_fair.slurm.model import Account, Node, Qos

ROOT = Path(__file__).resolve().parent.parent


def cluster(accounts: int = 6) -> FakeSlurm:
    nodes = [Node(f"{k}-{i}", "idle", {k: 4}, {}, ("gpu",), (), 32) for k in ("v100", "p100", "k80") for i in range(1, 10)]
    tenants = [f"t{i}" for i in range(accounts)]
    return FakeSlurm(nodes=nodes, accounts=[Account(t, 1.0, ("normal",), "normal") for t in tenants],
                     qos=[Qos("normal")], now=datetime(2026, 1, 1, 12))


def one(n_jobs: int, policy: str, seed: int, accounts: int = 6, time_limit: float = 30.0) -> dict[str, float]:
    rng = random.Random(seed)
    classes = list(load_class_table(None).rows)
    fake = cluster(accounts)
    for _ in range(n_jobs):
        fake.submit(f"t{rng.randrange(accounts)}", f"--gres=gpu:{rng.choice([1, 1, 2, 4])}", hold=False,
                    comment=f"fair:class={rng.choice(classes)}")
    with tempfile.TemporaryDirectory() as tmp:
        config = validate({"controller": {"policy": policy, "state_dir": tmp, "audit_log": str(Path(tmp) / "a.jsonl"),
                                          "time_limit_s": time_limit},
                           "tenants": {f"t{i}": {"weight": float(1 + i % 3)} for i in range(accounts)}})
        first = run_cycle(fake, config)
        fake.now += timedelta(seconds=60)
        second = run_cycle(fake, config)
        t = time.perf_counter()
        rev = revert(fake, config)
        revert_s = time.perf_counter() - t
    out = {f"first.{k}": v for k, v in first.timings.items()}
    out["revert.total"] = revert_s
    out["revert.failed"] = len(rev.failed)
    out.update({f"second.{k}": v for k, v in second.timings.items()})
    out["first.actions"] = len(first.results)
    out["second.actions"] = len(second.results)
    return out


# --- the real testbed -------------------------------------------------------------------------

def testbed_toml(accounts: int, port_offset: int) -> str:
    """The default testbed's nodes with ``accounts`` tenants and its own ports."""
    lines = [
        "[cluster]", 'name = "cyclebench"', "max_job_count = 40000", "min_job_age_s = 30", "",
        "[gpu_types.v100]", 'nodes = "v100-[1-2]"', "gpus_per_node = 4", "",
        "[gpu_types.p100]", 'nodes = "p100-[1-2]"', "gpus_per_node = 4", "",
        "[gpu_types.k80]", 'nodes = "k80-1"', "gpus_per_node = 8", "",
    ]
    for i in range(accounts):
        lines += [f"[tenants.a{i:03d}]", f"fairshare = {1 + i % 3}", ""]
    lines += ["[ports]", f"slurmctld = {16817 + port_offset}", f"slurmdbd = {16819 + port_offset}",
              f"mariadb = {13306 + port_offset}", f"slurmd_base = {17001 + port_offset}", ""]
    return "\n".join(lines)


def controller_toml(accounts: int, policy: str, state: Path, time_limit: float) -> str:
    lines = [
        "[controller]", f"policy = {json.dumps(policy)}", f"time_limit_s = {time_limit!r}",
        f"state_dir = {json.dumps(str(state))}", f"audit_log = {json.dumps(str(state / 'audit.jsonl'))}", "",
    ]
    for i in range(accounts):
        lines += [f"[tenants.a{i:03d}]", f"weight = {float(1 + i % 3)!r}", ""]
    return "\n".join(lines)


def submit_all(env: dict[str, str], n_jobs: int, accounts: int, seed: int, counts: list[int],
               workers: int = 4) -> float:
    """Submit ``n_jobs`` pending GPU jobs of ``counts`` GPUs (``sbatch``, a few in parallel);
    returns seconds."""
    rng = random.Random(seed)
    classes = list(load_class_table(None).rows)
    argvs = [["sbatch", "--parsable", "-A", f"a{rng.randrange(accounts):03d}", f"--gres=gpu:{rng.choice(counts)}",
              f"--comment=fair:class={rng.choice(classes)}", "-o", "/dev/null", "--wrap", "sleep 86400"]
             for _ in range(n_jobs)]
    t0 = time.perf_counter()

    def sub(argv: list[str]) -> None:
        subprocess.run(argv, env=env, capture_output=True, timeout=60, check=True)

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(sub, argvs))
    return time.perf_counter() - t0


def real(a: argparse.Namespace) -> None:
    from slurm_fair.testbed.cluster import Testbed

    out = Path(a.dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / "testbed.toml").write_text(testbed_toml(a.accounts, a.port_offset))
    # another Slurm version keeps its own directory (its root filesystem is made there once)
    tb = Testbed(out / ("tb" if a.slurm is None else f"tb-{a.slurm}"), out / "testbed.toml", slurm=a.slurm)
    t0 = time.perf_counter()
    tb.up()
    print(f"testbed up with {a.accounts} accounts in {time.perf_counter() - t0:.1f} s")
    env = tb.client_env()
    try:
        for policy in a.policy:
            state = out / f"state-{policy}"
            cfg_path = out / f"controller-{policy}.toml"
            cfg_path.write_text(controller_toml(a.accounts, policy, state, a.time_limit))
            config = load_config(cfg_path)
            port = make_port(config, env=env)
            for n in a.jobs:
                subprocess.run(["scancel", "-u", "root"], env=env, timeout=60, check=False)
                time.sleep(2)
                secs = submit_all(env, n, a.accounts, seed=0, counts=a.gpu_counts)
                print(f"submitted {n} jobs in {secs:.1f} s")
                runs = [one_real(port, config, a.gap) for _ in range(a.repeat)]
                for r, row in enumerate(runs):
                    print(f"  repeat {r + 1}: first {row['first.total']:.2f} s ({row['first.actions']} actions), "
                          f"steady {row['steady.total']:.2f} s ({row['steady.actions']} actions)")
                table(f"real testbed: jobs={n} accounts={a.accounts} gpus={a.gpu_counts} policy={policy} "
                      f"repeat={a.repeat}", runs)
    finally:
        subprocess.run(["scancel", "-u", "root"], env=env, timeout=60, check=False)
        if not a.keep:
            tb.down()


def one_real(port: Any, config: Any, gap: float) -> dict[str, Any]:
    """A first cycle, a steady one ``gap`` seconds later, then ``revert`` (all in-process)."""
    row: dict[str, Any] = {}
    stats = port.runner.stats  # wall time inside Slurm's commands, per command

    def slurm_share(label: str) -> None:
        row[f"{label}.in_slurm"] = stats.seconds
        row[f"{label}.slurm_calls"] = stats.calls
        row[f"{label}.in_scontrol"] = stats.by_command.get("scontrol", 0.0)
        stats.reset()

    for label in ("first", "steady"):
        stats.reset()
        t = time.perf_counter()
        res = run_cycle(port, config)
        row[f"{label}.total"] = time.perf_counter() - t
        slurm_share(label)
        row.update({f"{label}.{k}": v for k, v in res.timings.items()})
        row[f"{label}.actions"] = len(res.results)
        row[f"{label}.failed"] = sum(1 for x in res.results if not x.applied and not x.skipped)
        row[f"{label}.status"] = res.status
        if label == "first":
            time.sleep(gap)
    t = time.perf_counter()
    rev = revert(port, config)
    row["revert.total"] = time.perf_counter() - t
    row["revert.failed"] = len(rev.failed)
    row["revert.actions"] = len(rev.steps)
    slurm_share("revert")
    return row


def table(title: str, runs: list[dict[str, Any]]) -> None:
    """Median, min and max of every numeric key over the repeats."""
    print(title)
    print(f"  {'phase':28s} {'median':>9s} {'min':>9s} {'max':>9s}")
    keys = sorted({k for r in runs for k, v in r.items() if isinstance(v, (int, float))})
    for k in keys:
        vals = [float(r.get(k, 0.0)) for r in runs]
        unit = "" if k.endswith(("actions", "failed", "calls")) else " s"
        print(f"  {k:28s} {statistics.median(vals):9.3f} {min(vals):9.3f} {max(vals):9.3f}{unit}")
    for k in sorted({k for r in runs for k, v in r.items() if isinstance(v, str)}):
        print(f"  {k:28s} {', '.join(str(r.get(k)) for r in runs)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, nargs="+", default=None)
    ap.add_argument("--policy", nargs="+", default=["oef"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--real", action="store_true", help="a private real testbed instead of the fake")
    ap.add_argument("--accounts", type=int, default=None,
                    help="Slurm accounts (tenants; weights 1, 2, 3 in turn): default 200 with --real, 6 in the fake")
    ap.add_argument("--gpu-counts", type=int, nargs="+", default=[1, 1, 2, 4], help="--real: GPUs per job, drawn uniformly")
    ap.add_argument("--time-limit", type=float, default=30.0, help="[controller] time_limit_s")
    ap.add_argument("--gap", type=float, default=5.0, help="--real: seconds between the first and steady cycle")
    ap.add_argument("--dir", default=str(ROOT / ".cyclebench"), help="--real: working directory")
    ap.add_argument("--port-offset", type=int, default=3000, help="--real: added to the default testbed's ports")
    ap.add_argument("--keep", action="store_true", help="--real: leave the testbed running")
    ap.add_argument("--slurm", default=None, help="--real: the testbed's Slurm version (default: the host's; "
                    "another moves every port, e.g. by +1000 for 24.11)")
    a = ap.parse_args()
    if a.real:
        a.jobs = a.jobs or [10000]
        a.accounts = a.accounts or 200
        real(a)
        return
    accounts = a.accounts or 6
    for n in a.jobs or [50, 200]:
        for policy in a.policy:
            runs = [one(n, policy, s, accounts, a.time_limit) for s in range(a.repeat)]
            table(f"fake: jobs={n} accounts={accounts} policy={policy} time_limit={a.time_limit:g} repeat={a.repeat}", runs)


if __name__ == "__main__":
    main()
