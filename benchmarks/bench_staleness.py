"""What bounded staleness costs in fidelity: a slice of a generated site history under one policy,
the exact engine (``--stale-s 0``) beside stale runs, with and without the re-split.

    .venv/bin/python benchmarks/bench_staleness.py --days 8 --jobs 8888 --horizon-h 48 --arrivals-h 24 \\
        --runs 0:0 7200:0 7200:1 21600:1 21600:0

Each ``S:R`` is a run with ``--stale-s S`` (``--stale-changes 1``) and the re-split of two-level
answers on (``R`` = 1) or off (0; new jobs take leftover GPUs between solves). The history is
``make_site_history.generate`` (1,000 GPUs of 4 types on 8-GPU nodes, 50 accounts, the same
density of jobs per day as the 90-day goal run); the runs stop at ``--horizon-h`` and are judged
on the jobs that arrived in the first ``--arrivals-h`` hours: their mean JCT (a job not finished
at the horizon counts until the horizon, the same for every run), mean wait, how many finished,
and the SI/EF verdicts of the solved rounds. CPU seconds are the process's (the machine is
shared: wall seconds and the load average are printed too). Prints one table (rich).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))

from make_site_history import generate, inventory_text  # noqa: E402

from slurm_fair import policies  # noqa: E402
from slurm_fair.commands.simulate import inventory_cluster  # noqa: E402
from slurm_fair.sim.accounting import build_replay  # noqa: E402
from slurm_fair.sim.engine import SimConfig, Simulator  # noqa: E402
from slurm_fair.slurm.parse.history import parse_history  # noqa: E402
from slurm_fair.solver import fastest_available  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=8888)
    ap.add_argument("--days", type=float, default=8)
    ap.add_argument("--gpus", type=int, default=1000)
    ap.add_argument("--accounts", type=int, default=50)
    ap.add_argument("--policy", default="oef")
    ap.add_argument("--round-s", type=float, default=900)
    ap.add_argument("--horizon-h", type=float, default=48)
    ap.add_argument("--arrivals-h", type=float, default=24)
    ap.add_argument("--runs", nargs="+", default=["0:0", "7200:0", "7200:1"])
    a = ap.parse_args()
    site = generate(a.seed, a.jobs, a.days, a.gpus, 4, a.accounts)
    with tempfile.TemporaryDirectory() as tmp:
        history, inventory = Path(tmp) / "history.txt", Path(tmp) / "inventory.toml"
        history.write_text("\n".join(site.lines) + "\n")
        inventory.write_text(inventory_text(site))
        cluster, types = inventory_cluster(str(inventory))
        replay = build_replay(parse_history(history.read_text(), str(history)), str(history), types, cluster)
    t0 = replay.workload.jobs[0].arrival_s
    end = t0 + a.horizon_h * 3600
    table = Table(title=f"{a.policy}: {a.jobs} jobs over {a.days:g} days, {a.accounts} accounts, {a.gpus} GPUs; "
                        f"jobs arrived in the first {a.arrivals_h:g} h, run to {a.horizon_h:g} h")
    for c in ("--stale-s", "re-split", "solves", "reused rounds", "CPU s", "wall s", "jobs", "finished",
              "mean JCT h", "mean wait h", "SI ok / checked", "EF ok / checked", "load avg"):
        table.add_column(c, justify="right")
    for spec in a.runs:
        stale, rs = spec.split(":")
        cfg = SimConfig(solver=fastest_available(), round_s=a.round_s, stale_s=float(stale), stale_changes=1.0,
                        stale_resplit=rs == "1", horizon_s=end)
        load0 = os.getloadavg()[0]
        c0, w0 = time.process_time(), time.perf_counter()
        r = Simulator(replay.workload, replay.cluster, replay.table, policies.get(a.policy), cfg).run()
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        sel = [x for x in r.records if x.arrival_s < t0 + a.arrivals_h * 3600]
        jct = [((x.end_s if x.end_s is not None else end) - x.arrival_s) / 3600 for x in sel]
        wait = [((x.start_s if x.start_s is not None else end) - x.arrival_s) / 3600 for x in sel]
        checked = [s for s in r.samples if s.si_ok is not None]
        table.add_row(f"{float(stale):g}", "yes" if rs == "1" else "no", str(r.solves), str(r.reused_solutions),
                      f"{cpu:.0f}", f"{wall:.0f}", str(len(sel)), str(sum(x.end_s is not None for x in sel)),
                      f"{sum(jct) / len(jct):.3f}", f"{sum(wait) / len(wait):.3f}",
                      f"{sum(bool(s.si_ok) for s in checked)} / {len(checked)}",
                      f"{sum(bool(s.ef_ok) for s in checked)} / {len(checked)}",
                      f"{load0:.1f} -> {os.getloadavg()[0]:.1f}")
    Console(width=220).print(table)


if __name__ == "__main__":
    main()
