#!/usr/bin/env bash
# `make demo`: bring the local Slurm testbed up, show the cluster, run a contended emulated
# workload of three tenants with the controller (and its job_submit.lua) enforcing the fair
# schedule, show where the jobs ran, and end with the fairness report of the window.
# Idempotent: a running testbed is reused; every run starts from a fresh run directory and
# `slurm-fair revert` leaves Slurm as it was (the replay runs it when the workload is done).
#   DEMO_POLICY=gavel-mmf make demo      another policy (default oef)
#   DEMO_TIME_SCALE=60 make demo         faster, coarser (default 30 trace seconds per real
#                                        second, the benchmark's scale: Slurm's start latency
#                                        and requeue hold weigh twice as much at 60)
set -euo pipefail
cd "$(dirname "$0")/.."
SF=.venv/bin/slurm-fair
POLICY=${DEMO_POLICY:-oef}
SCALE=${DEMO_TIME_SCALE:-30}
TRACE=benchmarks/traces/demo_testbed_24.csv
RUN_DIR=${TMPDIR:-/tmp}/slurm-fair-demo

$SF testbed up
eval "$($SF testbed env)"

echo
echo "== Nodes: typed GPUs; Weight by measured speed (Slurm fills the lowest first) =="
sinfo -N -p gpu -O "NodeList:10,Gres:14,CPUs:6,Memory:9,Weight:8,StateCompact:8"

echo
echo "== Partitions: one per GPU type, PriorityTier by speed, plus the default 'gpu' =="
sinfo -O "Partition:10,PriorityTier:14,Nodes:7,NodeList:26"

echo
echo "== Tenants (Slurm accounts) and their fair-share shares =="
sshare -o Account%12,RawShares%9,NormShares%11

echo
echo "== Emulated workload: $(($(wc -l < "$TRACE") - 1)) Philly-derived jobs of 3 tenants (1- to 8-GPU gangs), policy $POLICY =="
echo "   Jobs are submitted untyped (--gres=gpu:N); job_submit.lua sends each new job to the types"
echo "   the latest plan prefers, the controller plans every trace minute (QOS limits, order,"
echo "   requeues to time-share and to move jobs up to idle faster GPUs)."
echo "   ${SCALE} trace seconds pass per real second; takes about $((12000 / SCALE / 60 + 1)) minutes."
rm -rf "$RUN_DIR"
SINCE=$(date +%Y-%m-%dT%H:%M:%S)
$SF testbed replay --trace "$TRACE" --time-scale "$SCALE" --policy "$POLICY" --timeout $((36000 / SCALE + 120)) \
    --run-dir "$RUN_DIR" --json -o "$RUN_DIR/replay.json" \
  || echo "demo: not every job completed in time (see above); the report still covers what ran"
UNTIL=$(date +%Y-%m-%dT%H:%M:%S)

echo
echo "== Where the jobs ran, and what the controller did =="
.venv/bin/python - "$RUN_DIR/replay.json" "$RUN_DIR/controller/state.sqlite" <<'PY'
import json, sqlite3, sys
doc = json.load(open(sys.argv[1]))
c = doc["replay"]["controller"] or {}
jobs_on: dict[str, int] = {}
for j in doc["jobs"]:
    runs = j["types_run"] or ([j["gpu_type"]] if j["gpu_type"] else [])
    for k in set(runs):
        jobs_on[k] = jobs_on.get(k, 0) + 1
print("  jobs that ran on each GPU type: " + ", ".join(f"{k} {n}" for k, n in sorted(jobs_on.items())))
try:
    db = sqlite3.connect(f"file:{sys.argv[2]}?mode=ro", uri=True)
    rows = db.execute("SELECT reason, from_type, COALESCE(to_type, ''), COUNT(*) FROM requeues GROUP BY 1, 2, 3").fetchall()
except sqlite3.Error:
    rows = []
for reason, src, dst, n in rows:
    what = f"moved up from {src} to {dst}" if reason == "move-up" else f"requeued on {src} to make room"
    print(f"  {n} job(s) {what}")
print(f"  {c.get('cycles', 0)} controller cycles ({c.get('cycles_ok', 0)} ok, mean {c.get('cycle_seconds_mean') or 0:.2f} s), "
      f"{c.get('gpu_type_steers', 0)} steerings to a GPU type's partition; revert: {c.get('revert')}")
m = doc["metrics"]
print(f"  average JCT {m['avg_jct_s'] / 3600:.2f} h, makespan {m['makespan_s'] / 3600:.2f} h (trace time), "
      f"{m['jobs_completed']}/{m['jobs']} jobs done")
PY

echo
echo "== Fairness report of the demo window (slurm-fair report) =="
$SF report --since "$SINCE" --until "$UNTIL" --config "$RUN_DIR/controller.toml"
