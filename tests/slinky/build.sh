#!/usr/bin/env bash
# build.sh — build Slinky's slurm-operator manager, one of three versions.
#
#   v1.2.1  (the default) Slinky's newest release, built from source archives
#           of slurm-operator and slurm-client (the module proxy refuses every
#           version after v1.1.0), with a `replace` of slurm-client by its
#           unpacked archive; the archives are read from $SLURMOP_PEERS
#   main    the same from the archives of slurm-operator's main branch
#           (slurm-operator-main-<commit>.tar.gz, slurm-client-main-<commit>.tar.gz)
#   v1.1.0  from its Go module, pinned in tests/slinky/go/go.mod (+ go.sum),
#           through the module proxy
#
# Each goes to a cache folder outside the clone, keyed by the version, the
# inputs (the pin, or the archives' sha256), the build recipe and the Go
# version:
#
#   $SLURMOP_K8S_CACHE/slinky-<version>-<key>/bin/slinky-manager   the manager
#   $SLURMOP_K8S_CACHE/slinky-<version>-<key>/src/slurm-operator   the unpacked
#                                 source of an archive version (CRDs, charts)
#   $SLURMOP_K8S_CACHE/go/mod     GOMODCACHE (shared with tests/k8s/build.sh);
#                                 v1.1.0's source, CRDs and charts stay there,
#                                 read-only, and are never copied
#   $SLURMOP_K8S_CACHE/go/build   GOCACHE (shared)
#
# SLURMOP_K8S_CACHE defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/slurmop. When
# the binary is present it does nothing but check that the source is still
# there. On stdout it prints, and nothing else:
#
#   export SLINKY_BIN=<the manager binary>
#   export SLINKY_DIR=<the source: config/crd/bases, helm/slurm, helm/slurm-operator, ...>
#   export SLINKY_VERSION=<v1.2.1, v1.1.0 or main-<commit>>
#
# Progress goes to stderr.
#
# Usage: build.sh [--version VERSION] [--check | --key | --src]
#   --version V  v1.2.1 (default; or $SLURMOP_SLINKY_VERSION), v1.1.0 or main
#   --check      print the lines above and exit 0 when the binary is built and
#                its source is there, exit 1 (printing nothing) when a build
#                would be needed
#   --key        print the cache key and exit
#   --src        only make the source available (download or unpack; no
#                build): print SLINKY_DIR and SLINKY_VERSION
#
# Settings (environment):
#   SLURMOP_SLINKY_VERSION  the version when --version is not given
#   SLURMOP_PEERS           the folder of the source archives (default: the
#                           folder `shared/peers` beside the main checkout)
#   SLURMOP_K8S_CACHE       cache root (see above)
#   SLURMOP_K8S_GO_JOBS     `go build -p` (default 1, or the core count when
#                           CI=true: the build is niced either way)
#
# It needs Go (the modules' go directive is 1.26.x; GOTOOLCHAIN=local) and the
# Go module proxy (for every dependency but the archives). Exit status: 0 built
# or present; 77 when Go is missing or when an archive version was asked for
# and its archives are not there (the message says which); 1 when the build
# failed; 2 on a usage error.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GOMODDIR=$HERE/go
MODULE=github.com/SlinkyProject/slurm-operator
CLIENT=github.com/SlinkyProject/slurm-client
# Bumped when the way a version is built changes (a new key, a new build);
# editing comments or the usage text of this script keeps the cached builds.
RECIPE=2

say() { printf 'slinky-build: %s\n' "$*" >&2; }

mode=build
VERSION=${SLURMOP_SLINKY_VERSION:-v1.2.1}
while [ $# -gt 0 ]; do
    case "$1" in
        --version) VERSION=${2:?--version needs a value}; shift ;;
        --version=*) VERSION=${1#--version=} ;;
        --check) mode=check ;;
        --key) mode=key ;;
        --src) mode=src ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) say "unknown argument: $1"; exit 2 ;;
    esac
    shift
done
case "$VERSION" in
    v1.1.0) KIND=module ;;
    v1.2.1|main) KIND=archive ;;
    *) say "unknown version '$VERSION' (want v1.2.1, v1.1.0 or main)"; exit 2 ;;
esac

if ! command -v go >/dev/null 2>&1; then
    say "go is not installed"
    exit 77
fi

export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0
export GOFLAGS="-mod=readonly -modcacherw -buildvcs=false"
GOVERSION=$(go env GOVERSION)
ROOT=${SLURMOP_K8S_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/slurmop}
export GOMODCACHE=$ROOT/go/mod GOCACHE=$ROOT/go/build

# The archives: beside the main checkout (a worktree's common git folder names
# it), or where SLURMOP_PEERS says.
peers_dir() {
    if [ -n "${SLURMOP_PEERS:-}" ]; then echo "$SLURMOP_PEERS"; return; fi
    local common top
    if common=$(git -C "$HERE" rev-parse --path-format=absolute --git-common-dir 2>/dev/null); then
        top=$(dirname "$common")
    else
        top=$(cd "$HERE/../.." && pwd)
    fi
    echo "$(dirname "$top")/shared/peers"
}

if [ "$KIND" = archive ]; then
    PEERS=$(peers_dir)
    if [ "$VERSION" = main ]; then
        # One main snapshot at a time: the newest by name if there are several.
        OP_TGZ=$(ls "$PEERS"/slurm-operator-main-*.tar.gz 2>/dev/null | sort | tail -n 1 || true)
        CL_TGZ=$(ls "$PEERS"/slurm-client-main-*.tar.gz 2>/dev/null | sort | tail -n 1 || true)
        [ -z "$OP_TGZ" ] || VERSION=main-$(basename "$OP_TGZ" .tar.gz | sed 's/^slurm-operator-main-//')
    else
        OP_TGZ=$PEERS/slurm-operator-$VERSION.tar.gz
        CL_TGZ=$PEERS/slurm-client-$VERSION.tar.gz
    fi
    if [ -z "$OP_TGZ" ] || [ -z "$CL_TGZ" ] || [ ! -r "$OP_TGZ" ] || [ ! -r "$CL_TGZ" ]; then
        say "Slinky $VERSION is built from source archives of slurm-operator and slurm-client (the module proxy"
        say "refuses versions after v1.1.0), and they are not in $PEERS (SLURMOP_PEERS):"
        say "  want ${OP_TGZ:-slurm-operator-main-<commit>.tar.gz} and ${CL_TGZ:-slurm-client-main-<commit>.tar.gz}"
        say "  (\`build.sh --version v1.1.0\` builds the newest version the proxy serves)"
        exit 77
    fi
    INPUTS=$(sha256sum "$OP_TGZ" "$CL_TGZ" | cut -d' ' -f1)
else
    INPUTS=$(cat "$GOMODDIR/go.mod" "$GOMODDIR/go.sum")
fi

KEY=$(printf '%s\n' "$RECIPE $VERSION $GOVERSION $(go env GOOS)/$(go env GOARCH)" "$INPUTS" | sha256sum | cut -c1-16)
if [ "$mode" = key ]; then echo "$KEY"; exit 0; fi

OUT=$ROOT/slinky-$VERSION-$KEY
BIN=$OUT/bin/slinky-manager

if [ "$KIND" = module ]; then
    PIN=$(sed -n "s|^require $MODULE \(v[^ ]*\).*|\1|p" "$GOMODDIR/go.mod")
    [ "$PIN" = "$VERSION" ] || { say "$GOMODDIR/go.mod pins $MODULE '${PIN:-nothing}', not $VERSION"; exit 1; }
fi

# The source folder when it is there, without network.
src_ready() {
    if [ "$KIND" = module ]; then
        local d
        d=$(cd "$GOMODDIR" && GOPROXY=off go list -m -f '{{.Dir}}' "$MODULE" 2>/dev/null) || return 1
        [ -n "$d" ] && [ -d "$d/config/crd/bases" ] && echo "$d"
    else
        [ -f "$OUT/src/.unpacked" ] && [ -d "$OUT/src/slurm-operator/config/crd/bases" ] && echo "$OUT/src/slurm-operator"
    fi
}

print() {
    if [ "$mode" != src ]; then printf 'export SLINKY_BIN=%s\n' "$BIN"; fi
    printf 'export SLINKY_DIR=%s\nexport SLINKY_VERSION=%s\n' "$1" "$VERSION"
}

if [ "$mode" = src ] && DIR=$(src_ready); then print "$DIR"; exit 0; fi
if [ "$mode" != src ] && [ -x "$BIN" ] && DIR=$(src_ready); then print "$DIR"; exit 0; fi
if [ "$mode" = check ]; then exit 1; fi

mkdir -p "$OUT/bin" "$GOMODCACHE" "$GOCACHE"
exec 9>"$ROOT/.lock-slinky-$VERSION"
if ! flock -n 9; then
    say "waiting for another build of $VERSION in $ROOT"
    flock 9
fi

start=$SECONDS
if [ "$KIND" = module ]; then
    (cd "$GOMODDIR" && go mod download -json "$MODULE" >/dev/null) || { say "go mod download $MODULE failed"; exit 1; }
    BUILDDIR=$GOMODDIR PKG=$MODULE/cmd/manager
elif ! src_ready >/dev/null; then
    say "unpacking $(basename "$OP_TGZ") and $(basename "$CL_TGZ") into $OUT/src"
    rm -rf "$OUT/src" "$OUT/src.tmp.$$"
    mkdir -p "$OUT/src.tmp.$$"
    tar -xzf "$OP_TGZ" -C "$OUT/src.tmp.$$"
    tar -xzf "$CL_TGZ" -C "$OUT/src.tmp.$$"
    [ -f "$OUT/src.tmp.$$/slurm-operator/go.mod" ] && [ -f "$OUT/src.tmp.$$/slurm-client/go.mod" ] ||
        { rm -rf "$OUT/src.tmp.$$"; say "the archives hold no slurm-operator/go.mod and slurm-client/go.mod"; exit 1; }
    (cd "$OUT/src.tmp.$$/slurm-operator" && go mod edit -replace "$CLIENT=../slurm-client")
    touch "$OUT/src.tmp.$$/.unpacked"
    mv "$OUT/src.tmp.$$" "$OUT/src"
fi
DIR=$(src_ready) || { say "$MODULE $VERSION has no config/crd/bases"; exit 1; }
if [ "$mode" = src ]; then print "$DIR"; exit 0; fi
if [ "$KIND" = archive ]; then BUILDDIR=$DIR PKG=./cmd/manager; fi

if [ -n "${SLURMOP_K8S_GO_JOBS:-}" ]; then
    JOBS=$SLURMOP_K8S_GO_JOBS
elif [ "${CI:-}" = true ]; then
    JOBS=$(nproc)
else
    JOBS=1
fi

if [ ! -x "$BIN" ]; then
    say "building $MODULE/cmd/manager $VERSION with go build -p $JOBS (Go $GOVERSION, cache $ROOT)"
    tmp=$BIN.tmp.$$
    trap 'rm -f "$tmp"' EXIT
    (cd "$BUILDDIR" && nice -n 19 go build -p "$JOBS" -trimpath -ldflags "-s -w" -o "$tmp" "$PKG") ||
        { say "building the manager failed"; exit 1; }
    mv "$tmp" "$BIN"
    trap - EXIT
fi
say "done in $((SECONDS - start)) s: $BIN"
print "$DIR"
