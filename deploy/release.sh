#!/usr/bin/env bash
# release.sh — a slurmop release in one command.
#
#   bash deploy/release.sh [--out DIR] VERSION
#
# VERSION is a semantic version without a leading "v" and without build
# metadata ("+..." cannot be part of an image tag): 0.2.0, 0.2.0-rc.1. Its
# X.Y.Z must be the project version in CMakeLists.txt, which the binary's
# `slurmop --version` reports (a pre-release of that version is allowed).
#
# Writes into DIR (default out/release-VERSION, which must not exist or be
# empty):
#   slurmop-VERSION.oci.tar        the operator image docker.io/library/slurmop:VERSION
#                                  (linux/amd64), built by deploy/images/build.sh
#                                  operator and renamed (deploy/release_oci.py); an
#                                  OCI layout with a docker manifest.json beside
#   slurmop-crds-VERSION.tgz       the three charts (`helm package`): chart version
#   slurmop-VERSION.tgz            VERSION; appVersion VERSION for slurmop-crds and
#   slurm-VERSION.tgz              slurmop (whose values.yaml image.tag is VERSION);
#                                  the slurm chart keeps its appVersion, the Slurm
#                                  release its images are
#   slurmop-VERSION.src.tar.gz     the sources (`git archive` of the work tree's tracked
#                                  files, under slurmop-VERSION/), which build with
#                                  `slurmop --version` saying "commit unknown"
#   SHA256SUMS                     `sha256sum -c SHA256SUMS` in DIR checks them all
#   RELEASE.txt                    version, commit, image ref and digest, sizes,
#                                  and why there is no arm64 image
# and prints the same summary. The charts in the tree are not changed: they
# are packaged from a temporary copy.
#
# Needs root (the image builder runs buildah in private mount namespaces) and
# helm: $HELM, else the pinned one of tests/k8s (`bash tests/k8s/build.sh
# --check` prints its folder), else helm on the PATH.
#
# Exit status: 0 done, 1 a step failed, 2 bad arguments.
set -euo pipefail

main() {
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=""
VERSION=""

say() { printf 'release: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2; }
bad() { say "$*"; exit 2; }

while [ $# -gt 0 ]; do
    case $1 in
        --out) [ $# -ge 2 ] || bad "--out needs a folder"; OUT=$2; shift ;;
        --out=*) OUT=${1#--out=} ;;
        -h|--help) usage ;;
        -*) bad "unknown option: $1" ;;
        *) [ -z "$VERSION" ] || bad "one VERSION only (got $VERSION and $1)"; VERSION=$1 ;;
    esac
    shift
done
[ -n "$VERSION" ] || usage

# Semantic versioning 2.0.0, less build metadata: numeric parts without
# leading zeros, dot-separated pre-release identifiers ([0-9A-Za-z-], a
# numeric one without leading zeros). The result is a valid image tag
# ([A-Za-z0-9_.-], at most 128 characters) and a valid chart version.
local num='(0|[1-9][0-9]*)' id='(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)'
case $VERSION in
    v[0-9]*) bad "VERSION $VERSION: without the leading v (${VERSION#v})" ;;
    *+*) bad "VERSION $VERSION: no build metadata (+...): an image tag cannot hold '+'" ;;
esac
[[ $VERSION =~ ^$num\.$num\.$num(-$id(\.$id)*)?$ ]] \
    || bad "VERSION $VERSION: not a semantic version (X.Y.Z or X.Y.Z-PRERELEASE, e.g. 0.2.0-rc.1)"
[ ${#VERSION} -le 128 ] || bad "VERSION: longer than an image tag may be (128)"
local core=${VERSION%%-*} project
project=$(sed -n 's/^project(slurmop VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
[ -n "$project" ] || die "no project(slurmop VERSION ...) in CMakeLists.txt"
[ "$core" = "$project" ] \
    || bad "VERSION $VERSION: the binary would report $project (CMakeLists.txt); set project(slurmop VERSION $core) first"

[ -n "$OUT" ] || OUT=$ROOT/out/release-$VERSION
if [ -e "$OUT" ] && [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
    bad "$OUT exists and is not empty: remove it or give --out"
fi
[ "$(id -u)" = 0 ] || die "needs root: deploy/images/build.sh builds the image with buildah in private mount namespaces"

local helm=${HELM:-}
if [ -z "$helm" ]; then
    local bin
    if bin=$(bash "$ROOT/tests/k8s/build.sh" --check 2>/dev/null) && [ -x "$bin/helm" ]; then
        helm=$bin/helm
    else
        helm=$(command -v helm || true)
    fi
fi
[ -n "$helm" ] && [ -x "$helm" ] \
    || die "no helm: set HELM, run bash tests/k8s/build.sh (the pinned one), or put helm on the PATH"

local t0 commit
t0=$(date +%s)
commit=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
if [ "$commit" != unknown ] && [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    commit=$commit-dirty
    say "warning: the work tree has uncommitted changes; this release is built from them ($commit)"
fi

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/slurmop-release.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# 1. The image. build.sh names it after the slurmop chart's appVersion in
# the tree and caches it by its inputs; the release renames it.
say "operator image: bash deploy/images/build.sh operator"
local line src ref
line=$(bash "$ROOT/deploy/images/build.sh" operator | grep '^docker.io/library/slurmop:' | tail -n 1) \
    || die "deploy/images/build.sh operator failed"
src=${line#* }
[ -f "$src" ] || die "deploy/images/build.sh printed no archive ($line)"
ref=docker.io/library/slurmop:$VERSION
local image=$OUT/slurmop-$VERSION.oci.tar digest
digest=$(python3 "$HERE/release_oci.py" --in "$src" --out "$image" --ref "$ref" | cut -d' ' -f2) \
    || die "release_oci.py failed"

# 2. The charts, from a copy: chart version VERSION for all three, appVersion
# VERSION where it is slurmop's version (not the slurm chart's, which names
# the Slurm release), and the operator's default image tag.
say "charts: $helm package"
cp -a "$ROOT/deploy/helm" "$TMP/helm"
python3 - "$TMP/helm/slurmop/values.yaml" "$VERSION" <<'EOF'
import re, sys
path, version = sys.argv[1], sys.argv[2]
text = open(path).read()
# The top-level image block's tag (values.yaml: `image:` then indented keys).
new, n = re.subn(r'(?m)^(image:\n(?:[ \t]+.*\n|[ \t]*\n)*?  tag:)[ \t]*""[ \t]*$',
                 lambda m: m.group(1) + ' "%s"' % version, text, count=1)
if n != 1:
    sys.exit("release: no top-level image.tag: \"\" in %s" % path)
open(path, "w").write(new)
EOF
export HELM_CACHE_HOME=$TMP/helm-home/cache HELM_CONFIG_HOME=$TMP/helm-home/config HELM_DATA_HOME=$TMP/helm-home/data
local c
for c in slurmop-crds slurmop slurm; do
    local app=()
    [ "$c" = slurm ] || app=(--app-version "$VERSION")
    "$helm" package "$TMP/helm/$c" --version "$VERSION" "${app[@]}" --destination "$OUT" >/dev/null \
        || die "helm package $c failed"
    [ -f "$OUT/$c-$VERSION.tgz" ] || die "helm package $c wrote no $c-$VERSION.tgz"
done

# 3. The sources: the tracked files as they are in the work tree (`git
# stash create` makes a commit of them without touching the tree or the
# stash; it prints nothing when the tree is clean, and HEAD is archived).
say "sources: git archive"
local snap
snap=$(git -C "$ROOT" stash create 2>/dev/null) || die "git stash create failed"
git -C "$ROOT" archive --format=tar.gz --prefix="slurmop-$VERSION/" -o "$OUT/slurmop-$VERSION.src.tar.gz" \
    "${snap:-HEAD}" || die "git archive failed"

# 4. Why there is no arm64 image (measured on this host, not assumed).
local arm64
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    arm64="not built: this host cannot run arm64 programs (no qemu-aarch64 handler in /proc/sys/fs/binfmt_misc),"
    arm64+=" which deploy/Dockerfile's RUN steps (apt-get, cmake) need under \`buildah bud --arch arm64\`,"
    arm64+=" and deploy/images/build.sh makes amd64 base images only"
else
    arm64="not built: deploy/images/build.sh makes amd64 base images only (a qemu-aarch64 handler is registered here)"
fi

# 5. Checksums and the summary.
# In MB (10^6 bytes), as the docs give image sizes; du -m would give MiB, rounded up.
local size
size=$(awk -v b="$(stat -c %s "$image")" 'BEGIN { printf "%.1f", b / 1e6 }')
{
    echo "slurmop $VERSION"
    echo "commit:  $commit"
    echo "image:   $ref ($digest, linux/amd64, $size MB uncompressed)"
    echo "arm64:   $arm64"
    echo "charts:  slurmop-crds-$VERSION.tgz slurmop-$VERSION.tgz slurm-$VERSION.tgz (image.tag $VERSION)"
    echo "sources: slurmop-$VERSION.src.tar.gz"
} > "$OUT/RELEASE.txt"
(cd "$OUT" && sha256sum slurmop-"$VERSION".oci.tar slurmop-crds-"$VERSION".tgz slurmop-"$VERSION".tgz \
    slurm-"$VERSION".tgz slurmop-"$VERSION".src.tar.gz RELEASE.txt > SHA256SUMS)
cat "$OUT/RELEASE.txt"
echo "folder:  $OUT"
(cd "$OUT" && ls -l | sed -n '2,$p' | awk '{printf "  %10s  %s\n", $5, $9}')
echo "push:    skopeo copy oci-archive:$image docker://REGISTRY/slurmop:$VERSION"
say "done in $(( $(date +%s) - t0 )) s"
}

main "$@"
exit
