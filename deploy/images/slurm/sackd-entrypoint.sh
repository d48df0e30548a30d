#!/bin/bash
# sackd's entrypoint: `sackd -D $SACKD_OPTIONS <args>` (evaluated by the
# shell once, see lib.sh), as SlurmUser (slurm, uid 401) in /run/slurm,
# where it keeps its configless cache and sack.socket.
set -euo pipefail
# lib.sh sits in ../lib/slurmop/ (in the image: /usr/local/lib/slurmop/lib.sh).
. "$(dirname "$(readlink -f "$0")")/../lib/slurmop/lib.sh"

eval_options "${SACKD_OPTIONS:-} $*"
mkdir -p /run/slurm
[ "$(id -u)" != 0 ] || chown slurm:slurm /run/slurm
cd /run/slurm 2>/dev/null || log "no /run/slurm"
fg=$(foreground_flag sackd)
[ -z "$fg" ] || as_slurm sackd "$fg" "${OPTS[@]}"
run_forking sackd as_slurm sackd "${OPTS[@]}"
