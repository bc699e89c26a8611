#!/usr/bin/env bash
# Entry point of the docker-compose test cluster: one role per container.
#   munge-key            create the shared munge key once (a volume), then exit
#   mariadb              Debian's MariaDB: database and user from $MARIADB_DATABASE/_USER/_PASSWORD
#   slurmdbd             slurmdbd in the foreground (waits for MariaDB)
#   slurmctld            register cluster/accounts, then slurmctld in the foreground
#   slurmd               fake GPU device files from gres.conf, then slurmd in the foreground
#   controller           bootstrap (accounts, AdminLevel), then `slurm-fair run --loop` every [controller].interval_s
#                        (or every $SLURM_FAIR_INTERVAL seconds when that is set)
set -euo pipefail

SHARED_KEY=/etc/munge-shared/munge.key
ROLE="${1:-}"

log() { echo "[$(date +%H:%M:%S) ${ROLE}] $*"; }

wait_port() {  # host port what  (only for MariaDB: a Slurm daemon logs an error per probe)
  local i
  for i in $(seq 1 120); do
    if nc -z "$1" "$2" 2>/dev/null; then return 0; fi
    sleep 1
  done
  log "gave up waiting for $3 on $1:$2"
  exit 1
}

wait_for() {  # what command...: until the command succeeds (2 minutes at most)
  local what="$1" i
  shift
  for i in $(seq 1 60); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 2
  done
  log "gave up waiting for $what"
  exit 1
}

slurmctld_up() { scontrol ping 2>/dev/null | grep -q "is UP"; }

start_munge() {
  for i in $(seq 1 60); do [ -s "$SHARED_KEY" ] && break; sleep 1; done
  install -o munge -g munge -m 0400 "$SHARED_KEY" /etc/munge/munge.key
  install -d -o munge -g munge -m 0755 /run/munge
  runuser -u munge -- /usr/sbin/munged
}

slurm_dirs() {
  install -d -o slurm -g slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
}

case "$ROLE" in
  munge-key)
    if [ ! -s "$SHARED_KEY" ]; then
      dd if=/dev/urandom of="$SHARED_KEY" bs=1024 count=1 status=none
      log "created munge key"
    fi
    chmod 0400 "$SHARED_KEY"
    ;;
  mariadb)
    : "${MARIADB_DATABASE:?}" "${MARIADB_USER:?}" "${MARIADB_PASSWORD:?}"
    install -d -o mysql -g mysql -m 0755 /run/mysqld /var/lib/mysql
    if [ ! -d /var/lib/mysql/mysql ]; then
      mariadb-install-db --user=mysql --datadir=/var/lib/mysql --skip-test-db >/dev/null
      log "initialised /var/lib/mysql"
    fi
    # run at every start before connections are accepted: the healthcheck's ping means ready
    pw="${MARIADB_PASSWORD//\\/\\\\}"; pw="${pw//\'/\\\'}"
    cat > /run/mysqld/init.sql <<SQL
CREATE DATABASE IF NOT EXISTS \`${MARIADB_DATABASE}\`;
CREATE USER IF NOT EXISTS '${MARIADB_USER}'@'%' IDENTIFIED BY '${pw}';
ALTER USER '${MARIADB_USER}'@'%' IDENTIFIED BY '${pw}';
GRANT ALL ON \`${MARIADB_DATABASE}\`.* TO '${MARIADB_USER}'@'%';
SQL
    chown mysql:mysql /run/mysqld/init.sql
    chmod 0600 /run/mysqld/init.sql
    exec /usr/sbin/mariadbd --user=mysql --datadir=/var/lib/mysql --bind-address=0.0.0.0 \
      --skip-name-resolve --init-file=/run/mysqld/init.sql
    ;;
  slurmdbd)
    start_munge
    slurm_dirs
    chown slurm:slurm /etc/slurm/slurmdbd.conf
    chmod 0600 /etc/slurm/slurmdbd.conf
    wait_port mariadb 3306 MariaDB
    exec /usr/sbin/slurmdbd -D
    ;;
  slurmctld)
    start_munge
    slurm_dirs
    wait_for slurmdbd sacctmgr -n -P show cluster format=cluster
    cluster="$(sed -n 's/^ClusterName=//p' /etc/slurm/slurm.conf)"
    sacctmgr -i -n add cluster "$cluster" >/dev/null 2>&1 || true
    accounts=()
    while read -r account share; do
      case "$account" in ''|'#'*) continue ;; esac
      accounts+=("$account")
      if [ -z "$(sacctmgr -n -P show account where "name=$account" format=account)" ]; then
        sacctmgr -i add account "$account" "cluster=$cluster" "fairshare=$share"
      fi
    done < /etc/slurm-fair/accounts.txt
    # root (who submits in this cluster: `docker compose exec slurmctld sbatch -A ACCOUNT ...`)
    # may use every account; slurmdbd knows root from the start, but only in account root
    for account in "${accounts[@]}"; do
      if [ -z "$(sacctmgr -n -P show assoc where "account=$account" user=root "cluster=$cluster" format=user)" ]; then
        sacctmgr -i add user root "account=$account" "cluster=$cluster"
      fi
    done
    exec /usr/sbin/slurmctld -D
    ;;
  slurmd)
    start_munge
    slurm_dirs
    node="${NODE_NAME:-$(hostname)}"
    # gres.conf says which device files this node has: NVIDIA's character devices (major 195;
    # the container may create them, not open them: slurmd only looks), plain files if mknod fails
    fake_gpu() { [ -e "$1" ] || mknod -m 0666 "$1" c 195 "$2" 2>/dev/null || touch "$1"; }
    files="$(sed -n "s/^NodeName=${node} .*File=\(.*\)$/\1/p" /etc/slurm/gres.conf)"
    case "$files" in
      *\[*-*\]) base="${files%%[*}"; range="${files#*[}"; range="${range%]}"
                for i in $(seq "${range%-*}" "${range#*-}"); do fake_gpu "${base}${i}" "$i"; done ;;
      ?*) fake_gpu "$files" "${files##*[!0-9]}" ;;
    esac
    wait_for slurmctld slurmctld_up
    exec /usr/sbin/slurmd -D -N "$node"
    ;;
  controller)
    start_munge
    wait_for slurmctld slurmctld_up
    until /etc/slurm-fair/bootstrap.sh; do log "bootstrap failed; retrying"; sleep 5; done
    mkdir -p /var/lib/slurm-fair /var/log/slurm-fair
    if [ -n "${SLURM_FAIR_INTERVAL:-}" ]; then
      exec slurm-fair run --loop --interval "$SLURM_FAIR_INTERVAL"
    fi
    exec slurm-fair run --loop  # every [controller].interval_s of $SLURM_FAIR_CONFIG
    ;;
  *)
    exec "$@"
    ;;
esac
