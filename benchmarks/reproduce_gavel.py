"""Gavel's heterogeneity-aware vs heterogeneity-agnostic comparison (OSDI 2020, Figs. 9-10:
average JCT over input job rate, "up to 3.5x"), on our simulator.

    PYTHONPATH=. python benchmarks/reproduce_gavel.py --plot docs/results_gavel_sweep.png
    PYTHONPATH=. python benchmarks/reproduce_gavel.py --quick       # a few points, about a minute

The paper: Gavel's simulated cluster of 36 V100 + 36 P100 + 36 K80, continuous traces of jobs
from its generator (single-GPU jobs in Fig. 9, multi-GPU in Fig. 10), average JCT of a
steady-state window of jobs, LAS (max-min fairness) with and without heterogeneity awareness.
Ours: the same cluster (``--cluster 36:36:36``, no node structure, as Gavel's simulator),
``--job-mix gavel-single`` and ``--job-mix gavel`` (Gavel's generator, uncapped), one tenant,
``gavel-mmf`` (heterogeneity-aware max-min) vs ``agnostic`` (the same max-min seeing every GPU
as equal), the average JCT of *all* N jobs (not a steady-state window: N is small enough to run
in minutes). The ratio agnostic / gavel-mmf is the claim's figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).parent))

from reproduce_common import available, command_line, engine, machine, mean, ratio, run, scenario  # noqa: E402
from slurm_fair.sim.scenario import ClusterSource, WorkloadSource  # noqa: E402

POLICIES = ("gavel-mmf", "agnostic")
#: jobs per hour, up to where 108 GPUs are offered about their capacity (a job of this mix is
#: 17 h alone on a v100 on average: 6 single-GPU jobs/h is ~100 v100-hours per hour)
RATES = {"gavel-single": (2.0, 4.0, 6.0, 8.0), "gavel": (1.0, 2.0, 3.0, 4.0)}
QUICK_RATES = {"gavel-single": (2.0, 6.0), "gavel": (1.0, 3.0)}
CLUSTER = "36:36:36"
PAPER_CLAIM = 3.5


def point(mix: str, rate: float, jobs: int, seeds: Sequence[int], names: Sequence[str], log: Any = None) -> dict:
    """Mean avg JCT (h) and makespan (h) per policy over ``seeds`` at one rate."""
    runs = []
    for seed in seeds:
        if log:
            log(f"{mix} {rate:g}/h seed {seed}:")
        src = WorkloadSource(synthetic=jobs, tenants=1, seed=seed, rate_per_hour=rate, job_mix=mix)
        runs.append(run(scenario(src, ClusterSource(spec=CLUSTER)), names, engine(), log))
    return {n: {"avg_jct_h": mean(r[n]["avg_jct_s"] / 3600 for r in runs if r[n]["avg_jct_s"] is not None),
                "makespan_h": mean(r[n]["makespan_s"] / 3600 for r in runs if r[n]["makespan_s"] is not None)}
            for n in runs[0]}


def compare(rates: dict[str, Sequence[float]], jobs: int, seeds: Sequence[int], names: Sequence[str],
            plot: str | None, log: Any = None) -> tuple[str, dict]:
    """The table (one row per mix and rate) and, with ``plot``, avg JCT over rate per mix."""
    data = {mix: {r: point(mix, r, jobs, seeds, names, log) for r in rs} for mix, rs in rates.items()}
    cols = [f"{n} avg JCT h" for n in names]
    lines = ["| job mix | jobs/h | " + " | ".join(cols) + " | agnostic / gavel-mmf | paper |",
             "|" + "---|" * (len(cols) + 4)]
    for mix, by_rate in data.items():
        for r, res in by_rate.items():
            cells = [f"{res[n]['avg_jct_h']:.2f}" if res[n]["avg_jct_h"] is not None else "-" for n in names]
            gain = ratio(res.get("agnostic", {}).get("avg_jct_h"), res.get("gavel-mmf", {}).get("avg_jct_h"))
            lines.append(f"| {mix} | {r:g} | " + " | ".join(cells) + f" | {gain} | up to {PAPER_CLAIM}x |")
    if plot:
        series = {f"avg JCT h ({mix})": {n: [data[mix][r][n]["avg_jct_h"] for r in rs] for n in names}
                  for mix, rs in rates.items()}
        _plot(plot, rates, series, jobs, len(seeds))
    return "\n".join(lines), data


def _plot(path: str, rates: dict[str, Sequence[float]], series: dict, jobs: int, seeds: int) -> None:
    """One panel per mix (their rates differ, so not one ``plot_sweep`` panel)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(rates), figsize=(5.5 * len(rates), 4), squeeze=False)
    for ax, (_mix, rs), (label, by_policy) in zip(axes[0], rates.items(), series.items()):
        for name, values in by_policy.items():
            pts = [(x, v) for x, v in zip(rs, values) if v is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=name)
        ax.set_xlabel("input job rate (jobs/h)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Gavel Figs. 9-10 on our data: {jobs} jobs, 36:36:36, {seeds} seed(s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=None, help="jobs per point (default 400, --quick 60)")
    parser.add_argument("--seeds", type=int, default=None, help="seeds 1..N (default 2, --quick 1)")
    parser.add_argument("--quick", action="store_true", help="two rates per mix, fewer jobs, one seed")
    parser.add_argument("--plot", default=None, help="PNG of avg JCT over rate")
    parser.add_argument("--json", default=None, help="write the averaged figures to this file")
    args = parser.parse_args(argv)
    names = available(POLICIES)
    jobs = args.jobs or (60 if args.quick else 400)
    seeds = list(range(1, 1 + (args.seeds or (1 if args.quick else 2))))
    started = time.perf_counter()
    print(f"command: {command_line()}")
    print(f"machine: {machine()}")
    print(f"one point as simulate: slurm-fair simulate --synthetic {jobs} --tenants 1 --seed 1 --rate 2 "
          f"--job-mix gavel-single --cluster {CLUSTER} --no-fairness-checks --policy gavel-mmf --policy agnostic")
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    text, data = compare(QUICK_RATES if args.quick else RATES, jobs, seeds, names, args.plot, log)
    print(f"{jobs} jobs per point, seeds {seeds}\n")
    print(text)
    print(f"\ntotal wall time: {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1))
    return {"text": text, "data": data}


if __name__ == "__main__":
    main()
