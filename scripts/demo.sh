#!/usr/bin/env bash
# `make demo`: bring the local Slurm testbed up and show the cluster slurm-fair will manage.
set -euo pipefail
cd "$(dirname "$0")/.."
SF=.venv/bin/slurm-fair
$SF testbed up
eval "$($SF testbed env)"
echo
echo "== GPU inventory per node (sinfo) =="
sinfo -N -o '%N %P %G %T'
$SF testbed status
