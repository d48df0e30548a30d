#!/bin/bash
# The login image's entrypoint: sshd (`sshd -D -e $SSHD_OPTIONS`) and sackd
# (`sackd -D $SACKD_OPTIONS`, as SlurmUser in /run/slurm) side by side, as in
# Slinky's login image. The container's args go to sshd. sshd is the main
# daemon: the container ends when it does; sackd is started again when it
# exits. Host keys that are not mounted are made at start.
set -euo pipefail
# lib.sh sits in ../lib/slurmop/ (in the image: /usr/local/lib/slurmop/lib.sh).
. "$(dirname "$(readlink -f "$0")")/../lib/slurmop/lib.sh"

SSHD_OPTIONS="${SSHD_OPTIONS:-} $*"
run_sshd() {
    eval_options "$SSHD_OPTIONS"
    exec /usr/sbin/sshd -D -e "${OPTS[@]}"
}
run_sackd() {
    eval_options "${SACKD_OPTIONS:-}"
    cd /run/slurm 2>/dev/null || log "no /run/slurm"
    fg=$(foreground_flag sackd)
    [ -z "$fg" ] || as_slurm sackd "$fg" "${OPTS[@]}"
    run_forking sackd as_slurm sackd "${OPTS[@]}"
}

mkdir -p /run/slurm /root/.ssh
chown slurm:slurm /run/slurm
host_keys
supervise run_sshd -- run_sackd
