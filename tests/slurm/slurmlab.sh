#!/usr/bin/env bash
# slurmlab.sh — a real Slurm (22.05, 24.11 or 26.05) on loopback for slurmop's
# tests and benchmarks.
#
# One lab = one directory holding everything (config, keys, state, spool,
# logs, PID files): munged, slurmctld, one slurmd per static node (several on
# this host, each on its own port), optional extra nodes without a slurmd (for
# scale), an optional dynamic node, and slurmrestd with JWT auth on a loopback
# port. Ports are the caller's or free ones, so two labs can run side by side.
# It installs nothing (tests/deps.sh does); it runs as root.
#
# Versions (SLURMLAB_VERSION): 22.05 (the default) runs the host's Debian 12
# packages. 24.11 and 26.05 run Debian trixie's and forky's packages from a
# root file system that debootstrap builds once into a cache outside the clone
# (see "root file systems" below); every daemon and client of such a lab runs
# chrooted into it, in a private mount namespace of its own that holds the
# mounts it needs (the lab directory at its own path, /proc, /dev, /sys,
# /etc/hosts): the kernel drops those mounts when the last process in the
# namespace exits, so nothing is ever mounted on the host and a stopped (or
# killed) lab leaves no mount behind. The loopback network is shared, so the
# ports on 127.0.0.1 work as with the host's packages.
#
# Commands:
#   start [N]          start a lab with N static nodes (default 3); prints the
#                      sourceable environment (see `env`); exit 77 when the Slurm
#                      binaries are missing or (24.11, 26.05) the root file
#                      system cannot be built for want of a reachable mirror
#   stop [--clean]     stop everything the lab started (idempotent; nothing is
#                      left running); --clean also removes the lab directory;
#                      24.11, 26.05: exit 1 when a process still runs in the
#                      root file system for this lab or a mount is left below it
#   status             one line per daemon; exit 0 when all run, 3 otherwise
#   env                print the environment of a started lab:
#                      SLURMLAB_DIR SLURM_CONF SLURMRESTD_URL SLURMRESTD_USER
#                      SLURMRESTD_TOKEN SLURMLAB_JWT_KEY SLURMLAB_NODE_NAMES
#                      SLURMLAB_EXTRA_HOSTLIST SLURMLAB_VERSION SLURMLAB_BIN
#                      SLURMLAB_API SLURMLAB_DATA_PARSERS (see below)
#   token [USER] [SECS]  print a JWT for USER (default root) valid SECS seconds
#                      (default 86400; a negative value gives an expired token),
#                      minted offline from the lab's key
#   restart-ctld [--lose-state] [--down SECS]
#                      stop slurmctld (SIGTERM; it saves its state), stay down
#                      SECS seconds (default 0), start it again; with its state
#                      kept (StateSaveLocation: jobs, node drains) or, with
#                      --lose-state, with the state directory emptied and
#                      slurmctld -c (jobs and drains forgotten)
#   restart-dynamic    stop the dynamic node's slurmd (its running job steps
#                      stay) and start it again, so that it registers anew
#                      (after restart-ctld --lose-state slurmctld has no
#                      record of it until then)
#
# Settings (environment):
#   SLURMLAB_DIR          lab directory; start creates a fresh temporary one when
#                         unset; every other command needs it
#   SLURMLAB_NODES        number of static nodes (also `start N`), named
#   SLURMLAB_NODE_PREFIX  PREFIX1..PREFIXN (default prefix "n"), or
#   SLURMLAB_NODE_NAMES   an explicit space-separated list (e.g. "slinky-0 slinky-1")
#   SLURMLAB_NODE_PORTS   space-separated slurmd ports, one per static node
#   SLURMLAB_CTLD_PORT, SLURMLAB_REST_PORT, SLURMLAB_SLURMD_PORT  (free ones when unset)
#   SLURMLAB_EXTRA_NODES  count of extra nodes without slurmd (partition "extra"),
#   SLURMLAB_EXTRA_PREFIX named PREFIX00001.. (default "g", 5 digits)
#   SLURMLAB_DYNAMIC=1    also run one dynamic node (slurmd -Z) named dyn1, or
#   SLURMLAB_DYNAMIC_NAME (any name Slurm takes: "kn-3.lab.example", "KN-3"); its
#                         slurmd's files keep the name slurmd.dyn1
#   SLURMLAB_DYNAMIC_CONF the dynamic node's --conf value, passed to slurmd as
#                         one argument (default "CPUs=<cpus> RealMemory=<mem>
#                         Feature=dyn"); restart-dynamic takes a new one
#   SLURMLAB_CPUS, SLURMLAB_MEM   per-node CPUs and RealMemory (default 2, 1000)
#   SLURMLAB_REST_USER    user slurmrestd runs as (default nobody)
#   SLURMLAB_SLURM_USER   SlurmUser, the user slurmctld runs as (default root);
#                         "slurm" (the Debian packages' user) makes it the
#                         user Slinky's clusters run slurmctld as, and whose
#                         tokens slurmop mints: only root and SlurmUser may
#                         update nodes, so slurmop's REST writes (24.11, 26.05)
#                         need it
#   SLURMLAB_EXTRA_CONF   lines appended to slurm.conf (e.g. "SlurmdTimeout=10")
#   SLURMLAB_CONF_FROM    a slurm.conf to run instead of the lab's own (one that
#                         slurmop generated, taken from its ConfigMap): start
#                         rewrites only what names this host (see "a given
#                         slurm.conf" below) and keeps every other line; the
#                         static nodes default to none then (SLURMLAB_NODES
#                         still adds some, partition "debug")
#   SLURMLAB_VERSION      22.05 (default, the host's packages), 24.11 (Debian
#                         trixie) or 26.05 (Debian forky)
#   SLURMLAB_ROOTFS_CACHE where root file systems are kept (default
#                         ${XDG_CACHE_HOME:-$HOME/.cache}/slurmop/slurmlab-rootfs)
#   SLURMLAB_MIRROR       Debian mirror for debootstrap (default: the host's apt mirror)
#   SLURMLAB_ROOTFS_REFRESH=1  build a new root file system even when one is cached
#                         (a newer Slurm in the suite gets a folder of its own)
#
# A given slurm.conf (SLURMLAB_CONF_FROM): these keys are rewritten, every
# other line is copied as it is (MaxNodeCount, TreeWidth, MessageTimeout, the
# NodeSet and PartitionName lines, SlurmctldParameters, ...):
#   SlurmctldHost         the first becomes "localhost", the others (backup
#                         controllers) are dropped; SlurmctldAddr is dropped
#   SlurmctldPort, SlurmdPort   the lab's ports
#   SlurmUser             SLURMLAB_SLURM_USER (default root)
#   StateSaveLocation, SlurmdSpoolDir, SlurmctldLogFile, SlurmdLogFile,
#   SlurmSchedLogFile, SlurmctldPidFile, SlurmdPidFile   the lab's folders
#   AuthAltParameters     jwt_key= the lab's key; jwks= dropped (no JWKS here)
#   AccountingStorage*    accounting_storage/none (the lab has no slurmdbd)
#   ProctrackType, TaskPlugin   proctrack/linuxproc, task/none, and cgroup.conf
#                         CgroupPlugin=disabled (24.11, 26.05): the root file
#                         system has no cgroup file system to use and this
#                         machine runs cgroup v1, where a pod's image has
#                         cgroup/v2
#   22.05 only: AuthType, CredType, AuthInfo  auth/munge and cred/munge over
#                         the lab's munged (22.05 has no auth/slurm), and
#                         SelectType=select/cons_tres (the default of 23.11
#                         on, which dynamic nodes need; 22.05's is cons_res); the
#                         newer versions keep auth/slurm and cred/slurm with a
#                         slurm.key made in etc/ beside slurm.conf (where
#                         Slurm looks for it; SLURMLAB_SLURM_KEY names it)
# Every change is listed in etc/slurm.conf.rewrites ("- old" / "+ new" lines,
# SLURMLAB_CONF_REWRITES) and printed by start.
#
# Daemons of the caller's own: a program that starts more slurmd in a lab
# (dynamic nodes, slurmd -Z) runs them as
#   env SLURMLAB_TAG=$SLURMLAB_DIR $SLURMLAB_RUN slurmd -D -Z -N NAME ...
# (SLURMLAB_RUN is the root file system's runner, empty for 22.05) with
# their PID in $SLURMLAB_DIR/run/slurmd.NAME.pid: stop stops them with the
# lab's own. Several slurmd -Z on this host need a port each: 24.11 and 26.05
# take Port= in --conf (22.05 refuses it); and a /run/slurm each, where they
# bind their auth socket (two binding the root file system's one at once
# made one exit): SLURMLAB_RUN_DIR=<a folder of the lab> in the runner's
# environment is bound there.
#
# Exported by start/env besides the paths and ports:
#   SLURMLAB_BIN          a folder of scontrol sbatch squeue sinfo sdiag srun
#                         scancel sacct munge unmunge for this lab's version (wrappers that
#                         run them in the root file system; links to the host's
#                         binaries for 22.05); put it first in PATH
#   SLURMLAB_API          the data parser a client of this version should use
#                         (v0.0.38, v0.0.42, v0.0.45)
#   SLURMLAB_DATA_PARSERS every data parser slurmrestd serves, newest last
#   SLURMLAB_RUN          the runner of a chrooted lab's programs (empty: 22.05)
#   SLURMLAB_SLURMD_PORT  SlurmdPort
#   SLURMLAB_CONF_REWRITES  the lines a given slurm.conf had rewritten (empty
#                         file for the lab's own slurm.conf)
#   SLURMLAB_SLURM_KEY     auth/slurm's key (24.11, 26.05; made for every lab)
#
# Root file systems: <cache>/<suite>-<slurm version>, made by
#   debootstrap --variant=minbase --include=<the packages below> <suite>
# into <cache>/.tmp.<suite>.XXXXXX (in a mount namespace of its own, so an
# interrupted debootstrap leaves no mount), then marked complete and renamed
# into place; a folder without the marker, or made for another package list,
# is never used, and leftovers of interrupted builds are removed by the next
# build (which holds <cache>/.lock). Builds take about a minute and need the
# mirror; a start that cannot build one exits 77.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib/procs.sh
source "$HERE/../lib/procs.sh"

SLURM_BINS=(munged mungekey munge unmunge slurmctld slurmd slurmrestd scontrol sinfo squeue scancel setpriv python3 curl)
HOST_BINS=(python3 curl unshare chroot mount ss flock) # what a chrooted lab needs of the host
# the wrappers of SLURMLAB_BIN
CLIENTS=(scontrol sbatch salloc squeue sinfo sdiag srun scancel sacct munge unmunge)
# Packages of a root file system (comma-separated, for debootstrap --include);
# changing the list makes every cached root file system stale.
ROOTFS_PKGS=slurmctld,slurmd,slurmrestd,slurm-client,munge,slurm-wlm-basic-plugins,slurm-wlm-jwt-plugin
ROOTFS_MARK=.slurmlab-rootfs # written last into a complete root file system

VERSION=${SLURMLAB_VERSION:-22.05}
# Per version: the Debian suite, the debootstrap script it needs (bookworm's
# debootstrap has none for forky: sid's works for any testing/unstable
# suite), the data parser clients should use, and the slurmrestd plugins.
case $VERSION in
    22.05)
        SUITE="" API=v0.0.38
        # the dbv0.0.3x plugins abort without slurmdbd
        OPENAPI_PLUGINS=openapi/v0.0.38,openapi/v0.0.37,openapi/v0.0.36 ;;
    24.11)
        SUITE=trixie DEBOOTSTRAP_SCRIPT="" API=v0.0.42
        # 23.11 folded the per-version plugins into openapi/slurmctld (the
        # data parsers v0.0.40-42 are loaded by default); openapi/slurmdbd
        # would need a slurmdbd.
        OPENAPI_PLUGINS=openapi/slurmctld ;;
    26.05)
        SUITE=forky DEBOOTSTRAP_SCRIPT=/usr/share/debootstrap/scripts/sid API=v0.0.45
        OPENAPI_PLUGINS=openapi/slurmctld ;;
    *) printf 'slurmlab: error: SLURMLAB_VERSION=%s: want 22.05, 24.11 or 26.05\n' "$VERSION" >&2; exit 2 ;;
esac
ROOTFS="" # set by rootfs_ensure (start) or read from the lab (other commands)
RUN=()    # prefix that runs a Slurm or munge binary of this lab's version

say() { printf 'slurmlab: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# ---- helpers -------------------------------------------------------------

# $1 distinct free TCP ports, reserved host-wide and outside the ephemeral
# range, so that no other lab or connection takes one before our daemon
# binds it or while it restarts; held until do_stop gives them back (see
# tests/lib/ports.py).
free_ports() { python3 "$HERE/../lib/ports.py" "$1" --owner "$LAB"; }
release_ports() { python3 "$HERE/../lib/ports.py" --release "$LAB" || true; }

port_busy() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

# A zombie counts as gone: it has exited and only waits for its parent (or
# init) to collect it.
alive() {
    [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null || return 1
    local st
    st=$(cut -d')' -f2 "/proc/$1/stat" 2>/dev/null | cut -d' ' -f2) || return 1
    [ -n "$st" ] && [ "$st" != Z ]
}

now_ms() { date +%s%3N; }

# poll TIMEOUT_MS WATCH_PID CMD...: run CMD every 50 ms until it succeeds;
# fail when the time is up or when WATCH_PID (if non-empty) has exited.
poll() {
    local limit=$(( $(now_ms) + $1 )) watch=$2; shift 2
    until "$@" >/dev/null 2>&1; do
        if [ -n "$watch" ] && ! alive "$watch"; then return 2; fi
        [ "$(now_ms)" -lt "$limit" ] || return 1
        sleep 0.05
    done
}

# launch NAME CMD...: start CMD as a daemon of its own session, stdout and
# stderr to log/NAME.out, PID in run/NAME.pid. setsid(1) only forks when its
# caller already leads a process group, so we skip it in that case and $! is
# always the daemon itself. SLURMLAB_TAG marks the process and what it forks
# (slurmstepd inherits slurmd's environment), so stop can find stragglers.
launch() {
    local name=$1; shift
    (
        cd "$LAB"
        read -r _ _ _ _ pgrp _ < "/proc/$BASHPID/stat"
        if [ "$pgrp" = "$BASHPID" ]; then exec env SLURMLAB_TAG="$LAB" "$@"; fi
        exec setsid env SLURMLAB_TAG="$LAB" "$@"
    ) </dev/null >>"$LAB/log/$name.out" 2>&1 &
    echo $! > "$LAB/run/$name.pid"
}

# pid_of NAME: the PID of run/NAME.pid while that process is this lab's,
# nothing otherwise. PIDs are reused (pid_max is 32768 on the CI machine):
# the file of a daemon that died (tests kill slurmd and slurmrestd on
# purpose) can name another process by the time the lab stops, another
# lab's slurmd or a job's process, which stop would then have signalled
# (jobs of a lab beside it that ended or never started).
pid_of() {
    local p
    p=$(cat "$LAB/run/$1.pid" 2>/dev/null) || return 0
    if launched "$p" SLURMLAB_TAG "$LAB"; then echo "$p"; fi
    return 0
}

# watch_pid NAME: the PID launch just wrote for NAME, for a poll's watch
# only (it is never signalled). Not pid_of: a daemon that dies at once (a
# slurmctld refusing its slurm.conf exits within milliseconds) is gone
# before pid_of can read its environment, and the poll then waited its
# whole timeout instead of seeing the death (20 s per refused start).
watch_pid() {
    cat "$LAB/run/$1.pid" 2>/dev/null || true
}

# Names of everything launched (from the PID files), in start order.
daemons() {
    local n
    for n in munged slurmctld; do [ -e "$LAB/run/$n.pid" ] && echo "$n"; done
    for f in "$LAB"/run/slurmd.*.pid; do [ -e "$f" ] && basename "$f" .pid; done
    [ -e "$LAB/run/slurmrestd.pid" ] && echo slurmrestd
    return 0
}

# PIDs of processes carrying this lab's tag (stragglers such as slurmstepd).
tagged_pids() {
    python3 -c '
import os, sys
want = b"SLURMLAB_TAG=" + sys.argv[1].encode()
for pid in os.listdir("/proc"):
    if not pid.isdigit() or int(pid) in (os.getpid(), int(sys.argv[2])):
        continue
    try:
        env = open("/proc/%s/environ" % pid, "rb").read().split(b"\0")
    except OSError:
        continue
    if want in env:
        print(pid)' "$LAB" "$$"
}

# descendants PID...: the PIDs given and every process below them.
descendants() {
    python3 -c '
import os, sys
parent = {}
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            stat = open("/proc/%s/stat" % pid).read()
        except OSError:
            continue
        parent[int(pid)] = int(stat.rsplit(")", 1)[1].split()[1])
todo, seen = [int(p) for p in sys.argv[1:]], set()
while todo:
    p = todo.pop()
    if p in seen:
        continue
    seen.add(p)
    todo.extend(c for c, pp in parent.items() if pp == p)
print(" ".join(map(str, sorted(seen))))' "$@"
}

# terminate WAIT_MS PID...: SIGTERM all at once, wait up to WAIT_MS, then
# SIGKILL the rest and wait (bounded) until they are gone.
terminate() {
    local wait_ms=$1; shift
    [ $# -gt 0 ] || return 0
    kill -TERM "$@" 2>/dev/null || true
    local limit=$(( $(now_ms) + wait_ms )) p left
    while :; do
        left=()
        for p in "$@"; do alive "$p" && left+=("$p"); done
        [ ${#left[@]} -eq 0 ] && return 0
        [ "$(now_ms)" -lt "$limit" ] || break
        sleep 0.05
    done
    say "SIGKILL ${left[*]} (still running after SIGTERM)"
    kill -KILL "${left[@]}" 2>/dev/null || true
    limit=$(( $(now_ms) + 5000 ))
    for p in "${left[@]}"; do
        while alive "$p" && [ "$(now_ms)" -lt "$limit" ]; do sleep 0.05; done
    done
}

mint() { # mint KEYFILE USER LIFESPAN
    python3 -c '
import base64, hashlib, hmac, json, sys, time
def b64(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
key = open(sys.argv[1], "rb").read()
now, life = int(time.time()), int(sys.argv[3])
# A lifespan <= 0 asks for a token that expired -life seconds ago.
iat = now if life > 0 else now + life - 60
claims = {"iat": iat, "exp": now + life, "sun": sys.argv[2]}
head = b64(b"{\"alg\":\"HS256\",\"typ\":\"JWT\"}")
body = b64(json.dumps(claims, separators=(",", ":")).encode())
sig = b64(hmac.new(key, (head + "." + body).encode(), hashlib.sha256).digest())
print(head + "." + body + "." + sig)' "$1" "$2" "$3"
}

need_lab() {
    [ -n "$LAB" ] || die "SLURMLAB_DIR is not set"
    [ -d "$LAB" ] || die "no lab at $LAB"
}

# ---- root file systems (24.11, 26.05) ---------------------------------------

rootfs_cache() {
    echo "${SLURMLAB_ROOTFS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slurmop/slurmlab-rootfs}"
}

# The Debian mirror apt uses (deb822 or one-line sources), unless given.
debian_mirror() {
    if [ -n "${SLURMLAB_MIRROR:-}" ]; then echo "$SLURMLAB_MIRROR"; return; fi
    local m
    m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' || true)
    [ -n "$m" ] || m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
        | awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' || true)
    echo "${m:-http://deb.debian.org/debian}"
}

# A complete root file system of SUITE made for today's package list, the
# newest Slurm first; nothing when there is none.
rootfs_find() {
    local cache=$1 suite=$2 d
    for d in $(ls -d "$cache/$suite"-* 2>/dev/null | sort -rV); do
        [ -f "$d/$ROOTFS_MARK" ] && [ "$(sed -n 's/^packages: //p' "$d/$ROOTFS_MARK")" = "$ROOTFS_PKGS" ] \
            && { echo "$d"; return 0; }
    done
    return 0
}

# rootfs_build CACHE SUITE: debootstrap into a temporary folder, then rename
# it to SUITE-<slurm version> and print that. Runs with the cache lock held.
rootfs_build() {
    local cache=$1 suite=$2 tmp ver log t0 mirror
    t0=$(now_ms)
    mirror=$(debian_mirror)
    command -v debootstrap >/dev/null || { say "missing: debootstrap (run tests/deps.sh)"; return 77; }
    # Leftovers of interrupted builds (ours ran in a mount namespace of
    # their own, so nothing is mounted below them).
    rm -rf "$cache"/.tmp."$suite".* "$cache"/.old."$suite".*
    tmp=$(mktemp -d "$cache/.tmp.$suite.XXXXXX")
    # mktemp's 0700 would lock every other user out of the whole tree (munge's
    # postinst runs mungekey as the munge user, the lab runs slurmrestd as nobody).
    chmod 755 "$tmp"
    log=$cache/.debootstrap-$suite.log
    say "building the $suite root file system (Slurm $VERSION) from $mirror; log: $log"
    if ! nice unshare -m --propagation private debootstrap --variant=minbase --include="$ROOTFS_PKGS" \
            "$suite" "$tmp" "$mirror" ${DEBOOTSTRAP_SCRIPT:+"$DEBOOTSTRAP_SCRIPT"} </dev/null >"$log" 2>&1; then
        tail -n 5 "$log" >&2
        cat "$tmp/debootstrap/debootstrap.log" >> "$log" 2>/dev/null || true
        rm -rf "$tmp"
        # No mirror to reach is a reason to skip; anything else is a failure.
        if grep -qiE "Failed getting release file|Couldn't download|Temporary failure|Could not resolve|unable to resolve|Connection refused|Network is unreachable|No route to host|Connection timed out" "$log"; then
            say "cannot build the $suite root file system: $mirror cannot be reached"
            return 77
        fi
        say "debootstrap of $suite failed (log: $log)"
        return 1
    fi
    ver=$(chroot "$tmp" dpkg-query -W -f '${Version}' slurmctld 2>/dev/null) || ver=""
    [ -n "$ver" ] || { rm -rf "$tmp"; say "no slurmctld in the $suite root file system"; return 1; }
    rm -rf "$tmp"/var/cache/apt/archives/*.deb
    # Mount points and files the namespaces bind over. minbase brings no
    # /etc/hosts: the host's is bound over this one, so that "localhost" and
    # the host's name resolve as outside.
    mkdir -p "$tmp/proc" "$tmp/dev" "$tmp/sys"
    [ -e "$tmp/etc/hosts" ] || : > "$tmp/etc/hosts"
    {
        echo "suite: $suite"
        echo "packages: $ROOTFS_PKGS"
        echo "built: $(date -u +%FT%TZ) from $mirror"
        # shellcheck disable=SC2046
        chroot "$tmp" dpkg-query -W -f '${Package} ${Version}\n' $(echo "$ROOTFS_PKGS" | tr , ' ')
    } > "$tmp/$ROOTFS_MARK.part"
    mv "$tmp/$ROOTFS_MARK.part" "$tmp/$ROOTFS_MARK"
    local dest=$cache/$suite-$ver
    if [ -e "$dest" ]; then
        # The same Slurm again (a refresh, or another package list): replace
        # it. A lab still running from the old one keeps its open files.
        mv -T "$dest" "$cache/.old.$suite.$$"
        rm -rf "$cache/.old.$suite.$$" 2>/dev/null || true
    fi
    mv -T "$tmp" "$dest"
    say "built $dest in $(( ($(now_ms) - t0) / 1000 )) s"
    echo "$dest"
}

# Sets ROOTFS for this VERSION, building it when needed; returns 77 when it
# cannot be built.
rootfs_ensure() {
    local cache refresh=${SLURMLAB_ROOTFS_REFRESH:-0}
    cache=$(rootfs_cache)
    mkdir -p "$cache"
    if [ "$refresh" != 1 ]; then
        ROOTFS=$(rootfs_find "$cache" "$SUITE")
        [ -z "$ROOTFS" ] || return 0
    fi
    # One build at a time per cache; whoever waited uses the winner's.
    local rc=0
    exec 8>"$cache/.lock"
    flock 8
    if [ "$refresh" != 1 ]; then ROOTFS=$(rootfs_find "$cache" "$SUITE"); fi
    if [ -z "$ROOTFS" ]; then
        ROOTFS=$(rootfs_build "$cache" "$SUITE") || rc=$?
    fi
    exec 8>&-
    return $rc
}

# The runner of a chrooted lab: $LAB/bin/.run CMD... runs CMD of the root
# file system with the caller's environment, in the caller's directory when
# the root file system has it. It re-executes itself in a new private mount
# namespace (unshare without --fork execs, so a daemon keeps the PID that
# launch recorded), mounts there what the lab needs and execs chroot. The
# mounts live as long as the namespace, that is as long as CMD and what it
# forks (slurmstepd, the job): nothing is mounted on the host, and there is
# nothing to unmount.
write_runner() {
    mkdir -p "$LAB/bin"
    cat > "$LAB/bin/.run" <<EOF
#!/bin/bash
# Runs a program of Slurm $VERSION ($ROOTFS) against the lab $LAB.
set -e
R='$ROOTFS' LAB='$LAB'
if [ "\${SLURMLAB_NS:-}" != "\$\$" ]; then
    export SLURMLAB_NS=\$\$
    exec unshare -m --propagation private "\$0" "\$@"
fi
unset SLURMLAB_NS
mount --bind "\$LAB" "\$R\$LAB"
mount -t proc proc "\$R/proc"
mount --rbind /dev "\$R/dev"
mount --bind /sys "\$R/sys"
mount --bind /etc/hosts "\$R/etc/hosts"
# A /run/slurm of its own (a folder of the lab): slurmd from 24.11 on binds
# its auth socket there (sack.socket), as every pod does in its own /run.
if [ -n "\${SLURMLAB_RUN_DIR:-}" ]; then
    mkdir -p "\$R/run/slurm" "\$SLURMLAB_RUN_DIR"
    mount --bind "\$SLURMLAB_RUN_DIR" "\$R/run/slurm"
fi
# The root file system's own PATH: the host's folders mean nothing in there,
# and SLURMLAB_BIN (the lab is bound at its own path) would loop back here.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
exec chroot "\$R" /bin/sh -c 'cd "\$0" 2>/dev/null || cd /; exec "\$@"' "\$PWD" "\$@"
EOF
    chmod 755 "$LAB/bin/.run"
}

# SLURMLAB_BIN: wrappers of the clients (chrooted, or the host's for 22.05)
# that default to this lab's slurm.conf.
write_bin() {
    mkdir -p "$LAB/bin"
    local c
    for c in "${CLIENTS[@]}"; do
        local cmd="$LAB/bin/.run $c"
        if [ -z "$ROOTFS" ]; then cmd=$(command -v "$c") || continue; fi
        printf '#!/bin/sh\n# %s of Slurm %s; this lab unless SLURM_CONF says otherwise\nSLURM_CONF=${SLURM_CONF:-%s} exec %s "$@"\n' \
            "$c" "$VERSION" "$LAB/etc/slurm.conf" "$cmd" > "$LAB/bin/$c"
        chmod 755 "$LAB/bin/$c"
    done
}

# Read back what start recorded (every command but start).
load_lab_version() {
    if [ -f "$LAB/etc/version" ]; then
        VERSION=$(sed -n 's/^version=//p' "$LAB/etc/version")
        ROOTFS=$(sed -n 's/^rootfs=//p' "$LAB/etc/version")
    fi
    RUN=()
    if [ -n "$ROOTFS" ]; then RUN=("$LAB/bin/.run"); fi
}

# The data parsers slurmrestd serves, oldest first.
data_parsers() {
    if [ -z "$ROOTFS" ]; then echo "v0.0.36 v0.0.37 v0.0.38"; return; fi
    ls "$ROOTFS"/usr/lib/*/slurm-wlm/ | sed -n 's/^data_parser_\(v0_0_[0-9]*\)\.so$/\1/p' | tr _ . | sort -V | tr '\n' ' ' | sed 's/ $//'
}

# Slurm and munge programs of this lab's version (the host's for 22.05).
slurm() { "${RUN[@]+"${RUN[@]}"}" "$@"; }

# Mounts of this (the host's) namespace at or below DIR: there should never
# be any, since every mount of a chrooted lab lives in a namespace of its own.
host_mounts_below() {
    [ -n "$1" ] || return 0
    awk -v r="$1/" '{ if (index($5 "/", r) == 1) print $5 }' /proc/self/mountinfo
}

# Processes whose root directory is ROOTFS and that run for LAB (their
# command line or environment names it).
rooted_pids() {
    [ -n "$ROOTFS" ] || return 0
    python3 -c '
import os, sys
root, lab = sys.argv[1], sys.argv[2].encode()
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        if os.readlink("/proc/%s/root" % pid) != root:
            continue
        data = open("/proc/%s/environ" % pid, "rb").read() + open("/proc/%s/cmdline" % pid, "rb").read()
    except OSError:
        continue
    if lab in data:
        print(pid)' "$ROOTFS" "$LAB"
}

# ---- start -----------------------------------------------------------------

# What slurmctld writes must be SlurmUser's (it drops root's rights early):
# its state, log and PID file, and the JWT key it reads.
own_ctld_files() {
    [ "$SLURM_USER" != root ] || return 0
    touch "$LAB/log/slurmctld.log" "$LAB/run/ctld.selfpid"
    slurm chown -R "$SLURM_USER:" "$LAB/state"
    slurm chown "$SLURM_USER:" "$LAB/log/slurmctld.log" "$LAB/run/ctld.selfpid" "$JWT_KEY" \
        "$LAB/etc/slurm.key"
}

write_conf() {
    local nodes_line="" name port i=0 ports_arr
    read -r -a ports_arr <<< "$NODE_PORTS"
    for name in $NODE_NAMES; do
        nodes_line+="NodeName=$name NodeHostname=localhost NodeAddr=127.0.0.1 Port=${ports_arr[$i]} CPUs=$CPUS RealMemory=$MEM State=UNKNOWN"$'\n'
        i=$((i + 1))
    done
    local extra_nodes="" extra_part="" timeout_line=""
    if [ "$EXTRA" -gt 0 ]; then
        extra_nodes="NodeName=$EXTRA_HOSTLIST NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN"
        extra_part="PartitionName=extra Nodes=$EXTRA_HOSTLIST MaxTime=INFINITE State=UP"
        # Nodes without a slurmd would otherwise turn DOWN after the default
        # 300 s; 0 stops slurmctld from timing them out at all.
        case $EXTRA_CONF in *SlurmdTimeout*) ;; *) timeout_line="SlurmdTimeout=0" ;; esac
    fi
    local debug_nodes
    if [ "$DYNAMIC" = 1 ]; then debug_nodes=ALL; else debug_nodes=$(echo $NODE_NAMES | tr ' ' ','); fi
    cat > "$CONF" <<EOF
# slurm.conf of a slurmlab.sh lab; everything stays on 127.0.0.1 and in $LAB
ClusterName=slurmlab
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=$SLURM_USER
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$LAB/munge/socket
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$JWT_KEY
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
StateSaveLocation=$LAB/state
SlurmdSpoolDir=$LAB/spool/%n
SlurmctldPidFile=$LAB/run/ctld.selfpid
SlurmdPidFile=$LAB/run/%n.selfpid
SlurmctldLogFile=$LAB/log/slurmctld.log
SlurmdLogFile=$LAB/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$LAB/etc/plugstack.conf
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdParameters=config_overrides
MaxNodeCount=$(( $(echo $NODE_NAMES | wc -w) + EXTRA + 8 ))
$timeout_line
$EXTRA_CONF
${nodes_line}${extra_nodes}
PartitionName=debug Nodes=$debug_nodes Default=YES MaxTime=INFINITE State=UP
$extra_part
EOF
    chmod 644 "$CONF"
    if [ -n "$SUITE" ]; then
        # From 23.x on slurmd initializes a cgroup plugin even with
        # proctrack/linuxproc and task/none, and fails without a cgroup file
        # system (none is mounted in the chroot; cgroup/v2 would also want
        # systemd over dbus). The lab does not need cgroups: turn them off.
        # 22.05 neither needs this nor knows "disabled".
        printf '# cgroup.conf of a slurmlab.sh lab\nCgroupPlugin=disabled\n' > "$LAB/etc/cgroup.conf"
        chmod 644 "$LAB/etc/cgroup.conf"
    fi
}

# The lab's slurm.conf from SLURMLAB_CONF_FROM: the host-specific keys
# rewritten (the header lists them), everything else kept line for line;
# the changes go to etc/slurm.conf.rewrites.
write_conf_from() {
    [ -r "$CONF_FROM" ] || die "SLURMLAB_CONF_FROM=$CONF_FROM: cannot read it"
    local munge=0 static_lines="" name port i=0 ports_arr
    [ -n "$SUITE" ] || munge=1
    read -r -a ports_arr <<< "$NODE_PORTS"
    for name in $NODE_NAMES; do
        static_lines+="NodeName=$name NodeHostname=localhost NodeAddr=127.0.0.1 Port=${ports_arr[$i]}"
        static_lines+=" CPUs=$CPUS RealMemory=$MEM State=UNKNOWN"$'\n'
        i=$((i + 1))
    done
    if [ -n "$NODE_NAMES" ]; then
        static_lines+="PartitionName=debug Nodes=$(echo $NODE_NAMES | tr ' ' ',')"
        static_lines+=" MaxTime=INFINITE State=UP"$'\n'
    fi
    python3 - "$CONF_FROM" "$CONF" "$CONF.rewrites" "$LAB" "$CTLD_PORT" "$SLURMD_PORT" "$SLURM_USER" \
        "$JWT_KEY" "$munge" "$static_lines" <<'PY'
import sys
src, dst, rew, lab, ctld_port, slurmd_port, user, jwt_key, munge, static = sys.argv[1:]
munge = munge == "1"
# key (lower case) -> the lab's value; None drops the line
fixed = {
    "slurmctldport": ctld_port,
    "slurmdport": slurmd_port,
    "slurmuser": user,
    "statesavelocation": lab + "/state",
    "slurmdspooldir": lab + "/spool/%n",
    "slurmctldlogfile": lab + "/log/slurmctld.log",
    "slurmdlogfile": lab + "/log/slurmd.%n.log",
    "slurmschedlogfile": lab + "/log/sched.log",
    "slurmctldpidfile": lab + "/run/ctld.selfpid",
    "slurmdpidfile": lab + "/run/%n.selfpid",
    "slurmctldaddr": None,
    "accountingstoragetype": "accounting_storage/none",
    "accountingstoragehost": None,
    "accountingstorageport": None,
    "proctracktype": "proctrack/linuxproc",
    "taskplugin": "task/none",
}
# what the lab needs whether the file has it or not
wanted = ["slurmctldpidfile", "slurmdpidfile", "proctracktype", "taskplugin"]
names = {"slurmctldpidfile": "SlurmctldPidFile", "slurmdpidfile": "SlurmdPidFile",
         "proctracktype": "ProctrackType", "taskplugin": "TaskPlugin", "selecttype": "SelectType"}
if munge:
    fixed.update({"authtype": "auth/munge", "credtype": "cred/munge",
                  "authinfo": "socket=" + lab + "/munge/socket",
                  "selecttype": "select/cons_tres"})
    wanted.append("selecttype")
out, changes, seen, hosts = [], [], set(), 0
for line in open(src).read().split("\n"):
    body = line.split("#", 1)[0].strip()
    key, eq, val = body.partition("=")
    k = key.strip().lower()
    new = line
    if eq and " " not in key.strip():
        if k == "slurmctldhost":
            hosts += 1
            new = "SlurmctldHost=localhost" if hosts == 1 else None
        elif k == "authaltparameters":
            opts = [o for o in val.strip().split(",") if o and not o.lower().startswith("jwks=")]
            opts = ["jwt_key=" + jwt_key if o.lower().startswith("jwt_key=") else o for o in opts]
            new = key.strip() + "=" + ",".join(opts)
        elif k in fixed:
            seen.add(k)
            new = None if fixed[k] is None else key.strip() + "=" + fixed[k]
    if new != line:
        changes.append("- " + line)
        if new is not None:
            changes.append("+ " + new)
    if new is not None:
        out.append(new)
while out and out[-1] == "":
    out.pop()
added = ["# the lab's additions (slurmlab.sh)"]
added += [names[k] + "=" + fixed[k] for k in wanted if k not in seen]
added += [l for l in static.split("\n") if l]
if len(added) > 1:
    out += added
    changes += ["+ " + l for l in added[1:]]
open(dst, "w").write("\n".join(out) + "\n")
open(rew, "w").write("\n".join(changes) + ("\n" if changes else ""))
PY
    chmod 644 "$CONF" "$CONF.rewrites"
    if [ -n "$SUITE" ]; then
        printf '# cgroup.conf of a slurmlab.sh lab\nCgroupPlugin=disabled\n' > "$LAB/etc/cgroup.conf"
        chmod 644 "$LAB/etc/cgroup.conf"
    fi
}

nodes_idle() { # all static (and the dynamic) nodes report idle
    local want=$1 got
    got=$(SLURM_CONF=$CONF slurm sinfo -h -N -p debug -t idle -o '%N' | sort -u | wc -l)
    [ "$got" -ge "$want" ]
}

munge_ok() { slurm munge -n -S "$LAB/munge/socket" | slurm unmunge -S "$LAB/munge/socket"; }

do_start() {
    local missing=() b
    if [ -z "$SUITE" ]; then
        for b in "${SLURM_BINS[@]}"; do command -v "$b" >/dev/null 2>&1 || missing+=("$b"); done
        [ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/auth_jwt.so ] || missing+=(slurm-wlm-jwt-plugin)
    else
        for b in "${HOST_BINS[@]}"; do command -v "$b" >/dev/null 2>&1 || missing+=("$b"); done
    fi
    if [ ${#missing[@]} -gt 0 ]; then say "missing: ${missing[*]} (run tests/deps.sh)"; exit 77; fi
    [ "$(id -u)" = 0 ] || die "start needs root"
    if [ -n "$SUITE" ]; then
        local rc=0
        rootfs_ensure || rc=$?
        [ $rc -eq 0 ] || exit $rc
    fi

    local t0; t0=$(now_ms)
    if [ -z "$LAB" ]; then LAB=$(mktemp -d /tmp/slurmlab.XXXXXX); fi
    mkdir -p "$LAB"
    LAB=$(cd "$LAB" && pwd)
    for n in $(daemons); do
        alive "$(pid_of "$n")" && die "$n of $LAB is running (pid $(pid_of "$n")); stop it first"
    done
    # munged wants its socket's directory and every directory above it
    # searchable by all; slurmrestd (an unprivileged user) reads etc/.
    local d=$LAB
    while [ "$d" != / ]; do
        [ "$(( 0$(stat -c %a "$d") & 1 ))" = 1 ] || die "$d is not searchable by others (chmod o+x); munged needs that"
        d=$(dirname "$d")
    done
    if [ -n "$ROOTFS" ]; then
        # The lab is bound at its own path inside the root file system, so
        # every path of slurm.conf is the same inside and out; munged checks
        # the directories above its socket in there too.
        local top=""
        if [ ! -d "$ROOTFS$LAB" ]; then
            top=$LAB
            while [ ! -d "$ROOTFS$(dirname "$top")" ]; do top=$(dirname "$top"); done
        fi
        (umask 022; mkdir -p "$ROOTFS$LAB")
        d=$ROOTFS$LAB
        while [ "$d" != "$ROOTFS" ]; do
            [ "$(( 0$(stat -c %a "$d") & 1 ))" = 1 ] || die "$d is not searchable by others (chmod o+x); munged needs that"
            d=$(dirname "$d")
        done
    fi
    rm -rf "$LAB/run" "$LAB/state" "$LAB/spool" "$LAB/log" "$LAB/bin"
    mkdir -p "$LAB"/{etc,munge,run,state,spool,log,jobs,bin}
    # created: the topmost folder start made in the root file system (stop
    # removes it again)
    printf 'version=%s\nrootfs=%s\ncreated=%s\n' "$VERSION" "$ROOTFS" "${top:-}" > "$LAB/etc/version"
    load_lab_version
    [ -z "$ROOTFS" ] || write_runner
    write_bin
    chmod 755 "$LAB" "$LAB/etc" "$LAB/munge" "$LAB/run" "$LAB/log"
    chmod 1777 "$LAB/jobs"
    CONF=$LAB/etc/slurm.conf
    JWT_KEY=$LAB/etc/jwt.key

    # Node names and ports.
    CONF_FROM=${SLURMLAB_CONF_FROM:-}
    # A given slurm.conf brings its own nodes (dynamic ones, usually): no
    # static node unless asked for.
    local count=${1:-${SLURMLAB_NODES:-3}} least=1
    if [ -n "$CONF_FROM" ]; then count=${1:-${SLURMLAB_NODES:-0}}; least=0; fi
    if [ -n "${SLURMLAB_NODE_NAMES:-}" ]; then
        NODE_NAMES=${SLURMLAB_NODE_NAMES}
    else
        [[ $count =~ ^[0-9]+$ ]] && [ "$count" -ge "$least" ] || die "bad node count '$count'"
        NODE_NAMES=$(seq -f "${SLURMLAB_NODE_PREFIX:-n}%g" 1 "$count" | tr '\n' ' ')
    fi
    NODE_NAMES=$(echo $NODE_NAMES)
    local nn; nn=$(echo $NODE_NAMES | wc -w)
    local pool; pool=($(free_ports $((nn + 3))))
    CTLD_PORT=${SLURMLAB_CTLD_PORT:-${pool[0]}}
    REST_PORT=${SLURMLAB_REST_PORT:-${pool[1]}}
    SLURMD_PORT=${SLURMLAB_SLURMD_PORT:-${pool[2]}}
    NODE_PORTS=${SLURMLAB_NODE_PORTS:-${pool[*]:3}}
    [ "$(echo $NODE_PORTS | wc -w)" = "$nn" ] || die "SLURMLAB_NODE_PORTS needs $nn ports"
    for p in $CTLD_PORT $REST_PORT $SLURMD_PORT $NODE_PORTS; do
        port_busy "$p" && die "port $p is in use"
    done
    EXTRA=${SLURMLAB_EXTRA_NODES:-0}
    EXTRA_HOSTLIST=""
    if [ "$EXTRA" -gt 0 ]; then
        EXTRA_HOSTLIST=$(printf '%s[00001-%05d]' "${SLURMLAB_EXTRA_PREFIX:-g}" "$EXTRA")
    fi
    DYNAMIC=${SLURMLAB_DYNAMIC:-0}
    DYN_NAME=${SLURMLAB_DYNAMIC_NAME:-dyn1}
    CPUS=${SLURMLAB_CPUS:-2}
    MEM=${SLURMLAB_MEM:-1000}
    EXTRA_CONF=${SLURMLAB_EXTRA_CONF:-}
    local rest_user=${SLURMLAB_REST_USER:-nobody}
    SLURM_USER=${SLURMLAB_SLURM_USER:-root}
    slurm id -u "$SLURM_USER" >/dev/null 2>&1 || die "SLURMLAB_SLURM_USER=$SLURM_USER: no such user"

    # From here a failure stops whatever was started.
    trap 'rc=$?; if [ $rc -ne 0 ]; then say "start failed; stopping"; do_stop >/dev/null 2>&1 || true; fi' EXIT

    slurm mungekey -c -f -b 1024 -k "$LAB/munge/munge.key"
    chmod 600 "$LAB/munge/munge.key"
    head -c 32 /dev/urandom > "$JWT_KEY"
    chmod 600 "$JWT_KEY"
    # auth/slurm and cred/slurm (a given slurm.conf of 23.11 or later) look
    # for slurm.key beside slurm.conf.
    head -c 1024 /dev/urandom > "$LAB/etc/slurm.key"
    chmod 600 "$LAB/etc/slurm.key"
    : > "$LAB/etc/plugstack.conf"
    : > "$CONF.rewrites"
    if [ -n "$CONF_FROM" ]; then
        write_conf_from
        say "slurm.conf from $CONF_FROM; rewritten for this host:"
        sed 's/^/slurmlab:   /' "$CONF.rewrites" >&2
    else
        write_conf
    fi
    echo "$NODE_NAMES" > "$LAB/etc/nodes"

    # munged: the socket directory must be searchable by everyone.
    launch munged "${RUN[@]+"${RUN[@]}"}" munged -F --key-file="$LAB/munge/munge.key" --socket="$LAB/munge/socket" \
        --pid-file="$LAB/munge/pid" --seed-file="$LAB/munge/seed" --log-file="$LAB/log/munged.log"
    poll 10000 "$(watch_pid munged)" munge_ok \
        || die "munged did not start (log/munged.out)"

    export SLURM_CONF=$CONF
    own_ctld_files
    launch slurmctld "${RUN[@]+"${RUN[@]}"}" slurmctld -D -i -f "$CONF"
    poll 20000 "$(watch_pid slurmctld)" slurm scontrol ping || die "slurmctld did not start (log/slurmctld.log)"

    local n
    for n in $NODE_NAMES; do
        mkdir -p "$LAB/spool/$n"
        launch "slurmd.$n" "${RUN[@]+"${RUN[@]}"}" slurmd -D -N "$n" -f "$CONF"
    done
    local want=$nn
    if [ "$DYNAMIC" = 1 ]; then
        mkdir -p "$LAB/spool/$DYN_NAME"
        echo "$DYN_NAME" > "$LAB/etc/dynamic"
        # A dynamic node registers itself and is reached on SlurmdPort, so
        # there can be one per host.
        local dyn_conf=${SLURMLAB_DYNAMIC_CONF:-"CPUs=$CPUS RealMemory=$MEM Feature=dyn"}
        printf '%s' "$dyn_conf" > "$LAB/etc/dynamic.conf"
        launch slurmd.dyn1 "${RUN[@]+"${RUN[@]}"}" slurmd -D -Z -N "$DYN_NAME" --conf "$dyn_conf" -f "$CONF"
        want=$((want + 1))
    fi
    if [ "$want" -gt 0 ] && ! poll 30000 "" nodes_idle "$want"; then
        slurm sinfo -N >&2 || true
        die "nodes did not become idle (log/slurmd.*.log)"
    fi

    # slurmrestd refuses to run as root; SLURM_JWT=daemon makes auth/jwt its
    # primary authentication, without which every user token is rejected.
    launch slurmrestd "${RUN[@]+"${RUN[@]}"}" setpriv --reuid="$rest_user" --regid="$(id -gn "$rest_user")" --clear-groups \
        env SLURM_CONF="$CONF" SLURM_JWT=daemon \
        slurmrestd -a rest_auth/jwt -s "$OPENAPI_PLUGINS" "127.0.0.1:$REST_PORT"
    local token; token=$(mint "$JWT_KEY" root 86400)
    poll 20000 "$(watch_pid slurmrestd)" curl -fsS -o /dev/null -H "X-SLURM-USER-NAME: root" \
        -H "X-SLURM-USER-TOKEN: $token" "http://127.0.0.1:$REST_PORT/slurm/$API/ping" \
        || die "slurmrestd did not answer (log/slurmrestd.out)"

    cat > "$LAB/env" <<EOF
export SLURMLAB_DIR=$LAB
export SLURM_CONF=$CONF
export SLURMRESTD_URL=http://127.0.0.1:$REST_PORT
export SLURMRESTD_USER=root
export SLURMRESTD_TOKEN=$token
export SLURMLAB_JWT_KEY=$JWT_KEY
export SLURMLAB_NODE_NAMES="$NODE_NAMES"
export SLURMLAB_EXTRA_HOSTLIST="$EXTRA_HOSTLIST"
export SLURMLAB_CTLD_PORT=$CTLD_PORT
export SLURMLAB_VERSION=$VERSION
export SLURMLAB_BIN=$LAB/bin
export SLURMLAB_API=$API
export SLURMLAB_DATA_PARSERS="$(data_parsers)"
export SLURMLAB_RUN=${RUN[0]:-}
export SLURMLAB_SLURMD_PORT=$SLURMD_PORT
export SLURMLAB_CONF_REWRITES=$CONF.rewrites
export SLURMLAB_SLURM_KEY=$LAB/etc/slurm.key
EOF
    trap - EXIT
    cat "$LAB/env"
    say "started Slurm $VERSION${ROOTFS:+ (chroot $ROOTFS)} in $LAB in $(( $(now_ms) - t0 )) ms: $want node(s)$([ "$EXTRA" -gt 0 ] && echo " + $EXTRA_HOSTLIST"), slurmrestd on 127.0.0.1:$REST_PORT"
}

# ---- stop / status ---------------------------------------------------------

do_stop() {
    need_lab
    CONF=$LAB/etc/slurm.conf
    load_lab_version
    local ctld; ctld=$(pid_of slurmctld)
    if alive "$ctld"; then
        # Cancel jobs first so that no slurmstepd outlives its slurmd.
        local jobs; jobs=$(SLURM_CONF=$CONF slurm squeue -h -o %i 2>/dev/null || true)
        if [ -n "$jobs" ]; then
            SLURM_CONF=$CONF slurm scancel $jobs 2>/dev/null || true
            poll 15000 "" no_jobs || say "jobs still listed"
        fi
    fi
    # All at once: none of the daemons needs another one to shut down, and
    # munged alone takes about 2 s to exit.
    local pids=() n p
    for n in $(daemons); do
        p=$(pid_of "$n"); alive "$p" && pids+=("$p")
    done
    local t0; t0=$(now_ms)
    terminate 10000 "${pids[@]+"${pids[@]}"}"
    [ $(( $(now_ms) - t0 )) -lt 5000 ] || say "daemons took $(( $(now_ms) - t0 )) ms to stop"
    # Anything else that carries the tag (a slurmstepd whose slurmd died
    # first) and the job processes below it, which do not carry the tag.
    local rest; rest=($(tagged_pids) $(rooted_pids))
    if [ ${#rest[@]} -gt 0 ]; then
        rest=($(descendants "${rest[@]}"))
        say "stopping stragglers ${rest[*]}"
        terminate 2000 "${rest[@]}"
    fi
    rm -f "$LAB"/run/*.pid "$LAB"/run/*.selfpid
    if [ -n "$ROOTFS" ]; then
        # Every mount was made in a namespace that died with its last
        # process; check that none is visible here, then drop the mount
        # point (and the empty folders above it) from the root file system.
        local mounts procs
        mounts=$(host_mounts_below "$ROOTFS")
        procs=$(rooted_pids)
        if [ -n "$mounts$procs" ]; then
            say "still mounted: ${mounts:-nothing}; still running in $ROOTFS: ${procs:-nothing}"
            return 1
        fi
        local top d
        top=$(sed -n 's/^created=//p' "$LAB/etc/version")
        if [ -n "$top" ]; then
            d=$LAB
            while rmdir "$ROOTFS$d" 2>/dev/null && [ "$d" != "$top" ]; do d=$(dirname "$d"); done
        fi
    fi
    release_ports
    if [ "${1:-}" = --clean ]; then rm -rf "$LAB"; fi
    return 0
}

do_restart_ctld() {
    need_lab
    CONF=$LAB/etc/slurm.conf
    load_lab_version
    local lose=0 down=0
    while [ $# -gt 0 ]; do
        case $1 in
            --lose-state) lose=1 ;;
            --down) down=${2:?--down needs SECS}; shift ;;
            *) die "restart-ctld: unknown argument $1" ;;
        esac
        shift
    done
    local p; p=$(pid_of slurmctld)
    if alive "$p"; then terminate 15000 "$p"; fi
    local extra=()
    if [ "$lose" = 1 ]; then
        rm -rf "${LAB:?}/state"
        mkdir -p "$LAB/state"
        extra=(-c)
    fi
    [ "$down" = 0 ] || sleep "$down"
    export SLURM_CONF=$CONF
    JWT_KEY=$LAB/etc/jwt.key
    SLURM_USER=$(sed -n 's/^SlurmUser=//p' "$CONF")
    own_ctld_files
    launch slurmctld "${RUN[@]+"${RUN[@]}"}" slurmctld -D -i "${extra[@]+"${extra[@]}"}" -f "$CONF"
    poll 20000 "$(watch_pid slurmctld)" slurm scontrol ping || die "slurmctld did not restart (log/slurmctld.log)"
    say "slurmctld restarted ($([ "$lose" = 1 ] && echo "state lost" || echo "state kept"))"
}

do_restart_dynamic() {
    need_lab
    CONF=$LAB/etc/slurm.conf
    load_lab_version
    [ -f "$LAB/run/slurmd.dyn1.pid" ] || die "restart-dynamic: this lab has no dynamic node (SLURMLAB_DYNAMIC=1)"
    local p; p=$(pid_of slurmd.dyn1)
    if alive "$p"; then terminate 15000 "$p"; fi
    CPUS=${SLURMLAB_CPUS:-2}
    MEM=${SLURMLAB_MEM:-1000}
    export SLURM_CONF=$CONF
    local dyn; dyn=$(cat "$LAB/etc/dynamic" 2>/dev/null || echo dyn1)
    local dyn_conf
    if [ -n "${SLURMLAB_DYNAMIC_CONF:-}" ]; then
        dyn_conf=$SLURMLAB_DYNAMIC_CONF
        printf '%s' "$dyn_conf" > "$LAB/etc/dynamic.conf"
    elif [ -f "$LAB/etc/dynamic.conf" ]; then
        dyn_conf=$(cat "$LAB/etc/dynamic.conf")
    else
        dyn_conf="CPUs=$CPUS RealMemory=$MEM Feature=dyn"
    fi
    launch slurmd.dyn1 "${RUN[@]+"${RUN[@]}"}" slurmd -D -Z -N "$dyn" --conf "$dyn_conf" -f "$CONF"
    poll 30000 "" node_known "$dyn" || die "$dyn did not register again (log/slurmd.dyn1.log)"
    say "$dyn's slurmd restarted"
}

node_known() { SLURM_CONF=$CONF slurm scontrol show node "$1" >/dev/null 2>&1; }

no_jobs() { [ -z "$(SLURM_CONF=$CONF slurm squeue -h -o %i)" ]; }

do_status() {
    need_lab
    local n p all=0 any=0
    for n in $(daemons); do
        any=1
        p=$(pid_of "$n")
        if alive "$p"; then echo "$n running $p"; else echo "$n stopped"; all=1; fi
    done
    [ $any = 1 ] || { echo "stopped"; return 3; }
    [ $all = 0 ] || return 3
}

LAB=${SLURMLAB_DIR:-}
cmd=${1:-}
shift || true
case $cmd in
    start) do_start "$@" ;;
    stop) do_stop "$@" ;;
    status) do_status ;;
    env) need_lab; cat "$LAB/env" ;;
    token) need_lab; mint "$LAB/etc/jwt.key" "${1:-root}" "${2:-86400}" ;;
    restart-ctld) do_restart_ctld "$@" ;;
    restart-dynamic) do_restart_dynamic ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
esac
