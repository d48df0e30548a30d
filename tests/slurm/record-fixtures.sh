#!/usr/bin/env bash
# record-fixtures.sh — record slurmrestd responses from a real lab
# (tests/slurm/slurmlab.sh) into tests/data/slurmrestd/.
#
# SLURMLAB_VERSION picks the Slurm (default 22.05) and so the data parsers
# recorded: 22.05 → v0.0.36, v0.0.37, v0.0.38; 24.11 → v0.0.40, v0.0.41,
# v0.0.42; 26.05 → v0.0.43, v0.0.44, v0.0.45 (its v0.0.42 is 24.11's).
# SLURMLAB_RECORD_PARSERS="42 44" overrides the list.
#
# Each response is saved as v<parser>_<case>_<status>.json (the body as sent;
# a 304 gives an empty file, the plain-text errors keep their text). The
# cases walk one lab through the node states the operator must read: idle,
# drained, draining (a job running), down, not responding, dynamic, an unknown
# node, bad and expired tokens, running jobs, ping, a reservation, the
# update_time query (304), node updates by POST (v0.0.40 on), a node deleted
# by DELETE, the request shapes slurmrestd refuses (401, 404, 405, 415, 400)
# and, last, an answer while slurmctld is down (the errors array).
#
# Cases only the newer parsers have (node POST/DELETE, slurmctld down) are
# recorded for v0.0.40 on. The case names never collide with the fixtures
# that make-v4x-fixtures.py writes from the OpenAPI documents, except where
# the real answer stands for the synthesized one (see tests/data/slurmrestd/
# README.md).
#
# Usage (root): bash tests/slurm/record-fixtures.sh [OUTDIR]
# Takes about a minute: a killed slurmd needs SlurmdTimeout (10 s) and more
# before slurmctld reports it NOT_RESPONDING and then DOWN.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../data/slurmrestd}
mkdir -p "$out"
out=$(cd "$out" && pwd)
lab_sh=$here/slurmlab.sh

version=${SLURMLAB_VERSION:-22.05}
case $version in
    22.05) ALL="36 37 38" ;;
    24.11) ALL="40 41 42" ;;
    26.05) ALL="43 44 45" ;;
    *) echo "record-fixtures: SLURMLAB_VERSION=$version: want 22.05, 24.11 or 26.05" >&2; exit 2 ;;
esac
ALL=${SLURMLAB_RECORD_PARSERS:-$ALL}
NEW=${ALL##* } # the newest parser: the cases recorded once
NEW4X=""       # the parsers of v0.0.40 on (node POST and DELETE)
for v in $ALL; do [ "$v" -ge 40 ] && NEW4X+="$v "; done

clean=
if [ -z "${SLURMLAB_DIR:-}" ]; then
    SLURMLAB_DIR=$(mktemp -d /tmp/slurmlab-rec.XXXXXX)
    chmod 755 "$SLURMLAB_DIR"
    clean=--clean
fi
export SLURMLAB_DIR SLURMLAB_VERSION=$version
export SLURMLAB_DYNAMIC=1
export SLURMLAB_EXTRA_CONF="SlurmdTimeout=10"
trap 'bash "$lab_sh" stop $clean >/dev/null 2>&1 || true' EXIT
eval "$(bash "$lab_sh" start 3)"
# The clients of the lab's version (chrooted wrappers for 24.11 and 26.05).
export PATH=$SLURMLAB_BIN:$PATH
cd "$SLURMLAB_DIR"

# rec VERSIONS CASE PATH [curl args...]: request PATH (@V@ = v0.0.<ver>) for
# every version, save it.
rec() {
    local versions=$1 name=$2 path=$3; shift 3
    local v code
    for v in $versions; do
        local p=${path//@V@/v0.0.$v}
        : > "$out/tmp.body"
        code=$(curl -s -o "$out/tmp.body" -w '%{http_code}' -H "X-SLURM-USER-NAME: root" \
            -H "X-SLURM-USER-TOKEN: $SLURMRESTD_TOKEN" "$@" "$SLURMRESTD_URL$p")
        mv "$out/tmp.body" "$out/v${v}_${name}_${code}.json"
        echo "v$v $name $p -> $code" >&2
    done
}
# post VERSIONS CASE PATH JSON: POST JSON to PATH for every version.
post() {
    local versions=$1 name=$2 path=$3 body=$4
    rec "$versions" "$name" "$path" -H "Content-Type: application/json" -d "$body"
}
# raw NAME CURL-ARGS...: one request with exactly the given headers.
raw() {
    local name=$1; shift
    local code
    : > "$out/tmp.body"
    code=$(curl -s -o "$out/tmp.body" -w "%{http_code}" "$@")
    mv "$out/tmp.body" "$out/${name}_${code}.json"
    echo "$name -> $code" >&2
}
wait_node() { # wait_node NODE REGEX [TENTHS]: until scontrol's State= matches
    for _ in $(seq 1 "${3:-600}"); do
        scontrol show node "$1" | grep -Eq "State=$2" && return 0
        sleep 0.1
    done
    echo "timeout waiting for $1 to match $2" >&2
    return 1
}
N=v0.0.$NEW

# v0.0.4x: "ping_primary", beside the synthesized "ping" (two controllers).
if [ "$version" = 22.05 ]; then rec "$ALL" ping /slurm/@V@/ping; else rec "$ALL" ping_primary /slurm/@V@/ping; fi
rec "$ALL" nodes_idle /slurm/@V@/nodes
rec "$ALL" node_n1_idle /slurm/@V@/node/n1
rec "$ALL" node_dyn1_dynamic /slurm/@V@/node/dyn1
rec "$ALL" err_unknown_node /slurm/@V@/node/nosuch
rec "$NEW" nodes_update_time /slurm/@V@/nodes?update_time=$(( $(date +%s) + 3600 ))
rec "$ALL" jobs_empty /slurm/@V@/jobs
# The server's clock: 22.05 answers carry no time (no Date header, no
# last_update); diag's statistics.req_time is slurmctld's time().
rec "38" diag /slurm/@V@/diag

# Tokens slurmctld refuses: garbage and expired (slurmrestd passes both on).
tok=$SLURMRESTD_TOKEN
SLURMRESTD_TOKEN=garbage.token.here rec "$NEW" err_bad_token_nodes /slurm/@V@/nodes
SLURMRESTD_TOKEN=garbage.token.here rec "$NEW" err_bad_token_ping /slurm/@V@/ping
SLURMRESTD_TOKEN=garbage.token.here rec "$NEW" err_bad_token_jobs /slurm/@V@/jobs
SLURMRESTD_TOKEN=$(bash "$lab_sh" token root -600) rec "$NEW" err_expired_token_nodes /slurm/@V@/nodes
SLURMRESTD_TOKEN=$tok

# Shapes slurmrestd answers itself, in plain text. err_<other>_path: a data
# parser this Slurm does not serve (22.05: v0.0.40, which it predates;
# 24.11: v0.0.38, which it dropped; 26.05: v0.0.41, which it dropped).
case $version in 22.05) other=40 ;; 24.11) other=38 ;; *) other=41 ;; esac
auth=(-H "X-SLURM-USER-NAME: root" -H "X-SLURM-USER-TOKEN: $tok")
raw v${NEW}_err_no_auth "$SLURMRESTD_URL/slurm/$N/nodes"
raw v${NEW}_err_unknown_path "${auth[@]}" "$SLURMRESTD_URL/slurm/$N/nosuch"
raw v${NEW}_err_v${other}_path "${auth[@]}" "$SLURMRESTD_URL/slurm/v0.0.$other/nodes"
if [ -z "$NEW4X" ]; then # 22.05 has no node POST
    raw v${NEW}_err_node_post "${auth[@]}" -H "Content-Type: application/json" -d '{"state":["DRAIN"]}' \
        "$SLURMRESTD_URL/slurm/$N/node/n1"
fi
raw v${NEW}_err_accept_html "${auth[@]}" -H "Accept: text/html" "$SLURMRESTD_URL/slurm/$N/nodes"
raw v${NEW}_err_malformed_post "${auth[@]}" -H "Content-Type: application/json" -d '{"job":' \
    "$SLURMRESTD_URL/slurm/$N/job/submit"
raw v${NEW}_err_unknown_job "${auth[@]}" "$SLURMRESTD_URL/slurm/$N/job/999999"
if [ "$version" = 22.05 ]; then
    raw openapi_v3 "${auth[@]}" "$SLURMRESTD_URL/openapi/v3"
else
    # The document is large (about 1 MB): keep its paths, like
    # make-v4x-fixtures.py does, per Slurm version.
    curl -s "${auth[@]}" "$SLURMRESTD_URL/openapi/v3" > "$SLURMLAB_DIR/openapi.json"
    python3 - "$SLURMLAB_DIR/openapi.json" "$out/openapi_slurm-${version}_paths.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
paths = {p: {m: {} for m in ops} for p, ops in doc["paths"].items()}
with open(sys.argv[2], "w") as f:
    json.dump({"openapi": doc.get("openapi"), "info": {"version": doc["info"]["version"]}, "paths": paths}, f, indent=1)
    f.write("\n")
PY
    echo "openapi paths -> $out/openapi_slurm-${version}_paths.json" >&2
fi

# Node updates by POST (v0.0.40 on): drain with a reason, an update with a
# field the parser does not know (warnings?), a state slurmctld refuses, an
# unknown node, resume.
if [ -n "$NEW4X" ]; then
    for v in $NEW4X; do
        post "$v" update_node_drain /slurm/@V@/node/n1 '{"state":["DRAIN"],"reason":"slurm-operator: drain by POST"}'
        post "$v" update_node_resume /slurm/@V@/node/n1 '{"state":["RESUME"]}'
    done
    post "$NEW" update_node_unknown_field /slurm/@V@/node/n1 '{"comment":"x","no_such_field":1}'
    post "$NEW" err_update_node_alloc /slurm/@V@/node/n1 '{"state":["ALLOCATED"]}'
    post "$NEW" err_update_node_bad_state_word /slurm/@V@/node/n1 '{"state":["NO_SUCH_STATE"]}'
    post "$NEW" err_update_unknown_node /slurm/@V@/node/nosuch '{"state":["DRAIN"],"reason":"x"}'
    scontrol update nodename=n1 comment= 2>/dev/null || true
fi

# Drained (no job) and draining (a job running) nodes; jobs with and without
# a time limit.
scontrol update nodename=n2 state=drain reason="slurm-operator: Pod (ns/slinky-1) is pending termination for scale-in"
sbatch -J limited -t 30 -w n3 -D "$SLURMLAB_DIR/jobs" -o /dev/null --wrap 'sleep 600' >/dev/null
sbatch -J unlimited -w n1 -D "$SLURMLAB_DIR/jobs" -o /dev/null --wrap 'sleep 600' >/dev/null
for _ in $(seq 1 100); do [ "$(squeue -h -t R | wc -l)" = 2 ] && break; sleep 0.1; done
scontrol update nodename=n3 state=drain reason="maintenance by a human"
rec "$ALL" node_n2_drained /slurm/@V@/node/n2
rec "$ALL" node_n3_draining /slurm/@V@/node/n3
rec "$ALL" node_n1_busy /slurm/@V@/node/n1
rec "$ALL" jobs_running /slurm/@V@/jobs
# Jobs unchanged since update_time: 22.05 answers 304; 24.11 and 26.05 answer
# 200 with "jobs": [], "last_update" 0 and a warning "No job changes since
# update_time[...]" (it is not an empty job list).
rec "$ALL" jobs_update_time /slurm/@V@/jobs?update_time=$(( $(date +%s) + 3600 ))

# A maintenance reservation like the one the ScheduledUpdate strategy keeps.
scontrol create reservation reservationname=SlurmOperatorMaint-nss starttime=now+60minutes duration=30 \
    users=root flags=maint,ignore_jobs nodes=n2,n3 >/dev/null
if [ "$version" = 22.05 ]; then rec "37 38" reservations /slurm/@V@/reservations
else rec "$ALL" reservations_maint /slurm/@V@/reservations; fi

# Down with a reason; the comment and features the operator writes.
scancel --full $(squeue -h -o %i) 2>/dev/null || true
for _ in $(seq 1 100); do [ -z "$(squeue -h -o %i)" ] && break; sleep 0.1; done
# 26.05 with ReturnToService=2 returns a node set DOWN right after its job
# ended to service within a second (slurmctld.log: "node_did_resp: node n1
# returned to service"); let the nodes settle first.
wait_node n1 'IDLE ' 100 || true
sleep 2
scontrol update nodename=n1 state=down reason="slurm-operator: preStop"
scontrol update nodename=n3 state=resume
# 24.11 and 26.05 show a resumed node as IDLE+NOT_RESPONDING (24.11 keeping
# the drain reason) until its slurmd answers slurmctld's next ping.
wait_node n3 'IDLE ' 200 || echo "n3 is still $(scontrol show node n3 | grep -o 'State=[^ ]*') after resume" >&2
scontrol update nodename=n3 comment='{"namespace":"slurm","podName":"slinky-2","node":"kind-worker","nodeSetName":"slinky","nodeSetUID":"0f0e"}' \
    availablefeatures=k8s/zone-a,gpu activefeatures=k8s/zone-a
rec "$ALL" node_n1_down /slurm/@V@/node/n1
rec "$ALL" node_n3_comment_features /slurm/@V@/node/n3
rec "$ALL" nodes_mixed_states /slurm/@V@/nodes
scontrol show node n1 | grep -q 'State=DOWN' || echo "warning: n1 returned to service before it was recorded" >&2

# Not responding: kill n3's slurmd, wait for slurmctld to notice (the node
# stays IDLE+NOT_RESPONDING for a while, then goes DOWN).
kill -KILL "$(cat "$SLURMLAB_DIR/run/slurmd.n3.pid")"
wait_node n3 'IDLE\*|IDLE\+NOT_RESPONDING|[A-Z]+\*'
rec "$ALL" node_n3_not_responding /slurm/@V@/node/n3
wait_node n3 'DOWN'
rec "$ALL" node_n3_not_responding_down /slurm/@V@/node/n3

if [ -n "$NEW4X" ]; then
    # Delete a node record (dynamic: static nodes cannot be deleted), then
    # ask for it and delete it again.
    rec "$NEW" delete_node_dyn1 /slurm/@V@/node/dyn1 -X DELETE
    rec "$NEW" err_deleted_node /slurm/@V@/node/dyn1
    rec "$NEW" err_delete_unknown_node /slurm/@V@/node/nosuch -X DELETE
    rec "$NEW" err_delete_static_node /slurm/@V@/node/n2 -X DELETE
    if [ "$NEW" -ge 44 ]; then
        # Node records made first (POST new/node/, v0.0.44 on): a hostlist made
        # FUTURE, then the same line again (one name that exists refuses all).
        line='{"node_conf":"NodeName=fx-[0-3] State=FUTURE CPUs=2 RealMemory=1000 Features=gpu"}'
        post "$NEW" create_node /slurm/@V@/new/node/ "$line"
        post "$NEW" err_create_node_exists /slurm/@V@/new/node/ "$line"
    fi
    # slurmctld down: slurmrestd answers with its errors array.
    kill -KILL "$(cat "$SLURMLAB_DIR/run/slurmctld.pid")"
    sleep 0.5
    rec "$NEW" err_ctld_down_nodes /slurm/@V@/nodes
    rec "$NEW" err_ctld_down_ping /slurm/@V@/ping
fi
echo "recorded into $out" >&2
