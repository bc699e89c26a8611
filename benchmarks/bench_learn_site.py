"""How close the speeds a replay learns from a site's history are to the truth the generator kept.

For each seed and truth (``make_site_history.generate``: every group ``generic`` by default, or
groups drawn from a mix of families, or a type slower at this site than its prior), the history
is read as ``simulate --sacct-file`` reads it (:func:`slurm_fair.sim.accounting.build_replay`)
and each simulated job's learned speed on every other type, relative to the type it ran on, is
compared with the true ratio: the root mean square of ``log(learned / true)``, split by whether
the job's group completed a run on that type (the history holds evidence) or not (the prior and
what the site's other groups say). Also the mean ``|log ratio|`` learned and true, and the
*between-group* spread: the standard deviation over jobs of a type pair's log ratio around that
pair's mean, learned (the learner's posterior mean), as the replay draws it on the types a group
never ran on (:func:`slurm_fair.sim.accounting.varied`) and true. That spread is the
comparative advantage oef places groups by; the posterior mean has none where a group never ran.

No simulation: seconds per history. Run it against another checkout of the package with
``PYTHONPATH=<its root>`` for a before / after.

    .venv/bin/python benchmarks/bench_learn_site.py --seeds 11 81 82 91 92
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))

from make_site_history import generate  # noqa: E402

from slurm_fair.sim.accounting import build_replay  # noqa: E402
from slurm_fair.slurm.parse.history import parse_history  # noqa: E402

#: truths: the generator's default, a site of mixed families, a site whose L40S run at 0.6x
TRUTHS: dict[str, dict] = {
    "generic": {},
    "mixed families": {"families": {"transformer": 0.5, "cnn": 0.3, "inference": 0.2}},
    "l40s at 0.6x": {"type_factor": {"l40s": 0.6}},
}


def errors(seed: int, a: argparse.Namespace, truth_kw: dict) -> dict[str, float]:
    """The learned-vs-true log-ratio errors of one history (see the module docstring)."""
    site = generate(seed, a.jobs, a.days, a.gpus, 4, a.accounts, a.load, a.per_node, **truth_kw)
    history = parse_history("\n".join(site.lines) + "\n", f"seed {seed}")
    replay = build_replay(history, f"seed {seed}", vary_unseen=False)  # the learner's own answer
    drawn = build_replay(history, f"seed {seed}").table  # the replay's, deviations drawn where never ran
    types = sorted(replay.cluster.capacity)
    records = {r.job_id: r for r in replay.history}
    done: dict[tuple[str, str, int], set[str]] = defaultdict(set)
    for j in replay.workload.jobs:
        meta = replay.jobs[j.id]
        if meta.state == "COMPLETED":
            done[(meta.user, meta.job_name, j.gpus)] |= set(records[j.id].gpu_seconds)
    seen: list[float] = []
    unseen: list[float] = []
    het_learned: list[float] = []
    het_true: list[float] = []
    #: per (type ran on, other type, seen?): log ratios learned, drawn, true, to measure the spread
    #: between groups (the comparative advantage oef places by) apart from the types' mean ratio
    pairs: dict[tuple[str, str, bool], list[tuple[float, float, float]]] = defaultdict(list)
    for j in replay.workload.jobs:
        meta = replay.jobs[j.id]
        group = (meta.user, meta.job_name, j.gpus)
        true = site.truth["groups"][f"{meta.user}|{meta.job_name}|{j.gpus}"]
        learned = {k: replay.table.data[k][(j.job_type, j.gpus)] for k in types}
        ran = [k for k in types if records[j.id].gpu_seconds.get(k)]
        if len(ran) != 1 or learned[ran[0]] <= 0:
            continue
        own = ran[0]
        for k in types:
            if k == own or learned[k] <= 0:  # a type marked failing is never placed: no ratio
                continue
            e = math.log(learned[k] / learned[own]) - math.log(true[k] / true[own])
            (seen if k in done[group] else unseen).append(e)
            dr = {t: drawn.data[t][(j.job_type, j.gpus)] for t in (k, own)}
            pairs[(own, k, k in done[group])].append((math.log(learned[k] / learned[own]),
                                                      math.log(dr[k] / dr[own]), math.log(true[k] / true[own])))
            het_learned.append(abs(math.log(learned[k] / learned[own])))
            het_true.append(abs(math.log(true[k] / true[own])))

    def rms(v: list[float]) -> float:
        return math.sqrt(sum(x * x for x in v) / len(v)) if v else float("nan")

    def between(i: int, was_seen: bool) -> float:
        """The pooled standard deviation over jobs of a pair's log ratio around the pair's mean."""
        dev = [x[i] - sum(y[i] for y in v) / len(v) for key, v in pairs.items() if key[2] == was_seen for x in v]
        return rms(dev)

    return {"sd_mean": between(0, False), "sd_drawn": between(1, False), "sd_true": between(2, False),
            "sd_seen": between(0, True), "sd_seen_true": between(2, True),
            "seen": rms(seen), "n_seen": len(seen), "unseen": rms(unseen), "n_unseen": len(unseen),
            "all": rms(seen + unseen), "het_learned": sum(het_learned) / len(het_learned),
            "het_true": sum(het_true) / len(het_true)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[11, 81, 82])
    ap.add_argument("--jobs", type=int, default=1500)
    ap.add_argument("--days", type=float, default=3)
    ap.add_argument("--gpus", type=int, default=64)
    ap.add_argument("--accounts", type=int, default=6)
    ap.add_argument("--load", type=float, default=0.8)
    ap.add_argument("--per-node", type=int, default=8)
    ap.add_argument("--truths", nargs="+", default=list(TRUTHS), choices=list(TRUTHS))
    a = ap.parse_args()
    table = Table(title=f"learned speeds against the truth ({a.jobs} jobs, {a.days:g} days, {a.gpus} GPUs in "
                        f"{a.per_node}-GPU nodes, {a.accounts} accounts, load {a.load:g}); rms of log(learned / true) "
                        "of each job's other types against the type it ran on")
    for c in ("truth", "seed", "rms, types its group ran on", "pairs", "rms, types it never ran on", "pairs",
              "rms, all", "mean |log ratio| learned", "true", "between-group sd, never ran: learned",
              "drawn", "true", "between-group sd, ran: learned", "true"):
        table.add_column(c, justify="right")
    for name in a.truths:
        for seed in a.seeds:
            e = errors(seed, a, TRUTHS[name])
            table.add_row(name, str(seed), f"{e['seen']:.3f}", str(e["n_seen"]), f"{e['unseen']:.3f}",
                          str(e["n_unseen"]), f"{e['all']:.3f}", f"{e['het_learned']:.3f}", f"{e['het_true']:.3f}",
                          *(f"{e[c]:.3f}" for c in ("sd_mean", "sd_drawn", "sd_true", "sd_seen", "sd_seen_true")))
    Console(width=220).print(table)


if __name__ == "__main__":
    main()
