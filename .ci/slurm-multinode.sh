#!/usr/bin/env bash
# A two-node SLURM cluster on this machine, for CI (issue 48; ../shared/docs/slurm-multinode.md).
#
#   bash .ci/slurm-multinode.sh start   # install slurm-wlm + munge if missing, start a private munged,
#                                       # slurmctld and two slurmd (nodes n1, n2); prints the
#                                       # `export SLURM_CONF=... ELMOC_SLURM_CONF=...` line
#   bash .ci/slurm-multinode.sh stop    # cancel its jobs, stop the daemons it started
#   bash .ci/slurm-multinode.sh env     # print that export line for a running cluster
#
# Two slurmd on one host are two SLURM nodes (`slurmd -N NAME`, a port each, %n in the spool, pid
# and log paths). It lives beside the one-node cluster of .ci/slurm-cluster.sh and shares nothing
# with it: its own ports (7817, 7820-7822), its own munged (socket and key under the state folder),
# its own state folder $ELMOC_SLURM_MN_DIR (default /tmp/elmoc-slurm-mn), and no /etc/slurm link:
# commands find it through SLURM_CONF, which the SLURM executor's job step drops, so the jobs get
# the path as ELMOC_SLURM_CONF too (elmoc.multinode puts it back for srun and scontrol).
# No GPUs, no CPU or memory enforcement: both nodes share this host's cores.
# Idempotent: `start` stops a previous cluster of this script first and starts clean.
set -euo pipefail

DIR=${ELMOC_SLURM_MN_DIR:-/tmp/elmoc-slurm-mn}
CONF=$DIR/etc/slurm.conf
SOCKET=$DIR/munge/munge.sock

die() { echo "slurm-multinode: $*" >&2; exit 1; }

install_packages() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
        && command -v mungekey >/dev/null; then
        return
    fi
    [ "$(id -u)" = 0 ] || die "slurm-wlm/munge are missing and installing them needs root"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq slurm-wlm munge >/dev/null
}

start_munge() {
    mkdir -p "$DIR/munge"
    [ -s "$DIR/munge/munge.key" ] || mungekey --create --keyfile "$DIR/munge/munge.key"
    chown -R munge:munge "$DIR/munge"
    chmod 0711 "$DIR/munge"
    chmod 0400 "$DIR/munge/munge.key"
    runuser -u munge -- munged --socket="$SOCKET" --key-file="$DIR/munge/munge.key" \
        --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" --seed-file="$DIR/munge/munged.seed"
    for _ in $(seq 50); do
        munge -S "$SOCKET" -n 2>/dev/null | unmunge -S "$SOCKET" >/dev/null 2>&1 && return
        sleep 0.2
    done
    die "munged did not start ($DIR/munge/munged.log)"
}

write_conf() {
    local host
    host=$(hostname -s)
    mkdir -p "$DIR/etc" "$DIR/state" "$DIR/spool" "$DIR/log" "$DIR/run"
    cat > "$CONF" <<EOF
# written by .ci/slurm-multinode.sh: two nodes on one host, no accounting storage
ClusterName=elmoc-mn
MailProg=/bin/true
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=7817
SlurmdPort=7820
AuthType=auth/munge
AuthInfo=socket=$SOCKET
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
ReturnToService=2
SchedulerParameters=sched_interval=2
MinJobAge=600
KillWait=10
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=7821 CPUs=2 RealMemory=2000 State=UNKNOWN
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 Port=7822 CPUs=2 RealMemory=2000 State=UNKNOWN
PartitionName=mn Nodes=n[1-2] Default=YES MaxTime=60 State=UP
EOF
}

wait_idle() {
    local states
    for _ in $(seq 60); do
        states=$(sinfo -h -N -o '%T' 2>/dev/null | sort | tr '\n' ' ' || true)
        [ "$states" = "idle idle " ] && { echo "slurm-multinode: nodes n1, n2 idle"; return; }
        sleep 1
    done
    tail -n 20 "$DIR"/log/*.log >&2 || true
    die "the nodes did not become idle (states: ${states:-none}); logs above"
}

stop_pidfile() {  # stop_pidfile FILE: TERM the daemon, KILL after 10 s
    local file=$1 pid
    [ -s "$file" ] || return 0
    pid=$(cat "$file")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$file"
}

cmd_stop() {
    if [ -f "$CONF" ] && [ -s "$DIR/run/slurmctld.pid" ] && kill -0 "$(cat "$DIR/run/slurmctld.pid")" 2>/dev/null; then
        export SLURM_CONF=$CONF
        scancel --full --quiet 2>/dev/null || true
        for _ in $(seq 30); do
            [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
            sleep 1
        done
    fi
    stop_pidfile "$DIR/run/slurmd-n1.pid"
    stop_pidfile "$DIR/run/slurmd-n2.pid"
    stop_pidfile "$DIR/run/slurmctld.pid"
    stop_pidfile "$DIR/munge/munged.pid"
    echo "slurm-multinode: stopped"
}

cmd_start() {
    install_packages
    mkdir -p "$DIR"
    cmd_stop >/dev/null
    rm -rf "$DIR/state" "$DIR/spool" "$DIR/log" "$DIR/run"
    start_munge
    write_conf
    export SLURM_CONF=$CONF
    slurmctld -f "$CONF"
    slurmd -f "$CONF" -N n1
    slurmd -f "$CONF" -N n2
    wait_idle
    echo "export SLURM_CONF=$CONF ELMOC_SLURM_CONF=$CONF"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    env) [ -f "$CONF" ] || die "no cluster config at $CONF (run: $0 start)"; echo "export SLURM_CONF=$CONF ELMOC_SLURM_CONF=$CONF" ;;
    *) die "usage: $0 start|stop|env   (state under \$ELMOC_SLURM_MN_DIR, default /tmp/elmoc-slurm-mn)" ;;
esac
