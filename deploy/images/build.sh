#!/usr/bin/env bash
# build.sh — container images for slurmop, built on this machine with no
# Docker engine and no registry.
#
#   bash deploy/images/build.sh [--slurm 24.11|26.05] TARGET...
#
# Targets:
#   operator  docker.io/library/slurmop:<deploy/helm/slurmop appVersion>, from
#             deploy/Dockerfile with `buildah bud`; its base images debian:13
#             and debian:13-slim are made here from a debootstrap of trixie
#             (mbedtls 3.6 LTS, so that its servers speak TLS 1.3)
#             and imported into buildah's storage (nothing is pulled)
#   slurm     localhost/slurmop/{slurmctld,slurmd,slurmrestd,slurmdbd,login,sackd}:<version>,
#             one debootstrap root file system (Debian trixie for 24.11, forky
#             for 26.05) behind all six, each with its own entrypoint
#   mariadb   localhost/slurmop/mariadb:<MariaDB version>, Debian trixie's
#             mariadb-server with a small entrypoint (see mariadb-entrypoint.sh)
#   pause     registry.k8s.io/pause:3.10, a static program of our own (pause.c)
#   all       all of the above
#
# Output: one line per image on stdout, "<image-ref> <absolute-path-to-archive>";
# progress goes to stderr. The archives are OCI image layouts in a tar with a
# docker manifest.json beside (the operator's is a docker archive), which
# `ctr -n k8s.io images import`, `podman load`, `docker load` and
# `skopeo copy oci-archive:...` take. Several images may share one archive
# (the six Slurm images share a layer): import each distinct path once.
#
# Cache: ${SLURMOP_K8S_CACHE:-~/.cache/slurmop}/images-v1, outside the clone.
# Each archive is kept under a key hashed from its inputs (this script,
# ocipack.py, the Dockerfile and the operator's sources, the entrypoints, the
# Debian suite and the versions of every package in its root file system), so
# a warm run only checks keys and prints (seconds). Debootstrapped root file
# systems are cached by suite and package list; SLURMOP_IMAGES_REFRESH=1
# makes new ones (and so picks up newer Debian packages). One build at a time
# (flock on the cache); a waiting run uses what the first one built.
#
# Installs what it needs from Debian when missing (debootstrap, buildah, gcc,
# libc6-dev, python3). Runs as root. Leaves nothing mounted or running: each
# debootstrap and every buildah call run in a private mount namespace, which
# the kernel drops with its last process; buildah keeps its storage in the
# cache, its run state in a temporary folder, runs RUN steps with chroot
# isolation and the host's network (no runc, no CNI), and what it writes
# outside the cache anyway (/var/lib/containers/cache, /etc/cni/net.d,
# /run/containers) is removed when it was not there before.
#
# Settings (environment):
#   SLURMOP_K8S_CACHE        cache root (default ~/.cache/slurmop)
#   SLURMOP_IMAGES_MIRROR    Debian mirror (default: the host's apt mirror)
#   SLURMOP_IMAGES_REFRESH=1 debootstrap again even when a root file system is cached
set -euo pipefail

# Everything is in main, which bash reads whole before it runs: a run is not
# thrown off when the script is changed (git checkout, an edit) under it.
main() {
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SLURM_VERSION=26.05
TARGETS=()

say() { printf 'images: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
now_ms() { date +%s%3N; }

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2; }

while [ $# -gt 0 ]; do
    case $1 in
        --slurm) SLURM_VERSION=${2:-}; shift ;;
        --slurm=*) SLURM_VERSION=${1#--slurm=} ;;
        -h|--help) usage ;;
        operator|slurm|mariadb|pause) TARGETS+=("$1") ;;
        all) TARGETS+=(operator slurm mariadb pause) ;;
        *) say "unknown argument: $1"; usage ;;
    esac
    shift
done
[ ${#TARGETS[@]} -gt 0 ] || usage
case $SLURM_VERSION in
    24.11) SLURM_SUITE=trixie ;;
    26.05) SLURM_SUITE=forky ;;
    *) die "--slurm $SLURM_VERSION: want 24.11 or 26.05" ;;
esac
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, buildah)"

CACHE=${SLURMOP_K8S_CACHE:-$HOME/.cache/slurmop}/images-v1
mkdir -p "$CACHE"/{rootfs,out}
CACHE=$(cd "$CACHE" && pwd)
exec 9>"$CACHE/.lock"
if ! flock -n 9; then
    say "waiting for another build (lock $CACHE/.lock)"
    flock 9
fi

TMP=$(mktemp -d "$CACHE/.tmp.XXXXXX")
# What buildah writes outside its storage even so (a lock, its blob-info
# cache), and whether each was there before: ours are removed at the end,
# with the folders they made when those are left empty (never a file or a
# folder someone else put there meanwhile).
OUTSIDE=(/etc/cni/net.d/cni.lock /var/lib/containers/cache/blob-info-cache-v1.boltdb)
OUTSIDE_DIRS=(/etc/cni/net.d /etc/cni /var/lib/containers/cache /var/lib/containers /run/containers /run/runc)
declare -gA WAS_THERE=()
for p in "${OUTSIDE[@]}" "${OUTSIDE_DIRS[@]}"; do [ ! -e "$p" ] || WAS_THERE[$p]=1; done
cleanup() {
    rm -rf "$TMP"
    local p
    for p in "${OUTSIDE[@]}"; do
        [ -n "${WAS_THERE[$p]:-}" ] || rm -f "$p"
    done
    for p in "${OUTSIDE_DIRS[@]}"; do
        [ -n "${WAS_THERE[$p]:-}" ] || rmdir "$p" 2>/dev/null || true
    done
}
trap cleanup EXIT

# ---- tools -------------------------------------------------------------------

APT_UPDATED=0
need() { # need CMD PACKAGE
    command -v "$1" >/dev/null 2>&1 && return 0
    say "installing $2 (for $1)"
    if [ "$APT_UPDATED" = 0 ]; then apt-get update -qq >&2; APT_UPDATED=1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2" >&2
}
need python3 python3
need debootstrap debootstrap
need unshare util-linux

mirror() {
    if [ -n "${SLURMOP_IMAGES_MIRROR:-}" ]; then echo "$SLURMOP_IMAGES_MIRROR"; return; fi
    local m
    m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' || true)
    [ -n "$m" ] || m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
        | awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' || true)
    echo "${m:-http://deb.debian.org/debian}"
}
MIRROR=$(mirror)

# hash_of WORDS... : sha256 of the words and of the files among them.
hash_of() {
    local w
    for w in "$@"; do
        if [ -f "$w" ]; then printf 'file %s %s\n' "${w#"$ROOT"/}" "$(sha256sum < "$w" | cut -c1-64)"
        else printf 'word %s\n' "$w"; fi
    done | sha256sum | cut -c1-16
}

# ---- root file systems -------------------------------------------------------

# rootfs NAME SUITE PACKAGES: print the path of a cached debootstrap
# --variant=minbase of SUITE with PACKAGES (comma-separated), building it
# when there is none. The folder holds .images-rootfs, written last, with
# the package list and the version of every installed package.
rootfs() {
    local name=$1 suite=$2 pkgs=$3 key dir tmp log t0 script=""
    key=$(hash_of rootfs-v1 "$suite" "$pkgs")
    dir=$CACHE/rootfs/$name-$key
    if [ -f "$dir/.images-rootfs" ] && [ "${SLURMOP_IMAGES_REFRESH:-0}" != 1 ]; then echo "$dir"; return; fi
    # debootstrap has no script for forky (or any testing/unstable suite
    # newer than it knows): sid's works for them.
    [ -e "/usr/share/debootstrap/scripts/$suite" ] || script=/usr/share/debootstrap/scripts/sid
    rm -rf "$CACHE/rootfs/.tmp.$name".* "$CACHE/rootfs/.old.$name".*
    tmp=$(mktemp -d "$CACHE/rootfs/.tmp.$name.XXXXXX")
    chmod 755 "$tmp"
    log=$CACHE/rootfs/$name.debootstrap.log
    t0=$(now_ms)
    say "debootstrap $suite ($pkgs) from $MIRROR; log: $log"
    # A mount namespace of its own: debootstrap mounts /proc and /sys in the
    # target, and an interrupted one would leave them mounted.
    if ! nice unshare -m --propagation private debootstrap --variant=minbase ${pkgs:+--include="$pkgs"} \
            "$suite" "$tmp" "$MIRROR" ${script:+"$script"} </dev/null >"$log" 2>&1; then
        tail -n 5 "$log" >&2
        rm -rf "$tmp"
        die "debootstrap of $suite failed (log: $log)"
    fi
    rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*_dists_* 2>/dev/null || true
    {
        echo "suite: $suite"
        echo "packages: $pkgs"
        echo "built: $(date -u +%FT%TZ) from $MIRROR"
        chroot "$tmp" dpkg-query -W -f '${Package} ${Version}\n'
    } > "$tmp/.images-rootfs.part"
    mv "$tmp/.images-rootfs.part" "$tmp/.images-rootfs"
    if [ -e "$dir" ]; then mv -T "$dir" "$CACHE/rootfs/.old.$name.$$"; rm -rf "$CACHE/rootfs/.old.$name.$$"; fi
    mv -T "$tmp" "$dir"
    say "root file system $name: $(du -sm "$dir" | cut -f1) MB in $(( ($(now_ms) - t0) / 1000 )) s"
    echo "$dir"
}

# stage BASE: a copy of BASE to change (hard links would change the cache).
stage() {
    local s
    s=$(mktemp -d "$TMP/stage.XXXXXX")
    cp -a "$1/." "$s/"
    rm -f "$s/.images-rootfs"
    echo "$s"
}

# slim TREE: drop what a container does not use (docs, man pages, locales
# but C, apt lists, logs, caches), and keep dpkg from installing them again.
slim() {
    local t=$1
    rm -rf "$t"/usr/share/doc/* "$t"/usr/share/man/* "$t"/usr/share/info/* "$t"/usr/share/lintian \
        "$t"/var/lib/apt/lists/* "$t"/var/cache/apt/* "$t"/var/cache/debconf/*-old \
        "$t"/var/cache/ldconfig/aux-cache "$t"/debootstrap
    # Logs go, the folders stay (an image's daemons log into some of them).
    find "$t/var/log" -type f -delete
    find "$t/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} + 2>/dev/null || true
    mkdir -p "$t/etc/dpkg/dpkg.cfg.d"
    cat > "$t/etc/dpkg/dpkg.cfg.d/slurmop-slim" <<'EOF'
# Container image: no documentation, manual pages or translations.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
EOF
    # Machine identity and host keys must be made per container, not baked in.
    : > "$t/etc/machine-id"
    rm -f "$t"/etc/ssh/ssh_host_*
    # No policy-rc.d games: nothing in an image starts services at install.
    # Files the runtime binds over (a fresh empty one is what it expects).
    : > "$t/etc/hostname"
    : > "$t/etc/resolv.conf"
}

# pack OUT SPEC...: ocipack the tree in $STAGE into OUT with images SPEC.
pack() {
    local out=$1; shift
    local args=() s
    for s in "$@"; do args+=(--image "$s"); done
    python3 "$HERE/ocipack.py" --rootfs "$STAGE" --out "$out" "${args[@]}"
}

# spec REF USER ENTRYPOINT_JSON CMD_JSON [PORTS_JSON]
spec() {
    python3 - "$@" <<'EOF'
import json, sys
ref, user, ep, cmd = sys.argv[1:5]
ports = json.loads(sys.argv[5]) if len(sys.argv) > 5 else []
print(json.dumps({"ref": ref, "user": user, "entrypoint": json.loads(ep), "cmd": json.loads(cmd),
                  "ports": ports, "workdir": "/",
                  "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                  "labels": {"org.opencontainers.image.vendor": "slurmop",
                             "org.opencontainers.image.source": "deploy/images/build.sh"}}))
EOF
}

RESULTS=()
# emit REF ARCHIVE: an output line; the archive's time is refreshed, so that
# evict keeps what is in use.
emit() { touch -c "$2"; RESULTS+=("$1 $2"); }

# evict PREFIX KEEP_PATH: of the archives PREFIX*.tar keep KEEP_PATH and the
# three newest others. Several checkouts (worktrees, CI's clone) share the
# cache with different sources, so other keys' archives stay: removing them
# would make each checkout's next run a cold one.
evict() {
    local f n=0
    for f in $(ls -t "$1"*.tar 2>/dev/null); do
        [ "$f" = "$2" ] && continue
        n=$((n + 1))
        [ "$n" -lt 4 ] || rm -f "$f"
    done
}

# ---- slurm ---------------------------------------------------------------------

SLURM_PKGS=slurmctld,slurmd,slurmrestd,slurmdbd,slurm-client,slurm-wlm-basic-plugins,slurm-wlm-jwt-plugin,sackd,tini,procps,openssh-server
SLURM_IMAGES=(slurmctld slurmd slurmrestd slurmdbd login sackd)

build_slurm() {
    local base key out t0 n
    base=$(rootfs "slurm-$SLURM_SUITE" "$SLURM_SUITE" "$SLURM_PKGS")
    key=$(hash_of "$HERE/build.sh" "$HERE/ocipack.py" "$HERE"/slurm/* "$base/.images-rootfs" "$SLURM_VERSION")
    out=$CACHE/out/slurm-$SLURM_VERSION-$key.tar
    if [ ! -f "$out" ]; then
        t0=$(now_ms)
        local got
        got=$(chroot "$base" dpkg-query -W -f '${Version}' slurmctld)
        case $got in "$SLURM_VERSION".*) ;; *) die "$SLURM_SUITE has Slurm $got, not $SLURM_VERSION" ;; esac
        say "slurm $SLURM_VERSION images (Slurm $got, Debian $SLURM_SUITE)"
        STAGE=$(stage "$base")
        slurm_customize "$STAGE"
        slim "$STAGE"
        local r=localhost/slurmop e=/usr/local/bin
        pack "$out" \
            "$(spec "$r/slurmctld:$SLURM_VERSION" 0:0 "[\"tini\",\"--\",\"$e/slurmctld-entrypoint.sh\"]" '[]' '["6817/tcp"]')" \
            "$(spec "$r/slurmd:$SLURM_VERSION" 0:0 "[\"tini\",\"--\",\"$e/slurmd-entrypoint.sh\"]" '[]' '["6818/tcp","22/tcp"]')" \
            "$(spec "$r/slurmrestd:$SLURM_VERSION" 0:0 '["tini","-g","--","slurmrestd"]' '["0.0.0.0:6820"]' '["6820/tcp"]')" \
            "$(spec "$r/slurmdbd:$SLURM_VERSION" 0:0 '["tini","-g","--","slurmdbd","-D"]' '[]' '["6819/tcp"]')" \
            "$(spec "$r/login:$SLURM_VERSION" 0:0 "[\"tini\",\"--\",\"$e/login-entrypoint.sh\"]" '[]' '["22/tcp"]')" \
            "$(spec "$r/sackd:$SLURM_VERSION" 0:0 "[\"tini\",\"--\",\"$e/sackd-entrypoint.sh\"]" '[]' '[]')"
        rm -rf "$STAGE"
        say "slurm $SLURM_VERSION: $(du -m "$out" | cut -f1) MB archive in $(( ($(now_ms) - t0) / 1000 )) s"
        evict "$CACHE/out/slurm-$SLURM_VERSION-" "$out"
    fi
    for n in "${SLURM_IMAGES[@]}"; do emit "localhost/slurmop/$n:$SLURM_VERSION" "$out"; done
}

# The slurm user and group get Slinky's ids (401), so that files on volumes
# and the pods' runAsUser agree with Slinky's images; Debian made them with
# ids of its own, so everything they own moves along.
slurm_customize() {
    local t=$1 olduid oldgid
    olduid=$(awk -F: '$1 == "slurm" {print $3}' "$t/etc/passwd")
    oldgid=$(awk -F: '$1 == "slurm" {print $3}' "$t/etc/group")
    [ -n "$olduid" ] && [ -n "$oldgid" ] || die "no slurm user in the root file system"
    awk -F: -v OFS=: '$3 == 401 && $1 != "slurm" {exit 1}' "$t/etc/passwd" || die "uid 401 is taken"
    sed -i -E "s/^slurm:([^:]*):$olduid:$oldgid:/slurm:\\1:401:401:/" "$t/etc/passwd"
    sed -i -E "s/^slurm:([^:]*):$oldgid:/slurm:\\1:401:/" "$t/etc/group"
    find "$t" -xdev -uid "$olduid" -exec chown -h 401 {} +
    find "$t" -xdev -gid "$oldgid" -exec chgrp -h 401 {} +
    install -d -m 0755 "$t/usr/local/lib/slurmop"
    install -m 0644 "$HERE/slurm/lib.sh" "$t/usr/local/lib/slurmop/lib.sh"
    local f
    for f in "$HERE"/slurm/*-entrypoint.sh; do install -m 0755 "$f" "$t/usr/local/bin/"; done
    # Folders the daemons expect (the pods mount most of them over).
    # Not /run/slurm: slurmd (as root) refuses a RuntimeDir that is not its
    # user's, sackd (as slurm) wants its own; each entrypoint makes it.
    install -d -m 0755 -o 401 -g 401 "$t/var/spool/slurmctld" "$t/var/log/slurm" "$t/run/slurmctld"
    install -d -m 0755 "$t/var/spool/slurmd" "$t/run/sshd" "$t/root/.ssh"
    install -d -m 0755 "$t/etc/slurm"
    chmod 0700 "$t/root/.ssh"
}

# ---- mariadb ---------------------------------------------------------------------

MARIADB_SUITE=trixie
MARIADB_PKGS=mariadb-server,tini

build_mariadb() {
    local base key out t0 ver
    base=$(rootfs "mariadb-$MARIADB_SUITE" "$MARIADB_SUITE" "$MARIADB_PKGS")
    ver=$(sed -n 's/^mariadb-server 1:\([0-9]*\.[0-9]*\)\..*/\1/p; s/^mariadb-server \([0-9]*\.[0-9]*\)\..*/\1/p' "$base/.images-rootfs" | head -n 1)
    [ -n "$ver" ] || die "no mariadb-server in $base"
    key=$(hash_of "$HERE/build.sh" "$HERE/ocipack.py" "$HERE/mariadb-entrypoint.sh" "$base/.images-rootfs")
    out=$CACHE/out/mariadb-$ver-$key.tar
    if [ ! -f "$out" ]; then
        t0=$(now_ms)
        say "mariadb $ver image (Debian $MARIADB_SUITE)"
        STAGE=$(stage "$base")
        local t=$STAGE olduid oldgid
        # The official image's mysql ids (999), so that a data volume made
        # by one works with the other.
        olduid=$(awk -F: '$1 == "mysql" {print $3}' "$t/etc/passwd")
        oldgid=$(awk -F: '$1 == "mysql" {print $3}' "$t/etc/group")
        if [ "$olduid" != 999 ]; then
            awk -F: '$3 == 999 {exit 1}' "$t/etc/passwd" || die "uid 999 is taken"
            sed -i -E "s/^mysql:([^:]*):$olduid:$oldgid:/mysql:\\1:999:999:/" "$t/etc/passwd"
            sed -i -E "s/^mysql:([^:]*):$oldgid:/mysql:\\1:999:/" "$t/etc/group"
            find "$t" -xdev -uid "$olduid" -exec chown -h 999 {} +
            find "$t" -xdev -gid "$oldgid" -exec chgrp -h 999 {} +
        fi
        # The package's postinst made a database in /var/lib/mysql: the
        # entrypoint makes a fresh one per volume instead.
        rm -rf "$t"/var/lib/mysql/* "$t"/run/mysqld/*
        install -d -m 0755 -o 999 -g 999 "$t/var/lib/mysql" "$t/run/mysqld"
        install -m 0755 "$HERE/mariadb-entrypoint.sh" "$t/usr/local/bin/mariadb-entrypoint.sh"
        cat > "$t/etc/mysql/mariadb.conf.d/90-slurmop.cnf" <<'EOF'
# slurmop's MariaDB image: listen on every address (a pod's), no DNS
# look-ups of clients; slurmdbd's recommended InnoDB settings. Snapshot
# isolation (on by default since MariaDB 11.6) fails a transaction that
# meets a concurrent write, which slurmdbd takes as fatal (it says so at
# start-up).
[mariadbd]
bind-address = 0.0.0.0
skip-name-resolve
innodb_buffer_pool_size = 128M
innodb_lock_wait_timeout = 900
innodb_snapshot_isolation = OFF
EOF
        # Offline table tools and clients an Accounting's database never
        # runs (about 5 MB each): the server, its set-up (mariadb-install-db,
        # my_print_defaults, resolveip), mariadb, mariadb-admin, mariadb-dump
        # and mariadb-upgrade (with mariadb-check) stay.
        (cd "$t/usr/bin" && rm -f aria_* myisam* mariadb-binlog mariadb-slap mariadb-import mariadb-show \
            mariadb-conv mariadb-plugin innochecksum perror mariadb-waitpid mariadb-hotcopy mariadb-find-rows \
            mariadb-dumpslow mariadb-access mariadb-setpermission mariadb-convert-table-format mariadb-report \
            mysqlbinlog mysqlslap mysqlimport mysqlshow mysqlhotcopy mysql_plugin mysql_waitpid mysql_find_rows \
            mysqldumpslow mysqlaccess mysql_setpermission mysql_convert_table_format mysqlreport \
            2>/dev/null || true)
        slim "$t"
        pack "$out" "$(spec "localhost/slurmop/mariadb:$ver" 0:0 '["tini","--","/usr/local/bin/mariadb-entrypoint.sh"]' '["mariadbd"]' '["3306/tcp"]')"
        rm -rf "$STAGE"
        say "mariadb $ver: $(du -m "$out" | cut -f1) MB archive in $(( ($(now_ms) - t0) / 1000 )) s"
        evict "$CACHE/out/mariadb-" "$out"
    fi
    emit "localhost/slurmop/mariadb:$ver" "$out"
}

# ---- pause -------------------------------------------------------------------

build_pause() {
    local key out
    need gcc gcc
    [ -e /usr/lib/x86_64-linux-gnu/libc.a ] || [ -n "$(ls /usr/lib/*/libc.a 2>/dev/null)" ] \
        || { APT_UPDATED=1; apt-get install -y -qq --no-install-recommends libc6-dev >&2; }
    key=$(hash_of "$HERE/build.sh" "$HERE/ocipack.py" "$HERE/pause.c" "$(gcc -dumpfullversion)")
    out=$CACHE/out/pause-3.10-$key.tar
    if [ ! -f "$out" ]; then
        say "pause image"
        STAGE=$(mktemp -d "$TMP/stage.XXXXXX")
        gcc -static -O2 -Wall -Wextra -Werror -o "$STAGE/pause" "$HERE/pause.c"
        strip "$STAGE/pause"
        "$STAGE/pause" --version >&2
        chmod 0755 "$STAGE"
        python3 "$HERE/ocipack.py" --rootfs "$STAGE" --out "$out" \
            --image "$(spec registry.k8s.io/pause:3.10 65535:65535 '["/pause"]' '[]')"
        rm -rf "$STAGE"
        evict "$CACHE/out/pause-" "$out"
    fi
    emit registry.k8s.io/pause:3.10 "$out"
}

# ---- operator --------------------------------------------------------------------

# The files deploy/Dockerfile's `COPY . .` takes: the paths of the "!" lines
# of deploy/Dockerfile.dockerignore (a whitelist after "*"), less its
# exclusions that follow (Markdown, Python caches, objects).
operator_sources() {
    local paths
    paths=$(sed -n 's/^!//p' "$ROOT/deploy/Dockerfile.dockerignore")
    [ -n "$paths" ] || die "deploy/Dockerfile.dockerignore lists no paths"
    # shellcheck disable=SC2086
    if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
        git -C "$ROOT" ls-files -co --exclude-standard -- $paths
    else
        (cd "$ROOT" && find $paths -type f 2>/dev/null)
    fi | grep -v -E '\.md$|(^|/)__pycache__/|\.pyc$|\.o$' | LC_ALL=C sort
}

build_operator() {
    local ver key out t0 base
    ver=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$ROOT/deploy/helm/slurmop/Chart.yaml")
    [ -n "$ver" ] || die "no appVersion in deploy/helm/slurmop/Chart.yaml"
    local ref=docker.io/library/slurmop:$ver
    # The suite of the base images (deploy/Dockerfile's DEBIAN_IMAGE and
    # RUNTIME_IMAGE name its number).
    local suite=trixie debver=13
    base=$(rootfs debian-$suite $suite "")
    local srchash
    # One sha256sum for all the files (a process per file takes seconds).
    srchash=$(cd "$ROOT" && operator_sources | while read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done \
        | xargs -r -d '\n' sha256sum | sha256sum | cut -c1-16)
    # The commit slurmop --version reports: the last one that changed the
    # build context (not HEAD, so that a commit to tests or docs keeps the
    # cached image), "-dirty" when the context differs from it, "unknown"
    # outside git.
    local commit=unknown cpaths
    cpaths=$(sed -n 's/^!//p' "$ROOT/deploy/Dockerfile.dockerignore")
    # shellcheck disable=SC2086
    if commit=$(git -C "$ROOT" log -1 --format=%H -- $cpaths 2>/dev/null) && [ -n "$commit" ]; then
        git -C "$ROOT" diff --quiet HEAD -- $cpaths 2>/dev/null || commit=$commit-dirty
    else
        commit=unknown
    fi
    key=$(hash_of "$HERE/build.sh" "$HERE/ocipack.py" "$ROOT/deploy/Dockerfile" "$ROOT/deploy/Dockerfile.dockerignore" \
        "$base/.images-rootfs" "$srchash" "$ver" "$commit")
    out=$CACHE/out/slurmop-$ver-$key.tar
    if [ ! -f "$out" ]; then
        t0=$(now_ms)
        need buildah buildah
        local bases=$CACHE/out/debian-$debver-$(hash_of "$HERE/build.sh" "$HERE/ocipack.py" "$base/.images-rootfs").tar
        if [ ! -f "$bases" ]; then
            say "base images debian:$debver, debian:$debver-slim from $base"
            STAGE=$(stage "$base")
            # The official images' apt sources: the suite, its updates and
            # security. debootstrap wrote the suite only.
            local sec=${MIRROR%/debian}/debian-security
            case $MIRROR in */debian|*/debian/) ;; *) sec=http://deb.debian.org/debian-security ;; esac
            rm -f "$STAGE/etc/apt/sources.list"
            cat > "$STAGE/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $sec
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
            # As in the official images: apt keeps no package cache, no
            # downloaded packages and no lists in an image's layers.
            cat > "$STAGE/etc/apt/apt.conf.d/docker-clean" <<'EOF'
// Container image: keep no downloaded packages or package caches in a layer.
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
            # Both tags slimmed the same way (this image is built, not run):
            # the official debian:13 differs from -slim by its docs only.
            slim "$STAGE"
            pack "$bases" "$(spec docker.io/library/debian:$debver '' '[]' '["bash"]')" \
                "$(spec docker.io/library/debian:$debver-slim '' '[]' '["bash"]')"
            rm -rf "$STAGE"
            evict "$CACHE/out/debian-$debver-" "$bases"
        fi
        say "operator image $ref: buildah bud -f deploy/Dockerfile"
        mkdir -p "$CACHE/buildah/root"
        local log=$CACHE/buildah.log
        # One private mount namespace for every buildah call: the overlay
        # mounts die with it, and the run state (mount counts, locks) lives in
        # a temporary folder, so the next run starts with nothing mounted.
        if ! nice unshare -m --propagation private bash -euo pipefail -c '
            B=(buildah --root "$1/root" --runroot "$2/runroot" --storage-driver overlay)
            "${B[@]}" rmi -f "docker.io/library/debian:$8" "docker.io/library/debian:$8-slim" >/dev/null 2>&1 || true
            for tag in "$8" "$8-slim"; do
                id=$("${B[@]}" pull --quiet "oci-archive:$3:docker.io/library/debian:$tag")
                "${B[@]}" tag "$id" "docker.io/library/debian:$tag"
            done
            "${B[@]}" bud --pull=never --isolation chroot --network host --layers --build-arg "OP_GIT_COMMIT=$7" \
                --ignorefile "$4/deploy/Dockerfile.dockerignore" -f "$4/deploy/Dockerfile" -t "$5" "$4"
            rm -f "$6.part"
            "${B[@]}" push --quiet "$5" "docker-archive:$6.part:$5"
            # The intermediate images stay as the layer cache of the next
            # build (the apt steps, a minute each), until the storage passes
            # 2 GB: each source change adds its compile layers.
            if [ "$(du -sm "$1/root" | cut -f1)" -gt 2048 ]; then
                "${B[@]}" rm --all >/dev/null 2>&1 || true
                "${B[@]}" rmi --prune >/dev/null 2>&1 || true
            fi
            ' _ "$CACHE/buildah" "$TMP" "$bases" "$ROOT" "$ref" "$out" "$commit" "$debver" >"$log" 2>&1; then
            tail -n 20 "$log" >&2
            die "buildah failed (log: $log)"
        fi
        mv "$out.part" "$out"
        say "operator: $(du -m "$out" | cut -f1) MB archive in $(( ($(now_ms) - t0) / 1000 )) s (log: $log)"
        evict "$CACHE/out/slurmop-$ver-" "$out"
    fi
    emit "$ref" "$out"
}

# ---- main ----------------------------------------------------------------------

declare -gA DONE=()
for t in "${TARGETS[@]}"; do
    [ -z "${DONE[$t]:-}" ] || continue
    DONE[$t]=1
    t0=$(now_ms)
    "build_$t"
    say "$t: $(( $(now_ms) - t0 )) ms"
done
for r in "${RESULTS[@]}"; do echo "$r"; done
}

main "$@"
exit
