#!/usr/bin/env bash
# A one-node Slurm cluster on this host, for the Slurm tests and for trying `pytest --slurm` on a workstation.
#   scripts/slurm-local.sh up      install slurm-wlm, munge, slurmdbd and mariadb-server (apt-get, as root) if
#                                  needed, start the daemons: job accounting included, as production clusters
#                                  have it (without it sacct fails and submitit sees every state as UNKNOWN)
#   scripts/slurm-local.sh down    stop the daemons this script started
#   scripts/slurm-local.sh status  exit 0 when the cluster answers
# The node advertises more CPUs than the host has (config_overrides), so several small items run side by
# side; a real cluster's nodes advertise what they have.
# Its Prolog is a test hook: a job whose working folder holds a file .fmlbench-fail-prolog fails its launch
# once per line of that file, as a failing node prolog does on a real cluster (Slurm drains the node with
# "Prolog error" and requeues the job held: launch_failed_requeued_held); for every other job it does nothing.
set -euo pipefail
STATE=${FMLBENCH_SLURM_STATE:-/var/lib/fmlbench-slurm}
CONF_DIR=/etc/slurm
NODE_CPUS=${FMLBENCH_SLURM_CPUS:-8}

install() {
  command -v slurmctld >/dev/null 2>&1 && command -v munged >/dev/null 2>&1 && command -v slurmdbd >/dev/null 2>&1 \
    && command -v mariadbd >/dev/null 2>&1 && return 0
  [ "$(id -u)" = 0 ] || { echo "slurm-local: installing Slurm needs root (apt-get install slurm-wlm munge slurmdbd mariadb-server)" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq slurm-wlm munge slurmdbd mariadb-server >/dev/null
}

write_config() {
  local host mem
  host=$(hostname -s)
  mem=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
  mkdir -p "$CONF_DIR" "$STATE/ctld" "$STATE/d" "$STATE/log"
  cat >"$STATE/prolog.sh" <<'PROLOG'
#!/bin/sh
# fmlbench test hook (scripts/slurm-local.sh): fail this launch if the job's folder asks for it, once per line
hook="${SLURM_JOB_WORK_DIR:-/nonexistent}/.fmlbench-fail-prolog"
[ -s "$hook" ] || exit 0
sed -i 1d "$hook"
echo "fmlbench test hook: prolog fails for job $SLURM_JOB_ID" >&2
exit 1
PROLOG
  chmod 755 "$STATE/prolog.sh"
  cat >"$CONF_DIR/slurm.conf" <<CONF
ClusterName=fmlbench
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
ReturnToService=2
MinJobAge=300
JobRequeue=1
KillWait=5
AuthInfo=cred_expire=5
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE/log/jobcomp.txt
Prolog=$STATE/prolog.sh
NodeName=$host NodeAddr=127.0.0.1 CPUs=$NODE_CPUS RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
}

# the accounting database (mariadb) and slurmdbd, started before slurmctld so that it registers
start_accounting() {
  mkdir -p "$STATE/log" /run/mysqld
  chown mysql:mysql /run/mysqld
  if ! mariadb -e 'select 1' >/dev/null 2>&1; then
    nohup mariadbd --user=mysql >"$STATE/log/mariadbd.out" 2>&1 &
    echo $! >"$STATE/mariadbd.launcher"
    for _ in $(seq 60); do mariadb -e 'select 1' >/dev/null 2>&1 && break; sleep 0.25; done
  fi
  mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db; CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'fmlbench-local'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';" \
    || { echo "slurm-local: mariadb did not start (see $STATE/log/mariadbd.out)" >&2; exit 1; }
  cat >"$CONF_DIR/slurmdbd.conf" <<CONF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=fmlbench-local
StorageLoc=slurm_acct_db
PidFile=$STATE/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
CONF
  chmod 600 "$CONF_DIR/slurmdbd.conf"
  nohup slurmdbd -D >"$STATE/log/slurmdbd.out" 2>&1 &
  echo $! >"$STATE/slurmdbd.launcher"
  for _ in $(seq 60); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.25; done
  sacctmgr -i add cluster fmlbench >/dev/null 2>&1 || true
}

munge_works() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
  munge_works && return 0
  [ -s /etc/munge/munge.key ] || { mungekey --create >/dev/null 2>&1 || create-munge-key -f >/dev/null; }
  chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  runuser -u munge -- munged
  touch "$STATE/munged.ours"
  for _ in $(seq 20); do munge_works && return 0; sleep 0.25; done
  echo "slurm-local: munged did not start (see /var/log/munge/munged.log)" >&2; exit 1
}

up() {
  install
  mkdir -p "$STATE"
  start_munge
  if ! sinfo -h >/dev/null 2>&1; then
    if [ -f "$CONF_DIR/slurm.conf" ] && ! grep -q '^ClusterName=fmlbench$' "$CONF_DIR/slurm.conf"; then
      echo "slurm-local: $CONF_DIR/slurm.conf belongs to another cluster; not touching it" >&2; exit 1
    fi
    write_config
    start_accounting
    nohup slurmctld -D >"$STATE/log/slurmctld.out" 2>&1 &
    echo $! >"$STATE/slurmctld.launcher"
    nohup slurmd -D >"$STATE/log/slurmd.out" 2>&1 &
    echo $! >"$STATE/slurmd.launcher"
  fi
  for _ in $(seq 60); do
    if sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
      echo "slurm-local: one-node cluster up ($(hostname -s), partition debug, $NODE_CPUS CPUs)"; return 0
    fi
    sleep 0.5
  done
  echo "slurm-local: the cluster did not come up; see $STATE/log/" >&2
  exit 1
}

down() {
  for daemon in slurmd slurmctld slurmdbd mariadbd; do
    if [ -f "$STATE/$daemon.launcher" ]; then
      pid=$(cat "$STATE/$daemon.launcher")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$STATE/$daemon.launcher"
    fi
  done
  if [ -f "$STATE/munged.ours" ] && [ -f /run/munge/munged.pid ]; then
    kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true
    rm -f "$STATE/munged.ours"
  fi
  echo "slurm-local: stopped"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) sinfo -h >/dev/null 2>&1 ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
