#!/usr/bin/env bash
# nodes.sh — real Kubernetes Nodes (kubelet + containerd + runc + CNI) beside
# the control plane of cluster.sh, on this one machine, so that pods run real
# containers.
#
# Each Node i (0..N-1) has its own containerd (socket, root, state, runc
# root), kubelet root dir, ports, node name ($K8S_KUBELET_PREFIX<i>, default
# real-node-<i>), node IP 10.87.0.<10+i>/32 on lo, cgroup parent and pod IP
# range 10.88.<i+1>.0/24 in 10.88.0.0/16. All pods share one bridge
# (slurmop0, gateway 10.88.0.1): pods of different Nodes reach each other on
# it. One kube-proxy (iptables mode) serves them all (they share the host's
# network stack), one CoreDNS (host process on 10.87.0.2:53) answers
# cluster.local; anything else gets NXDOMAIN. No masquerade: a FORWARD reject
# keeps pod traffic from ever leaving through another interface. The
# `kubernetes` Service (10.96.0.1:443) is a DNAT to the API server on
# 127.0.0.1 (route_localnet). The pause image is build-node.sh's.
#
# The bridge, iptables and sysctls are host-wide: a host lock (/run/lock/
# slurmop-real-nodes) admits one set of real Nodes at a time. `stop` stops
# every process (kubelets, kube-proxy, CoreDNS, containerds, shims, every
# container process in the Nodes' cgroups), unmounts what they mounted,
# removes the network namespaces, cgroups, bridge, iptables chains and lo
# addresses they made and restores the sysctls they changed.
#
# Commands (K8S_DIR names the cluster, as for cluster.sh):
#   start N            start N real Nodes (the control plane must run) and
#                      wait until they are Ready; prints the export lines
#   import ARCHIVE...  import OCI/docker image archives into every Node's
#                      containerd (namespace k8s.io)
#   tag SRC DST        tag image SRC as DST in every Node's containerd
#   images             the images of Node 0's containerd
#   stop               stop and clean up (idempotent)
#   status             one line per process; exit 0 when all run
#
# Needs root, containerd, runc, containernetworking-plugins, iptables
# (tests/deps.sh installs them) and the binaries of build-node.sh. Exit 77
# when something is missing (not root, no containerd, no Go).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=cluster.sh
source "$HERE/cluster.sh"

say() { printf 'k8s-nodes: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

ND=$D/nodes
BRIDGE=slurmop0
POD_NET=10.88.0.0/16
POD_GW=10.88.0.1
DNS_IP=10.87.0.2
HOST_LOCK=/run/lock/slurmop-real-nodes
NODE_PREFIX=${K8S_KUBELET_PREFIX:-real-node-}
# The sysctls this script or what it starts changes, restored by stop: the
# bridge plugin turns ip_forward on; the DNAT needs route_localnet; pod to
# Service replies on the bridge need bridge-nf-call-iptables; the kubelet
# sets the vm and kernel ones it wants (protectKernelDefaults false, or it
# would refuse to start on a host whose values differ).
SYSCTLS=(net/ipv4/ip_forward net/ipv4/conf/all/route_localnet net/bridge/bridge-nf-call-iptables
         vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops
         kernel/keys/root_maxkeys kernel/keys/root_maxbytes)
CGROUP_FS=/sys/fs/cgroup

node_ip() { echo "10.87.0.$((10 + $1))"; }
node_name() { echo "$NODE_PREFIX$1"; }
# A cgroup parent per cluster directory and Node (cluster dirs may differ).
cg_base() { echo "slurmop-$(printf '%s' "$D" | sha256sum | cut -c1-8)"; }

node_count_started() { cat "$ND/count" 2>/dev/null || echo 0; }

# ---- checks -----------------------------------------------------------------

need() {
    [ "$(id -u)" -eq 0 ] || { say "real Nodes need root"; exit 77; }
    local b
    for b in containerd containerd-shim-runc-v2 runc ctr iptables iptables-save ip findmnt; do
        command -v "$b" >/dev/null 2>&1 || { say "missing $b (bash tests/deps.sh)"; exit 77; }
    done
    [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/portmap ] ||
        { say "missing the CNI plugins in /usr/lib/cni (containernetworking-plugins)"; exit 77; }
    [ -d /proc/sys/net/bridge ] || modprobe br_netfilter 2>/dev/null ||
        { say "no br_netfilter (net.bridge sysctls)"; exit 77; }
}

# ---- the host lock ------------------------------------------------------------

# The owner's cluster directory is in the lock file; a lock whose owner has no
# running containerd or kubelet any more is stale and taken over.
take_host_lock() {
    mkdir -p "$(dirname "$HOST_LOCK")"
    exec 8>>"$HOST_LOCK.flock"
    flock 8
    local owner=""
    owner=$(cat "$HOST_LOCK" 2>/dev/null || true)
    if [ -n "$owner" ] && [ "$owner" != "$D" ]; then
        local p f live=""
        for f in "$owner"/run/node-*.pid; do
            [ -f "$f" ] || continue
            p=$(cat "$f"); alive "$p" && launched "$p" K8S_CLUSTER_TAG "$owner" && live=$p
        done
        [ -z "$live" ] || die "real Nodes of $owner are running (pid $live): one set at a time on a host (stop them first: K8S_DIR=$owner $0 stop)"
        say "taking over the stale lock of $owner"
    fi
    echo "$D" > "$HOST_LOCK"
    flock -u 8
}

release_host_lock() {
    [ "$(cat "$HOST_LOCK" 2>/dev/null || true)" = "$D" ] && rm -f "$HOST_LOCK"
    return 0
}

# ---- configuration files ---------------------------------------------------------

# The kubelet's client certificate: Node authorization knows a node by it.
write_node_pki() {
    local i=$1 name; name=$(node_name "$i")
    cert "node-$i" "system:node:$name" system:nodes
}

node_kubeconfig() { # FILE CERTNAME
    cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: slurmop-k8s
  cluster:
    server: https://127.0.0.1:$(port_of kube-apiserver)
    certificate-authority: $D/pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $D/pki/$2.crt
    client-key: $D/pki/$2.key
contexts:
- name: slurmop-k8s
  context: {cluster: slurmop-k8s, user: $2}
current-context: slurmop-k8s
EOF
    chmod 600 "$1"
}

write_containerd_config() {
    local i=$1 n=$ND/n$1
    mkdir -p "$n/containerd/root" "$n/containerd/state" "$n/runc" "$n/cni/net.d" "$n/cni/ipam" "$n/opt"
    cat > "$n/containerd.toml" <<EOF
version = 2
root = "$n/containerd/root"
state = "$n/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$n/containerd.sock"
[ttrpc]
  address = "$n/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$n/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  # No CAP_SYS_RESOURCE in this VM's bounding set: runc cannot lower a
  # sandbox's oom_score_adj below its own (-998 refused; every sandbox
  # failed with "can't get final child's PID from pipe: EOF").
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        Root = "$n/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$n/cni/net.d"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = ""
EOF
    # One bridge for every Node, a range of its own per Node, no masquerade.
    cat > "$n/cni/net.d/10-slurmop.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$(cg_base)-n$i",
  "plugins": [
    {
      "type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "$n/cni/ipam",
        "ranges": [[{"subnet": "$POD_NET", "rangeStart": "10.88.$((i + 1)).2",
                     "rangeEnd": "10.88.$((i + 1)).254", "gateway": "$POD_GW"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}

write_kubelet_config() {
    local i=$1 n=$ND/n$1 port=$2 hport=$3
    mkdir -p "$n/kubelet" "$n/pod-logs"
    cat > "$n/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $(node_ip "$i")
port: $port
readOnlyPort: 0
# A log folder per Node: each kubelet removes the folders of pods it does
# not know from its podLogsDir (a shared /var/log/pods loses the others').
podLogsDir: $n/pod-logs
healthzBindAddress: 127.0.0.1
healthzPort: $hport
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $D/pki/ca.crt}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$n/containerd.sock
imageServiceEndpoint: unix://$n/containerd.sock
# This VM has cgroup v1, which kubelet 1.35 refuses unless told otherwise.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$(cg_base)-n$i
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
clusterDomain: cluster.local
clusterDNS: [$DNS_IP]
resolvConf: $ND/resolv.conf
failSwapOn: false
maxPods: 30
serializeImagePulls: false
# Images are imported, never pulled: garbage collection would lose them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# A shared test machine's disk: evict only when it is really full.
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
nodeStatusReportFrequency: 1m
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
EOF
}

write_kube_proxy_config() {
    local hport=$1 mport=$2
    cat > "$ND/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $ND/kube-proxy.kubeconfig
mode: iptables
hostnameOverride: $(node_name 0)
bindAddress: $(node_ip 0)
healthzBindAddress: 127.0.0.1:$hport
metricsBindAddress: 127.0.0.1:$mport
clusterCIDR: $POD_NET
detectLocalMode: ClusterCIDR
# NodePorts on the bridge address only: never on 127.0.0.1, where other
# tests listen.
nodePortAddresses: ["$POD_GW/32"]
iptables:
  localhostNodePorts: false
  masqueradeAll: false
# 0: leave the host's conntrack sysctls alone (it would set the established
# timeout to a day).
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
}

write_corefile() {
    local hport=$1 rport=$2
    cat > "$ND/Corefile" <<EOF
cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {
    bind $DNS_IP
    errors
    health 127.0.0.1:$hport
    ready 127.0.0.1:$rport
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $D/admin.kubeconfig
        pods insecure
        ttl 5
    }
    cache 5
}
.:53 {
    bind $DNS_IP
    template ANY ANY {
        rcode NXDOMAIN
    }
}
EOF
    echo "nameserver $DNS_IP" > "$ND/resolv.conf"
}

# ---- host state: sysctls, addresses, iptables, cgroups --------------------------------

# The host's iptables rules and user chains (IPv4, IPv6), per table, without
# counters; not the built-in chains' ACCEPT policies, which an empty table a
# program merely listed also shows.
ipt_snapshot() {
    local v t
    for v in iptables ip6tables; do
        for t in filter nat mangle raw; do
            $v-save -t $t 2>/dev/null | sed -n "/^-A /s/^/$v $t /p; /^:[^ ]* - /s/^/$v $t /p; /^:[^ ]* DROP /s/^/$v $t /p"
        done
    done | sed 's/\[[0-9]*:[0-9]*\]//'
}

save_host_state() {
    local s
    : > "$ND/sysctls"
    for s in "${SYSCTLS[@]}"; do
        [ -f "/proc/sys/$s" ] && echo "$s $(cat "/proc/sys/$s")" >> "$ND/sysctls"
    done
    ipt_snapshot > "$ND/iptables.before"
    ls /run/netns 2>/dev/null > "$ND/netns.before" || : > "$ND/netns.before"
    [ -d /run/containerd ] && echo yes > "$ND/run-containerd.before" || echo no > "$ND/run-containerd.before"
    [ -d /var/lib/cni ] && echo yes > "$ND/var-lib-cni.before" || echo no > "$ND/var-lib-cni.before"
}

setup_host() {
    local i
    echo 1 > /proc/sys/net/ipv4/conf/all/route_localnet
    echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables
    echo 1 > /proc/sys/net/ipv4/ip_forward
    ip addr add "$DNS_IP/32" dev lo 2>/dev/null || true
    for ((i = 0; i < N; i++)); do ip addr add "$(node_ip "$i")/32" dev lo 2>/dev/null || true; done
    # Pod traffic stays on the bridge: nothing in or out through any other
    # interface (the host itself is reached through INPUT, not FORWARD).
    iptables -N SLURMOP-PODS 2>/dev/null || iptables -F SLURMOP-PODS
    iptables -A SLURMOP-PODS -i "$BRIDGE" ! -o "$BRIDGE" -j REJECT
    iptables -A SLURMOP-PODS -o "$BRIDGE" ! -i "$BRIDGE" -j REJECT
    iptables -I FORWARD 1 -j SLURMOP-PODS
    # The `kubernetes` Service: the API server listens on loopback only and
    # has no endpoints (--endpoint-reconciler-type none), so pods reach it by
    # a DNAT of the Service IP.
    iptables -t nat -N SLURMOP-APISERVER 2>/dev/null || iptables -t nat -F SLURMOP-APISERVER
    iptables -t nat -A SLURMOP-APISERVER -d "$SERVICE_IP/32" -p tcp --dport 443 \
        -j DNAT --to-destination "127.0.0.1:$(port_of kube-apiserver)"
    iptables -t nat -I PREROUTING 1 -j SLURMOP-APISERVER
    iptables -t nat -I OUTPUT 1 -j SLURMOP-APISERVER
}

make_cgroups() {
    local i=$1 c dir
    for c in "$CGROUP_FS"/*/; do
        c=${c%/}
        [ -f "$c/cgroup.procs" ] || continue
        dir=$c/$(cg_base)-n$i
        mkdir -p "$dir"
        # A v1 cpuset child starts empty: tasks cannot join it until it has CPUs.
        if [ -f "$c/cpuset.cpus" ]; then
            cat "$c/cpuset.cpus" > "$dir/cpuset.cpus"
            cat "$c/cpuset.mems" > "$dir/cpuset.mems"
        fi
    done
}

# The cgroups of Node I, deepest first.
node_cgroups() {
    local c
    for c in "$CGROUP_FS"/*/; do
        c=${c%/}
        [ -d "$c/$(cg_base)-n$1" ] && find "$c/$(cg_base)-n$1" -depth -type d
    done
    return 0
}

# SIGKILL every process of Node I's cgroups until none is left (bounded).
kill_node_procs() {
    local i=$1 round f p any
    for round in $(seq 50); do
        any=""
        while read -r f; do
            # (a cgroup may go between the listing and the read)
            for p in $(cat "$f/cgroup.procs" 2>/dev/null); do
                kill -KILL "$p" 2>/dev/null || true; any=1
            done
        done < <(node_cgroups "$i")
        [ -n "$any" ] || return 0
        sleep 0.1
    done
    say "processes left in the cgroups of node $i"
}

remove_cgroups() {
    local d
    while read -r d; do rmdir "$d" 2>/dev/null || say "cannot remove cgroup $d"; done < <(node_cgroups "$1")
}

cleanup_iptables() {
    local t chain
    # kube-proxy's own cleanup first (its chains in every table), then the
    # kubelet's (KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT),
    # the CNI plugins' (portmap: CNI-*), and ours.
    if [ -x "${NODE_BIN:-}/kube-proxy" ]; then
        "$NODE_BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
    fi
    local ipt
    for ipt in iptables ip6tables; do
        command -v $ipt >/dev/null 2>&1 || continue
        for t in filter nat mangle; do
            # Rules that jump to one of those chains, from any chain.
            $ipt-save -t $t 2>/dev/null | grep -E '^-A .* -j (KUBE-|CNI-|SLURMOP-)' |
                grep -Ev '^-A (KUBE-|CNI-|SLURMOP-)' | sed 's/^-A /-D /' | while read -r rule; do
                    eval "$ipt -t $t $rule" 2>/dev/null || true
                done
            for chain in $($ipt-save -t $t 2>/dev/null | sed -n 's/^:\(\(KUBE-\|CNI-\|SLURMOP-\)[^ ]*\) .*/\1/p'); do
                $ipt -t $t -F "$chain" 2>/dev/null || true
            done
            for chain in $($ipt-save -t $t 2>/dev/null | sed -n 's/^:\(\(KUBE-\|CNI-\|SLURMOP-\)[^ ]*\) .*/\1/p'); do
                $ipt -t $t -X "$chain" 2>/dev/null || true
            done
        done
    done
    if [ -f "$ND/iptables.before" ]; then
        if ! diff <(cat "$ND/iptables.before") \
            <(ipt_snapshot) >"$ND/iptables.diff" 2>&1; then
            say "iptables differ from before start (nodes/iptables.diff):"
            sed 's/^/  /' "$ND/iptables.diff" >&2
            return 1
        fi
    fi
    return 0
}

restore_host() {
    local s v rc=0 i
    cleanup_iptables || rc=1
    ip link del "$BRIDGE" 2>/dev/null || true
    ip addr del "$DNS_IP/32" dev lo 2>/dev/null || true
    for ((i = 0; i < 64; i++)); do ip addr del "$(node_ip "$i")/32" dev lo 2>/dev/null || true; done
    if [ -f "$ND/sysctls" ]; then
        while read -r s v; do echo "$v" > "/proc/sys/$s" || rc=1; done < "$ND/sysctls"
    fi
    return $rc
}

# ---- start ------------------------------------------------------------------------

node_ready() {
    kubectl_admin get node "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null |
        grep -qx True
}

all_ready() {
    local i
    for ((i = 0; i < N; i++)); do node_ready "$(node_name "$i")" || return 1; done
    # Schedulable too (kube-controller-manager lifts the not-ready taint).
    ! kubectl_admin get nodes -l slurmop.test/real=true \
        -o 'jsonpath={.items[*].spec.taints[*].key}' | grep -q 'node.kubernetes.io/not-ready'
}

ctr_node() { local i=$1; shift; ctr --address "$ND/n$i/containerd.sock" -n k8s.io "$@"; }

import_images() { # ARCHIVE...
    local i f t0 pids=() p
    N=$(node_count_started)
    [ "$N" -gt 0 ] || die "no real Nodes at $D"
    for f in "$@"; do
        [ -f "$f" ] || die "no image archive $f"
        t0=$(now_ms)
        pids=()
        for ((i = 0; i < N; i++)); do
            nice -n 10 ctr --address "$ND/n$i/containerd.sock" -n k8s.io images import --no-unpack=false "$f" \
                >>"$D/log/node-$i-import.log" 2>&1 &
            pids+=($!)
        done
        for p in "${pids[@]}"; do wait "$p" || die "importing $f failed (log/node-*-import.log)"; done
        say "imported $(basename "$f") into $N node(s) in $(( $(now_ms) - t0 )) ms"
    done
}

# tag_image SRC DST: DST names SRC's image in every Node's containerd (a
# "new" image for a rolling update that needs no registry and no build).
tag_image() {
    local i
    N=$(node_count_started)
    [ "$N" -gt 0 ] || die "no real Nodes at $D"
    for ((i = 0; i < N; i++)); do
        ctr_node "$i" images tag --force "$1" "$2" >/dev/null || die "node $i: ctr images tag $1 $2 failed"
    done
}

do_nodes_start() {
    N=${1:-}
    [[ $N =~ ^[0-9]+$ ]] && [ "$N" -ge 1 ] && [ "$N" -le 50 ] || die "usage: nodes.sh start N (1..50)"
    need
    [ -f "$D/env" ] && [ -f "$D/run/bin" ] || die "no started cluster at $D (cluster.sh start first)"
    alive "$(pid_of kube-apiserver)" || die "the cluster at $D is not running"
    BIN=$(cat "$D/run/bin")
    [ ! -f "$ND/count" ] || die "real Nodes already started at $D (nodes.sh stop first)"
    local rc=0
    NODE_BIN=$(bash "$HERE/build-node.sh") || rc=$?
    [ $rc -eq 0 ] || { say "build-node.sh failed (exit $rc)"; [ $rc -eq 77 ] && exit 77; exit 1; }
    local t0; t0=$(now_ms)

    take_host_lock
    rm -rf "$ND"
    mkdir -p "$ND"
    echo "$NODE_BIN" > "$ND/bin"
    trap 'rc=$?; if [ $rc -ne 0 ]; then say "start failed; stopping the real Nodes (logs in $D/log)"; do_nodes_stop >/dev/null 2>&1 || true; fi' EXIT
    echo "$N" > "$ND/count"
    save_host_state
    setup_host

    local i ports
    for ((i = 0; i < N; i++)); do
        mkdir -p "$ND/n$i"
        write_node_pki "$i"
        node_kubeconfig "$ND/n$i/kubelet.kubeconfig" "node-$i"
        write_containerd_config "$i"
        make_cgroups "$i"
        launch "node-$i-containerd" containerd --config "$ND/n$i/containerd.toml" --log-level warn
    done
    for ((i = 0; i < N; i++)); do
        poll 30000 "$(pid_of "node-$i-containerd")" ctr --address "$ND/n$i/containerd.sock" version ||
            die "containerd of node $i did not start (log/node-$i-containerd.log)"
    done
    import_images "$(dirname "$NODE_BIN")/pause.tar"
    for ((i = 0; i < N; i++)); do
        ctr_node "$i" images label registry.k8s.io/pause:3.10 io.cri-containerd.pinned=pinned >/dev/null 2>&1 || true
    done

    ports=($(free_ports 4))
    write_corefile "${ports[0]}" "${ports[1]}"
    echo "${ports[1]}" > "$D/run/coredns.port"
    launch coredns "$NODE_BIN/coredns" -conf "$ND/Corefile"

    cert kube-proxy system:kube-proxy ""
    node_kubeconfig "$ND/kube-proxy.kubeconfig" kube-proxy
    write_kube_proxy_config "${ports[2]}" "${ports[3]}"
    echo "${ports[2]}" > "$D/run/kube-proxy.port"
    launch kube-proxy "$NODE_BIN/kube-proxy" --config "$ND/kube-proxy.yaml" --v=1

    # A kubelet binds its device-plugin socket at a fixed host path
    # (/var/lib/kubelet/device-plugins/kubelet.sock, whatever --root-dir
    # says) after removing any file there; two kubelets doing that at the
    # same instant fail one with "address already in use", and it exits
    # ("Failed to start ContainerManager"). So each kubelet starts once the
    # one before has bound it (it is then replaced, unused: no test runs a
    # device plugin).
    local dp=/var/lib/kubelet/device-plugins/kubelet.sock mark="$ND/kubelet-start.mark"
    for ((i = 0; i < N; i++)); do
        if ((i > 0)); then
            poll 30000 "$(pid_of "node-$((i - 1))-kubelet")" test "$dp" -nt "$mark" ||
                say "kubelet $((i - 1)) has not bound $dp in 30 s; starting kubelet $i all the same"
        fi
        touch "$mark"
        sleep 0.01 # a socket created within the mark's second still compares newer
        ports=($(free_ports 2))
        write_kubelet_config "$i" "${ports[0]}" "${ports[1]}"
        echo "${ports[1]}" > "$D/run/node-$i-kubelet.port"
        launch "node-$i-kubelet" "$NODE_BIN/kubelet" \
            --config "$ND/n$i/kubelet.yaml" --kubeconfig "$ND/n$i/kubelet.kubeconfig" \
            --root-dir "$ND/n$i/kubelet" --cert-dir "$ND/n$i/kubelet/pki" \
            --hostname-override "$(node_name "$i")" --node-ip "$(node_ip "$i")" \
            --node-labels "slurmop.test/real=true,type=real,topology.kubernetes.io/zone=real-zone-$((i % 2))" \
            --v=1
    done
    # Seconds when the machine is idle; one CI run saw more than 60 with the
    # suite's first tests starting beside it: the kubelets' last lines are
    # printed, since the folder may be gone when the failure is read.
    if ! poll 120000 "$(pid_of node-0-kubelet)" all_ready; then
        for ((i = 0; i < N; i++)); do
            say "node-$i-kubelet.log, last lines:"
            tail -n 15 "$D/log/node-$i-kubelet.log" >&2 || true
        done
        die "the real Nodes did not become Ready (log/node-*-kubelet.log)"
    fi
    poll 30000 "$(pid_of coredns)" curl -fsS -m 2 "http://127.0.0.1:$(cat "$D/run/coredns.port")/ready" ||
        die "CoreDNS is not ready (log/coredns.log)"
    poll 30000 "$(pid_of kube-proxy)" curl -fsS -m 2 "http://127.0.0.1:$(cat "$D/run/kube-proxy.port")/healthz" ||
        die "kube-proxy is not healthy (log/kube-proxy.log)"
    # After kube-proxy: it prepends its own FORWARD jumps, ours stays first.
    iptables -D FORWARD -j SLURMOP-PODS
    iptables -I FORWARD 1 -j SLURMOP-PODS
    trap - EXIT
    print_env
    say "$N real Node(s) Ready in $(( $(now_ms) - t0 )) ms"
}

# ---- stop -------------------------------------------------------------------------

do_nodes_stop() {
    [ -f "$ND/count" ] || return 0
    N=$(node_count_started)
    NODE_BIN=$(cat "$ND/bin" 2>/dev/null || true)
    local i p pids=() rc=0 t0; t0=$(now_ms)
    for ((i = 0; i < N; i++)); do p=$(pid_of "node-$i-kubelet"); alive "$p" && pids+=("$p"); done
    for n in kube-proxy coredns; do p=$(pid_of "$n"); alive "$p" && pids+=("$p"); done
    terminate 10000 "${pids[@]+"${pids[@]}"}"
    # Every container process (runc's children live in the Nodes' cgroups).
    for ((i = 0; i < N; i++)); do kill_node_procs "$i"; done
    pids=()
    for ((i = 0; i < N; i++)); do p=$(pid_of "node-$i-containerd"); alive "$p" && pids+=("$p"); done
    terminate 10000 "${pids[@]+"${pids[@]}"}"
    # The shims carry the cluster tag (containerd's environment); once their
    # containers are gone they wait for containerd, which has gone.
    local rest; rest=($(tagged_pids))
    local keep=()
    for p in "${rest[@]+"${rest[@]}"}"; do
        # Only the Nodes' processes: the control plane is cluster.sh's.
        # (by program name: the API server's arguments name the kubelet).
        case $(basename "$(tr '\0' '\n' < "/proc/$p/cmdline" 2>/dev/null | head -1)") in
            containerd*|kubelet|kube-proxy|coredns) keep+=("$p") ;;
        esac
    done
    terminate 3000 "${keep[@]+"${keep[@]}"}"
    # Mounts under the Nodes' folders (overlay root file systems, shm, secret
    # and projected volumes), deepest first.
    local m
    for m in $(findmnt -rn -o TARGET | grep -F "$ND/" | sort -r); do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || { say "cannot unmount $m"; rc=1; }
    done
    # Network namespaces the CRI made (in /run/netns, host-wide).
    if [ -f "$ND/netns.before" ] && [ -d /run/netns ]; then
        for m in $(ls /run/netns); do
            grep -qx "$m" "$ND/netns.before" && continue
            umount "/run/netns/$m" 2>/dev/null || umount -l "/run/netns/$m" 2>/dev/null || true
            rm -f "/run/netns/$m"
        done
        [ -s "$ND/netns.before" ] || rmdir /run/netns 2>/dev/null || true
    fi
    for ((i = 0; i < N; i++)); do remove_cgroups "$i"; done
    # What containerd's shims and libcni keep outside the folders given.
    # (only when no other containerd runs now: it may use them).
    if [ "$(cat "$ND/run-containerd.before" 2>/dev/null)" = no ]; then
        if pgrep -x containerd >/dev/null; then
            say "leaving /run/containerd: another containerd runs"
        else
            rm -rf /run/containerd
        fi
    fi
    if [ "$(cat "$ND/var-lib-cni.before" 2>/dev/null)" = no ]; then
        rm -rf /var/lib/cni
    else
        rm -f /var/lib/cni/results/"$(cg_base)"-n* 2>/dev/null || true
    fi
    restore_host || rc=1
    rm -f "$ND/count" "$D"/run/node-*.pid "$D/run/kube-proxy.pid" "$D/run/coredns.pid"
    release_host_lock
    [ $rc -eq 0 ] || say "stopped, with leftovers (see above)"
    say "$N real Node(s) stopped in $(( $(now_ms) - t0 )) ms"
    return $rc
}

do_nodes_status() {
    N=$(node_count_started)
    [ "$N" -gt 0 ] || { say "no real Nodes at $D"; return 3; }
    local i n p rc=0
    for n in coredns kube-proxy $(for ((i = 0; i < N; i++)); do echo "node-$i-containerd node-$i-kubelet"; done); do
        p=$(pid_of "$n")
        if alive "$p"; then printf '%-24s running pid %s\n' "$n" "$p"; else printf '%-24s stopped\n' "$n"; rc=3; fi
    done
    return $rc
}

cmd=${1:-}
[ $# -eq 0 ] || shift
case $cmd in
    start) do_nodes_start "$@" ;;
    stop) do_nodes_stop ;;
    status) do_nodes_status ;;
    import) [ $# -ge 1 ] || die "usage: nodes.sh import ARCHIVE..."; import_images "$@" ;;
    tag) [ $# -eq 2 ] || die "usage: nodes.sh tag SRC DST"; tag_image "$1" "$2" ;;
    images) ctr_node 0 images ls -q ;;
    -h|--help|help) sed -n '2,/^set -e/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' ;;
    *) sed -n '2,/^set -e/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
