"""How far a replay of a site's history can be trusted: generated histories with known truth.

For each seed, ``make_site_history.generate`` writes a history made by a heterogeneity-agnostic
Slurm (FIFO, backfill with reservations by time limits, nodes in name order) with true per-group speeds it keeps. Then:

1. the history is replayed as ``simulate --sacct-file`` does (:func:`build_replay`: speeds learned
   from its completed runs, else the site's priors; on the types a group never completed on, a
   deviation of the site's between-group spread drawn per group and type, ``--posterior-mean``:
   none) and ``agnostic`` is simulated on it (as
   ``simulate`` runs it: the modelled site's Slurm, :mod:`slurm_fair.sim.slurmlike`): its average
   JCT and wait, overall and per tenant, against the history's own (the error an admin sees
   in the table's "history (Slurm)" column);
2. ``oef`` is simulated on the same replay (``--stale-s`` applies to oef only: agnostic is solved
   at every change, its answer with staleness is not agnostic's): its gain over agnostic (``1 - JCT_oef / JCT_agn``)
   with the learned speeds, against the gain on the same jobs with the **true** speeds and true
   work (the truth the generator kept), which is what a policy that knew them would show.

    .venv/bin/python benchmarks/bench_replay_truth.py --seeds 11 12 13 --jobs 4000 --days 6 --gpus 128

Prints one table (rich). Both policies see their workload's speeds (oracle knowledge of *that*
table): with the learned table, the learned speeds are the policy's knowledge.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))

from make_site_history import generate  # noqa: E402

from slurm_fair import policies  # noqa: E402
from slurm_fair.estimates.gavel import ThroughputTable  # noqa: E402
from slurm_fair.sim.accounting import Replay, build_replay, job_runs  # noqa: E402
from slurm_fair.sim.engine import SimConfig, simulate  # noqa: E402
from slurm_fair.sim.metrics import summarize  # noqa: E402
from slurm_fair.sim.slurmlike import SlurmModel, simulate_slurm  # noqa: E402
from slurm_fair.slurm.parse.history import parse_history  # noqa: E402
from slurm_fair.solver import fastest_available  # noqa: E402


def true_replay(replay: Replay, truth: dict, history: Any) -> Replay:
    """The same jobs with the generator's true speeds, and true work: each run of a job (a
    requeued job's earlier runs too) the time it ran times the true speed of its slowest node's
    type, as the generator ran it (a gang over nodes of several types goes at its slowest)."""
    data: dict[str, dict[tuple[str, int], float]] = {k: {} for k in replay.cluster.capacity}
    rows = {r.job_id: r for r in [*history.rows, *history.failed, *history.ended]}
    kind = truth["nodes"]
    jobs = []
    for j in replay.workload.jobs:
        meta = replay.jobs[j.id]
        true = truth["groups"][f"{meta.user}|{meta.job_name}|{j.gpus}"]
        for k in data:
            data[k][(j.job_type, j.gpus)] = true[k]
        row = rows[meta.slurm_id]
        runs = [*((nodes, e) for _, nodes, e in row.earlier), (row.nodes, row.elapsed_s)]
        work = sum(e * min(true[kind[n]] for n in nodes) for nodes, e in runs)
        jobs.append(dataclasses.replace(j, total_steps=work))
    return dataclasses.replace(replay, workload=dataclasses.replace(replay.workload, jobs=tuple(jobs)),
                               table=ThroughputTable(data, source="true speeds"))


def spanning(history: Any, node_types: dict[str, str]) -> set[str]:
    """The Slurm ids of jobs with a run that spanned nodes of several types (it ran at the
    slowest), a requeued job's earlier runs included."""
    out = set()
    for r in [*history.rows, *history.failed, *history.ended]:
        runs = job_runs(r, node_types)
        if runs and any(len(shares) > 1 for shares, _ in runs):
            out.add(r.job_id)
    return out


def seen_replay(replay: Replay, truth: dict) -> Replay:
    """The most a learner can get from the history: each group's true speeds on the types it
    completed a run on, its learned ratios (anchored there) on the types it never did, and the
    work those speeds give the time each job ran."""
    records = {r.job_id: r for r in replay.history}
    done: dict[tuple[str, int], set[str]] = {}
    for j in replay.workload.jobs:
        if replay.jobs[j.id].state == "COMPLETED":
            done.setdefault((j.job_type, j.gpus), set()).update(records[j.id].gpu_seconds)
    data: dict[str, dict[tuple[str, int], float]] = {k: {} for k in replay.cluster.capacity}
    jobs = []
    for j in replay.workload.jobs:
        meta = replay.jobs[j.id]
        true = truth["groups"][f"{meta.user}|{meta.job_name}|{j.gpus}"]
        learned = {k: replay.table.data[k][(j.job_type, j.gpus)] for k in data}
        seen = [k for k in done.get((j.job_type, j.gpus), ()) if learned[k] > 0]
        scale = math.exp(sum(math.log(true[k] / learned[k]) for k in seen) / len(seen)) if seen else 1.0
        speed = {k: true[k] if k in seen else learned[k] * scale for k in data}
        for k in data:
            data[k][(j.job_type, j.gpus)] = speed[k]
        seconds = records[j.id].gpu_seconds
        pace = {k: speed[k] if speed[k] > 0 else true[k] for k in data}
        jobs.append(dataclasses.replace(j, total_steps=sum(s / j.gpus * pace[k] for k, s in seconds.items())))
    return dataclasses.replace(replay, workload=dataclasses.replace(replay.workload, jobs=tuple(jobs)),
                               table=ThroughputTable(data, source="true speeds where each group ran, learned elsewhere"))


def run(replay: Replay, policy: str, config: SimConfig, slurm: SlurmModel | None = None) -> dict:
    """``simulate``'s run of one policy: ``agnostic`` is the modelled Slurm when ``slurm`` is
    given (``--agnostic-as slurm``, the command's default)."""
    if policy == "agnostic" and slurm is not None:
        res = simulate_slurm(replay.workload, replay.nodes, replay.table, replay.limits, replay.cluster.capacity, slurm,
                             replay.prior_rel, config.round_s)
    else:
        res = simulate(replay.workload, replay.cluster, replay.table, policies.get(policy), config)
    return summarize(res.records, [], dict(replay.cluster.capacity))


def tenant_error(sim: dict, hist: dict, key: str) -> float:
    """The largest relative error of a tenant's mean ``key`` (tenants with 20+ finished jobs)."""
    errs = []
    for t, h in hist["tenants"].items():
        s = sim["tenants"].get(t, {})
        if h.get(key) and s.get(key) is not None and h["jobs_completed"] >= 20:
            errs.append(abs(s[key] / h[key] - 1))
    return max(errs) if errs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[11, 12, 13])
    ap.add_argument("--jobs", type=int, default=4000)
    ap.add_argument("--days", type=float, default=6)
    ap.add_argument("--gpus", type=int, default=128)
    ap.add_argument("--accounts", type=int, default=8)
    ap.add_argument("--load", type=float, default=0.8)
    ap.add_argument("--stale-s", type=float, default=0.0)
    ap.add_argument("--round-s", type=float, default=360.0)
    ap.add_argument("--slurm-bf-interval", type=float, default=30.0, help="the modelled Slurm's bf_interval (s)")
    ap.add_argument("--requeue-hold-s", type=float, default=0.0, help="Slurm's hold (121 s by default)")
    ap.add_argument("--fill-between-rounds", action="store_true")
    ap.add_argument("--skip-truth", action="store_true", help="Only the agnostic replay against the history.")
    ap.add_argument("--agnostic-as", choices=("slurm", "policy"), default="slurm",
                    help="agnostic as the modelled Slurm (simulate's default) or slurm-fair's agnostic policy")
    ap.add_argument("--per-node", type=int, default=8, help="GPUs per node of the generated site")
    ap.add_argument("--seen-truth", action="store_true",
                    help="Also oef's gain with the true speeds on the types each group completed on (learned elsewhere): "
                         "the most the history can tell")
    ap.add_argument("--draws", type=int, default=1,
                    help="Replays with the unseen speeds drawn with seeds 0..K-1 (simulate --seed): the learned gain "
                         "is their mean (min-max shown)")
    ap.add_argument("--bf-jitter", action="store_true",
                    help="Each agnostic arm also with bf_interval 28, 29, 31 and 32 s (the history does not say the "
                         "phase of Slurm's backfill timer): the gains use the mean of the five, the spread is shown")
    ap.add_argument("--posterior-mean", action="store_true",
                    help="Replay with the learner's posterior mean on the types a group never completed on "
                         "(no drawn deviation; the replay before issue 42's fidelity work)")
    a = ap.parse_args()
    slurm = SlurmModel() if a.agnostic_as == "slurm" else None
    config = SimConfig(solver=fastest_available(), check_fairness=False, stale_s=a.stale_s, round_s=a.round_s,
                       requeue_hold_s=a.requeue_hold_s, fill_between_rounds=a.fill_between_rounds)
    console = Console(width=220)
    table = Table(title=f"replay against the truth ({a.jobs} jobs, {a.days:g} days, {a.gpus} GPUs in {a.per_node}-GPU "
                        f"nodes, {a.accounts} accounts, load {a.load:g}, agnostic as {a.agnostic_as}; "
                        f"stale_s {a.stale_s:g}, round {a.round_s:g} s, hold {a.requeue_hold_s:g} s"
                        f"{', filling' if a.fill_between_rounds else ''}"
                        f"{'; posterior mean where a group never ran' if a.posterior_mean else ''})")
    for c in ("seed", "hist JCT h", "agn JCT h", "JCT err", "hist wait h", "agn wait h", "worst tenant JCT err",
              "agn JCT h (true)", "oef JCT h learned / true", "oef gain (learned)", "oef gain (true)", "gain ratio",
              "oef gain (true where ran)", "ratio", "wall s"):
        table.add_column(c, justify="right")
    bfs = (30.0, 28.0, 29.0, 31.0, 32.0) if a.bf_jitter else (a.slurm_bf_interval,)

    def agnostic(rep: Replay) -> list[dict]:
        return [run(rep, "agnostic", exact, dataclasses.replace(slurm, bf_interval_s=bf) if slurm else None)
                for bf in bfs]

    def mean_jct(runs: list[dict]) -> float:
        return sum(r["avg_jct_s"] for r in runs) / len(runs)

    def spread(runs: list[dict]) -> str:
        vals = [r["avg_jct_s"] / 3600 for r in runs]
        return f" ({min(vals):.2f}-{max(vals):.2f})" if len(vals) > 1 else ""

    exact = dataclasses.replace(config, stale_s=0.0)  # staleness changes agnostic's answer (docs/simulator.md)
    for seed in a.seeds:
        t0 = time.perf_counter()
        site = generate(seed, a.jobs, a.days, a.gpus, 4, a.accounts, a.load, a.per_node)
        history = parse_history("\n".join(site.lines) + "\n", f"seed {seed}")
        replays = [build_replay(history, f"seed {seed}", vary_unseen=not a.posterior_mean, draw_seed=d)
                   for d in range(a.draws)]
        replay = replays[0]
        hist = summarize(list(replay.history), [], dict(replay.cluster.capacity))
        agns = [agnostic(r) for r in replays]
        agn = agns[0][0]
        gain = gain_t = gain_s = float("nan")
        gains: list[float] = []
        agn_t: list[dict] = [{"avg_jct_s": float("nan")}]
        oef = oef_t = {"avg_jct_s": float("nan")}
        if not a.skip_truth:
            oefs = [run(r, "oef", config) for r in replays]
            oef = oefs[0]
            gains = [1 - o["avg_jct_s"] / mean_jct(g) for o, g in zip(oefs, agns)]
            gain = sum(gains) / len(gains)
            truth = true_replay(replay, site.truth, history)
            agn_t, oef_t = agnostic(truth), run(truth, "oef", config)
            gain_t = 1 - oef_t["avg_jct_s"] / mean_jct(agn_t)
            if a.seen_truth:
                seen = seen_replay(replay, site.truth)
                gain_s = 1 - run(seen, "oef", config)["avg_jct_s"] / mean_jct(agnostic(seen))
        drawn = f" ({min(gains):.1%}-{max(gains):.1%})" if len(gains) > 1 else ""
        row = [str(seed), f"{hist['avg_jct_s'] / 3600:.2f}", f"{agn['avg_jct_s'] / 3600:.2f}{spread(agns[0])}",
               f"{agn['avg_jct_s'] / hist['avg_jct_s'] - 1:+.1%}", f"{hist['avg_wait_s'] / 3600:.2f}",
               f"{agn['avg_wait_s'] / 3600:.2f}", f"{tenant_error(agn, hist, 'avg_jct_s'):.1%}",
               f"{agn_t[0]['avg_jct_s'] / 3600:.2f}{spread(agn_t)}",
               f"{oef['avg_jct_s'] / 3600:.2f} / {oef_t['avg_jct_s'] / 3600:.2f}",
               f"{gain:.1%}{drawn}", f"{gain_t:.1%}", f"{gain / gain_t:.2f}" if gain_t else "-",
               f"{gain_s:.1%}", f"{gain_s / gain_t:.2f}" if gain_t else "-", f"{time.perf_counter() - t0:.0f}"]
        table.add_row(*row)
        console.print(f"seed {seed} done: " + " | ".join(row), style="dim")
    console.print(table)


if __name__ == "__main__":
    main()
