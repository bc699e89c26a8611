"""The benchmark that decides issue 11: slurm-fair against a well-tuned Slurm on the real testbed.

Both arms run on one testbed, with the same submissions (``slurm-fair testbed replay``):

* ``none``: Slurm alone, configured as a competent admin would (the testbed's slurm.conf): typed
  GPUs, multifactor priority with fair-share dominant (physics 2, biology 1, chemistry 1), node
  ``Weight`` fastest-first, ``TRESBillingWeights`` by measured speed, the same backfill settings;
  fair-share usage is reset before each run and no plan is left for the submit plugin;
* the policy (default ``oef``): the full deployment, i.e. the controller, its job_submit.lua
  (installed by the testbed, reading the controller's plan file) and the same slurm.conf.

Runs alternate (none, policy, none, policy, ...) ``--repeat`` times. For every run it keeps the
replay JSON and ``slurm-fair report --format json`` over the run's window (SI ratios, envy). Then,
optionally, one run of a sparse workload (``--sparse TRACE``: one job at a time) with the
controller, and the simulator's prediction for the main trace with the testbed's node layout
and Slurm's costs (start latency, requeue hold, work-conserving starts between rounds). It
prints one markdown table (mean and range per arm, the criteria) and writes everything to
``--out``::

    .venv/bin/python benchmarks/bench_testbed.py --trace benchmarks/traces/philly_testbed_42.csv \\
        --time-scale 30 --repeat 3 --sparse benchmarks/traces/sparse_testbed_12.csv --out out/bench

``--skip-real`` re-scores the JSON files already in ``--out``. Trace time: one real second is
``S`` trace seconds; figures are in trace hours unless marked real.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
SF = [sys.executable, "-m", "slurm_fair.cli"]
#: real seconds between a GPU becoming free or a job arriving and Slurm starting the job on the
#: testbed (sched_interval=2 with defer_batch: 0-2 s, plus the launch); measured in docs/results.md
START_LATENCY_REAL_S = 1.5

ROWS: tuple[tuple[str, str, float, str], ...] = (
    ("avg_jct_s", "avg JCT h", 1 / 3600, ".2f"),
    ("p50_jct_s", "p50 JCT h", 1 / 3600, ".2f"),
    ("p99_jct_s", "p99 JCT h", 1 / 3600, ".2f"),
    ("makespan_s", "makespan h", 1 / 3600, ".2f"),
    ("ftf_rho_mean", "FTF rho mean", 1, ".2f"),
    ("ftf_rho_max", "FTF rho max (worst)", 1, ".2f"),
    ("effective_throughput", "effective throughput", 1, ".2f"),
    # the replay's own (testbed replay --json, the report's definitions over the run's window)
    ("si_ratio_min", "lowest tenant SI ratio (replay)", 1, ".2f"),
    ("envy_max", "largest envy, any pair (replay; > 1 = envy)", 1, ".2f"),
    ("utilization", "utilisation %", 100, ".0f"),
    ("jobs_completed", "jobs done", 1, ".0f"),
    ("requeued_jobs", "requeued jobs", 1, ".0f"),
    ("wall_seconds", "real s", 1, ".0f"),
)


def run(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess:
    print("+", " ".join(argv[2:] if list(argv[:2]) == SF[:2] else argv), file=sys.stderr, flush=True)
    return subprocess.run(list(argv), cwd=ROOT, timeout=timeout, check=False)


def replay(trace: str, scale: float, policy: str, out: Path, name: str, tb: list[str],
           untagged: bool = False) -> dict[str, Any]:
    """One ``testbed replay`` run; its JSON (also when not every job completed)."""
    path, run_dir = out / f"{name}.json", out / name
    if run_dir.exists():
        subprocess.run(["rm", "-rf", str(run_dir)], check=True, timeout=120)
    proc = run(SF + ["testbed", "replay", "--trace", trace, "--time-scale", str(scale), "--policy", policy,
                     "--json", "-o", str(path), "--run-dir", str(run_dir), "-q", *tb,
                     *(["--untagged"] if untagged and policy != "none" else [])], timeout=6 * 3600)
    if not path.is_file():
        raise SystemExit(f"replay {name} wrote no result (exit {proc.returncode})")
    return json.loads(path.read_text())


def window(doc: dict[str, Any]) -> tuple[str, str]:
    t0 = datetime.fromisoformat(doc["replay"]["started_at"])
    t1 = t0 + timedelta(seconds=float(doc["metrics"]["wall_seconds"]) + 2)
    return t0.strftime("%Y-%m-%dT%H:%M:%S"), t1.strftime("%Y-%m-%dT%H:%M:%S")


def report(doc: dict[str, Any], out: Path, name: str, weights: dict[str, float]) -> dict[str, Any]:
    """``slurm-fair report`` over the run's window, with the run's tenant weights (and, for the
    controller's runs, its state store: the throughputs it used)."""
    controller = Path(doc["replay"]["run_dir"]) / "controller.toml"
    config = controller if controller.is_file() else out / "weights.toml"
    if not controller.is_file():
        lines = ["[controller]", f'state_dir = "{out / "no-controller"}"',
                 f'audit_log = "{out / "no-controller" / "a.jsonl"}"', ""]
        for t, w in sorted(weights.items()):
            lines += [f"[tenants.{t}]", f"weight = {w!r}", ""]
        config.write_text("\n".join(lines))
    since, until = window(doc)
    path = out / f"{name}-report.json"
    with path.open("w") as fh:
        proc = subprocess.run(SF + ["report", "--since", since, "--until", until, "--format", "json",
                                    "--config", str(config)], cwd=ROOT, stdout=fh, timeout=600, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"report of {name} failed (exit {proc.returncode})")
    return json.loads(path.read_text())


def fairness(rep: dict[str, Any], heaviest: str) -> dict[str, Any]:
    """SI ratio per tenant and the envy of the heaviest-weighted tenant (report's figures)."""
    si = {t["tenant"]: t["si_ratio"] for t in rep["tenants"]}
    envy = next((t["envy"] for t in rep["tenants"] if t["tenant"] == heaviest), {})
    return {"si": si, "si_min": min((v for v in si.values() if v is not None), default=None),
            "envy_of_heaviest": max(envy.values(), default=0.0)}


def sparse_slowdown(doc: dict[str, Any]) -> dict[str, Any]:
    """For each job: its time on each type it ran on x that type's slowness relative to the
    fastest type that can hold it (expected_s: trace seconds alone on each type; a type that
    cannot hold the gang has none or inf). The worst type each job ran on, over all jobs."""
    worst: dict[str, float] = {}
    for j in doc["jobs"]:
        exp = {k: v for k, v in j["expected_s"].items() if v and math.isfinite(v)}
        feasible = {k: v for k, v in exp.items() if _holds(j["gpus"], k, doc)}
        best = min(feasible.values()) if feasible else None
        for k in set(j["types_run"] or [j["gpu_type"]]):
            if best and k in exp:
                worst[j["job"]] = max(worst.get(j["job"], 0.0), exp[k] / best)
    over = sorted(j for j, r in worst.items() if r > 1.10 + 1e-9)
    return {"worst_slowdown": max(worst.values(), default=None), "jobs_over_10pct": over, "jobs": len(worst)}


def _holds(gpus: int, gpu_type: str, doc: dict[str, Any]) -> bool:
    """Whether one node of the type holds the (single-node) job."""
    layout = doc["replay"].get("node_layout", {}).get(gpu_type)
    return layout is None or gpus <= max(int(part.split("x")[1]) for part in layout.split("+"))


def simulate(trace: str, doc: dict[str, Any], policy: str, out: Path, scale: float) -> dict[str, Any]:
    """The simulator's prediction for ``trace`` on the testbed's layout with Slurm's costs."""
    b = doc["replay"]
    cluster = ",".join(f"{k}={v}" for k, v in sorted(b["node_layout"].items()))
    weights = {t: b["weights"][a] for t, a in b["tenant_map"].items()}
    hold = float(b["requeue_hold_real_s"]) * scale
    path = out / f"sim-{policy}.json"
    run(SF + ["simulate", "--trace", trace, "--cluster", cluster, "--policy", policy,
              "--round-s", str(b["round_s"]), "--restart-s", str(START_LATENCY_REAL_S * scale),
              "--requeue-hold-s", str(hold), "--fill-between-rounds", "--quiet", "--json", "-o", str(path),
              *[x for t, w in sorted(weights.items()) for x in ("--weight", f"{t}={w:g}")]], timeout=3600)
    return json.loads(path.read_text())["policies"][policy]


def stats(values: Sequence[float | None]) -> tuple[float, float, float] | None:
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None
    return statistics.fmean(vals), min(vals), max(vals)


def cell(st: tuple[float, float, float] | None, scale: float, fmt: str) -> str:
    if st is None:
        return "-"
    mean, lo, hi = (v * scale for v in st)
    return f"{mean:{fmt}} ({lo:{fmt}}-{hi:{fmt}})"


def table(arms: dict[str, list[dict[str, Any]]], sim: dict[str, Any] | None) -> list[str]:
    names = list(arms)
    head = "| metric (trace time) | " + " | ".join(f"{n} (mean, min-max of {len(arms[n])})" for n in names)
    head += " | ratio none/" + names[-1] + (" | sim " + names[-1] if sim else "") + " |"
    lines = [head, "|---|" + "---|" * (len(names) + 1 + bool(sim))]
    for key, label, scale, fmt in ROWS:
        per = {n: stats([r["metrics"].get(key) for r in arms[n]]) for n in names}
        ratio = "-"
        if per.get("none") and per[names[-1]] and per[names[-1]][0]:
            ratio = f"{per['none'][0] / per[names[-1]][0]:.2f}"
        row = f"| {label} | " + " | ".join(cell(per[n], scale, fmt) for n in names) + f" | {ratio}"
        if sim:
            v = sim.get(key)
            row += " | " + (f"{v * scale:{fmt}}" if v is not None else "-")
        lines.append(row + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trace", required=True)
    p.add_argument("--time-scale", type=float, required=True)
    p.add_argument("--policy", default="oef")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--sparse", default=None, help="a one-job-at-a-time trace, run once with the controller")
    p.add_argument("--dir", default=None, help="testbed state directory")
    p.add_argument("--config", default=None, help="testbed description")
    p.add_argument("--out", default="out/bench-testbed")
    p.add_argument("--skip-real", action="store_true", help="re-score the JSON files already in --out")
    p.add_argument("--no-sim", action="store_true")
    p.add_argument("--untagged", action="store_true",
                   help="the policy's runs submit no fair:class tag (the controller learns speeds)")
    p.add_argument("--policy-only", action="store_true",
                   help="run the policy's arm alone (Slurm alone's runs reused from elsewhere: no ratio)")
    a = p.parse_args(argv)
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    tb = (["--dir", a.dir] if a.dir else []) + (["--config", a.config] if a.config else [])
    arms: dict[str, list[dict[str, Any]]] = {a.policy: []} if a.policy_only else {"none": [], a.policy: []}
    for i in range(1, a.repeat + 1):
        for arm in arms:
            name = f"{arm}-{i}"
            doc = json.loads((out / f"{name}.json").read_text()) if a.skip_real else \
                replay(a.trace, a.time_scale, arm, out, name, tb, a.untagged)
            arms[arm].append(doc)
    weights = arms[a.policy][0]["replay"]["weights"]
    heaviest = max(sorted(weights), key=lambda t: weights[t])
    fair: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    for arm, docs in arms.items():
        for i, doc in enumerate(docs, start=1):
            fair[arm].append(fairness(report(doc, out, f"{arm}-{i}", weights), heaviest))
    sparse = None
    if a.sparse:
        doc = json.loads((out / "sparse.json").read_text()) if a.skip_real else \
            replay(a.sparse, a.time_scale, a.policy, out, "sparse", tb)
        sparse = sparse_slowdown(doc)
    sim = None if a.no_sim else simulate(a.trace, arms[a.policy][0], a.policy, out, a.time_scale)

    lines = table(arms, sim)
    si_row = "| report: lowest tenant SI ratio | " + " | ".join(
        cell(stats([f["si_min"] for f in fair[arm]]), 1, ".2f") for arm in arms) + " | - |" + (" - |" if sim else "")
    envy_row = f"| report: envy of {heaviest} (weight {weights[heaviest]:g}; > 1 = envy) | " + " | ".join(
        cell(stats([f["envy_of_heaviest"] for f in fair[arm]]), 1, ".2f") for arm in arms) + " | - |" + (" - |" if sim else "")
    lines += [si_row, envy_row]
    for t in sorted(weights):  # every tenant's SI ratio (report), each run
        lines.append(f"| report: SI ratio of {t} (weight {weights[t]:g}), runs | " + " | ".join(
            " / ".join(f"{f['si'][t]:.2f}" if f["si"].get(t) is not None else "-" for f in fair[arm])
            for arm in arms) + " | - |" + (" - |" if sim else ""))
    jct = {arm: statistics.fmean(r["metrics"]["avg_jct_s"] for r in docs) for arm, docs in arms.items()}
    verdict: dict[str, Any] = {}
    if "none" in jct:
        verdict["avg JCT ratio none/policy (goal >= 1.3)"] = jct["none"] / jct[a.policy]
    verdict |= {
        "every job completed in every run": all(r["metrics"]["jobs_completed"] == r["metrics"]["jobs"]
                                                for docs in arms.values() for r in docs),
        "lowest SI ratio of the policy's runs (goal >= 0.95)": min(f["si_min"] for f in fair[a.policy]),
        f"largest envy of {heaviest} in the policy's runs (goal <= 1)": max(f["envy_of_heaviest"] for f in fair[a.policy]),
    }
    if sparse:
        verdict["sparse: worst slowdown vs fastest type that holds the job (goal <= 1.10)"] = sparse["worst_slowdown"]
        verdict["sparse: jobs over 10 %"] = sparse["jobs_over_10pct"]
    if sim:
        verdict["simulator avg JCT vs real mean (goal within 25 %)"] = sim["avg_jct_s"] / jct[a.policy] - 1.0
    text = "\n".join(lines) + "\n\n" + "\n".join(f"- {k}: {v if not isinstance(v, float) else round(v, 3)}"
                                                  for k, v in verdict.items())
    (out / "table.md").write_text(text + "\n")
    (out / "summary.json").write_text(json.dumps({"fairness": fair, "sparse": sparse, "sim": sim,
                                                   "verdict": verdict}, indent=1, default=str))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
