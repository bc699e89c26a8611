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
echo "== The cluster and its tenants (slurm-fair snapshot): GPUs per type, nodes, Slurm accounts"
echo "   with their weight (Slurm's fair-share shares) and share of the GPUs =="
$SF snapshot

echo
echo "== Emulated workload: $(($(wc -l < "$TRACE") - 1)) Philly-derived jobs of 3 tenants (1- to 8-GPU gangs), policy $POLICY =="
echo "   Jobs are submitted untyped (--gres=gpu:N); job_submit.lua sends each new job to the types"
echo "   the latest plan prefers, the controller plans every trace minute (partitions, order,"
echo "   requeues to time-share and to move jobs up to idle faster GPUs)."
echo "   ${SCALE} trace seconds pass per real second; takes about $((12000 / SCALE / 60 + 1)) minutes."
rm -rf "$RUN_DIR" && mkdir -p "$RUN_DIR"  # -o below is checked before the replay runs: its directory must exist
SINCE=$(date +%Y-%m-%dT%H:%M:%S)
$SF testbed replay --trace "$TRACE" --time-scale "$SCALE" --policy "$POLICY" --timeout $((36000 / SCALE + 120)) \
    --run-dir "$RUN_DIR" --json -o "$RUN_DIR/replay.json" \
  || echo "demo: not every job completed in time (see above); the report still covers what ran"
UNTIL=$(date +%Y-%m-%dT%H:%M:%S)

echo
echo "== Where the jobs ran, and what the controller did =="
.venv/bin/python scripts/demo_summary.py "$RUN_DIR/replay.json" "$RUN_DIR/controller/state.sqlite" || true

echo
echo "== Fairness report of the demo window (slurm-fair report) =="
$SF report --since "$SINCE" --until "$UNTIL" --config "$RUN_DIR/controller.toml"
$SF report --since "$SINCE" --until "$UNTIL" --config "$RUN_DIR/controller.toml" --format html -o "$RUN_DIR/report.html"
echo
echo "The report as a web page: $RUN_DIR/report.html"
