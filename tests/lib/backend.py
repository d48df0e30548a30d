"""One switch for integration tests: "an API server", either kubesim (the
in-repo simulator, the default) or a real Kubernetes control plane
(tests/k8s/cluster.sh: etcd, kube-apiserver, controller manager, scheduler
and kwok nodes), chosen by $SLURMOP_TEST_BACKEND (kubesim | k8s). ctest
registers a test file holding the line `# backends: kubesim k8s` twice:
integration.<name> and integration.k8s.<name> (label k8s, the variable set
to k8s).

    from backend import api_server, kubesim_only
    with api_server(nodes=8) as ks:
        c = ks.client()                  # admin: kubesim's client cert, or the cluster's system:masters cert
        apply_crds(c)
        with Slurmop(ks.kubeconfig) as op:   # the operator's kubeconfig
            ...
        ks.counters()                    # the operator's requests, kubesim's shape

What each backend gives:

- ks.client(): a kubesim.Client over HTTPS with the admin client
  certificate (kubesim's own; the cluster's admin.kubeconfig).
- ks.kubeconfig: what slurmop runs with. kubesim: its kubeconfig. k8s: a
  kubeconfig holding a token of the ServiceAccount slurmop-system/slurmop
  (`kubectl create token`), bound to the ClusterRole and the leader-election
  Role of deploy/manifests/operator/20-rbac.yaml, never the admin
  certificate. Slurmop (tests/lib/slurmop.py) fails a test on the k8s
  backend when the API server answered any request of the operator with 403.
- ks.counters(): kubesim's /kubesim/counters. k8s: the same shape, counted
  from the API server's audit log, which records every request of a
  ServiceAccount outside kube-system (so: the operator's requests only; the
  test's own, made with the admin certificate, are not counted, unlike
  kubesim which counts everything). reset_counters() starts again.
- ks.restart_apiserver(): kubesim's /kubesim/restart; k8s:
  `cluster.sh restart-apiserver` (kube-apiserver stopped, SIGKILL after
  3 s, and started again on the same port and etcd).
- ks.lease_namespace: where slurmop's leader-election Lease may live
  (default on kubesim; slurmop-system on k8s, the namespace the Role of
  deploy/ grants).
- ks.admin(...): kubesim's admin endpoints; on k8s raises Skip (there is no
  equivalent: pod failure injection, node taints through kubesim, 429
  faults...). kubesim_only(reason) skips a test on k8s with the reason.

On k8s one cluster serves every test of a process (started on first use,
about 10 s; stopped when the process exits, or by a watchdog when the
process is killed). Each api_server() entry resets it: the test namespace
default is emptied (finalizers removed, everything deleted at once), Leases
removed, the KWOK nodes set to exactly `nodes` (kwok-gpu-0000...).
SLURMOP_K8S_KEEP=1 leaves the cluster running after the process (debugging).
The k8s backend exits 77 (ctest: skipped) when the control plane's binaries
are not built (tests/k8s/build.sh) or Go is missing.
"""

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from kubesim import Client, Kubesim

__all__ = ["BACKEND", "is_k8s", "api_server", "Skip", "kubesim_only", "K8sApiServer", "KubesimServer",
           "OPERATOR_NS", "OPERATOR_SA", "k8s_cluster"]

BACKEND = os.environ.get("SLURMOP_TEST_BACKEND", "kubesim")
SRC = os.environ.get("OP_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
K8S = os.path.join(SRC, "tests", "k8s")
CLUSTER_SH = os.path.join(K8S, "cluster.sh")
BUILD_SH = os.path.join(K8S, "build.sh")
OPERATOR_NS = "slurmop-system"
OPERATOR_SA = "slurmop"
RBAC_FILES = [os.path.join(SRC, "deploy", "manifests", "operator", f)
              for f in ("00-namespace.yaml", "10-serviceaccount.yaml", "20-rbac.yaml", "25-metrics-auth.yaml",
                        "26-topology-webhook-rbac.yaml")]
# The tests that run slurmop with --allow-node-taints need what an administrator grants with it.
RBAC_FILES.append(os.path.join(SRC, "deploy", "manifests", "optional", "node-taints.yaml"))

if BACKEND not in ("kubesim", "k8s"):
    raise SystemExit("SLURMOP_TEST_BACKEND must be kubesim or k8s, not %r" % BACKEND)


class Skip(Exception):
    """A test (or a step) the chosen backend cannot run; kubesim.run_tests and
    slurmlab.run_in_lab report it as skipped (exit 77) with the message."""


def is_k8s():
    return BACKEND == "k8s"


def kubesim_only(reason):
    """Skip the calling test on the k8s backend, with the reason."""
    if is_k8s():
        raise Skip("kubesim only: " + reason)


def api_server(nodes=0, crds=True, **flags):
    """The chosen backend's API server, a context manager. Keyword flags are
    kubesim's (max_grace, require_client_cert, ...); the k8s backend ignores
    the ones without meaning there (see K8sApiServer). crds (k8s only, for
    the process's first use): start the cluster with crds/ installed
    (cluster.sh --crds); a test that installs them itself (helm) says
    False."""
    if is_k8s():
        return K8sApiServer(nodes=nodes, crds=crds, **flags)
    return KubesimServer(nodes=nodes, **flags)


# ---- kubesim ------------------------------------------------------------------

class KubesimServer(Kubesim):
    kind = "kubesim"
    lease_namespace = "default"

    @property
    def admin_kubeconfig(self):
        return self.kubeconfig

    def restart_apiserver(self):
        self.admin("POST", "/kubesim/restart", {})

    def reset_counters(self):
        self.admin("POST", "/kubesim/counters/reset")

    def node_names(self):
        c = self.client()
        try:
            r = c.get("/api/v1/nodes")
            return sorted(n["metadata"]["name"] for n in r.json()["items"])
        finally:
            c.close()

    # Faults with an equivalent on both backends.
    def fail_pod(self, ns, name):
        self.admin("POST", "/kubesim/pods/fail", {"namespace": ns, "name": name})

    def taint_node(self, name, taint):
        self.admin("POST", "/kubesim/nodes/taint", {"names": [name], "taint": taint})

    def delete_node(self, name):
        self.admin("POST", "/kubesim/nodes/delete", {"names": [name]})

    def add_node(self):
        """One more node; returns its name."""
        before = set(self.node_names())
        self.admin("POST", "/kubesim/nodes/add", {"count": 1})
        return sorted(set(self.node_names()) - before)[0]


# ---- a real control plane -----------------------------------------------------

def _skip_process(why):
    print("SKIP: " + why, flush=True)
    sys.exit(77)


def _parse_exports(text):
    env = {}
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line[len("export "):].split("=", 1)
            env[k] = v
    return env


class K8sCluster:
    """One cluster.sh cluster in a private K8S_DIR, with the operator's
    ServiceAccount and RBAC from deploy/manifests and a token kubeconfig."""

    def __init__(self, crds=True):
        self.crds = crds
        self.dir = tempfile.mkdtemp(prefix="slurmop-k8s-it.")
        self.env = dict(os.environ, K8S_DIR=self.dir)
        self.env.pop("KUBECONFIG", None)
        self.started = False
        self.watchdog = None

    def start(self):
        if shutil.which("go") is None and not os.environ.get("SLURMOP_K8S_NO_GO_CHECK"):
            chk = subprocess.run(["bash", BUILD_SH, "--check"], capture_output=True, text=True)
            if chk.returncode != 0:
                _skip_process("Go is not installed and the Kubernetes binaries are not built")
        chk = subprocess.run(["bash", BUILD_SH, "--check"], capture_output=True, text=True)
        if chk.returncode == 77:
            _skip_process("Go is not installed (tests/k8s/build.sh)")
        if chk.returncode != 0:
            _skip_process("the Kubernetes binaries are not built: run `bash tests/k8s/build.sh`")
        t0 = time.monotonic()
        if os.environ.get("SLURMOP_K8S_KEEP") == "1":
            # debugging: leave the cluster running after the test
            print("k8s backend: SLURMOP_K8S_KEEP=1: the cluster stays; stop it with K8S_DIR=%s "
                  "bash tests/k8s/cluster.sh stop --clean" % self.dir, flush=True)
            return self._start()
        # A watchdog stops the cluster when this process dies without its
        # atexit handler (ctest's timeout kills with SIGKILL).
        self.watchdog = subprocess.Popen(
            ["bash", "-c", 'while kill -0 %d 2>/dev/null; do sleep 1; done; bash "$1" stop --clean' % os.getpid(),
             "watchdog", CLUSTER_SH],
            env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        atexit.register(self.stop)
        self.started = True
        return self._start()

    def _start(self):
        t0 = time.monotonic()
        # The CRDs go in before the controller manager starts (cluster.sh
        # --crds): its garbage collector then collects the dependents of a
        # deleted NodeSet at once, instead of after its next rediscovery.
        args = ["--crds", os.path.join(SRC, "crds")] if self.crds else []
        p = subprocess.run(["bash", CLUSTER_SH, "start"] + args, env=self.env, capture_output=True, text=True, timeout=600)
        if p.returncode == 77:
            _skip_process("cluster.sh start: " + (p.stderr.strip().splitlines() or ["exit 77"])[-1])
        if p.returncode != 0:
            raise AssertionError("cluster.sh start exited %d:\n%s" % (p.returncode, p.stderr[-4000:]))
        self.env.update(_parse_exports(p.stdout))
        self.bin = self.env["K8S_BIN"]
        self.admin_kubeconfig = self.env["KUBECONFIG"]
        with open(os.path.join(self.dir, "run", "kube-apiserver.port")) as f:
            self.url = "https://127.0.0.1:%s" % f.read().strip()
        self.ca_file = os.path.join(self.dir, "pki", "ca.crt")
        self.cert_file = os.path.join(self.dir, "pki", "admin.crt")
        self.key_file = os.path.join(self.dir, "pki", "admin.key")
        self.audit_log = os.path.join(self.dir, "log", "audit.log")
        self.kubectl("apply", "--server-side", *sum((["-f", f] for f in RBAC_FILES), []))
        self.operator_kubeconfig = self.token_kubeconfig(OPERATOR_NS, OPERATOR_SA, "operator.kubeconfig")
        print("k8s backend: cluster %s up in %.1f s (%s)" % (self.dir, time.monotonic() - t0, self.url), flush=True)
        return self

    def token_kubeconfig(self, ns, sa, filename):
        """A kubeconfig with a fresh token of ServiceAccount ns/sa."""
        tok = self.kubectl("create", "token", sa, "-n", ns, "--duration=6h").stdout.strip()
        import base64
        with open(self.ca_file, "rb") as f:
            ca = base64.b64encode(f.read()).decode()
        path = os.path.join(self.dir, filename)
        with open(path, "w") as f:
            f.write("""apiVersion: v1
kind: Config
clusters:
- name: k8s
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: %s
  context:
    cluster: k8s
    user: %s
    namespace: default
current-context: %s
""" % (self.url, ca, sa, tok, sa, sa, sa))
        os.chmod(path, 0o600)
        return path

    def kubectl(self, *args, ok=True, stdin=None, timeout=120, kubeconfig=None):
        cmd = [os.path.join(self.bin, "kubectl"), "--kubeconfig", kubeconfig or self.admin_kubeconfig] + list(args)
        p = subprocess.run(cmd, capture_output=True, text=True, env=self.env, input=stdin, timeout=timeout)
        if ok and p.returncode != 0:
            raise AssertionError("%s exited %d\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
        return p

    def helm(self, *args, ok=True, timeout=300):
        cmd = [os.path.join(self.bin, "helm"), "--kubeconfig", self.admin_kubeconfig] + list(args)
        p = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=timeout)
        if ok and p.returncode != 0:
            raise AssertionError("helm %s exited %d\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
        return p

    def cluster_sh(self, *args, timeout=120):
        p = subprocess.run(["bash", CLUSTER_SH] + list(args), env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        if p.returncode != 0:
            raise AssertionError("cluster.sh %s exited %d:\n%s" % (" ".join(args), p.returncode, p.stderr[-3000:]))
        return p

    def client(self, **kw):
        return Client(self.url, ca_file=self.ca_file, cert_file=self.cert_file, key_file=self.key_file, **kw)

    def stop(self):
        if not self.started:
            return
        self.started = False
        subprocess.run(["bash", CLUSTER_SH, "stop", "--clean"], env=self.env, capture_output=True, timeout=120)
        if self.watchdog is not None:
            try:
                self.watchdog.kill()
                self.watchdog.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass


_cluster = None


def k8s_cluster(crds=True):
    """The process's one cluster, started on first use (crds: see
    api_server)."""
    global _cluster
    if _cluster is None:
        _cluster = K8sCluster(crds=crds).start()
    return _cluster


# Namespaced resources a test may leave in the namespace default, as
# (API prefix, plural); emptied before every test.
_RESET = [
    ("/apis/slinky.slurm.net/v1beta1", "nodesets"),
    ("/apis/slinky.slurm.net/v1beta1", "loginsets"),
    ("/apis/slinky.slurm.net/v1beta1", "restapis"),
    ("/apis/slinky.slurm.net/v1beta1", "accountings"),
    ("/apis/slinky.slurm.net/v1beta1", "tokens"),
    ("/apis/slinky.slurm.net/v1beta1", "controllers"),
    ("/apis/apps/v1", "statefulsets"),
    ("/apis/apps/v1", "deployments"),
    ("/apis/apps/v1", "replicasets"),
    ("/apis/apps/v1", "controllerrevisions"),
    ("/apis/policy/v1", "poddisruptionbudgets"),
    ("/api/v1", "pods"),
    ("/api/v1", "services"),
    ("/api/v1", "configmaps"),
    ("/api/v1", "secrets"),
    ("/api/v1", "persistentvolumeclaims"),
    ("/api/v1", "events"),
    ("/apis/coordination.k8s.io/v1", "leases"),
]


class K8sApiServer:
    """The k8s backend's api_server(): see the module's documentation.
    kubesim-only flags: max_grace (kwok ends a deleted pod at once),
    require_client_cert (the real API server asks for one, admin has one),
    tls, token and auth_required (Skip: the real API server always speaks
    TLS and authenticates with its own tokens)."""

    kind = "k8s"
    lease_namespace = OPERATOR_NS

    def __init__(self, nodes=0, crds=True, **flags):
        self.crds = crds
        if flags.get("tls") is False or any(flags.get(k) for k in ("token", "auth_required", "state")):
            raise Skip("kubesim only: the options %r have no real-cluster equivalent (the real API server "
                       "always speaks TLS and issues its own tokens)" % sorted(flags))
        self.nodes = nodes
        self.flags = flags
        self.cluster = None

    # -- lifecycle
    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        return False

    def start(self):
        self.cluster = k8s_cluster(crds=self.crds)
        self.reset()
        self.reset_counters()
        return self

    def stop(self, *a, **kw):
        return 0

    # -- what tests use
    @property
    def url(self):
        return self.cluster.url

    @property
    def kubeconfig(self):
        return self.cluster.operator_kubeconfig

    @property
    def admin_kubeconfig(self):
        return self.cluster.admin_kubeconfig

    @property
    def audit_log(self):
        return self.cluster.audit_log

    @property
    def pid(self):
        with open(os.path.join(self.cluster.dir, "run", "kube-apiserver.pid")) as f:
            return int(f.read())

    def client(self, cert=True, token=None, **kw):
        if not cert or token:
            return Client(self.url, ca_file=self.cluster.ca_file, token=token, **kw)
        return self.cluster.client(**kw)

    def kubectl(self, *args, **kw):
        return self.cluster.kubectl(*args, **kw)

    def helm(self, *args, **kw):
        return self.cluster.helm(*args, **kw)

    def admin(self, method, path, body=None):
        raise Skip("kubesim only: %s %s is a kubesim fault/admin endpoint with no real-cluster equivalent"
                   % (method, path))

    def restart_apiserver(self):
        self.cluster.cluster_sh("restart-apiserver")

    def compact(self):
        return int(self.cluster.cluster_sh("compact").stdout.strip())

    def stderr(self):
        try:
            with open(os.path.join(self.cluster.dir, "log", "kube-apiserver.log"), errors="replace") as f:
                return f.read()[-8000:]
        except OSError:
            return ""

    def node_names(self):
        out = self.kubectl("get", "nodes", "-l", "type=kwok", "-o", "name").stdout.split()
        return sorted(n.split("/", 1)[1] for n in out)

    # -- faults with an equivalent on both backends
    def fail_pod(self, ns, name):
        """What a kubelet writes when the pod's containers exit with an error."""
        c = self.cluster.client()
        try:
            r = c.patch("/api/v1/namespaces/%s/pods/%s/status" % (ns, name),
                        {"status": {"phase": "Failed", "reason": "Error", "conditions": [
                            {"type": "Ready", "status": "False", "reason": "PodFailed"},
                            {"type": "ContainersReady", "status": "False", "reason": "PodFailed"}]}},
                        patch_type="strategic")
            assert r.status == 200, r.text
        finally:
            c.close()

    def taint_node(self, name, taint):
        c = self.cluster.client()
        try:
            n = c.get("/api/v1/nodes/" + name).json()
            taints = (n["spec"].get("taints") or []) + [taint]
            r = c.patch("/api/v1/nodes/" + name, {"spec": {"taints": taints}})
            assert r.status == 200, r.text
        finally:
            c.close()

    def delete_node(self, name):
        c = self.cluster.client()
        try:
            r = c.delete("/api/v1/nodes/" + name)
            assert r.status == 200, r.text
        finally:
            c.close()

    def add_node(self, name=None):
        """One more KWOK node (the shape of the others, a new name);
        returns its name once kwok has made it Ready."""
        if name is None:
            self._added = getattr(self, "_added", 0) + 1
            name = "kwok-gpu-x%03d" % self._added
        c = self.cluster.client()
        try:
            tmpl = [n for n in c.get("/api/v1/nodes", labelSelector="type=kwok").json()["items"]
                    if n["metadata"]["name"] != name][0]
            labels = dict(tmpl["metadata"]["labels"], **{"kubernetes.io/hostname": name})
            labels.pop("pool", None)
            body = {"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": labels,
                                 "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
                    "spec": {}, "status": {"capacity": tmpl["status"]["capacity"],
                                           "allocatable": tmpl["status"]["allocatable"]}}
            r = c.post("/api/v1/nodes", body)
            assert r.status == 201, r.text
            from slurmop import wait_for
            wait_for(lambda: any(x["type"] == "Ready" and x["status"] == "True" for x in
                                 c.get("/api/v1/nodes/" + name).json().get("status", {}).get("conditions", [])),
                     30, what="node %s Ready" % name)
        finally:
            c.close()
        return name

    # -- the audit log as kubesim's counters
    def reset_counters(self):
        try:
            self._audit_offset = os.path.getsize(self.audit_log)
        except OSError:
            self._audit_offset = 0

    def audit_events(self, since_reset=True):
        """The audit events (dicts), one per request (a watch's
        ResponseStarted and ResponseComplete count once)."""
        seen = set()
        out = []
        try:
            with open(self.audit_log, "rb") as f:
                if since_reset:
                    f.seek(self._audit_offset)
                data = f.read()
        except OSError:
            return out
        for line in data.splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # a line being written
            if ev.get("auditID") in seen:
                continue
            seen.add(ev.get("auditID"))
            out.append(ev)
        return out

    def counters(self):
        """kubesim's /kubesim/counters shape, from the operator's requests
        (every ServiceAccount outside kube-system) since the last reset."""
        by = {}
        for ev in self.audit_events():
            ref = ev.get("objectRef") or {}
            verb = ev.get("verb", "")
            if not ref.get("resource"):
                res = ""
            else:
                res = ref["resource"] + ("." + ref["apiGroup"] if ref.get("apiGroup") else "")
                if ref.get("subresource"):
                    res += "/" + ref["subresource"]
            code = (ev.get("responseStatus") or {}).get("code", 0)
            by[(verb, res, code)] = by.get((verb, res, code), 0) + 1
        o = {"total": 0, "lists": 0, "watches": 0, "creates": {}, "byVerb": {}, "byCode": {}, "byResource": {},
             "requests": []}
        for (verb, res, code), n in by.items():
            o["total"] += n
            o["byVerb"][verb] = o["byVerb"].get(verb, 0) + n
            o["byCode"][str(code)] = o["byCode"].get(str(code), 0) + n
            if res:
                r = o["byResource"].setdefault(res, {})
                r[verb] = r.get(verb, 0) + n
            if verb == "create" and res:
                o["creates"][res] = o["creates"].get(res, 0) + n
            if verb == "list":
                o["lists"] += n
            if verb == "watch":
                o["watches"] += n
            o["requests"].append({"verb": verb, "resource": res, "code": code, "count": n})
        return o

    def forbidden(self):
        """The operator's requests the API server refused with 403 (audit
        events), since the last reset."""
        return [ev for ev in self.audit_events() if (ev.get("responseStatus") or {}).get("code") == 403]

    # -- reset between tests
    def reset(self):
        t0 = time.monotonic()
        c = self.cluster.client()
        try:
            self._set_nodes(c)
            for ns in ("default", OPERATOR_NS):
                for prefix, plural in _RESET:
                    if ns == OPERATOR_NS and plural != "leases":
                        continue
                    base = "%s/namespaces/%s/%s" % (prefix, ns, plural)
                    r = c.get(base)
                    if r.status == 404:
                        continue  # CRDs not installed yet
                    assert r.status == 200, (base, r.text)
                    for it in r.json().get("items") or []:
                        if it["metadata"].get("finalizers"):
                            p = c.patch(base + "/" + it["metadata"]["name"],
                                        {"metadata": {"finalizers": None}})
                            assert p.status in (200, 404), p.text
                    params = {}
                    if plural == "configmaps":
                        params["fieldSelector"] = "metadata.name!=kube-root-ca.crt"
                    if plural == "services":
                        params["fieldSelector"] = "metadata.name!=kubernetes"  # the API server's own
                    d = c.request("DELETE", base, body={"apiVersion": "v1", "kind": "DeleteOptions",
                                                        "gracePeriodSeconds": 0,
                                                        "propagationPolicy": "Background"}, params=params)
                    assert d.status == 200, (base, d.text)
            # Until everything (pods above all) is gone.
            deadline = time.monotonic() + 60
            for prefix, plural in _RESET:
                if plural in ("events", "configmaps"):
                    continue
                base = "%s/namespaces/default/%s" % (prefix, plural)
                while True:
                    r = c.get(base, fieldSelector="metadata.name!=kubernetes") if plural == "services" \
                        else c.get(base)
                    if r.status == 404 or not r.json().get("items"):
                        break
                    if time.monotonic() > deadline:
                        raise AssertionError("reset: %s still holds %r" % (
                            base, [i["metadata"]["name"] for i in r.json()["items"]]))
                    for it in r.json()["items"]:
                        if it["metadata"].get("finalizers"):
                            c.patch(base + "/" + it["metadata"]["name"], {"metadata": {"finalizers": None}})
                    time.sleep(0.1)
        finally:
            c.close()
        print("k8s backend: reset in %.1f s (%d nodes)" % (time.monotonic() - t0, self.nodes), flush=True)

    def _set_nodes(self, c):
        names = self.node_names()
        keep = {"kwok-gpu-%04d" % i for i in range(self.nodes)}
        extra = [n for n in names if n not in keep]
        # labels, taints and cordons a test added go too (nodes of cluster.sh
        # have none; a cordon left behind would bring its taint back through
        # the controller manager)
        for n in names:
            if n in keep:
                node = c.get("/api/v1/nodes/" + n).json()
                if (node["spec"].get("taints") or node["spec"].get("unschedulable") or
                        "pool" in node["metadata"].get("labels", {})):
                    c.patch("/api/v1/nodes/" + n, {"metadata": {"labels": {"pool": None}},
                                                   "spec": {"taints": None, "unschedulable": None}})
        for n in extra:
            r = c.delete("/api/v1/nodes/" + n)
            assert r.status in (200, 404), r.text
        if extra:
            from slurmop import wait_for
            wait_for(lambda: not set(extra) & set(self.node_names()), 30, what="surplus nodes gone")
            names = [n for n in names if n not in extra]
        missing = sorted(keep - set(names))
        if missing and missing[0] == "kwok-gpu-%04d" % len(names):
            self.cluster.cluster_sh("nodes", str(self.nodes), timeout=300)  # the next indexes
        else:
            for n in missing:  # a test deleted one in the middle
                self.add_node(name=n)
