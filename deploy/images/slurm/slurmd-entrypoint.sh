#!/bin/bash
# slurmd's entrypoint: `slurmd -D $SLURMD_OPTIONS <args>` (evaluated by the
# shell once, see lib.sh), with sshd beside it as in Slinky's slurmd image.
#
# From the pod's environment, as Slinky's image does:
#   POD_CPUS      the CPUs the pod may use; when the machine has more cores,
#                 CoreSpecCount=<cores - POD_CPUS/threads per core> joins --conf
#   POD_MEMORY    the pod's memory limit in MiB; when the machine has more,
#                 MemSpecLimit=<RealMemory - POD_MEMORY> joins --conf
#   POD_TOPOLOGY  when set, Topology=<it> joins --conf
#   SSHD_OPTIONS  sshd's extra options (evaluated like SLURMD_OPTIONS)
#   SLURMD_SSHD=0 do not start sshd
#   SLURMD_REGISTRATION_CHECK  seconds between the checks that slurmctld still
#                 has this dynamic node (default 10, 0: none; watch_registration)
# Items join the value of the first --conf (or --conf=VALUE) in the options;
# without one, "--conf ITEMS" is added. An empty "Topology=" item (an unset
# topology variable) is dropped from --conf instead of being passed on,
# since slurmd would register with it and the items after it misparse.
set -euo pipefail
# lib.sh sits in ../lib/slurmop/ (in the image: /usr/local/lib/slurmop/lib.sh).
. "$(dirname "$(readlink -f "$0")")/../lib/slurmop/lib.sh"

eval_options "${SLURMD_OPTIONS:-} $*"
ARGS=("${OPTS[@]}")

# conf_add ITEM: add ITEM to the --conf value in ARGS.
conf_add() {
    local i n=${#ARGS[@]}
    for ((i = 0; i < n; i++)); do
        case ${ARGS[$i]} in
            --conf=*) ARGS[$i]="${ARGS[$i]} $1"; return ;;
            --conf) if ((i + 1 < n)); then ARGS[$((i + 1))]="${ARGS[$((i + 1))]} $1"; return; fi ;;
        esac
    done
    ARGS+=(--conf "$1")
}

# conf_tidy: drop empty "Topology=" items from --conf values. Items may be
# separated by any white space, the vertical tab included (slurmop's
# operator joins them with one); a value with nothing to drop is kept as
# it was, separators and all.
conf_tidy() {
    local i n=${#ARGS[@]} v w out pre
    for ((i = 0; i < n; i++)); do
        pre=""
        case ${ARGS[$i]} in
            --conf=*) pre=--conf=; v=${ARGS[$i]#--conf=} ;;
            --conf) ((i + 1 < n)) || continue; i=$((i + 1)); v=${ARGS[$i]} ;;
            *) continue ;;
        esac
        case " $v " in *[[:space:]]Topology=[[:space:]]*) ;; *) continue ;; esac
        out=""
        local IFS=$' \t\n\v'
        set -f
        for w in $v; do
            [ "$w" = Topology= ] && continue
            out+="${out:+ }$w"
        done
        set +f
        unset IFS
        ARGS[$i]="$pre$out"
    done
}

# hw KEY: a number from `slurmd -C` (this machine as slurmd sees it).
HW=""
hw() {
    [ -n "$HW" ] || HW=$(slurmd -C 2>/dev/null | head -n 1)
    local v
    v=$(printf '%s\n' "$HW" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1)
    echo "${v:-0}"
}

POD_CPUS=${POD_CPUS:-0}
POD_MEMORY=${POD_MEMORY:-0}
if [ "$POD_CPUS" -gt 0 ] 2>/dev/null; then
    boards=$(hw Boards) sockets=$(hw SocketsPerBoard) cores=$(hw CoresPerSocket) threads=$(hw ThreadsPerCore)
    [ "$boards" -gt 0 ] || boards=1
    [ "$threads" -gt 0 ] || threads=1
    spec=$((boards * sockets * cores - POD_CPUS / threads))
    if [ "$spec" -gt 0 ]; then conf_add "CoreSpecCount=$spec"; fi
fi
if [ "$POD_MEMORY" -gt 0 ] 2>/dev/null; then
    spec=$(($(hw RealMemory) - POD_MEMORY))
    if [ "$spec" -gt 0 ]; then conf_add "MemSpecLimit=$spec"; fi
fi
if [ -n "${POD_TOPOLOGY:-}" ]; then conf_add "Topology=$POD_TOPOLOGY"; fi
conf_tidy

mkdir -p /run/slurm /var/spool/slurmd /var/log/slurm
# slurmd refuses a RuntimeDir (/run/slurm) that is not its own user's
# ("exists but is owned by ..."): a volume or an older image may have left
# one of another owner.
if [ "$(id -u)" = 0 ] && [ "$(stat -c %u /run/slurm)" != 0 ]; then chown root:root /run/slurm; fi

run_slurmd() { exec slurmd -D "${ARGS[@]}"; }
run_sshd() {
    eval_options "${SSHD_OPTIONS:-}"
    exec /usr/sbin/sshd -D -e "${OPTS[@]}"
}

# node_name: the name slurmd registers under (-N NAME, else the host name).
node_name() {
    local i n=${#ARGS[@]}
    for ((i = 0; i < n; i++)); do
        case ${ARGS[$i]} in
            -N) if ((i + 1 < n)); then echo "${ARGS[$((i + 1))]}"; return; fi ;;
            -N?*) echo "${ARGS[$i]#-N}"; return ;;
        esac
    done
    hostname
}

# watch_registration: slurmd -Z (a dynamic node) registers once, when it
# starts. A slurmctld restarted without its state (no persistence) no
# longer knows the node, and 24.11's slurmd never registers again by
# itself. So once slurmctld has shown the node, it is asked for it every
# SLURMD_REGISTRATION_CHECK seconds (default 10; 0: never); after 3 answers
# in a row that it has no such node (an answer by name: slurmctld knows no
# job there), slurmd is stopped and the container, started again by the
# kubelet, registers the node anew. An unreachable slurmctld is no answer.
watch_registration() {
    local every=${SLURMD_REGISTRATION_CHECK:-10} name seen=0 misses=0 out sp=""
    # A sleep of ours must not outlive the entrypoint (supervise's TERM).
    trap '[ -z "$sp" ] || kill "$sp" 2>/dev/null; exit 0' TERM INT
    nap() {
        sleep "$every" </dev/null &
        sp=$!
        wait "$sp"
        sp=""
    }
    name=$(node_name)
    while nap; do
        if out=$(scontrol show node "$name" 2>&1); then
            seen=1 misses=0
            continue
        fi
        case $out in
            *"Node $name not found"*) [ "$seen" = 0 ] || misses=$((misses + 1)) ;;
            *) misses=0 ;;
        esac
        if [ "$misses" -ge 3 ]; then
            log "slurmctld no longer has node $name (3 reads, ${every} s apart): stopping slurmd so that it registers again"
            pkill -TERM -x slurmd || true
            while nap; do :; done
        fi
    done
}

log "slurmd -D ${ARGS[*]}"
sides=()
case " ${ARGS[*]} " in
    *" -Z "*) [ "${SLURMD_REGISTRATION_CHECK:-10}" = 0 ] || sides+=(watch_registration) ;;
esac
if [ "${SLURMD_SSHD:-1}" != 0 ] && [ "$(id -u)" = 0 ]; then
    host_keys
    sides+=(run_sshd)
fi
[ ${#sides[@]} -gt 0 ] || run_slurmd
supervise run_slurmd -- "${sides[@]}"
