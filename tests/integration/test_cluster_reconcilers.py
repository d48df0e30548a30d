"""A whole Slurm cluster from custom resources, against kubesim over real
sockets (issue 6).

slurmop runs with kubesim's kubeconfig. The test applies a Controller, an
Accounting, a RestApi, two NodeSets, a LoginSet, a Token and the Secrets
and ConfigMaps they reference, then checks every object the Controller,
RestApi, Accounting, LoginSet and Token reconcilers create: names, labels,
annotations (the hashes recomputed here), ownerReferences and the generated
files. Then:
  - a converged cluster causes no writes;
  - changing the Controller's extraConf rewrites exactly the ConfigMap and
    the slurmctld pod template hash (write requests counted by kubesim);
  - rotating the JWT key Secret re-mints the Token's JWT and re-rolls the
    pods that mount the key (their pod-template hash annotations change);
  - the Token JWT verifies with Python's hmac (an implementation independent
    of slurmop's mbedtls one);
  - the active-controller label, validation (Warning event, status condition,
    no writes) and the ServiceMonitor (created only with its CRD, deleted
    when switched off).

kubesim does not run the StatefulSet and Deployment controllers, so "pods
re-rolled" is checked where the roll starts: the pod templates' hash
annotations. The slurmctld pod of the active-label check is created by the
test.

Also on a real control plane (integration.k8s.cluster_reconcilers,
tests/lib/backend.py): slurmop runs with the ServiceAccount token of
deploy/ and must get no 403; write requests are the operator's, counted from
the API server's audit log; the StatefulSet controller makes the slurmctld
pod c1-controller-0 itself (the test does not); a Controller without
slurmKeyRef is refused by the CRD's CEL rule before slurmop sees it, so the
operator-side validation segment is kubesim only.
"""
# backends: kubesim k8s

import base64
import hashlib
import hmac
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from backend import api_server, is_k8s

BUILD = os.environ.get("OP_BUILD_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "build")
SRC = os.environ.get("OP_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
SLURMOP = os.path.join(BUILD, "slurmop")
YAML2JSON = os.path.join(BUILD, "tools", "yaml2json")

NS = "slurm"
GROUP = "/apis/slinky.slurm.net/v1beta1/namespaces/" + NS
CORE = "/api/v1/namespaces/" + NS
APPS = "/apis/apps/v1/namespaces/" + NS
SLURM_KEY = b"slurm-key-" + b"s" * 64
JWT_KEY = b"jwt-key-" + b"j" * 64
JWT_KEY2 = b"rotated-jwt-key-" + b"r" * 56
DB_PASSWORD = b"db-secret-pw"
SSSD_CONF = b"[sssd]\nservices = nss, pam\n"
AUTHORIZED = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZha2Uga2V5IGZvciB0ZXN0cw test@example"

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def b64(b):
    return base64.b64encode(b).decode()


def unb64(s):
    return base64.b64decode(s)


def sha256(b):
    return hashlib.sha256(b).hexdigest()


def map_hash(data, decode):
    """Slinky's CheckSumFromMap: values concatenated in key order."""
    if not data:
        return ""
    blob = b"".join(unb64(data[k]) if decode else data[k].encode() for k in sorted(data))
    return sha256(blob) if blob else ""


def without_nodesets(conf):
    """slurm.conf without what the NodeSets add: the MaxNodeCount line of the
    GENERAL section and the NODESET & PARTITION section."""
    lines = conf.split("\n")
    out, i, general = [], 0, True
    while i < len(lines):
        if lines[i] == "#" and i + 1 < len(lines) and lines[i + 1].startswith("### "):
            general = general and lines[i + 1] == "### GENERAL ###"
            if lines[i + 1] == "### NODESET & PARTITION ###":
                i += 2
                while i < len(lines) and not (lines[i] == "#" and i + 1 < len(lines) and lines[i + 1].startswith("### ")):
                    i += 1
                continue
        if not (general and lines[i].startswith("MaxNodeCount=")):
            out.append(lines[i])
        i += 1
    return "\n".join(out)


def conf_hash(data):
    """The slurmctld template's slurm-config-hash: the ConfigMap's data with
    slurm.conf read without what the NodeSets add (those reach slurmctld by
    `scontrol reconfigure`, never by a restart)."""
    data = dict(data)
    if "slurm.conf" in data:
        data["slurm.conf"] = without_nodesets(data["slurm.conf"])
    return map_hash(data, False)


def wait_for(what, fn, timeout=60, interval=0.1):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except Exception as e:  # noqa: BLE001 - keep polling through transient errors
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))


class Api:
    def __init__(self, ks):
        self.c = ks.client()

    def get(self, path):
        r = self.c.get(path)
        if r.status == 404:
            return None
        assert r.status == 200, (path, r.status, r.text)
        return r.json()

    def create(self, path, obj):
        r = self.c.post(path, obj)
        assert r.status == 201, (path, r.status, r.text)
        return r.json()

    def patch(self, path, patch):
        r = self.c.patch(path, patch)
        assert r.status == 200, (path, r.status, r.text)
        return r.json()

    def delete(self, path):
        r = self.c.delete(path)
        assert r.status in (200, 202, 404), (path, r.status, r.text)


def load_crds():
    files = sorted(os.path.join(SRC, "crds", f) for f in os.listdir(os.path.join(SRC, "crds"))
                   if f.endswith(".yaml"))
    out = subprocess.run([YAML2JSON] + files, check=True, capture_output=True).stdout
    docs = json.loads(out)
    return [d for f in files for d in docs[f] if d]


SM_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "names": {"kind": "ServiceMonitor", "listKind": "ServiceMonitorList", "plural": "servicemonitors",
                  "singular": "servicemonitor"},
        "scope": "Namespaced",
        "versions": [{"name": "v1", "served": True, "storage": True,
                      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}


def secret(name, key, value, immutable=False):
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS},
            "data": {key: b64(value)}, "immutable": immutable}


def cr(kind, name, spec, labels=None):
    meta = {"name": name, "namespace": NS}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "slinky.slurm.net/v1beta1", "kind": kind, "metadata": meta, "spec": spec}


SIDECAR = "docker.io/library/alpine:latest"
EXTRA_CONF = "SlurmctldParameters=idle_on_node_suspend\nMaxJobCount=10000"


def cluster():
    keys = {"slurmKeyRef": {"name": "slurm-auth-slurm", "key": "slurm.key"},
            "jwtKeyRef": {"name": "slurm-auth-jwt", "key": "jwt.key"}}
    ctl = dict(keys)
    ctl.update({
        "accountingRef": {"name": "acct"},
        "extraConf": EXTRA_CONF,
        "configFileRefs": [{"name": "c1-files"}],
        "persistence": {"enabled": True, "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}},
        "slurmctld": {"image": "ghcr.io/slinkyproject/slurmctld:25.11"},
        "logfile": {"image": SIDECAR},
    })
    acct = dict(keys)
    acct.update({"storageConfig": {"host": "mariadb", "username": "slurm",
                                   "passwordKeyRef": {"name": "slurm-db", "key": "password"}},
                 "slurmdbd": {"image": "ghcr.io/slinkyproject/slurmdbd:25.11"}})
    return [
        cr("Accounting", "acct", acct),
        cr("Controller", "c1", ctl, labels={"team": "hpc"}),
        cr("RestApi", "ra", {"controllerRef": {"name": "c1"}, "replicas": 1,
                             "slurmrestd": {"image": "ghcr.io/slinkyproject/slurmrestd:25.11"}}),
        cr("NodeSet", "cpu", {"controllerRef": {"name": "c1"}, "replicas": 1,
                              "partition": {"enabled": True, "config": "Default=YES MaxTime=UNLIMITED"},
                              "slurmd": {"image": "ghcr.io/slinkyproject/slurmd:25.11"}, "logfile": {"image": SIDECAR}}),
        cr("NodeSet", "gpu", {"controllerRef": {"name": "c1"}, "replicas": 1,
                              "template": {"spec": {"hostname": "gpu-"}},
                              "slurmd": {"image": "ghcr.io/slinkyproject/slurmd:25.11"}, "logfile": {"image": SIDECAR}}),
        cr("LoginSet", "login", {"controllerRef": {"name": "c1"}, "replicas": 1,
                                 "sssdConfRef": {"name": "login-sssd", "key": "sssd.conf"},
                                 "rootSshAuthorizedKeys": AUTHORIZED,
                                 "login": {"image": "ghcr.io/slinkyproject/login:25.11"},
                                 "initconf": {"image": SIDECAR}}),
        cr("Token", "tok", {"username": "slurm", "lifetime": "15m",
                            "jwtKeyRef": {"name": "slurm-auth-jwt", "key": "jwt.key"}}),
    ]


PLURAL = {"Controller": "controllers", "Accounting": "accountings", "RestApi": "restapis",
          "NodeSet": "nodesets", "LoginSet": "loginsets", "Token": "tokens"}


def owner_ok(obj, kind, owner):
    refs = obj["metadata"].get("ownerReferences") or []
    want = {"apiVersion": owner["apiVersion"], "kind": kind, "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    return refs == [want]


def labels_ok(obj, app, instance, component, path=("metadata", "labels")):
    labels = obj
    for p in path:
        labels = labels.get(p) or {}
    return (labels.get("app.kubernetes.io/name") == app and labels.get("app.kubernetes.io/instance") == instance
            and labels.get("app.kubernetes.io/component") == component)


def jwt_parts(token):
    h, p, s = token.split(".")

    def dec(x):
        return base64.urlsafe_b64decode(x + "=" * (-len(x) % 4))
    return json.loads(dec(h)), json.loads(dec(p)), dec(s), (h + "." + p).encode()


def jwt_verifies(token, key):
    header, claims, sig, signed = jwt_parts(token)
    return header.get("alg") == "HS256" and hmac.compare_digest(hmac.new(key, signed, hashlib.sha256).digest(), sig)


def writes(counters):
    """Write requests from the counters: {(verb, resource): n}, events left out."""
    out = {}
    for e in counters.get("requests", []) or counters.get("list", []):
        verb = e["verb"].lower()
        if verb in ("get", "list", "watch"):
            continue
        if e["resource"].startswith("events"):
            continue
        out[(verb, e["resource"])] = out.get((verb, e["resource"]), 0) + e["count"]
    return out


class Operator:
    def __init__(self, ks, workdir):
        self.log_path = os.path.join(workdir, "slurmop.log")
        self.log = open(self.log_path, "wb")
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        self.proc = subprocess.Popen([SLURMOP, "--kubeconfig", ks.kubeconfig, "--metrics-addr", "127.0.0.1:0",
                                      "--health-addr", "127.0.0.1:0", "--cluster-domain", "cluster.local",
                                      "--log-level", "debug", "--token-users", "*,slurm",
                                      "--ref-poll-interval", "0.5"],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def main():
    if not os.path.exists(SLURMOP):
        print("slurmop not built", file=sys.stderr)
        return 77
    work = tempfile.mkdtemp(prefix="cluster-rc-")
    with api_server(nodes=4) as ks:
        api = Api(ks)
        for crd in load_crds() + [SM_CRD]:
            # 409: the k8s backend installed crds/ before the controller manager started
            r = api.c.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
            assert r.status in (201, 409), (crd["metadata"]["name"], r.status, r.text)
        for crd in load_crds() + [SM_CRD]:  # a real API server serves a new CRD after a moment
            wait_for("CRD %s served" % crd["metadata"]["name"], lambda: api.c.get(
                "/apis/%s/%s/%s" % (crd["spec"]["group"], crd["spec"]["versions"][0]["name"],
                                    crd["spec"]["names"]["plural"])).status == 200, timeout=30)
        api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        for s in (secret("slurm-auth-slurm", "slurm.key", SLURM_KEY), secret("slurm-auth-jwt", "jwt.key", JWT_KEY),
                  secret("slurm-db", "password", DB_PASSWORD), secret("login-sssd", "sssd.conf", SSSD_CONF)):
            api.create(CORE + "/secrets", s)
        api.create(CORE + "/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                          "metadata": {"name": "c1-files", "namespace": NS},
                                          "data": {"gres.conf": "AutoDetect=off\n"}})
        op = Operator(ks, work)
        try:
            run(ks, api, op)
        except BaseException:
            failures.append("exception")
            raise
        finally:
            code = op.stop()
            text = op.text()
            check(code == 0, "slurmop exit code %s" % code)
            if is_k8s():
                refused = sorted({"%s %s/%s" % (e.get("verb"), (e.get("objectRef") or {}).get("resource"),
                                                (e.get("objectRef") or {}).get("subresource") or "")
                                  for e in ks.audit_events(since_reset=False)
                                  if (e.get("responseStatus") or {}).get("code") == 403})
                check(not refused, "the API server answered slurmop 403 (RBAC of deploy/): %r" % refused)
            check("ERROR: AddressSanitizer" not in text and "runtime error:" not in text
                  and "LeakSanitizer" not in text, "sanitizer report in slurmop's output")
            if failures:
                print("---- slurmop log (tail) ----\n" + text[-20000:], file=sys.stderr)
    if failures:
        print("%d check(s) failed" % len(failures), file=sys.stderr)
        return 1
    print("ok")
    return 0


def get_all(api):
    """Every object the reconcilers own, by a short name."""
    paths = {
        "svc-int": CORE + "/services/c1-controller-internal",
        "svc-ctl": CORE + "/services/c1-controller",
        "cm-ctl": CORE + "/configmaps/c1-config",
        "sts-ctl": APPS + "/statefulsets/c1-controller",
        "svc-acct": CORE + "/services/acct-accounting",
        "sec-acct": CORE + "/secrets/acct-accounting",
        "sts-acct": APPS + "/statefulsets/acct-accounting",
        "svc-ra": CORE + "/services/ra-restapi",
        "dep-ra": APPS + "/deployments/ra-restapi",
        "sec-keys": CORE + "/secrets/login-ssh-host-keys",
        "cm-ssh": CORE + "/configmaps/login-ssh-config",
        "svc-login": CORE + "/services/login",
        "dep-login": APPS + "/deployments/login",
        "sec-tok": CORE + "/secrets/tok-jwt-slurm",
    }
    return {k: api.get(p) for k, p in paths.items()}


def run(ks, api, op):
    crs = {}
    for o in cluster():
        crs[o["metadata"]["name"]] = api.create(GROUP + "/" + PLURAL[o["kind"]], o)

    try:
        # The LoginSet's Secret and Deployment come after its SSH host keys, whose RSA 4096 key took over
        # 90 s under ASan on a loaded CI machine (a fresh machine's first run, the pods tests beside it).
        objs = wait_for("every owned object", lambda: (lambda a: a if all(a.values()) else None)(get_all(api)),
                        timeout=240)
    except AssertionError:
        print("missing: %r" % sorted(k for k, v in get_all(api).items() if not v), file=sys.stderr)
        raise
    ctl, acct, ra, login, tok = (crs[n] for n in ("c1", "acct", "ra", "login", "tok"))

    # ---- Controller --------------------------------------------------------
    svc = objs["svc-int"]
    check(owner_ok(svc, "Controller", ctl), "internal Service owner")
    check(labels_ok(svc, "slurmctld", "c1", "controller"), "internal Service labels")
    check(svc["metadata"]["labels"].get("team") == "hpc", "CR labels copied to the internal Service")
    check(svc["spec"].get("clusterIP") == "None" and svc["spec"].get("publishNotReadyAddresses") is True,
          "internal Service is headless")
    check(svc["spec"]["selector"] == {"app.kubernetes.io/name": "slurmctld", "app.kubernetes.io/instance": "c1"},
          "internal Service selector %r" % svc["spec"].get("selector"))
    svc = objs["svc-ctl"]
    check(owner_ok(svc, "Controller", ctl), "Service owner")
    check(svc["spec"]["selector"].get("controller.slinky.slurm.net/active") == "true", "Service selects the active pod")
    check([(p["name"], p["port"]) for p in svc["spec"]["ports"]] == [("slurmctld", 6817)], "Service ports")

    cm = objs["cm-ctl"]
    check(owner_ok(cm, "Controller", ctl), "config owner")
    conf = cm["data"]["slurm.conf"]
    for line in ("ClusterName=slurm_c1", "SlurmctldHost=c1-controller-0(c1-controller-0.c1-controller-internal.slurm)",
                 "SlurmctldAddr=c1-controller.slurm", "AuthType=auth/slurm", "AuthAltTypes=auth/jwt",
                 "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=acct-accounting",
                 "AccountingStoragePort=6819", "NodeSet=cpu Feature=cpu",
                 "PartitionName=cpu Nodes=cpu Default=YES MaxTime=UNLIMITED", "NodeSet=gpu Feature=gpu",
                 "MaxJobCount=10000", "### MERGED CONFIG ###",
                 "SlurmctldParameters=enable_configless,idle_on_node_suspend,reconfig_on_restart"):
        check(line in conf.split("\n"), "slurm.conf has %r" % line)
    check("PartitionName=gpu" not in conf, "no partition for the gpu NodeSet")
    check(conf.index("NodeSet=cpu") < conf.index("NodeSet=gpu") < conf.index("### EXTRA CONFIG ###"),
          "slurm.conf section order")
    check(cm["data"].get("cgroup.conf") == "CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n", "default cgroup.conf")

    sts = objs["sts-ctl"]
    check(owner_ok(sts, "Controller", ctl), "StatefulSet owner")
    check(labels_ok(sts, "slurmctld", "c1", "controller"), "StatefulSet labels")
    check(sts["spec"]["replicas"] == 1 and sts["spec"]["serviceName"] == "c1-controller-internal",
          "StatefulSet replicas/serviceName")
    tmpl = sts["spec"]["template"]
    ann = tmpl["metadata"]["annotations"]
    check(labels_ok(tmpl, "slurmctld", "c1", "controller"), "slurmctld pod labels")
    check(ann.get("slinky.slurm.net/slurm-config-hash") == conf_hash(cm["data"]), "slurm-config-hash")
    check(ann.get("slinky.slurm.net/slurm-key-hash") == sha256(SLURM_KEY), "slurm-key-hash")
    check(ann.get("slinky.slurm.net/jwt-key-hash") == sha256(JWT_KEY), "jwt-key-hash")
    check(ann.get("kubectl.kubernetes.io/default-container") == "slurmctld", "default container")
    check([c["name"] for c in tmpl["spec"]["containers"]] == ["slurmctld"], "slurmctld container")
    check(tmpl["spec"]["containers"][0]["image"] == "ghcr.io/slinkyproject/slurmctld:25.11", "slurmctld image")
    vct = sts["spec"].get("volumeClaimTemplates") or []
    check([v["metadata"]["name"] for v in vct] == ["statesave"], "statesave claim template")
    etc = next(v for v in tmpl["spec"]["volumes"] if v["name"] == "slurm-etc")
    srcs = json.dumps(etc["projected"]["sources"])
    for name in ("c1-config", "slurm-auth-slurm", "slurm-auth-jwt", "c1-files"):
        check('"%s"' % name in srcs, "slurm-etc projects %s" % name)

    # ---- Accounting ---------------------------------------------------------
    check(owner_ok(objs["svc-acct"], "Accounting", acct), "Accounting Service owner")
    check([(p["name"], p["port"]) for p in objs["svc-acct"]["spec"]["ports"]] == [("slurmdbd", 6819)],
          "Accounting Service port")
    sec = objs["sec-acct"]
    check(owner_ok(sec, "Accounting", acct), "slurmdbd.conf Secret owner")
    dbd = unb64(sec["data"]["slurmdbd.conf"]).decode()
    for line in ("DbdHost=acct-accounting-0", "DbdPort=6819", "StorageHost=mariadb", "StoragePort=3306",
                 "StorageUser=slurm", "StorageLoc=slurm_acct_db", "StoragePass=" + DB_PASSWORD.decode()):
        check(line in dbd.split("\n"), "slurmdbd.conf has %r" % line)
    sts = objs["sts-acct"]
    check(owner_ok(sts, "Accounting", acct), "Accounting StatefulSet owner")
    check(sts["spec"]["podManagementPolicy"] == "Parallel" and sts["spec"]["serviceName"] == "acct-accounting",
          "Accounting StatefulSet spec")
    ann = sts["spec"]["template"]["metadata"]["annotations"]
    check(ann.get("slinky.slurm.net/slurmdbd-conf-hash") == sha256(dbd.encode()), "slurmdbd-conf-hash")
    check(ann.get("slinky.slurm.net/jwt-key-hash") == sha256(JWT_KEY), "Accounting jwt-key-hash")

    # ---- RestApi ----------------------------------------------------------------
    check(owner_ok(objs["svc-ra"], "RestApi", ra), "RestApi Service owner")
    check(labels_ok(objs["svc-ra"], "slurmrestd", "ra", "restapi"), "RestApi Service labels")
    dep = objs["dep-ra"]
    check(owner_ok(dep, "RestApi", ra), "RestApi Deployment owner")
    k = dep["spec"]["template"]["spec"]["containers"][0]
    check(k["name"] == "slurmrestd" and k["args"][-1] == "0.0.0.0:6820", "slurmrestd args %r" % k.get("args"))
    check("openapi/slurmctld" not in k["args"], "slurmrestd loads slurmdbd plugins (accountingRef set)")
    check({"name": "SLURM_JWT", "value": "daemon"} in k["env"], "SLURM_JWT=daemon")

    # ---- LoginSet ---------------------------------------------------------------
    keys = objs["sec-keys"]
    check(owner_ok(keys, "LoginSet", login), "host keys owner")
    check(keys.get("immutable") is True, "host key Secret immutable")
    check(sorted(keys["data"]) == ["ssh_host_ecdsa_key", "ssh_host_ecdsa_key.pub", "ssh_host_ed25519_key",
                                   "ssh_host_ed25519_key.pub", "ssh_host_rsa_key", "ssh_host_rsa_key.pub"],
          "host key files %r" % sorted(keys["data"]))
    check(unb64(keys["data"]["ssh_host_ed25519_key.pub"]).startswith(b"ssh-ed25519 "), "Ed25519 public key")
    check(unb64(keys["data"]["ssh_host_ed25519_key"]).startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----\n"),
          "Ed25519 private key in OpenSSH format")
    if os.path.exists("/usr/bin/ssh-keygen"):
        # OpenSSH reads every private key of the Secret back to its .pub line.
        for kind in ("rsa", "ecdsa", "ed25519"):
            with tempfile.NamedTemporaryFile("wb", prefix="slurmop-hk-") as f:
                os.chmod(f.name, 0o600)
                f.write(unb64(keys["data"]["ssh_host_%s_key" % kind]))
                f.flush()
                got = subprocess.run(["/usr/bin/ssh-keygen", "-y", "-f", f.name], capture_output=True)
            pub = unb64(keys["data"]["ssh_host_%s_key.pub" % kind]).split()
            check(got.returncode == 0 and got.stdout.split()[:2] == pub[:2],
                  "ssh-keygen -y reads the %s host key back: %r" % (kind, got.stderr))
    check(unb64(keys["data"]["ssh_host_rsa_key.pub"]).startswith(b"ssh-rsa "), "RSA public key")
    check(unb64(keys["data"]["ssh_host_ecdsa_key.pub"]).startswith(b"ecdsa-sha2-nistp256 "), "ECDSA public key")
    check(b"PRIVATE KEY-----" in unb64(keys["data"]["ssh_host_rsa_key"]), "RSA private key PEM")
    ssh = objs["cm-ssh"]
    check(owner_ok(ssh, "LoginSet", login), "ssh config owner")
    check("UsePAM yes" in ssh["data"]["sshd_config"], "sshd_config")
    check(AUTHORIZED in ssh["data"]["authorized_keys"], "authorized_keys")
    check(owner_ok(objs["svc-login"], "LoginSet", login), "login Service owner")
    check([(p["name"], p["port"]) for p in objs["svc-login"]["spec"]["ports"]] == [("login", 22)], "login port")
    dep = objs["dep-login"]
    check(owner_ok(dep, "LoginSet", login), "login Deployment owner")
    ann = dep["spec"]["template"]["metadata"]["annotations"]
    check(ann.get("slinky.slurm.net/ssh-host-keys-hash") == map_hash(keys["data"], True), "ssh-host-keys-hash")
    check(ann.get("slinky.slurm.net/sshd-conf-hash") == sha256(ssh["data"]["sshd_config"].encode()), "sshd-conf-hash")
    check(ann.get("slinky.slurm.net/sssd-conf-hash") == sha256(SSSD_CONF), "sssd-conf-hash")
    mounts = [m["mountPath"] for m in dep["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]]
    check("/etc/ssh/ssh_host_ed25519_key" in mounts and "/etc/ssh/ssh_host_ed25519_key.pub" in mounts,
          "login pods mount the Ed25519 host key %r" % mounts)
    env = dep["spec"]["template"]["spec"]["containers"][0]["env"]
    check({"name": "SACKD_OPTIONS", "value": "--conf-server c1-controller.slurm:6817"} in env, "SACKD_OPTIONS")
    ls = wait_for("LoginSet status", lambda: (lambda o: o if (o.get("status") or {}).get("selector") else None)(
        api.get(GROUP + "/loginsets/login")))
    check(ls["status"]["selector"] == "app.kubernetes.io/instance=login,app.kubernetes.io/name=login",
          "LoginSet status.selector %r" % ls["status"].get("selector"))

    # ---- Token --------------------------------------------------------------------
    sec = objs["sec-tok"]
    jwt_secret = api.get(CORE + "/secrets/slurm-auth-jwt")
    refs = sec["metadata"]["ownerReferences"]
    check(len(refs) == 1 and refs[0]["kind"] == "Secret" and refs[0]["uid"] == jwt_secret["metadata"]["uid"]
          and refs[0]["controller"] is True, "Token Secret owned by the signing key %r" % refs)
    check(sec.get("immutable") is False, "Token Secret mutable (refresh)")
    token = unb64(sec["data"]["SLURM_JWT"]).decode()
    check(jwt_verifies(token, JWT_KEY), "Token JWT verifies with hmac")
    check(not jwt_verifies(token, JWT_KEY2), "Token JWT does not verify with another key")
    _, claims, _, _ = jwt_parts(token)
    check(claims.get("sun") == "slurm" and claims.get("iss") == "slurm-operator", "JWT claims %r" % claims)
    check(claims["exp"] - claims["iat"] == 900 and claims["nbf"] == claims["iat"] and claims.get("jti"),
          "JWT times %r" % claims)
    check(abs(claims["iat"] - time.time()) < 120, "JWT iat is now")
    iat = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(claims["iat"]))
    t = wait_for("Token status", lambda: (lambda o: o if (o.get("status") or {}).get("issuedAt") == iat else None)(
        api.get(GROUP + "/tokens/tok")))
    check(t["status"]["issuedAt"] == iat, "Token status.issuedAt")

    # ---- active controller label ---------------------------------------------------
    if is_k8s():  # the StatefulSet controller makes it
        pod = wait_for("c1-controller-0 made by the StatefulSet controller",
                       lambda: api.get(CORE + "/pods/c1-controller-0"), timeout=60)
    else:
        pod = api.create(CORE + "/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "c1-controller-0", "namespace": NS,
                         "labels": {"app.kubernetes.io/name": "slurmctld", "app.kubernetes.io/instance": "c1"}},
            "spec": {"containers": [{"name": "slurmctld", "image": "slurmctld"}]}})
    wait_for("active label on c1-controller-0", lambda: (api.get(CORE + "/pods/c1-controller-0")["metadata"]["labels"]
                                                         .get("controller.slinky.slurm.net/active") == "true"))
    # Someone takes it off: it comes back.
    api.patch(CORE + "/pods/c1-controller-0", {"metadata": {"labels": {"controller.slinky.slurm.net/active": None}}})
    wait_for("active label restored", lambda: (api.get(CORE + "/pods/c1-controller-0")["metadata"]["labels"]
                                               .get("controller.slinky.slurm.net/active") == "true"))
    del pod

    # ---- steady state: no writes -----------------------------------------------------
    time.sleep(2)
    ks.reset_counters()
    time.sleep(3)
    w = writes(ks.counters())
    check(not w, "a converged cluster causes no writes, got %r" % w)

    # ---- extraConf change ---------------------------------------------------------------
    before = get_all(api)
    ks.reset_counters()
    api.patch(GROUP + "/controllers/c1", {"spec": {"extraConf": EXTRA_CONF + "\nMaxArraySize=2000"}})
    wait_for("new slurm.conf", lambda: "MaxArraySize=2000" in api.get(CORE + "/configmaps/c1-config")["data"]["slurm.conf"])
    time.sleep(3)
    after = get_all(api)
    w = writes(ks.counters())
    # The status write: SlurmVersionSupported records the generation it was computed for.
    want = {("patch", "controllers.slinky.slurm.net"): 1, ("patch", "configmaps"): 1, ("patch", "statefulsets.apps"): 1,
            ("patch", "controllers.slinky.slurm.net/status"): 1}
    if is_k8s():
        # The audit log counts the operator's writes only, not the test's
        # patch. (The real API server drops an empty annotations map; the
        # diff treats that as no difference, so no no-op patch is sent.)
        want.pop(("patch", "controllers.slinky.slurm.net"))
    # The slurmctld pod gets the new ConfigMap's hash (its kubelet refreshes
    # /etc/slurm for it); on a real control plane the StatefulSet controller
    # may replace the pod first (the template rolled), whose first patch then
    # sets the active label too, or not within these 3 s.
    pod_w = w.pop(("patch", "pods"), 0)
    check(pod_w == 1 or (is_k8s() and pod_w <= 2), "extraConf change: %d slurmctld pod patches, want 1" % pod_w)
    check(w == want, "extraConf change: writes %r, want %r" % (w, want))
    changed = sorted(k for k in before if before[k]["metadata"]["resourceVersion"] != after[k]["metadata"]["resourceVersion"])
    check(changed == ["cm-ctl", "sts-ctl"], "extraConf change touched %r" % changed)
    a0 = before["sts-ctl"]["spec"]["template"]["metadata"]["annotations"]
    a1 = after["sts-ctl"]["spec"]["template"]["metadata"]["annotations"]
    check(a1["slinky.slurm.net/slurm-config-hash"] == conf_hash(after["cm-ctl"]["data"])
          and a1["slinky.slurm.net/slurm-config-hash"] != a0["slinky.slurm.net/slurm-config-hash"],
          "slurm-config-hash follows the new ConfigMap")
    diff = {k for k in set(a0) | set(a1) if a0.get(k) != a1.get(k)}
    check(diff == {"slinky.slurm.net/slurm-config-hash"}, "only the config hash changed: %r" % diff)
    s0 = json.loads(json.dumps(before["sts-ctl"]["spec"]))
    s1 = json.loads(json.dumps(after["sts-ctl"]["spec"]))
    s0["template"]["metadata"]["annotations"].pop("slinky.slurm.net/slurm-config-hash")
    s1["template"]["metadata"]["annotations"].pop("slinky.slurm.net/slurm-config-hash")
    check(s0 == s1, "nothing else changed in the StatefulSet spec")

    # ---- JWT key rotation ------------------------------------------------------------------
    old_token = token
    before = get_all(api)
    api.patch(CORE + "/secrets/slurm-auth-jwt", {"data": {"jwt.key": b64(JWT_KEY2)}})

    def reminted():
        s = api.get(CORE + "/secrets/tok-jwt-slurm")
        t = unb64(s["data"]["SLURM_JWT"]).decode()
        return t if t != old_token and jwt_verifies(t, JWT_KEY2) else None
    token = wait_for("a JWT signed with the new key", reminted)
    check(not jwt_verifies(token, JWT_KEY), "the new JWT does not verify with the old key")
    wait_for("slurmctld re-rolled", lambda: api.get(APPS + "/statefulsets/c1-controller")["spec"]["template"]["metadata"]
             ["annotations"]["slinky.slurm.net/jwt-key-hash"] == sha256(JWT_KEY2))
    wait_for("slurmdbd re-rolled", lambda: api.get(APPS + "/statefulsets/acct-accounting")["spec"]["template"]["metadata"]
             ["annotations"]["slinky.slurm.net/jwt-key-hash"] == sha256(JWT_KEY2))
    _, claims, _, _ = jwt_parts(token)
    iat = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(claims["iat"]))
    wait_for("Token status after re-mint", lambda: (api.get(GROUP + "/tokens/tok").get("status") or {}).get("issuedAt") == iat)
    time.sleep(2)
    after = get_all(api)
    changed = sorted(k for k in before if before[k]["metadata"]["resourceVersion"] != after[k]["metadata"]["resourceVersion"])
    check(changed == ["sec-tok", "sts-acct", "sts-ctl"], "key rotation touched %r" % changed)

    # ---- which Slurm a deployed cluster supports (issue 32: 22.05 has no auth/slurm) -------
    def version_cond(name):
        st = api.get(GROUP + "/controllers/" + name).get("status") or {}
        return [c for c in st.get("conditions", []) if c["type"] == "SlurmVersionSupported"]
    wait_for("SlurmVersionSupported on c1", lambda: version_cond("c1"))
    c = version_cond("c1")[0]
    check(c["status"] == "True" and c["reason"] == "Supported" and "25.11" in c["message"], "c1 condition %r" % c)
    api.patch(GROUP + "/controllers/c1", {"spec": {"slurmctld": {"image": "slurmctld:22.05"}}})
    wait_for("22.05 is refused in the status", lambda: version_cond("c1") and version_cond("c1")[0]["status"] == "False")
    c = version_cond("c1")[0]
    check(c["reason"] == "Unsupported" and "auth/slurm" in c["message"] and "23.11" in c["message"],
          "22.05 condition %r" % c)
    api.patch(GROUP + "/controllers/c1", {"spec": {"slurmctld": {"image": "slurmctld:latest"}}})
    wait_for("an untagged version is Unknown", lambda: version_cond("c1")[0]["status"] == "Unknown")
    api.patch(GROUP + "/controllers/c1", {"spec": {"slurmctld": {"image": "ghcr.io/slinkyproject/slurmctld:25.11"}}})
    wait_for("back to Supported", lambda: version_cond("c1")[0]["status"] == "True")

    # ---- watches: a config file ConfigMap and NodeSets regenerate slurm.conf ---------------
    api.patch(CORE + "/configmaps/c1-files", {"data": {"cgroup.conf": "CgroupPlugin=autodetect\n"}})
    wait_for("cgroup.conf supplied by a config file", lambda: "cgroup.conf" not in
             api.get(CORE + "/configmaps/c1-config")["data"])
    # What NodeSets add to slurm.conf (their lines, MaxNodeCount) never rolls
    # slurmctld: without persistence a restarted slurmctld forgets every
    # dynamic node, and 24.11's slurmds never register again (real pods). The
    # reconfigure sidecar applies it; the StatefulSet stays as it is.
    def sts_current():
        sts = api.get(APPS + "/statefulsets/c1-controller")
        cm = api.get(CORE + "/configmaps/c1-config")
        return sts if sts["spec"]["template"]["metadata"]["annotations"][
            "slinky.slurm.net/slurm-config-hash"] == conf_hash(cm["data"]) else None
    sts_before = wait_for("the StatefulSet rolled for the cgroup.conf change", sts_current)
    api.create(GROUP + "/nodesets", cr("NodeSet", "mem", {"controllerRef": {"name": "c1"}, "replicas": 0,
                                                          "partition": {"enabled": True, "config": "MaxTime=60"},
                                                          "slurmd": {"image": "slurmd"}, "logfile": {"image": SIDECAR}}))
    wait_for("NodeSet mem in slurm.conf", lambda: "PartitionName=mem Nodes=mem MaxTime=60" in
             api.get(CORE + "/configmaps/c1-config")["data"]["slurm.conf"].split("\n"))
    # The running slurmctld pod carries the new ConfigMap's hash: the
    # annotation makes its kubelet project the new slurm.conf at once (not at
    # its next sync, about a minute later) for the reconfigure sidecar.
    wait_for("the slurmctld pod told of the new slurm.conf", lambda: (lambda pod, cm: pod and cm and (
        pod["metadata"].get("annotations") or {}).get("controller.slinky.slurm.net/config-hash") == map_hash(
        cm["data"], False))(api.get(CORE + "/pods/c1-controller-0"), api.get(CORE + "/configmaps/c1-config")))
    api.patch(GROUP + "/nodesets/mem", {"spec": {"partition": {"config": "MaxTime=120"}}})
    wait_for("partition change in slurm.conf", lambda: "PartitionName=mem Nodes=mem MaxTime=120" in
             api.get(CORE + "/configmaps/c1-config")["data"]["slurm.conf"].split("\n"))
    # MaxNodeCount follows the fleet (issue 32: it was 1024 whatever the NodeSets): 3000 replicas
    # more make it 4096. An extraConf that slurmop refuses (a '$' a shell would expand; the CRD's
    # pattern lets it through) keeps the NodeSet from making its 3000 pods; the Controller counts
    # the replicas all the same.
    def max_nodes():
        conf = api.get(CORE + "/configmaps/c1-config")["data"]["slurm.conf"].split("\n")
        return [l for l in conf if l.startswith("MaxNodeCount=")]
    check(max_nodes() == ["MaxNodeCount=1024"], "a small fleet keeps MaxNodeCount=1024: %r" % max_nodes())
    api.patch(GROUP + "/nodesets/mem", {"spec": {"replicas": 3000, "extraConf": "Weight=$HOME"}})
    wait_for("MaxNodeCount sized from 3000 replicas", lambda: max_nodes() == ["MaxNodeCount=4096"])
    cm = api.get(CORE + "/configmaps/c1-config")
    time.sleep(1)
    sts_now = api.get(APPS + "/statefulsets/c1-controller")
    # (generation and spec: on a real control plane the StatefulSet
    # controller's status writes move the resourceVersion.)
    check(sts_now["metadata"]["generation"] == sts_before["metadata"]["generation"]
          and sts_now["spec"] == sts_before["spec"]
          and sts_now["spec"]["template"]["metadata"]["annotations"]["slinky.slurm.net/slurm-config-hash"]
          == conf_hash(cm["data"]),
          "a NodeSet created, repartitioned and scaled past MaxNodeCount left the slurmctld StatefulSet alone")
    check(not api.get(CORE + "/pods?labelSelector=app.kubernetes.io%2Finstance%3Dmem")["items"],
          "the refused NodeSet made no pods")
    # Scaling back down does not shrink it (that would restart slurmctld for nothing).
    api.patch(GROUP + "/nodesets/mem", {"spec": {"replicas": 0, "extraConf": None}})
    time.sleep(1)
    check(max_nodes() == ["MaxNodeCount=4096"], "MaxNodeCount never shrinks: %r" % max_nodes())
    # Its partition would stay in slurm.conf while Slurm, which this test never
    # runs, cannot say that no job record is in it (DRAIN-SAFETY.md, Deleting a
    # NodeSet): the opt-out lets it go at once.
    api.patch(GROUP + "/nodesets/mem",
              {"metadata": {"annotations": {"nodeset.slinky.slurm.net/delete-without-drain": "true"}}})
    api.delete(GROUP + "/nodesets/mem")
    wait_for("NodeSet mem gone from slurm.conf", lambda: "NodeSet=mem" not in
             api.get(CORE + "/configmaps/c1-config")["data"]["slurm.conf"])
    cm = api.get(CORE + "/configmaps/c1-config")
    time.sleep(0.5)
    sts_now = api.get(APPS + "/statefulsets/c1-controller")
    check(sts_now["spec"]["template"]["metadata"]["annotations"]["slinky.slurm.net/slurm-config-hash"]
          == conf_hash(cm["data"]), "config hash after the watches")
    check(sts_now["metadata"]["generation"] == sts_before["metadata"]["generation"]
          and sts_now["spec"] == sts_before["spec"], "a NodeSet deleted left the slurmctld StatefulSet alone")

    # ---- external Controller: the ConfigMap only -------------------------------------------
    ext = api.create(GROUP + "/controllers", cr("Controller", "ext", {
        "external": True, "externalConfig": {"host": "slurmctld.example.org", "port": 6817},
        "accountingRef": {"name": "acct"}}))
    cm = wait_for("ext-config", lambda: api.get(CORE + "/configmaps/ext-config"))
    check(owner_ok(cm, "Controller", ext), "external config owner")
    check("SlurmctldHost=slurmctld.example.org" in cm["data"]["slurm.conf"].split("\n"),
          "external slurm.conf %r" % cm["data"]["slurm.conf"])
    time.sleep(1)
    check(all(api.get(p) is None for p in (CORE + "/services/ext-controller", CORE + "/services/ext-controller-internal",
                                           APPS + "/statefulsets/ext-controller")),
          "an external Controller gets no Services or StatefulSet")

    # ---- validation: an invalid Controller gets a condition and nothing else ---------------
    bad_spec = {"jwtKeyRef": {"name": "slurm-auth-jwt", "key": "jwt.key"}, "persistence": {"enabled": False},
                "slurmctld": {"image": "ghcr.io/slinkyproject/slurmctld:25.11"}, "logfile": {"image": SIDECAR}}
    if is_k8s():
        # The CRD's CEL rule refuses it first: slurmop never sees it.
        r = api.c.post(GROUP + "/controllers", cr("Controller", "bad", bad_spec))
        check(r.status == 422 and "slurmKeyRef must be set when external is false" in r.text,
              "the API server refuses a Controller without slurmKeyRef: %d %s" % (r.status, r.text[:300]))
    else:
        ks.reset_counters()
        bad = api.create(GROUP + "/controllers", cr("Controller", "bad", {
            "jwtKeyRef": {"name": "slurm-auth-jwt", "key": "jwt.key"}, "persistence": {"enabled": False},
            "slurmctld": {"image": "ghcr.io/slinkyproject/slurmctld:25.11"}, "logfile": {"image": SIDECAR}}))
        cond = wait_for("Valid=False condition", lambda: next(
            (c for c in (api.get(GROUP + "/controllers/bad").get("status") or {}).get("conditions", [])
             if c["type"] == "Valid" and c["status"] == "False"), None))
        check("slurmKeyRef" in cond["message"] and cond["reason"] == "ValidationFailed", "validation condition %r" % cond)
        time.sleep(1)
        check(api.get(CORE + "/configmaps/bad-config") is None and api.get(CORE + "/services/bad-controller") is None,
              "an invalid Controller gets no objects")
        w = writes(ks.counters())
        check(set(w) <= {("create", "controllers.slinky.slurm.net"), ("patch", "controllers.slinky.slurm.net/status")},
              "invalid Controller: only its status is written, got %r" % w)
        evs = api.get(CORE + "/events") or {}
        evs2 = api.get("/apis/events.k8s.io/v1/namespaces/%s/events" % NS) or {}
        reasons = [e.get("reason") for e in (evs.get("items") or []) + (evs2.get("items") or [])
                   if (e.get("regarding") or e.get("involvedObject") or {}).get("name") == "bad"]
        check("ValidationFailed" in reasons, "ValidationFailed event, got %r" % reasons)
        # Fixed: the condition goes away and the objects come.
        api.patch(GROUP + "/controllers/bad", {"spec": {"slurmKeyRef": {"name": "slurm-auth-slurm", "key": "slurm.key"}}})
        wait_for("bad-config", lambda: api.get(CORE + "/configmaps/bad-config"))
        wait_for("condition removed", lambda: not any(
            c["type"] == "Valid" for c in (api.get(GROUP + "/controllers/bad").get("status") or {}).get("conditions", [])))
        del bad

    # ---- ServiceMonitor -----------------------------------------------------------------------
    sm_path = "/apis/monitoring.coreos.com/v1/namespaces/%s/servicemonitors/c1-controller" % NS
    check(api.get(sm_path) is None, "no ServiceMonitor while metrics are off")
    api.patch(GROUP + "/controllers/c1", {"spec": {"metrics": {"enabled": True, "serviceMonitor": {"enabled": True}}}})
    sm = wait_for("ServiceMonitor", lambda: api.get(sm_path))
    check(owner_ok(sm, "Controller", ctl), "ServiceMonitor owner")
    paths = [e.get("path") for e in sm["spec"]["endpoints"]]
    check(paths == ["/metrics/jobs", "/metrics/nodes", "/metrics/partitions", "/metrics/scheduler"],
          "ServiceMonitor endpoints %r" % paths)
    wait_for("MetricsType in slurm.conf", lambda: "MetricsType=metrics/openmetrics" in
             api.get(CORE + "/configmaps/c1-config")["data"]["slurm.conf"])
    api.patch(GROUP + "/controllers/c1", {"spec": {"metrics": {"serviceMonitor": {"enabled": False}}}})
    wait_for("ServiceMonitor deleted", lambda: api.get(sm_path) is None)

    # ---- a short-lived Token keeps being refreshed ----------------------------------------------
    api.create(GROUP + "/tokens", cr("Token", "short", {"username": "alice", "lifetime": "3s",
                                                       "jwtKeyRef": {"name": "slurm-auth-jwt", "key": "jwt.key"}}))
    seen = []

    def next_token():
        s = api.get(CORE + "/secrets/short-jwt-alice")
        if s is None:
            return None
        t = unb64(s["data"]["SLURM_JWT"]).decode()
        if t not in seen:
            seen.append(t)
        return len(seen) >= 3
    wait_for("three successive tokens", next_token, timeout=30)
    for t in seen:
        _, c, _, _ = jwt_parts(t)
        check(jwt_verifies(t, JWT_KEY2) and c["sun"] == "alice" and c["exp"] - c["iat"] == 3, "short token %r" % c)

    # ---- host keys were generated once ----------------------------------------------------------
    text = op.text()
    check(text.count("loginset slurm/login: generating SSH host keys") == 1,
          "host keys generated %d times" % text.count("loginset slurm/login: generating SSH host keys"))

    # ---- stopping while keys are being generated --------------------------------------------------
    # The job on the threadpool outlives the reconciler; slurmop must still
    # exit cleanly (checked by the caller: exit status, sanitizers).
    api.create(GROUP + "/loginsets", cr("LoginSet", "late", {"controllerRef": {"name": "c1"},
                                                             "sssdConfRef": {"name": "login-sssd", "key": "sssd.conf"},
                                                             "login": {"image": "login"}, "initconf": {"image": SIDECAR}}))
    wait_for("key generation for late", lambda: "loginset slurm/late: generating SSH host keys" in op.text())


if __name__ == "__main__":
    sys.exit(main())
