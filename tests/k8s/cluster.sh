#!/usr/bin/env bash
# cluster.sh — a real Kubernetes control plane on loopback, with KWOK nodes,
# for slurmop's tests and benchmarks.
#
# One cluster = one directory ($K8S_DIR) holding everything: certificates and
# keys, kubeconfigs, etcd's data, logs and PID files. It runs etcd,
# kube-apiserver (TLS, client certificates, Node,RBAC authorization, the
# default admission plugins, a ServiceAccount token issuer),
# kube-controller-manager (all default controllers, the service-account token
# controller signing with the cluster's key), kube-scheduler and kwok (which
# plays the kubelet of fake Nodes: it keeps them Ready and moves the pods bound
# to them to Running/Ready). Everything listens on 127.0.0.1, on free ports.
# The binaries come from tests/k8s/build.sh (built from pinned Go modules and
# cached outside the clone; the first build takes a while, see README.md).
#
# Commands:
#   start [--nodes N] [--crds DIR] [--kubelets K]
#                      start a fresh cluster (etcd data from scratch) with N
#                      KWOK nodes shaped like GPU nodes (default 0) and K real
#                      Nodes (kubelet + containerd, nodes.sh; default 0); prints
#                      `export K8S_DIR=… KUBECONFIG=… K8S_BIN=…` lines on
#                      stdout; exit 77 when Go is missing. --crds applies the
#                      CustomResourceDefinitions of DIR (*.yaml) and waits
#                      until they are Established before the controller
#                      manager starts, so that its garbage collector knows
#                      their kinds from its first discovery (see below)
#   nodes N            add KWOK GPU nodes up to N in all to a running cluster
#   stop [--clean]     stop every component (idempotent) and check that none
#                      is left (real Nodes first: nodes.sh stop); --clean also
#                      removes $K8S_DIR
#   status             one line per component; exit 0 when all run and answer
#                      their health check, 3 otherwise
#   env                print the export lines of a started cluster
#   restart-apiserver  stop kube-apiserver and start it again (same port, same
#                      etcd): every connection and watch of a client ends
#   compact            compact etcd's history up to the current revision;
#                      prints the revision
#
# Settings (environment):
#   K8S_DIR             cluster directory (default /tmp/slurmop-k8s)
#   K8S_NODE_PREFIX     KWOK node name prefix (default kwok-gpu-; names are
#                       PREFIX0000, PREFIX0001, …)
#   SLURMOP_K8S_CACHE   where build.sh keeps the binaries (see build.sh)
#   K8S_LEASE_SECONDS   KWOK node lease duration (default: 40, or N/12 for a
#                       cluster started with more than 480 nodes; see below)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib/procs.sh
source "$HERE/../lib/procs.sh"
D=${K8S_DIR:-/tmp/slurmop-k8s}
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1
POD_CIDR=10.244.0.1/16

say() { printf 'k8s-cluster: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# ---- helpers ---------------------------------------------------------------

# $1 distinct free TCP ports, reserved host-wide and outside the ephemeral
# range, so that no other lab or connection takes one before our daemon
# binds it or while it restarts; held until do_stop gives them back (see
# tests/lib/ports.py).
free_ports() { python3 "$HERE/../lib/ports.py" "$1" --owner "$D"; }
release_ports() { python3 "$HERE/../lib/ports.py" --release "$D" || true; }

# A zombie counts as gone: it has exited and only waits to be collected.
alive() {
    [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null || return 1
    local st
    st=$(cut -d')' -f2 "/proc/$1/stat" 2>/dev/null | cut -d' ' -f2) || return 1
    [ -n "$st" ] && [ "$st" != Z ]
}

now_ms() { date +%s%3N; }

# poll TIMEOUT_MS WATCH_PID CMD...: run CMD every 100 ms until it succeeds;
# fail when the time is up or when WATCH_PID (if non-empty) has exited.
poll() {
    local limit=$(( $(now_ms) + $1 )) watch=$2; shift 2
    until "$@" >/dev/null 2>&1; do
        if [ -n "$watch" ] && ! alive "$watch"; then return 2; fi
        [ "$(now_ms)" -lt "$limit" ] || return 1
        sleep "${POLL_SLEEP:-0.1}"
    done
}

# launch NAME CMD...: start CMD as a daemon in its own session, stdout and
# stderr to log/NAME.log, PID in run/NAME.pid. K8S_CLUSTER_TAG marks the
# process, so that stop can find anything left behind.
launch() {
    local name=$1; shift
    (
        cd "$D"
        read -r _ _ _ _ pgrp _ < "/proc/$BASHPID/stat"
        if [ "$pgrp" = "$BASHPID" ]; then exec env K8S_CLUSTER_TAG="$D" "$@"; fi
        exec setsid env K8S_CLUSTER_TAG="$D" "$@"
    ) </dev/null >>"$D/log/$name.log" 2>&1 &
    echo $! > "$D/run/$name.pid"
}

# pid_of NAME: the PID of run/NAME.pid while that process is this cluster's,
# nothing otherwise. PIDs are reused (pid_max is 32768 on the CI machine):
# the file of a process that died can name another one by the time the
# cluster stops (a Slurm daemon or job process in a pod, a Slurm lab's),
# which stop would then have signalled.
pid_of() {
    local p
    p=$(cat "$D/run/$1.pid" 2>/dev/null) || return 0
    if launched "$p" K8S_CLUSTER_TAG "$D"; then echo "$p"; fi
    return 0
}
port_of() { cat "$D/run/$1.port" 2>/dev/null || true; }

# PIDs of processes carrying this cluster's tag.
tagged_pids() {
    python3 -c '
import os, sys
want = b"K8S_CLUSTER_TAG=" + sys.argv[1].encode()
for pid in os.listdir("/proc"):
    if not pid.isdigit() or int(pid) in (os.getpid(), int(sys.argv[2])):
        continue
    try:
        env = open("/proc/%s/environ" % pid, "rb").read().split(b"\0")
    except OSError:
        continue
    if want in env:
        print(pid)' "$D" "$$"
}

# terminate WAIT_MS PID...: SIGTERM all at once, wait up to WAIT_MS, then
# SIGKILL the rest and wait (bounded) until they are gone.
terminate() {
    local wait_ms=$1; shift
    [ $# -gt 0 ] || return 0
    kill -TERM "$@" 2>/dev/null || true
    local limit=$(( $(now_ms) + wait_ms )) p left
    while :; do
        left=()
        for p in "$@"; do alive "$p" && left+=("$p"); done
        [ ${#left[@]} -eq 0 ] && return 0
        [ "$(now_ms)" -lt "$limit" ] || break
        sleep 0.05
    done
    say "SIGKILL ${left[*]} (still running after SIGTERM)"
    kill -KILL "${left[@]}" 2>/dev/null || true
    limit=$(( $(now_ms) + 5000 ))
    for p in "${left[@]}"; do
        while alive "$p" && [ "$(now_ms)" -lt "$limit" ]; do sleep 0.05; done
    done
}

# health NAME: the component's own health endpoint answers ok.
health() {
    local port; port=$(port_of "$1")
    [ -n "$port" ] || return 1
    case $1 in
        etcd) curl -fsS -m 2 "http://127.0.0.1:$port/health" | grep -q '"health":"true"' ;;
        kube-apiserver)
            curl -fsS -m 2 --cacert "$D/pki/ca.crt" --cert "$D/pki/admin.crt" --key "$D/pki/admin.key" \
                "https://127.0.0.1:$port/readyz" | grep -qx ok ;;
        kube-controller-manager|kube-scheduler)
            curl -fsSk -m 2 "https://127.0.0.1:$port/healthz" | grep -qx ok ;;
        kwok) curl -fsS -m 2 "http://127.0.0.1:$port/healthz" | grep -qx ok ;;
    esac
}

# ---- certificates and kubeconfigs -----------------------------------------

# cert NAME CN O [SAN]: an EC key and a certificate signed by the cluster CA,
# for client and server use.
cert() {
    local name=$1 cn=$2 o=$3 san=${4:-} subj
    subj="/CN=$cn"
    [ -z "$o" ] || subj="/O=$o/CN=$cn"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$D/pki/$name.key" -subj "$subj" -out "$D/pki/$name.csr" 2>/dev/null
    {
        echo "basicConstraints=critical,CA:FALSE"
        echo "keyUsage=critical,digitalSignature,keyEncipherment"
        echo "extendedKeyUsage=serverAuth,clientAuth"
        [ -z "$san" ] || echo "subjectAltName=$san"
    } > "$D/pki/$name.ext"
    openssl x509 -req -in "$D/pki/$name.csr" -CA "$D/pki/ca.crt" -CAkey "$D/pki/ca.key" \
        -set_serial "0x$(openssl rand -hex 16)" -days 3650 -extfile "$D/pki/$name.ext" \
        -out "$D/pki/$name.crt" 2>/dev/null
    rm -f "$D/pki/$name.csr" "$D/pki/$name.ext"
}

make_pki() {
    mkdir -p "$D/pki"
    openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$D/pki/ca.key" -out "$D/pki/ca.crt" -days 3650 -subj "/CN=slurmop-k8s-ca" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
    cert apiserver kube-apiserver "" \
        "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:$SERVICE_IP"
    cert admin kubernetes-admin system:masters
    cert controller-manager system:kube-controller-manager ""
    cert scheduler system:kube-scheduler ""
    # kwok plays the kubelet of every fake node (node status, leases, pod
    # status), which Node authorization would split per node: it gets admin.
    cert kwok kwok-controller system:masters
    # The API server's client certificate towards kubelets (logs, exec,
    # port-forward on the real Nodes of nodes.sh).
    cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
    # The ServiceAccount token signing key (RSA, as kubeadm makes it).
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$D/pki/sa.key" 2>/dev/null
    openssl pkey -in "$D/pki/sa.key" -pubout -out "$D/pki/sa.pub" 2>/dev/null
    chmod 600 "$D"/pki/*.key
}

# kubeconfig NAME CERT: a kubeconfig for the client certificate CERT, with
# everything embedded (it stays valid if copied elsewhere).
kubeconfig() {
    cat > "$D/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: slurmop-k8s
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(base64 -w0 < "$D/pki/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 < "$D/pki/$2.crt")
    client-key-data: $(base64 -w0 < "$D/pki/$2.key")
contexts:
- name: slurmop-k8s
  context:
    cluster: slurmop-k8s
    user: $2
current-context: slurmop-k8s
EOF
    chmod 600 "$D/$1.kubeconfig"
}

# ---- KWOK nodes -------------------------------------------------------------

# nodes_yaml FROM TO: Node manifests FROM..TO-1, shaped like the nodes of a GPU
# node pool (8 GPUs, 128 CPUs, 1 TiB), as one multi-document stream.
nodes_yaml() {
    local prefix=${K8S_NODE_PREFIX:-kwok-gpu-} i name zone
    for ((i = $1; i < $2; i++)); do
        name=$(printf '%s%04d' "$prefix" "$i")
        zone=test-zone-$(( i % 2 == 0 ? 0 : 1 ))
        cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: $name
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    kubernetes.io/hostname: $name
    node.kubernetes.io/instance-type: gpu-8x-h100
    topology.kubernetes.io/region: test-region
    topology.kubernetes.io/zone: $zone
    type: kwok
    node-pool: gpu
    nvidia.com/gpu.present: "true"
    nvidia.com/gpu.count: "8"
    nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3
    nvidia.com/gpu.memory: "81559"
spec: {}
status:
  capacity: {cpu: "128", memory: 1Ti, nvidia.com/gpu: "8", pods: "110", ephemeral-storage: 3500Gi}
  allocatable: {cpu: "128", memory: 1Ti, nvidia.com/gpu: "8", pods: "110", ephemeral-storage: 3500Gi}
EOF
    done
}

kubectl_admin() { "$BIN/kubectl" --kubeconfig "$D/admin.kubeconfig" "$@"; }

node_count() {
    kubectl_admin get nodes -l type=kwok -o name | wc -l
}

# Ready, and schedulable: the API server gives a new Node the taint
# node.kubernetes.io/not-ready:NoSchedule and kube-controller-manager lifts it
# once the Node is Ready; until then the scheduler refuses the Node, so a
# workload started on a Node only Ready waits (at 1,152 nodes, 628 still
# carried it minutes later).
ready_node_count() {
    kubectl_admin get nodes -l type=kwok --no-headers \
        -o 'custom-columns=R:.status.conditions[?(@.type=="Ready")].status,T:.spec.taints[*].key' 2>/dev/null |
        awk '$1 == "True" && $2 !~ /node.kubernetes.io\/not-ready/' | wc -l
}

nodes_ready() { [ "$(ready_node_count)" -ge "$1" ]; }

# add_nodes N: create KWOK nodes until there are N (one kubectl create of a
# generated multi-document file), then wait until all are Ready.
add_nodes() {
    local want=$1 have t0; t0=$(now_ms)
    [[ $want =~ ^[0-9]+$ ]] || die "bad node count '$want'"
    have=$(node_count)
    if [ "$want" -gt "$have" ]; then
        # kubectl sends one request per document: beyond 100 nodes, files
        # of at most ~500 created side by side (up to 16 at once; 9,216 nodes
        # in four files took 196 s).
        local parts=1 from to i pids=() p
        [ $((want - have)) -le 100 ] || parts=$(( (want - have + 499) / 500 ))
        [ "$parts" -le 16 ] || parts=16
        rm -f "$D"/nodes.*.yaml
        for ((i = 0; i < parts; i++)); do
            from=$(( have + (want - have) * i / parts ))
            to=$(( have + (want - have) * (i + 1) / parts ))
            nodes_yaml "$from" "$to" > "$D/nodes.$i.yaml"
            kubectl_admin create -f "$D/nodes.$i.yaml" >/dev/null &
            pids+=($!)
        done
        for p in "${pids[@]}"; do wait "$p" || die "creating nodes failed"; done
        say "created $((want - have)) node(s) in $(( $(now_ms) - t0 )) ms"
    fi
    # Each check lists every Node (about 3 KB each), which costs the API
    # server and kubectl more CPU than kwok's own work at thousands of
    # Nodes: checked every 0.1 s, 9,216 Nodes took 318 s to be Ready with
    # kubectl using ~60 % of a core. The pause grows with the count.
    POLL_SLEEP=$(awk -v n="$want" 'BEGIN { printf "%.1f", 0.1 + n / 2000 }') \
        poll $(( 30000 + want * 50 )) "$(pid_of kwok)" nodes_ready "$want" ||
        die "the KWOK nodes did not become Ready (log/kwok.log)"
    say "$want KWOK node(s) Ready in $(( $(now_ms) - t0 )) ms"
}

# ---- start -------------------------------------------------------------------

# kwok renews every node's lease each quarter of its duration: at the
# kubelet's 40 s, 9,216 nodes would renew ~920 times a second, more than the
# API server on two cores does beside the workload under test (pods turned
# Ready at ~5/s at 1,152 nodes). The duration grows with the node count so
# that renewals stay near 50/s, and kube-controller-manager's grace period
# with it (nodes would turn NotReady between renewals otherwise).
lease_seconds() {
    local nodes=$1
    if [ -n "${K8S_LEASE_SECONDS:-}" ]; then
        [[ $K8S_LEASE_SECONDS =~ ^[0-9]+$ ]] && [ "$K8S_LEASE_SECONDS" -ge 10 ] || die "bad K8S_LEASE_SECONDS"
        echo "$K8S_LEASE_SECONDS"
    elif [ "$nodes" -gt 480 ]; then
        echo $(( nodes / 12 ))
    else
        echo 40
    fi
}

# kube-scheduler's own settings. NodeSet pods carry a required pod
# anti-affinity (one slurmd per node), and the scheduler's default looks for
# feasible nodes among up to half of them per pod: at 1,152 nodes it bound
# ~4.5 pods a second on two cores, so a scale-out of a few thousand pods
# would take the best part of an hour. 5 % of the nodes (at least 100, the
# scheduler's own floor) still spreads the pods; its client gets a QPS that
# does not throttle the bindings.
write_scheduler_config() {
    cat > "$D/scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $D/scheduler.kubeconfig
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
percentageOfNodesToScore: 5
EOF
}

# The stages kwok plays, after its own options: four pod stages at a time
# (its default) left pods Pending for minutes at 1,024 pods.
#
# kwok's pod-delete stage finishes a terminating pod with a DELETE by name,
# without the UID precondition a kubelet sends. A DELETE with grace 0 makes
# kube-apiserver write the pod once with a deletionTimestamp and a grace of
# 0 and then remove it; kwok saw that write, and when its queue lagged by a
# second or two its own DELETE removed the replacement a controller had made
# under the same name by then, which it saw being deleted in turn: one pod
# name deleted every ~2 s for minutes after a churn of grace-0 deletes. A
# pod whose grace is already 0 needs nothing from kwok (the API server
# removes it in the same request), so the stage skips it.
write_kwok_config() {
    local stages; stages=$(cd "$BIN/.." && pwd)/kwok-stages.yaml
    [ -f "$stages" ] || die "no $stages (build.sh makes it)"
    {
        printf '%s\n' '---' 'apiVersion: config.kwok.x-k8s.io/v1alpha1' 'kind: KwokConfiguration' 'options:' \
            '  podPlayStageParallelism: 16' '  nodePlayStageParallelism: 8' '  nodeLeaseParallelism: 8'
        awk '
            /^  name: / { stage = $2 }
            { print }
            stage == "pod-delete" && /operator: .Exists./ && !done {
                print "    - key: \x27.metadata.deletionGracePeriodSeconds | tostring\x27"
                print "      operator: \x27NotIn\x27"
                print "      values:"
                print "      - \x270\x27"
                done = 1
            }' "$stages"
    } > "$D/kwok.yaml"
    grep -q 'deletionGracePeriodSeconds' "$D/kwok.yaml" || die "kwok's pod-delete stage changed shape ($stages)"
}

# The audit policy: one Metadata event per request of a ServiceAccount outside
# kube-system (the operator under test), none for anything else. Tests count
# the operator's own requests in log/audit.log (JSON lines), as kubesim's
# /kubesim/counters does, reading from a byte offset taken before a window:
# the log must never be rotated. kube-apiserver's --audit-log-maxsize 0 does
# not mean "never" (its log writer then rotates at 100 MB, which Slinky's
# requests at 1,024 pods passed: the benchmark counted 0 requests after the
# rotation); the size given below is 1 TiB.
write_audit_policy() {
    cat > "$D/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    userGroups: ["system:serviceaccounts:kube-system"]
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
EOF
}

# launch_apiserver: start kube-apiserver on the ports in run/ (start and
# restart-apiserver).
launch_apiserver() {
    local etcd_port api_port
    etcd_port=$(port_of etcd); api_port=$(port_of kube-apiserver)
    launch kube-apiserver "$BIN/kube-apiserver" \
        --etcd-servers "http://127.0.0.1:$etcd_port" \
        --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
        --cert-dir "$D/apiserver" \
        --tls-cert-file "$D/pki/apiserver.crt" --tls-private-key-file "$D/pki/apiserver.key" \
        --client-ca-file "$D/pki/ca.crt" \
        --authorization-mode Node,RBAC \
        --service-account-issuer https://kubernetes.default.svc.cluster.local \
        --service-account-key-file "$D/pki/sa.pub" \
        --service-account-signing-key-file "$D/pki/sa.key" \
        --service-cluster-ip-range "$SERVICE_CIDR" \
        --endpoint-reconciler-type none \
        --kubelet-client-certificate "$D/pki/apiserver-kubelet-client.crt" \
        --kubelet-client-key "$D/pki/apiserver-kubelet-client.key" \
        --kubelet-preferred-address-types InternalIP,Hostname \
        --allow-privileged=true \
        --audit-policy-file "$D/audit-policy.yaml" --audit-log-path "$D/log/audit.log" \
        --audit-log-format json --audit-log-mode blocking --audit-log-maxsize 1048576
}

# restart-apiserver: stop kube-apiserver (SIGTERM, SIGKILL after 3 s; every
# connection and watch ends) and start it again on the same port with the same etcd; wait until
# it is ready.
do_restart_apiserver() {
    [ -f "$D/env" ] && [ -f "$D/run/bin" ] || die "no started cluster at $D"
    BIN=$(cat "$D/run/bin")
    local p t0; t0=$(now_ms)
    p=$(pid_of kube-apiserver)
    # SIGTERM, then SIGKILL after 3 s: a graceful stop waits for long requests.
    alive "$p" && terminate 3000 "$p"
    launch_apiserver
    poll 60000 "$(pid_of kube-apiserver)" health kube-apiserver || die "kube-apiserver did not become ready (log/kube-apiserver.log)"
    say "kube-apiserver restarted in $(( $(now_ms) - t0 )) ms"
}

# compact: compact etcd's history up to its current revision (the API server
# then answers a watch or list from an older resourceVersion with 410 Gone
# once its watch cache no longer holds it); prints the revision.
do_compact() {
    [ -f "$D/run/bin" ] || die "no started cluster at $D"
    local port rev
    port=$(port_of etcd)
    rev=$(curl -fsS -m 5 -X POST -d '{"key": "AA=="}' "http://127.0.0.1:$port/v3/kv/range" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])') || die "etcd range failed"
    curl -fsS -m 10 -X POST -d "{\"revision\": \"$rev\", \"physical\": true}" \
        "http://127.0.0.1:$port/v3/kv/compaction" >/dev/null || die "etcd compaction failed"
    say "etcd compacted at revision $rev"
    echo "$rev"
}

print_env() {
    cat "$D/env"
}

do_start() {
    local nodes=0 crds="" kubelets=0
    while [ $# -gt 0 ]; do
        case $1 in
            --nodes) [ $# -ge 2 ] || die "--nodes needs a count"; nodes=$2; shift 2 ;;
            --nodes=*) nodes=${1#--nodes=}; shift ;;
            --crds) [ $# -ge 2 ] || die "--crds needs a folder"; crds=$2; shift 2 ;;
            --crds=*) crds=${1#--crds=}; shift ;;
            --kubelets) [ $# -ge 2 ] || die "--kubelets needs a count"; kubelets=$2; shift 2 ;;
            --kubelets=*) kubelets=${1#--kubelets=}; shift ;;
            *) die "unknown start argument: $1" ;;
        esac
    done
    [[ $nodes =~ ^[0-9]+$ ]] || die "bad node count '$nodes'"
    [[ $kubelets =~ ^[0-9]+$ ]] || die "bad kubelet count '$kubelets'"
    LEASE_S=$(lease_seconds "$nodes")
    local b
    for b in openssl curl python3 setsid; do
        command -v "$b" >/dev/null 2>&1 || { say "missing $b"; exit 77; }
    done

    local rc=0
    BIN=$(bash "$HERE/build.sh") || rc=$?
    if [ $rc -ne 0 ]; then
        say "build.sh failed (exit $rc)"
        [ $rc -eq 77 ] && exit 77
        exit 1
    fi

    local t0; t0=$(now_ms)
    mkdir -p "$D"
    D=$(cd "$D" && pwd)
    local n
    for n in "${COMPONENTS[@]}"; do
        alive "$(pid_of "$n")" && die "$n of $D is running (pid $(pid_of "$n")); stop it first"
    done
    rm -rf "$D/etcd" "$D/run" "$D/log" "$D/pki" "$D"/*.kubeconfig "$D/env" "$D/audit-policy.yaml" "$D/kcm" "$D/scheduler" "$D/apiserver" "$D"/nodes*.yaml
    mkdir -p "$D/run" "$D/log" "$D/kcm" "$D/scheduler" "$D/apiserver"
    echo "$BIN" > "$D/run/bin"

    local ports; ports=($(free_ports 6))
    local ETCD_PORT=${ports[0]} PEER_PORT=${ports[1]} KCM_PORT=${ports[3]} SCHED_PORT=${ports[4]} KWOK_PORT=${ports[5]}
    API_PORT=${ports[2]}

    # From here a failure stops whatever was started.
    trap 'rc=$?; if [ $rc -ne 0 ]; then say "start failed; stopping (logs in $D/log)"; do_stop >/dev/null 2>&1 || true; fi' EXIT

    make_pki
    kubeconfig admin admin
    kubeconfig controller-manager controller-manager
    kubeconfig scheduler scheduler
    kubeconfig kwok kwok
    write_kwok_config

    echo "$ETCD_PORT" > "$D/run/etcd.port"
    launch etcd "$BIN/etcd" --name slurmop-k8s --data-dir "$D/etcd" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$PEER_PORT" \
        --initial-cluster "slurmop-k8s=http://127.0.0.1:$PEER_PORT" --initial-cluster-state new \
        --unsafe-no-fsync --log-level warn
    poll 20000 "$(pid_of etcd)" health etcd || die "etcd did not start (log/etcd.log)"

    echo "$API_PORT" > "$D/run/kube-apiserver.port"
    write_audit_policy
    launch_apiserver
    poll 60000 "$(pid_of kube-apiserver)" health kube-apiserver || die "kube-apiserver did not become ready (log/kube-apiserver.log)"
    say "kube-apiserver ready on 127.0.0.1:$API_PORT after $(( $(now_ms) - t0 )) ms"

    if [ -n "$crds" ]; then
        # The garbage collector learns of new resource kinds by rediscovery
        # every 30 s; until then it cannot look up an owner of a new kind,
        # and its retries back off, so the dependents of a deleted custom
        # resource can outlive it by a minute or more. CRDs that exist
        # before it starts are in its first discovery.
        ls "$crds"/*.yaml >/dev/null 2>&1 || die "--crds $crds: no *.yaml there"
        kubectl_admin apply --server-side -f "$crds" >/dev/null || die "--crds: kubectl apply -f $crds failed"
        kubectl_admin wait --for condition=established --timeout=30s -f "$crds" >/dev/null ||
            die "--crds: the CRDs of $crds did not become Established"
        say "CRDs of $crds established after $(( $(now_ms) - t0 )) ms"
    fi

    echo "$KCM_PORT" > "$D/run/kube-controller-manager.port"
    # Its client's default 20 requests a second would spend a minute lifting
    # the not-ready taints of a thousand new Nodes, the garbage collector and
    # the StatefulSet controller waiting behind.
    launch kube-controller-manager "$BIN/kube-controller-manager" \
        --kubeconfig "$D/controller-manager.kubeconfig" \
        --bind-address 127.0.0.1 --secure-port "$KCM_PORT" --cert-dir "$D/kcm" \
        --leader-elect=false \
        --controllers '*' \
        --use-service-account-credentials=true \
        --service-account-private-key-file "$D/pki/sa.key" \
        --root-ca-file "$D/pki/ca.crt" \
        --cluster-signing-cert-file "$D/pki/ca.crt" --cluster-signing-key-file "$D/pki/ca.key" \
        --cluster-name slurmop-k8s \
        --node-monitor-grace-period "$(( LEASE_S + 10 ))s" \
        --kube-api-qps 500 --kube-api-burst 1000 \
        --service-cluster-ip-range "$SERVICE_CIDR"

    echo "$SCHED_PORT" > "$D/run/kube-scheduler.port"
    write_scheduler_config
    launch kube-scheduler "$BIN/kube-scheduler" \
        --config "$D/scheduler.yaml" \
        --bind-address 127.0.0.1 --secure-port "$SCHED_PORT" --cert-dir "$D/scheduler"

    echo "$KWOK_PORT" > "$D/run/kwok.port"
    launch kwok "$BIN/kwok" \
        --kubeconfig "$D/kwok.kubeconfig" --config "$D/kwok.yaml" \
        --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
        --node-ip 127.0.0.1 --node-port "$KWOK_PORT" --cidr "$POD_CIDR" \
        --server-address "127.0.0.1:$KWOK_PORT" \
        --node-lease-duration-seconds "$LEASE_S"

    for n in kube-controller-manager kube-scheduler kwok; do
        poll 60000 "$(pid_of "$n")" health "$n" || die "$n did not become healthy (log/$n.log)"
    done
    # The ServiceAccount admission plugin refuses pods until the namespace's
    # default ServiceAccount exists; the controller manager makes it.
    poll 30000 "$(pid_of kube-controller-manager)" kubectl_admin -n default get serviceaccount default ||
        die "no default ServiceAccount (log/kube-controller-manager.log)"

    [ "$nodes" -eq 0 ] || add_nodes "$nodes"

    cat > "$D/env" <<EOF
export K8S_DIR=$D
export KUBECONFIG=$D/admin.kubeconfig
export K8S_BIN=$BIN
EOF
    if [ "$kubelets" -gt 0 ]; then
        rc=0
        bash "$HERE/nodes.sh" start "$kubelets" >/dev/null || rc=$?
        [ $rc -eq 0 ] || { [ $rc -eq 77 ] && exit 77; die "nodes.sh start $kubelets failed (exit $rc)"; }
    fi
    trap - EXIT
    print_env
    say "started $D in $(( $(now_ms) - t0 )) ms: API server https://127.0.0.1:$API_PORT, $nodes KWOK node(s)"
}

# ---- stop / status -------------------------------------------------------------

do_stop() {
    [ -d "$D" ] || { [ "${1:-}" = --clean ] || say "no cluster at $D"; return 0; }
    # Real Nodes first: their pods, mounts, iptables rules and sysctls are
    # host-wide, and their kubelets still talk to the API server.
    if [ -d "$D/nodes" ]; then
        K8S_DIR=$D bash "$HERE/nodes.sh" stop || die "nodes.sh stop failed"
    fi
    # Clients first, then the API server, then etcd: each stops cleanly
    # while what it talks to is still there.
    local pids=() p n
    for n in kwok kube-scheduler kube-controller-manager; do
        p=$(pid_of "$n"); alive "$p" && pids+=("$p")
    done
    terminate 10000 "${pids[@]+"${pids[@]}"}"
    for n in kube-apiserver etcd; do
        p=$(pid_of "$n"); alive "$p" && terminate 15000 "$p"
    done
    local rest; rest=($(tagged_pids))
    if [ ${#rest[@]} -gt 0 ]; then
        say "stopping stragglers ${rest[*]}"
        terminate 2000 "${rest[@]}"
        rest=($(tagged_pids))
        [ ${#rest[@]} -eq 0 ] || die "still running: ${rest[*]}"
    fi
    rm -f "$D"/run/*.pid
    release_ports
    if [ "${1:-}" = --clean ]; then rm -rf "$D"; fi
    return 0
}

do_status() {
    [ -d "$D/run" ] || { say "no cluster at $D"; return 3; }
    local n p rc=0 state
    for n in "${COMPONENTS[@]}"; do
        p=$(pid_of "$n")
        if ! alive "$p"; then
            state="stopped"; rc=3
        elif health "$n"; then
            state="running pid $p, healthy"
        else
            state="running pid $p, NOT healthy"; rc=3
        fi
        printf '%-24s %-40s 127.0.0.1:%s\n' "$n" "$state" "$(port_of "$n")"
    done
    if [ $rc -eq 0 ]; then
        BIN=$(cat "$D/run/bin")
        printf '%-24s %s Ready of %s\n' "kwok nodes" "$(ready_node_count)" "$(node_count)"
    fi
    return $rc
}

# nodes.sh sources this file for its helpers; only run a command when
# executed.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

cmd=${1:-}
[ $# -eq 0 ] || shift
case $cmd in
    start) do_start "$@" ;;
    stop) do_stop "$@" ;;
    status) do_status ;;
    env) [ -f "$D/env" ] || die "no started cluster at $D"; print_env ;;
    restart-apiserver) do_restart_apiserver ;;
    compact) do_compact ;;
    nodes)
        [ $# -eq 1 ] || die "usage: cluster.sh nodes N"
        [ -f "$D/env" ] && [ -f "$D/run/bin" ] || die "no started cluster at $D"
        alive "$(pid_of kube-apiserver)" || die "the cluster at $D is not running"
        BIN=$(cat "$D/run/bin")
        add_nodes "$1" ;;
    -h|--help|help) sed -n '2,/^set -e/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' ;;
    *) sed -n '2,/^set -e/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
