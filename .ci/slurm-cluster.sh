#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for CI (docs/slurm.md "Testing").
#
#   bash .ci/slurm-cluster.sh start   # install slurm-wlm + munge if missing, start munged,
#                                     # slurmctld and slurmd; prints the SLURM_CONF to export
#   bash .ci/slurm-cluster.sh stop    # cancel its jobs, stop the daemons it started
#   bash .ci/slurm-cluster.sh env     # print `export SLURM_CONF=...` for a running cluster
#
# Needs root (apt-get, munge user, slurmd). All SLURM state, spool, logs and the
# slurm.conf live under $ELMOC_SLURM_DIR (default /tmp/elmoc-slurm); /etc/slurm/slurm.conf
# becomes a link to that slurm.conf while the cluster runs (an existing one is set aside
# and put back by `stop`): srun inside a job finds the cluster only there, as the
# executor's job step drops SLURM_* variables such as SLURM_CONF. munged uses the package's
# key and socket (/etc/munge, /run/munge) and is reused when it already runs.
# The node declares 4 GPUs as GRES whose "device files" are links to /dev/null, so
# `--gpus`/`--gres=gpu` requests are scheduled and get CUDA_VISIBLE_DEVICES (nothing can
# use a GPU on it). slurm 22.05 drops a gres/gpu declared without File= ("Removing
# file-less GPU"), and a regular file is rejected as "not a valid character device".
# Idempotent: `start` stops a previous cluster of this script first and starts clean.
set -euo pipefail

DIR=${ELMOC_SLURM_DIR:-/tmp/elmoc-slurm}
CONF=$DIR/etc/slurm.conf
NODE_GPUS=4

die() { echo "slurm-cluster: $*" >&2; exit 1; }

install_packages() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
        && command -v sbatch >/dev/null && command -v munged >/dev/null; then
        return
    fi
    [ "$(id -u)" = 0 ] || die "slurm-wlm/munge are missing and installing them needs root"
    echo "slurm-cluster: installing slurm-wlm and munge (Debian packages)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq slurm-wlm munge >/dev/null
}

munge_works() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
    if munge_works; then
        echo "slurm-cluster: munged already running, reusing it"
        return
    fi
    mkdir -p /run/munge /var/log/munge /var/lib/munge /etc/munge
    if [ ! -s /etc/munge/munge.key ]; then
        runuser -u munge -- mungekey --create --keyfile /etc/munge/munge.key
    fi
    chown -R munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge
    chmod 0700 /etc/munge /var/log/munge
    chmod 0400 /etc/munge/munge.key
    chmod 0755 /run/munge
    runuser -u munge -- munged --pid-file=/run/munge/munged.pid
    cp /run/munge/munged.pid "$DIR/munged.pid.ours"
    for _ in $(seq 50); do munge_works && return; sleep 0.2; done
    die "munged did not start (see /var/log/munge/munged.log)"
}

write_conf() {
    local host cpus mem_mb
    host=$(hostname -s)
    cpus=$(nproc)
    # leave 10% of the RAM (at least 512 MB) to the system
    mem_mb=$(awk '/MemTotal/ {m = int($2 / 1024); r = int(m * 0.9); if (m - r < 512) r = m - 512; print r}' /proc/meminfo)
    mkdir -p "$DIR/etc" "$DIR/state" "$DIR/spool" "$DIR/log" "$DIR/run" "$DIR/dev"
    cat > "$CONF" <<EOF
# written by .ci/slurm-cluster.sh: a one-node test cluster, no accounting storage
ClusterName=elmoc-ci
MailProg=/bin/true
SlurmctldHost=$host(127.0.0.1)
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
MinJobAge=600
KillWait=30
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb Gres=gpu:$NODE_GPUS State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=1-00:00:00 State=UP
EOF
    # GPUs for the scheduler only (CPU-only test node): character devices that are /dev/null
    local i
    for i in $(seq 0 $((NODE_GPUS - 1))); do ln -sfn /dev/null "$DIR/dev/nvidia$i"; done
    echo "NodeName=$host Name=gpu File=$DIR/dev/nvidia[0-$((NODE_GPUS - 1))]" > "$DIR/etc/gres.conf"
}

wait_idle() {
    local state
    for _ in $(seq 60); do
        state=$(sinfo -h -N -o '%T' 2>/dev/null | head -1 || true)
        case "$state" in
            idle|mixed|allocated) echo "slurm-cluster: node $(hostname -s) is $state"; return ;;
        esac
        sleep 1
    done
    tail -n 20 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
    die "the node did not become idle (state: ${state:-none}); logs above"
}

stop_pidfile() {  # stop_pidfile FILE NAME: TERM the daemon, wait, then KILL
    local file=$1 name=$2 pid
    [ -s "$file" ] || return 0
    pid=$(cat "$file")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "slurm-cluster: $name ($pid) ignored TERM, killing it" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$file"
}

link_conf() {
    mkdir -p /etc/slurm
    if [ -e /etc/slurm/slurm.conf ] && [ "$(readlink /etc/slurm/slurm.conf)" != "$CONF" ]; then
        mv /etc/slurm/slurm.conf /etc/slurm/slurm.conf.elmoc-saved
    fi
    ln -sfn "$CONF" /etc/slurm/slurm.conf
}

unlink_conf() {
    if [ "$(readlink /etc/slurm/slurm.conf 2>/dev/null)" = "$CONF" ]; then
        rm -f /etc/slurm/slurm.conf
        [ -e /etc/slurm/slurm.conf.elmoc-saved ] && mv /etc/slurm/slurm.conf.elmoc-saved /etc/slurm/slurm.conf
    fi
    return 0
}

cmd_stop() {
    if [ -f "$CONF" ]; then
        export SLURM_CONF=$CONF
        if [ -s "$DIR/run/slurmctld.pid" ] && kill -0 "$(cat "$DIR/run/slurmctld.pid")" 2>/dev/null; then
            scancel --full --quiet --user "$(id -un)" 2>/dev/null || true
            # let slurmd kill the job steps before it stops
            for _ in $(seq 30); do
                [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
                sleep 1
            done
        fi
    fi
    stop_pidfile "$DIR/run/slurmd.pid" slurmd
    stop_pidfile "$DIR/run/slurmctld.pid" slurmctld
    if [ -s "$DIR/munged.pid.ours" ]; then
        stop_pidfile "$DIR/munged.pid.ours" munged
        rm -f /run/munge/munged.pid
    fi
    unlink_conf
    echo "slurm-cluster: stopped"
}

cmd_start() {
    install_packages
    mkdir -p "$DIR"
    cmd_stop >/dev/null
    rm -rf "$DIR/state" "$DIR/spool" "$DIR/log" "$DIR/run" "$DIR/dev"
    start_munge
    write_conf
    link_conf
    export SLURM_CONF=$CONF
    slurmctld -f "$CONF"
    slurmd -f "$CONF"
    wait_idle
    echo "export SLURM_CONF=$CONF"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    env) [ -f "$CONF" ] || die "no cluster config at $CONF (run: $0 start)"; echo "export SLURM_CONF=$CONF" ;;
    *) die "usage: $0 start|stop|env   (state under \$ELMOC_SLURM_DIR, default /tmp/elmoc-slurm)" ;;
esac
