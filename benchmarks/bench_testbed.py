"""Real testbed vs simulator on one trace: the table of docs/results.md ("Real cluster").

Runs ``slurm-fair testbed bench`` once per policy (``none`` = Slurm alone) one after the other on
one testbed, then ``slurm-fair simulate`` on the same trace, cluster shape and tenant weights,
and prints one markdown table with both::

    .venv/bin/python benchmarks/bench_testbed.py --trace benchmarks/traces/philly_testbed_45.csv \
        --time-scale 60 --policy none --policy oef --sim-policy fifo --sim-policy oef \
        [--dir PRIVATE_TESTBED_DIR --config PRIVATE_TESTBED.toml] --out out/bench-testbed

Results (JSON per run, the table) go to ``--out``. A private testbed (own ``--dir`` and ports)
keeps other users' jobs out of the measurement.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SF = [sys.executable, "-m", "slurm_fair.cli"]

ROWS = (
    ("avg_jct_s", "avg JCT h", 1 / 3600, ".2f"),
    ("p50_jct_s", "p50 h", 1 / 3600, ".2f"),
    ("p99_jct_s", "p99 h", 1 / 3600, ".2f"),
    ("makespan_s", "makespan h", 1 / 3600, ".2f"),
    ("ftf_rho_mean", "rho mean", 1, ".2f"),
    ("ftf_rho_max", "rho max", 1, ".2f"),
    ("effective_throughput", "eff. thr.", 1, ".2f"),
    ("utilization", "util", 100, ".0f"),
    ("jobs_completed", "done", 1, "d"),
)


def _run(argv: list[str], timeout: float) -> None:
    print("+", " ".join(argv[2:] if argv[:2] == SF[:2] else argv), file=sys.stderr, flush=True)
    subprocess.run(argv, cwd=ROOT, check=True, timeout=timeout)


def _cell(value: object, scale: float, fmt: str) -> str:
    if value is None:
        return "-"
    v = float(value) * scale  # type: ignore[arg-type]
    return f"{int(v)}" if fmt == "d" else format(v, fmt)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trace", required=True)
    p.add_argument("--time-scale", type=float, required=True)
    p.add_argument("--policy", action="append", required=True, help="bench policy (none = Slurm alone)")
    p.add_argument("--sim-policy", action="append", default=[], help="simulator policy")
    p.add_argument("--dir", default=None, help="testbed state directory")
    p.add_argument("--config", default=None, help="testbed description")
    p.add_argument("--out", default="out/bench-testbed")
    p.add_argument("--skip-real", action="store_true", help="reuse the bench JSON files in --out")
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    tb = (["--dir", a.dir] if a.dir else []) + (["--config", a.config] if a.config else [])
    real: dict[str, dict] = {}
    for policy in a.policy:
        path = out / f"real-{policy}.json"
        if not a.skip_real:
            run_dir = out / f"run-{policy}"
            if run_dir.exists():
                subprocess.run(["rm", "-rf", str(run_dir)], check=True, timeout=60)
            _run(SF + ["testbed", "bench", "--trace", a.trace, "--time-scale", str(a.time_scale), "--policy", policy,
                       "--json", str(path), "--run-dir", str(run_dir), *tb], timeout=3600)
        real[policy] = json.loads(path.read_text())
    first = next(iter(real.values()))["bench"]
    sim: dict[str, dict] = {}
    if a.sim_policy:
        cap = first["capacity"]
        weights = {t: first["weights"][acct] for t, acct in first["tenant_map"].items()}
        sim_json = out / "sim.json"
        _run(SF + ["simulate", "--trace", a.trace, "--cluster", ",".join(f"{k}={v}" for k, v in sorted(cap.items())),
                   "--gpus-per-node", "4", "--round-s", str(first["round_s"]), "--quiet", "--json", str(sim_json),
                   *[x for t, w in sorted(weights.items()) for x in ("--weight", f"{t}={w:g}")],
                   *[x for s in a.sim_policy for x in ("--policy", s)]], timeout=3600)
        sim = json.loads(sim_json.read_text())["policies"]
    cols = [(f"real {k}", v["metrics"]) for k, v in real.items()] + [(f"sim {k}", v) for k, v in sim.items()]
    lines = ["| metric | " + " | ".join(c for c, _ in cols) + " |", "|---|" + "---|" * len(cols)]
    for key, header, scale, fmt in ROWS:
        lines.append(f"| {header} | " + " | ".join(_cell(m.get(key), scale, fmt) for _, m in cols) + " |")
    table = "\n".join(lines)
    (out / "table.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
