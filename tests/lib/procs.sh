# procs.sh: sourced by tests/slurm/slurmlab.sh and tests/k8s/cluster.sh,
# which start daemons with a tag in their environment and keep their PIDs in
# files.

# launched PID TAG VALUE: PID is a process the sourcing script started: it
# carries TAG=VALUE in its environment (the script's launch puts it there),
# or it is still the fork of this very run that is about to exec into the
# daemon. PIDs are reused (pid_max is 32768 on the CI machine): the PID file
# of a daemon that died can name another process by the time it is read, so
# a PID from a file is signalled only when this holds.
launched() {
    [ -n "${1:-}" ] && [ -r "/proc/$1/environ" ] || return 1
    if tr '\0' '\n' < "/proc/$1/environ" 2>/dev/null | grep -qxF "$2=$3"; then return 0; fi
    [ "$(cut -d')' -f2 "/proc/$1/stat" 2>/dev/null | cut -d' ' -f3)" = "$$" ]
}
