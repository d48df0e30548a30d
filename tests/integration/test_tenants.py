#!/usr/bin/env python3
"""Tenants kept apart (issue 39, findings 6 and 7; issue 34, "Tenants kept
apart by default").

Namespace `victim` runs a cluster: a Controller (its JWT key Secret, a
database password Secret), an Accounting, a NodeSet `cpu` (hostname `cpu-`).
Namespace `tenant` belongs to somebody whose rights end at their namespace:
on the real control plane (k8s backend) every object of the tenant is
created with the token of a ServiceAccount of `tenant` bound to a Role of
`tenant` only (all verbs on the Slinky kinds, Secrets, pods), so each path
below is tried exactly as such a user could; on kubesim with the admin
client (kubesim has no authorizer), which changes nothing slurmop sees.

test_tenant_refused: the tenant tries every way into the victim's cluster:
- a Token signing with the victim's JWT key (jwtKeyRef.namespace victim),
  with the victim's database password as key, and with a Secret name that
  does not exist in victim: each Valid=False with a KeyRefused Warning, no
  JWT minted, and the three messages the same but for the names (no Event or
  condition tells whether the other namespace's Secret exists);
- a Token with the tenant's own database password (no Controller of the
  tenant names it as its JWT key) and with a Controller's key that is too
  short (12 bytes): refused, nothing minted;
- a NodeSet of its own with taintKubeNodes (Nodes are cluster-scoped):
  Valid=False naming --allow-node-taints, no Node tainted;
- a NodeSet whose controllerRef is the victim's Controller (the victim's
  hostname prefix, an unknown partition key), a RestApi and a LoginSet of
  that Controller, a Controller whose accountingRef is the victim's
  Accounting: each Valid=False naming the annotation that opts in, the same
  message as for a Controller name the victim does not have; no pod,
  Deployment or Service in tenant; the victim's slurm.conf never changes
  (its bytes before and after) and the victim's pods stay;
- in the victim's own namespace, a NodeSet whose partition config holds an
  unknown key: Valid=False, and slurm.conf does not hold the key (slurmctld
  would not start on it) while the rest of the cluster goes on.
Then the victim opts in (annotation slinky.slurm.net/allowed-namespaces:
tenant on the Controller): the tenant's NodeSet (its partition key fixed)
joins slurm.conf and gets a pod, the Token with the victim's key is
minted; the Token with the database password stays refused (the
Controller does not name that Secret).
"""
# backends: kubesim k8s

import base64
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from backend import api_server, is_k8s  # noqa: E402
from kubesim import run_tests  # noqa: E402
from slurmop import NO_DRAIN, NS_API, Slurmop, apply_crds, make_cluster, pods_of, wait_for  # noqa: E402

VICTIM, TENANT = "victim", "tenant"
ALLOWED = "slinky.slurm.net/allowed-namespaces"
IMAGES = {"slurmd": {"image": "ghcr.io/slinkyproject/slurmd:test"}, "logfile": {"image": "alpine:test"}}

TENANT_RBAC = """
apiVersion: v1
kind: ServiceAccount
metadata: {name: tenant-user, namespace: tenant}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: tenant-user, namespace: tenant}
rules:
  - apiGroups: [slinky.slurm.net]
    resources: ["*"]
    verbs: ["*"]
  - apiGroups: [""]
    resources: [secrets, configmaps, pods, services, events]
    verbs: ["*"]
  - apiGroups: [events.k8s.io]
    resources: [events]
    verbs: [get, list, watch]
  - apiGroups: [apps]
    resources: [deployments, statefulsets]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: tenant-user, namespace: tenant}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: tenant-user}
subjects:
  - {kind: ServiceAccount, name: tenant-user, namespace: tenant}
"""


def ensure_ns(c, ns):
    r = c.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    assert r.status in (201, 409), r.text


def secret(c, ns, name, key, value):
    r = c.post("/api/v1/namespaces/%s/secrets" % ns,
               {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                "data": {key: base64.b64encode(value).decode()}})
    assert r.status in (201, 409), r.text


def cr(c, ns, kind, name, spec, annotations=None):
    meta = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    plural = kind.lower() + "s"
    r = c.post(NS_API + "/namespaces/%s/%s" % (ns, plural),
               {"apiVersion": "slinky.slurm.net/v1beta1", "kind": kind, "metadata": meta, "spec": spec})
    assert r.status == 201, r.text
    return r.json()


def get(c, path):
    r = c.get(path)
    return r.json() if r.status == 200 else None


def valid_false(c, ns, plural, name):
    o = get(c, NS_API + "/namespaces/%s/%s/%s" % (ns, plural, name))
    for cd in ((o or {}).get("status") or {}).get("conditions") or []:
        if cd.get("type") == "Valid" and cd.get("status") == "False":
            return cd
    return None


def wait_refused(c, ns, plural, name):
    return wait_for(lambda: valid_false(c, ns, plural, name), 30, what="Valid=False on %s %s/%s" % (plural, ns, name))


def events(c, ns, name, reason):
    r = c.get("/apis/events.k8s.io/v1/namespaces/%s/events" % ns)
    return [e for e in (r.json().get("items") or []) if e.get("reason") == reason and e.get("type") == "Warning"
            and (e.get("regarding") or {}).get("name") == name]


def slurm_conf(c):
    cm = get(c, "/api/v1/namespaces/%s/configmaps/slurm-config" % VICTIM)
    return ((cm or {}).get("data") or {}).get("slurm.conf") or ""


def tenant_client(ks, admin):
    """The tenant's client: a ServiceAccount token with a Role of `tenant` only (k8s); the admin on kubesim."""
    if not is_k8s():
        return admin
    ks.kubectl("apply", "-f", "-", stdin=TENANT_RBAC)
    tok = ks.kubectl("create", "token", "tenant-user", "-n", TENANT, "--duration=1h").stdout.strip()
    c = ks.client(cert=False, token=tok)
    # Its rights end at its namespace.
    assert c.get(NS_API + "/namespaces/%s/controllers" % VICTIM).status == 403
    assert c.get("/api/v1/namespaces/%s/secrets" % VICTIM).status == 403
    return c


def test_tenant_refused():
    with api_server(nodes=4) as ks:
        c = ks.client()
        apply_crds(c)
        for ns in (VICTIM, TENANT):
            ensure_ns(c, ns)
        make_cluster(c, ns=VICTIM, nodesets={"cpu": dict(replicas=1, partition={"enabled": True,
                                                                                   "config": "Default=YES"},
                                                         **IMAGES)}, no_drain=True)
        secret(c, VICTIM, "db-pass", "password", b"victim-db-password-Zq8")
        cr(c, VICTIM, "Accounting", "acct", {
            "slurmKeyRef": {"name": "slurm-auth-slurm", "key": "slurm.key"},
            "jwtKeyRef": {"name": "slurm-auth-jwt", "key": "jwt.key"},
            "storageConfig": {"host": "mariadb", "passwordKeyRef": {"name": "db-pass", "key": "password"}},
            "slurmdbd": {"image": "ghcr.io/slinkyproject/slurmdbd:test"}})
        t = tenant_client(ks, c)
        # The tenant's own Secrets: keys for its pods, its own database password, a short JWT key.
        for name, key, val in (("slurm-auth-slurm", "slurm.key", b"k" * 64), ("slurm-auth-jwt", "jwt.key", b"j" * 64),
                               ("own-pw", "password", b"tenant-db-password"), ("short-jwt", "jwt.key", b"s" * 12)):
            secret(t, TENANT, name, key, val)
        cr(t, TENANT, "Controller", "short", {"external": True, "externalConfig": {"host": "h", "port": 6817},
                                              "jwtKeyRef": {"name": "short-jwt", "key": "jwt.key"}})
        victim_ctl = {"name": "slurm", "namespace": VICTIM}

        with Slurmop(ks.kubeconfig, token_users="*") as op:
            op.wait_ready()
            conf0 = wait_for(lambda: (lambda s: s if "NodeSet=cpu" in s else None)(slurm_conf(c)), 30,
                             what="the victim's slurm.conf")
            wait_for(lambda: pods_of(c, "cpu", ns=VICTIM), 30, what="the victim's pod")

            # Tokens.
            for name, ref in (("t-victim-key", {"name": "slurm-auth-jwt", "key": "jwt.key", "namespace": VICTIM}),
                              ("t-victim-pw", {"name": "db-pass", "key": "password", "namespace": VICTIM}),
                              ("t-ghost", {"name": "no-such", "key": "jwt.key", "namespace": VICTIM}),
                              ("t-own-pw", {"name": "own-pw", "key": "password"}),
                              ("t-short", {"name": "short-jwt", "key": "jwt.key"})):
                cr(t, TENANT, "Token", name, {"username": "alice", "jwtKeyRef": ref,
                                              "secretRef": {"name": "out-" + name, "key": "SLURM_JWT"}})
            # References to the victim's Controller and Accounting, and to a Controller the victim does not have.
            cr(t, TENANT, "NodeSet", "grab", dict(controllerRef=victim_ctl, replicas=1,
                                                  template={"spec": {"hostname": "cpu-"}},
                                                  partition={"enabled": True, "config": "Bogus=1"}, **IMAGES),
               annotations={NO_DRAIN: "true"})
            cr(t, TENANT, "NodeSet", "ghost", dict(controllerRef={"name": "nope", "namespace": VICTIM}, replicas=1,
                                                   template={"spec": {"hostname": "gh-"}}, **IMAGES),
               annotations={NO_DRAIN: "true"})
            cr(t, TENANT, "RestApi", "ra", {"controllerRef": victim_ctl, "replicas": 1,
                                            "slurmrestd": {"image": "ghcr.io/slinkyproject/slurmrestd:test"}})
            cr(t, TENANT, "LoginSet", "login", {"controllerRef": victim_ctl, "replicas": 1,
                                                "sssdConfRef": {"name": "own-pw", "key": "password"},
                                                "login": {"image": "ghcr.io/slinkyproject/login:test"},
                                                "initconf": {"image": "alpine:test"}})
            cr(t, TENANT, "Controller", "ctl", {
                "slurmKeyRef": {"name": "slurm-auth-slurm", "key": "slurm.key"},
                "jwtKeyRef": {"name": "slurm-auth-jwt", "key": "jwt.key"},
                "accountingRef": {"name": "acct", "namespace": VICTIM},
                "slurmctld": {"image": "ghcr.io/slinkyproject/slurmctld:test"}, "logfile": {"image": "alpine:test"},
                "persistence": {"enabled": False}})
            # A NodeSet of the tenant's own cluster that would taint the (cluster-scoped) Nodes its pods land on.
            cr(t, TENANT, "NodeSet", "taint", dict(controllerRef={"name": "short"}, replicas=1, taintKubeNodes=True,
                                                   template={"spec": {"hostname": "tn-"}}, **IMAGES),
               annotations={NO_DRAIN: "true"})
            # The victim's own NodeSet with a key slurmctld does not know.
            cr(c, VICTIM, "NodeSet", "typo", dict(controllerRef={"name": "slurm"}, replicas=1,
                                                  template={"spec": {"hostname": "typo-"}},
                                                  partition={"enabled": True, "config": "MaxTime=60 Bogus=1"},
                                                  **IMAGES), annotations={NO_DRAIN: "true"})

            msgs = {}
            for name in ("t-victim-key", "t-victim-pw", "t-ghost", "t-own-pw", "t-short"):
                cd = wait_refused(t, TENANT, "tokens", name)
                msgs[name] = cd["message"]
                wait_for(lambda: events(t, TENANT, name, "KeyRefused"), 30, what="KeyRefused Event on " + name)
            # The same words whether the Secret exists, is a password, or is not there at all.
            norm = {n: msgs[n].replace("slurm-auth-jwt", "X").replace("db-pass", "X").replace("no-such", "X")
                    .replace("(key jwt.key)", "(key K)").replace("(key password)", "(key K)")
                    for n in ("t-victim-key", "t-victim-pw", "t-ghost")}
            assert len(set(norm.values())) == 1, msgs
            assert ALLOWED in msgs["t-victim-key"], msgs
            assert "12 bytes" in msgs["t-short"], msgs["t-short"]
            assert "names or owns it" in msgs["t-own-pw"], msgs["t-own-pw"]

            for plural, name in (("nodesets", "grab"), ("nodesets", "ghost"), ("restapis", "ra"),
                                 ("loginsets", "login"), ("controllers", "ctl")):
                cd = wait_refused(t, TENANT, plural, name)
                assert ALLOWED in cd["message"] and '"%s"' % TENANT in cd["message"], (name, cd)
                msgs[name] = cd["message"]
                wait_for(lambda: events(t, TENANT, name, "ValidationFailed"), 30,
                         what="ValidationFailed Event on " + name)
            # A Controller the victim has and one it has not: the same refusal.
            assert msgs["grab"].split(";")[0].replace("victim/slurm", "X") == \
                msgs["ghost"].split(";")[0].replace("victim/nope", "X"), (msgs["grab"], msgs["ghost"])
            assert "Bogus" in msgs["grab"], msgs["grab"]
            cd = wait_refused(t, TENANT, "nodesets", "taint")
            assert "--allow-node-taints" in cd["message"], cd
            cd = wait_refused(c, VICTIM, "nodesets", "typo")
            assert "Bogus" in cd["message"] and "partition" in cd["message"], cd

            time.sleep(2.0)  # whatever the operator would do, it has done
            for s in ("out-t-victim-key", "out-t-victim-pw", "out-t-ghost", "out-t-own-pw", "out-t-short"):
                assert c.get("/api/v1/namespaces/%s/secrets/%s" % (TENANT, s)).status == 404, s
            assert pods_of(c, "grab", ns=TENANT) == [] and pods_of(c, "ghost", ns=TENANT) == []
            tainted = [n["metadata"]["name"] for n in c.get("/api/v1/nodes").json()["items"]
                       if any(x.get("key") == "nodeset.slinky.slurm.net/worker" for x in
                              (n.get("spec") or {}).get("taints") or [])]
            assert tainted == [], tainted
            assert c.get("/apis/apps/v1/namespaces/%s/deployments/ra-restapi" % TENANT).status == 404
            assert c.get("/apis/apps/v1/namespaces/%s/deployments/login" % TENANT).status == 404
            assert c.get("/apis/apps/v1/namespaces/%s/statefulsets/ctl-controller" % TENANT).status == 404
            conf1 = slurm_conf(c)
            assert "Bogus" not in conf1 and "grab" not in conf1, conf1
            # The victim's typo NodeSet: its partition without the bad text, nothing else of the file changed.
            assert conf1.replace("NodeSet=typo Feature=typo\nPartitionName=typo Nodes=typo \n", "") == conf0 or \
                conf1 == conf0, (conf0, conf1)
            assert len(pods_of(c, "cpu", ns=VICTIM)) == 1

            # The victim opts in; the tenant fixes its partition config.
            r = c.patch(NS_API + "/namespaces/%s/controllers/slurm" % VICTIM,
                        {"metadata": {"annotations": {ALLOWED: TENANT}}})
            assert r.status == 200, r.text
            r = t.patch(NS_API + "/namespaces/%s/nodesets/grab" % TENANT,
                        {"spec": {"template": {"spec": {"hostname": "grab-"}},
                                  "partition": {"enabled": True, "config": "Default=NO"}}})
            assert r.status == 200, r.text
            wait_for(lambda: "NodeSet=grab" in slurm_conf(c), 30, what="the tenant's NodeSet in slurm.conf")
            wait_for(lambda: pods_of(c, "grab", ns=TENANT), 30, what="the tenant's pod")
            wait_for(lambda: c.get("/api/v1/namespaces/%s/secrets/out-t-victim-key" % TENANT).status == 200, 30,
                     what="the Token signed with the victim's key, once admitted")
            wait_for(lambda: valid_false(t, TENANT, "restapis", "ra") is None, 30, what="the RestApi admitted")
            assert valid_false(t, TENANT, "tokens", "t-victim-pw"), "the database password became a JWT key"
            assert c.get("/api/v1/namespaces/%s/secrets/out-t-victim-pw" % TENANT).status == 404
            assert valid_false(t, TENANT, "controllers", "ctl"), "the Accounting did not opt in"
            op.check_no_forbidden()


if __name__ == "__main__":
    run_tests(globals())
