#!/usr/bin/env bash
# slurm-fair QOS bootstrap -- rendered by `slurm-fair render-config` from
# templates/deploy/qos-bootstrap.sh.j2. Run once as root (or a Slurm administrator) after
# slurmdbd and slurmctld run with the merged configuration. Idempotent: it only adds what is
# missing, so running it again changes nothing.
#
# For every tenant account: the QOS fair_<account> the controller manages (no limits yet; the
# controller sets GrpTRES per GPU type each cycle), allowed on the account and on every user
# association under it. For the controller's user: the AdminLevel it needs.
set -euo pipefail

SACCTMGR="${SACCTMGR:-sacctmgr}"
SCONTROL="${SCONTROL:-scontrol}"
CLUSTER='fairtb'
CONTROLLER_USER='root'
ADMIN_LEVEL='administrator'
# account, then the QOS the controller uses for it
ACCOUNTS=('biology' 'chemistry' 'physics' )
QOSES=('fair_biology' 'fair_chemistry' 'fair_physics' )

where_cluster=()
if [ -n "$CLUSTER" ]; then where_cluster=("cluster=$CLUSTER"); fi

sm_show() { "$SACCTMGR" -n -P "$@"; }
sm_do() { echo "+ sacctmgr -i $*"; "$SACCTMGR" -i "$@"; }

enforce="$("$SCONTROL" show config 2>/dev/null | sed -n 's/^AccountingStorageEnforce *= *//p' || true)"
case "$enforce" in
  *qos*) ;;
  *) echo "warning: AccountingStorageEnforce is '${enforce}': without qos,limits the QOS limits are not enforced" >&2 ;;
esac

missing=0
for i in "${!ACCOUNTS[@]}"; do
  account="${ACCOUNTS[$i]}"
  qos="${QOSES[$i]}"
  if [ -z "$(sm_show show account where "name=$account" format=account)" ]; then
    echo "account '$account' does not exist in slurmdbd: create it first (sacctmgr add account $account)" >&2
    missing=1
    continue
  fi
  if [ -z "$(sm_show show qos where "name=$qos" format=name)" ]; then
    sm_do add qos "$qos"
  fi
  # every association of the account (the account's own row has an empty user)
  while IFS='|' read -r user qos_list; do
    case ",${qos_list}," in
      *",${qos},"*) continue ;;
    esac
    if [ -z "$user" ]; then
      sm_do modify account where "name=$account" "${where_cluster[@]}" set "qos+=$qos"
    else
      sm_do modify user where "name=$user" "account=$account" "${where_cluster[@]}" set "qos+=$qos"
    fi
  done < <(sm_show show assoc where "account=$account" "${where_cluster[@]}" format=user,qos)
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
  echo "QOS bootstrap incomplete (see above)" >&2
  exit 1
fi
echo "QOS bootstrap done: 3 account(s)"
