#!/usr/bin/env python3
"""A dynamic node that slurmctld lost while it ran a job keeps its pod
(slurmop against kubesim and a real Slurm, tests/slurm/slurmlab.sh with its
dynamic node dyn1).

The NodeSet's one Kubernetes Node carries the hostname-override annotation
"dyn1", so its pod is the lab's dynamic node. A job runs on dyn1; slurmctld
restarts without its state, so it no longer knows dyn1 (a dynamic node's
record lives only in that state) nor the job, while dyn1's slurmd still
runs the job's processes. Then the NodeSet is deleted. Slurm now answers a
read of dyn1 with "no such node", which for a node it never had proves
there is nothing to drain, but not for one it lost: slurmop keeps the pod,
says why (Warning Event DrainBlockedNodeLost, DrainBlocked=True), and lets
it go once dyn1 registers again (slurmd restarted) and is drained.
Exit 77 (skipped) without the Slurm binaries or root.
"""
# backends: kubesim k8s
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from backend import api_server  # noqa: E402
from slurmlab import lab_cluster, run_in_lab  # noqa: E402
from slurmop import NS_API, Slurmop, apply_crds, pods_of, wait_for  # noqa: E402
from test_slurm_nodeset import IMAGES, conds, log, pod  # noqa: E402

OVERRIDE = "nodeset.slinky.slurm.net/hostname-override"
NSP = NS_API + "/namespaces/default/nodesets/ds"


def events(c, reason):
    r = c.get("/apis/events.k8s.io/v1/namespaces/default/events")
    assert r.status == 200, r.text
    return [e for e in r.json().get("items") or [] if e.get("reason") == reason]


def restart_dyn1(lab):
    """Start dyn1's slurmd again as the lab does, so it registers anew."""
    p = subprocess.run(["bash", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "slurm",
                                             "slurmlab.sh"), "restart-dynamic"],
                       env=lab.env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, (p.stdout, p.stderr)


def scenario(ks, lab):
    c = ks.client()
    apply_crds(c)
    node = c.get("/api/v1/nodes").json()["items"][0]["metadata"]["name"]
    r = c.patch("/api/v1/nodes/" + node, {"metadata": {"annotations": {OVERRIDE: "dyn1"}}})
    assert r.status == 200, r.text
    lab_cluster(c, lab, {"ds": dict(scalingMode="DaemonSet", **IMAGES)})
    # A short drift grace: the registration-drift path (a Ready pod whose
    # node Slurm does not know) must keep the lost busy node's pod too.
    with Slurmop(ks.kubeconfig, drift_grace=5, **lab.slurmop_flags()) as op:
        op.wait_ready()
        pods = wait_for(lambda: pods_of(c, "ds") or None, 30, what="the DaemonSet pod")
        name = pods[0]["metadata"]["name"]
        wait_for(lambda: (lab.node("dyn1") or {}).get("comment"), 20, what="pod info in dyn1's comment")
        job = lab.sbatch(["dyn1"], 600)
        wait_for(lambda: lab.job_state(job)[0] == "RUNNING", 30, what="job %s running on dyn1" % job)
        # slurmop has seen it busy (what it remembers of a node Slurm loses).
        wait_for(lambda: {"SlurmNodeStateAllocated", "SlurmNodeStateMixed"} & set(conds(pod(c, name))), 30,
                 what="the pod's Slurm condition Allocated")
        log("ok 1: job %s runs on dyn1, the pod %s's Slurm node" % (job, name))

        lab.restart_ctld("--lose-state")
        wait_for(lambda: lab.node("static-0") is not None, 30, what="slurmctld back")
        assert lab.node("dyn1") is None, "slurmctld kept dyn1 after losing its state: %r" % lab.node("dyn1")
        log("ok 2: slurmctld restarted without its state; it knows neither dyn1 nor job %s" % job)

        ev = wait_for(lambda: events(c, "SlurmNodeLost"), 30, what="SlurmNodeLost Event (drift path)")
        t_end = time.monotonic() + 8
        while time.monotonic() < t_end:
            p = [x for x in pods_of(c, "ds") if x["metadata"]["name"] == name]
            assert p and not p[0]["metadata"].get("deletionTimestamp"), "drift deleted the lost busy node's pod"
            time.sleep(0.5)
        log("ok 2b: registration drift keeps the pod: %s" % ev[0].get("note"))

        r = c.delete(NSP)
        assert r.status in (200, 202), r.text
        ev = wait_for(lambda: events(c, "DrainBlockedNodeLost"), 30, what="DrainBlockedNodeLost Event")
        assert "dyn1" in ev[0].get("note", ""), ev
        t_end = time.monotonic() + 25  # beyond the 20 s a lost idle node waits
        while time.monotonic() < t_end:
            p = [x for x in pods_of(c, "ds") if x["metadata"]["name"] == name]
            assert p and not p[0]["metadata"].get("deletionTimestamp"), \
                "the pod of lost busy node dyn1 was deleted"
            time.sleep(0.5)
        cond = [x for x in c.get(NSP).json().get("status", {}).get("conditions", []) if x["type"] == "DrainBlocked"]
        assert cond and cond[0]["status"] == "True", cond
        log("ok 3: pod %s kept 25 s after the scale-in, DrainBlocked=True: %s" % (name, ev[0].get("note")))

        restart_dyn1(lab)
        wait_for(lambda: not pods_of(c, "ds", include_terminating=False), 60,
                 what="the pod deleted once dyn1 registered again and drained")
        wait_for(lambda: c.get(NSP).status == 404, 30, what="the NodeSet gone")
        state = (lab.node("dyn1") or {}).get("state")
        log("ok 4: dyn1 registered again (%s); drained, its pod deleted, the NodeSet gone" % state)


def main():
    run_in_lab("test_slurm_lost_node", ["static-0"], scenario, lambda: api_server(nodes=1, max_grace="200ms"),
               lab_env={"SLURMLAB_DYNAMIC": "1"}, extra_bins=("sbatch",))


if __name__ == "__main__":
    main()
