#!/usr/bin/env bash
# A single-node SLURM on this machine, from Debian's packages, for the cluster test
# (tests/e2e/test_slurm_local.py, `make test-cluster`): one node `localhost` with this machine's
# CPUs and its memory less 2 GB, partitions `cpu` (default) and `gpu`, accounting off,
# MinJobAge=3600 (so that `squeue` still knows a finished job: the executor plugin's
# `--slurm-status-command squeue`).
#
#   scripts/slurm_local.sh start   install what is missing (apt-get, as root), write the key and
#                                  /etc/slurm/slurm.conf, start munged, slurmctld, slurmd, and
#                                  wait until a job runs; a daemon already running is kept
#   scripts/slurm_local.sh stop    stop the daemons this script started, by the process ids in
#                                  their pid files (never by name); nothing running is fine
#
# Both are idempotent. The state (pid files, logs, spool) lives in $LSA_SLURM_STATE
# (default /var/lib/lsa-slurm); a slurm.conf this script did not write is never overwritten.
set -euo pipefail

STATE=${LSA_SLURM_STATE:-/var/lib/lsa-slurm}
CONF=/etc/slurm/slurm.conf
MARK="# written by lsa's scripts/slurm_local.sh"
MUNGE_PID=/run/munge/munged.pid
CTLD_PID=$STATE/slurmctld.pid
SLURMD_PID=$STATE/slurmd.pid

die() { echo "slurm_local.sh: $*" >&2; exit 1; }

# the process id in pid file $1 when that process is alive and is command $2, else nothing
running() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] && echo "$pid"
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local end=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || die "timed out waiting for $what"
    sleep 1
  done
}

install_packages() {
  local missing=()
  command -v munged >/dev/null || missing+=(munge)
  command -v slurmctld >/dev/null || missing+=(slurmctld)
  command -v slurmd >/dev/null || missing+=(slurmd)
  command -v sbatch >/dev/null || missing+=(slurm-client)
  [ ${#missing[@]} -eq 0 ] && return
  [ "$(id -u)" = 0 ] || die "needs root to install ${missing[*]} (apt-get install ${missing[*]})"
  echo "installing ${missing[*]} (Debian's packages)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

write_config() {
  if [ -e "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
    die "$CONF exists and was not written by this script: this machine has a SLURM of its own"
  fi
  local cpus mem
  cpus=$(nproc)
  mem=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 - 2048 ))
  mkdir -p "$STATE/slurmctld" "$STATE/slurmd" /etc/slurm
  cat > "$CONF.tmp" <<EOF
$MARK (a single-node test cluster)
ClusterName=lsa-local
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/slurmctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MinJobAge=3600
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=cpu Nodes=localhost Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=localhost MaxTime=INFINITE State=UP
EOF
  mv "$CONF.tmp" "$CONF"
}

start_munge() {
  running "$MUNGE_PID" munged >/dev/null && return
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile /etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 600 /etc/munge/munge.key
  fi
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  runuser -u munge -- munged
  wait_for 20 "munged" munge -n
}

start_slurm() {
  if ! running "$CTLD_PID" slurmctld >/dev/null; then
    slurmctld
    wait_for 30 "slurmctld" scontrol ping
  fi
  if ! running "$SLURMD_PID" slurmd >/dev/null; then
    slurmd -N localhost
  fi
  wait_for 60 "node localhost to be idle" \
    bash -c 'sinfo -h -n localhost -o %t | grep -qx -e idle -e mix -e alloc'
  scontrol reconfigure >/dev/null  # a kept daemon reads a rewritten slurm.conf
  [ "$(srun -p cpu -t 1 -N 1 hostname)" = "$(hostname)" ] || die "srun did not run a job"
  sinfo
}

stop_one() {  # stop_one PIDFILE COMMAND
  local pid
  pid=$(running "$1" "$2") || return 0
  kill "$pid"
  wait_for 30 "$2 (pid $pid) to stop" bash -c "! kill -0 $pid"
  echo "stopped $2 (pid $pid)"
}

case "${1:-}" in
  start)
    install_packages
    write_config
    start_munge
    start_slurm
    ;;
  stop)
    stop_one "$SLURMD_PID" slurmd
    stop_one "$CTLD_PID" slurmctld
    stop_one "$MUNGE_PID" munged
    ;;
  *) die "usage: $0 start|stop" ;;
esac
