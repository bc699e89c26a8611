"""How much of the oracle's gain survives without tags: ``simulate --knowledge`` over several traces.

For each workload: ``agnostic`` (the baseline) and heterogeneity-aware policies run with the
true speeds (``oracle``), with none tagged (``untagged``: type priors, then what the learner
learns from finished jobs) and with half the jobs tagged (``tagged=0.5``). The gain of a policy
is ``avg JCT(agnostic, same knowledge) / avg JCT(policy)``; the *kept* fraction is
``(gain - 1) / (oracle gain - 1)``. Prints one markdown table; the latest is in docs/speeds.md.

    .venv/bin/python benchmarks/bench_knowledge.py            # the default set below
    .venv/bin/python benchmarks/bench_knowledge.py --policy oef --workload philly_6vc_240
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from slurm_fair import policies
from slurm_fair.sim import scenario
from slurm_fair.sim.engine import SimConfig, simulate
from slurm_fair.sim.knowledge import parse_knowledge

TRACES = Path(__file__).resolve().parent / "traces"
CLUSTER = "v100=8,p100=8,k80=8"
WORKLOADS = {
    "philly_6vc_240": scenario.WorkloadSource(traces=(str(TRACES / "philly_6vc_240.csv"),)),
    "philly_testbed_45": scenario.WorkloadSource(traces=(str(TRACES / "philly_testbed_45.csv"),)),
    "synthetic_240_s1": scenario.WorkloadSource(synthetic=240, tenants=6, seed=1, rate_per_hour=6.0,
                                                max_duration_h=24.0),
    "synthetic_240_s2_gavel": scenario.WorkloadSource(synthetic=240, tenants=4, seed=2, rate_per_hour=6.0,
                                                      job_mix="gavel", max_duration_h=24.0),
}
MODES = ("oracle", "untagged", "tagged=0.5")


def avg_jct_h(workload: scenario.WorkloadSource, policy: str, knowledge: str, cluster: str = CLUSTER,
              throughputs: str | None = None) -> float:
    scene = scenario.build(workload, scenario.ClusterSource(cluster, 4), throughputs)
    cfg = SimConfig(check_fairness=False, knowledge=parse_knowledge(knowledge), knowledge_seed=workload.seed)
    res = simulate(scene.workload, scene.cluster, scene.table, policies.get(policy), cfg)
    done = [r.end_s - r.arrival_s for r in res.records if r.end_s is not None]
    return statistics.mean(done) / 3600


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", action="append", default=None)
    ap.add_argument("--workload", action="append", default=None)
    ap.add_argument("--cluster", default=CLUSTER)
    ap.add_argument("--throughputs", default=None, help="a Gavel-format table (conf/throughputs-modern.json)")
    a = ap.parse_args()
    pols = a.policy or ["oef", "gavel-mmf"]
    names = a.workload or list(WORKLOADS)
    print("| workload | policy | agnostic h (oracle / untagged / tagged) | policy h (oracle / untagged / tagged) "
          "| gain oracle | gain untagged | kept untagged | gain tagged=0.5 | kept tagged=0.5 |")
    print("|---|---|---|---|---|---|---|---|---|")
    kept_all: dict[str, list[float]] = {}
    for name in names:
        w = WORKLOADS[name]
        t0 = time.time()
        base = {m: avg_jct_h(w, "agnostic", m, a.cluster, a.throughputs) for m in MODES}
        for pol in pols:
            jct = {m: avg_jct_h(w, pol, m, a.cluster, a.throughputs) for m in MODES}
            gain = {m: base[m] / jct[m] for m in MODES}
            kept = {m: (gain[m] - 1) / (gain["oracle"] - 1) if gain["oracle"] > 1 else float("nan") for m in MODES}
            for m in MODES[1:]:
                kept_all.setdefault(f"{pol} {m}", []).append(kept[m])
            print(f"| {name} | {pol} | {' / '.join(f'{base[m]:.1f}' for m in MODES)} | "
                  f"{' / '.join(f'{jct[m]:.1f}' for m in MODES)} | {gain['oracle']:.2f}x | {gain['untagged']:.2f}x | "
                  f"{kept['untagged']:.0%} | {gain['tagged=0.5']:.2f}x | {kept['tagged=0.5']:.0%} |", flush=True)
        print(f"<!-- {name}: {time.time() - t0:.0f} s -->", flush=True)
    for k, v in kept_all.items():
        print(f"mean kept, {k}: {statistics.mean(v):.0%} over {len(v)} workloads")


if __name__ == "__main__":
    main()
