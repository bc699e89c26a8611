"""How much of the oracle's gain survives without tags: ``simulate --knowledge`` over several traces.

For each workload: ``agnostic`` (the baseline) and heterogeneity-aware policies run with the
true speeds (``oracle``), with none tagged (``untagged``: type priors, then what the learner
learns from finished jobs) and with half the jobs tagged (``tagged=0.5``). The gain of a policy
is ``avg JCT(agnostic, same knowledge) / avg JCT(policy)``; the *kept* fraction is
``(gain - 1) / (oracle gain - 1)``; ``kept*`` measures the gain against agnostic with the oracle's
knowledge (the stricter figure: an untagged agnostic also wastes turns on types a job cannot
run on). Prints one markdown table; the latest is in docs/speeds.md.

    .venv/bin/python benchmarks/bench_knowledge.py            # the default set below
    .venv/bin/python benchmarks/bench_knowledge.py --policy oef --workload philly_6vc_240
    .venv/bin/python benchmarks/bench_knowledge.py --policy oef --trace T.csv --synthetic 5 --synthetic 6:gavel \
        --modes oracle,untagged                                        # held-out workloads
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
    ap.add_argument("--trace", action="append", default=[], help="another trace CSV (repeatable)")
    ap.add_argument("--synthetic", action="append", default=[], metavar="SEED[:gavel]",
                    help="a synthetic 240-job workload of this seed (philly mix, or gavel mix)")
    ap.add_argument("--modes", default=",".join(MODES), help="knowledge modes, oracle first")
    a = ap.parse_args()
    pols = a.policy or ["oef", "gavel-mmf"]
    for path in a.trace:
        WORKLOADS[Path(path).stem] = scenario.WorkloadSource(traces=(path,))
    for item in a.synthetic:
        seed, _, mix = item.partition(":")
        WORKLOADS[f"synthetic_240_s{seed}{'_' + mix if mix else ''}"] = scenario.WorkloadSource(
            synthetic=240, tenants=6 if not mix else 4, seed=int(seed), rate_per_hour=6.0,
            max_duration_h=24.0, **({"job_mix": mix} if mix else {}))
    modes = tuple(a.modes.split(","))
    added = [Path(p).stem for p in a.trace] + [n for n in WORKLOADS if n.startswith("synthetic_240_s") and
                                                 any(n.startswith(f"synthetic_240_s{i.partition(':')[0]}")
                                                     for i in a.synthetic)]
    names = a.workload or added or list(WORKLOADS)
    cols = " | ".join(f"gain {m} | kept {m} | kept* {m}" for m in modes[1:])
    print(f"| workload | policy | agnostic h ({' / '.join(modes)}) | policy h ({' / '.join(modes)}) "
          f"| gain oracle | {cols} |")
    print("|---|---|---|---|---|" + "---|---|---|" * (len(modes) - 1))
    kept_all: dict[str, list[float]] = {}
    for name in names:
        w = WORKLOADS[name]
        t0 = time.time()
        base = {m: avg_jct_h(w, "agnostic", m, a.cluster, a.throughputs) for m in modes}
        for pol in pols:
            jct = {m: avg_jct_h(w, pol, m, a.cluster, a.throughputs) for m in modes}
            gain = {m: base[m] / jct[m] for m in modes}
            kept = {m: (gain[m] - 1) / (gain["oracle"] - 1) if gain["oracle"] > 1 else float("nan") for m in modes}
            for m in modes[1:]:
                kept_all.setdefault(f"{pol} {m}", []).append(kept[m])
            # kept*: against agnostic *with the oracle's knowledge* (an agnostic policy that also
            # wastes turns on types a job cannot run on makes the same-knowledge gain look larger)
            strict = {m: (base["oracle"] / jct[m] - 1) / (gain["oracle"] - 1) if gain["oracle"] > 1 else float("nan")
                      for m in modes}
            for m in modes[1:]:
                kept_all.setdefault(f"{pol} {m} (kept*)", []).append(strict[m])
            rest = " | ".join(f"{gain[m]:.2f}x | {kept[m]:.0%} | {strict[m]:.0%}" for m in modes[1:])
            print(f"| {name} | {pol} | {' / '.join(f'{base[m]:.2f}' for m in modes)} | "
                  f"{' / '.join(f'{jct[m]:.2f}' for m in modes)} | {gain['oracle']:.2f}x | {rest} |", flush=True)
        print(f"<!-- {name}: {time.time() - t0:.0f} s -->", flush=True)
    for k, v in kept_all.items():
        print(f"mean kept, {k}: {statistics.mean(v):.0%} over {len(v)} workloads")


if __name__ == "__main__":
    main()
