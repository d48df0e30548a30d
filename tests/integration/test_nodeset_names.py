#!/usr/bin/env python3
"""Slurm node names are unique across the NodeSets of a Controller (issue 39,
finding 3; docs/internals/DRAIN-SAFETY.md#names), against kubesim or the real
control plane (tests/lib/backend.py), without Slurm.

Two pods whose slurmds take one name share one Slurm node: a drain read of it
can license deleting either, and the kept one's cordon sync undoes the
drain the other's delete needs. Of two NodeSets that would share a name the
later (creation time, then namespace, then name) is Valid=False with a
Warning Event and creates no pod; a DaemonSet-mode NodeSet whose Nodes map
to one name puts one pod there. Checked, with one Controller:
  - the same prefix twice: gpu- (2 replicas) and, later, gpu- again;
  - prefix arithmetic: tpu- with 11 replicas (tpu-10) and tpu-1 with one
    (its ordinal 0 is tpu-10); tpu-2 with one (tpu-20) is fine;
  - a NodeSet of another namespace (admitted by the Controller) with gpu-;
  - DaemonSet mode on Nodes n1.a and n1.b (both hostname n1): one pod, on
    n1.a, and a SlurmNameConflict Warning;
  - the earlier gpu- NodeSet deleted: the later one becomes valid and gets
    its pods;
  - a NodeSet made invalid after its pods exist can still be deleted (its
    pods drained, here opted out, and its drain finalizer removed).
"""
# backends: kubesim k8s
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from backend import api_server, is_k8s  # noqa: E402
from kubesim import run_tests  # noqa: E402
from slurmop import NO_DRAIN, NS_API, Slurmop, apply_crds, make_cluster, pods_of, wait_for  # noqa: E402

ALLOWED = "slinky.slurm.net/allowed-namespaces"
IMAGES = {"slurmd": {"image": "ghcr.io/slinkyproject/slurmd:test"}, "logfile": {"image": "alpine:test"}}


def nodeset(c, ns, name, spec, no_drain=True):
    body = {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet",
            "metadata": {"name": name, "annotations": {NO_DRAIN: "true"} if no_drain else {}},
            "spec": dict({"controllerRef": {"name": "slurm", "namespace": "default"}, "replicas": 1}, **IMAGES,
                         **spec)}
    r = c.post(NS_API + "/namespaces/%s/nodesets" % ns, body)
    assert r.status == 201, r.text


def valid(c, ns, name):
    """The Valid condition's (status, message), or None."""
    st = c.get(NS_API + "/namespaces/%s/nodesets/%s" % (ns, name)).json().get("status") or {}
    for cd in st.get("conditions") or []:
        if cd["type"] == "Valid":
            return cd["status"], cd.get("message", "")
    return None


def warnings(c, ns, reason, name):
    r = c.get("/apis/events.k8s.io/v1/namespaces/%s/events" % ns)
    assert r.status == 200, r.text
    return [e for e in r.json().get("items") or [] if e.get("reason") == reason and
            (e.get("regarding") or {}).get("name") == name]


def add_node(ks, c, name):
    if is_k8s():
        ks.add_node(name=name)
        return
    tmpl = c.get("/api/v1/nodes").json()["items"][0]
    node = json.loads(json.dumps(tmpl))
    node["metadata"] = {"name": name, "labels": dict(tmpl["metadata"].get("labels", {}),
                                                     **{"kubernetes.io/hostname": name})}
    node["spec"] = {}
    r = c.post("/api/v1/nodes", node)
    assert r.status == 201, r.text


def hosts(c, name, ns="default"):
    return sorted(p["spec"].get("hostname") for p in pods_of(c, name, ns=ns, include_terminating=False))


def test_names_unique():
    with api_server(nodes=4) as ks:
        c = ks.client()
        apply_crds(c)
        make_cluster(c, no_drain=True)
        r = c.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
        assert r.status in (201, 409), r.text
        r = c.patch(NS_API + "/namespaces/default/controllers/slurm",
                    {"metadata": {"annotations": {ALLOWED: "other"}}})
        assert r.status == 200, r.text
        add_node(ks, c, "n1.a")
        add_node(ks, c, "n1.b")
        with Slurmop(ks.kubeconfig) as op:
            op.wait_ready()
            # The earlier ones first, each given its pods before the next.
            nodeset(c, "default", "a1", {"replicas": 2, "template": {"spec": {"hostname": "gpu-"}}})
            nodeset(c, "default", "b1", {"replicas": 11, "template": {"spec": {"hostname": "tpu-"}}})
            wait_for(lambda: len(hosts(c, "a1")) == 2 and len(hosts(c, "b1")) == 11, 60, what="a1 and b1's pods")
            nodeset(c, "default", "a2", {"replicas": 2, "template": {"spec": {"hostname": "gpu-"}}})
            nodeset(c, "default", "b2", {"template": {"spec": {"hostname": "tpu-1"}}})
            nodeset(c, "default", "b3", {"template": {"spec": {"hostname": "tpu-2"}}})
            nodeset(c, "other", "c1", {"template": {"spec": {"hostname": "gpu-"}}})
            affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                       "values": ["n1.a", "n1.b"]}]}]}}}
            nodeset(c, "default", "d1", {"scalingMode": "DaemonSet", "template": {"spec": {"affinity": affinity}}})
            for ns, name, shared in (("default", "a2", "gpu-0"), ("default", "b2", "tpu-10"),
                                     ("other", "c1", "gpu-0")):
                v = wait_for(lambda: (valid(c, ns, name) or ("", ""))[0] == "False" and valid(c, ns, name), 30,
                             what="%s/%s Valid=False" % (ns, name))
                assert shared in v[1], (name, v)
                assert warnings(c, ns, "ValidationFailed", name), name
            wait_for(lambda: hosts(c, "b3") == ["tpu-20"], 30, what="b3's pod tpu-20 (no shared name)")
            wait_for(lambda: len(pods_of(c, "d1", include_terminating=False)) == 1, 30, what="d1's one pod")
            wait_for(lambda: warnings(c, "default", "SlurmNameConflict", "d1"), 30, what="SlurmNameConflict")
            # Nothing more comes for the later ones (their passes keep coming:
            # a2 is queued by a1's pods, d1 by every Node event).
            t_end = time.monotonic() + 3
            while time.monotonic() < t_end:
                assert hosts(c, "a2") == [] and hosts(c, "b2") == [] and hosts(c, "c1", ns="other") == [], \
                    (hosts(c, "a2"), hosts(c, "b2"), hosts(c, "c1", ns="other"))
                d = pods_of(c, "d1", include_terminating=False)
                assert len(d) == 1 and d[0]["spec"].get("hostname") == "n1", d
                time.sleep(0.2)
            assert valid(c, "default", "a1") is None and valid(c, "default", "b1") is None
            # The earlier gpu- NodeSet gone: the later one takes the names.
            r = c.delete(NS_API + "/namespaces/default/nodesets/a1")
            assert r.status in (200, 202), r.text
            wait_for(lambda: hosts(c, "a2") == ["gpu-0", "gpu-1"], 60, what="a2's pods once a1 is gone")
            assert (valid(c, "default", "a2") or ("True",))[0] != "False", valid(c, "default", "a2")
            # A NodeSet made invalid once its pods exist (here by a field
            # validation refuses) can still be deleted: its pods are drained
            # and deleted as always (opted out here: no Slurm) and its drain
            # finalizer goes. The invalid branch used to return first, so
            # it stayed forever.
            nodeset(c, "default", "e1", {"template": {"spec": {"hostname": "zpu-"}}}, no_drain=False)
            wait_for(lambda: hosts(c, "e1") == ["zpu-0"], 30, what="e1's pod")
            wait_for(lambda: "nodeset.slinky.slurm.net/drain" in
                     (c.get(NS_API + "/namespaces/default/nodesets/e1").json()["metadata"].get("finalizers") or []),
                     30, what="e1's drain finalizer")
            r = c.patch(NS_API + "/namespaces/default/nodesets/e1",
                        {"spec": {"template": {"spec": {"hostname": "zpu-", "setHostnameAsFQDN": True}}}})
            assert r.status == 200, r.text
            wait_for(lambda: (valid(c, "default", "e1") or ("",))[0] == "False", 30, what="e1 Valid=False")
            r = c.patch(NS_API + "/namespaces/default/nodesets/e1", {"metadata": {"annotations": {NO_DRAIN: "true"}}})
            assert r.status == 200, r.text
            r = c.delete(NS_API + "/namespaces/default/nodesets/e1")
            assert r.status in (200, 202), r.text
            wait_for(lambda: c.get(NS_API + "/namespaces/default/nodesets/e1").status == 404, 30,
                     what="the invalid NodeSet e1 deleted (its drain finalizer removed)")
            assert hosts(c, "e1") == [], hosts(c, "e1")
            op.check_no_forbidden()


if __name__ == "__main__":
    run_tests(globals())
