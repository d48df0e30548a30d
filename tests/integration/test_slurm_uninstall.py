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

The Controller names an Accounting. helm deletes the Secrets first, then the
custom resources by kind in alphabetical order, so the Accounting went a
moment before the Controller: slurmop rewrote slurm.conf without accounting
and rolled slurmctld, slurmrestd and the login pods in the middle of the
drain, whose new pods could not start without the key Secrets (seen on real
pods: the uninstall hung, condemned pods kept for want of Slurm). The
Accounting now holds the same finalizer while NodeSets of a Controller that
names it exist.

With a job running on slinky-1, the JWT key Secret and the Accounting are
deleted, then (a second later, so that slurmop has seen the Accounting go)
the Controller, the NodeSet and the RestApi: the Accounting stays, being
deleted, and slurm.conf and slurmctld's pod template do not change; the idle
pod goes at once, the busy one only after its job completed (never before),
then the NodeSet, then the Accounting, the RestApi and the Controller and
every object they own: nothing is left.
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
                 "/api/v1/namespaces/default/secrets", "/api/v1/namespaces/default/pods"):
        r = c.get(path)
        assert r.status == 200, r.text
        for o in r.json().get("items") or []:
            refs = o["metadata"].get("ownerReferences") or []
            if any(ref.get("apiVersion", "").startswith("slinky.slurm.net/") for ref in refs):
                left.append("%s/%s" % (path.rsplit("/", 1)[1], o["metadata"]["name"]))
    return sorted(left)


def add_accounting(c):
    """An Accounting that the Controller names (no database: slurmdbd never
    runs here)."""
    import base64
    r = c.post("/api/v1/namespaces/default/secrets",
               {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "slurm-db"},
                "data": {"password": base64.b64encode(b"db-password").decode()}})
    assert r.status == 201, r.text
    r = c.post(CR + "accountings",
               {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "Accounting", "metadata": {"name": "slurm"},
                "spec": {"slurmKeyRef": {"name": "slurm-auth-slurm", "key": "slurm.key"},
                         "jwtKeyRef": {"name": "slurm-auth-jwt", "key": "jwt.key"},
                         "slurmdbd": {"image": "ghcr.io/slinkyproject/slurmdbd:test"},
                         "storageConfig": {"host": "mariadb", "username": "slurm",
                                           "passwordKeyRef": {"name": "slurm-db", "key": "password"}}}})
    assert r.status == 201, r.text
    r = c.patch(CR + "controllers/slurm", {"spec": {"accountingRef": {"name": "slurm"}}})
    assert r.status == 200, r.text


def ctld_config(c):
    """(slurm.conf, slurmctld's pod template annotations)."""
    cm = c.get("/api/v1/namespaces/default/configmaps/slurm-config")
    sts = c.get("/apis/apps/v1/namespaces/default/statefulsets/slurm-controller")
    if cm.status != 200 or sts.status != 200:
        return None, None
    return (cm.json()["data"].get("slurm.conf", ""),
            sts.json()["spec"]["template"]["metadata"].get("annotations") or {})


def scenario(ks, lab):
    c = ks.client()
    apply_crds(c)
    lab_cluster(c, lab, {"slinky": dict(replicas=2, **IMAGES)})
    add_accounting(c)
    with Slurmop(ks.kubeconfig, **lab.slurmop_flags()) as op:
        op.wait_ready()
        wait_for(lambda: live_names(c) == NODES[:2], 30, what="2 pods")
        wait_for(lambda: all("SlurmNodeStateIdle" in conds(pod(c, n)) for n in NODES[:2]), 30, what="idle pods")
        wait_for(lambda: "AccountingStorageType=accounting_storage/slurmdbd" in (ctld_config(c)[0] or ""), 30,
                 what="slurm.conf with the Accounting")
        # (What holds them; the checks below are on behaviour alone.)
        time.sleep(1)
        log("finalizers: Controller %r, RestApi %r, Accounting %r" % (
            finalizers(c, CR + "controllers/slurm"), finalizers(c, CR + "restapis/slurm"),
            finalizers(c, CR + "accountings/slurm")))
        conf = ctld_config(c)
        job = lab.sbatch(["slinky-1"], 8)
        wait_for(lambda: lab.job_state(job)[0] == "RUNNING", 30, what="job %s running" % job)
        t0 = time.monotonic()
        # helm's order: Secrets, then the custom resources by kind.
        for path in ("/api/v1/namespaces/default/secrets/slurm-auth-jwt", CR + "accountings/slurm"):
            r = c.delete(path)
            assert r.status in (200, 202), (path, r.status, r.text)
        time.sleep(1)
        assert c.get(CR + "accountings/slurm").status == 200, "the Accounting went before the NodeSet's pods"
        assert ctld_config(c) == conf, "slurm.conf or slurmctld's pod template changed as the Accounting went"
        for path in (CR + "controllers/slurm", CR + "nodesets/slinky", CR + "restapis/slurm"):
            r = c.delete(path)
            assert r.status in (200, 202), (path, r.status, r.text)
        wait_for(lambda: live_names(c) == ["slinky-1"], 30, what="the idle pod drained and gone")
        while lab.job_state(job)[0] in ("RUNNING", "COMPLETING"):
            assert "slinky-1" in live_names(c), "busy pod deleted while its job ran"
            assert c.get(CR + "restapis/slurm").status == 200, "the RestApi went before the NodeSet's pods"
            assert c.get(CR + "controllers/slurm").status == 200, "the Controller went before the NodeSet's pods"
            assert c.get(CR + "accountings/slurm").status == 200, "the Accounting went before the NodeSet's pods"
            assert ctld_config(c) == conf, "slurm.conf or slurmctld's pod template changed during the drain"
            time.sleep(0.1)
        state, code, _ = lab.job_state(job)
        assert state == "COMPLETED" and code == "0:0", (state, code)
        wait_for(lambda: c.get(CR + "nodesets/slinky").status == 404, 60, what="the NodeSet gone after its pods")
        wait_for(lambda: all(c.get(CR + p).status == 404 for p in ("restapis/slurm", "controllers/slurm",
                                                                    "accountings/slurm")),
                 30, what="the RestApi, the Controller and the Accounting gone after the NodeSet")
        wait_for(lambda: not owned_left(c), 60, what="nothing of the cluster left (last: %r)" % owned_left(c))
        log("ok: everything deleted at once: drained (job %s %s), all gone in %.1f s" %
            (job, state, time.monotonic() - t0))
    resume_all(lab)


def main():
    run_in_lab("test_slurm_uninstall", NODES, scenario, lambda: api_server(nodes=2), extra_bins=("sbatch",))


if __name__ == "__main__":
    main()
