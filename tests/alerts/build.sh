#!/usr/bin/env bash
# build.sh — build promtool (Prometheus' rule checker and rule unit tester)
# from its Go module, pinned in tests/alerts/tools/promtool/ (go.mod with a
# tool directive, go.sum), into a cache folder outside the clone, keyed by a
# hash of the pin, of this script and of the Go version:
#
#   $SLURMOP_K8S_CACHE/promtool-<key>/promtool   the binary
#   $SLURMOP_K8S_CACHE/go/mod, go/build           module and build caches
#                                                 (shared with tests/k8s)
#
# SLURMOP_K8S_CACHE defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/slurmop. When
# the binary is there it does nothing. It prints the binary's path on stdout
# (nothing else); progress goes to stderr.
#
# Usage: build.sh [--check]
#   --check   print the path and exit 0 when built, exit 1 when a build
#             would be needed
#
# Needs Go (GOTOOLCHAIN=local) and the Go module proxy. Exit status: 0 built
# or present, 77 when Go is missing, 1 when the build failed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PIN=$HERE/tools/promtool

say() { printf 'promtool-build: %s\n' "$*" >&2; }

mode=build
case "${1:-}" in
    "") ;;
    --check) mode=check ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) say "unknown argument: $1"; exit 2 ;;
esac

if ! command -v go >/dev/null 2>&1; then
    say "go is not installed"
    exit 77
fi

export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0
export GOFLAGS="-mod=readonly -modcacherw -buildvcs=false"
KEY=$({
    echo "$(go env GOVERSION) $(go env GOOS)/$(go env GOARCH)"
    cat "$HERE/build.sh" "$PIN/go.mod" "$PIN/go.sum"
} | sha256sum | cut -c1-16)

ROOT=${SLURMOP_K8S_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/slurmop}
OUT=$ROOT/promtool-$KEY
BIN=$OUT/promtool

if [ -x "$BIN" ]; then echo "$BIN"; exit 0; fi
if [ "$mode" = check ]; then exit 1; fi

mkdir -p "$OUT" "$ROOT/go/mod" "$ROOT/go/build"
export GOMODCACHE=$ROOT/go/mod GOCACHE=$ROOT/go/build

# One build at a time per cache root (the k8s build uses another lock).
exec 9>"$ROOT/.promtool.lock"
if ! flock -n 9; then
    say "waiting for another build in $ROOT"
    flock 9
fi
if [ -x "$BIN" ]; then echo "$BIN"; exit 0; fi

JOBS=${SLURMOP_K8S_GO_JOBS:-1}
if [ -z "${SLURMOP_K8S_GO_JOBS:-}" ] && [ "${CI:-}" = true ]; then JOBS=$(nproc); fi
VER=$(cd "$PIN" && go list -m -f '{{.Version}}' github.com/prometheus/prometheus)
t0=$SECONDS
say "building promtool $VER with go build -p $JOBS into $OUT"
TMP=$OUT/promtool.tmp.$$
trap 'rm -f "$TMP"' EXIT
# promtool reports the version its ldflags give (else an empty one).
# remove_all_sd leaves out Prometheus' service discovery plugins (Azure,
# AWS, GCE, ... SDKs: most of a full build's time), which checking and
# unit-testing rule files never use.
(cd "$PIN" && nice -n 19 go build -p "$JOBS" -trimpath -tags remove_all_sd \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=${VER#v}" \
    -o "$TMP" github.com/prometheus/prometheus/cmd/promtool) || { say "build failed"; exit 1; }
mv "$TMP" "$BIN"
trap - EXIT
say "built in $((SECONDS - t0)) s: $BIN"
echo "$BIN"
