#!/usr/bin/env bash
# slurm-fair bootstrap -- rendered by `slurm-fair render-config` from
# templates/deploy/bootstrap.sh.j2. Run once as root (or a Slurm administrator) after slurmdbd
# and slurmctld run with the merged configuration. Idempotent: it only adds what is missing,
# so running it again changes nothing.
#
# It checks that every tenant account exists in slurmdbd and gives the controller's user the
# AdminLevel it needs (scontrol update of other users' pending jobs: partition, node list,
# SiteFactor). slurm-fair creates no QOS and changes no association: tenants keep to their
# shares through where and in which order their jobs run (docs/controller.md).
set -euo pipefail

SACCTMGR="${SACCTMGR:-sacctmgr}"
SCONTROL="${SCONTROL:-scontrol}"
CLUSTER='fairtb'
CONTROLLER_USER='root'
ADMIN_LEVEL='administrator'
ACCOUNTS=('biology' 'chemistry' 'physics' )

where_cluster=()
if [ -n "$CLUSTER" ]; then where_cluster=("cluster=$CLUSTER"); fi

sm_show() { "$SACCTMGR" -n -P "$@"; }
sm_do() { echo "+ sacctmgr -i $*"; "$SACCTMGR" -i "$@"; }

missing=0
for account in "${ACCOUNTS[@]}"; do
  if [ -z "$(sm_show show account where "name=$account" format=account)" ]; then
    echo "account '$account' does not exist in slurmdbd: create it first (sacctmgr add account $account)" >&2
    missing=1
  fi
done
# root and SlurmUser need nothing; any other controller user needs this AdminLevel.
if [ "$CONTROLLER_USER" != "root" ]; then
  slurm_user="$("$SCONTROL" show config 2>/dev/null | sed -n 's/^SlurmUser *= *\([^(]*\).*/\1/p' || true)"
  if [ "$CONTROLLER_USER" != "$slurm_user" ]; then
    level="$(sm_show show user where "name=$CONTROLLER_USER" format=adminlevel)"
    if [ -z "$level" ]; then
      echo "user '$CONTROLLER_USER' is not in slurmdbd: add it (sacctmgr add user $CONTROLLER_USER account=ACCOUNT) and rerun" >&2
      missing=1
    elif [ "${level,,}" != "${ADMIN_LEVEL,,}" ] && [ "${level,,}" != "administrator" ]; then
      sm_do modify user where "name=$CONTROLLER_USER" set "adminlevel=$ADMIN_LEVEL"
    fi
  fi
fi

if [ "$missing" -ne 0 ]; then
  echo "bootstrap incomplete (see above)" >&2
  exit 1
fi
echo "bootstrap done: 3 account(s) checked"
