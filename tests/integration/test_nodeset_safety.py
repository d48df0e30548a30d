"""The NodeSet engine never deletes a pod without a drain confirmed by Slurm,
checked where no Slurm runs (kubesim only, a Controller with no RestApi):

- a scale-in 3 -> 1 keeps the two condemned pods, cordoned
  (nodeset.slinky.slurm.net/pod-cordon=true), with the NodeSet condition
  DrainBlocked=True reason DrainBlockedNoRestApi and a Warning Event of that
  reason; the opt-out annotation
  nodeset.slinky.slurm.net/delete-without-drain=true then deletes them
  (Warning Events DeletedWithoutDrain) and the condition goes;
- a deleted NodeSet stays (deletionTimestamp set, finalizer
  nodeset.slinky.slurm.net/drain held) with its pods until the opt-out
  annotation is added, then its pods and it go; a NodeSet that opted out
  from the start never gets the finalizer and goes at once;
- spec.replicas above 65536: refused by the API server with 422 (the CRD's
  maximum); with a CRD that lacks the maximum, replicas 2147483647 gets the
  operator's own check: condition Valid=False reason ValidationFailed with
  the message, a Warning Event, no pod, /healthz answering at once, and
  another NodeSet of the same run scaling normally; fixing the spec clears
  the condition.

Also on a real control plane (integration.k8s.nodeset_safety,
tests/lib/backend.py): pod deletes are the operator's, counted from the
API server's audit log; the CRD without the maximum replaces the served
one for the last test and is removed afterwards."""
# backends: kubesim k8s

import glob
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from backend import api_server, is_k8s  # noqa: E402
from kubesim import run_tests  # noqa: E402
from slurmop import (NO_DRAIN, NS_API, Slurmop, apply_crds, make_cluster, pods_of, set_replicas,  # noqa: E402
                     wait_for, yaml_to_json, SRC)

IMAGES = {"slurmd": {"image": "ghcr.io/slinkyproject/slurmd:test"}, "logfile": {"image": "alpine:test"}}
CORDON = "nodeset.slinky.slurm.net/pod-cordon"
DRAIN_FINALIZER = "nodeset.slinky.slurm.net/drain"
CRD_API = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def is_ready(p):
    return any(c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", []))


def ready_pods(c, name):
    return [p for p in pods_of(c, name, include_terminating=False) if is_ready(p)]


def names(pods):
    return sorted(p["metadata"]["name"] for p in pods)


def nodeset(c, name):
    r = c.get(NS_API + "/namespaces/default/nodesets/" + name)
    return r.json() if r.status == 200 else None


def condition(c, name, ctype):
    for cd in ((nodeset(c, name) or {}).get("status") or {}).get("conditions") or []:
        if cd.get("type") == ctype:
            return cd
    return None


def events(c, name, reason):
    """Events (events.k8s.io/v1) about NodeSet name with that reason."""
    r = c.get("/apis/events.k8s.io/v1/namespaces/default/events")
    assert r.status == 200, r.text
    return [e for e in r.json().get("items") or []
            if e.get("reason") == reason and (e.get("regarding") or {}).get("kind") == "NodeSet"
            and (e.get("regarding") or {}).get("name") == name]


def pod_deletes(ks):
    return ks.counters()["byResource"].get("pods", {}).get("delete", 0)


def cordoned(p):
    return (p["metadata"].get("annotations") or {}).get(CORDON) == "true"


def opt_out(c, name):
    r = c.patch(NS_API + "/namespaces/default/nodesets/" + name,
                {"metadata": {"annotations": {NO_DRAIN: "true"}}})
    assert r.status == 200, r.text


def test_scale_in_without_restapi_keeps_pods():
    with api_server(nodes=8, max_grace="200ms") as ks:
        c = ks.client()
        apply_crds(c)
        make_cluster(c, nodesets={"cpu": dict(replicas=3, **IMAGES)})
        with Slurmop(ks.kubeconfig) as op:
            # The drain finalizer is there before any pod: read the NodeSet
            # the moment the first pod shows (a pod made before it could be
            # deleted with its NodeSet, undrained).
            deadline = time.time() + 30
            while not pods_of(c, "cpu"):
                assert time.time() < deadline, "no pod within 30 s"
                time.sleep(0.005)
            assert DRAIN_FINALIZER in nodeset(c, "cpu")["metadata"].get("finalizers", []), \
                "a pod exists before the NodeSet's drain finalizer"
            op.wait_ready()
            wait_for(lambda: len(ready_pods(c, "cpu")) == 3, 30, what="3 ready pods")
            assert DRAIN_FINALIZER in nodeset(c, "cpu")["metadata"].get("finalizers", [])
            uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods_of(c, "cpu")}
            set_replicas(c, "cpu", 1)

            # The two highest ordinals are condemned: cordoned, kept.
            wait_for(lambda: names(p for p in pods_of(c, "cpu") if cordoned(p)) == ["cpu-1", "cpu-2"], 30,
                     what="cpu-1 and cpu-2 cordoned")
            cd = wait_for(lambda: condition(c, "cpu", "DrainBlocked"), 30, what="DrainBlocked condition")
            assert cd["status"] == "True" and cd["reason"] == "DrainBlockedNoRestApi", cd
            assert "delete-without-drain" in cd.get("message", ""), cd
            evs = wait_for(lambda: events(c, "cpu", "DrainBlockedNoRestApi"), 30, what="DrainBlockedNoRestApi Event")
            assert all(e["type"] == "Warning" for e in evs), evs
            # Kept: a few more passes change nothing.
            time.sleep(2)
            pods = pods_of(c, "cpu")
            assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods} == uids, names(pods)
            assert not any(p["metadata"].get("deletionTimestamp") for p in pods), pods
            assert pod_deletes(ks) == 0, ks.counters()["byResource"].get("pods")
            assert not cordoned([p for p in pods if p["metadata"]["name"] == "cpu-0"][0])
            assert condition(c, "cpu", "DrainBlocked")["status"] == "True"

            # The opt-out: the condemned pods go at once, the condition with them.
            opt_out(c, "cpu")
            wait_for(lambda: names(pods_of(c, "cpu")) == ["cpu-0"], 30, what="cpu-1 and cpu-2 deleted")
            wait_for(lambda: condition(c, "cpu", "DrainBlocked") is None, 30, what="DrainBlocked removed")
            assert pods_of(c, "cpu")[0]["metadata"]["uid"] == uids["cpu-0"]
            assert pod_deletes(ks) == 2, ks.counters()["byResource"].get("pods")
            evs = wait_for(lambda: events(c, "cpu", "DeletedWithoutDrain"), 30, what="DeletedWithoutDrain Event")
            assert all(e["type"] == "Warning" for e in evs), evs
            assert op.ready()


def test_nodeset_deletion_without_restapi():
    with api_server(nodes=8, max_grace="200ms") as ks:
        c = ks.client()
        apply_crds(c)
        make_cluster(c, nodesets={"cpu": dict(replicas=2, **IMAGES)})
        with Slurmop(ks.kubeconfig) as op:
            op.wait_ready()
            wait_for(lambda: len(ready_pods(c, "cpu")) == 2, 30, what="2 ready pods")
            wait_for(lambda: DRAIN_FINALIZER in nodeset(c, "cpu")["metadata"].get("finalizers", []), 10,
                     what="the drain finalizer")
            uids = sorted(p["metadata"]["uid"] for p in pods_of(c, "cpu"))
            r = c.delete(NS_API + "/namespaces/default/nodesets/cpu")
            assert r.status in (200, 202), r.text

            # The NodeSet stays, being deleted, and so do its pods (cordoned).
            wait_for(lambda: names(p for p in pods_of(c, "cpu") if cordoned(p)) == ["cpu-0", "cpu-1"], 30,
                     what="both pods cordoned")
            cd = wait_for(lambda: condition(c, "cpu", "DrainBlocked"), 30, what="DrainBlocked condition")
            assert cd["status"] == "True" and cd["reason"] == "DrainBlockedNoRestApi", cd
            wait_for(lambda: events(c, "cpu", "DrainBlockedNoRestApi"), 30, what="DrainBlockedNoRestApi Event")
            time.sleep(2)
            ns = nodeset(c, "cpu")
            assert ns is not None, "the NodeSet went with pods whose nodes were never drained"
            assert ns["metadata"].get("deletionTimestamp"), ns["metadata"]
            assert DRAIN_FINALIZER in ns["metadata"].get("finalizers", []), ns["metadata"]
            pods = pods_of(c, "cpu")
            assert sorted(p["metadata"]["uid"] for p in pods) == uids, pods
            assert not any(p["metadata"].get("deletionTimestamp") for p in pods), pods
            assert pod_deletes(ks) == 0, ks.counters()["byResource"].get("pods")

            # The opt-out: the pods go, then the finalizer, then the NodeSet.
            opt_out(c, "cpu")
            wait_for(lambda: len(pods_of(c, "cpu")) == 0, 30, what="the pods deleted")
            wait_for(lambda: nodeset(c, "cpu") is None, 30, what="the NodeSet gone")
            wait_for(lambda: events(c, "cpu", "DeletedWithoutDrain"), 30, what="DeletedWithoutDrain Event")

            # Opted out from the start: no drain finalizer, and the deletion is immediate.
            make_cluster(c, nodesets={"gpu": dict(replicas=2, **IMAGES)}, no_drain=True)
            wait_for(lambda: len(ready_pods(c, "gpu")) == 2, 30, what="2 ready gpu pods")
            wait_for(lambda: (nodeset(c, "gpu").get("status") or {}).get("readyReplicas") == 2, 30,
                     what="gpu status.readyReplicas == 2")
            assert DRAIN_FINALIZER not in nodeset(c, "gpu")["metadata"].get("finalizers", []), \
                nodeset(c, "gpu")["metadata"]
            r = c.delete(NS_API + "/namespaces/default/nodesets/gpu")
            assert r.status == 200, r.text
            assert nodeset(c, "gpu") is None, nodeset(c, "gpu")
            wait_for(lambda: len(pods_of(c, "gpu")) == 0, 30, what="gpu pods garbage-collected")
            assert op.ready()


def nodeset_crd_without_maximum():
    """The NodeSet CRD of crds/ with spec.replicas' maximum removed, as an
    API server that never enforced it (or an older CRD) would serve it."""
    [crd] = [d for d in yaml_to_json(sorted(glob.glob(os.path.join(SRC, "crds", "*.yaml"))))
             if d["spec"]["names"]["plural"] == "nodesets"]
    removed = 0
    for v in crd["spec"]["versions"]:
        rep = v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"]
        if rep.pop("maximum", None) is not None:
            removed += 1
    assert removed, "the NodeSet CRD has no spec.replicas maximum"
    return crd


def post_nodeset(c, name, replicas, **extra):
    spec = {"controllerRef": {"name": "slurm"}, "replicas": replicas,
            "template": {"spec": {"hostname": name + "-"}}}
    spec.update(IMAGES)
    spec.update(extra)
    return c.post(NS_API + "/namespaces/default/nodesets",
                  {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet", "metadata": {"name": name},
                   "spec": spec})


def test_replicas_maximum_enforced_by_crd():
    with api_server(nodes=2) as ks:
        c = ks.client()
        apply_crds(c)
        make_cluster(c)
        r = post_nodeset(c, "huge", 65537)
        assert r.status == 422, (r.status, r.text)
        assert "spec.replicas" in r.text and "65536" in r.text, r.text
        r = post_nodeset(c, "max", 65536)
        assert r.status == 201, r.text  # the maximum itself is valid


def test_replicas_beyond_maximum_operator_check():
    with api_server(nodes=8, max_grace="200ms") as ks:
        c = ks.client()
        if is_k8s():
            # the cluster is shared by the file's tests: replace the served CRD
            c.delete(CRD_API + "/nodesets.slinky.slurm.net")
            wait_for(lambda: c.get(CRD_API + "/nodesets.slinky.slurm.net").status == 404, 60,
                     what="the NodeSet CRD gone")
        try:
            crd_without_maximum_scenario(ks, c)
        finally:
            if is_k8s():
                ks.reset()  # the NodeSets and their finalizers
                c = ks.client()
                c.delete(CRD_API + "/nodesets.slinky.slurm.net")
                wait_for(lambda: c.get(CRD_API + "/nodesets.slinky.slurm.net").status == 404, 60,
                         what="the modified NodeSet CRD gone")


def crd_without_maximum_scenario(ks, c):
    for d in [nodeset_crd_without_maximum()]:
        r = c.post(CRD_API, d)
        assert r.status == 201, r.text
    apply_crds(c)  # the other five (409 for NodeSets: ours stays)
    crd = c.get(CRD_API + "/nodesets.slinky.slurm.net").json()
    assert "maximum" not in crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["replicas"]
    make_cluster(c, nodesets={"cpu": dict(replicas=1, **IMAGES)}, no_drain=True)
    r = post_nodeset(c, "huge", 2147483647)
    assert r.status == 201, r.text
    with Slurmop(ks.kubeconfig) as op:
        op.wait_ready()
        cd = wait_for(lambda: condition(c, "huge", "Valid"), 30, what="Valid condition on huge")
        assert cd["status"] == "False" and cd["reason"] == "ValidationFailed", cd
        assert "spec.replicas must be at most 65536, got 2147483647" in cd.get("message", ""), cd
        evs = wait_for(lambda: events(c, "huge", "ValidationFailed"), 30, what="ValidationFailed Event")
        assert all(e["type"] == "Warning" for e in evs), evs
        assert "65536" in evs[0].get("note", ""), evs

        # The loop stays responsive.
        worst = 0.0
        for _ in range(10):
            t0 = time.monotonic()
            status, _body = op.get(op.health_url + "/healthz", timeout=5)
            worst = max(worst, time.monotonic() - t0)
            assert status == 200, status
        assert worst < 1.0, "/healthz took %.2f s" % worst

        # Another NodeSet of the same run scales normally, both ways.
        wait_for(lambda: len(ready_pods(c, "cpu")) == 1, 30, what="1 ready cpu pod")
        set_replicas(c, "cpu", 4)
        wait_for(lambda: len(ready_pods(c, "cpu")) == 4, 30, what="4 ready cpu pods")
        set_replicas(c, "cpu", 2)
        wait_for(lambda: names(pods_of(c, "cpu")) == ["cpu-0", "cpu-1"], 30, what="cpu scaled to 2")
        assert condition(c, "cpu", "Valid") is None, condition(c, "cpu", "Valid")

        # Nothing was created for the invalid NodeSet.
        assert pods_of(c, "huge") == []
        assert condition(c, "huge", "Valid")["status"] == "False"
        assert op.ready()

        # A valid spec again: the condition goes and the pods come.
        r = c.patch(NS_API + "/namespaces/default/nodesets/huge", {"spec": {"replicas": 2}})
        assert r.status == 200, r.text
        wait_for(lambda: len(ready_pods(c, "huge")) == 2, 30, what="2 ready huge pods")
        wait_for(lambda: condition(c, "huge", "Valid") is None, 30, what="Valid condition removed")


if __name__ == "__main__":
    run_tests(globals())
