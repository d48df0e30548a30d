#!/usr/bin/env python3
"""Why a cordoned Node drains its Slurm node: the drain reason slurmop
writes (slurmop against kubesim or a real control plane, tests/lib/backend.py,
and a real Slurm 22.05, slurmlab.sh).

  1. the Node annotation nodeset.slinky.slurm.net/node-cordon-reason is the
     reason (after our prefix), cleaned of control characters;
  2. without it, the Node conditions listed in --propagated-node-conditions
     that are True become the reason, as "(Reason: message)" items; a
     condition not listed is ignored;
  3. with neither, the default reason names the Node and the pod;
  4. uncordoning undrains each node (the reason was ours).
Exit 77 (skipped) without the Slurm binaries or root.
"""
# backends: kubesim k8s
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from backend import api_server  # noqa: E402
from slurmlab import lab_cluster, run_in_lab  # noqa: E402
from slurmop import Slurmop, apply_crds, wait_for  # noqa: E402
from test_slurm_nodeset import IMAGES, PREFIX, conds, cordon, flags, log, pod  # noqa: E402

REASON_ANN = "nodeset.slinky.slurm.net/node-cordon-reason"
NODES = ["slinky-0", "slinky-1", "slinky-2"]


def set_conditions(c, node, conditions):
    cur = c.get("/api/v1/nodes/" + node).json()
    keep = [x for x in (cur.get("status") or {}).get("conditions") or [] if x["type"] not in
            {y["type"] for y in conditions}]
    r = c.patch("/api/v1/nodes/%s/status" % node, {"status": {"conditions": keep + conditions}})
    assert r.status == 200, r.text


def drained(lab, name):
    n = lab.node(name)
    return n if n and "DRAIN" in flags(n) else None


def scenario(ks, lab):
    c = ks.client()
    apply_crds(c)
    lab_cluster(c, lab, {"slinky": dict(replicas=3, **IMAGES)})
    with Slurmop(ks.kubeconfig, slurmrestd="default/slurm=" + lab.url, slurm_conf=lab.conf,
                 propagated_node_conditions="KernelDeadlock,ReadonlyFilesystem",
                 env={"SLURM_CONF": lab.conf}) as op:
        op.wait_ready()
        wait_for(lambda: all(pod(c, n) and "SlurmNodeStateIdle" in conds(pod(c, n)) for n in NODES), 30,
                 what="three idle pods")
        k = {n: pod(c, n)["spec"]["nodeName"] for n in NODES}

        # 1. The annotation.
        r = c.patch("/api/v1/nodes/" + k["slinky-0"],
                    {"metadata": {"annotations": {REASON_ANN: "  gpu 3 ECC errors\n(ticket 42)\x07"}}})
        assert r.status == 200, r.text
        cordon(c, k["slinky-0"], True)
        n = wait_for(lambda: drained(lab, "slinky-0"), 15, what="slinky-0 drained")
        assert n["reason"] == PREFIX + "gpu 3 ECC errors (ticket 42)", n["reason"]
        log("ok 1: the node-cordon-reason annotation is the drain reason: %r" % n["reason"])

        # 2. Propagated conditions (a condition not listed is left out).
        set_conditions(c, k["slinky-1"], [
            {"type": "KernelDeadlock", "status": "True", "reason": "DockerHung", "message": "task docker blocked"},
            {"type": "ReadonlyFilesystem", "status": "False", "reason": "FilesystemIsNotReadOnly", "message": "ok"},
            {"type": "FrequentKubeletRestart", "status": "True", "reason": "Restarts", "message": "5 in 10m"}])
        cordon(c, k["slinky-1"], True)
        n = wait_for(lambda: drained(lab, "slinky-1"), 15, what="slinky-1 drained")
        assert n["reason"] == PREFIX + "(DockerHung: task docker blocked)", n["reason"]
        log("ok 2: a propagated Node condition is the drain reason: %r" % n["reason"])

        # 3. Neither: the default.
        cordon(c, k["slinky-2"], True)
        n = wait_for(lambda: drained(lab, "slinky-2"), 15, what="slinky-2 drained")
        assert n["reason"] == PREFIX + "Node (%s) was cordoned, Pod (default/slinky-2) must be cordoned" % (
            k["slinky-2"]), n["reason"]
        log("ok 3: the default reason: %r" % n["reason"])

        # 4. Uncordon: undrained, each.
        for name in NODES:
            cordon(c, k[name], False)
        for name in NODES:
            wait_for(lambda: lab.node(name) and "DRAIN" not in flags(lab.node(name)), 15,
                     what="%s undrained" % name)
        log("ok 4: uncordoned Nodes undrained their Slurm nodes")


def main():
    run_in_lab("test_slurm_drain_reason", NODES, scenario, lambda: api_server(nodes=3))


if __name__ == "__main__":
    main()
