#!/usr/bin/env bash
# slurm_drain_bench.sh — how long draining a fleet takes through the libslurm
# backend: (a) one request carrying the whole hostlist, (b) one request per
# node, against a real Slurm 22.05 lab holding N extra nodes (default 8192,
# g[00001-08192], no slurmd behind them).
#
# Usage (root, after building): bash bench/slurm_drain_bench.sh [N]
#   OP_BUILD_DIR  build directory holding tools/slurmio-cli (default ./build)
# Prints both times and their ratio; the lab is stopped and removed at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-8192}
BUILD=${OP_BUILD_DIR:-$here/build}
CLI=$BUILD/tools/slurmio-cli
LAB_SH=$here/tests/slurm/slurmlab.sh
[ -x "$CLI" ] || { echo "build first: no $CLI" >&2; exit 1; }

export SLURMLAB_DIR=$(mktemp -d /tmp/slurm-drain-bench.XXXXXX)/lab
chmod 755 "$(dirname "$SLURMLAB_DIR")"
export SLURMLAB_EXTRA_NODES=$N
trap 'bash "$LAB_SH" stop --clean >/dev/null 2>&1 || true; rmdir "$(dirname "$SLURMLAB_DIR")" 2>/dev/null || true' EXIT
t0=$(date +%s%N)
eval "$(bash "$LAB_SH" start 1)"
echo "lab with 1 + $N nodes started in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
ALL=$SLURMLAB_EXTRA_HOSTLIST
REASON="slurm-operator: Pod (slurm/bench) is pending termination for scale-in"

drained() { sinfo -h -N -p extra -t drain,drng -o %N | sort -u | wc -l; }
ms_of() { sed -n 's/.* in \([0-9.]*\) ms (\([0-9.]*\) ms in libslurm).*/\1 \2/p'; }

# (a) one request for every node
out=$("$CLI" --slurm-conf "$SLURM_CONF" drain --reason "$REASON" "$ALL")
read -r a_ms a_lib <<< "$(echo "$out" | ms_of)"
[ "$(drained)" = "$N" ] || { echo "after (a): $(drained) of $N drained" >&2; exit 1; }
# Slurm 22.05 clears DRAIN on nodes that never registered (UNKNOWN*) but
# still answers "Invalid node state specified" (scontrol does the same), so
# judge the undrain by the result.
"$CLI" --slurm-conf "$SLURM_CONF" undrain "$ALL" >/dev/null 2>&1 || true
[ "$(drained)" = 0 ] || { echo "undrain left $(drained) drained" >&2; exit 1; }

# (b) one request per node, each sent when the previous one is answered
out=$("$CLI" --slurm-conf "$SLURM_CONF" --timeout 600000 --each drain --reason "$REASON" "$ALL")
read -r b_ms b_lib <<< "$(echo "$out" | ms_of)"
[ "$(drained)" = "$N" ] || { echo "after (b): $(drained) of $N drained" >&2; exit 1; }

# For scale: one full node list over REST (what a poll costs when anything changed).
rest=$(curl -s -o /dev/null -w '%{size_download} %{time_total}' -H "X-SLURM-USER-NAME: $SLURMRESTD_USER" \
    -H "X-SLURM-USER-TOKEN: $SLURMRESTD_TOKEN" "$SLURMRESTD_URL/slurm/v0.0.38/nodes")

echo "drain $N nodes, libslurm backend, Slurm $(slurmctld -V | awk '{print $2}'):"
printf '  (a) one hostlist request:  %9.1f ms  (%.1f ms inside libslurm)\n' "$a_ms" "$a_lib"
printf '  (b) one request per node:  %9.1f ms  (%.1f ms inside libslurm, %.2f ms per node)\n' "$b_ms" "$b_lib" \
    "$(awk -v b="$b_ms" -v n="$N" 'BEGIN{print b/n}')"
printf '  ratio (b)/(a):             %9.0fx\n' "$(awk -v a="$a_ms" -v b="$b_ms" 'BEGIN{print b/a}')"
printf '  GET /slurm/v0.0.38/nodes:  %s bytes in %s s\n' ${rest}
