#!/usr/bin/env python3
"""Differential test: the same requests to kubesim and to a real kube-apiserver
(tests/k8s/cluster.sh), answers compared after normalisation (uids,
resourceVersions, timestamps, managedFields, continue tokens and other
server-specific values are masked).

Areas: discovery (/api, /apis, resource lists of every group-version kubesim
serves, the CRDs' resources, verbs, short names, subresources); OpenAPI v3 for
the CRD group; Tables (kubectl get) with the CRD printer columns and the
pod/node/namespace/configmap printers; LIST paging with limit and continue;
watch from resourceVersion=0, with allowWatchBookmarks, and from a too-old
resourceVersion (410 Gone); Status bodies of 404/409/410/422; the four patch
types; protobuf bodies of the kinds kubectl create sends that way; status and scale subresources; finalizers; garbage collection of
dependents after a background delete; label and field selectors.

Every difference found is printed. Differences listed in KNOWN below are the
ones kubesim/README.md documents under "Differences from kube-apiserver"; any
other one fails the test.

Exit 77 (skipped) when the real control plane's binaries are not built
(tests/k8s/build.sh). SLURMOP_K8S_DIFF_KUBECONFIG=<admin kubeconfig> uses an
already running cluster (tests/k8s/cluster.sh start) instead of starting one.
"""
import base64
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback

from k8s_real import SRC, RealCluster, k8s_bin
from kubesim import Client, Kubesim, load_kubeconfig

# Documented differences (kubesim/README.md, "Differences from kube-apiserver"),
# by the key under which a check reports them.
KNOWN = {
    "discovery.missing-resource": "kubesim serves a subset of the built-in resources and subresources",
    "discovery.missing-group": "kubesim serves a subset of the built-in API groups",
    "openapi.strategic": "PATCH bodies of built-ins do not list strategic merge patch",
    "table.columns.default": "built-ins without a printer in kubesim (PVCs, PDBs, controllerrevisions) "
                             "get Name and Age; the Event printer's column descriptions are kubesim's own",
    "watch.too-old": "kubesim keeps --history events per resource, the real watch cache a time window",
    "list.too-old": "kubesim keeps --history events per resource, etcd compacts by time",
    "status.json-error": "messages quoting Go's encoding/json errors are not reproduced",
    "status.422-crd": "CEL rules and the scale subresource's accessor errors are not checked; cause order",
    "patch.ssa-update-owners": "Update managers are tracked only on objects that already have managedFields",
    "finalizers.duplicate-cause": "the real server reports the new-finalizer cause twice",
    "object.empty-map": "empty maps are kept (Go drops them with omitempty)",
    "workload-controllers": "no Deployment/StatefulSet/ReplicaSet controllers",
}

CM = "/api/v1/namespaces/%s/configmaps"
NS_PATH = "/apis/slinky.slurm.net/v1beta1/namespaces/%s/nodesets"

MASK = "<masked>"


def norm(o, path=""):
    """Mask server-specific values of an object (recursively)."""
    if isinstance(o, dict):
        out = {}
        for k, v in o.items():
            p = path + "." + k
            if k in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "time",
                     "lastTransitionTime", "continue", "selfLink"):
                out[k] = MASK
            elif k == "managedFields":
                continue
            else:
                out[k] = norm(v, p)
        return out
    if isinstance(o, list):
        return [norm(x, path) for x in o]
    return o


def norm_msg(s):
    return re.sub(r"\d+", "N", s) if isinstance(s, str) else s


class Diff:
    def __init__(self):
        self.found = []  # (key, check, detail)

    def add(self, key, check, detail):
        self.found.append((key, check, detail))
        print("  DIFF [%s] %s: %s" % (key, check, detail))

    def eq(self, key, check, a, b):
        if a != b:
            self.add(key, check, "kubesim %s\n      real    %s" % (json.dumps(a, sort_keys=True)[:1500],
                                                                  json.dumps(b, sort_keys=True)[:1500]))
            return False
        return True


def both(ks, rk, fn):
    return fn(ks), fn(rk)


def wait(fn, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.2)
    return None


# ---- checks --------------------------------------------------------------------

def check_discovery(ks, rk, d):
    a, b = ks.get("/api").json(), rk.get("/api").json()
    d.eq("discovery.api", "/api versions", a["versions"], b["versions"])
    ga = {g["name"]: g for g in ks.get("/apis").json()["groups"]}
    gb = {g["name"]: g for g in rk.get("/apis").json()["groups"]}
    for name, g in sorted(ga.items()):
        if name not in gb:
            d.add("discovery.group", "/apis", "group %s only in kubesim" % name)
            continue
        d.eq("discovery.group", "/apis %s" % name, g["preferredVersion"], gb[name]["preferredVersion"])
        d.eq("discovery.group", "/apis %s versions" % name, g["versions"], gb[name]["versions"])
    missing = sorted(set(gb) - set(ga))
    if missing:
        d.add("discovery.missing-group", "/apis", "groups only in the real server: %s" % ", ".join(missing))
    gvs = ["/api/v1"] + ["/apis/" + v["groupVersion"] for g in ga.values() for v in g["versions"]]
    for gv in gvs:
        ra, rb = ks.get(gv), rk.get(gv)
        if rb.status != 200:
            d.add("discovery.gv", gv, "real answered %d" % rb.status)
            continue
        d.eq("discovery.gv", gv + " kind/groupVersion",
             {k: ra.json().get(k) for k in ("kind", "apiVersion", "groupVersion")},
             {k: rb.json().get(k) for k in ("kind", "apiVersion", "groupVersion")})
        la = {r["name"]: r for r in ra.json()["resources"]}
        lb = {r["name"]: r for r in rb.json()["resources"]}
        only_real = sorted(set(lb) - set(la))
        if only_real:
            d.add("discovery.missing-resource", gv, "only in the real server: %s" % ", ".join(only_real))
        for name, r in sorted(la.items()):
            if name not in lb:
                d.add("discovery.resource", gv, "%s only in kubesim" % name)
                continue
            s = lb[name]
            for key in ("singularName", "namespaced", "kind", "group", "version"):
                d.eq("discovery.resource", "%s %s %s" % (gv, name, key), r.get(key), s.get(key))
            for key in ("verbs", "shortNames", "categories"):
                if sorted(r.get(key) or []) != sorted(s.get(key) or []):
                    custom = gv.startswith("/apis/slinky")
                    d.add("discovery." + key if not custom else "discovery.crd-" + key,
                          "%s %s" % (gv, name), "kubesim %s, real %s" % (r.get(key), s.get(key)))
            if bool(r.get("storageVersionHash")) != bool(s.get("storageVersionHash")):
                d.add("discovery.storageVersionHash", "%s %s" % (gv, name), "present in one only")


def check_openapi(ks, rk, d):
    for c, who in ((ks, "kubesim"), (rk, "real")):
        idx = c.get("/openapi/v3").json()["paths"]
        if "apis/slinky.slurm.net/v1beta1" not in idx:
            d.add("openapi.index", who, "no apis/slinky.slurm.net/v1beta1 in /openapi/v3")
            continue
        doc = c.get(idx["apis/slinky.slurm.net/v1beta1"]["serverRelativeURL"]).json()
        d.eq("openapi.version", who, doc.get("openapi"), "3.0.0")
        paths = doc["paths"]
        item = paths.get("/apis/slinky.slurm.net/v1beta1/namespaces/{namespace}/nodesets/{name}", {})
        patch = item.get("patch", {})
        d.eq("openapi.gvk", who + " PATCH nodesets gvk", patch.get("x-kubernetes-group-version-kind"),
             {"group": "slinky.slurm.net", "version": "v1beta1", "kind": "NodeSet"})
        params = sorted(p.get("name") for p in patch.get("parameters", []) if p.get("in") == "query")
        for want in ("dryRun", "fieldManager", "fieldValidation", "force"):
            if want not in params:
                d.add("openapi.params", who, "PATCH nodesets lacks %s" % want)
        d.eq("openapi.patch-types", who + " PATCH nodesets content",
             sorted(patch.get("requestBody", {}).get("content", {})),
             ["application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json"])
        for sub in ("status", "scale"):
            if "/apis/slinky.slurm.net/v1beta1/namespaces/{namespace}/nodesets/{name}/" + sub not in paths:
                d.add("openapi.paths", who, "no nodesets/%s path" % sub)
        sch = doc["components"]["schemas"].get("net.slurm.slinky.v1beta1.NodeSet", {})
        d.eq("openapi.schema", who + " NodeSet gvk", sch.get("x-kubernetes-group-version-kind"),
             [{"group": "slinky.slurm.net", "kind": "NodeSet", "version": "v1beta1"}])
        props = sorted(sch.get("properties", {}))
        d.eq("openapi.schema", who + " NodeSet properties", props, ["apiVersion", "kind", "metadata", "spec", "status"])
    # built-in: the PATCH operation of a Pod takes fieldValidation on both
    for c, who in ((ks, "kubesim"), (rk, "real")):
        idx = c.get("/openapi/v3").json()["paths"]
        doc = c.get(idx["api/v1"]["serverRelativeURL"]).json()
        patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
        d.eq("openapi.gvk", who + " PATCH pods gvk", patch.get("x-kubernetes-group-version-kind"),
             {"group": "", "version": "v1", "kind": "Pod"})
        names = [p.get("name") for p in patch.get("parameters", [])]
        if "fieldValidation" not in names:
            d.add("openapi.params", who, "PATCH pods lacks fieldValidation")
        if "application/strategic-merge-patch+json" not in patch.get("requestBody", {}).get("content", {}):
            d.add("openapi.strategic", who, "PATCH pods does not list strategic merge patch")
    r = ks.get("/openapi/v3/apis/nothing.example.com/v1"), rk.get("/openapi/v3/apis/nothing.example.com/v1")
    d.eq("openapi.404", "unknown group-version", r[0].status, r[1].status)


TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io," \
        "application/json"


def table(c, path, **params):
    r = c.request("GET", path, headers={"Accept": TABLE}, params=params)
    return r


def check_tables(ks, rk, d, ns):
    tmpl = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "busybox"},
                                                                          {"name": "d", "image": "nginx:1"}]}}
    bad = [c.post("/api/v1/namespaces/%s/services" % ns, {"metadata": {"name": "svc"}, "spec": {
        "selector": {"app": "x"}, "ports": [{"port": 80}, {"port": 53, "protocol": "UDP", "name": "dns"}]}})
        for c in (ks, rk)]
    d.eq("status.422", "service ports without names", [(r.status, r.json()) for r in bad][0],
         [(r.status, r.json()) for r in bad][1])
    for c in (ks, rk):
        c.post("/api/v1/namespaces/%s/services" % ns, {"metadata": {"name": "svc"}, "spec": {
            "selector": {"app": "x"}, "ports": [{"port": 80, "name": "http"},
                                               {"port": 53, "protocol": "UDP", "name": "dns"}]}})
        c.post("/apis/apps/v1/namespaces/%s/deployments" % ns, {"metadata": {"name": "dep"}, "spec": {
            "replicas": 0, "selector": {"matchLabels": {"app": "x"}, "matchExpressions": [
                {"key": "tier", "operator": "NotIn", "values": ["a", "b"]}]}, "template": tmpl}})
        c.post("/apis/apps/v1/namespaces/%s/statefulsets" % ns, {"metadata": {"name": "sts"}, "spec": {
            "replicas": 0, "selector": {"matchLabels": {"app": "x"}}, "template": tmpl}})
    for what, path, age_cols in (("nodesets", NS_PATH % ns, ("AGE",)), ("pods", "/api/v1/namespaces/%s/pods" % ns, ("Age",)),
                                 ("nodes", "/api/v1/nodes", ("Age",)), ("namespaces", "/api/v1/namespaces", ("Age",)),
                                 ("configmaps", CM % ns, ("Age",)),
                                 ("crds", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", ("Created At",)),
                                 ("services", "/api/v1/namespaces/%s/services" % ns, ("Age", "Cluster-IP")),
                                 ("deployments", "/apis/apps/v1/namespaces/%s/deployments" % ns, ("Age",)),
                                 ("statefulsets", "/apis/apps/v1/namespaces/%s/statefulsets" % ns, ("Age",)),
                                 ("serviceaccounts", "/api/v1/namespaces/%s/serviceaccounts" % ns, ("Age",)),
                                 ("events", "/api/v1/namespaces/%s/events" % ns, ())):
        a, b = table(ks, path), table(rk, path)
        if not d.eq("table.status", what, a.status, b.status):
            continue
        ta, tb = a.json(), b.json()
        d.eq("table.kind", what, (ta["kind"], ta["apiVersion"]), (tb["kind"], tb["apiVersion"]))
        key = "table.columns.default" if what == "events" else "table.columns"
        d.eq(key, what + " columns", ta["columnDefinitions"], tb["columnDefinitions"])
        if what == "events":
            # the real printer's columns; only the descriptions are kubesim's own
            shape = lambda cols: [(c["name"], c["type"], c["format"], c["priority"]) for c in cols]  # noqa: E731
            d.eq("table.columns", "events column names", shape(ta["columnDefinitions"]), shape(tb["columnDefinitions"]))
        if what in ("nodesets", "configmaps", "services", "deployments", "statefulsets", "serviceaccounts"):
            names = [c["name"] for c in tb["columnDefinitions"]]
            ra = sorted(ta["rows"], key=lambda r: r["cells"][0])
            rb = sorted(tb["rows"], key=lambda r: r["cells"][0])
            mask = [i for i, n in enumerate(names) if n in age_cols]
            ca = [[MASK if i in mask else v for i, v in enumerate(r["cells"])] for r in ra]
            cb = [[MASK if i in mask else v for i, v in enumerate(r["cells"])] for r in rb]
            d.eq("table.rows", what + " cells", ca, cb)
            oa, ob = [norm(r["object"]) for r in ra], [norm(r["object"]) for r in rb]
            if what == "deployments":
                # the revision annotation comes from the Deployment controller
                d.eq("workload-controllers", "deployment revision annotation",
                     [o["metadata"].get("annotations") for o in oa], [o["metadata"].get("annotations") for o in ob])
                for o in oa + ob:
                    o["metadata"].pop("annotations", None)
            d.eq("table.rows", what + " row objects", oa, ob)
    # one object, includeObject=Object and None
    a = table(ks, NS_PATH % ns + "/gpu", includeObject="None").json()
    b = table(rk, NS_PATH % ns + "/gpu", includeObject="None").json()
    d.eq("table.one", "nodeset includeObject=None", [r.get("object") for r in a["rows"]],
         [r.get("object") for r in b["rows"]])
    d.eq("table.one", "nodeset metadata", sorted(a["metadata"]), sorted(b["metadata"]))
    a = table(ks, NS_PATH % ns, includeObject="Bogus")
    b = table(rk, NS_PATH % ns, includeObject="Bogus")
    d.eq("table.include", "includeObject=Bogus", (a.status, a.json().get("message")), (b.status, b.json().get("message")))
    # only a Table acceptable: both answer one; an unknown "as" only: 406
    for acc in ("application/json;as=Table;v=v1;g=meta.k8s.io", "application/json;as=Nothing;v=v1;g=meta.k8s.io"):
        a = ks.request("GET", CM % ns, headers={"Accept": acc})
        b = rk.request("GET", CM % ns, headers={"Accept": acc})
        d.eq("table.accept", acc, a.status, b.status)


def table_watch(c, path, **params):
    """A watch whose Accept asks for Tables, as `kubectl get -w` sends it."""
    tc = copy.copy(c)
    tc.headers = lambda extra=None: dict(c.headers(extra), Accept=TABLE)
    return tc.watch(path, **params)


def check_paging(ks, rk, d, ns):
    for c in (ks, rk):
        for i in range(5):
            c.post(CM % ns, {"metadata": {"name": "page-%d" % i, "labels": {"page": "yes", "i": str(i)}}, "data": {}})
    for c in (ks, rk):
        wait(lambda: c.get(CM % ns + "/kube-root-ca.crt").status == 200)
    pages = []
    for c in (ks, rk):
        got, tok, metas = [], None, []
        while True:
            params = {"limit": 2}
            if tok:
                params["continue"] = tok
            r = c.get(CM % ns, **params).json()
            got.append([o["metadata"]["name"] for o in r["items"]])
            metas.append({k: (MASK if k in ("resourceVersion", "continue") else v) for k, v in r["metadata"].items()})
            tok = r["metadata"].get("continue")
            if tok:
                t = json.loads(base64.urlsafe_b64decode(tok + "=" * (-len(tok) % 4)))
                metas[-1]["token"] = sorted(t)
            if not tok:
                break
        pages.append((got, metas))
    d.eq("list.paging", "pages of 2", pages[0], pages[1])
    # label selector with paging: no remainingItemCount
    a = ks.get(CM % ns, limit=2, labelSelector="page=yes").json()["metadata"]
    b = rk.get(CM % ns, limit=2, labelSelector="page=yes").json()["metadata"]
    d.eq("list.paging", "selector page metadata keys", sorted(a), sorted(b))
    # a continue token with a resourceVersion: 400
    tok = ks.get(CM % ns, limit=2).json()["metadata"]["continue"]
    tokr = rk.get(CM % ns, limit=2).json()["metadata"]["continue"]
    a = ks.get(CM % ns, limit=2, resourceVersion="5", **{"continue": tok})
    b = rk.get(CM % ns, limit=2, resourceVersion="5", **{"continue": tokr})
    d.eq("list.paging", "continue + resourceVersion", (a.status, a.json()), (b.status, b.json()))
    # a malformed continue token
    a = ks.get(CM % ns, limit=2, **{"continue": "bm90LWpzb24"})
    b = rk.get(CM % ns, limit=2, **{"continue": "bm90LWpzb24"})
    d.eq("status.json-error", "malformed continue", (a.status, a.json()), (b.status, b.json()))
    # list at a too-old exact resourceVersion: 410 Expired
    a = ks.get(CM % ns, resourceVersion="1", resourceVersionMatch="Exact")
    b = rk.get(CM % ns, resourceVersion="1", resourceVersionMatch="Exact")
    d.eq("list.too-old" if a.status != b.status else "status.410", "list rv=1 Exact",
         (a.status, norm(a.json())), (b.status, norm(b.json())))


def check_selectors(ks, rk, d, ns):
    for sel in ("i in (1,3)", "i notin (1,3),page", "!missing", "i!=2", "page=yes,i>2"):
        a = sorted(o["metadata"]["name"] for o in ks.get(CM % ns, labelSelector=sel).json()["items"])
        b = sorted(o["metadata"]["name"] for o in rk.get(CM % ns, labelSelector=sel).json()["items"])
        d.eq("selector.label", sel, a, b)
    for sel in ("metadata.name=page-1", "metadata.name!=page-1", "metadata.namespace=%s" % ns):
        a = sorted(o["metadata"]["name"] for o in ks.get(CM % ns, fieldSelector=sel).json()["items"])
        b = sorted(o["metadata"]["name"] for o in rk.get(CM % ns, fieldSelector=sel).json()["items"])
        d.eq("selector.field", sel, a, b)
    for sel in ("data.a=1", "spec.bogus=x"):
        a, b = ks.get(CM % ns, fieldSelector=sel), rk.get(CM % ns, fieldSelector=sel)
        d.eq("selector.field", "unsupported " + sel, (a.status, a.json()), (b.status, b.json()))
    a, b = ks.get(CM % ns, labelSelector="a b"), rk.get(CM % ns, labelSelector="a b")
    d.eq("selector.label", "invalid", (a.status, a.json().get("reason")), (b.status, b.json().get("reason")))


def check_status_bodies(ks, rk, d, ns):
    cases = [
        ("404 configmap", lambda c: c.get(CM % ns + "/missing")),
        ("404 nodeset", lambda c: c.get(NS_PATH % ns + "/missing")),
        ("404 namespace", lambda c: c.get("/api/v1/namespaces/missing-ns/configmaps/x")),
        ("409 exists", lambda c: c.post(CM % ns, {"metadata": {"name": "page-1"}})),
        ("409 conflict", lambda c: c.put(CM % ns + "/page-1", {"metadata": {"name": "page-1",
                                                                          "resourceVersion": "1"}})),
        ("422 name", lambda c: c.post(CM % ns, {"metadata": {"name": "Bad_Name"}})),
        ("422 nodeset", lambda c: c.post(NS_PATH % ns, {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet",
                                                        "metadata": {"name": "bad"},
                                                        "spec": {"replicas": "three"}})),
        ("400 body", lambda c: c.request("POST", CM % ns, body="{not json", content_type="application/json")),
        ("405", lambda c: c.request("PUT", CM % ns, body="{}", content_type="application/json")),
    ]
    for name, fn in cases:
        a, b = fn(ks), fn(rk)
        ja = a.json() if a.body[:1] == b"{" else a.text
        jb = b.json() if b.body[:1] == b"{" else b.text
        key = {"400 body": "status.json-error", "422 nodeset": "status.422-crd"}.get(name, "status." + name.split()[0])
        d.eq(key, name, (a.status, ja), (b.status, jb))


def pb_field(num, payload):
    """One length-delimited protobuf field."""
    def varint(n):
        out = b""
        while True:
            b = n & 0x7f
            n >>= 7
            out += bytes([b | (0x80 if n else 0)])
            if not n:
                return out
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def check_protobuf(ks, rk, d, ns):
    """A ConfigMap and a Secret as kubectl's typed client sends them (application/vnd.kubernetes.protobuf)."""
    def entry(k, v):
        return pb_field(1, k.encode()) + pb_field(2, v)
    meta = pb_field(1, b"pb") + pb_field(11, entry("l", b"1")) + pb_field(3, b"")
    cm = pb_field(1, meta) + pb_field(2, entry("a", b"x")) + pb_field(2, entry("empty", b"")) + \
        pb_field(3, entry("bin", b"\x00\x01"))
    sec = pb_field(1, meta) + pb_field(2, entry("pw", b"secret")) + pb_field(3, b"Opaque")
    out = []
    for c in (ks, rk):
        r = []
        for kind, raw, path in (("ConfigMap", cm, CM % ns), ("Secret", sec, "/api/v1/namespaces/%s/secrets" % ns)):
            body = b"k8s\x00" + pb_field(1, pb_field(1, b"v1") + pb_field(2, kind.encode())) + pb_field(2, raw)
            x = c.request("POST", path, body=body, content_type="application/vnd.kubernetes.protobuf",
                          headers={"Accept": "application/json"})
            r.append((x.status, norm(x.json())))
        out.append(r)
    d.eq("protobuf", "ConfigMap and Secret bodies", out[0], out[1])


def check_patches(ks, rk, d, ns):
    base = {"metadata": {"name": "p", "labels": {"a": "1"}}, "data": {"x": "1", "y": "2"}}
    res = []
    for c in (ks, rk):
        c.post(CM % ns, base)
        out = []
        out.append(c.patch(CM % ns + "/p", {"data": {"y": None, "z": "3"}}, patch_type="merge"))
        out.append(c.patch(CM % ns + "/p", [{"op": "add", "path": "/data/w", "value": "4"},
                                            {"op": "test", "path": "/data/x", "value": "1"}], patch_type="json"))
        out.append(c.patch(CM % ns + "/p", [{"op": "test", "path": "/data/x", "value": "nope"}], patch_type="json"))
        out.append(c.patch(CM % ns + "/p", {"metadata": {"labels": {"b": "2"}}}, patch_type="strategic"))
        out.append(c.patch(CM % ns + "/p", json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                                        "metadata": {"name": "p"}, "data": {"x": "9"}}),
                           patch_type="apply", params={"fieldManager": "m1"}))
        out.append(c.patch(CM % ns + "/p", json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                                        "metadata": {"name": "p"}, "data": {"x": "8"}}),
                           patch_type="apply", params={"fieldManager": "m2"}))
        out.append(c.patch(CM % ns + "/p", json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                                        "metadata": {"name": "p"}, "data": {"x": "8"}}),
                           patch_type="apply", params={"fieldManager": "m2", "force": "true"}))
        out.append(c.patch(CM % ns + "/p", json.dumps({"data": {"x": "7"}}), patch_type="apply"))
        out.append(c.patch(NS_PATH % ns + "/gpu", {"spec": {"replicas": 2}}, patch_type="strategic"))
        res.append([(r.status, norm(r.json()) if r.body[:1] == b"{" else r.text) for r in out])
    names = ["merge", "json", "json test failure", "strategic", "apply m1", "apply m2 conflict", "apply m2 force",
             "apply no manager", "strategic on CR"]
    for i, n in enumerate(names):
        key = ("patch.ssa-update-owners" if n.startswith("apply m") else
               "patch")
        d.eq(key, n, res[0][i], res[1][i])
    # managedFields after the applies: managers and operations
    mf = [sorted((m["manager"], m["operation"]) for m in c.get(CM % ns + "/p").json()["metadata"].get(
        "managedFields", [])) for c in (ks, rk)]
    d.eq("patch.ssa-update-owners", "managers", mf[0], mf[1])


def check_subresources(ks, rk, d, ns):
    st = {"status": {"replicas": 2, "desired": 2, "nodeSetHash": "h", "selector": "app=gpu"}}
    out = []
    for c in (ks, rk):
        r = [c.patch(NS_PATH % ns + "/gpu/status", st),
             c.get(NS_PATH % ns + "/gpu/scale"),
             c.patch(NS_PATH % ns + "/gpu/scale", {"spec": {"replicas": 4}}),
             c.get(NS_PATH % ns + "/gpu"),
             c.patch(NS_PATH % ns + "/gpu/status", {"status": {"replicas": 3}}),
             c.put(NS_PATH % ns + "/gpu/scale", {"apiVersion": "autoscaling/v1", "kind": "Scale",
                                                 "metadata": {"name": "gpu", "namespace": ns},
                                                 "spec": {"replicas": 5}})]
        out.append([(x.status, norm(x.json())) for x in r])
    for i, n in enumerate(["status patch", "get scale", "patch scale", "get after scale",
                           "status without required fields", "put scale"]):
        d.eq("subresource", n, out[0][i], out[1][i])


def check_finalizers_gc(ks, rk, d, ns):
    out = []
    for c in (ks, rk):
        r = []
        c.post(CM % ns, {"metadata": {"name": "fin", "finalizers": ["example.com/hold"]}})
        r.append(c.delete(CM % ns + "/fin"))
        r.append(c.get(CM % ns + "/fin"))
        r.append(c.patch(CM % ns + "/fin", {"metadata": {"finalizers": ["example.com/other"]}}))
        r.append(c.patch(CM % ns + "/fin", {"metadata": {"finalizers": None}}))
        r.append(c.get(CM % ns + "/fin"))
        out.append([(x.status, norm(x.json())) for x in r])
        owner = c.post(CM % ns, {"metadata": {"name": "owner"}}).json()
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
        c.post(CM % ns, {"metadata": {"name": "dep", "ownerReferences": [ref]}})
        c.delete(CM % ns + "/owner", {"kind": "DeleteOptions", "apiVersion": "v1",
                                      "propagationPolicy": "Background"})
    for i, n in enumerate(["delete with finalizer", "get terminating", "add finalizer while deleting",
                           "remove last finalizer", "get after"]):
        key = "finalizers.duplicate-cause" if n == "add finalizer while deleting" else "finalizers"
        d.eq(key, n, out[0][i], out[1][i])
    for c, who in ((ks, "kubesim"), (rk, "real")):
        if not wait(lambda: c.get(CM % ns + "/dep").status == 404, timeout=60):
            d.add("gc", "background", "%s: the dependent of a deleted owner is still there after 60 s" % who)


def check_watch(ks, rk, d, ns, ks_proc):
    ev = []
    for c in (ks, rk):
        with c.watch(CM % ns, resourceVersion="0", allowWatchBookmarks="true", labelSelector="page=yes") as w:
            got = w.events(5, timeout=10)
        ev.append(sorted((e["type"], e["object"]["metadata"]["name"]) for e in got))
    d.eq("watch.rv0", "initial ADDED", ev[0], ev[1])
    # a watch from the current RV sees a change, then a deletion
    ev = []
    for c in (ks, rk):
        rv = c.get(CM % ns, labelSelector="page=yes").json()["metadata"]["resourceVersion"]
        with c.watch(CM % ns, resourceVersion=rv, labelSelector="page=yes", allowWatchBookmarks="true") as w:
            c.patch(CM % ns + "/page-0", {"data": {"k": "v"}})
            c.patch(CM % ns + "/page-1", {"metadata": {"labels": {"page": "no"}}})
            got = w.until(lambda e: e["type"] == "DELETED", timeout=10)
        ev.append([(e["type"], e["object"]["metadata"]["name"], e["object"].get("data")) for e in got
                   if e["type"] != "BOOKMARK"])
    # kubesim keeps an empty data map that Go's omitempty drops: reported on its own
    d.eq("watch.changes", "MODIFIED and selector DELETED", [e[:2] + (e[2] or None,) for e in ev[0]], ev[1])
    d.eq("object.empty-map", "empty data map in the DELETED event", ev[0], ev[1])
    # kubectl get -w: every event's object is a Table, column definitions in the first one only
    ev = []
    for c in (ks, rk):
        rv = c.get(CM % ns, labelSelector="page=yes").json()["metadata"]["resourceVersion"]
        with table_watch(c, CM % ns, resourceVersion=rv, labelSelector="page=yes") as tw:
            c.patch(CM % ns + "/page-2", {"data": {"t": "1"}})
            c.patch(CM % ns + "/page-3", {"data": {"t": "2"}})
            got = tw.events(2, timeout=10)
        ev.append([(e["type"], e["object"]["kind"], e["object"]["apiVersion"],
                    None if e["object"]["columnDefinitions"] is None else [x["name"] for x in e["object"]["columnDefinitions"]],
                    [[MASK if i == 2 else v for i, v in enumerate(r["cells"])] for r in e["object"]["rows"]],
                    [r["object"]["kind"] for r in e["object"]["rows"]]) for e in got])
    d.eq("watch.table", "Table events", ev[0], ev[1])
    # a too-old resourceVersion: 410 Gone as an ERROR event (kubesim's history compacted by its restart fault)
    ks_proc.admin("POST", "/kubesim/restart", {})
    time.sleep(0.5)
    ev = []
    for c in (ks, rk):
        with c.watch(CM % ns, resourceVersion="1") as w:
            e = w.next_event(timeout=10)
        ev.append((e["type"], e["object"].get("code"), e["object"].get("reason"), norm_msg(e["object"].get("message")))
                  if e else None)
    d.eq("watch.too-old" if ev[0] != ev[1] else "watch.410", "watch rv=1", ev[0], ev[1])


def main():
    bin_dir = k8s_bin()
    if bin_dir is None:
        print("SKIP: the real control plane is not built (bash tests/k8s/build.sh)")
        sys.exit(77)
    os.environ["K8S_BIN"] = bin_dir
    rc = None
    kc_path = os.environ.get("SLURMOP_K8S_DIFF_KUBECONFIG")
    if not kc_path:
        rc = RealCluster(nodes=2)
        try:
            rc.start()
        except RuntimeError as e:
            rc.stop()
            # cluster.sh exits 77 when the machine cannot run it
            if "exited 77" in str(e):
                print("SKIP: " + str(e).splitlines()[-1])
                sys.exit(77)
            print("FAIL: " + str(e))
            sys.exit(1)
        kc_path = rc.env["KUBECONFIG"]
    tmp = tempfile.TemporaryDirectory(prefix="kubesim-diff-")
    try:
        kc = load_kubeconfig(kc_path)
        files = {}
        for k in ("ca_pem", "cert_pem", "key_pem"):
            files[k] = os.path.join(tmp.name, k)
            with open(files[k], "wb") as f:
                f.write(kc[k])
        rk = Client(kc["server"], ca_file=files["ca_pem"], cert_file=files["cert_pem"], key_file=files["key_pem"])
        with Kubesim(nodes=2, pod_start_delay="0", pod_ready_delay="0", gc_delay="100ms") as ksp:
            ks = ksp.client()
            ns = "diff-%d" % (int(time.time()) % 100000)
            with open(os.path.join(SRC, "crds", "slinky.slurm.net_nodesets.yaml")) as f:
                crd_yaml = f.read()
            for path, env_kc in ((ksp.kubeconfig, ksp.kubeconfig), (kc_path, kc_path)):
                p = subprocess.run([os.path.join(bin_dir, "kubectl"), "apply", "-f", os.path.join(SRC, "crds")],
                                   env=dict(os.environ, KUBECONFIG=env_kc, HOME=tmp.name), capture_output=True,
                                   text=True)
                if p.returncode != 0:
                    print("FAIL: kubectl apply -f crds/: " + p.stderr)
                    sys.exit(1)
            for c in (ks, rk):
                wait(lambda: c.get(NS_PATH % "default").status == 200)
                r = c.post("/api/v1/namespaces", {"metadata": {"name": ns}})
                assert r.status == 201, r
                wait(lambda: c.get("/api/v1/namespaces/%s/serviceaccounts/default" % ns).status == 200)
                r = c.post(NS_PATH % ns, {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet",
                                          "metadata": {"name": "gpu"}, "spec": {"controllerRef": {"name": "slurm"},
                                                                                "replicas": 2}})
                assert r.status == 201, r
            d = Diff()
            checks = [("discovery", lambda: check_discovery(ks, rk, d)),
                      ("openapi", lambda: check_openapi(ks, rk, d)),
                      ("paging", lambda: check_paging(ks, rk, d, ns)),
                      ("selectors", lambda: check_selectors(ks, rk, d, ns)),
                      ("tables", lambda: check_tables(ks, rk, d, ns)),
                      ("status bodies", lambda: check_status_bodies(ks, rk, d, ns)),
                      ("patches", lambda: check_patches(ks, rk, d, ns)),
                      ("protobuf", lambda: check_protobuf(ks, rk, d, ns)),
                      ("subresources", lambda: check_subresources(ks, rk, d, ns)),
                      ("finalizers and gc", lambda: check_finalizers_gc(ks, rk, d, ns)),
                      ("watch", lambda: check_watch(ks, rk, d, ns, ksp))]
            for name, fn in checks:
                print("== " + name)
                try:
                    fn()
                except Exception:
                    d.add("error", name, traceback.format_exc())
            for c in (ks, rk):
                c.delete("/api/v1/namespaces/" + ns)
    finally:
        if rc:
            rc.stop()
    unknown = [f for f in d.found if f[0] not in KNOWN]
    print("\n%d differences, %d documented, %d not" % (len(d.found), len(d.found) - len(unknown), len(unknown)))
    for key, check, detail in unknown:
        print("UNDOCUMENTED [%s] %s: %s" % (key, check, detail.splitlines()[0]))
    if unknown:
        print("FAIL")
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
