#!/usr/bin/env bash
# SLURM integration test: the workflow through `snakemake --profile slurm` on a real,
# single-node SLURM cluster started on this machine.
#
#   bash tests/slurm/run_slurm_test.sh        # as root (Debian: installs slurm + munge if missing)
#
# 1. installs Debian's slurmctld slurmd slurm-client munge (and the executor plugin) if missing;
# 2. starts munged, slurmctld and slurmd from a temporary folder (own key, socket, ports,
#    slurm.conf via SLURM_CONF; nothing under /etc is touched);
# 3. runs a tiny config of the workflow locally (--cores 2) and through the SLURM profile
#    (the literal `--profile slurm` from the repository root, plus test-cluster overrides),
#    checks that every non-local job ran as its own SLURM job (Snakemake's submissions,
#    slurmd's launches, SLURM's job completion log and squeue's history agree) and that the
#    outputs equal the local run's byte for byte;
# 4. runs a config whose job fails inside SLURM and checks that Snakemake fails, naming the
#    rule, after the profile's retries, instead of hanging;
# 5. stops every daemon it started, by the PIDs it recorded, and removes its folder.
#
# Exit code 0 and a last line "SLURM integration test: PASSED (...)" on success.
# DPCL_SLURM_TEST_KEEP=1 keeps the temporary folder for inspection.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/../.." && pwd)"
HELPERS="$REPO/tests/slurm/slurm_test_helpers.py"
STATE=/tmp/dpcl-slurm-test.state # daemons and folder of the run in progress (for cleanup after a crash)
SNAKEMAKE_TIMEOUT=900            # seconds; a hang fails the test instead of blocking CI
T0=$(date +%s)

log() { printf '[slurm-test %4ss] %s\n' "$(($(date +%s) - T0))" "$*"; }
die() {
    log "FAILED: $*" >&2
    exit 1
}

[ "$(id -u)" = 0 ] || die "needs root (starts munged, slurmctld and slurmd)"

# --- 1. packages -------------------------------------------------------------------------
missing=()
for bin in slurmctld slurmd sbatch squeue munged; do
    command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/sbin/$bin" ] || missing+=("$bin")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing slurmctld slurmd slurm-client munge (missing: ${missing[*]})"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q slurmctld slurmd slurm-client munge >/dev/null ||
        { apt-get update -q >/dev/null && apt-get install -y -q slurmctld slurmd slurm-client munge >/dev/null; }
fi
export PATH="$PATH:/usr/sbin:/sbin"
python -c "import snakemake_executor_plugin_slurm" 2>/dev/null ||
    { log "installing snakemake-executor-plugin-slurm" && pip install -q snakemake-executor-plugin-slurm; }
log "slurm $(dpkg-query -W -f '${Version}' slurmctld 2>/dev/null), munge $(dpkg-query -W -f '${Version}' munge 2>/dev/null), snakemake $(snakemake --version), plugin $(python -c 'import importlib.metadata as m; print(m.version("snakemake-executor-plugin-slurm"))')"

# --- leftovers of an interrupted earlier run (by recorded PID, checked against its binary) -
stop_pid() { # pid exe: TERM, wait up to 10 s, then KILL; only while /proc/pid is still that binary
    local pid=$1 exe=$2 i
    for i in $(seq 60); do
        [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ] || return 0
        [ "$i" = 1 ] && kill -TERM "$pid" 2>/dev/null
        [ "$i" = 50 ] && kill -KILL "$pid" 2>/dev/null
        sleep 0.2
    done
    log "WARNING: PID $pid ($exe) is still running"
    return 1
}
if [ -f "$STATE" ]; then
    log "cleaning up after an interrupted earlier run ($STATE)"
    tac "$STATE" | while read -r kind a b; do
        case "$kind" in
        pid) stop_pid "$a" "$b" ;;
        dir) case "$a" in /tmp/dpcl-slurm-test.*) rm -rf "$a" ;; esac ;;
        esac
    done
    rm -f "$STATE"
fi

# --- 2. cluster --------------------------------------------------------------------------
T_SETUP=$(date +%s)
WORK="$(mktemp -d /tmp/dpcl-slurm-test.XXXXXX)"
chmod 755 "$WORK"
echo "dir $WORK" >"$STATE"
PIDS=() # "pid exe", in start order
CLUSTER_UP=0
STOP_FAILED=0
SM_PID="" # the snakemake (under timeout) running now

teardown() { # cancel leftover jobs, stop the daemons (reverse start order), remove $WORK
    local ok=$1 i
    set +e
    if [ -n "$SM_PID" ] && kill -0 "$SM_PID" 2>/dev/null; then
        log "stopping the running snakemake (PID $SM_PID; it cancels its SLURM jobs)"
        kill -TERM "$SM_PID" # timeout passes it on to snakemake
        for i in $(seq 60); do kill -0 "$SM_PID" 2>/dev/null || break; sleep 1; done
    fi
    if [ "$CLUSTER_UP" = 1 ]; then
        # Jobs still queued or running (after a timeout): cancel them through SLURM first.
        ids=$(squeue -h -o %i -t PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED 2>/dev/null)
        if [ -n "$ids" ]; then
            log "cancelling SLURM jobs left over: $(echo $ids)"
            scancel $ids
            for i in $(seq 30); do
                [ -z "$(squeue -h -o %i -t PENDING,RUNNING,CONFIGURING,COMPLETING 2>/dev/null)" ] && break
                sleep 1
            done
        fi
        CLUSTER_UP=0
    fi
    if [ "$ok" != 1 ] && [ -d "$WORK" ]; then
        for f in "$WORK"/slurm/log/slurmctld.log "$WORK"/slurm/log/slurmd.log "$WORK"/run/slurm.log "$WORK"/run/fail.log; do
            [ -s "$f" ] && { echo "---- last lines of $f"; tail -n 25 "$f"; }
        done
    fi
    if [ ${#PIDS[@]} -gt 0 ]; then
        for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
            # shellcheck disable=SC2086
            stop_pid ${PIDS[$i]} || STOP_FAILED=1
        done
        [ "$STOP_FAILED" = 0 ] && log "stopped slurmd, slurmctld, munged (PIDs $(for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do printf '%s ' "${PIDS[$i]%% *}"; done | sed 's/ $//'))"
        PIDS=()
    fi
    if [ "${DPCL_SLURM_TEST_KEEP:-0}" = 1 ]; then
        log "kept $WORK"
    else
        rm -rf "$WORK"
    fi
    rm -f "$STATE"
}
cleanup() {
    local rc=$?
    set +e
    [ -f "$STATE" ] && teardown "$([ "$rc" = 0 ] && echo 1 || echo 0)"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start() { # name exe args...: start a foreground daemon in the background, record its PID
    local name=$1 exe
    exe="$(readlink -f "$2")" # /usr/sbin/slurmctld -> slurmctld-wlm: /proc/PID/exe names the target
    shift 2
    "$@" >"$WORK/$name.out" 2>&1 &
    PIDS+=("$! $exe")
    echo "pid $! $exe" >>"$STATE"
}

read -r CTLD_PORT SLURMD_PORT < <(python -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
HOST="$(hostname -s)"
NODE="$(slurmd -C | head -n 1)"
CPUS="$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$NODE")"
MEM="$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<<"$NODE")"
[ -n "$CPUS" ] && [ -n "$MEM" ] || die "cannot read CPUs / RealMemory from 'slurmd -C': $NODE"

# munge: own key, socket and state, run as the munge user (munged refuses insecure paths).
M="$WORK/munge"
mkdir -p "$M"/{etc,run,lib,log}
dd if=/dev/urandom of="$M/etc/munge.key" bs=1024 count=1 status=none
chown -R munge:munge "$M"
chmod 755 "$M" "$M/run"
chmod 700 "$M/etc" "$M/log"
chmod 711 "$M/lib"
chmod 400 "$M/etc/munge.key"
SOCK="$M/run/munge.socket.2"
start munged /usr/sbin/munged setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged -F \
    --socket="$SOCK" --key-file="$M/etc/munge.key" --pid-file="$M/run/munged.pid" \
    --log-file="$M/log/munged.log" --seed-file="$M/lib/munged.seed"
for i in $(seq 50); do
    munge -S "$SOCK" -n 2>/dev/null | unmunge -S "$SOCK" >/dev/null 2>&1 && break
    [ "$i" = 50 ] && { cat "$WORK/munged.out"; die "munged did not start"; }
    sleep 0.2
done

S="$WORK/slurm"
mkdir -p "$S"/{ctld,spool,log}
export SLURM_CONF="$S/slurm.conf"
cat >"$SLURM_CONF" <<EOF
# One-node test cluster of tests/slurm/run_slurm_test.sh (no cgroups, no accounting database).
ClusterName=dpcltest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
StateSaveLocation=$S/ctld
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# Without slurmdbd, finished jobs are recorded here and kept by squeue for MinJobAge seconds.
JobCompType=jobcomp/filetxt
JobCompLoc=$S/log/jobcomp.log
MinJobAge=3600
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
PlugStackConfig=/dev/null
ReturnToService=2
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=dpcltest Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
start slurmctld /usr/sbin/slurmctld /usr/sbin/slurmctld -D -f "$SLURM_CONF"
start slurmd /usr/sbin/slurmd /usr/sbin/slurmd -D -f "$SLURM_CONF"
CLUSTER_UP=1
for i in $(seq 120); do
    state="$(sinfo -h -N -n "$HOST" -o %t 2>/dev/null || true)"
    [ "$state" = idle ] && break
    [ "$i" = 120 ] && { cat "$WORK"/slurm*.out; die "node $HOST not idle after 60 s (state '$state')"; }
    sleep 0.5
done
T_CLUSTER=$(($(date +%s) - T_SETUP))
log "cluster up: node $HOST ($CPUS CPUs, $MEM MB), partition dpcltest, ports $CTLD_PORT/$SLURMD_PORT"

# The jobstep plugin strips SLURM_* (SLURM_CONF too) before its nested `srun`; real clusters
# keep slurm.conf in /etc/slurm or run configless, this one lives in $WORK: a shim puts it back.
mkdir -p "$WORK/bin"
printf '#!/bin/sh\nSLURM_CONF=%s exec %s "$@"\n' "$SLURM_CONF" "$(command -v srun)" >"$WORK/bin/srun"
chmod +x "$WORK/bin/srun"
export PATH="$WORK/bin:$PATH"

# --- 3. the workflow: local reference run, then through SLURM ------------------------------
R="$WORK/run"
mkdir -p "$R/local" "$R/slurm" "$R/fail"
python "$HELPERS" prepare "$R"
python "$HELPERS" test-profile "$R" "$CPUS" "$MEM" dpcltest
RETRIES="$(python -c "import yaml; print(yaml.safe_load(open('$REPO/profiles/slurm/config.yaml')).get('retries', 0))")"

snakemake_in() { # dir configfile log [targets...]: the workflow under an outer timeout
    local dir=$1 cfg=$2 out=$3 rc=0
    shift 3
    # In the background and waited for, so that Ctrl-C / SIGTERM reach the cleanup at once.
    (cd "$REPO" && exec timeout --kill-after=30 "$SNAKEMAKE_TIMEOUT" snakemake "$@" --snakefile Snakefile \
        --directory "$dir" --configfile "$cfg") >"$out" 2>&1 &
    SM_PID=$!
    echo "pid $SM_PID $(readlink -f "$(command -v timeout)")" >>"$STATE"
    wait "$SM_PID" || rc=$?
    SM_PID=""
    return "$rc"
}

log "local reference run (--cores 2)"
t=$(date +%s)
snakemake_in "$R/local" "$R/config.yaml" "$R/local.log" --cores 2 ||
    { tail -n 30 "$R/local.log"; die "the local run failed"; }
T_LOCAL=$(($(date +%s) - t))
log "local run done in ${T_LOCAL} s"

log "SLURM run: snakemake --profile slurm --profile <test overrides> (from $REPO)"
t=$(date +%s)
rc=0
snakemake_in "$R/slurm" "$R/config.yaml" "$R/slurm.log" --profile slurm --profile "$R/test-profile" || rc=$?
T_SLURM=$(($(date +%s) - t))
[ "$rc" = 124 ] || [ "$rc" = 137 ] && die "the SLURM run hung (killed after $SNAKEMAKE_TIMEOUT s)"
[ "$rc" = 0 ] || { tail -n 40 "$R/slurm.log"; die "the SLURM run failed (exit $rc)"; }
grep -q "Using profiles slurm and " "$R/slurm.log" || die "'--profile slurm' did not resolve to the repository's profile"
log "SLURM run done in ${T_SLURM} s; checking that SLURM ran the jobs and the outputs equal the local run's"
python "$HELPERS" check-run "$R" "$S/log/jobcomp.log" "$S/log/slurmd.log" || die "checks of the SLURM run"
N_JOBS="$(cat "$R/n_slurm_jobs")"

# --- 4. a job that fails inside SLURM ------------------------------------------------------
log "failing run: features with a damaged checkpoint file (profile retries: $RETRIES)"
t=$(date +%s)
rc=0
snakemake_in "$R/fail" "$R/config_fail.yaml" "$R/fail.log" results/features/fashion_mnist/tiny/train.npz \
    --profile slurm --profile "$R/test-profile" || rc=$?
T_FAIL=$(($(date +%s) - t))
python "$HELPERS" check-failure "$R/fail.log" "$rc" "$S/log/jobcomp.log" "$RETRIES" || die "checks of the failing run"
log "failing run ended in ${T_FAIL} s"
N_FAIL="$(grep -c 'has been submitted with SLURM jobid' "$R/fail.log")"

log "SLURM's own history (squeue --states=all; MinJobAge keeps finished jobs an hour):"
squeue --states=all -h -o '%i %T %k' | sort -n | awk '{printf "    job %-4s %-10s %s\n", $1, $2, $3}'
n_hist="$(squeue --states=all -h -o %i | wc -l)"
[ "$n_hist" = $((N_JOBS + N_FAIL)) ] || die "squeue lists $n_hist jobs, the runs submitted $((N_JOBS + N_FAIL))"

TOTAL=$(($(date +%s) - T0))
log "times: cluster setup ${T_CLUSTER} s, local run ${T_LOCAL} s, SLURM run ${T_SLURM} s, failing run ${T_FAIL} s"
teardown 1
[ "$STOP_FAILED" = 0 ] || die "a daemon did not stop"
echo "SLURM integration test: PASSED ($N_JOBS jobs via SLURM + $N_FAIL failing attempts, ${TOTAL} s)"
