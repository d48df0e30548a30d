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

log "slurmd -D ${ARGS[*]}"
if [ "${SLURMD_SSHD:-1}" = 0 ] || [ "$(id -u)" != 0 ]; then
    run_slurmd
fi
host_keys
supervise run_slurmd -- run_sshd
