#!/usr/bin/env python3
"""A whole cluster deleted at once, as `helm uninstall` of the cluster chart
does (issue 32, defect 8): slurmop against kubesim or a real control plane
(tests/lib/backend.py) and a real Slurm (tests/slurm/slurmlab.sh).

Before, the RestApi went in the same uninstall, and the NodeSet's drain
finalizer then waited for a RestApi forever (helm gave up after 5 minutes,
the NodeSet and its pods stayed). Now the Controller and the RestApi hold
the finalizer slinky.slurm.net/nodesets while NodeSets of their cluster
exist, and serve until the NodeSets are drained; the JWT key Secret may go
first (the key in hand serves).

With a job running on slinky-1, the NodeSet, the RestApi, the Controller and
the JWT key Secret are deleted in one go: the idle pod goes at once, the busy
one only after its job completed (never before), then the NodeSet, then the
RestApi and the Controller and every object they own: nothing is left.
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
from slurmop import NS_API, Slurmop, apply_crds, wait_for  # noqa: E402
from test_slurm_nodeset import IMAGES, NODES, conds, live_names, log, pod, resume_all  # noqa: E402

FIN = "slinky.slurm.net/nodesets"
CR = NS_API + "/namespaces/default/"


def finalizers(c, path):
    r = c.get(path)
    return (r.json().get("metadata", {}).get("finalizers") or []) if r.status == 200 else None


def owned_left(c):
    """Objects of the cluster still there (by the instance labels slurmop sets)."""
    left = []
    for path in ("/apis/apps/v1/namespaces/default/statefulsets", "/apis/apps/v1/namespaces/default/deployments",
                 "/api/v1/namespaces/default/services", "/api/v1/namespaces/default/configmaps",
                 "/api/v1/namespaces/default/pods"):
        r = c.get(path)
        assert r.status == 200, r.text
        for o in r.json().get("items") or []:
            refs = o["metadata"].get("ownerReferences") or []
            if any(ref.get("apiVersion", "").startswith("slinky.slurm.net/") for ref in refs):
                left.append("%s/%s" % (path.rsplit("/", 1)[1], o["metadata"]["name"]))
    return sorted(left)


def scenario(ks, lab):
    c = ks.client()
    apply_crds(c)
    lab_cluster(c, lab, {"slinky": dict(replicas=2, **IMAGES)})
    with Slurmop(ks.kubeconfig, **lab.slurmop_flags()) as op:
        op.wait_ready()
        wait_for(lambda: live_names(c) == NODES[:2], 30, what="2 pods")
        wait_for(lambda: all("SlurmNodeStateIdle" in conds(pod(c, n)) for n in NODES[:2]), 30, what="idle pods")
        # (What holds them; the checks below are on behaviour alone.)
        time.sleep(1)
        log("finalizers: Controller %r, RestApi %r" % (finalizers(c, CR + "controllers/slurm"),
                                                     finalizers(c, CR + "restapis/slurm")))
        job = lab.sbatch(["slinky-1"], 8)
        wait_for(lambda: lab.job_state(job)[0] == "RUNNING", 30, what="job %s running" % job)
        t0 = time.monotonic()
        for path in (CR + "nodesets/slinky", CR + "restapis/slurm", CR + "controllers/slurm",
                     "/api/v1/namespaces/default/secrets/slurm-auth-jwt"):
            r = c.delete(path)
            assert r.status in (200, 202), (path, r.status, r.text)
        wait_for(lambda: live_names(c) == ["slinky-1"], 30, what="the idle pod drained and gone")
        while lab.job_state(job)[0] in ("RUNNING", "COMPLETING"):
            assert "slinky-1" in live_names(c), "busy pod deleted while its job ran"
            assert c.get(CR + "restapis/slurm").status == 200, "the RestApi went before the NodeSet's pods"
            assert c.get(CR + "controllers/slurm").status == 200, "the Controller went before the NodeSet's pods"
            time.sleep(0.1)
        state, code, _ = lab.job_state(job)
        assert state == "COMPLETED" and code == "0:0", (state, code)
        wait_for(lambda: c.get(CR + "nodesets/slinky").status == 404, 60, what="the NodeSet gone after its pods")
        wait_for(lambda: c.get(CR + "restapis/slurm").status == 404 and c.get(CR + "controllers/slurm").status == 404,
                 30, what="the RestApi and the Controller gone after the NodeSet")
        wait_for(lambda: not owned_left(c), 60, what="nothing of the cluster left (last: %r)" % owned_left(c))
        log("ok: everything deleted at once: drained (job %s %s), all gone in %.1f s" %
            (job, state, time.monotonic() - t0))
    resume_all(lab)


def main():
    run_in_lab("test_slurm_uninstall", NODES, scenario, lambda: api_server(nodes=2), extra_bins=("sbatch",))


if __name__ == "__main__":
    main()
