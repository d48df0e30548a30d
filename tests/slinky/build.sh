#!/usr/bin/env bash
# build.sh — build Slinky's slurm-operator manager from its Go module.
#
# Builds github.com/SlinkyProject/slurm-operator/cmd/manager at the version
# pinned in tests/slinky/go/go.mod (+ go.sum) into a cache folder outside the
# clone, keyed by a hash of those pins, of this script and of the Go version:
#
#   $SLURMOP_K8S_CACHE/slinky-<key>/bin/slinky-manager   the manager
#   $SLURMOP_K8S_CACHE/go/mod     GOMODCACHE (shared with tests/k8s/build.sh);
#                                 the module's source, CRDs and charts stay
#                                 there, read-only, and are never copied
#   $SLURMOP_K8S_CACHE/go/build   GOCACHE (shared)
#
# SLURMOP_K8S_CACHE defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/slurmop. When
# the binary is present it does nothing but make sure the module's files are
# still in the module cache. On stdout it prints, and nothing else:
#
#   export SLINKY_BIN=<the manager binary>
#   export SLINKY_DIR=<the module's folder in the module cache: config/crd/bases, helm/...>
#   export SLINKY_VERSION=<the pinned version>
#
# Progress goes to stderr.
#
# Usage: build.sh [--check | --key]
#   --check   print the lines above and exit 0 when the binary is built and
#             the module's folder is there, exit 1 (printing nothing) when a
#             build would be needed
#   --key     print the cache key and exit
#
# Settings (environment):
#   SLURMOP_K8S_CACHE       cache root (see above)
#   SLURMOP_K8S_GO_JOBS     `go build -p` (default 1, or the core count when
#                           CI=true: the build is niced either way)
#
# It needs Go (the module's go directive is 1.26.1; GOTOOLCHAIN=local) and the
# Go module proxy. Exit status: 0 built or present, 77 when Go is missing, 1
# when the build failed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GOMODDIR=$HERE/go
MODULE=github.com/SlinkyProject/slurm-operator

say() { printf 'slinky-build: %s\n' "$*" >&2; }

mode=build
case "${1:-}" in
    "") ;;
    --check) mode=check ;;
    --key) mode=key ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) say "unknown argument: $1"; exit 2 ;;
esac

if ! command -v go >/dev/null 2>&1; then
    say "go is not installed"
    exit 77
fi

export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0
export GOFLAGS="-mod=readonly -modcacherw -buildvcs=false"
GOVERSION=$(go env GOVERSION)

KEY=$({
    echo "$GOVERSION $(go env GOOS)/$(go env GOARCH)"
    cat "$HERE/build.sh" "$GOMODDIR/go.mod" "$GOMODDIR/go.sum"
} | sha256sum | cut -c1-16)
if [ "$mode" = key ]; then echo "$KEY"; exit 0; fi

ROOT=${SLURMOP_K8S_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/slurmop}
OUT=$ROOT/slinky-$KEY
BIN=$OUT/bin/slinky-manager
export GOMODCACHE=$ROOT/go/mod GOCACHE=$ROOT/go/build

VERSION=$(sed -n "s|^require $MODULE \(v[^ ]*\).*|\1|p" "$GOMODDIR/go.mod")
[ -n "$VERSION" ] || { say "no 'require $MODULE vX' line in $GOMODDIR/go.mod"; exit 1; }

# The module's folder in the module cache, without network when it is there.
moddir_cached() {
    local d
    d=$(cd "$GOMODDIR" && GOFLAGS="$GOFLAGS" GOPROXY=off go list -m -f '{{.Dir}}' "$MODULE" 2>/dev/null) || return 1
    [ -n "$d" ] && [ -d "$d/config/crd/bases" ] && echo "$d"
}

print() {
    printf 'export SLINKY_BIN=%s\nexport SLINKY_DIR=%s\nexport SLINKY_VERSION=%s\n' "$BIN" "$1" "$VERSION"
}

if [ -x "$BIN" ] && DIR=$(moddir_cached); then print "$DIR"; exit 0; fi
if [ "$mode" = check ]; then exit 1; fi

mkdir -p "$OUT/bin" "$GOMODCACHE" "$GOCACHE"
exec 9>"$ROOT/.lock-slinky"
if ! flock -n 9; then
    say "waiting for another build in $ROOT"
    flock 9
fi

if [ -n "${SLURMOP_K8S_GO_JOBS:-}" ]; then
    JOBS=$SLURMOP_K8S_GO_JOBS
elif [ "${CI:-}" = true ]; then
    JOBS=$(nproc)
else
    JOBS=1
fi

start=$SECONDS
(cd "$GOMODDIR" && go mod download -json "$MODULE" >/dev/null) || { say "go mod download $MODULE failed"; exit 1; }
DIR=$(moddir_cached) || { say "$MODULE $VERSION has no config/crd/bases after the download"; exit 1; }

if [ ! -x "$BIN" ]; then
    say "building $MODULE/cmd/manager $VERSION with go build -p $JOBS (Go $GOVERSION, cache $ROOT)"
    tmp=$BIN.tmp.$$
    trap 'rm -f "$tmp"' EXIT
    (cd "$GOMODDIR" && nice -n 19 go build -p "$JOBS" -trimpath -ldflags "-s -w" -o "$tmp" "$MODULE/cmd/manager") ||
        { say "building the manager failed"; exit 1; }
    mv "$tmp" "$BIN"
    trap - EXIT
fi
say "done in $((SECONDS - start)) s: $BIN"
print "$DIR"
