#!/usr/bin/env python3
"""pruneSlurmNodeRecords: NodeNotFound in DaemonSet mode (slurmop against
kubesim or a real control plane, tests/lib/backend.py, and a real Slurm
22.05, tests/slurm/slurmlab.sh with its dynamic node dyn1).

The NodeSet's one Kubernetes Node carries the hostname-override annotation
"dyn1", so its pod is the lab's dynamic node (neither kubesim nor kwok runs
a slurmd).
slurmop writes the pod info into dyn1's comment. Then dyn1's slurmd dies,
the Kubernetes Node is deleted and
its pod goes (before Slurm notices: no pod event is left to come when it
does), then dyn1 turns DOWN and NOT_RESPONDING: slurmop deletes the defunct record from Slurm (an Event
DefunctSlurmNodePruned), as Slinky does.
Exit 77 (skipped) without the Slurm binaries or root.
"""
# backends: kubesim k8s
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from backend import api_server  # noqa: E402
from slurmlab import lab_cluster, run_in_lab  # noqa: E402
from slurmop import NS_API, Slurmop, apply_crds, pods_of, wait_for  # noqa: E402
from test_slurm_nodeset import IMAGES, log  # noqa: E402

OVERRIDE = "nodeset.slinky.slurm.net/hostname-override"


def events(c, reason):
    r = c.get("/apis/events.k8s.io/v1/namespaces/default/events")
    assert r.status == 200, r.text
    return [e for e in r.json().get("items") or [] if e.get("reason") == reason]


def scenario(ks, lab):
    c = ks.client()
    apply_crds(c)
    node = ks.node_names()[0]
    r = c.patch("/api/v1/nodes/" + node, {"metadata": {"annotations": {OVERRIDE: "dyn1"}}})
    assert r.status == 200, r.text
    lab_cluster(c, lab, {"ds": dict(scalingMode="DaemonSet", pruneSlurmNodeRecords="NodeNotFound",
                                         **IMAGES)})
    uid = c.get(NS_API + "/namespaces/default/nodesets/ds").json()["metadata"]["uid"]
    with Slurmop(ks.kubeconfig, slurmrestd="default/slurm=" + lab.url, slurm_conf=lab.conf,
                 env={"SLURM_CONF": lab.conf}) as op:
        op.wait_ready()
        pods = wait_for(lambda: pods_of(c, "ds") or None, 30, what="the DaemonSet pod")
        assert pods[0]["spec"]["hostname"] == "dyn1", pods[0]["spec"]
        info = wait_for(lambda: (lab.node("dyn1") or {}).get("comment"), 20, what="pod info in dyn1's comment")
        assert json.loads(info)["nodeSetUID"] == uid, info
        log("ok 1: dyn1 is the DaemonSet pod's Slurm node")

        # The Kubernetes side goes first, before Slurm has noticed anything:
        # no pod event comes once the node turns defunct, and the prune must
        # still happen (slurmop is told by the node table's change).
        with open(os.path.join(lab.dir, "run", "slurmd.dyn1.pid")) as f:
            os.kill(int(f.read().strip()), signal.SIGKILL)
        ks.delete_node(node)
        def pods_gone():
            # Deleted as Kubernetes' pod garbage collector deletes the pods
            # of a Node that is gone: a pod slurmop made again before it saw
            # the Node's deletion (the two watches are not ordered) too.
            # Forced (grace 0) as that collector does: on a real control
            # plane no kubelet is left to finish a graceful deletion.
            left = pods_of(c, "ds")
            for p in left:
                c.delete("/api/v1/namespaces/default/pods/" + p["metadata"]["name"],
                         {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
            return not left
        wait_for(pods_gone, 30, interval=0.3, what="the pod gone")
        assert lab.node("dyn1") is not None, "dyn1's record went before slurmop pruned it"
        log("ok 2: dyn1's slurmd killed, its Node and pod deleted; Slurm still shows it %s" %
            lab.node("dyn1").get("state"))
        wait_for(lambda: lab.node("static-0") is not None and lab.node("dyn1") is None, 60,
                 what="dyn1's record deleted from Slurm")
        p = subprocess.run(["scontrol", "show", "node", "dyn1"], env=lab.cli_env, capture_output=True, text=True)
        assert p.returncode != 0 and "not found" in (p.stdout + p.stderr).lower(), (p.stdout, p.stderr)
        ev = wait_for(lambda: events(c, "DefunctSlurmNodePruned"), 20, what="DefunctSlurmNodePruned Event")
        assert "dyn1" in ev[0].get("note", ""), ev
        log("ok 3: the defunct record of dyn1 was pruned")


def main():
    run_in_lab("test_slurm_prune", ["static-0"], scenario, lambda: api_server(nodes=1, max_grace="200ms"),
               lab_env={"SLURMLAB_DYNAMIC": "1", "SLURMLAB_EXTRA_CONF": "SlurmdTimeout=5"})


if __name__ == "__main__":
    main()
