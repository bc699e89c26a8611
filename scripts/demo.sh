#!/usr/bin/env bash
# `make demo`: bring the local Slurm testbed up and show the cluster slurm-fair will manage.
# Idempotent: a running testbed is reused (a second run takes a couple of seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
SF=.venv/bin/slurm-fair
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
