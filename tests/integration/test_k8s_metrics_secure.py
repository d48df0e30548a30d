#!/usr/bin/env python3
"""--metrics-secure on a real Kubernetes API server (tests/k8s/cluster.sh,
through tests/lib/backend.py; k8s only, exit 77 when its binaries are not
built; kubesim has no TokenReview or SubjectAccessReview, see
kubesim/README.md):

- /metrics is served over HTTPS only (a self-signed certificate made at
  start, or the one of --metrics-cert-file / --metrics-key-file);
- a token of a ServiceAccount bound to the ClusterRole slurmop-metrics-reader
  (deploy/manifests/operator/25-metrics-auth.yaml) gets 200 and the
  metrics; a ServiceAccount without it gets 403; no token and a garbage
  token get 401; the operator itself runs with its own ServiceAccount token,
  which the metrics-auth role lets create both reviews (no 403 of its own);
- /healthz and /readyz stay plain HTTP on the health port, which no longer
  serves /metrics.
"""
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
os.environ["SLURMOP_TEST_BACKEND"] = "k8s"  # a real control plane only

from backend import api_server  # noqa: E402
from kubesim import run_tests  # noqa: E402
from slurmop import Slurmop, apply_crds, wait_for  # noqa: E402

_ks = None
_tokens = {}


def ks():
    """One cluster for the file: the CRDs, a reader and a stranger ServiceAccount."""
    global _ks
    if _ks is None:
        _ks = api_server(nodes=0).start()
        apply_crds(_ks.client())
        for sa in ("scraper", "stranger"):
            _ks.kubectl("create", "serviceaccount", sa, "-n", "default", ok=False)
        _ks.kubectl("create", "clusterrolebinding", "scraper-metrics-reader",
                    "--clusterrole=slurmop-metrics-reader", "--serviceaccount=default:scraper", ok=False)
        for sa in ("scraper", "stranger"):
            _tokens[sa] = _ks.kubectl("create", "token", sa, "-n", "default", "--duration=1h").stdout.strip()
    return _ks


class SecureSlurmop(Slurmop):
    """Slurmop whose metrics listener is the HTTPS one (its own log line)."""

    def start(self, timeout=30):
        self._cluster = self._k8s()
        if self._cluster is not None:
            self._audit_start = self._audit_size()
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        self._err = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=self._err, env=env)

        def ports():
            if self.proc.poll() is not None:
                raise AssertionError("slurmop exited at start (%s):\n%s" % (self.proc.returncode, self.stderr()))
            m = re.search(r"serving /metrics over HTTPS .* on ([0-9.]+:\d+)", self.stderr())
            h = re.search(r"serving /healthz /readyz on ([0-9.]+:\d+)", self.stderr())
            return (m.group(1), h.group(1)) if m and h else None
        m, h = wait_for(ports, timeout, what="slurmop listeners")
        self.metrics_url = "https://" + m
        self.health_url = "http://" + h
        return self


def scrape(url, token=None, ctx=None):
    if ctx is None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # the self-signed certificate
    req = urllib.request.Request(url)
    if token is not None:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def check_verdicts(op, ctx=None):
    url = op.metrics_url + "/metrics"
    st, body = scrape(url, _tokens["scraper"], ctx)
    assert st == 200, (st, body)
    assert "slurmop_" in body, body[:500]
    st, body = scrape(url, _tokens["stranger"], ctx)
    assert st == 403, (st, body)
    assert "system:serviceaccount:default:stranger" in body, body
    st, body = scrape(url, None, ctx)
    assert st == 401, (st, body)
    st, body = scrape(url, "not-a-token", ctx)
    assert st == 401, (st, body)
    # Again: answered from the cache, the same verdicts.
    assert scrape(url, _tokens["scraper"], ctx)[0] == 200
    assert scrape(url, _tokens["stranger"], ctx)[0] == 403
    assert scrape(url, "not-a-token", ctx)[0] == 401
    # Not plain HTTP on the metrics port.
    try:
        st, _ = op.get(url.replace("https://", "http://"), timeout=3)
        assert st != 200, "plain HTTP /metrics answered 200"
    except (OSError, urllib.error.URLError):
        pass
    # The health port: probes plain, no /metrics.
    op.wait_ready(60)
    assert op.get(op.health_url + "/healthz")[0] == 200
    assert op.get(op.health_url + "/metrics")[0] == 404


def test_self_signed():
    k = ks()
    with SecureSlurmop(k.kubeconfig, "--metrics-secure") as op:
        check_verdicts(op)
        assert "self-signed certificate" in op.stderr()
        for tok in _tokens.values():
            assert tok not in op.stderr(), "a scrape's token appeared in the log"


def test_cert_files():
    k = ks()
    openssl = shutil.which("openssl")
    if openssl is None:
        print("no openssl: certificate files not tested", flush=True)
        return
    with tempfile.TemporaryDirectory() as d:
        crt, key = os.path.join(d, "tls.crt"), os.path.join(d, "tls.key")
        subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-subj", "/CN=slurmop-metrics", "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1",
                        "-keyout", key, "-out", crt], check=True, capture_output=True)
        ctx = ssl.create_default_context(cafile=crt)  # verified: chain and IP SAN
        with SecureSlurmop(k.kubeconfig, "--metrics-secure", metrics_cert_file=crt, metrics_key_file=key) as op:
            check_verdicts(op, ctx)
            assert "self-signed certificate" not in op.stderr()


def test_half_a_certificate_is_refused():
    k = ks()
    p = subprocess.run(SecureSlurmop(k.kubeconfig, "--metrics-secure", metrics_cert_file="/nonexistent").command(),
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0
    assert "--metrics-cert-file and --metrics-key-file go together" in p.stderr, p.stderr[-2000:]


if __name__ == "__main__":
    run_tests(globals())
