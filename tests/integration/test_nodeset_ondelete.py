#!/usr/bin/env python3
"""NodeSet updateStrategy OnDelete: a template change makes a new revision
(status.nodeSetHash, updatedReplicas 0) but no pod is replaced until someone
deletes it; a deleted pod comes back at the new revision, the others stay
at the old one; a scale-out creates new pods at the new revision. No Slurm
runs (make_cluster(no_drain=True)); also on a real control plane."""
# backends: kubesim k8s

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from backend import api_server  # noqa: E402
from kubesim import run_tests  # noqa: E402
from slurmop import NS_API, Slurmop, apply_crds, make_cluster, pods_of, set_replicas, wait_for  # noqa: E402

IMAGES = {"slurmd": {"image": "ghcr.io/slinkyproject/slurmd:test"}, "logfile": {"image": "alpine:test"}}
REV = "controller-revision-hash"


def is_ready(p):
    return any(c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", []))


def live(c):
    return {p["metadata"]["name"]: p for p in pods_of(c, "cpu", include_terminating=False)}


def status(c):
    return c.get(NS_API + "/namespaces/default/nodesets/cpu").json().get("status", {})


def short(h):
    return h.split("-")[-1]


def test_on_delete():
    with api_server(nodes=6, max_grace="200ms") as ks:
        c = ks.client()
        apply_crds(c)
        make_cluster(c, nodesets={"cpu": dict(replicas=3, updateStrategy={"type": "OnDelete"}, **IMAGES)},
                     no_drain=True)
        with Slurmop(ks.kubeconfig) as op:
            op.wait_ready()
            wait_for(lambda: len([p for p in live(c).values() if is_ready(p)]) == 3, 30, what="3 ready pods")
            wait_for(lambda: status(c).get("updatedReplicas") == 3, 20, what="updatedReplicas 3")
            old = short(status(c)["nodeSetHash"])
            uids = {n: p["metadata"]["uid"] for n, p in live(c).items()}
            assert all(short(p["metadata"]["labels"][REV]) == old for p in live(c).values())

            r = c.patch(NS_API + "/namespaces/default/nodesets/cpu",
                        {"spec": {"template": {"metadata": {"annotations": {"rollout": "2"}}}}})
            assert r.status == 200, r.text
            st = wait_for(lambda: (lambda s: s if short(s.get("nodeSetHash", old)) != old and
                                   s.get("updatedReplicas") == 0 else None)(status(c)), 20,
                          what="a new revision, no pod updated")
            new = short(st["nodeSetHash"])
            # Nothing is replaced on its own.
            time.sleep(3)
            pods = live(c)
            assert {n: p["metadata"]["uid"] for n, p in pods.items()} == uids, "OnDelete replaced a pod by itself"
            assert all(short(p["metadata"]["labels"][REV]) == old for p in pods.values())
            assert status(c).get("updatedReplicas") == 0, status(c)

            # A pod someone deletes comes back at the new revision; the others stay.
            r = c.delete("/api/v1/namespaces/default/pods/cpu-1")
            assert r.status in (200, 202), r.text
            wait_for(lambda: "cpu-1" in live(c) and live(c)["cpu-1"]["metadata"]["uid"] != uids["cpu-1"] and
                     is_ready(live(c)["cpu-1"]), 30, what="cpu-1 recreated")
            pods = live(c)
            assert short(pods["cpu-1"]["metadata"]["labels"][REV]) == new, pods["cpu-1"]["metadata"]["labels"]
            assert pods["cpu-1"]["metadata"]["annotations"].get("rollout") == "2"
            for n in ("cpu-0", "cpu-2"):
                assert pods[n]["metadata"]["uid"] == uids[n], n
                assert short(pods[n]["metadata"]["labels"][REV]) == old, n
            wait_for(lambda: status(c).get("updatedReplicas") == 1, 20, what="updatedReplicas 1")

            # A scale-out creates pods of the new revision only.
            set_replicas(c, "cpu", 4)
            wait_for(lambda: "cpu-3" in live(c) and is_ready(live(c)["cpu-3"]), 30, what="cpu-3")
            assert short(live(c)["cpu-3"]["metadata"]["labels"][REV]) == new
            wait_for(lambda: status(c).get("updatedReplicas") == 2 and status(c).get("replicas") == 4, 20,
                     what="updatedReplicas 2 of 4")
            time.sleep(2)
            pods = live(c)
            for n in ("cpu-0", "cpu-2"):
                assert pods[n]["metadata"]["uid"] == uids[n], "OnDelete replaced %s by itself" % n


if __name__ == "__main__":
    run_tests(globals())
