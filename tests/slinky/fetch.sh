#!/usr/bin/env bash
# fetch.sh — put Slinky's slurm-operator source (a pinned release of its Go
# module) in the module cache and print where it is:
#
#   export SLINKY_SRC=<dir>
#
# Nothing of it is copied into the clone. The module goes to the Go module
# cache shared with tests/k8s/build.sh ($SLURMOP_K8S_CACHE/go/mod, by default
# ${XDG_CACHE_HOME:-$HOME/.cache}/slurmop/go/mod); a later run finds it there
# and needs no network. The tree in the cache is read-only (Go's rule).
#
# Usage: fetch.sh [--version vX.Y.Z]   (default: SLINKY_VERSION or v1.1.0)
# Exit status: 0 fetched or present, 77 when Go is missing, 1 on failure.
# Progress and errors go to stderr; stdout holds only the export line.
set -euo pipefail

VERSION=${SLINKY_VERSION:-v1.1.0}
case "${1:-}" in
    "") ;;
    --version) VERSION=${2:?--version needs a value} ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "slinky-fetch: unknown argument: $1" >&2; exit 2 ;;
esac
MODULE=github.com/SlinkyProject/slurm-operator

if ! command -v go >/dev/null 2>&1; then
    echo "slinky-fetch: go is not installed" >&2
    exit 77
fi

ROOT=${SLURMOP_K8S_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/slurmop}
mkdir -p "$ROOT/go/mod"
export GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=mod GOMODCACHE=$ROOT/go/mod

# Outside any module, so that no go.mod of the clone is read or changed.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! json=$(cd "$tmp" && go mod download -json "$MODULE@$VERSION"); then
    echo "slinky-fetch: go mod download $MODULE@$VERSION failed" >&2
    printf '%s\n' "${json:-}" >&2
    exit 1
fi
dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
if [ -z "$dir" ] || [ ! -f "$dir/go.mod" ]; then
    echo "slinky-fetch: no source folder in go mod download's answer:" >&2
    printf '%s\n' "$json" >&2
    exit 1
fi
printf "export SLINKY_SRC='%s'\n" "$dir"
