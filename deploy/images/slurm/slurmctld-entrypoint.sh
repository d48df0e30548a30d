#!/bin/bash
# slurmctld's entrypoint: `slurmctld -D $SLURMCTLD_OPTIONS <args>`, the
# options evaluated by the shell once (see lib.sh). Runs as the pod's user
# (the operator's pods run it as slurm, uid 401).
set -euo pipefail
# lib.sh sits in ../lib/slurmop/ (in the image: /usr/local/lib/slurmop/lib.sh).
. "$(dirname "$(readlink -f "$0")")/../lib/slurmop/lib.sh"

eval_options "${SLURMCTLD_OPTIONS:-} $*"
# The auth socket's folder (in the operator's pods, an emptyDir shared with
# the reconfigure sidecar, and /run an emptyDir too). Not fatal: a runtime's
# own /run may be root's, and slurmctld says what it misses itself.
mkdir -p /run/slurmctld 2>/dev/null || log "cannot create /run/slurmctld"
exec slurmctld -D "${OPTS[@]}"
