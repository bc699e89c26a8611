"""oef's tenant level on the problems of a site's history: CPU seconds per solve with and without
the solver settings of its small LPs, in one process.

    .venv/bin/python benchmarks/bench_oef_site_solves.py --days 8 --jobs 8888 --horizon-h 48 --repeat 2

1. ``make_site_history.generate`` (1,000 GPUs of 4 types, 50 accounts, the 90-day goal run's
   density of jobs), replayed by the engine under ``oef`` with ``--stale-s 21600`` to
   ``--horizon-h``; every problem the engine hands the policy to solve is kept.
2. ``oef``'s tenant level (:func:`slurm_fair.policies.oef.tenant_level`) on each kept problem,
   under three settings, alternating, ``--repeat`` times: *before* (the HiGHS models with
   HiGHS' default thread count, every re-solve by dual simplex), *one thread* (the small models
   ask HiGHS for one thread: ``solver._SMALL_LP_THREADS``), *one thread + primal* (and the
   CEEI's Eisenberg-Gale LP re-solves by primal simplex: ``SmallLP.simplex``, the default).
   (The envy pools' buffers, :mod:`slurm_fair.policies._envy`, are in all three: the same
   numbers as the copies they replaced.) ``oef.improve_s`` is raised so that no stage is cut by wall time: the CPU seconds then do
   not depend on the machine's load, and the answers can be compared.

Prints one table (rich): CPU seconds of the tenant level summed over the problems (the least of
the repeats), the ratio against *before*, and the largest difference of any job's share from
*before*'s answer with how many answers differ at all. HiGHS' thread count is fixed per process
when its scheduler starts, so *before* runs in a fresh interpreter (the table says so).
"""

from __future__ import annotations

import argparse
import copyreg
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))

from make_site_history import generate, inventory_text  # noqa: E402

from slurm_fair import policies  # noqa: E402
from slurm_fair import solver  # noqa: E402
from slurm_fair.commands.simulate import inventory_cluster  # noqa: E402
from slurm_fair.model import Problem, frozen_map  # noqa: E402
from slurm_fair.policies import PolicyOptions  # noqa: E402
from slurm_fair.policies import oef  # noqa: E402
from slurm_fair.sim.accounting import build_replay  # noqa: E402
from slurm_fair.sim.engine import SimConfig, Simulator  # noqa: E402
from slurm_fair.slurm.parse.history import parse_history  # noqa: E402

SETTINGS = ("before", "one thread", "one thread + primal")

# the problems go to a fresh interpreter (below): their read-only maps travel as copies
copyreg.pickle(MappingProxyType, lambda m: (frozen_map, (dict(m),)))


class Keeping:
    """The policy, keeping every problem it is asked to solve."""

    def __init__(self, policy: Any):
        self.policy = policy
        self.problems: list[Problem] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)

    def allocate(self, problem: Problem, options: PolicyOptions) -> Any:
        self.problems.append(problem)
        return self.policy.allocate(problem, options)


def site_problems(a: argparse.Namespace) -> tuple[list[Problem], float, int]:
    """The problems the engine solved on the slice, its CPU seconds and its reused rounds."""
    site = generate(a.seed, a.jobs, a.days, a.gpus, 4, a.accounts)
    with tempfile.TemporaryDirectory() as tmp:
        history, inventory = Path(tmp) / "history.txt", Path(tmp) / "inventory.toml"
        history.write_text("\n".join(site.lines) + "\n")
        inventory.write_text(inventory_text(site))
        cluster, types = inventory_cluster(str(inventory))
        replay = build_replay(parse_history(history.read_text(), str(history)), str(history), types, cluster)
    t0 = replay.workload.jobs[0].arrival_s
    cfg = SimConfig(solver=solver.fastest_available(), round_s=a.round_s, stale_s=a.stale_s, stale_changes=1.0,
                    horizon_s=t0 + a.horizon_h * 3600, policy_params={"oef.improve_s": a.improve_s})
    keeping = Keeping(policies.get("oef"))
    c0 = time.process_time()
    r = Simulator(replay.workload, replay.cluster, replay.table, keeping, cfg).run()  # type: ignore[arg-type]
    return keeping.problems, time.process_time() - c0, r.reused_solutions


def run_setting(problems: list[Problem], setting: str, improve_s: float) -> tuple[float, list[dict[str, Any]]]:
    """CPU seconds of the tenant level over ``problems`` under ``setting`` and its answers."""
    if setting == "before":
        solver._SMALL_LP_THREADS = 0
    primal = setting.endswith("primal")
    plain = solver.SmallLP._solve_highs

    def solve(lp: solver.SmallLP, infeasible_ok: bool = False) -> None:
        if not primal:
            lp.simplex = None
        plain(lp, infeasible_ok)

    solver.SmallLP._solve_highs = solve  # type: ignore[method-assign]
    try:
        answers = []
        c0 = time.process_time()
        for p in problems:
            opts = PolicyOptions(solver="auto", round_s=900, time_limit_s=600.0, params={"oef.improve_s": improve_s})
            answers.append({j: dict(v) for j, v in oef.tenant_level(p, opts).x.items()})
        return time.process_time() - c0, answers
    finally:
        solver.SmallLP._solve_highs = plain  # type: ignore[method-assign]


def _child(problems: list[Problem], improve_s: float, out: Any) -> None:
    out.send(run_setting(problems, "before", improve_s))


def diff(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> tuple[float, int]:
    """The largest difference of a job's share on a type, and how many answers differ."""
    worst, differ = 0.0, 0
    for xa, xb in zip(a, b):
        d = max((abs(xa.get(j, {}).get(k, 0.0) - xb.get(j, {}).get(k, 0.0))
                 for j in set(xa) | set(xb) for k in set(xa.get(j, {})) | set(xb.get(j, {}))), default=0.0)
        worst, differ = max(worst, d), differ + (d > 0)
    return worst, differ


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=8888)
    ap.add_argument("--days", type=float, default=8)
    ap.add_argument("--gpus", type=int, default=1000)
    ap.add_argument("--accounts", type=int, default=50)
    ap.add_argument("--round-s", type=float, default=900)
    ap.add_argument("--stale-s", type=float, default=21600)
    ap.add_argument("--horizon-h", type=float, default=48)
    ap.add_argument("--improve-s", type=float, default=86400)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON too")
    a = ap.parse_args()
    problems, engine_cpu, reused = site_problems(a)
    load0 = os.getloadavg()[0]
    ctx = multiprocessing.get_context("spawn")
    cpu: dict[str, list[float]] = {s: [] for s in SETTINGS}
    answers: dict[str, list[dict[str, Any]]] = {}
    for _ in range(a.repeat):
        for s in SETTINGS:
            if s == "before":  # HiGHS' scheduler keeps the thread count it started with: a fresh interpreter
                recv, send = ctx.Pipe(duplex=False)
                child = ctx.Process(target=_child, args=(problems, a.improve_s, send))
                child.start()
                c, ans = recv.recv()
                child.join()
            else:
                c, ans = run_setting(problems, s, a.improve_s)
            cpu[s].append(c)
            answers[s] = ans
    table = Table(title=f"oef's tenant level on the {len(problems)} problems the engine solved "
                        f"({a.jobs} jobs over {a.days:g} days, {a.accounts} accounts, {a.gpus} GPUs, first "
                        f"{a.horizon_h:g} h, --stale-s {a.stale_s:g}; engine {engine_cpu:.1f} CPU s, {reused} reused "
                        f"rounds); load {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    for c in ("setting", "CPU s (least of runs)", "runs", "per solve s", "ratio to before",
              "max |share - before's|", "answers differing"):
        table.add_column(c, justify="right")
    base = min(cpu["before"])
    rows = []
    for s in SETTINGS:
        best = min(cpu[s])
        worst, differ = diff(answers[s], answers["before"])
        rows.append({"setting": s, "cpu_s": best, "runs": cpu[s], "per_solve_s": best / max(1, len(problems)),
                     "ratio": best / base, "max_share_diff": worst, "answers_differing": differ})
        table.add_row(s + (" (fresh interpreter)" if s == "before" else ""), f"{best:.2f}",
                      " ".join(f"{c:.2f}" for c in cpu[s]), f"{best / max(1, len(problems)):.3f}",
                      f"{best / base:.2f}", f"{worst:.1e}", f"{differ} / {len(problems)}")
    Console(width=200).print(table)
    if a.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
