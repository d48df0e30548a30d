"""The topology webhook (slurmop --topology-webhook) under a flood of
callers, and its client authentication, on kubesim.

- test_flood_does_not_slow_a_scale_out: 40 callers send AdmissionReviews of
  pods/binding for pods nobody has (each one a pod read the webhook would
  make) as fast as they can, while a NodeSet scales 0 -> 100. The reads go
  through the webhook's own client (20/s, its own connections, at most 16
  in flight per caller address, the rest answered at once "throttled"),
  never the reconcilers': the scale-out takes about as long as without the
  flood (it took 21.6 s instead of 0.12 s when the webhook spent the shared
  budget).
- test_client_certificate: with --webhook-client-ca (kubesim's CA) a caller
  without a client certificate is refused at the TLS handshake, one with a
  certificate of that CA is answered; --webhook-client-names answers only
  the listed subject CNs (403 for another).

kubesim only: it needs the API server's CA and client certificate, and
posts to the webhook directly (no API server calls it on kubesim).
Run directly (python3 test_webhook_bounds.py [name-substring]) or through ctest.
"""
import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from kubesim import Kubesim, run_tests  # noqa: E402
from slurmop import Slurmop, apply_crds, make_cluster, pods_of, set_replicas, wait_for  # noqa: E402

IMAGES = {"slurmd": {"image": "ghcr.io/slinkyproject/slurmd:test"}, "logfile": {"image": "alpine:test"}}
PATH = "/mutate-pods-binding"


def webhook_port(op):
    m = re.search(r"serving the topology webhook \S+ on [0-9.]+:(\d+)", op.stderr())
    return int(m.group(1)) if m else None


def review(pod):
    return json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": str(uuid.uuid4()), "operation": "CREATE", "name": pod, "namespace": "default",
                    "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "binding",
                    "object": {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
                               "target": {"kind": "Node", "name": "kn-0"}}}})


def context(cert=None, key=None):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the webhook's self-signed certificate
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def post(port, body, ctx, timeout=10):
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=timeout)
    try:
        c.request("POST", PATH, body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


class Flood:
    def __init__(self, port, callers=40):
        self.port = port
        self.stop = threading.Event()
        self.sent = 0
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(callers)]

    def run(self):
        ctx = context()
        conn = None
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=10)
                conn.request("POST", PATH, body=review("nobody-" + uuid.uuid4().hex[:12]),
                             headers={"Content-Type": "application/json"})
                conn.getresponse().read()
                self.sent += 1
            except (OSError, http.client.HTTPException):
                conn = None
                time.sleep(0.01)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(15)


class FloodProcess:
    """The flood in a process of its own, so that its threads do not slow
    the test's own reads (one interpreter lock)."""

    def __init__(self, port):
        self.port = port

    def __enter__(self):
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--flood", str(self.port)],
                                  stdout=subprocess.PIPE, text=True)
        return self

    def sent(self):
        return int(self.p.stdout.readline())

    def __exit__(self, *exc):
        self.p.send_signal(signal.SIGTERM)
        self.p.wait(20)


def flood_main(port):
    f = Flood(port)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: done.set())
    signal.signal(signal.SIGUSR1, lambda *a: print(f.sent, flush=True))
    with f:
        done.wait()


def scale_out(c, name, n):
    t0 = time.monotonic()
    set_replicas(c, name, n)
    wait_for(lambda: len(pods_of(c, name)) == n, 120, interval=0.02, what="%d pods" % n)
    return time.monotonic() - t0


def measure(flood):
    """A fresh kubesim and operator; a NodeSet scaled 0 -> 100 (during a
    flood when asked). Seconds until the 100 pods exist, and the webhook's
    counts."""
    with Kubesim(nodes=4) as ks:
        c = ks.client()
        apply_crds(c)
        make_cluster(c, nodesets={"cpu": dict(replicas=0, **IMAGES)})
        op = Slurmop(ks.kubeconfig, topology_webhook=True, webhook_addr="127.0.0.1:0").start()
        try:
            op.wait_ready()
            port = wait_for(lambda: webhook_port(op), 10, what="the webhook's port")
            time.sleep(1)
            if not flood:
                return scale_out(c, "cpu", 100), 0, 0, 0
            with FloodProcess(port) as f:
                # at full rate: every caller answered at least once (its
                # interpreter and 40 TLS contexts take seconds to start)
                wait_for(lambda: op.metric("slurmop_topology_webhook_requests_total") >= 40, 60,
                         what="the flood under way")
                time.sleep(1)
                f.p.send_signal(signal.SIGUSR1)
                before = f.sent()
                took = scale_out(c, "cpu", 100)
                f.p.send_signal(signal.SIGUSR1)
                during = f.sent() - before
            thr = op.metric("slurmop_topology_webhook_requests_total", result="throttled")
            reads = op.metric("slurmop_topology_webhook_requests_total", result="not_nodeset")
            return took, during, thr, reads
        finally:
            op.stop()


def test_flood_does_not_slow_a_scale_out():
    # The best of two runs each: on a loaded machine one 100-pod scale-out
    # on kubesim takes anywhere from 0.2 to 5 s, flood or not. The bound is
    # loose for that reason; what tells the fix apart deterministically is
    # that reviews past the read bounds are throttled (there were none).
    quiet = min(measure(False)[0] for _ in range(2))
    runs = [measure(True) for _ in range(2)]
    flooded, during, thr, reads = min(runs)
    print("100-pod scale-out: %.2f s quiet, %.2f s under a flood (%d reviews meanwhile; %d throttled, %d read "
          "in all)" % (quiet, flooded, during, thr, reads))
    assert all(r[2] > 0 for r in runs), "no review was throttled"
    assert flooded < quiet + 8, "the flood slowed the scale-out: %.2f s vs %.2f s" % (flooded, quiet)


def test_client_certificate():
    with Kubesim(nodes=1) as ks:
        c = ks.client()
        apply_crds(c)
        ca = os.path.join(ks.dir, "ca.crt")
        cert, key = os.path.join(ks.dir, "client.crt"), os.path.join(ks.dir, "client.key")
        op = Slurmop(ks.kubeconfig, topology_webhook=True, webhook_addr="127.0.0.1:0", webhook_client_ca=ca).start()
        try:
            op.wait_ready()
            port = wait_for(lambda: webhook_port(op), 10, what="the webhook's port")
            assert "callers need a client certificate" in op.stderr()
            try:
                post(port, review("p"), context())
                raise AssertionError("a caller without a client certificate was answered")
            except (ssl.SSLError, ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
                pass
            status, body = post(port, review("p"), context(cert, key))
            assert status == 200 and json.loads(body)["response"]["allowed"] is True, (status, body)
        finally:
            op.stop()
        cn = ssl._ssl._test_decode_cert(cert)["subject"][0][0][1]
        for names, want in (("somebody-else", 403), ("somebody-else," + cn, 200)):
            op = Slurmop(ks.kubeconfig, topology_webhook=True, webhook_addr="127.0.0.1:0", webhook_client_ca=ca,
                         webhook_client_names=names).start()
            try:
                op.wait_ready()
                port = wait_for(lambda: webhook_port(op), 10, what="the webhook's port")
                status, _ = post(port, review("p"), context(cert, key))
                assert status == want, "names %s, CN %s: %d" % (names, cn, status)
            finally:
                op.stop()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--flood":
        flood_main(int(sys.argv[2]))
    else:
        run_tests(globals())
