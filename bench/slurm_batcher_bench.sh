#!/usr/bin/env bash
# slurm_batcher_bench.sh — drains at fleet scale through slurmio's node cache
# and batcher (bench/tools/drain-bench.c): a real Slurm 22.05 lab holding N
# nodes without slurmd (default 8192, g[00001-08192]) plus one static node;
# the node table read and idle 304 polls, N drains with one reason (one
# hostlist request), and N drains with a reason per node (one request each).
#
# Usage (root, after building): bash bench/slurm_batcher_bench.sh [N]
#   OP_BUILD_DIR  build directory holding drain-bench (default ./build; a
#                 Release build gives the operator-side numbers without
#                 sanitizer overhead)
#   SKIP_EACH=1   skip the one-request-per-node phase (it takes ~40 s at 8192)
# The lab is stopped and removed at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-8192}
BUILD=${OP_BUILD_DIR:-$here/build}
TOOL=$BUILD/drain-bench
LAB_SH=$here/tests/slurm/slurmlab.sh
[ -x "$TOOL" ] || { echo "build first: no $TOOL" >&2; exit 1; }

export SLURMLAB_DIR=$(mktemp -d /tmp/slurm-batcher-bench.XXXXXX)/lab
chmod 755 "$(dirname "$SLURMLAB_DIR")"
export SLURMLAB_EXTRA_NODES=$N
trap 'bash "$LAB_SH" stop --clean >/dev/null 2>&1 || true; rmdir "$(dirname "$SLURMLAB_DIR")" 2>/dev/null || true' EXIT
t0=$(date +%s%N)
eval "$(bash "$LAB_SH" start 1)"
echo "lab with 1 + $N nodes started in $(( ($(date +%s%N) - t0) / 1000000 )) ms (Slurm $(slurmctld -V | awk '{print $2}'))"
args=(--url "$SLURMRESTD_URL" --key "$SLURMLAB_JWT_KEY" --conf "$SLURM_CONF" --nodes "$SLURMLAB_EXTRA_HOSTLIST")
[ "${SKIP_EACH:-0}" = 1 ] && args+=(--skip-each)
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} "$TOOL" "${args[@]}"
