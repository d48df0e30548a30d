#!/usr/bin/env python3
"""NodeSet volumeClaimTemplates cannot change after creation.

On a real API server (integration.k8s.nodeset_immutable) the CRD's
transition rule refuses the edit with 422. kubesim does not evaluate CEL, so
there the edit is stored and slurmop's own check (reconcilers/nodeset_immut)
refuses it: condition Valid=False reason ValidationFailed, a Warning Event,
and nothing of the new generation acted on (a scale-out in the same edit
waits); putting the templates back clears the condition and the scale-out
goes ahead. A NodeSet recreated under the same name with other templates is
a new object (new uid) and is accepted."""
# backends: kubesim k8s

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from backend import api_server, is_k8s  # noqa: E402
from kubesim import run_tests  # noqa: E402
from slurmop import NS_API, Slurmop, apply_crds, make_cluster, pods_of, wait_for  # noqa: E402

IMAGES = {"slurmd": {"image": "ghcr.io/slinkyproject/slurmd:test"}, "logfile": {"image": "alpine:test"}}
CLAIM = {"metadata": {"name": "data"},
         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
BIGGER = {"metadata": {"name": "data"},
          "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}}
MSG = "volumeClaimTemplates cannot be changed after creation"
PATH = NS_API + "/namespaces/default/nodesets/"


def nodeset(c, name):
    return c.get(PATH + name).json()


def condition(c, name, ctype):
    for cd in ((nodeset(c, name) or {}).get("status") or {}).get("conditions") or []:
        if cd.get("type") == ctype:
            return cd
    return None


def events(c, name, reason):
    r = c.get("/apis/events.k8s.io/v1/namespaces/default/events")
    assert r.status == 200, r.text
    return [e for e in r.json().get("items") or []
            if e.get("reason") == reason and (e.get("regarding") or {}).get("kind") == "NodeSet"
            and (e.get("regarding") or {}).get("name") == name]


def is_ready(p):
    return any(c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", []))


def ready(c, name):
    return sorted(p["metadata"]["name"] for p in pods_of(c, name, include_terminating=False) if is_ready(p))


def pvcs(c):
    return sorted(i["metadata"]["name"] for i in
                  c.get("/api/v1/namespaces/default/persistentvolumeclaims").json()["items"])


def test_volume_claim_templates_immutable():
    with api_server(nodes=4) as ks:
        c = ks.client()
        apply_crds(c)
        if is_k8s():
            for i in range(4):  # no provisioner: static volumes for the claims to bind
                r = c.post("/api/v1/persistentvolumes", {
                    "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "immut-pv-%d" % i},
                    "spec": {"capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"],
                             "persistentVolumeReclaimPolicy": "Delete", "hostPath": {"path": "/tmp/immut-%d" % i}}})
                assert r.status in (201, 409), r.text
        make_cluster(c, nodesets={"cpu": dict(replicas=1, volumeClaimTemplates=[CLAIM], **IMAGES),
                                  "gpu": dict(replicas=1, **IMAGES)}, no_drain=True)
        with Slurmop(ks.kubeconfig) as op:
            op.wait_ready()
            wait_for(lambda: ready(c, "cpu") == ["cpu-0"] and ready(c, "gpu") == ["gpu-0"], 30, what="one pod each")
            assert pvcs(c) == ["data-cpu-0"], pvcs(c)

            edits = (("cpu", {"replicas": 2, "volumeClaimTemplates": [BIGGER]}),   # changed
                     ("cpu", {"replicas": 2, "volumeClaimTemplates": None}),       # removed
                     ("gpu", {"replicas": 2, "volumeClaimTemplates": [CLAIM]}))    # added
            if is_k8s():
                # The API server refuses each edit with the rule's message.
                for name, spec in edits:
                    r = c.patch(PATH + name, {"spec": spec})
                    assert r.status == 422 and MSG in r.json().get("message", ""), (name, r.status, r.text[:300])
                assert nodeset(c, "cpu")["spec"]["volumeClaimTemplates"] == [CLAIM]
            else:
                for i, (name, spec) in enumerate(edits):
                    claims = pvcs(c)
                    r = c.patch(PATH + name, {"spec": spec})
                    assert r.status == 200, r.text  # kubesim stores it
                    cd = wait_for(lambda: (lambda x: x if x and x["status"] == "False" and
                                           MSG in x.get("message", "") else None)(condition(c, name, "Valid")), 30,
                                  what="Valid=False on %s (edit %d)" % (name, i))
                    assert cd["reason"] == "ValidationFailed", cd
                    evs = wait_for(lambda: [e for e in events(c, name, "ValidationFailed") if MSG in e.get("note", "")],
                                   30, what="ValidationFailed Event on %s" % name)
                    assert all(e["type"] == "Warning" for e in evs), evs
                    # Nothing of the refused generation is acted on: no second pod, no new claim.
                    assert [p["metadata"]["name"] for p in pods_of(c, name)] == [name + "-0"], pods_of(c, name)
                    assert pvcs(c) == claims, (pvcs(c), claims)
                    # Put the templates back: the scale-out of the same edit goes ahead.
                    back = {"volumeClaimTemplates": [CLAIM] if name == "cpu" else None}
                    r = c.patch(PATH + name, {"spec": back})
                    assert r.status == 200, r.text
                    wait_for(lambda: condition(c, name, "Valid") is None, 30, what="Valid condition removed")
                    wait_for(lambda: ready(c, name) == [name + "-0", name + "-1"], 30, what="%s scaled to 2" % name)
                    r = c.patch(PATH + name, {"spec": {"replicas": 1}})
                    assert r.status == 200, r.text
                    wait_for(lambda: ready(c, name) == [name + "-0"] and len(pods_of(c, name)) == 1, 30,
                             what="%s back to 1" % name)
            # Edits that keep the templates go through (and [] is "no claims", like absent).
            r = c.patch(PATH + "gpu", {"spec": {"replicas": 2, "volumeClaimTemplates": []}})
            assert r.status == 200, r.text
            wait_for(lambda: ready(c, "gpu") == ["gpu-0", "gpu-1"], 30, what="gpu scaled to 2")
            assert condition(c, "gpu", "Valid") is None

            # Recreated under the same name with other templates: a new object, accepted.
            r = c.delete(PATH + "cpu")
            assert r.status in (200, 202), r.text
            wait_for(lambda: c.get(PATH + "cpu").status == 404 and not pods_of(c, "cpu"), 60, what="cpu gone")
            r = c.post(NS_API + "/namespaces/default/nodesets", {
                "apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet",
                "metadata": {"name": "cpu", "annotations": {"nodeset.slinky.slurm.net/delete-without-drain": "true"}},
                "spec": dict(controllerRef={"name": "slurm"}, replicas=1, volumeClaimTemplates=[
                    {"metadata": {"name": "scratch"}, "spec": BIGGER["spec"]}], template={"spec": {"hostname": "cpu-"}},
                    **IMAGES)})
            assert r.status == 201, r.text
            wait_for(lambda: ready(c, "cpu") == ["cpu-0"], 30, what="recreated cpu-0")
            assert "scratch-cpu-0" in pvcs(c), pvcs(c)
            assert condition(c, "cpu", "Valid") is None


if __name__ == "__main__":
    run_tests(globals())
