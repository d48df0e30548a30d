#!/usr/bin/env bash
# build-node.sh — build what the real Nodes of tests/k8s/nodes.sh run beside
# Debian's containerd: kubelet and kube-proxy (from the k8s.io/kubernetes
# release pinned in tools/kubelet/, which must be the one of
# tools/kubernetes/), CoreDNS (tools/coredns/: a small plugin set) and the
# pause image (pause/pause.c, static, packed by pause/ocipack.py as
# registry.k8s.io/pause:3.10). A separate cache key from build.sh's, so that
# changing the node side never rebuilds the control plane:
#
#   $SLURMOP_K8S_CACHE/k8s-node-<key>/bin        kubelet kube-proxy coredns
#   $SLURMOP_K8S_CACHE/k8s-node-<key>/pause.tar  the pause image (OCI archive)
#   $SLURMOP_K8S_CACHE/go/{mod,build}            shared with build.sh
#
# It prints the bin folder on stdout (pause.tar is beside it, in ..), nothing
# else; progress on stderr. When everything is present it does nothing.
#
# Usage: build-node.sh [--check | --key]   (as build.sh)
# Settings: SLURMOP_K8S_CACHE, SLURMOP_K8S_GO_JOBS (as build.sh).
# Exit status: 0 built or present, 77 when Go or a C compiler is missing,
# 1 when the build failed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOLS=$HERE/tools
BINARIES=(kubelet kube-proxy coredns)

say() { printf 'k8s-build-node: %s\n' "$*" >&2; }

mode=build
case "${1:-}" in
    "") ;;
    --check) mode=check ;;
    --key) mode=key ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) say "unknown argument: $1"; exit 2 ;;
esac

for b in go cc python3; do
    command -v "$b" >/dev/null 2>&1 || { say "$b is not installed"; exit 77; }
done

export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0
export GOFLAGS="-mod=readonly -modcacherw -buildvcs=false"
GOVERSION=$(go env GOVERSION)

key() {
    {
        echo "$GOVERSION $(go env GOOS)/$(go env GOARCH)"
        cc --version | head -1
        cat "$HERE/build-node.sh" "$HERE/pause/pause.c" "$HERE/pause/ocipack.py"
        cat "$TOOLS/kubelet/go.mod" "$TOOLS/kubelet/go.sum"
        cat "$TOOLS/coredns/go.mod" "$TOOLS/coredns/go.sum" "$TOOLS/coredns/main.go"
    } | sha256sum | cut -c1-16
}

KEY=$(key)
if [ "$mode" = key ]; then echo "$KEY"; exit 0; fi

ROOT=${SLURMOP_K8S_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/slurmop}
OUT=$ROOT/k8s-node-$KEY
BIN=$OUT/bin

complete() {
    local b
    for b in "${BINARIES[@]}"; do [ -x "$BIN/$b" ] || return 1; done
    [ -f "$OUT/pause.tar" ]
}

if complete; then echo "$BIN"; exit 0; fi
if [ "$mode" = check ]; then exit 1; fi

mkdir -p "$OUT" "$ROOT/go/mod" "$ROOT/go/build"
export GOMODCACHE=$ROOT/go/mod GOCACHE=$ROOT/go/build

exec 9>"$ROOT/.lock-node"
if ! flock -n 9; then
    say "waiting for another build in $ROOT"
    flock 9
fi
if complete; then echo "$BIN"; exit 0; fi

if [ -n "${SLURMOP_K8S_GO_JOBS:-}" ]; then
    JOBS=$SLURMOP_K8S_GO_JOBS
elif [ "${CI:-}" = true ]; then
    JOBS=$(nproc)
else
    JOBS=1
fi

modver() { (cd "$TOOLS/$1" && go list -m -f '{{.Version}}' "$2"); }

# The node binaries must be of the control plane's release (a kubelet newer
# than its API server is unsupported; an older one hides what production
# runs).
K8S_VER=$(modver kubelet k8s.io/kubernetes)
CP_VER=$(modver kubernetes k8s.io/kubernetes)
[ "$K8S_VER" = "$CP_VER" ] ||
    { say "tools/kubelet pins k8s.io/kubernetes $K8S_VER but tools/kubernetes pins $CP_VER"; exit 1; }

TMP=$OUT/bin.tmp.$$
rm -rf "$TMP"
mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT

gobuild() { # gobuild COMPONENT LDFLAGS OUTPUT PACKAGE...
    local c=$1 ld=$2 out=$3; shift 3
    local t0=$SECONDS
    say "building $c ($*) with go build -p $JOBS"
    (cd "$TOOLS/$c" && nice -n 19 go build -p "$JOBS" -trimpath -ldflags "-s -w $ld" -o "$out" "$@") ||
        { say "building $c failed"; exit 1; }
    say "built $c in $((SECONDS - t0)) s"
}

start=$SECONDS
say "building into $BIN (Go $GOVERSION, cache $ROOT)"

K8S_MINOR=${K8S_VER#v1.}
K8S_MINOR=${K8S_MINOR%%.*}
ld=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$K8S_VER -X $p.gitMajor=1 -X $p.gitMinor=$K8S_MINOR"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
gobuild kubelet "$ld" "$TMP/" k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy

gobuild coredns "" "$TMP/coredns" .

say "building the pause image"
nice -n 19 cc -static -O2 -Wall -Wextra -Werror -o "$TMP/pause" "$HERE/pause/pause.c" ||
    { say "building pause failed (a static libc is in libc6-dev)"; exit 1; }
python3 "$HERE/pause/ocipack.py" "$TMP/pause" registry.k8s.io/pause:3.10 "$TMP/pause.tar"
rm -f "$TMP/pause"

for b in "${BINARIES[@]}"; do
    [ -x "$TMP/$b" ] || { say "missing $b after the build"; exit 1; }
done
mv "$TMP/pause.tar" "$OUT/pause.tar"
rm -rf "$BIN"
mv "$TMP" "$BIN"
trap - EXIT
say "done in $((SECONDS - start)) s: $BIN"
echo "$BIN"
