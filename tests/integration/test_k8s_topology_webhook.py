#!/usr/bin/env python3
"""The topology webhook (slurmop --topology-webhook) on a real Kubernetes
control plane (tests/k8s/cluster.sh through tests/lib/backend.py; k8s only,
exit 77 when its binaries are not built):

- the webhook is registered as deploy/manifests/operator/50-topology-webhook.yaml
  registers it (same rules, failurePolicy, namespaceSelector), with a URL on
  loopback instead of the Service (no pod network here); the operator,
  running with its ServiceAccount token and deploy/'s RBAC, writes the
  configuration's caBundle (--webhook-config) with the self-signed
  certificate it serves;
- NodeSet pods bound by the real kube-scheduler onto KWOK Nodes that carry
  topology.slinky.slurm.net/spec have that annotation, equal to their
  Node's, in the very first version of the pod that has spec.nodeName (the
  API server applies the Binding's annotations in the same write), so before
  the pod is Running; a pod on a Node without the annotation gets none; a
  plain pod (no NodeSet) in the same namespace is left alone;
- the metric slurmop_topology_webhook_requests_total counts the API
  server's calls;
- the certificate rotates (--webhook-cert-rotate): the caBundle then holds
  the new and the old certificate, the served one changes, and new pods
  still get their topology;
- certificate files (what cert-manager's Secret gives, --webhook-cert-file,
  the caBundle written by the test as cert-manager's CA injector would): a
  NodeSet pod gets its topology; the files replaced by a new certificate
  are served within the resync interval, and new pods still get theirs;
- scope (--webhook-scope nodesets, the default): the operator narrows the
  configuration's namespaceSelector to the namespaces that hold NodeSets
  (the manifest's exclusions kept), and a pod bound in a namespace without
  one never reaches the webhook; the NodeSet's first pods, made right after
  the cluster, are still bound with their topology (the reconciler waits
  for the selector);
- the control: with the operator running without --topology-webhook (the
  configuration still registered, nothing listening), failurePolicy Ignore
  lets bindings through at once and the first bound version of a new pod
  has no topology (the reconciler copies it later).
"""
import base64
import os
import shutil
import socket
import subprocess
import tempfile
import ssl
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
os.environ["SLURMOP_TEST_BACKEND"] = "k8s"  # a real control plane only

from backend import api_server  # noqa: E402
from kubesim import run_tests  # noqa: E402
from slurmop import NS_API, Slurmop, apply_crds, make_cluster, set_replicas, wait_for, yaml_to_json  # noqa: E402

SRC = os.environ.get("OP_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MANIFEST = os.path.join(SRC, "deploy", "manifests", "operator", "50-topology-webhook.yaml")
ANN = "topology.slinky.slurm.net/spec"
MWC_API = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
NODES = 12  # the NodeSet's pods repel each other (one slurmd per Node)
IMAGES = {"slurmd": {"image": "ghcr.io/slinkyproject/slurmd:test"}, "logfile": {"image": "alpine:test"}}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def registration(port):
    """The manifest's MutatingWebhookConfiguration, pointed at loopback."""
    docs = yaml_to_json([MANIFEST])
    mwc = [d for d in docs if d.get("kind") == "MutatingWebhookConfiguration"]
    assert len(mwc) == 1, docs
    mwc = mwc[0]
    for wh in mwc["webhooks"]:
        assert wh["failurePolicy"] == "Ignore" and wh["rules"][0]["resources"] == ["pods/binding"], wh
        wh["clientConfig"] = {"url": "https://127.0.0.1:%d%s" % (port, wh["clientConfig"]["service"]["path"])}
    return mwc


def scope_exprs(c, name):
    """The matchExpressions of the configuration's webhooks (all equal)."""
    r = c.get(MWC_API + "/" + name)
    assert r.status == 200, r.text
    sels = [wh.get("namespaceSelector") or {} for wh in r.json()["webhooks"]]
    assert all(s == sels[0] for s in sels), sels
    return sels[0].get("matchExpressions") or []


def served_cert(port):
    pem = ssl.get_server_certificate(("127.0.0.1", port))
    return ssl.PEM_cert_to_DER_cert(pem)


def bundle_certs(c, name):
    """DER certificates of the configuration's caBundle (every webhook's must be equal)."""
    r = c.get(MWC_API + "/" + name)
    assert r.status == 200, r.text
    bundles = {wh["clientConfig"].get("caBundle", "") for wh in r.json()["webhooks"]}
    assert len(bundles) == 1, bundles
    b = bundles.pop()
    if not b:
        return []
    text = base64.b64decode(b).decode()
    out = []
    for part in text.split("-----END CERTIFICATE-----"):
        if "-----BEGIN CERTIFICATE-----" in part:
            out.append(ssl.PEM_cert_to_DER_cert(part.strip() + "\n-----END CERTIFICATE-----\n"))
    return out


class PodLog:
    """Every version of the default namespace's pods seen by a watch, kept
    in order per pod name."""

    def __init__(self, c, rv):
        self.w = c.watch("/api/v1/namespaces/default/pods", resourceVersion=rv)
        self.versions = {}

    def pump(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                ev = self.w.next_event(max(0.05, end - time.monotonic()))
            except TimeoutError:
                return
            if ev is None:
                raise AssertionError("pod watch ended")
            if ev.get("type") in ("ADDED", "MODIFIED"):
                o = ev["object"]
                self.versions.setdefault(o["metadata"]["name"], []).append(o)

    def first_bound(self, name):
        for o in self.versions.get(name, []):
            if o["spec"].get("nodeName"):
                return o
        return None

    def close(self):
        self.w.close()


def pod_rv(c):
    r = c.get("/api/v1/namespaces/default/pods")
    assert r.status == 200, r.text
    return r.json()["metadata"]["resourceVersion"]


def nodeset_pods(c, nodeset):
    r = c.get("/api/v1/namespaces/default/pods", labelSelector="app.kubernetes.io/instance=" + nodeset)
    return [p for p in r.json().get("items") or [] if not p["metadata"].get("deletionTimestamp")]


def wait_bound(log, names, timeout=60):
    def ok():
        log.pump(0.5)
        return all(log.first_bound(n) for n in names)
    wait_for(ok, timeout, interval=0, what="pods %s bound" % sorted(names))


def check_topology(log, names, topo):
    for n in names:
        first = log.first_bound(n)
        node = first["spec"]["nodeName"]
        want = topo.get(node)
        got = (first["metadata"].get("annotations") or {}).get(ANN)
        assert got == want, "pod %s on %s: first bound version has %s=%r, want %r" % (n, node, ANN, got, want)
        assert first["status"].get("phase") != "Running", first["status"]


def test_topology_at_binding():
    with api_server(nodes=NODES) as k:
        c = k.client()
        apply_crds(c)
        nodes = sorted(k.node_names())[:NODES]
        # Ten Nodes with a topology, two without.
        topo = {n: "topo-switch:s%d,topo-block:b%d" % (i, i // 2) for i, n in enumerate(nodes[:10])}
        for n in nodes:
            r = c.patch("/api/v1/nodes/" + n, {"metadata": {"annotations": {ANN: topo.get(n)}}})
            assert r.status == 200, r.text
        port = free_port()
        mwc = registration(port)
        name = mwc["metadata"]["name"]
        c.delete(MWC_API + "/" + name)
        r = c.post(MWC_API, mwc)
        assert r.status == 201, r.text
        try:
            run_webhook(k, c, port, name, nodes, topo)
        finally:
            c.delete(MWC_API + "/" + name)
            for n in nodes:
                c.patch("/api/v1/nodes/" + n, {"metadata": {"annotations": {ANN: None}}})


def run_webhook(k, c, port, name, nodes, topo):
    flags = {"webhook_addr": "127.0.0.1:%d" % port, "webhook_config": name, "webhook_resync": "0.5",
             "webhook_cert_rotate": "30"}
    with Slurmop(k.kubeconfig, "--topology-webhook", **flags) as op:
        wait_for(lambda: "serving the topology webhook" in op.stderr(), 20, what="webhook listening")
        op.wait_ready(60)
        first_cert = served_cert(port)
        wait_for(lambda: bundle_certs(c, name) == [first_cert], 20, what="caBundle = the served certificate")
        t_start = time.monotonic()

        log = PodLog(c, pod_rv(c))
        try:
            # One pod on every Node: ten with a topology, two without.
            make_cluster(c, nodesets={"gpu": dict(replicas=NODES, **IMAGES)}, no_drain=True)
            wait_for(lambda: len(nodeset_pods(c, "gpu")) == NODES, 60, what="%d pods" % NODES)
            names = [p["metadata"]["name"] for p in nodeset_pods(c, "gpu")]
            wait_bound(log, names)
            check_topology(log, names, topo)
            on_plain = [n for n in names if log.first_bound(n)["spec"]["nodeName"] not in topo]
            assert len(on_plain) == NODES - len(topo), on_plain
            print("ok: %d pods bound with their Node's topology, %d on Nodes without one (none)"
                  % (len(names) - len(on_plain), len(on_plain)), flush=True)

            # A plain pod in the same namespace: the webhook is called and leaves it alone.
            r = c.post("/api/v1/namespaces/default/pods",
                       {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"},
                        "spec": {"containers": [{"name": "c", "image": "busybox:test"}],
                                 "nodeSelector": {"kubernetes.io/hostname": nodes[0]}}})
            assert r.status == 201, r.text
            wait_bound(log, ["plain"])
            plain = log.first_bound("plain")
            assert ANN not in (plain["metadata"].get("annotations") or {}), plain["metadata"]
            patched = op.metric("slurmop_topology_webhook_requests_total", result="patched")
            other = op.metric("slurmop_topology_webhook_requests_total", result="not_nodeset")
            assert patched >= len(topo), (patched, len(topo))
            assert other >= 1, other
            print("ok: webhook called by the API server: %d patched, %d not a NodeSet's" % (patched, other),
                  flush=True)

            # Scope: the registration now admits the NodeSets' namespace only
            # (the manifest's exclusions kept), so a pod bound in a namespace
            # without NodeSets is never sent to the webhook.
            exprs = scope_exprs(c, name)
            assert exprs[0] == {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["default"]}, exprs
            assert any(e["operator"] == "NotIn" and "kube-system" in e["values"] for e in exprs[1:]), exprs
            c.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "no-slurm"}})
            calls = sum(op.metric("slurmop_topology_webhook_requests_total", result=r)
                        for r in ("patched", "no_topology", "node_unknown", "not_nodeset", "not_binding"))
            r = c.post("/api/v1/namespaces/no-slurm/pods",
                       {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "elsewhere"},
                        "spec": {"containers": [{"name": "c", "image": "busybox:test"}],
                                 "nodeSelector": {"kubernetes.io/hostname": nodes[0]}}})
            assert r.status == 201, r.text
            wait_for(lambda: (c.get("/api/v1/namespaces/no-slurm/pods/elsewhere").json().get("spec") or {})
                     .get("nodeName"), 60, what="pod no-slurm/elsewhere bound")
            after = sum(op.metric("slurmop_topology_webhook_requests_total", result=r)
                        for r in ("patched", "no_topology", "node_unknown", "not_nodeset", "not_binding"))
            assert after == calls, "a binding in a namespace without NodeSets reached the webhook (%d -> %d)" % (
                calls, after)
            print("ok: namespaceSelector %s; a binding in namespace no-slurm was not sent" % exprs, flush=True)
        finally:
            log.close()

        # Rotation: a new certificate after 30 s, trusted by the caBundle before it is served.
        left = 30 - (time.monotonic() - t_start)
        wait_for(lambda: served_cert(port) != first_cert, max(5, left) + 20, interval=0.5,
                 what="a rotated certificate")
        second = served_cert(port)
        certs = bundle_certs(c, name)
        assert certs[:2] == [second, first_cert], "caBundle after rotation: %d certs" % len(certs)
        new = rebind(c, 4, topo)
        print("ok: rotated certificate served and trusted; %d new pods got their topology" % len(new), flush=True)
        op.check_no_forbidden()

    # Control: the same registration, nobody listening. Bindings are not held up.
    with Slurmop(k.kubeconfig) as op:
        op.wait_ready(60)
        t0 = time.monotonic()
        new = rebind(c, 4, topo, webhook=False)
        took = time.monotonic() - t0
        assert took < 40, "bindings held up %.1f s with the webhook down" % took
        print("ok: without the webhook %d new pods were bound in %.1f s, none with topology at binding"
              % (len(new), took), flush=True)


def rebind(c, n, topo, webhook=True):
    """Scale the NodeSet down by n and up again: n new pods on the freed
    Nodes; check what their first bound version carries."""
    set_replicas(c, "gpu", NODES - n)
    wait_for(lambda: len(c.get("/api/v1/namespaces/default/pods",
                                labelSelector="app.kubernetes.io/instance=gpu").json()["items"]) == NODES - n,
             60, what="scaled in to %d" % (NODES - n))
    before = {p["metadata"]["name"] for p in nodeset_pods(c, "gpu")}
    log = PodLog(c, pod_rv(c))
    try:
        set_replicas(c, "gpu", NODES)
        wait_for(lambda: len(nodeset_pods(c, "gpu")) == NODES, 60, what="%d pods" % NODES)
        log.pump(1)
        new = [p["metadata"]["name"] for p in nodeset_pods(c, "gpu") if p["metadata"]["name"] not in before]
        assert len(new) == n, (new, before)
        wait_bound(log, new)
        if webhook:
            check_topology(log, new, topo)
        else:
            with_topo = [x for x in new if ANN in (log.first_bound(x)["metadata"].get("annotations") or {})]
            assert not with_topo, "without the webhook, first bound versions had topology: %r" % with_topo
        return new
    finally:
        log.close()


def make_cert(d, name):
    crt, key = os.path.join(d, name + ".crt"), os.path.join(d, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-subj", "/CN=slurmop-webhook", "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1",
                    "-keyout", key, "-out", crt], check=True, capture_output=True)
    with open(crt, "rb") as f:
        return crt, key, f.read()


def test_certificate_files():
    if shutil.which("openssl") is None:
        print("no openssl: certificate files not tested", flush=True)
        return
    n_nodes = 4
    with api_server(nodes=n_nodes) as k, tempfile.TemporaryDirectory() as d:
        c = k.client()
        apply_crds(c)
        nodes = sorted(k.node_names())[:n_nodes]
        topo = {n: "topo-switch:f%d" % i for i, n in enumerate(nodes)}
        for n in nodes:
            assert c.patch("/api/v1/nodes/" + n, {"metadata": {"annotations": {ANN: topo[n]}}}).status == 200
        crt1, key1, pem1 = make_cert(d, "one")
        crt2, key2, pem2 = make_cert(d, "two")
        live_crt, live_key = os.path.join(d, "tls.crt"), os.path.join(d, "tls.key")
        shutil.copy(crt1, live_crt)
        shutil.copy(key1, live_key)
        port = free_port()
        mwc = registration(port)
        name = mwc["metadata"]["name"]
        for wh in mwc["webhooks"]:
            wh["clientConfig"]["caBundle"] = base64.b64encode(pem1 + pem2).decode()
        c.delete(MWC_API + "/" + name)
        assert c.post(MWC_API, mwc).status == 201
        try:
            flags = {"webhook_addr": "127.0.0.1:%d" % port, "webhook_cert_file": live_crt,
                     "webhook_key_file": live_key, "webhook_resync": "0.5"}
            with Slurmop(k.kubeconfig, "--topology-webhook", **flags) as op:
                wait_for(lambda: "serving the topology webhook" in op.stderr(), 20, what="webhook listening")
                op.wait_ready(60)
                der1 = ssl.PEM_cert_to_DER_cert(pem1.decode())
                der2 = ssl.PEM_cert_to_DER_cert(pem2.decode())
                assert served_cert(port) == der1
                log = PodLog(c, pod_rv(c))
                try:
                    make_cluster(c, nodesets={"gpu": dict(replicas=2, **IMAGES)}, no_drain=True)
                    wait_for(lambda: len(nodeset_pods(c, "gpu")) == 2, 60, what="2 pods")
                    names = [p["metadata"]["name"] for p in nodeset_pods(c, "gpu")]
                    wait_bound(log, names)
                    check_topology(log, names, topo)
                finally:
                    log.close()
                # Renewed in place (cert-manager rewrites the Secret's files).
                shutil.copy(key2, live_key + ".new")
                shutil.copy(crt2, live_crt + ".new")
                os.replace(live_key + ".new", live_key)
                os.replace(live_crt + ".new", live_crt)
                wait_for(lambda: served_cert(port) == der2, 15, interval=0.3, what="the renewed certificate served")
                log = PodLog(c, pod_rv(c))
                try:
                    set_replicas(c, "gpu", 4)
                    wait_for(lambda: len(nodeset_pods(c, "gpu")) == 4, 60, what="4 pods")
                    new = [p["metadata"]["name"] for p in nodeset_pods(c, "gpu") if p["metadata"]["name"] not in names]
                    wait_bound(log, new)
                    check_topology(log, new, topo)
                finally:
                    log.close()
                assert op.metric("slurmop_topology_webhook_certificate_changes_total") >= 1
                op.check_no_forbidden()
                print("ok: certificate files served, renewed in place and served again; %d + %d pods got their "
                      "topology" % (len(names), len(new)), flush=True)
        finally:
            c.delete(MWC_API + "/" + name)
            for n in nodes:
                c.patch("/api/v1/nodes/" + n, {"metadata": {"annotations": {ANN: None}}})


if __name__ == "__main__":
    run_tests(globals())
