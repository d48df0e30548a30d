"""Helpers for integration tests of the operator: run `slurmop` against a
kubesim (or any kubeconfig), install the CRDs, build the custom resources of
a small Slurm cluster, wait for conditions, read /metrics, and stop the
process checking that it exited cleanly (status 0, no sanitizer report).

Python standard library only. Typical use:

    from kubesim import Kubesim
    from slurmop import Slurmop, apply_crds, wait_for
    with Kubesim(nodes=8) as ks:
        c = ks.client()
        apply_crds(c)
        with Slurmop(ks.kubeconfig) as op:
            ...
"""

import glob
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.request

__all__ = ["Slurmop", "apply_crds", "wait_for", "yaml_to_json", "slurmop_binary", "tool_binary", "parse_metrics",
           "make_cluster", "NS_API", "NO_DRAIN", "pods_of", "set_replicas"]

SRC = os.environ.get("OP_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("OP_BUILD_DIR") or os.path.join(SRC, "build")
NS_API = "/apis/slinky.slurm.net/v1beta1"
# The NodeSet annotation that lets the operator delete its pods without a
# Slurm drain. Without a RestApi (every kubesim-only test) the operator
# otherwise keeps condemned pods (scale-in, rolling update, NodeSet
# deletion): a test that wants them gone and runs no Slurm sets it, through
# make_cluster(no_drain=True).
NO_DRAIN = "nodeset.slinky.slurm.net/delete-without-drain"


def slurmop_binary():
    return os.environ.get("SLURMOP_BIN") or os.path.join(BUILD, "slurmop")


def tool_binary(name):
    return os.path.join(BUILD, "tools", name)


def yaml_to_json(paths):
    """Every document of the YAML files, through the project's own loader."""
    out = subprocess.run([tool_binary("yaml2json")] + list(paths), check=True, capture_output=True)
    by_file = json.loads(out.stdout)
    docs = []
    for p in paths:
        docs.extend(by_file.get(p) or [])
    return docs


def wait_for(pred, timeout=30, interval=0.05, what="condition"):
    """Poll pred() until it returns a true value; return it. Fails with the
    last value after timeout seconds. A pred() that raises OSError (a
    connection refused or timed out: a process not listening yet, or slow to
    answer on a loaded machine) is asked again; the error is the last value."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = pred()
        except OSError as e:
            last = e
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError("timed out after %ss waiting for %s (last: %r)" % (timeout, what, last))


def apply_crds(client, timeout=10):
    """Create the six slinky.slurm.net CRDs from crds/ and wait until served."""
    docs = yaml_to_json(sorted(glob.glob(os.path.join(SRC, "crds", "*.yaml"))))
    for d in docs:
        r = client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", d)
        assert r.status in (201, 409), r.text
    for d in docs:
        plural = d["spec"]["names"]["plural"]
        wait_for(lambda: client.get(NS_API + "/namespaces/default/" + plural).status == 200, timeout,
                 what="CRD %s served" % plural)


def parse_metrics(text):
    """Prometheus text into {(name, frozenset(labels.items())): value}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$', line)
        if not m:
            continue
        labels = {}
        if m.group(3):
            for lm in re.finditer(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3)):
                labels[lm.group(1)] = lm.group(2)
        out[(m.group(1), frozenset(labels.items()))] = float(m.group(4))
    return out


class Slurmop:
    """A slurmop process. Extra keyword flags become --flag value."""

    def __init__(self, kubeconfig, *args, env=None, log_level="debug", **flags):
        self.kubeconfig = kubeconfig
        self.args = list(args)
        self.flags = flags
        self.env = env
        self.log_level = log_level
        self.proc = None
        self.tmp = tempfile.TemporaryDirectory(prefix="slurmop-")
        self.stderr_path = os.path.join(self.tmp.name, "stderr.log")
        self.metrics_url = None
        self.health_url = None
        self._cluster = None
        self._audit_start = 0

    def command(self):
        cmd = [slurmop_binary(), "--kubeconfig", self.kubeconfig, "--metrics-addr", "127.0.0.1:0",
               "--health-addr", "127.0.0.1:0", "--log-level", self.log_level]
        for k, v in self.flags.items():
            opt = "--" + k.replace("_", "-")
            if v is True:
                cmd.append(opt)
            elif v is False or v is None:
                continue
            elif isinstance(v, (list, tuple)):
                for x in v:
                    cmd += [opt, str(x)]
            else:
                cmd += [opt, str(v)]
        return cmd + self.args

    def _k8s(self):
        """The k8s backend's cluster when this process runs on it (else None);
        slurmop must then run with the ServiceAccount token kubeconfig."""
        try:
            import backend
        except ImportError:
            return None
        if not backend.is_k8s() or backend._cluster is None:
            return None
        cl = backend._cluster
        assert os.path.abspath(self.kubeconfig) != os.path.abspath(cl.admin_kubeconfig), \
            "slurmop must not run with the admin certificate on the k8s backend"
        return cl

    def _audit_size(self):
        try:
            return os.path.getsize(self._cluster.audit_log)
        except OSError:
            return 0

    def forbidden(self):
        """On the k8s backend: the API server's audit events of 403 answers
        to ServiceAccount requests since this process started, and the lines
        of slurmop's log that say forbidden / 403."""
        if self._cluster is None:
            return [], []
        events = []
        try:
            with open(self._cluster.audit_log, "rb") as f:
                f.seek(self._audit_start)
                for line in f.read().splitlines():
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        continue
                    if (ev.get("responseStatus") or {}).get("code") == 403:
                        events.append(ev)
        except OSError:
            pass
        # A kube-apiserver that has just started answers 403 until its RBAC
        # caches are filled: a 403 is a defect of our RBAC only when the
        # API server still refuses the same request now.
        events = [e for e in events if not self._allowed_now(e)]
        lines = [l for l in self.stderr().splitlines() if re.search(r"\bforbidden\b|answered 403\b|\b403 Forbidden\b", l, re.I)]
        if not events:
            lines = []  # each such line is an answer the audit log showed allowed now
        return events, lines

    def _allowed_now(self, ev):
        """Whether the user of an audit event may now do what it was refused
        (kubectl auth can-i as that user, with the admin's credentials)."""
        ref = ev.get("objectRef") or {}
        user = (ev.get("user") or {}).get("username")
        if not user or not ev.get("verb") or not ref.get("resource"):
            return False
        what = ref["resource"] + ("." + ref["apiGroup"] if ref.get("apiGroup") else "")
        if ref.get("name"):
            what += "/" + ref["name"]
        args = ["auth", "can-i", ev["verb"], what, "--as", user]
        if ref.get("subresource"):
            args += ["--subresource", ref["subresource"]]
        if ref.get("namespace"):
            args += ["-n", ref["namespace"]]
        elif ev["verb"] in ("list", "watch"):
            args += ["--all-namespaces"]
        try:
            p = self._cluster.kubectl(*args, ok=False)
        except Exception:  # noqa: BLE001 - a check that cannot run keeps the 403
            return False
        return p.returncode == 0 and p.stdout.strip() == "yes"

    def start(self, timeout=20):
        self._cluster = self._k8s()
        if self._cluster is not None:
            self._audit_start = self._audit_size()
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        if self.env:
            env.update(self.env)
        self._err = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=self._err, env=env)
        # The two listeners log their bound ports: metrics first, then health.
        def ports():
            found = re.findall(r"serving /metrics /healthz /readyz on ([0-9.]+:\d+)", self.stderr())
            if self.proc.poll() is not None:
                raise AssertionError("slurmop exited at start (%s):\n%s" % (self.proc.returncode, self.stderr()))
            return found if len(found) >= 2 else None
        found = wait_for(ports, timeout, what="slurmop listeners")
        self.metrics_url = "http://" + found[0]
        self.health_url = "http://" + found[1]
        return self

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def get(self, url, timeout=5):
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def ready(self):
        # Polled until true: a refused connection (not listening yet) or an
        # answer slower than get's timeout (a loaded CI machine) is "not yet",
        # and the caller's deadline decides.
        try:
            return self.get(self.health_url + "/readyz")[0] == 200
        except (OSError, urllib.error.URLError):
            return False

    def wait_ready(self, timeout=30):
        wait_for(self.ready, timeout, what="slurmop /readyz")

    def metrics(self):
        status, text = self.get(self.metrics_url + "/metrics")
        assert status == 200, text
        return parse_metrics(text)

    def metric(self, metric_name, **labels):
        """Sum of every sample of name whose labels include the given ones."""
        total = 0.0
        for (n, ls), v in self.metrics().items():
            if n == metric_name and all((k, v2) in ls for k, v2 in labels.items()):
                total += v
        return total

    def stop(self, sig=signal.SIGTERM, timeout=30, check=True):
        """Send sig (None: none, for a process already on its way out) and
        wait up to timeout for the exit; with check, assert exit 0 and a
        clean log. A process that logged "stopped" may still be exiting
        (LeakSanitizer's scan at exit takes a while under load), with its
        signal handlers gone: a signal then kills it (exit -15)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            if sig is not None:
                self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("slurmop did not stop within %ss\n%s" % (timeout, self.stderr()[-6000:]))
        rc = self.proc.returncode
        self.proc = None
        self._err.close()
        if check:
            err = self.stderr()
            if rc != 0 or "Sanitizer" in err or "runtime error" in err:
                raise AssertionError("slurmop exited with %s:\n%s" % (rc, err[-8000:]))
            # Debug builds compare a NodeSet's incremental state (counters,
            # Slurm counts) with a rebuild after every incremental pass.
            bad = [l for l in err.splitlines() if "incremental state differs" in l]
            if bad:
                raise AssertionError("an incremental pass drifted from a full one:\n%s" % "\n".join(bad[:5]))
            self.check_no_forbidden()
        return rc

    def check_no_forbidden(self):
        """k8s backend: fail when the API server refused the operator's
        ServiceAccount anything (RBAC of deploy/ too narrow)."""
        events, lines = self.forbidden()
        if events or lines:
            what = sorted({"%s %s%s" % (e.get("verb"), (e.get("objectRef") or {}).get("resource", "?"),
                                        "/" + e["objectRef"]["subresource"]
                                        if (e.get("objectRef") or {}).get("subresource") else "")
                           for e in events})
            raise AssertionError("the API server answered slurmop with 403 (RBAC of deploy/manifests): %s\n%s"
                                 % (", ".join(what), "\n".join(lines[:20])))

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        try:
            self.stop(check=exc_type is None)
        finally:
            if exc_type is not None:
                # The failure first: a CI report that keeps only the head of
                # a test's output must still say why (the traceback comes
                # after this log's tail).
                print("---- failed: %s: %s" % (exc_type.__name__, str(exc)[:2000]), flush=True)
                self._keep_log()
            self.tmp.cleanup()

    def _keep_log(self):
        """A failed test's slurmop log: its tail here, the whole of it in
        $SLURMOP_TEST_LOGS (default: test-logs/ in the working directory,
        the build folder under ctest) for a look after the run."""
        text = self.stderr()
        keep = os.environ.get("SLURMOP_TEST_LOGS", os.path.join(os.getcwd(), "test-logs"))
        try:
            os.makedirs(keep, exist_ok=True)
            path = os.path.join(keep, "slurmop-%d-%d.log" % (os.getpid(), int(time.time() * 1000)))
            with open(path, "w") as f:
                f.write(text)
        except OSError as e:
            path = "(not kept: %s)" % e
        # Shutdown noise says nothing about the failure.
        noise = ("request failed: operation canceled", "node poll with update_time failed",
                 "full node table (", "objsync: creating ", "rejected as invalid")
        lines = [l for l in text.splitlines() if not any(n in l for n in noise)]
        print("---- slurmop stderr (tail, routine lines left out; all of it in %s) ----\n" % path +
              "\n".join(lines)[-12000:])


def make_cluster(client, ns="default", ctl="slurm", nodesets=None, key_secret="slurm-auth-slurm",
                 jwt_secret="slurm-auth-jwt", no_drain=False):
    """Create the key Secrets and a Controller; then NodeSets from a dict
    name -> extra spec (merged into a default spec). Returns the created
    NodeSets' JSON. no_drain=True annotates every NodeSet with NO_DRAIN
    (only for runs without Slurm: pods are then deleted without a drain)."""
    import base64
    for name, key, data in ((key_secret, "slurm.key", b"k" * 64), (jwt_secret, "jwt.key", b"j" * 64)):
        r = client.post("/api/v1/namespaces/%s/secrets" % ns,
                        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                         "data": {key: base64.b64encode(data).decode()}})
        assert r.status in (201, 409), r.text
    r = client.post(NS_API + "/namespaces/%s/controllers" % ns,
                    {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "Controller", "metadata": {"name": ctl},
                     "spec": {"slurmKeyRef": {"name": key_secret, "key": "slurm.key"},
                              "jwtKeyRef": {"name": jwt_secret, "key": "jwt.key"},
                              "slurmctld": {"image": "ghcr.io/slinkyproject/slurmctld:test"},
                              "logfile": {"image": "alpine:test"},
                              "reconfigure": {"image": "ghcr.io/slinkyproject/slurmctld:test"},
                              "persistence": {"enabled": False}}})
    assert r.status in (201, 409), r.text
    out = []
    for name, extra in (nodesets or {}).items():
        spec = {"controllerRef": {"name": ctl}, "replicas": 1,
                "template": {"spec": {"hostname": name + "-"}}}
        spec.update(extra)
        meta = {"name": name}
        if no_drain:
            meta["annotations"] = {NO_DRAIN: "true"}
        r = client.post(NS_API + "/namespaces/%s/nodesets" % ns,
                        {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet", "metadata": meta,
                         "spec": spec})
        assert r.status == 201, r.text
        out.append(r.json())
    return out


def pods_of(client, nodeset, ns="default", include_terminating=True):
    r = client.get("/api/v1/namespaces/%s/pods" % ns, labelSelector="app.kubernetes.io/instance=" + nodeset)
    assert r.status == 200, r.text
    items = r.json().get("items") or []
    if not include_terminating:
        items = [p for p in items if not p["metadata"].get("deletionTimestamp")]
    return items


def set_replicas(client, nodeset, n, ns="default"):
    """Scale through the scale subresource, as kubectl scale / HPA / KEDA do."""
    r = client.patch(NS_API + "/namespaces/%s/nodesets/%s/scale" % (ns, nodeset), {"spec": {"replicas": n}})
    assert r.status == 200, r.text
    return r.json()
