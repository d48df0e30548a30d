#!/usr/bin/env bash
# fetch.sh — make Slinky's slurm-operator source available without building
# its manager, and print where it is:
#
#   export SLINKY_SRC=<dir>
#
# The work is build.sh's `--src` mode: v1.2.1 (the default) and main are
# unpacked from their source archives ($SLURMOP_PEERS) into the cache folder
# of that version; v1.1.0 is put in the Go module cache shared with
# tests/k8s/build.sh (read-only there, Go's rule). Nothing is copied into the
# clone; a later run finds it and needs no network.
#
# Usage: fetch.sh [--version VERSION]   (default: SLURMOP_SLINKY_VERSION or v1.2.1)
# Exit status: 0 fetched or present; 77 when Go is missing or the archives of
# an archive version are absent (build.sh says which); 1 on failure.
# Progress and errors go to stderr; stdout holds only the export line.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
args=()
case "${1:-}" in
    "") ;;
    --version) args=(--version "${2:?--version needs a value}") ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "slinky-fetch: unknown argument: $1" >&2; exit 2 ;;
esac
out=$(bash "$HERE/build.sh" "${args[@]}" --src)
dir=$(printf '%s\n' "$out" | sed -n 's/^export SLINKY_DIR=//p')
[ -n "$dir" ] || { echo "slinky-fetch: build.sh --src printed no SLINKY_DIR" >&2; exit 1; }
printf "export SLINKY_SRC='%s'\n" "$dir"
printf '%s\n' "$out" | sed -n 's/^export SLINKY_VERSION=\(.*\)$/export SLINKY_VERSION=\1/p'
