# lib.sh: shared by the entrypoints of slurmop's Slurm images (sourced).
#
# The contract these entrypoints keep is the one Slinky's images keep, so
# that a pod spec written for Slinky's images works with these:
#   - a daemon's options are "$<DAEMON>_OPTIONS $*" (the environment variable
#     first, then the container's args), and that string is evaluated ONCE by
#     a shell, as Slinky's supervisord command lines do (`bash -c "exec
#     slurmd ... $SLURMD_OPTIONS"`): quotes group words, and $VARS from the
#     container's environment expand (e.g. --conf 'Topology='"$SLINKY_TOPOLOGY"'');
#   - configuration is found the way the daemons find it by default
#     (/etc/slurm/slurm.conf, /etc/slurm/slurm.key), or fetched with
#     --conf-server (configless);
#   - the daemons run in the foreground (-D), so they log to stderr as well.
# Unlike Slinky's, there is no supervisord: tini is PID 1 and reaps orphans,
# a daemon that runs alone is exec'd, and where two run (slurmd + sshd,
# sshd + sackd) this shell waits for them (see supervise below).

log() { printf '[%s] %s: %s\n' "$(date -u +%FT%TZ)" "${0##*/}" "$*" >&2; }

# eval_options STRING: sets OPTS to the words of STRING as a shell parses
# them (quotes removed, $VARS expanded). Evaluated once here, so what
# follows never re-splits a value.
eval_options() {
    OPTS=()
    # No pathname expansion: a '[' or '*' in a value (a hostlist, a GRES)
    # stays as written, whatever files the working folder holds.
    set -f
    eval "OPTS=($1)"
    set +f
}

# foreground_flag DAEMON: "-D" when DAEMON takes it, else nothing: sackd had
# no -D before Slurm 25.05 and forks into the background (its --systemd keeps
# it in front only with a systemd notify socket to answer, which these images
# do not run); run_forking then waits for the process it leaves.
foreground_flag() {
    # The whole usage first: grep -q stopping early would kill the writer
    # with SIGPIPE, which pipefail turns into a failed test.
    local usage
    usage=$("$1" -h 2>&1 || true)
    if printf '%s\n' "$usage" | grep -E '^[[:space:]]+-D([[:space:],]|$)' >/dev/null; then
        echo -D
    fi
}

# run_forking NAME CMD...: run CMD, a daemon called NAME that forks into the
# background and whose first process exits; then wait while the newest NAME
# process runs, passing SIGTERM/SIGINT on to it, so that whoever started this
# (the container, or supervise below) sees the daemon's end as this one's.
# A daemon in the background restarts itself as a new process on every
# reconfigure (Slurm 24.05 and later fork, and the old process exits once
# the new one runs), so the wait follows the newest NAME process: waiting on
# the first PID alone took the first reconfigure for the daemon's end, and
# the second daemon started then failed on the first one's socket every
# second (24.11's sackd, which has no -D). pgrep sees the container's own
# processes only (its PID namespace: --ns would need CAP_SYS_PTRACE to read
# another user's namespace links, which a pod does not have).
# Returns 1 when the daemon is gone (or never stayed).
run_forking() {
    local name=$1 pid next; shift
    ( "$@" ) || return
    pid=$(pgrep -n -x "$name") || { log "$name left no process"; return 1; }
    trap 'kill -TERM "$pid" 2>/dev/null' TERM INT
    while :; do
        while kill -0 "$pid" 2>/dev/null; do sleep 1; done
        next=$(pgrep -n -x "$name") || break
        log "$name (pid $pid) restarted itself as pid $next"
        pid=$next
    done
    trap - TERM INT
    log "$name (pid $pid) ended"
    return 1
}

# as_slurm CMD...: run CMD as SlurmUser (slurm, uid 401) when started as
# root, as the caller otherwise (a pod that already sets runAsUser). CMD is
# run by its full path: sackd re-executes itself on every reconfigure with
# execve(argv[0]), which finds no "sackd" relative to its working folder, so
# a bare name made it die on the first `scontrol reconfigure` and leave the
# login pod without sack.socket until it was started again.
as_slurm() {
    local cmd
    cmd=$(command -v "$1") || { log "$1: not found"; return 127; }
    shift
    if [ "$(id -u)" = 0 ]; then
        exec setpriv --reuid=slurm --regid=slurm --init-groups -- "$cmd" "$@"
    fi
    exec "$cmd" "$@"
}

# host_keys: make the SSH host keys that are missing (mounted ones are kept).
host_keys() {
    mkdir -p /run/sshd
    chmod 0755 /run/sshd
    ssh-keygen -A >/dev/null
}

# supervise MAIN -- SIDE...: MAIN and SIDE are names of shell functions that
# exec a daemon. Starts them all; SIGTERM/SIGINT are passed on to every one;
# a side daemon that exits is started again after a second (like
# supervisord's autorestart); when MAIN exits, the others are stopped and the
# container exits with MAIN's status.
supervise() {
    local main=$1; shift
    [ "${1:-}" = -- ] && shift
    local -A name_of=()
    local pid main_pid rc stopping=0
    "$main" & main_pid=$!
    name_of[$main_pid]=$main
    local s
    for s in "$@"; do
        "$s" & pid=$!
        name_of[$pid]=$s
    done
    trap 'stopping=1; kill -TERM "${!name_of[@]}" 2>/dev/null || true' TERM INT
    while :; do
        pid="" rc=0
        # (|| keeps set -e from ending the script on a daemon's failure.)
        wait -n -p pid || rc=$?
        [ -n "$pid" ] || continue # a trapped signal interrupted wait
        s=${name_of[$pid]}
        unset "name_of[$pid]"
        if [ "$pid" = "$main_pid" ]; then
            log "$s exited ($rc); stopping the others"
            if [ ${#name_of[@]} -gt 0 ]; then
                kill -TERM "${!name_of[@]}" 2>/dev/null || true
                wait || true
                log "all stopped"
            fi
            exit "$rc"
        fi
        if [ "$stopping" = 0 ]; then
            log "$s exited ($rc); starting it again"
            sleep 1
            "$s" & pid=$!
            name_of[$pid]=$s
        fi
    done
}
