#!/usr/bin/env bash
# `make demo`: bring the local Slurm testbed up, show the cluster, run an emulated multi-tenant
# workload with the controller enforcing the fair schedule, and end with the fairness report.
# Idempotent: a running testbed is reused; every run starts from a fresh run directory and
# `slurm-fair revert` leaves Slurm as it was (the bench runs it when the workload is done).
#   DEMO_POLICY=gavel-mmf make demo      another policy (default oef)
#   DEMO_TIME_SCALE=60 make demo         slower (default 120 trace seconds per real second)
set -euo pipefail
cd "$(dirname "$0")/.."
SF=.venv/bin/slurm-fair
POLICY=${DEMO_POLICY:-oef}
SCALE=${DEMO_TIME_SCALE:-120}
TRACE=benchmarks/traces/demo_testbed_24.csv
RUN_DIR=${TMPDIR:-/tmp}/slurm-fair-demo

$SF testbed up
eval "$($SF testbed env)"

echo
echo "== GPU inventory per node (sinfo, default partition) =="
sinfo -N -p gpu -o '%10N %12G %8c %T'

echo
echo "== GPUs per type (sum over nodes) =="
sinfo -h -N -p gpu -o '%G' | awk -F: '
  { split($3, n, "("); total[$2] += n[1] }
  END { for (t in total) printf "  %-6s %3d GPUs\n", t, total[t] }' | sort

echo
echo "== Partitions =="
sinfo -s

echo
echo "== Tenants (Slurm accounts) and their fair-share shares =="
sshare -o Account%12,User%8,RawShares,NormShares,EffectvUsage,FairShare

echo
$SF testbed status

echo
echo "== Emulated workload: $(($(wc -l < "$TRACE") - 1)) Philly-derived jobs of 3 tenants, policy $POLICY =="
echo "   (untyped --gres=gpu:N jobs; the controller steers each to its GPU type's partition, sets"
echo "    per-tenant QOS limits and the order;"
echo "    ${SCALE} trace seconds pass per real second; takes about two minutes)"
rm -rf "$RUN_DIR"
SINCE=$(date +%Y-%m-%dT%H:%M:%S)
$SF testbed bench --trace "$TRACE" --time-scale "$SCALE" --policy "$POLICY" --timeout 300 \
    --run-dir "$RUN_DIR" --json "$RUN_DIR/bench.json" \
  || echo "demo: not every job completed in time (see above); the report still covers what ran"

echo
echo "== What the controller did (from its JSON cycle log) =="
.venv/bin/python - "$RUN_DIR/bench.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["bench"]["controller"]
print(f"  {c['cycles']} cycles ({c['cycles_ok']} ok), {c['gpu_type_steers']} GPU-type steerings, "
      f"{c['requeues']} round-boundary requeues, mean cycle {c['cycle_seconds_mean']:.2f} s; revert: {c['revert']}")
PY

echo
echo "== Fairness report of the demo window (slurm-fair report) =="
$SF report --since "$SINCE" --config "$RUN_DIR/controller.toml"
