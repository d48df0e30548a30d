#!/usr/bin/env bash
# Copy the six CRDs from crds/ (the source of truth) to the places that ship
# them: deploy/manifests/crds/ (plain install) and
# deploy/helm/slurmop-crds/templates/ (the CRD chart). The copies are
# byte-identical; files that no longer exist in crds/ are removed.
#
#   deploy/sync-crds.sh          copy
#   deploy/sync-crds.sh --check  change nothing; exit 1 if a copy is stale
#
# tests/integration/test_deploy_manifests.py fails when the copies drift.
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
case "${1:-}" in
    --check) check=1 ;;
    "") ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

shopt -s nullglob
srcs=(crds/*.yaml)
if [ ${#srcs[@]} -eq 0 ]; then
    echo "sync-crds: no crds/*.yaml to copy" >&2
    exit 1
fi
# Helm renders everything under templates/: a CRD containing "{{" would be
# read as a template action and mangled.
if grep -l '{{' "${srcs[@]}" >/dev/null; then
    echo "sync-crds: $(grep -l '{{' "${srcs[@]}" | tr '\n' ' ')contain '{{', which Helm would try to render" >&2
    exit 1
fi

stale=0
for dest in deploy/manifests/crds deploy/helm/slurmop-crds/templates; do
    [ $check -eq 1 ] || mkdir -p "$dest"
    for f in "${srcs[@]}"; do
        d="$dest/$(basename "$f")"
        if ! cmp -s "$f" "$d"; then
            stale=1
            if [ $check -eq 1 ]; then
                echo "sync-crds: $d differs from $f" >&2
            else
                cp "$f" "$d"
                echo "sync-crds: updated $d"
            fi
        fi
    done
    for d in "$dest"/*.yaml; do
        if [ ! -e "crds/$(basename "$d")" ]; then
            stale=1
            if [ $check -eq 1 ]; then
                echo "sync-crds: $d has no source in crds/" >&2
            else
                rm -f "$d"
                echo "sync-crds: removed $d"
            fi
        fi
    done
done
if [ $check -eq 1 ] && [ $stale -eq 1 ]; then
    echo "sync-crds: run deploy/sync-crds.sh" >&2
    exit 1
fi
exit 0
