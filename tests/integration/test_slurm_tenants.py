#!/usr/bin/env python3
"""A tenant's NodeSet cannot drain another namespace's Slurm nodes (issue 39,
finding 7), on a real Slurm 22.05 (slurmlab.sh) and kubesim or a real control
plane (tests/lib/backend.py).

The victim's cluster in namespace default: the Controller "slurm", its
RestApi (the lab's slurmrestd) and the NodeSet "slinky" (hostname slinky-,
two pods, the lab's nodes slinky-0 and slinky-1); a job runs on slinky-1.
Namespace tenant: a NodeSet whose controllerRef is default/slurm, with the
victim's hostname prefix (its pods would be named slinky-0 and slinky-1, the
victim's Slurm nodes), two replicas, then scaled in to none; and a RestApi of
the victim's Controller (a slurmrestd of the tenant's between the operator and
the victim's Slurm). Before the fix the scale-in drained the victim's busy
node with the tenant's reason. Now: the NodeSet and the RestApi are
Valid=False, the tenant gets no pod, and for the whole run neither Slurm node
is drained and the job keeps running.

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
from slurmop import NS_API, Slurmop, apply_crds, pods_of, set_replicas, wait_for  # noqa: E402
from test_slurm_nodeset import IMAGES, conds, flags, log, pod  # noqa: E402

NODES = ["slinky-0", "slinky-1"]
TENANT = "tenant"


def valid_false(c, ns, plural, name):
    o = c.get(NS_API + "/namespaces/%s/%s/%s" % (ns, plural, name))
    for cd in ((o.json() if o.status == 200 else {}).get("status") or {}).get("conditions") or []:
        if cd.get("type") == "Valid" and cd.get("status") == "False":
            return cd
    return None


def scenario(ks, lab):
    c = ks.client()
    apply_crds(c)
    lab_cluster(c, lab, {"slinky": dict(replicas=2, **IMAGES)})
    r = c.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TENANT}})
    assert r.status in (201, 409), r.text
    with Slurmop(ks.kubeconfig, slurmrestd="default/slurm=" + lab.url, slurm_conf=lab.conf,
                 env={"SLURM_CONF": lab.conf}) as op:
        op.wait_ready()
        wait_for(lambda: all(pod(c, n) and "SlurmNodeStateIdle" in conds(pod(c, n)) for n in NODES), 30,
                 what="the victim's two idle pods")
        job = lab.sbatch(["slinky-1"], 600, name="victim-job")
        wait_for(lambda: lab.job_state(job)[0] == "RUNNING", 30, what="the victim's job running")
        log("the victim's job %s runs on slinky-1" % job)

        r = c.post(NS_API + "/namespaces/%s/nodesets" % TENANT,
                   {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet", "metadata": {"name": "grab"},
                    "spec": dict(controllerRef={"name": "slurm", "namespace": "default"}, replicas=2,
                                 template={"spec": {"hostname": "slinky-"}}, **IMAGES)})
        assert r.status == 201, r.text
        r = c.post(NS_API + "/namespaces/%s/restapis" % TENANT,
                   {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "RestApi", "metadata": {"name": "mitm"},
                    "spec": {"controllerRef": {"name": "slurm", "namespace": "default"},
                             "slurmrestd": {"image": "ghcr.io/slinkyproject/slurmrestd:test"}}})
        assert r.status == 201, r.text
        time.sleep(2.0)
        set_replicas(c, "grab", 0, ns=TENANT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for n in NODES:
                node = lab.node(n)
                assert node and "DRAIN" not in flags(node), "%s drained: %s (reason %r)" % (
                    n, node and flags(node), node and node.get("reason"))
            time.sleep(0.2)
        assert lab.job_state(job)[0] == "RUNNING", lab.job_state(job)
        cd = valid_false(c, TENANT, "nodesets", "grab")
        assert cd and "allowed-namespaces" in cd["message"], cd
        assert valid_false(c, TENANT, "restapis", "mitm"), "the tenant's RestApi was accepted"
        assert pods_of(c, "grab", ns=TENANT) == [], "the tenant's NodeSet made pods"
        assert c.get("/apis/apps/v1/namespaces/%s/deployments/mitm-restapi" % TENANT).status == 404
        log("ok: the tenant's NodeSet and RestApi are refused; no Slurm node drained in 10 s; the job runs")
        lab.scancel(job)


def main():
    run_in_lab("test_slurm_tenants", NODES, scenario, lambda: api_server(nodes=2))


if __name__ == "__main__":
    main()
