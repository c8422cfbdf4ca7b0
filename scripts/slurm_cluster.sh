#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for trying and testing the
# workflow's SLURM profile (workflow/profiles/slurm). No systemd: the daemons
# (munged, slurmctld, slurmd) are started directly and stopped by pid file.
#
#   scripts/slurm_cluster.sh install   # apt-get install munge + slurm (root)
#   scripts/slurm_cluster.sh start     # write slurm.conf, start the daemons
#   scripts/slurm_cluster.sh status    # daemons, sinfo, squeue
#   scripts/slurm_cluster.sh stop      # cancel jobs, stop every daemon
#   scripts/slurm_cluster.sh env       # print `export SLURM_CONF=...`
#
# Every command is idempotent. Environment:
#   GRUMEM_SLURM_DIR        private state dir (default /var/lib/grumem-slurm):
#                           slurm.conf, controller state, spool, logs, pid files
#   GRUMEM_SLURM_PARTITION  name of the one (default) partition (default: main)
#
# Clients (sinfo, sbatch, snakemake) find the cluster through
# /etc/slurm/slurm.conf, which `start` links to our slurm.conf when that path
# is free; otherwise set SLURM_CONF (see `env`).
set -euo pipefail

PACKAGES=(munge slurmctld slurmd slurm-client)
STATE_DIR=${GRUMEM_SLURM_DIR:-/var/lib/grumem-slurm}
PARTITION=${GRUMEM_SLURM_PARTITION:-main}
CONF=$STATE_DIR/slurm.conf
SYSTEM_CONF=/etc/slurm/slurm.conf
RUN_DIR=$STATE_DIR/run
LOG_DIR=$STATE_DIR/log
CTLD_PID=$RUN_DIR/slurmctld.pid
SLURMD_PID=$RUN_DIR/slurmd.pid
MUNGE_KEY=/etc/munge/munge.key
MUNGE_RUN=/run/munge
MUNGE_PID=$MUNGE_RUN/munged.pid
START_TIMEOUT=${GRUMEM_SLURM_START_TIMEOUT:-60}
NODE=$(hostname -s)
export SLURM_CONF=$CONF

say() { echo "slurm_cluster: $*"; }
die() {
    echo "slurm_cluster: error: $*" >&2
    exit 1
}

need_root() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (it installs packages and starts daemons)"
}

# The pid in FILE if that process is alive and is NAME, else nothing: a stale
# pid file whose number was reused by another process never gets it killed.
live_pid() {
    local file=$1 name=$2 pid
    [[ -s $file ]] || return 1
    pid=$(<"$file")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$name" ]] || return 1
    echo "$pid"
}

alive() { live_pid "$1" "$2" >/dev/null; }

packages_installed() {
    local pkg
    for pkg in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || return 1
    done
}

cmd_install() {
    need_root
    if packages_installed; then
        say "packages already installed: ${PACKAGES[*]}"
        return
    fi
    command -v apt-get >/dev/null || die "apt-get not found: install ${PACKAGES[*]} by hand"
    # Refresh the package lists only when they do not know a package yet;
    # retry once after a refresh in case the lists are stale (404 on fetch).
    if apt-cache policy "${PACKAGES[@]}" | grep -q "Candidate: (none)" ||
        [[ $(apt-cache policy "${PACKAGES[@]}" | grep -c "Candidate:") -ne ${#PACKAGES[@]} ]]; then
        say "apt-get update"
        apt-get update -qq
    fi
    say "apt-get install ${PACKAGES[*]}"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}"; then
        say "install failed; apt-get update and retry"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}"
    fi
    packages_installed || die "packages still missing after apt-get install"
    say "installed: ${PACKAGES[*]}"
}

start_munge() {
    local pid
    if pid=$(live_pid "$MUNGE_PID" munged); then
        say "munged already running (pid $pid)"
        return
    fi
    if [[ ! -s $MUNGE_KEY ]]; then
        say "creating munge key $MUNGE_KEY"
        install -d -o munge -g munge -m 0700 "$(dirname "$MUNGE_KEY")"
        (umask 077 && head -c 1024 /dev/urandom >"$MUNGE_KEY")
    fi
    chown munge:munge "$MUNGE_KEY"
    chmod 0400 "$MUNGE_KEY"
    install -d -o munge -g munge -m 0755 "$MUNGE_RUN"
    say "starting munged as user munge"
    runuser -u munge -- /usr/sbin/munged --pid-file="$MUNGE_PID"
    wait_for "munge credential round trip" sh -c 'munge -n | unmunge >/dev/null 2>&1'
}

# Memory slurmd may hand out: 90% of what is available now, so the node is
# never configured with more than it has (slurmd would drain it).
real_memory_mb() {
    awk '/^MemAvailable:/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo
}

write_conf() {
    local cpus mem def_mem
    cpus=$(nproc)
    mem=$(real_memory_mb)
    # Without DefMemPerCPU a job without --mem takes the whole node's memory
    # and jobs run one at a time.
    def_mem=$((mem / cpus < 1024 ? mem / cpus : 1024))
    install -d -m 0755 "$STATE_DIR" "$STATE_DIR/ctld" "$STATE_DIR/spool" "$RUN_DIR" "$LOG_DIR"
    say "writing $CONF (node $NODE: CPUs=$cpus RealMemory=${mem}M, partition $PARTITION)"
    cat >"$CONF.tmp" <<EOF
# Written by grumem scripts/slurm_cluster.sh: a one-node test cluster.
ClusterName=grumem
# All traffic stays on loopback.
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
# No cgroup plugins: they need a cgroup hierarchy this machine may not have.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$def_mem
SchedulerType=sched/backfill
ReturnToService=2
# Finished jobs stay visible to squeue this long: the Snakemake profile
# polls squeue (no accounting database here).
MinJobAge=300
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
StateSaveLocation=$STATE_DIR/ctld
SlurmdSpoolDir=$STATE_DIR/spool
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
    mv "$CONF.tmp" "$CONF"
    link_system_conf
}

# Let plain `sinfo`/`sbatch` find the cluster, without touching a real one.
link_system_conf() {
    if [[ -L $SYSTEM_CONF && $(readlink "$SYSTEM_CONF") == "$CONF" ]]; then
        return
    fi
    if [[ -e $SYSTEM_CONF || -L $SYSTEM_CONF ]]; then
        say "$SYSTEM_CONF exists and is not ours: left alone; clients need SLURM_CONF=$CONF"
        return
    fi
    install -d -m 0755 "$(dirname "$SYSTEM_CONF")"
    ln -s "$CONF" "$SYSTEM_CONF"
    say "linked $SYSTEM_CONF -> $CONF"
}

unlink_system_conf() {
    if [[ -L $SYSTEM_CONF && $(readlink "$SYSTEM_CONF") == "$CONF" ]]; then
        rm -f "$SYSTEM_CONF"
        say "removed link $SYSTEM_CONF"
    fi
}

# Run "$@" until it succeeds, at most START_TIMEOUT seconds.
wait_for() {
    local what=$1
    shift
    local deadline=$((SECONDS + START_TIMEOUT))
    until "$@"; do
        ((SECONDS < deadline)) || die "timed out after ${START_TIMEOUT}s waiting for $what (logs: $LOG_DIR)"
        sleep 0.5
    done
}

node_state() {
    sinfo --noheader --nodes="$NODE" --format=%t 2>/dev/null | head -n 1
}

node_idle() {
    [[ $(node_state) == idle ]]
}

cmd_start() {
    need_root
    packages_installed || die "packages missing: run '$0 install' first"
    start_munge
    local ctld slurmd
    ctld=$(live_pid "$CTLD_PID" slurmctld) || ctld=
    slurmd=$(live_pid "$SLURMD_PID" slurmd) || slurmd=
    if [[ -z $ctld && -z $slurmd ]]; then
        write_conf
    else
        say "daemons running: keeping $CONF"
        link_system_conf
    fi
    if [[ -n $ctld ]]; then
        say "slurmctld already running (pid $ctld)"
    else
        # -c: a fresh controller state, so no job of an earlier run comes back.
        say "starting slurmctld"
        slurmctld -c -f "$CONF"
        wait_for "slurmctld pid file" alive "$CTLD_PID" slurmctld
    fi
    if [[ -n $slurmd ]]; then
        say "slurmd already running (pid $slurmd)"
    else
        say "starting slurmd"
        slurmd -c -f "$CONF" -N "$NODE"
        wait_for "slurmd pid file" alive "$SLURMD_PID" slurmd
    fi
    wait_for "node $NODE to be idle" node_idle
    say "cluster up: node $NODE idle in partition $PARTITION"
    sinfo
}

# Signal PID with TERM, wait for it to exit, KILL it after 15 s.
stop_pid() {
    local name=$1 pid=$2 i
    say "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 150; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    say "$name did not exit: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
}

cancel_jobs() {
    local jobs i
    jobs=$(squeue --noheader --format=%i 2>/dev/null) || return 0
    [[ -n $jobs ]] || return 0
    say "cancelling jobs: $(echo "$jobs" | tr '\n' ' ')"
    # shellcheck disable=SC2086  # one job id per word
    scancel $jobs || true
    for ((i = 0; i < 100; i++)); do
        [[ -z $(squeue --noheader --states=RUNNING,COMPLETING,PENDING --format=%i 2>/dev/null) ]] && return 0
        sleep 0.2
    done
    say "jobs still listed after cancel: $(squeue --noheader --format='%i %T' | tr '\n' ' ')"
}

cmd_stop() {
    local pid
    if alive "$CTLD_PID" slurmctld; then
        cancel_jobs
    fi
    if pid=$(live_pid "$SLURMD_PID" slurmd); then stop_pid slurmd "$pid"; fi
    if pid=$(live_pid "$CTLD_PID" slurmctld); then stop_pid slurmctld "$pid"; fi
    if pid=$(live_pid "$MUNGE_PID" munged); then stop_pid munged "$pid"; fi
    rm -f "$SLURMD_PID" "$CTLD_PID"
    unlink_system_conf
    say "stopped"
}

cmd_status() {
    local name file pid rc=0
    for name in munged slurmctld slurmd; do
        case $name in
            munged) file=$MUNGE_PID ;;
            slurmctld) file=$CTLD_PID ;;
            slurmd) file=$SLURMD_PID ;;
        esac
        if pid=$(live_pid "$file" "$name"); then
            say "$name running (pid $pid)"
        else
            say "$name not running"
            rc=3
        fi
    done
    if ((rc == 0)); then
        sinfo
        squeue
    fi
    return "$rc"
}

case ${1:-} in
    install) cmd_install ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    *)
        echo "usage: $0 {install|start|stop|status|env}" >&2
        exit 2
        ;;
esac
