#!/usr/bin/env python3
"""Unhealthy Nodes without Slurm (docs/internals/NODE-HEALTH.md): where the
replacement of a pod drained for health may go.

slurmop with --unhealthy-node-taint example.com/gpu-bad on kubesim (or the
real control plane); NodeSets opted out of draining (no Slurm runs here), so
only the Kubernetes side is looked at:

  1. DaemonSet mode: a Node with the taint (PreferNoSchedule, which the
     scheduler alone would not honour) gets no pod of the NodeSet, the
     others one each; once the taint goes, it gets its pod;
  2. StatefulSet mode: a pod created while a Node is unhealthy carries a
     required node affinity metadata.name NotIn that Node, and is never
     scheduled there.
About 15 s. (The StatefulSet replacement of a pod drained for health, with
the real Slurm lab: test_slurm_health.py.)
"""
# backends: kubesim k8s
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from backend import api_server  # noqa: E402
from slurmop import Slurmop, apply_crds, make_cluster, pods_of, wait_for  # noqa: E402

IMAGES = {"slurmd": {"image": "ghcr.io/slinkyproject/slurmd:test"}, "logfile": {"image": "alpine:test"}}
TAINT = "example.com/gpu-bad"


def node_names(c):
    return sorted(n["metadata"]["name"] for n in c.get("/api/v1/nodes").json()["items"])


def set_taint(c, node, on):
    n = c.get("/api/v1/nodes/" + node).json()
    taints = [t for t in n["spec"].get("taints") or [] if t["key"] != TAINT]
    if on:
        taints.append({"key": TAINT, "value": "xid-79", "effect": "PreferNoSchedule"})
    r = c.patch("/api/v1/nodes/" + node, {"spec": {"taints": taints}})
    assert r.status == 200, r.text


def on_nodes(c, ns):
    return sorted(p["spec"].get("nodeName", "?") for p in pods_of(c, ns, include_terminating=False))


def main():
    # One NodeSet at a time: slurmd pods keep to one per host (pod anti-affinity).
    with api_server(nodes=3) as ks:
        c = ks.client()
        apply_crds(c)
        nodes = node_names(c)
        set_taint(c, nodes[1], True)
        make_cluster(c, nodesets={"ds": dict(scalingMode="DaemonSet", **IMAGES)}, no_drain=True)
        with Slurmop(ks.kubeconfig, unhealthy_node_taint=TAINT) as op:
            op.wait_ready()
            wait_for(lambda: len(pods_of(c, "ds")) == 2, 30, what="2 DaemonSet pods")
            # On the real control plane a pod has no nodeName until the
            # scheduler binds it: wait for both bindings, then for good.
            wait_for(lambda: "?" not in on_nodes(c, "ds"), 30, what="both DaemonSet pods bound")
            assert on_nodes(c, "ds") == [nodes[0], nodes[2]], on_nodes(c, "ds")
            assert op.metric("slurmop_health_unhealthy_nodes") == 1
            print("ok 1a: no DaemonSet pod on the unhealthy Node", flush=True)
            set_taint(c, nodes[1], False)
            wait_for(lambda: on_nodes(c, "ds") == nodes, 30, what="a DaemonSet pod on the healthy Node again")
            wait_for(lambda: op.metric("slurmop_health_unhealthy_nodes") == 0, 10, what="no unhealthy Node")
            print("ok 1b: the Node healthy again gets its DaemonSet pod", flush=True)
    with api_server(nodes=3) as ks:
        c = ks.client()
        apply_crds(c)
        nodes = node_names(c)
        set_taint(c, nodes[1], True)
        make_cluster(c, nodesets={"sts": dict(replicas=2, **IMAGES)}, no_drain=True)
        with Slurmop(ks.kubeconfig, unhealthy_node_taint=TAINT) as op:
            op.wait_ready()
            wait_for(lambda: len([p for p in pods_of(c, "sts") if p["spec"].get("nodeName")]) == 2, 30,
                     what="2 StatefulSet pods scheduled")
            for p in pods_of(c, "sts"):
                assert p["spec"]["nodeName"] != nodes[1], "%s went to the unhealthy Node" % p["metadata"]["name"]
                terms = p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
                    "nodeSelectorTerms"]
                assert all(any(f["operator"] == "NotIn" and f["values"] == [nodes[1]]
                               for f in t.get("matchFields") or []) for t in terms), terms
            print("ok 2: StatefulSet pods created while a Node is unhealthy are kept off it", flush=True)
    print("PASS")


if __name__ == "__main__":
    main()
