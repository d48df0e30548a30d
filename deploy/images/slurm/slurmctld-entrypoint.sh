#!/bin/bash
# slurmctld's entrypoint: `slurmctld -D $SLURMCTLD_OPTIONS <args>`, the
# options evaluated by the shell once (see lib.sh). Runs as the pod's user
# (the operator's pods run it as slurm, uid 401).
set -euo pipefail
. /usr/local/lib/slurmop/lib.sh

eval_options "${SLURMCTLD_OPTIONS:-} $*"
# The auth socket's folder (an emptyDir shared with the reconfigure sidecar
# in the operator's pods) and the state and log folders of Debian's defaults.
mkdir -p /run/slurmctld
exec slurmctld -D "${OPTS[@]}"
