#!/usr/bin/env bash
# build.sh — build the pinned Kubernetes test components from their Go modules.
#
# Builds etcd, kwok, helm, kube-apiserver, kube-controller-manager,
# kube-scheduler and kubectl from the modules pinned in tests/k8s/tools/*/
# (go.mod + go.sum each) into a cache folder outside the clone, keyed by a
# hash of those pins, of this script and of the Go version:
#
#   $SLURMOP_K8S_CACHE/k8s-<key>/bin     the binaries
#   $SLURMOP_K8S_CACHE/k8s-<key>/kwok-stages.yaml   kwok's default stages
#   $SLURMOP_K8S_CACHE/go/mod            GOMODCACHE (shared by every key)
#   $SLURMOP_K8S_CACHE/go/build          GOCACHE    (shared by every key)
#
# SLURMOP_K8S_CACHE defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/slurmop, so a
# later run (or a CI run on the same machine) reuses the result. When every
# binary is present it does nothing. It prints the bin folder on stdout (and
# nothing else there); progress goes to stderr.
#
# Usage: build.sh [--check | --key]
#   --check   print the bin folder and exit 0 when it is complete, exit 1
#             (printing nothing) when a build would be needed
#   --key     print the cache key and exit
#
# Settings (environment):
#   SLURMOP_K8S_CACHE     cache root (see above)
#   SLURMOP_K8S_GO_JOBS   `go build -p` (default 1, or the core count when
#                         CI=true: the build is niced either way)
#
# It needs Go (the go directive of each pin fits Go 1.26; GOTOOLCHAIN=local so
# no other toolchain is fetched) and the Go module proxy; nothing else.
# Exit status: 0 built or present, 77 when Go is missing, 1 when the build
# failed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOLS=$HERE/tools
COMPONENTS=(etcd kwok helm kubernetes)
BINARIES=(etcd kwok helm kube-apiserver kube-controller-manager kube-scheduler kubectl)

say() { printf 'k8s-build: %s\n' "$*" >&2; }

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

key() {
    {
        echo "$GOVERSION $(go env GOOS)/$(go env GOARCH)"
        cat "$HERE/build.sh"
        for c in "${COMPONENTS[@]}"; do cat "$TOOLS/$c/go.mod" "$TOOLS/$c/go.sum"; done
    } | sha256sum | cut -c1-16
}

KEY=$(key)
if [ "$mode" = key ]; then echo "$KEY"; exit 0; fi

ROOT=${SLURMOP_K8S_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/slurmop}
OUT=$ROOT/k8s-$KEY
BIN=$OUT/bin

complete() {
    local b
    for b in "${BINARIES[@]}"; do [ -x "$BIN/$b" ] || return 1; done
    [ -f "$OUT/kwok-stages.yaml" ]
}

if complete; then echo "$BIN"; exit 0; fi
if [ "$mode" = check ]; then exit 1; fi

mkdir -p "$OUT" "$ROOT/go/mod" "$ROOT/go/build"
export GOMODCACHE=$ROOT/go/mod GOCACHE=$ROOT/go/build

# One build at a time per cache root (two CI runs, or a developer and a test).
exec 9>"$ROOT/.lock"
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

TMP=$OUT/bin.tmp.$$
rm -rf "$TMP"
mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT

modver() { (cd "$TOOLS/$1" && go list -m -f '{{.Version}}' "$2"); }

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

gobuild etcd "" "$TMP/etcd" go.etcd.io/etcd/server/v3

gobuild kwok "" "$TMP/" sigs.k8s.io/kwok/cmd/kwok
# kwok's default stages (what kwokctl configures): nodes turn Ready and keep
# a lease; pods bound to them turn Running/Ready, complete, and go on delete.
KWOK_DIR=$(cd "$TOOLS/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"
    cat "$KWOK_DIR/kustomize/stage/$f"
done > "$TMP/kwok-stages.yaml"

HELM_VER=$(modver helm helm.sh/helm/v3)
gobuild helm "-X helm.sh/helm/v3/internal/version.version=$HELM_VER" "$TMP/" helm.sh/helm/v3/cmd/helm

# Without these the binaries call themselves v0.0.0-master, which breaks
# version checks (helm's kubeVersion, kubectl's skew warning).
K8S_VER=$(modver kubernetes k8s.io/kubernetes)
K8S_MINOR=${K8S_VER#v1.}
K8S_MINOR=${K8S_MINOR%%.*}
ld=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$K8S_VER -X $p.gitMajor=1 -X $p.gitMinor=$K8S_MINOR"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
gobuild kubernetes "$ld" "$TMP/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl

for b in "${BINARIES[@]}"; do
    [ -x "$TMP/$b" ] || { say "missing $b after the build"; exit 1; }
done
mv "$TMP/kwok-stages.yaml" "$OUT/kwok-stages.yaml"
rm -rf "$BIN"
mv "$TMP" "$BIN"
trap - EXIT
say "done in $((SECONDS - start)) s: $BIN"
echo "$BIN"
