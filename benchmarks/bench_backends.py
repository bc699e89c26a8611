"""Benchmark: the two Slurm backends (Slurm's commands, pyslurm) on the same queue.

    eval "$(slurm-fair testbed env)"
    python benchmarks/bench_backends.py --jobs 1000,10000

For each queue size, tops the queue up to that many *pending, eligible* GPU jobs (separate
``sbatch`` calls, one record each in slurmctld, spread over every tenant and four GPU syntaxes,
in a partition made DOWN for the run so they stay pending and ``sprio`` lists them, as the
waiting jobs of a full cluster), then times, one run per arm, arms alternating (the command
line first at the first size, pyslurm first at the next):

* ``snapshot()`` (every controller cycle's read): *cold*, the first read of a new port, then
  *warm*, ``--rounds`` times per arm (pyslurm: every job in one read of libslurm's records where
  Slurm's header is installed; else, at a big queue, once its side process is up:
  docs/slurm-adapter.md, *The job read*), arms alternating in each
  round (the median and every run printed), and the Problem the controller builds from it
  (``snapshot --json``'s): the two Problems must be equal (the age of each job aside), also after
  a user changes pending jobs' GPU requests in the warm state (``scontrol update`` of one job's
  ``TresPerJob``, another's ``Gres`` and another's ``NumTasks``);
* pyslurm's direct job read asks slurmctld with its last reply's time and gets "no change since"
  (no record sent) while no job changed: on the untouched queue its warm snapshots are that
  answer; ``--touch`` updates one pending job (``Nice``, untimed) before every warm snapshot of
  either arm, so that each reads every record (the count of each kind of answer is printed);
* both arms keep accounts and QOS across a port's snapshots as the controller's loop does
  (``[slurm] accounts_ttl_s``, its default unless ``--accounts-ttl``: the cold snapshot reads
  them, the warm ones keep them); pyslurm's site factors come from sprio's RPC in process
  (``--sprio``: sprio, the previous way);
* ``update_jobs(all, SiteFactor=...)``: the controller's order, written to every pending job;
* ``set_nice`` on 200 jobs one at a time (a per-job write).

Needs pyslurm built for this Slurm (``scripts/build-pyslurm.sh``). Cancels exactly the jobs it
submitted and deletes its partition, also on error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from slurm_fair.commands.snapshot import controller_problem
from slurm_fair.config import validate
from slurm_fair.problem_io import problem_to_dict
from slurm_fair.slurm.cli import SlurmCli
from slurm_fair.slurm import pyslurm_port
from slurm_fair.slurm.pyslurm_port import PyslurmPort, installed_version

SYNTAXES = ["--gres=gpu:1", "--gpus=2", "--gpus-per-node=v100:1", "--gres=gpu:k80:2"]
NAME = "bench-backends"


def submit(env: dict[str, str], tenants: list[str], part: str, start: int, count: int) -> list[str]:
    """``count`` separate pending jobs in ``part``, 4 sbatch at a time."""
    combos = [(t, s) for t in tenants for s in SYNTAXES]

    def one(i: int) -> str:
        tenant, syntax = combos[i % len(combos)]
        argv = ["sbatch", "--parsable", "-p", part, "-A", tenant, "-J", NAME, "-o", "/dev/null", "-t", "60",
                f"--comment=fair:class=resnet50 bench {i}", *syntax.split(), "--wrap", "sleep 1"]
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=True)
        return out.stdout.strip().split(";")[0]

    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(one, range(start, start + count)))


def user_changes(env: dict[str, str], cli: SlurmCli) -> bool:
    """What a user may do to pending jobs between two cycles: a ``--gpus`` job asks for one more
    GPU (``TresPerJob``), a ``--gres`` job for two (``Gres``), another job for three tasks.
    True when each change took (read back through the command line)."""
    jobs = [j for j in cli.jobs(("PENDING",)) if j.name == NAME and j.gpu_request is not None]
    per_job = [j for j in jobs if j.gpu_request is not None and j.gpu_request.per == "job"
               and j.gpu_request.count == 2 and j.gpu_request.gpu_type is None]
    per_node = [j for j in jobs if j.gpu_request is not None and j.gpu_request.per == "node"
                and j.gpu_request.count == 1 and j.gpu_request.gpu_type is None]
    plan = [(js[0].job_id, change) for js, change in ((per_job, "TresPerJob=gres:gpu:3"), (per_node, "Gres=gpu:2"))
            if js]
    plan.append((jobs[-1].job_id, "NumTasks=3"))
    for job_id, change in plan:
        subprocess.run(["scontrol", "update", f"JobId={job_id}", change], env=env, check=True, capture_output=True,
                       timeout=30)
    seen = {j.job_id: j for j in cli.jobs(("PENDING",))}
    took = [(per_job, 3), (per_node, 2)]
    return len(plan) == 3 and all(j.job_id in seen for js, _ in took for j in js[:1]) and all(
        (seen[js[0].job_id].gpu_request or per_job[0].gpu_request).count == n for js, n in took)


def parts(ports: dict[str, Any], rounds: int) -> dict[str, list[float]]:
    """Each part of pyslurm's snapshot alone (and the whole of both), ``rounds`` times, the order
    reversed every other round: where the time goes."""
    ps, cli = ports["pyslurm"], ports["cli"]
    site: Any = Future()
    site.set_result(ps._site_factors())
    prio = ps._prio_reader()
    reader = ps._field_reader()
    calls: dict[str, Any] = {}
    if reader is not None:
        def full() -> Any:
            reader.forget()  # every record, not slurmctld's "no change since" answer
            return reader.read(pyslurm_port._FAST_ATTRS)

        calls["direct read of every job (one RPC, unpacked)"] = full
        calls["direct read, 'no change since' answered"] = lambda: reader.read(pyslurm_port._FAST_ATTRS)
    calls.update({
        "jobs built from the read (warm)": lambda: ps._read_jobs(("PENDING", "RUNNING"), site),
        "Jobs.load() and its attributes": lambda: [pyslurm_port._fast_values(j) for j in ps.ps.Jobs.load().values()],
        "legacy job().get()": lambda: ps.ps.job().get(),
        "sprio (site factors)": ps.cli._site_factors,
        **({"priority factors RPC (site factors, in process)": ps._site_factors} if prio is not None else {}),
        "sacctmgr accounts": ps.accounts,
        "sacctmgr QOS": ps.qos,
        "snapshot, pyslurm": ps.snapshot,
        "snapshot, commands": cli.snapshot,
    })
    runs: dict[str, list[float]] = {k: [] for k in calls}
    for r in range(rounds):
        for name, call in (list(calls.items()) if r % 2 == 0 else list(calls.items())[::-1]):
            t = time.perf_counter()
            call()
            runs[name].append(time.perf_counter() - t)
    return runs


def problem(port: Any, config: Any) -> dict[str, Any]:
    doc = problem_to_dict(controller_problem(port, config))
    for job in doc["jobs"]:
        job.pop("age_s", None)  # when the read happened
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="1000,10000", help="queue sizes, ascending (pending jobs)")
    ap.add_argument("--single-writes", type=int, default=200, help="jobs written one at a time (set_nice)")
    ap.add_argument("--rounds", type=int, default=5, help="snapshots per arm and size, arms alternating (median)")
    ap.add_argument("--parts", action="store_true",
                    help="at the largest size, also time each part of a snapshot alone (median of --rounds)")
    ap.add_argument("--legacy", action="store_true", help="pyslurm without the direct read (the legacy read and side process)")
    ap.add_argument("--sprio", action="store_true", help="pyslurm's site factors through sprio (the previous way)")
    ap.add_argument("--touch", action="store_true",
                    help="before each warm snapshot (untimed) change one pending job (scontrol update Nice): "
                         "slurmctld's 'no change since' answer never comes, pyslurm reads every record")
    ap.add_argument("--accounts-ttl", type=float, default=None,
                    help="[slurm] accounts_ttl_s of both arms (default: the configuration's default; 0: sacctmgr "
                         "at every snapshot, the previous way)")
    args = ap.parse_args()
    sizes = sorted(int(x) for x in args.jobs.split(","))
    env = dict(os.environ)
    if "SLURM_CONF" not in env:
        print("set SLURM_CONF (eval \"$(slurm-fair testbed env)\")", file=sys.stderr)
        return 2
    if installed_version() is None:
        print("pyslurm is not installed: scripts/build-pyslurm.sh", file=sys.stderr)
        return 2
    conf = {"SLURM_CONF": env["SLURM_CONF"]}
    ttl = (validate({}, "defaults")["slurm"]["accounts_ttl_s"] if args.accounts_ttl is None
           else args.accounts_ttl)

    def new_ports() -> dict[str, Any]:
        pyslurm_port._stop_side(env["SLURM_CONF"])
        ps = PyslurmPort(SlurmCli(env=conf, timeout_s=300, accounts_ttl_s=ttl))
        if args.legacy:
            ps._reader.append(None)
        if args.sprio:
            ps._prio.append(None)
        return {"cli": SlurmCli(env=conf, timeout_s=300, accounts_ttl_s=ttl), "pyslurm": ps}

    ports = new_ports()
    cli = ports["cli"]
    tenants = sorted(a.name for a in cli.accounts())
    nodes = ",".join(sorted(n.name for n in cli.nodes()))
    part = f"benchbk{os.getpid() % 10000}"
    subprocess.run(["scontrol", "create", f"PartitionName={part}", f"Nodes={nodes}", "State=DOWN"],
                   env=env, check=True, capture_output=True, timeout=30)
    config = validate({"controller": {"state_dir": "/nonexistent/slurm-fair-bench"}}, "defaults")
    ids: list[str] = []
    rows: list[Any] = []
    try:
        for n, size in enumerate(sizes):
            t0 = time.perf_counter()
            ids += submit(env, tenants, part, len(ids), size - len(ids))
            submit_s = time.perf_counter() - t0
            while sum(1 for j in cli.jobs(("PENDING",)) if j.name == NAME) < size:
                time.sleep(1)
            order = ["cli", "pyslurm"] if n % 2 == 0 else ["pyslurm", "cli"]
            docs = {}
            ports = new_ports()
            cold: dict[str, float] = {}
            for arm in order:
                t = time.perf_counter()
                ports[arm].snapshot()
                cold[arm] = time.perf_counter() - t
            ports["pyslurm"].snapshot()  # a second read (a loop's) starts the side process at a big queue
            waited = time.perf_counter()  # its start (a controller's interval is longer)
            while (pyslurm_port._side_process(env["SLURM_CONF"], False) is None and env["SLURM_CONF"] in pyslurm_port._sides
                   and time.perf_counter() - waited < 60):
                time.sleep(0.2)
            # the snapshot alone, --rounds times per arm, arms alternating (the median is reported:
            # the machine's load moves between single reads)
            snap_runs: dict[str, list[float]] = {arm: [] for arm in order}
            for r in range(args.rounds):
                for arm in (order if r % 2 == 0 else order[::-1]):
                    if args.touch:
                        subprocess.run(["scontrol", "update", f"JobId={ids[r % len(ids)]}", f"Nice={r + 1}"],
                                       env=env, check=True, capture_output=True, timeout=30)
                    t = time.perf_counter()
                    ports[arm].snapshot()
                    snap_runs[arm].append(time.perf_counter() - t)
            reader = ports["pyslurm"]._field_reader()
            if reader is not None:
                rows.append((size, "answers", (reader.full_reads, reader.unchanged_reads)))
            if args.parts and size == sizes[-1]:
                rows.append((size, "parts", parts(ports, args.rounds)))
            for k, arm in enumerate(order):
                port = ports[arm]
                snap = port.snapshot()
                snap_s = statistics.median(snap_runs[arm])
                t = time.perf_counter()
                docs[arm] = problem(port, config)
                problem_s = time.perf_counter() - t
                pending = [j.job_id for j in snap.jobs if j.name == NAME and j.pending]
                t = time.perf_counter()
                failed = port.update_jobs(pending, {"SiteFactor": str(-(10 * n + k + 1))})
                batch_s = time.perf_counter() - t
                t = time.perf_counter()
                for job_id in pending[:args.single_writes]:
                    port.set_nice(job_id, 10 * n + k + 1)
                single_s = time.perf_counter() - t
                rows.append((size, arm, len(snap.jobs), snap_s, problem_s, len(pending), batch_s, len(failed),
                             min(len(pending), args.single_writes), single_s, submit_s, snap_runs[arm]))
            same = docs["cli"] == docs["pyslurm"]
            rows.append((size, "same Problem", same))
            changed = user_changes(env, ports["cli"])
            after = {arm: problem(ports[arm], config) for arm in order}
            rows.append((size, "same Problem after a user's change", after["cli"] == after["pyslurm"] and changed))
            rows.append((size, "cold", cold))
        print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
        print(f"Slurm: {subprocess.run(['scontrol', '--version'], env=env, capture_output=True, text=True).stdout.strip()}; "
              f"pyslurm {installed_version()}; its job read: "
              f"{'libslurm records read directly' if ports['pyslurm']._field_reader() else 'legacy read (side process)'}; "
              f"its site factors: {'priority factors RPC in process' if ports['pyslurm']._prio_reader() else 'sprio'}; "
              f"accounts and QOS kept {ttl:g} s (both arms)")
        print()
        print(f"{'pending':>7} {'backend':>8} {'jobs':>6} {'snapshot s':>10} {'problem s':>9} "
              f"{'SiteFactor on':>13} {'s':>7} {'failed':>6} {'set_nice x':>10} {'s':>7}")
        snaps: dict[tuple[int, str], float] = {}
        colds: dict[int, dict[str, float]] = {}
        for r in rows:
            if r[1] == "cold":
                print(f"{r[0]:>7} cold (first) snapshot: " + ", ".join(f"{a} {v:.3f} s" for a, v in r[2].items()))
                colds[r[0]] = r[2]
                continue
            if r[1] == "answers":
                print(f"{r[0]:>7} pyslurm's job reads until then: {r[2][0]} full, {r[2][1]} 'no change since' answers")
                continue
            if r[1] == "parts":
                print(f"{r[0]:>7} each part alone (median; the runs):")
                for name, runs in r[2].items():
                    print(f"        {name:<52} {statistics.median(runs):.3f}   {' '.join(f'{x:.2f}' for x in runs)}")
                continue
            if r[1].startswith("same Problem"):
                print(f"{r[0]:>7} {r[1]} from both backends: {'yes' if r[2] else 'NO'}")
                continue
            size, arm, njobs, snap_s, problem_s, npend, batch_s, nfail, nsingle, single_s, _, runs = r
            snaps[(size, arm)] = snap_s
            print(f"{size:>7} {arm:>8} {njobs:>6} {snap_s:>10.3f} {problem_s:>9.3f} {npend:>13} {batch_s:>7.2f} "
                  f"{nfail:>6} {nsingle:>10} {single_s:>7.2f}   snapshots: {' '.join(f'{x:.3f}' for x in runs)}")
        print()
        for size in sizes:
            print(f"snapshot at {size} pending: cli / pyslurm = {snaps[(size, 'cli')] / snaps[(size, 'pyslurm')]:.1f}x "
                  f"warm (medians), {colds[size]['cli'] / colds[size]['pyslurm']:.1f}x cold (first)")
        print(f"load average (1, 5, 15 min) at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        for i in range(0, len(ids), 1000):
            subprocess.run(["scancel", *ids[i:i + 1000]], env=env, check=False)
        subprocess.run(["scontrol", "delete", f"PartitionName={part}"], env=env, capture_output=True, timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
