"""slinky_parity: the objects Slinky's slurm-operator creates and the ones
slurmop creates from the same custom resources, compared field by field.

One real control plane (tests/k8s/cluster.sh, through tests/lib/backend.py),
Slinky's CRDs (taken from its Go module in the module cache, never copied
into the tree; the test first checks that crds/ declares the same group,
version, kinds, plurals and scope). The same Secrets, ConfigMaps and custom
resources (a Controller with persistence and accounting, NodeSets in
StatefulSet and DaemonSet mode with volumeClaimTemplates, one on the host
network, a LoginSet with sssd, a RestApi, an Accounting, a Token) go into
two namespaces, each with a neighbour `<namespace>-xns` holding a LoginSet
whose controllerRef names the Controller across namespaces
(controllerRef.namespace; not a NodeSet, which Slinky 1.1.0 cannot run in
another namespace than its Controller's; Slinky 1.2 follows no such
reference and makes nothing for it):

  1. namespace slinky: Slinky's manager (tests/slinky/build.sh) runs with
     its ServiceAccount and the ClusterRole of its module's config/rbac; it
     has no namespace flag and watches every namespace, so it runs alone
     first, until what it made stops changing, and is stopped before the
     second namespace gets its resources. Its webhook server is a separate
     binary that does not run: the API server applies the CRDs' defaults,
     nothing else.
  2. namespace slurmop: slurmop (`--namespace slurmop`, the ServiceAccount
     of deploy/'s RBAC) does the same.

The NodeSet edge has taintKubeNodes: once each side has settled, the Nodes
running its pods must carry the worker taint (the same taint on both sides;
compared as a pseudo-object NodeTaint/edge); the taints Slinky left are
removed before slurmop runs.

Then every object in each namespace that an operator made (not the inputs,
not what Kubernetes' own controllers made from a StatefulSet or Deployment,
not Events) is normalized (namespace, uids, timestamps, resourceVersions,
status, the scheduler's nodeName and the Node topology labels the
binding copies onto a pod; JWTs compared by their claims without
iat/exp; SSH host keys by their type) and compared: kind, name, labels,
annotations, spec, data. The generated files in ConfigMaps and Secrets are
compared byte for byte. A difference fails the test unless
tests/slinky/known-differences.txt lists it with its reason; every listed
reason must also be in docs/slinky.md's "Known differences from Slinky", and a
listed difference that no longer occurs fails too (the list stays exact).

The version is SLURMOP_SLINKY_VERSION, else v1.2.1, else (its source
archives absent, said in a FALLBACK banner) v1.1.0, each with its own list
(known-differences.txt, known-differences-v1.1.0.txt). From 1.2 the CRDs
are replaced by crds/ before slurmop's run: 1.2's have lost fields slurmop
serves (references' namespace, taintKubeNodes).

Skipped (77) when Go is missing, the control plane or Slinky's manager is not
built (SLURMOP_SLINKY_BUILD=1 builds it first), or slurmop is not built.
SLINKY_PARITY_DUMP=DIR writes both sides' normalized objects there.
"""

import base64
import copy
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

import backend  # noqa: E402
from slurmop import Slurmop, slurmop_binary, yaml_to_json, SRC  # noqa: E402

GROUP = "slinky.slurm.net"
NS_SLINKY = "parity-slinky"
NS_SLURMOP = "parity-slurmop"
# The neighbour namespace of each side (its objects are compared under
# "<name>+xns") and the NodeSet with taintKubeNodes.
XNS = "-xns"
TAINT = "nodeset.slinky.slurm.net/worker"
TAINTED_NODESET = "edge"
SLINKY_SA_NS = "slinky-system"
SLINKY_SA = "slinky"
INPUT = "parity.slurmop.test/input"
# The release compared with: SLURMOP_SLINKY_VERSION, else v1.2.1 (built
# from source archives), falling back to v1.1.0 (the module proxy's) when
# the archives are not on this machine. Each has its own list; the default
# one's reasons are also in docs/slinky.md.
DEFAULT_VERSION = "v1.2.1"
ALLOW_FILE = os.path.join(HERE, "known-differences.txt")
README = os.path.join(SRC, "docs", "slinky.md")


def skip(why):
    print("SKIP: " + why, flush=True)
    sys.exit(77)


def slinky_env():
    """build.sh's exports for the version compared with (SLINKY_VERSION among
    them), plus ALLOW_FILE: the list of known differences for it."""
    if not shutil.which("go"):
        skip("Go is not installed (tests/slinky/build.sh)")
    asked = os.environ.get("SLURMOP_SLINKY_VERSION")
    p, version = _build(asked or DEFAULT_VERSION)
    if p.returncode == 77 and not asked:
        # The archives of v1.2.1 are not here: compare with v1.1.0, saying so.
        why = p.stderr.strip()
        p, version = _build("v1.1.0")
        print("=" * 78 + "\nFALLBACK: Slinky %s cannot be built on this machine, so this run compares with "
              "v1.1.0\n(the newest release the module proxy serves; its own known-differences list):\n%s\n"
              % (DEFAULT_VERSION, why) + "=" * 78, flush=True)
    if p.returncode == 77:
        skip("Slinky %s cannot be built here: %s" % (version, p.stderr.strip()[-1500:]))
    if p.returncode != 0:
        if os.environ.get("SLURMOP_SLINKY_BUILD") != "1":
            skip("Slinky's manager %s is not built: run `bash tests/slinky/build.sh --version %s`" % (version, version))
        raise SystemExit("tests/slinky/build.sh failed:\n" + p.stderr[-3000:])
    env = {}
    for line in p.stdout.splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line[len("export "):].split("=", 1)
            env[k] = v
    env["ALLOW_FILE"] = ALLOW_FILE if version != "v1.1.0" else os.path.join(HERE, "known-differences-v1.1.0.txt")
    return env


def _build(version):
    args = ["--version", version]
    if os.environ.get("SLURMOP_SLINKY_BUILD") != "1":
        args.append("--check")
    return subprocess.run(["bash", os.path.join(HERE, "build.sh")] + args, capture_output=True, text=True), version


def legacy(senv):
    """Slinky 1.1.0: the CRDs have the cross-namespace references and
    taintKubeNodes that 1.1.1 and 1.2.0 removed."""
    return senv["SLINKY_VERSION"] == "v1.1.0"


# ---- the inputs ---------------------------------------------------------------

SLURM_KEY = bytes(range(256)) * 4
JWT_KEY = b"parity-jwt-key-" * 8
SSSD_CONF = b"""[sssd]
config_file_version = 2
services = nss,pam
domains = DEFAULT
[domain/DEFAULT]
auth_provider = ldap
id_provider = ldap
ldap_uri = ldap://ldap.example.com
"""
AUTHORIZED = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIParityParityParityParityParityParityPari user@example\n"
SIDECAR = "docker.io/library/alpine:latest"
# Slinky's manager reads an empty controllerRef.namespace as the namespace ""
# (its webhook, which does not run here, or its chart fills it in): the
# references name their namespace, as the chart writes them.
NS_PLACEHOLDER = "@NAMESPACE@"
IMG = "ghcr.io/slinkyproject/%s:25.11-ubuntu24.04"


def inputs():
    """Secrets, ConfigMaps and custom resources, without a namespace; the
    ones of the neighbour namespace (<ns>-xns) are marked "_xns"."""
    lab = {INPUT: "true"}

    def secret(name, data):
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "labels": lab},
                "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}

    def cm(name, data):
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": lab}, "data": data}

    def cr(kind, name, spec, labels=None, annotations=None):
        meta = {"name": name, "labels": dict(labels or {}, **{"app.kubernetes.io/part-of": "parity"})}
        if annotations:
            meta["annotations"] = annotations
        return {"apiVersion": GROUP + "/v1beta1", "kind": kind, "metadata": meta, "spec": spec}

    keys = {"slurmKeyRef": {"name": "slurm-key", "key": "slurm.key"},
            "jwtKeyRef": {"name": "slurm-jwt", "key": "jwt.key"}}
    ctl = dict(keys)
    ctl.update({
        "accountingRef": {"name": "acct", "namespace": NS_PLACEHOLDER},
        "extraConf": "SlurmctldParameters=enable_configless\nMaxJobCount=10000",
        "configFileRefs": [{"name": "extra-files"}],
        "prologScriptRefs": [{"name": "prolog"}],
        "epilogScriptRefs": [{"name": "epilog"}],
        "persistence": {"enabled": True, "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "4Gi"}}},
        "slurmctld": {"image": IMG % "slurmctld"},
        "reconfigure": {"image": IMG % "slurmctld"},
        "logfile": {"image": SIDECAR},
    })
    acct = dict(keys)
    acct.update({"storageConfig": {"host": "mariadb", "port": 3306, "database": "slurm_acct_db",
                                   "username": "slurm",
                                   "passwordKeyRef": {"name": "mariadb-password", "key": "password"}},
                 "slurmdbd": {"image": IMG % "slurmdbd"}})
    claim = [{"metadata": {"name": "scratch"},
              "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
    worker = {"slurmd": {"image": IMG % "slurmd"}, "logfile": {"image": SIDECAR}}
    return [
        secret("slurm-key", {"slurm.key": SLURM_KEY}),
        secret("slurm-jwt", {"jwt.key": JWT_KEY}),
        secret("mariadb-password", {"password": b"parity-db-password"}),
        secret("sssd-conf", {"sssd.conf": SSSD_CONF}),
        cm("extra-files", {"gres.conf": "AutoDetect=off\n", "cgroup.conf": "CgroupPlugin=autodetect\n"}),
        cm("prolog", {"00-prolog.sh": "#!/bin/sh\nexit 0\n"}),
        cm("epilog", {"00-epilog.sh": "#!/bin/sh\nexit 0\n"}),
        cr("Accounting", "acct", acct),
        # slurmop lets the neighbour's LoginSet join only with this annotation (Slinky ignores it).
        cr("Controller", "slurm", ctl, labels={"team": "hpc"},
           annotations={"slinky.slurm.net/allowed-namespaces": NS_PLACEHOLDER + XNS}),
        cr("RestApi", "slurm", {"controllerRef": {"name": "slurm", "namespace": NS_PLACEHOLDER}, "replicas": 1,
                                "slurmrestd": {"image": IMG % "slurmrestd"}}),
        # StatefulSet mode, two replicas, a claim template.
        cr("NodeSet", "cpu", dict(worker, controllerRef={"name": "slurm", "namespace": NS_PLACEHOLDER}, replicas=2, scalingMode="StatefulSet",
                                  partition={"enabled": True, "config": "Default=YES MaxTime=UNLIMITED"},
                                  extraConf="Features=cpu",
                                  volumeClaimTemplates=claim,
                                  template={"spec": {"hostname": "cpu-"}})),
        # taintKubeNodes: its Nodes get the worker taint once its pods run (no claim
        # template: nothing provisions volumes here, and a pod waiting for its claim never runs).
        cr("NodeSet", "edge", dict(worker, controllerRef={"name": "slurm", "namespace": NS_PLACEHOLDER}, replicas=1,
                                   scalingMode="StatefulSet", taintKubeNodes=True,
                                   template={"spec": {"hostname": "edge-"}})),
        # DaemonSet mode on the host network: one pod per GPU node.
        cr("NodeSet", "gpu", dict(worker, controllerRef={"name": "slurm", "namespace": NS_PLACEHOLDER}, scalingMode="DaemonSet",
                                  partition={"enabled": True},
                                  volumeClaimTemplates=claim,
                                  template={"spec": {"hostNetwork": True,
                                                     "nodeSelector": {"node-pool": "gpu"}}})),
        cr("LoginSet", "login", {"controllerRef": {"name": "slurm", "namespace": NS_PLACEHOLDER}, "replicas": 1,
                                 "sssdConfRef": {"name": "sssd-conf", "key": "sssd.conf"},
                                 "rootSshAuthorizedKeys": AUTHORIZED,
                                 "login": {"image": IMG % "login"},
                                 "initconf": {"image": SIDECAR}}),
        cr("Token", "admin", {"username": "slurm", "lifetime": "15m",
                              "jwtKeyRef": {"name": "slurm-jwt", "key": "jwt.key"}}),
        # The neighbour namespace: a LoginSet of the Controller across namespaces, and the
        # Secrets its pods mount (a pod mounts Secrets of its own namespace only). Not a
        # NodeSet: Slinky 1.1.0 makes the Controller's shared worker Service in the
        # Controller's namespace owned by every NodeSet of the Controller, and a NodeSet of
        # another namespace makes that ownerReference, and so every NodeSet's pass, fail.
        dict(secret("slurm-key", {"slurm.key": SLURM_KEY}), _xns=True),
        dict(secret("sssd-conf", {"sssd.conf": SSSD_CONF}), _xns=True),
        dict(cr("LoginSet", "remote", {"controllerRef": {"name": "slurm", "namespace": NS_PLACEHOLDER},
                                       "replicas": 1, "sssdConfRef": {"name": "sssd-conf", "key": "sssd.conf"},
                                       "login": {"image": IMG % "login"}, "initconf": {"image": SIDECAR}}),
             _xns=True),
    ]


SM_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {"group": "monitoring.coreos.com",
             "names": {"kind": "ServiceMonitor", "listKind": "ServiceMonitorList", "plural": "servicemonitors",
                       "singular": "servicemonitor"},
             "scope": "Namespaced",
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
}


# ---- the CRDs -------------------------------------------------------------------

def crd_identity(docs):
    out = {}
    for d in docs:
        if not d or d.get("kind") != "CustomResourceDefinition":
            continue
        s = d["spec"]
        out[s["names"]["kind"]] = (s["group"], tuple(sorted((v["name"], bool(v.get("served")), bool(v.get("storage")))
                                                            for v in s["versions"])),
                                   s["names"]["plural"], s["scope"],
                                   tuple(sorted(s["names"].get("shortNames") or [])))
    return out


def check_crds(slinky_dir):
    """Ours and Slinky's declare the same resources; returns Slinky's files."""
    import glob
    theirs = sorted(glob.glob(os.path.join(slinky_dir, "config", "crd", "bases", "*.yaml")))
    ours = sorted(glob.glob(os.path.join(SRC, "crds", "slinky.slurm.net_*.yaml")))
    a, b = crd_identity(yaml_to_json(theirs)), crd_identity(yaml_to_json(ours))
    if a != b:
        raise AssertionError("crds/ and Slinky's CRDs declare different resources:\n slinky %r\n ours   %r" % (a, b))
    print("CRDs: crds/ and Slinky's config/crd/bases declare the same %d kinds (%s)" %
          (len(a), ", ".join("%s %s/%s" % (k, v[0], v[1][0][0]) for k, v in sorted(a.items()))), flush=True)
    return theirs


# ---- collecting and normalizing ---------------------------------------------------

# (API prefix, plural, kind) of every namespaced resource an operator may write.
RESOURCES = [
    ("/api/v1", "configmaps", "ConfigMap"),
    ("/api/v1", "secrets", "Secret"),
    ("/api/v1", "services", "Service"),
    ("/api/v1", "pods", "Pod"),
    ("/api/v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
    ("/api/v1", "serviceaccounts", "ServiceAccount"),
    ("/apis/apps/v1", "statefulsets", "StatefulSet"),
    ("/apis/apps/v1", "deployments", "Deployment"),
    ("/apis/apps/v1", "daemonsets", "DaemonSet"),
    ("/apis/apps/v1", "controllerrevisions", "ControllerRevision"),
    ("/apis/policy/v1", "poddisruptionbudgets", "PodDisruptionBudget"),
    ("/apis/monitoring.coreos.com/v1", "servicemonitors", "ServiceMonitor"),
    ("/apis/rbac.authorization.k8s.io/v1", "roles", "Role"),
    ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding"),
]
# Made by Kubernetes itself in every namespace.
BUILTIN = {("ConfigMap", "kube-root-ca.crt"), ("ServiceAccount", "default")}
# Made by Kubernetes' controllers from what an operator wrote.
KUBE_OWNERS = {"StatefulSet", "ReplicaSet", "DaemonSet", "Deployment", "Job"}


def collect_side(client, ns):
    """collect() of ns and of its neighbour ns-xns, whose names get "+xns"."""
    objs = collect(client, ns)
    for (kind, name), o in collect(client, ns + XNS).items():
        objs[(kind, name + "+xns")] = o
    return objs


def collect(client, ns):
    objs = {}
    for prefix, plural, kind in RESOURCES:
        for _ in range(50):  # a CRD just made answers 429 while its storage starts
            r = client.get("%s/namespaces/%s/%s" % (prefix, ns, plural))
            if r.status != 429:
                break
            time.sleep(0.2)
        if r.status == 404:
            continue
        assert r.status == 200, r.text
        for o in r.json().get("items") or []:
            m = o["metadata"]
            if (kind, m["name"]) in BUILTIN or (m.get("labels") or {}).get(INPUT) == "true":
                continue
            owners = {x.get("kind") for x in m.get("ownerReferences") or []}
            if owners & KUBE_OWNERS:
                continue
            # A StatefulSet's claims (the Controller's state) are the
            # StatefulSet controller's, named <template>-<statefulset>-<n>.
            if kind == "PersistentVolumeClaim" and not owners and _sts_claim(client, ns, m["name"]):
                continue
            o["kind"] = kind
            objs[(kind, object_key(o))] = o
    return objs


def object_key(o):
    """The name an object is compared under: its own, except for names with
    a random or hashed part. A DaemonSet-mode worker pod (generateName) is
    <generateName><its node>; a ControllerRevision <owner>@<revision>."""
    m = o["metadata"]
    if o["kind"] == "Pod" and m.get("generateName"):
        # A DaemonSet-mode pod is pinned to its Node by a required
        # matchFields term: keyed by that Node, whatever its random suffix
        # (five characters that can all be digits: "gpu-25988" once looked
        # like an ordinal). Otherwise the pod's own name, unless it has a
        # random part (not <generateName><ordinal>).
        node = None
        for term in (((o["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []:
            for f in term.get("matchFields") or []:
                if f.get("key") == "metadata.name" and f.get("values"):
                    node = f["values"][0]
        if node is not None or not re.fullmatch(re.escape(m["generateName"]) + r"\d+", m["name"]):
            return "%s<%s>" % (m["generateName"], node or o["spec"].get("nodeName"))
    if o["kind"] == "ControllerRevision":
        owner = [r["name"] for r in m.get("ownerReferences") or []] or ["?"]
        return "%s@%s" % (owner[0], o.get("revision"))
    return m["name"]


_sts_cache = {}


def _sts_claim(client, ns, name):
    """Whether a claim name is <template>-<statefulset>-<n> of a StatefulSet of ns."""
    if ns not in _sts_cache:
        r = client.get("/apis/apps/v1/namespaces/%s/statefulsets" % ns)
        _sts_cache[ns] = [(s["metadata"]["name"], [t["metadata"]["name"] for t in
                                                   s["spec"].get("volumeClaimTemplates") or []])
                          for s in r.json().get("items") or []]
    for sts, templates in _sts_cache[ns]:
        for t in templates:
            if re.match(re.escape("%s-%s-" % (t, sts)) + r"\d+$", name):
                return True
    return False


def jwt_claims(tok):
    try:
        parts = tok.split(".")
        pad = lambda s: s + "=" * (-len(s) % 4)  # noqa: E731
        head = json.loads(base64.urlsafe_b64decode(pad(parts[0])))
        body = json.loads(base64.urlsafe_b64decode(pad(parts[1])))
    except (ValueError, IndexError):
        return None
    for k in ("iat", "exp", "nbf"):
        if k in body:
            body[k] = "<time>"
    if "jti" in body:
        body["jti"] = "<random>"
    return {"header": head, "claims": body, "signature": "<signature>"}


SSH_KEY_TYPE = re.compile(rb"-----BEGIN ([A-Z ]*)PRIVATE KEY-----")


def norm_data(value_b):
    """One Secret value: JWTs by their claims, private keys by their type,
    the rest as text (or base64 when not UTF-8)."""
    s = value_b.strip()
    if s.count(b".") == 2 and re.match(rb"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$", s):
        c = jwt_claims(s.decode())
        if c:
            return {"jwt": c}
    m = SSH_KEY_TYPE.search(value_b)
    if m:
        return {"private key": m.group(1).decode().strip() or "PKCS8"}
    if value_b.startswith(b"ssh-") or value_b.startswith(b"ecdsa-"):
        return {"public key": value_b.split(b" ", 1)[0].decode()}
    try:
        return value_b.decode()
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(value_b).decode()


DROP_META = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "namespace",
             "selfLink", "generateName", "deletionGracePeriodSeconds", "finalizers")


def normalize(o, ns):
    o = copy.deepcopy(o)
    m = o["metadata"]
    out = {"kind": o["kind"], "name": object_key(o)}
    for k in list(m):
        if k in DROP_META:
            del m[k]
    refs = []
    for r in m.get("ownerReferences") or []:
        r = dict(r)
        r.pop("uid", None)
        refs.append(r)
    if refs:
        out["ownerReferences"] = refs
    out["labels"] = m.get("labels") or {}
    out["annotations"] = m.get("annotations") or {}
    # The Deployment controller writes the revision, not either operator, and
    # on a loaded machine it may come after the quiet period settle() waits:
    # one side then has it and the other not.
    out["annotations"].pop("deployment.kubernetes.io/revision", None)
    if m.get("finalizers"):
        out["finalizers"] = m["finalizers"]
    if "spec" in o:
        spec = o["spec"]
        if o["kind"] == "Pod":
            for k in ("nodeName",):
                spec.pop(k, None)
            # The API server's binding copies the chosen Node's topology
            # labels onto the pod (PodTopologyLabels admission, on by default
            # since Kubernetes 1.35): their values follow the scheduler's
            # choice of Node, like nodeName, not either operator.
            for k in list(out["labels"]):
                if k in ("topology.kubernetes.io/zone", "topology.kubernetes.io/region") \
                        or k.startswith("topology.k8s.io/"):
                    out["labels"][k] = "<node's>"
        if o["kind"] == "Service":
            for k in ("clusterIP", "clusterIPs"):
                if spec.get(k) not in (None, "None") and spec.get(k) != ["None"]:
                    spec[k] = "<allocated>"
            for p in spec.get("ports") or []:
                if "nodePort" in p:
                    p["nodePort"] = "<allocated>"
        if o["kind"] == "PersistentVolumeClaim":
            spec.pop("volumeName", None)
        out["spec"] = spec
    if "data" in o:
        if o["kind"] == "Secret":
            out["data"] = {k: norm_data(base64.b64decode(v)) for k, v in (o["data"] or {}).items()}
        elif o["kind"] == "ControllerRevision":
            out["data"] = o["data"]
        else:
            out["data"] = o["data"]
    for k in ("type", "immutable", "binaryData", "revision", "stringData"):
        if k in o:
            out[k] = o[k]
    # The namespace appears inside values too (DNS names, references, paths).
    text = json.dumps(out, sort_keys=True).replace(ns, "<ns>")
    return json.loads(text)


# ---- diffing ------------------------------------------------------------------------

def diff(a, b, path=""):
    """[(path, a, b)] where a and b differ; a missing side is '<absent>'."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            p = path + "/" + str(k).replace("~", "~0").replace("/", "~1")
            out += diff(a.get(k, "<absent>"), b.get(k, "<absent>"), p)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, "%s/%d" % (path, i))
        return out
    return [] if a == b else [(path, a, b)]


def text_diff(a, b):
    import difflib
    return "\n".join(difflib.unified_diff(a.splitlines(), b.splitlines(), "slinky", "slurmop", lineterm="", n=1))


def load_allow(path):
    """[(kind, name glob, path glob, reason)] from known-differences.txt:
    a `= reason` line, then the `KIND NAME-GLOB PATH-GLOB` lines it covers;
    # comments and blank lines."""
    out = []
    reason = None
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("="):
                reason = line[1:].strip()
                if not reason:
                    raise AssertionError("%s:%d: empty reason" % (path, n))
                continue
            fields = line.split()
            if len(fields) != 3 or reason is None:
                raise AssertionError("%s:%d: want `KIND NAME-GLOB PATH-GLOB` after a `= reason` line: %r"
                                     % (path, n, line))
            out.append((fields[0], fields[1], fields[2], reason))
    return out


def allowed(allow, kind, name, path):
    for i, (k, n, p, _r) in enumerate(allow):
        if (k == "*" or k == kind) and fnmatch.fnmatchcase(name, n) and fnmatch.fnmatchcase(path, p):
            return i
    return None


# ---- running the two operators --------------------------------------------------------

def apply_inputs(cl, ns, restapi):
    """The inputs into ns: all but the RestApi, or only the RestApi."""
    c = cl.client()
    try:
        for o in inputs():
            if (o["kind"] == "RestApi") != restapi:
                continue
            o = json.loads(json.dumps(o).replace(NS_PLACEHOLDER, ns))
            target = ns + XNS if o.pop("_xns", False) else ns
            o["metadata"]["namespace"] = target
            if o["apiVersion"] == "v1":
                path = "/api/v1/namespaces/%s/%s" % (target, o["kind"].lower() + "s")
            else:
                plural = {"RestApi": "restapis"}.get(o["kind"], o["kind"].lower() + "s")
                path = "/apis/%s/namespaces/%s/%s" % (o["apiVersion"], target, plural)
            r = c.post(path, o)
            assert r.status == 201, "%s %s: %s" % (o["kind"], o["metadata"]["name"], r.text)
    finally:
        c.close()


def settle(cl, ns, want, quiet=4.0, timeout=180):
    """Wait until the namespace holds every (kind, name) of want and nothing
    an operator made has changed for `quiet` seconds; returns the objects.
    The LoginSets' Deployments come after their SSH host keys, whose RSA 4096
    keys took 39-55 s under ASan on a loaded machine: hence the long bound."""
    c = cl.client()
    try:
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while True:
            objs = collect_side(c, ns)
            sig = sorted((k, o["metadata"]["resourceVersion"]) for k, o in objs.items())
            if sig != last:
                last, since = sig, time.monotonic()
            missing = [w for w in want if w not in objs]
            if not missing and time.monotonic() - since >= quiet:
                return objs
            if time.monotonic() > deadline:
                raise AssertionError("namespace %s: not settled after %ss; missing %r" % (ns, timeout, missing))
            time.sleep(0.3)
    finally:
        _sts_cache.pop(ns, None)
        _sts_cache.pop(ns + XNS, None)
        c.close()


# What each operator must at least have made before the comparison (the rest
# is compared whatever it is).
WANT_FIRST = [("Service", "slurm-controller"), ("ConfigMap", "slurm-config"), ("StatefulSet", "slurm-controller"),
        ("StatefulSet", "acct-accounting"), ("Secret", "acct-accounting"), ("Deployment", "login"), ("Secret", "login-ssh-host-keys"), ("Secret", "admin-jwt-slurm"),
        ("Pod", "cpu-0"), ("Pod", "cpu-1"), ("PersistentVolumeClaim", "scratch-cpu-0"), ("Deployment", "remote+xns"), ("Pod", "edge-0")]
WANT = WANT_FIRST + [("Deployment", "slurm-restapi"), ("Service", "slurm-restapi")]


def run_side(cl, ns, want_first=None, want=None):
    """Apply the inputs into ns in two steps and wait after each: Slinky's
    NodeSet controller asks slurmrestd (through the RestApi's Service name,
    which does not resolve outside a cluster) before it creates any pod, so
    the RestApi comes once the NodeSets' pods exist. Both operators get the
    same order."""
    apply_inputs(cl, ns, restapi=False)
    settle(cl, ns, WANT_FIRST if want_first is None else want_first)
    apply_inputs(cl, ns, restapi=True)
    return settle(cl, ns, WANT if want is None else want)


def worker_taints(cl, ns, timeout=60, expect=True):
    """Once the Nodes running a Running pod of TAINTED_NODESET in ns are
    exactly the Nodes with the worker taint: the comparable part of that
    (how many Nodes, the taint without its timeAdded). expect=False (an
    operator without taintKubeNodes): the Nodes' taints once that pod runs."""
    c = cl.client()
    try:
        deadline = time.monotonic() + timeout
        while True:
            pods = c.get("/api/v1/namespaces/%s/pods" % ns,
                         labelSelector="app.kubernetes.io/instance=" + TAINTED_NODESET).json().get("items") or []
            want = sorted({p["spec"].get("nodeName") for p in pods if (p.get("status") or {}).get("phase") == "Running"
                           and not p["metadata"].get("deletionTimestamp")})
            have, taints = [], []
            for n in c.get("/api/v1/nodes").json()["items"]:
                ours = [dict((k, v) for k, v in t.items() if k != "timeAdded")
                        for t in (n.get("spec") or {}).get("taints") or [] if t.get("key") == TAINT]
                if ours:
                    have.append(n["metadata"]["name"])
                    taints += [t for t in ours if t not in taints]
            if want and (have == want or not expect):
                return {"kind": "NodeTaint", "name": TAINTED_NODESET, "nodes": len(have), "taints": taints}
            if time.monotonic() > deadline:
                raise AssertionError("%s: Nodes with the worker taint %r, Nodes running %s's pods %r"
                                     % (ns, have, TAINTED_NODESET, want))
            time.sleep(0.3)
    finally:
        c.close()


def clear_worker_taints(cl):
    c = cl.client()
    try:
        for n in c.get("/api/v1/nodes").json()["items"]:
            taints = (n.get("spec") or {}).get("taints") or []
            keep = [t for t in taints if t.get("key") != TAINT]
            if keep != taints:
                r = c.patch("/api/v1/nodes/" + n["metadata"]["name"], {"spec": {"taints": keep or None}})
                assert r.status == 200, r.text
    finally:
        c.close()


class SlinkyManager:
    def __init__(self, binary, kubeconfig, workdir):
        self.log = os.path.join(workdir, "slinky-manager.log")
        self.proc = None
        self.binary, self.kubeconfig = binary, kubeconfig

    def start(self):
        self._f = open(self.log, "wb")
        self.proc = subprocess.Popen([self.binary, "--kubeconfig", self.kubeconfig, "--metrics-addr", "0",
                                      "--health-addr", "127.0.0.1:0", "--zap-log-level", "info"],
                                     stdout=self._f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return self

    def text(self):
        with open(self.log, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc, self.proc = self.proc.returncode, None
        self._f.close()
        return rc


def slinky_rbac(cl, slinky_dir, workdir):
    """Slinky's ServiceAccount bound to the ClusterRole of its module's
    config/rbac (plus what its main.go asks for: events and leases)."""
    # config/rbac/role.yaml up to 1.1, config/rbac/manager/role.yaml from 1.2.
    path = os.path.join(slinky_dir, "config", "rbac", "manager", "role.yaml")
    if not os.path.exists(path):
        path = os.path.join(slinky_dir, "config", "rbac", "role.yaml")
    role = yaml_to_json([path])
    role = [r for r in role if r and r.get("kind") == "ClusterRole"]
    assert len(role) == 1, "Slinky's %s: want one ClusterRole" % path
    role = role[0]
    role["metadata"] = {"name": "slinky-parity-manager"}
    role["rules"] = list(role.get("rules") or []) + [
        {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "create", "update", "patch", "watch"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update",
                                                                                     "patch"]}]
    docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SLINKY_SA_NS}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SLINKY_SA, "namespace": SLINKY_SA_NS}},
            role,
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": "slinky-parity-manager"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": "slinky-parity-manager"},
             "subjects": [{"kind": "ServiceAccount", "name": SLINKY_SA, "namespace": SLINKY_SA_NS}]}]
    path = os.path.join(workdir, "slinky-rbac.json")
    with open(path, "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": docs}, f)
    cl.kubectl("apply", "--server-side", "-f", path)
    return cl.token_kubeconfig(SLINKY_SA_NS, SLINKY_SA, "slinky.kubeconfig")


def main():
    t_start = time.monotonic()
    if not os.access(slurmop_binary(), os.X_OK):
        skip("slurmop is not built")
    senv = slinky_env()
    theirs = check_crds(senv["SLINKY_DIR"])
    cl = backend.k8s_cluster(crds=False)  # Slinky's CRDs, below
    cl.cluster_sh("nodes", "4")
    work = tempfile.mkdtemp(prefix="slinky-parity-")
    failures = []

    cl.kubectl("apply", "--server-side", *sum((["-f", f] for f in theirs), []))
    with open(os.path.join(work, "sm-crd.json"), "w") as f:
        json.dump(SM_CRD, f)
    cl.kubectl("apply", "--server-side", "-f", os.path.join(work, "sm-crd.json"))
    cl.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    for ns in (NS_SLINKY, NS_SLURMOP, NS_SLINKY + XNS, NS_SLURMOP + XNS):
        cl.kubectl("create", "namespace", ns)
    slinky_kc = slinky_rbac(cl, senv["SLINKY_DIR"], work)

    # 1. Slinky alone (it watches every namespace).
    sl = SlinkyManager(senv["SLINKY_BIN"], slinky_kc, work).start()
    t0 = time.monotonic()
    # From 1.1.1 Slinky follows no reference into another namespace (the CRDs'
    # references have no namespace field any more), and from 1.2.0 it has no
    # taintKubeNodes: the neighbour's LoginSet gets nothing, no Node a taint.
    old = legacy(senv)
    xns = ("Deployment", "remote+xns")
    try:
        a = run_side(cl, NS_SLINKY, None if old else [w for w in WANT_FIRST if w != xns],
                     None if old else [w for w in WANT if w != xns])
        taint_a = worker_taints(cl, NS_SLINKY, expect=old)
    except AssertionError:
        print("---- Slinky's manager (tail) ----\n" + sl.text()[-8000:], file=sys.stderr)
        raise
    finally:
        rc = sl.stop()
    print("Slinky %s: %d objects in %.1f s (manager exit %s)" % (senv["SLINKY_VERSION"], len(a),
                                                                  time.monotonic() - t0, rc), flush=True)

    # 2. slurmop in its own namespaces, with the Nodes as Slinky found them,
    # and with its own CRDs (crds/) from 1.2 on: Slinky's have lost the
    # fields slurmop still serves (references' namespace, taintKubeNodes),
    # which the API server would prune from slurmop's inputs. Replacing the
    # CRDs keeps the custom resources of Slinky's side stored as they are.
    clear_worker_taints(cl)
    if not old:
        ours = sorted(os.path.join(SRC, "crds", f) for f in os.listdir(os.path.join(SRC, "crds"))
                      if f.startswith("slinky.slurm.net_") and f.endswith(".yaml"))
        cl.kubectl("apply", "--server-side", "--force-conflicts", *sum((["-f", f] for f in ours), []))
        cl.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    t0 = time.monotonic()
    with Slurmop(cl.operator_kubeconfig, namespace=[NS_SLURMOP, NS_SLURMOP + XNS],
                 leader_elect_namespace=backend.OPERATOR_NS,
                 token_users="*,slurm", allow_node_taints=True, log_level="info") as op:
        op._cluster = cl
        try:
            b = run_side(cl, NS_SLURMOP)
            taint_b = worker_taints(cl, NS_SLURMOP)
        except AssertionError:
            print("---- slurmop (tail) ----\n" + op.stderr()[-8000:], file=sys.stderr)
            raise
    print("slurmop: %d objects in %.1f s" % (len(b), time.monotonic() - t0), flush=True)

    na = {k: normalize(o, NS_SLINKY) for k, o in a.items()}
    nb = {k: normalize(o, NS_SLURMOP) for k, o in b.items()}
    print("taintKubeNodes (%s): Slinky tainted %d Node(s) with %s, slurmop %d with %s" % (
        TAINTED_NODESET, taint_a["nodes"], taint_a["taints"], taint_b["nodes"], taint_b["taints"]))
    na[("NodeTaint", TAINTED_NODESET)] = taint_a
    nb[("NodeTaint", TAINTED_NODESET)] = taint_b
    dump = os.environ.get("SLINKY_PARITY_DUMP")
    if dump:
        os.makedirs(dump, exist_ok=True)
        for side, objs in (("slinky", na), ("slurmop", nb)):
            with open(os.path.join(dump, side + ".json"), "w") as f:
                json.dump({"%s/%s" % k: v for k, v in sorted(objs.items())}, f, indent=1, sort_keys=True)

    allow_file = senv["ALLOW_FILE"]
    allow = load_allow(allow_file)
    used = set()
    found = []
    for key in sorted(set(na) | set(nb)):
        kind, name = key
        if key not in na or key not in nb:
            found.append((kind, name, "<object>", "only in " + ("slinky" if key in na else "slurmop"), ""))
            continue
        for path, x, y in diff(na[key], nb[key]):
            found.append((kind, name, path, x, y))
    unexplained = []
    for kind, name, path, x, y in found:
        i = allowed(allow, kind, name, path)
        if i is None:
            unexplained.append((kind, name, path, x, y))
        else:
            used.add(i)
    print("%d object(s) on Slinky's side, %d on slurmop's; %d difference(s), %d listed in %s" %
          (len(na), len(nb), len(found), len(found) - len(unexplained), os.path.basename(allow_file)))
    for kind, name, path, x, y in found:
        i = allowed(allow, kind, name, path)
        print("  %s %s/%s %s" % ("known  " if i is not None else "UNKNOWN", kind, name, path))
    for kind, name, path, x, y in unexplained:
        if isinstance(x, str) and isinstance(y, str) and ("\n" in x or "\n" in y):
            detail = text_diff(x, y)
        else:
            detail = "slinky:  %s\n    slurmop: %s" % (json.dumps(x, sort_keys=True)[:1500],
                                                     json.dumps(y, sort_keys=True)[:1500])
        failures.append("%s/%s %s:\n    %s" % (kind, name, path, detail))
    for i, (k, n, p, r) in enumerate(allow):
        if i not in used:
            failures.append("%s lists `%s %s %s` but it no longer occurs: remove it "
                            "(and its line in docs/slinky.md)" % (os.path.basename(allow_file), k, n, p))
    with open(README) as f:
        readme = f.read()
    # docs/slinky.md holds the reasons of the default version's list.
    for k, n, p, r in (allow if allow_file == ALLOW_FILE else []):
        if r not in readme:
            failures.append("docs/slinky.md's \"Known differences from Slinky\" lacks the reason of `%s %s %s`: %s"
                            % (k, n, p, r))
    print("run time %.1f s" % (time.monotonic() - t_start))
    if failures:
        print("\n%d unexplained difference(s) or list error(s):" % len(failures), file=sys.stderr)
        for f in failures:
            print("- " + f, file=sys.stderr)
        return 1
    print("ok: every difference is listed with its reason")
    return 0


if __name__ == "__main__":
    sys.exit(main())
