#!/usr/bin/env python3
"""The uncordon path never leaves a DOWN of its own (issue 32, defect 5):
slurmop against kubesim or a real control plane (tests/lib/backend.py) and a
real Slurm (tests/slurm/slurmlab.sh, SLURMLAB_VERSION).

A rolling update drains the old pod's node (our cordon reason), then the
old pod's preStop sets it DOWN ("slurm-operator: Pod is terminating"): the
node is DOWN+DRAIN. The pod comes back under the same name, not cordoned,
and slurmop undoes its drain. On 24.11 the node then stayed DOWN with
reason "slurm-operator: Pod … was uncordoned": the undrain carried a reason,
which replaced the preStop's, so the stale-DOWN resume (which looks for the
preStop's reason) never came, and 24.11 does not return an admin's DOWN to
service when slurmd registers. Now the undrain of a DOWN node keeps the
reason, and the node is resumed once the new pod is Ready.

Neither kubesim nor kwok runs preStop hooks, so the test sets the drain and
the DOWN with scontrol, as the operator's drain and the hook would. Checked:
while the node is DOWN its reason never reads "was uncordoned", and the node
ends up neither DOWN nor drained under the new pod.
Exit 77 (skipped) without the Slurm binaries or root.
"""
# backends: kubesim k8s
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from backend import api_server  # noqa: E402
from slurmlab import lab_cluster, run_in_lab  # noqa: E402
from slurmop import Slurmop, apply_crds, wait_for  # noqa: E402
from test_slurm_nodeset import IMAGES, NODES, conds, cordon, ctld_log, live_names, log, pod, resume_all  # noqa: E402

PRESTOP = "slurm-operator: Pod is terminating"


def scenario(ks, lab):
    c = ks.client()
    apply_crds(c)
    lab_cluster(c, lab, {"slinky": dict(replicas=2, **IMAGES)})
    with Slurmop(ks.kubeconfig, **lab.slurmop_flags()) as op:
        op.wait_ready()
        wait_for(lambda: live_names(c) == NODES[:2], 30, what="2 pods")
        wait_for(lambda: all("SlurmNodeStateIdle" in conds(pod(c, n)) for n in NODES[:2]), 30, what="idle pods")
        # The old pod is drained by a cordon (our reason), then its preStop
        # sets the node DOWN: DOWN+DRAIN. The lab's ReturnToService=2 may let
        # Slurm itself return the node to service meanwhile: set it again then.
        node1 = pod(c, "slinky-1")["spec"]["nodeName"]
        cordon(c, node1, True)
        wait_for(lambda: "DRAIN" in set((lab.node("slinky-1") or {}).get("state_flags") or []), 30,
                 what="slinky-1 drained for the cordon")
        for attempt in range(4):
            mark = len(ctld_log(lab))
            lab.scontrol("update", "nodename=slinky-1", "state=down", "reason=" + PRESTOP)
            t_end, st = time.monotonic() + 3, "down"
            while time.monotonic() < t_end and st == "down":
                st = (lab.node("slinky-1") or {}).get("state")
                time.sleep(0.2)
            if st == "down":
                break
            log("   try %d: slinky-1 left DOWN by itself (%r): %s" % (
                attempt + 1, st, [x for x in ctld_log(lab)[mark:].splitlines() if "slinky-1" in x][-3:]))
        else:
            raise AssertionError("Slurm kept returning slinky-1 to service; the case could not be set up")
        n = lab.node("slinky-1")
        assert "DRAIN" in set(n.get("state_flags") or []) and n.get("reason") == PRESTOP, n
        uid = pod(c, "slinky-1")["metadata"]["uid"]
        r = c.delete("/api/v1/namespaces/default/pods/slinky-1")
        assert r.status in (200, 202), r.text
        wait_for(lambda: (pod(c, "slinky-1") or {}).get("metadata", {}).get("uid") not in (None, uid), 30,
                 what="slinky-1 recreated")
        # The new pod waits for the cordoned Node; it is uncordoned once the
        # DOWN is older than the stale-DOWN margin (5 s).
        time.sleep(6)
        n = lab.node("slinky-1")
        assert n.get("state") == "down" and n.get("reason") == PRESTOP, n
        cordon(c, node1, False)
        seen = []
        t_end = time.monotonic() + 40
        while time.monotonic() < t_end:
            n = lab.node("slinky-1") or {}
            flags = set(n.get("state_flags") or [])
            seen.append((n.get("state"), sorted(flags), n.get("reason")))
            assert not (n.get("state") == "down" and "was uncordoned" in (n.get("reason") or "")), \
                "the uncordon left slinky-1 DOWN with its own reason: %r" % (seen[-1],)
            if n.get("state") not in ("down", None) and "DRAIN" not in flags:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("slinky-1 not back in service under its new pod: %r" % seen[-5:])
        log("ok: the undrain of a DOWN node kept the preStop's reason and the node was resumed (%r)" %
            (seen[-1],))
    resume_all(lab)


def main():
    run_in_lab("test_slurm_undrain_down", NODES, scenario, lambda: api_server(nodes=2), extra_bins=("sbatch",))


if __name__ == "__main__":
    main()
