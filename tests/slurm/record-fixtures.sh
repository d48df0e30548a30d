#!/usr/bin/env bash
# record-fixtures.sh — record slurmrestd responses (data_parser v0.0.36,
# v0.0.37, v0.0.38 of Slurm 22.05) from a real lab into tests/data/slurmrestd/.
#
# Each response is saved as <ver>_<case>_<status>.json (the body as sent; a
# 304 gives an empty file, the plain-text errors keep their text). The cases
# walk one lab through the node states the operator must read: idle, drained,
# draining (a job running), down, not responding, dynamic, an unknown node,
# bad and expired tokens, running jobs, ping, a reservation, and the request
# shapes slurmrestd refuses (401, 404, 405, 415, 400).
#
# Usage (root): bash tests/slurm/record-fixtures.sh [OUTDIR]
# Takes about a minute: a killed slurmd needs SlurmdTimeout (10 s) and more
# before slurmctld reports it NOT_RESPONDING and then DOWN.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../data/slurmrestd}
mkdir -p "$out"
lab_sh=$here/slurmlab.sh

clean=
if [ -z "${SLURMLAB_DIR:-}" ]; then
    SLURMLAB_DIR=$(mktemp -d /tmp/slurmlab-rec.XXXXXX)
    chmod 755 "$SLURMLAB_DIR"
    clean=--clean
fi
export SLURMLAB_DIR
export SLURMLAB_DYNAMIC=1
export SLURMLAB_EXTRA_CONF="SlurmdTimeout=10"
trap 'bash "$lab_sh" stop $clean >/dev/null 2>&1 || true' EXIT
eval "$(bash "$lab_sh" start 3)"
cd "$SLURMLAB_DIR"

# get VERSIONS CASE PATH [curl args...]: GET PATH for every version, save it.
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
# raw NAME CURL-ARGS...: one request with exactly the given headers.
raw() {
    local name=$1; shift
    local code
    : > "$out/tmp.body"
    code=$(curl -s -o "$out/tmp.body" -w "%{http_code}" "$@")
    mv "$out/tmp.body" "$out/${name}_${code}.json"
    echo "$name -> $code" >&2
}
ALL="36 37 38"
wait_node() { # wait_node NODE REGEX: until scontrol's State= matches
    for _ in $(seq 1 600); do
        scontrol show node "$1" | grep -Eq "State=$2" && return 0
        sleep 0.1
    done
    echo "timeout waiting for $1 to match $2" >&2
    return 1
}

rec "$ALL" ping /slurm/@V@/ping
rec "$ALL" nodes_idle /slurm/@V@/nodes
rec "$ALL" node_n1_idle /slurm/@V@/node/n1
rec "$ALL" node_dyn1_dynamic /slurm/@V@/node/dyn1
rec "$ALL" err_unknown_node /slurm/@V@/node/nosuch
rec "38" nodes_update_time /slurm/@V@/nodes?update_time=$(( $(date +%s) + 3600 ))
rec "$ALL" jobs_empty /slurm/@V@/jobs

# Tokens slurmctld refuses: garbage and expired (slurmrestd passes both on).
tok=$SLURMRESTD_TOKEN
SLURMRESTD_TOKEN=garbage.token.here rec "38" err_bad_token_nodes /slurm/@V@/nodes
SLURMRESTD_TOKEN=garbage.token.here rec "38" err_bad_token_ping /slurm/@V@/ping
SLURMRESTD_TOKEN=garbage.token.here rec "38" err_bad_token_jobs /slurm/@V@/jobs
SLURMRESTD_TOKEN=$(bash "$lab_sh" token root -600) rec "38" err_expired_token_nodes /slurm/@V@/nodes
SLURMRESTD_TOKEN=$tok

# Shapes slurmrestd answers itself, in plain text.
raw v38_err_no_auth "$SLURMRESTD_URL/slurm/v0.0.38/nodes"
raw v38_err_unknown_path -H "X-SLURM-USER-NAME: root" -H "X-SLURM-USER-TOKEN: $tok" "$SLURMRESTD_URL/slurm/v0.0.38/nosuch"
raw v38_err_v40_path -H "X-SLURM-USER-NAME: root" -H "X-SLURM-USER-TOKEN: $tok" "$SLURMRESTD_URL/slurm/v0.0.40/nodes"
raw v38_err_node_post -H "X-SLURM-USER-NAME: root" -H "X-SLURM-USER-TOKEN: $tok" \
    -H "Content-Type: application/json" -d '{"state":["DRAIN"]}' "$SLURMRESTD_URL/slurm/v0.0.38/node/n1"
raw v38_err_accept_html -H "X-SLURM-USER-NAME: root" -H "X-SLURM-USER-TOKEN: $tok" -H "Accept: text/html" \
    "$SLURMRESTD_URL/slurm/v0.0.38/nodes"
raw v38_err_malformed_post -H "X-SLURM-USER-NAME: root" -H "X-SLURM-USER-TOKEN: $tok" \
    -H "Content-Type: application/json" -d '{"job":' "$SLURMRESTD_URL/slurm/v0.0.38/job/submit"
raw v38_err_unknown_job -H "X-SLURM-USER-NAME: root" -H "X-SLURM-USER-TOKEN: $tok" "$SLURMRESTD_URL/slurm/v0.0.38/job/999999"
raw openapi_v3 -H "X-SLURM-USER-NAME: root" -H "X-SLURM-USER-TOKEN: $tok" "$SLURMRESTD_URL/openapi/v3"

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

# A maintenance reservation like the one the ScheduledUpdate strategy keeps.
scontrol create reservation reservationname=SlurmOperatorMaint-nss starttime=now+60minutes duration=30 \
    users=root flags=maint,ignore_jobs nodes=n2,n3 >/dev/null
rec "37 38" reservations /slurm/@V@/reservations

# Down with a reason; the comment and features the operator writes.
scancel --full $(squeue -h -o %i) 2>/dev/null || true
for _ in $(seq 1 100); do [ -z "$(squeue -h -o %i)" ] && break; sleep 0.1; done
scontrol update nodename=n1 state=down reason="slurm-operator: preStop"
scontrol update nodename=n3 state=resume
scontrol update nodename=n3 comment='{"namespace":"slurm","podName":"slinky-2","node":"kind-worker","nodeSetName":"slinky","nodeSetUID":"0f0e"}' \
    availablefeatures=k8s/zone-a,gpu activefeatures=k8s/zone-a
rec "$ALL" node_n1_down /slurm/@V@/node/n1
rec "$ALL" node_n3_comment_features /slurm/@V@/node/n3
rec "$ALL" nodes_mixed_states /slurm/@V@/nodes

# Not responding: kill n3's slurmd, wait for slurmctld to notice (the node
# stays IDLE+NOT_RESPONDING for a while, then goes DOWN).
kill -KILL "$(cat "$SLURMLAB_DIR/run/slurmd.n3.pid")"
wait_node n3 'IDLE\*|IDLE\+NOT_RESPONDING|[A-Z]+\*'
rec "$ALL" node_n3_not_responding /slurm/@V@/node/n3
wait_node n3 'DOWN'
rec "$ALL" node_n3_not_responding_down /slurm/@V@/node/n3
echo "recorded into $out" >&2
