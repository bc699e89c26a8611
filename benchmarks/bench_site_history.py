"""A site's 90 days through ``simulate --sacct-file`` (issue 42's goal), beside today's engine.

    .venv/bin/python benchmarks/bench_site_history.py --dir /tmp/site --stale-s 7200 --stale-changes 1 \\
        --round-s 900 --baseline-bound-s 600

1. ``make_site_history.generate``: 1,000 GPUs of 4 types on 8-GPU nodes, 50 accounts, 100,000
   jobs of Philly's sizes and durations over 90 days (history, truth and inventory files);
2. **the engine with bounded staleness and parallel runs**: the command an admin runs,
   ``slurm-fair simulate --sacct-file H --inventory I --policy oef --policy agnostic --jobs 2
   --stale-s S`` in a subprocess: wall time, CPU time and peak memory of the process tree (the
   parent and its workers, sampled every 0.5 s with psutil: RSS summed, each process's CPU as
   last seen), the load average around it;
3. **today's engine** (``--stale-s 0``: solve at every change of the active jobs; one process
   per policy, both at once): each stopped after ``--baseline-bound-s`` when not done, with how
   far it was (share of the jobs finished, simulated days, solves) and its CPU seconds.

Prints a progress line every minute while step 2 runs (wall seconds, load, CPU seconds of every
process, memory, and each worker's simulated day, solves and CPU seconds from its stderr, kept
in ``DIR/simulate.log``), so a run stopped early says where it was; then one table (rich). The
machine is shared: the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))

from make_site_history import generate, inventory_text  # noqa: E402

BIN = Path(sys.executable).parent / "slurm-fair"


def tree_rss(proc: psutil.Process, cpu: dict[int, float] | None = None) -> int:
    """Bytes resident in ``proc`` and its children; with ``cpu``, each process's CPU seconds
    (user + system) so far are recorded in it by pid."""
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
            if cpu is not None:
                t = p.cpu_times()
                cpu[p.pid] = t.user + t.system
        except psutil.Error:
            pass
    return total


def measured(argv: list[str], log: Path, every_s: float = 60.0) -> tuple[float, int, int, dict[int, float]]:
    """(wall seconds, peak RSS of the tree, exit code, CPU seconds by pid) of a command (a
    worker's CPU as last sampled, at most 0.5 s before it ended). Its stderr goes to ``log``;
    every ``every_s`` a progress line is printed: wall time, load, CPU seconds of each process,
    memory, and each worker's last line (simulated day, solves, its CPU seconds), so a run
    stopped early says where it was."""
    start = time.perf_counter()
    with log.open("w") as err_out:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err_out)
        ps = psutil.Process(proc.pid)
        peak = 0
        cpu: dict[int, float] = {}
        shown = start
        while proc.poll() is None:
            rss = tree_rss(ps, cpu)
            peak = max(peak, rss)
            time.sleep(0.5)
            if time.perf_counter() - shown >= every_s:
                shown = time.perf_counter()
                last = {}
                for line in log.read_text().splitlines():
                    name, _, rest = line.partition(": day ")
                    if rest:
                        last[name] = f"day {rest}"
                print(f"[{shown - start:.0f} s, load {os.getloadavg()[0]:.1f}] CPU s {[round(v) for v in cpu.values()]}, "
                      f"{rss / 2**30:.2f} GiB; " + "; ".join(f"{k}: {v}" for k, v in last.items()), flush=True)
    if proc.returncode:
        print(log.read_text()[-2000:], file=sys.stderr)
    return time.perf_counter() - start, peak, proc.returncode, cpu


def _baseline(history: str, inventory: str, policy: str, round_s: float, done: "multiprocessing.Value",
              sim_t: "multiprocessing.Value", solves: "multiprocessing.Value") -> None:
    """Today's engine on the replay (no staleness), reporting how far it got."""
    from slurm_fair import policies
    from slurm_fair.commands.simulate import inventory_cluster
    from slurm_fair.sim.accounting import build_replay
    from slurm_fair.sim.engine import SimConfig, Simulator
    from slurm_fair.slurm.parse.history import parse_history
    from slurm_fair.solver import fastest_available

    cluster, types = inventory_cluster(inventory)
    replay = build_replay(parse_history(Path(history).read_text(), history), history, types, cluster)
    sim = Simulator(replay.workload, replay.cluster, replay.table, policies.get(policy),
                    SimConfig(solver=fastest_available(), round_s=round_s))
    original = sim._solve

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        solves.value += 1
        sim_t.value = args[1]
        return original(*args, **kwargs)

    sim._solve = counted  # type: ignore[method-assign]
    sim.progress = lambda f: setattr(done, "value", f)
    sim.run()
    done.value = 1.0


def cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) of a live process, 0 when it is gone."""
    try:
        t = psutil.Process(pid).cpu_times()
        return t.user + t.system
    except (psutil.Error, ValueError):
        return 0.0


def baselines(history: Path, inventory: Path, names: list[str], round_s: float, bound_s: float) -> dict[str, dict]:
    """Each policy on today's engine in its own process, all at once, stopped at ``bound_s``."""
    ctx = multiprocessing.get_context("fork")
    runs = {}
    for name in names:
        vals = (ctx.Value("d", 0.0), ctx.Value("d", 0.0), ctx.Value("i", 0))
        p = ctx.Process(target=_baseline, args=(str(history), str(inventory), name, round_s, *vals))
        runs[name] = (p, vals, time.perf_counter())
        p.start()
    out: dict[str, dict] = {}
    cpu_seen: dict[str, float] = {}
    while len(out) < len(runs):
        time.sleep(1)
        for name, (p, (done, sim_t, solves), started) in runs.items():
            if name in out:
                continue
            wall = time.perf_counter() - started
            cpu_seen[name] = cpu_s(p.pid) or cpu_seen.get(name, 0.0)
            if not p.is_alive() or wall > bound_s:
                if p.is_alive():
                    p.terminate()
                p.join()
                out[name] = {"wall_s": wall, "cpu_s": cpu_seen[name], "finished": not done.value < 1.0, "jobs_done": done.value,
                             "simulated_days": sim_t.value / 86400, "solves": solves.value}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--days", type=float, default=90)
    ap.add_argument("--gpus", type=int, default=1000)
    ap.add_argument("--accounts", type=int, default=50)
    ap.add_argument("--stale-s", type=float, default=7200)
    ap.add_argument("--stale-changes", type=float, default=1.0)
    ap.add_argument("--round-s", type=float, default=900)
    ap.add_argument("--baseline-bound-s", type=float, default=600)
    ap.add_argument("--no-baseline", action="store_true")
    a = ap.parse_args()
    console = Console(width=220)
    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    site = generate(a.seed, a.jobs, a.days, a.gpus, 4, a.accounts)
    history, inventory, out = d / "history.txt", d / "inventory.toml", d / "result.json"
    history.write_text("\n".join(site.lines) + "\n")
    (d / "truth.json").write_text(json.dumps(site.truth))
    inventory.write_text(inventory_text(site))
    console.print(f"generated {a.jobs} jobs in {time.perf_counter() - t0:.0f} s; load {os.getloadavg()}")
    load0 = os.getloadavg()
    argv = [str(BIN), "simulate", "--sacct-file", str(history), "--inventory", str(inventory), "--policy", "oef",
            "--policy", "agnostic", "--jobs", "2", "--stale-s", f"{a.stale_s:g}", "--stale-changes",
            f"{a.stale_changes:g}", "--round-s", f"{a.round_s:g}",
            "--json", "-o", str(out)]
    wall, peak, code, cpu = measured(argv, d / "simulate.log")
    console.print(f"CPU s by process (parent first): {[round(v) for v in cpu.values()]}")
    load1 = os.getloadavg()
    table = Table(title=f"{a.jobs} jobs, {a.days:g} days, {sum(site.truth['cluster'].values())} GPUs, {a.accounts} "
                        f"accounts; round {a.round_s:g} s")
    for c in ("engine", "policy", "wall s", "CPU s", "peak memory GiB", "solves", "reused", "done", "avg JCT h", "load avg"):
        table.add_column(c, justify="right")
    if code == 0:
        doc = json.loads(out.read_text())
        for name, m in doc["policies"].items():
            table.add_row(f"--stale-s {a.stale_s:g} --stale-changes {a.stale_changes:g} --jobs 2", name,
                          f"{wall:.0f} (both)", f"{sum(cpu.values()):.0f} (all)", f"{peak / 2**30:.2f}",
                          str(m["solves"]), str(m["reused_solutions"]), str(m["jobs_completed"]),
                          f"{m['avg_jct_s'] / 3600:.2f}", f"{load0[0]:.1f} -> {load1[0]:.1f}")
        h = doc["history"]
        table.add_row("history", "Slurm", "", "", "", "", "", str(h["jobs_completed"]), f"{h['avg_jct_s'] / 3600:.2f}", "")
    else:
        table.add_row("--stale-s", "failed", f"{wall:.0f}", "", f"{peak / 2**30:.2f}", "", "", "", "", "")
    if not a.no_baseline:
        load0 = os.getloadavg()
        for name, r in baselines(history, inventory, ["oef", "agnostic"], a.round_s, a.baseline_bound_s).items():
            state = "done" if r["finished"] else f"stopped at {r['jobs_done']:.1%} of jobs, day {r['simulated_days']:.1f}"
            table.add_row("today (--stale-s 0, one process each)", name, f"{r['wall_s']:.0f}", f"{r['cpu_s']:.0f}", "",
                          str(r["solves"]), "",
                          state, "", f"{load0[0]:.1f} -> {os.getloadavg()[0]:.1f}")
    console.print(table)


if __name__ == "__main__":
    main()
