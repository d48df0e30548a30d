#!/usr/bin/env python3
"""References across namespaces and NodeSet taintKubeNodes.

cross_namespace: a Controller in `xns-ctl` whose accountingRef names an
Accounting in `xns-db`; in `xns-work` NodeSets, a RestApi, a LoginSet whose
controllerRef names that Controller (controllerRef.namespace), and a Token
whose jwtKeyRef names the Controller's JWT key Secret in `xns-ctl`; the
Controller admits xns-work and xns-db and the Accounting xns-ctl (annotation
slinky.slurm.net/allowed-namespaces: without it each reference is refused,
test_tenants.py). Checked:
the fields survive the API server (the CRDs declare them); the NodeSets' pods
are created in xns-work with slurmd's --conf-server in the Controller's
namespace; the Controller's slurm.conf lists the NodeSets of the other
namespace and reaches the Accounting as `<name>-accounting.xns-db`; a
partition edit in xns-work regenerates it (the NodeSet → Controller watch
mapping follows the namespace); a NodeSet created before its Controller gets
its pods once the Controller appears (Controller → NodeSets); the RestApi's
Deployment and the LoginSet's sackd point at the Controller's namespace; the
Token is minted with the key of the other namespace, its Secret owned by the
Token (an ownerReference cannot cross namespaces). Then slurmop runs again
with --namespace xns-work only: the NodeSet whose Controller is outside gets
Valid=False naming the namespace and a ValidationFailed Warning Event.

taint_kube_nodes: without --allow-node-taints a NodeSet with taintKubeNodes
is Valid=False and no Node is tainted; with it, such a NodeSet taints exactly the
Nodes that run its Running pods with nodeset.slinky.slurm.net/worker
(NoExecute), keeps a foreign taint on one of them, removes the taint from a
Node whose pod went (scale-in) and from every Node when taintKubeNodes is
turned off; a NodeSet without it taints nothing."""
# backends: kubesim k8s

import base64
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from backend import api_server  # noqa: E402
from kubesim import run_tests  # noqa: E402
from slurmop import NO_DRAIN, NS_API, Slurmop, apply_crds, make_cluster, pods_of, set_replicas, wait_for  # noqa: E402

IMAGES = {"slurmd": {"image": "ghcr.io/slinkyproject/slurmd:test"}, "logfile": {"image": "alpine:test"}}
TAINT = "nodeset.slinky.slurm.net/worker"
CTL, DB, WORK = "xns-ctl", "xns-db", "xns-work"
ALLOWED = "slinky.slurm.net/allowed-namespaces"


def ensure_ns(c, ns):
    r = c.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    assert r.status in (201, 409), r.text


def secret(c, ns, name, key, value):
    r = c.post("/api/v1/namespaces/%s/secrets" % ns,
               {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                "data": {key: base64.b64encode(value).decode()}})
    assert r.status in (201, 409), r.text


def cr(c, ns, kind, plural, name, spec=None, annotations=None):
    meta = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    r = c.post(NS_API + "/namespaces/%s/%s" % (ns, plural),
               {"apiVersion": "slinky.slurm.net/v1beta1", "kind": kind, "metadata": meta, "spec": spec})
    assert r.status == 201, r.text
    return r.json()


def get(c, path):
    r = c.get(path)
    return r.json() if r.status == 200 else None


def slurm_conf(c, ctl="slurm"):
    cm = get(c, "/api/v1/namespaces/%s/configmaps/%s-config" % (CTL, ctl))
    return ((cm or {}).get("data") or {}).get("slurm.conf") or ""


def slurmd_args(pod):
    for ct in pod["spec"]["containers"]:
        if ct["name"] == "slurmd":
            return " ".join(ct.get("args") or [])
    return ""


def condition(obj, ctype):
    for cd in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cd.get("type") == ctype:
            return cd
    return None


def test_cross_namespace():
    with api_server(nodes=4) as ks:
        c = ks.client()
        apply_crds(c)
        for ns in (CTL, DB, WORK):
            ensure_ns(c, ns)
        # The Controller and its keys in xns-ctl; the same key names in xns-work for the pods
        # there (a pod mounts Secrets of its own namespace only, as with Slinky).
        make_cluster(c, ns=CTL)
        # The Controller admits the NodeSets, RestApi, LoginSet and Token of xns-work (and the twin
        # NodeSet of xns-db), the Accounting the Controller of xns-ctl: without it every reference
        # below is refused (test_tenants.py).
        r = c.patch(NS_API + "/namespaces/%s/controllers/slurm" % CTL,
                    {"metadata": {"annotations": {ALLOWED: "%s, %s" % (WORK, DB)}},
                     "spec": {"accountingRef": {"name": "acct", "namespace": DB}}})
        assert r.status == 200, r.text
        assert r.json()["spec"]["accountingRef"] == {"name": "acct", "namespace": DB}, "pruned: %r" % r.json()
        for ns in (DB, WORK):
            secret(c, ns, "slurm-auth-slurm", "slurm.key", b"k" * 64)
            secret(c, ns, "slurm-auth-jwt", "jwt.key", b"j" * 64)
        secret(c, DB, "db-pass", "password", b"secret")
        secret(c, WORK, "login-sssd", "sssd.conf", b"[sssd]\n")
        cr(c, DB, "Accounting", "accountings", "acct", annotations={ALLOWED: CTL}, spec={
            "slurmKeyRef": {"name": "slurm-auth-slurm", "key": "slurm.key"},
            "jwtKeyRef": {"name": "slurm-auth-jwt", "key": "jwt.key"},
            "storageConfig": {"host": "mariadb", "passwordKeyRef": {"name": "db-pass", "key": "password"}},
            "slurmdbd": {"image": "ghcr.io/slinkyproject/slurmdbd:test"}})
        ref = {"name": "slurm", "namespace": CTL}
        ns_obj = cr(c, WORK, "NodeSet", "nodesets", "cpu",
                    dict(controllerRef=ref, replicas=2, template={"spec": {"hostname": "cpu-"}},
                         partition={"enabled": True, "config": "Default=YES"}, **IMAGES),
                    annotations={NO_DRAIN: "true"})
        assert ns_obj["spec"]["controllerRef"] == ref, "controllerRef.namespace pruned: %r" % ns_obj["spec"]
        # A NodeSet whose Controller does not exist yet.
        cr(c, WORK, "NodeSet", "nodesets", "late",
           dict(controllerRef={"name": "later", "namespace": CTL}, replicas=1,
                template={"spec": {"hostname": "late-"}}, **IMAGES), annotations={NO_DRAIN: "true"})
        cr(c, WORK, "RestApi", "restapis", "ra",
           {"controllerRef": ref, "replicas": 1, "slurmrestd": {"image": "ghcr.io/slinkyproject/slurmrestd:test"}})
        cr(c, WORK, "LoginSet", "loginsets", "login",
           {"controllerRef": ref, "replicas": 1, "sssdConfRef": {"name": "login-sssd", "key": "sssd.conf"},
            "login": {"image": "ghcr.io/slinkyproject/login:test"}, "initconf": {"image": "alpine:test"}})
        tok = cr(c, WORK, "Token", "tokens", "tok",
                 {"username": "alice", "jwtKeyRef": {"name": "slurm-auth-jwt", "key": "jwt.key", "namespace": CTL}})
        assert tok["spec"]["jwtKeyRef"]["namespace"] == CTL, tok["spec"]

        with Slurmop(ks.kubeconfig, token_users="*") as op:
            op.wait_ready()
            pods = wait_for(lambda: (lambda ps: ps if len(ps) == 2 else None)(pods_of(c, "cpu", ns=WORK)), 30,
                            what="two cpu pods in %s" % WORK)
            # A NodeSet of the same name under the same Controller in another namespace would give
            # its pods the Slurm node names of the first one's: refused, nothing created, the first
            # one untouched.
            time.sleep(1.1)  # created a second later (creationTimestamp has seconds)
            cr(c, DB, "NodeSet", "nodesets", "cpu",
               dict(controllerRef=ref, replicas=1, template={"spec": {"hostname": "cpu-"}}, **IMAGES))
            twin = wait_for(lambda: (lambda x: x if x and x["status"] == "False" else None)(
                condition(get(c, NS_API + "/namespaces/%s/nodesets/cpu" % DB), "Valid")), 30,
                what="Valid=False on the NodeSet whose name another NodeSet of the Controller has")
            assert WORK in twin["message"], twin
            assert pods_of(c, "cpu", ns=DB) == [], "the twin NodeSet created pods"
            assert condition(get(c, NS_API + "/namespaces/%s/nodesets/cpu" % WORK), "Valid") is None
            assert len(pods_of(c, "cpu", ns=WORK)) == 2
            assert c.delete(NS_API + "/namespaces/%s/nodesets/cpu" % DB).status in (200, 202)
            for p in pods:
                assert "--conf-server slurm-controller.%s:6817" % CTL in slurmd_args(p), slurmd_args(p)
            conf = wait_for(lambda: (lambda s: s if "NodeSet=cpu" in s else None)(slurm_conf(c)), 30,
                            what="slurm.conf of %s lists the NodeSet of %s" % (CTL, WORK))
            assert "PartitionName=cpu Nodes=cpu Default=YES" in conf, conf
            assert "AccountingStorageHost=acct-accounting.%s\n" % DB in conf, conf

            # NodeSet → Controller across namespaces: a partition edit reaches slurm.conf.
            r = c.patch(NS_API + "/namespaces/%s/nodesets/cpu" % WORK,
                        {"spec": {"partition": {"enabled": True, "config": "Default=NO"}}})
            assert r.status == 200, r.text
            wait_for(lambda: "PartitionName=cpu Nodes=cpu Default=NO" in slurm_conf(c), 30,
                     what="slurm.conf after the partition edit")

            # Controller → NodeSets across namespaces: "late" waits for its Controller.
            assert pods_of(c, "late", ns=WORK) == []
            make_cluster(c, ns=CTL, ctl="later")
            r = c.patch(NS_API + "/namespaces/%s/controllers/later" % CTL,
                        {"metadata": {"annotations": {ALLOWED: WORK}}})
            assert r.status == 200, r.text
            late = wait_for(lambda: pods_of(c, "late", ns=WORK), 30, what="late's pod once its Controller exists")
            assert "slurm-controller" not in slurmd_args(late[0])
            assert "--conf-server later-controller.%s:6817" % CTL in slurmd_args(late[0]), slurmd_args(late[0])
            wait_for(lambda: "NodeSet=late" in slurm_conf(c, "later"), 30, what="later's slurm.conf")

            dep = wait_for(lambda: get(c, "/apis/apps/v1/namespaces/%s/deployments/ra-restapi" % WORK), 30,
                           what="the RestApi's Deployment in %s" % WORK)
            assert dep["spec"]["replicas"] == 1, dep["spec"]
            # The Deployment comes after the LoginSet's SSH host keys, whose
            # RSA 4096 key took over 30 s under ASan on a loaded CI machine.
            login = wait_for(lambda: get(c, "/apis/apps/v1/namespaces/%s/deployments/login" % WORK), 120,
                             what="the LoginSet's Deployment in %s" % WORK)
            import json
            assert "--conf-server slurm-controller.%s:6817" % CTL in json.dumps(login), "sackd's conf server"

            sec = wait_for(lambda: get(c, "/api/v1/namespaces/%s/secrets/tok-jwt-alice" % WORK), 30,
                           what="the Token's Secret, signed with the key of %s" % CTL)
            owners = [(o["kind"], o["name"]) for o in sec["metadata"].get("ownerReferences") or []]
            assert owners == [("Token", "tok")], owners
            assert sec["data"].get("SLURM_JWT"), sec["data"].keys()
            assert get(c, NS_API + "/namespaces/%s/tokens/tok" % WORK)["status"].get("issuedAt")
            assert condition(get(c, NS_API + "/namespaces/%s/nodesets/cpu" % WORK), "Valid") is None
            op.check_no_forbidden()

        # --namespace without the Controller's namespace: the reference cannot be followed.
        with Slurmop(ks.kubeconfig, namespace=[WORK]) as op:
            op.wait_ready()
            cd = wait_for(lambda: (lambda x: x if x and x["status"] == "False" else None)(
                condition(get(c, NS_API + "/namespaces/%s/nodesets/cpu" % WORK), "Valid")), 30,
                what="Valid=False on the NodeSet whose Controller is outside --namespace")
            assert CTL in cd["message"] and "--namespace" in cd["message"], cd
            ra = wait_for(lambda: (lambda x: x if x and x["status"] == "False" else None)(
                condition(get(c, NS_API + "/namespaces/%s/restapis/ra" % WORK), "Valid")), 30,
                what="Valid=False on the RestApi")
            assert CTL in ra["message"], ra

            def warned():
                r = c.get("/apis/events.k8s.io/v1/namespaces/%s/events" % WORK)
                return [e for e in r.json().get("items") or [] if e.get("reason") == "ValidationFailed"
                        and e.get("type") == "Warning" and CTL in (e.get("note") or "")
                        and (e.get("regarding") or {}).get("name") == "cpu"]
            wait_for(warned, 30, what="ValidationFailed Event")
            # Nothing is deleted because of it: the pods stay.
            assert len(pods_of(c, "cpu", ns=WORK)) == 2


def node_taints(c):
    out = {}
    for n in c.get("/api/v1/nodes").json()["items"]:
        out[n["metadata"]["name"]] = [t for t in (n.get("spec") or {}).get("taints") or []]
    return out


def tainted(c):
    return sorted(n for n, ts in node_taints(c).items()
                  if any(t.get("key") == TAINT and t.get("effect") == "NoExecute" for t in ts))


def running_nodes(c, nodeset):
    return sorted(p["spec"].get("nodeName") for p in pods_of(c, nodeset, include_terminating=False)
                  if (p.get("status") or {}).get("phase") == "Running")


def test_taint_kube_nodes():
    with api_server(nodes=4) as ks:
        c = ks.client()
        apply_crds(c)
        make_cluster(c, nodesets={"plain": dict(replicas=1, **IMAGES),
                                  "tainted": dict(replicas=2, taintKubeNodes=True, **IMAGES)}, no_drain=True)
        # Without --allow-node-taints (the default): Nodes are cluster-scoped, a NodeSet may not write
        # them. The NodeSet is refused (Valid=False naming the flag), no Node is tainted, the other
        # NodeSet runs.
        with Slurmop(ks.kubeconfig) as op:
            op.wait_ready()
            wait_for(lambda: len(running_nodes(c, "plain")) == 1, 30, what="the plain pod Running")
            cd = wait_for(lambda: (lambda x: x if x and x["status"] == "False" else None)(
                condition(get(c, NS_API + "/namespaces/default/nodesets/tainted"), "Valid")), 30,
                what="Valid=False on the taintKubeNodes NodeSet")
            assert "--allow-node-taints" in cd["message"], cd
            time.sleep(1.0)
            assert tainted(c) == [] and pods_of(c, "tainted") == [], (tainted(c), len(pods_of(c, "tainted")))
            op.check_no_forbidden()
        with Slurmop(ks.kubeconfig, allow_node_taints=True) as op:
            op.wait_ready()
            wait_for(lambda: len(running_nodes(c, "tainted")) == 2 and len(running_nodes(c, "plain")) == 1, 30,
                     what="pods Running")
            want = running_nodes(c, "tainted")
            wait_for(lambda: tainted(c) == want, 30, what="taint on %s (have %s)" % (want, tainted(c)))
            # A taint of someone else's on a tainted Node stays through our writes.
            node = want[0]
            cur = c.get("/api/v1/nodes/" + node).json()
            theirs = {"key": "example.com/site", "value": "a", "effect": "NoSchedule"}
            r = c.patch("/api/v1/nodes/" + node,
                        {"spec": {"taints": (cur["spec"].get("taints") or []) + [theirs]}})
            assert r.status == 200, r.text
            # Scale-in to 1: the Node that lost its pod loses the taint.
            set_replicas(c, "tainted", 1)
            wait_for(lambda: len(pods_of(c, "tainted")) == 1, 30, what="scale-in to 1")
            left = running_nodes(c, "tainted")
            wait_for(lambda: tainted(c) == left, 30, what="taint only on %s (have %s)" % (left, tainted(c)))
            assert any(t.get("key") == "example.com/site" for t in node_taints(c)[node]), node_taints(c)[node]
            # taintKubeNodes off: every taint of ours goes, the foreign one stays.
            r = c.patch(NS_API + "/namespaces/default/nodesets/tainted", {"spec": {"taintKubeNodes": False}})
            assert r.status == 200, r.text
            wait_for(lambda: tainted(c) == [], 30, what="no Node tainted (have %s)" % tainted(c))
            assert any(t.get("key") == "example.com/site" for t in node_taints(c)[node]), node_taints(c)[node]
            # And on again: back on the Node of its pod.
            r = c.patch(NS_API + "/namespaces/default/nodesets/tainted", {"spec": {"taintKubeNodes": True}})
            assert r.status == 200, r.text
            wait_for(lambda: tainted(c) == running_nodes(c, "tainted"), 30, what="taint back")
            # The NodeSet deleted: its pods go, and so does the taint.
            r = c.delete(NS_API + "/namespaces/default/nodesets/tainted")
            assert r.status in (200, 202), r.text
            wait_for(lambda: tainted(c) == [], 60, what="no taint after the NodeSet's deletion")
            # Our pods tolerate the taint (they were never evicted): the plain NodeSet's pod is still there.
            assert len(running_nodes(c, "plain")) == 1
            r = c.patch("/api/v1/nodes/" + node, {"spec": {"taints": None}})
            assert r.status == 200, r.text
            op.check_no_forbidden()


if __name__ == "__main__":
    run_tests(globals())
