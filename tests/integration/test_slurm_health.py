#!/usr/bin/env python3
"""Unhealthy Nodes: drain through Slurm, let jobs finish, replace the pod
(reconcilers/nodehealth.h, docs/internals/NODE-HEALTH.md).

slurmop, run with --unhealthy-node-condition GpuUnhealthy,
--unhealthy-node-taint example.com/gpu-bad and --unhealthy-max-share 25
(one of the four nodes at once), against kubesim or a real control plane
(tests/lib/backend.py) and the real Slurm lab (SLURMLAB_VERSION, 22.05 by
default; ctest runs it with 22.05 on kubesim, integration.slurm_health, and
with 26.05, whose node writes go over REST, on the real control plane,
integration.k8s.slurm_health_26.05). The lab's static nodes slinky-0..3 stand in for the NodeSet's
pods, matched by name; five Nodes, so a replacement has somewhere to go.

  1. a job on slinky-3; its Node gets GpuUnhealthy=True: slinky-3 drains
     with "slurm-operator: GpuUnhealthy: <message>" (the time from the
     condition's write to the drain is printed), the pod gets the
     SlurmNodeUnhealthy condition and stays while the job runs; the job
     completes (COMPLETED 0:0); then the pod is replaced by one kept off
     that Node (affinity NotIn), whose node is undrained and idle again;
  2. a job on slinky-2; its Node turns unhealthy, slinky-2 drains; the
     condition clears while the job runs: our drain is undone, the pod is
     not replaced, the job completes;
  3. a person's drain on slinky-0; its Node turns unhealthy and healthy
     again: the drain and its reason are never touched, the pod stays;
  4. a storm: every Node tainted example.com/gpu-bad at once: at most one
     Slurm node is drained for health at any time (sampled for 6 s), the
     others wait (slurmop_health_waiting_nodes); the taints go and every
     node is back, undrained.
Exit 77 (skipped) without the Slurm binaries or root.
"""
# backends: kubesim k8s
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from backend import api_server  # noqa: E402
from slurmlab import VERSION, Lab, lab_cluster, skip_unless_runnable  # noqa: E402
from slurmop import apply_crds, wait_for  # noqa: E402
from test_slurm_nodeset import IMAGES, NODES, PREFIX, Op, flags, live_names, log, pod  # noqa: E402

COND = "GpuUnhealthy"
TAINT = "example.com/gpu-bad"


def rfc3339_now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def set_condition(c, node, status, message="XID 79 on GPU 3"):
    body = {"status": {"conditions": [{"type": COND, "status": status, "reason": "GpuXid", "message": message,
                                       "lastTransitionTime": rfc3339_now(), "lastHeartbeatTime": rfc3339_now()}]}}
    r = c.patch("/api/v1/nodes/%s/status" % node, body, patch_type="strategic")
    assert r.status == 200, r.text


def set_taint(c, node, on):
    n = c.get("/api/v1/nodes/" + node).json()
    taints = [t for t in n["spec"].get("taints") or [] if t["key"] != TAINT]
    if on:
        taints.append({"key": TAINT, "value": "dcgm-diag-failed", "effect": "PreferNoSchedule"})
    r = c.patch("/api/v1/nodes/" + node, {"spec": {"taints": taints}})
    assert r.status == 200, r.text


def node_names(c):
    return sorted(n["metadata"]["name"] for n in c.get("/api/v1/nodes").json()["items"])


def health_cond(p):
    return [cd for cd in (p or {}).get("status", {}).get("conditions", [])
            if cd["type"] == "SlurmNodeUnhealthy" and cd.get("status") == "True"]


def ours_for_health(lab, name):
    n = lab.node(name) or {}
    r = n.get("reason") or ""
    return "DRAIN" in flags(n) and (r.startswith(PREFIX + COND + ":") or r.startswith(PREFIX + TAINT + ":"))


def idle_undrained(lab, name):
    n = lab.node(name) or {}
    return n.get("state") == "idle" and "DRAIN" not in flags(n)


class StateList:
    """A wait's description that reads the nodes' states when printed: the
    timeout message then names the node that did not come back and what
    Slurm says of it at that moment."""

    def __init__(self, what, c, lab, names):
        self.what, self.c, self.lab, self.names = what, c, lab, names

    def __str__(self):
        out = []
        for name in self.names:
            n = self.lab.node(name) or {}
            p = pod(self.c, name) or {}
            md = p.get("metadata") or {}
            out.append("%s=%s%s %r (pod on %s, annotations %s)" %
                       (name, n.get("state"), "+" + "+".join(sorted(flags(n))) if flags(n) else "",
                        n.get("reason") or "", (p.get("spec") or {}).get("nodeName"),
                        {k: v for k, v in (md.get("annotations") or {}).items() if "slinky" in k}))
        return "%s (now: %s)" % (self.what, ", ".join(out))


def events(c, reason):
    r = c.get("/apis/events.k8s.io/v1/namespaces/default/events")
    assert r.status == 200, r.text
    return [e for e in r.json().get("items") or [] if e.get("reason") == reason]


def step_replace(c, op, lab):
    p3 = pod(c, "slinky-3")
    uid, node3 = p3["metadata"]["uid"], p3["spec"]["nodeName"]
    job = lab.sbatch(["slinky-3"], 6)
    wait_for(lambda: lab.job_state(job)[0] == "RUNNING", 30, what="job %s running" % job)
    t0 = time.monotonic()
    set_condition(c, node3, "True")
    n = wait_for(lambda: ours_for_health(lab, "slinky-3") and lab.node("slinky-3"), 10,
                 what="slinky-3 drained for health", interval=0.02)
    took = time.monotonic() - t0
    assert n["reason"] == PREFIX + COND + ": XID 79 on GPU 3", n["reason"]
    wait_for(lambda: health_cond(pod(c, "slinky-3")), 10, what="SlurmNodeUnhealthy on slinky-3")
    log("ok 1a: condition -> drain %.3f s (reason %r)" % (took, n["reason"]))
    while lab.job_state(job)[0] in ("RUNNING", "COMPLETING"):
        assert time.monotonic() - t0 < 60, "job %s still %s after 60 s: %s" % (job, lab.job_state(job),
                                                                          lab.node("slinky-3"))
        p = pod(c, "slinky-3")
        assert p and p["metadata"]["uid"] == uid and not p["metadata"].get("deletionTimestamp"), \
            "slinky-3 deleted while its job ran"
        time.sleep(0.1)
    ended = time.monotonic()
    state, code, _ = lab.job_state(job)
    assert (state, code) == ("COMPLETED", "0:0"), (state, code)
    new = wait_for(lambda: (pod(c, "slinky-3") or {}).get("metadata", {}).get("uid") not in (None, uid) and
                   pod(c, "slinky-3").get("spec", {}).get("nodeName") and pod(c, "slinky-3"), 30,
                   what="slinky-3 replaced")
    log("ok 1b: job %s %s; pod replaced %.2f s after it ended, now on %s" % (
        job, state, time.monotonic() - ended, new["spec"]["nodeName"]))
    assert new["spec"]["nodeName"] != node3, "the replacement went back to the unhealthy Node %s" % node3
    terms = new["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert all(any(f["operator"] == "NotIn" and node3 in f["values"] for f in t.get("matchFields") or [])
               for t in terms), terms
    assert events(c, "NodeUnhealthy") and events(c, "UnhealthyNodeReplaced")
    wait_for(lambda: idle_undrained(lab, "slinky-3"), 20, what="slinky-3 idle and undrained after replacement")
    assert op.metric("slurmop_health_replaced_pods_total", namespace="default", nodeset="slinky") == 1
    set_condition(c, node3, "False", "")
    wait_for(lambda: op.metric("slurmop_health_unhealthy_nodes") == 0, 10, what="no unhealthy Node")
    log("ok 1c: the replacement's node is back; the Node healthy again")
    return took


def step_clear(c, op, lab):
    p2 = pod(c, "slinky-2")
    uid, node2 = p2["metadata"]["uid"], p2["spec"]["nodeName"]
    job = lab.sbatch(["slinky-2"], 8)
    wait_for(lambda: lab.job_state(job)[0] == "RUNNING", 30, what="job %s running" % job)
    set_condition(c, node2, "True", "ECC errors")
    wait_for(lambda: ours_for_health(lab, "slinky-2"), 10, what="slinky-2 drained for health")
    assert lab.job_state(job)[0] == "RUNNING"
    set_condition(c, node2, "False", "")
    wait_for(lambda: "DRAIN" not in flags(lab.node("slinky-2")), 10, what="slinky-2 undrained once healthy")
    assert lab.job_state(job)[0] == "RUNNING", lab.job_state(job)
    wait_for(lambda: not health_cond(pod(c, "slinky-2")), 10, what="SlurmNodeUnhealthy removed from slinky-2")
    wait_for(lambda: lab.job_state(job)[0] == "COMPLETED", 30, what="job %s completed" % job)
    assert pod(c, "slinky-2")["metadata"]["uid"] == uid, "slinky-2 replaced though its Node recovered"
    log("ok 2: the Node recovered while the job ran: our drain undone, the pod kept, the job completed")


def step_person(c, op, lab):
    p0 = pod(c, "slinky-0")
    uid, node0 = p0["metadata"]["uid"], p0["spec"]["nodeName"]
    lab.scontrol("update", "nodename=slinky-0", "state=drain", "reason=person: bad dimm")
    # Once slurmop has read it (its pod shows it): Slurm has no
    # compare-and-set, so a drain that lands within the poll interval of
    # ours is overwritten, as any scale-in drain would.
    wait_for(lambda: any(cd["type"] == "SlurmNodeStateDrain" and cd.get("message") == "person: bad dimm"
                         for cd in pod(c, "slinky-0")["status"].get("conditions", [])), 10,
             what="the person's drain on slinky-0's pod")
    set_condition(c, node0, "True", "XID 48")
    end = time.monotonic() + 3
    while time.monotonic() < end:
        n = lab.node("slinky-0")
        assert "DRAIN" in flags(n) and n["reason"] == "person: bad dimm", n
        assert pod(c, "slinky-0")["metadata"]["uid"] == uid
        time.sleep(0.1)
    set_condition(c, node0, "False", "")
    time.sleep(2)
    n = lab.node("slinky-0")
    assert "DRAIN" in flags(n) and n["reason"] == "person: bad dimm", n
    assert pod(c, "slinky-0")["metadata"]["uid"] == uid
    log("ok 3: a person's drain on an unhealthy Node is left alone")


def step_storm(c, op, lab):
    nodes = node_names(c)
    for n in nodes:
        set_taint(c, n, True)
    wait_for(lambda: op.metric("slurmop_health_unhealthy_nodes") == len(nodes), 10, what="every Node unhealthy")
    wait_for(lambda: op.metric("slurmop_health_drained_nodes", namespace="default", nodeset="slinky") == 1, 10,
             what="one node out for health")
    end = time.monotonic() + 6
    most = 0
    while time.monotonic() < end:
        out = sum(ours_for_health(lab, n) for n in NODES)
        most = max(most, out)
        assert out <= 1, "%d Slurm nodes drained for health at once (cap 1)" % out
        time.sleep(0.1)
    waiting = op.metric("slurmop_health_waiting_nodes", namespace="default", nodeset="slinky")
    # slinky-0 is a person's drain (no candidate): two wait.
    assert waiting == 2, waiting
    assert events(c, "UnhealthyNodesCapped")
    assert len(live_names(c)) >= 3
    log("ok 4a: a storm on all %d Nodes: at most %d node out for health, %d waiting" % (len(nodes), most, waiting))
    for n in nodes:
        set_taint(c, n, False)
    wait_for(lambda: live_names(c) == NODES, 30, what="4 pods again")
    wait_for(lambda: all(idle_undrained(lab, n) for n in NODES[1:]) or None, 30,
             what=StateList("slinky-1..3 idle and undrained", c, lab, NODES[1:]))
    wait_for(lambda: op.metric("slurmop_health_drained_nodes", namespace="default", nodeset="slinky") == 0, 30,
             what="nothing out for health")
    log("ok 4b: the taints gone, every node is back")


def main():
    skip_unless_runnable(("sbatch",))
    if os.environ.get("SLURMOP_LOG"):
        open(os.environ["SLURMOP_LOG"], "w").close()
    tmp = tempfile.mkdtemp(prefix="test_slurm_health.")
    os.chmod(tmp, 0o755)  # munged needs every directory above its socket searchable
    lab = Lab(tmp, NODES)
    try:
        lab.start()
        log("Slurm %s lab started: %s (REST %s)" % (VERSION, lab.url, lab.api))
        with api_server(nodes=5) as ks:
            c = ks.client()
            apply_crds(c)
            lab_cluster(c, lab, {"slinky": dict(replicas=4, **IMAGES)})
            flags_ = lab.slurmop_flags(unhealthy_node_condition=COND, unhealthy_node_taint=TAINT,
                                       unhealthy_max_share="25%")
            with Op(ks.kubeconfig, **flags_) as op:
                op.wait_ready()
                wait_for(lambda: live_names(c) == NODES, 30, what="4 pods")
                # Bound too: on the real control plane the scheduler binds
                # them a moment after they exist.
                wait_for(lambda: all((pod(c, n) or {}).get("spec", {}).get("nodeName") for n in NODES), 30,
                         what="4 pods bound to Nodes")
                wait_for(lambda: all(idle_undrained(lab, n) for n in NODES), 30, what="4 idle nodes")
                took = step_replace(c, op, lab)
                step_clear(c, op, lab)
                step_person(c, op, lab)
                step_storm(c, op, lab)
                h = [v for (k, ls), v in op.metrics().items() if k == "slurmop_health_drain_seconds_count"]
                assert h and h[0] >= 3, h
                log("condition -> drain: %.3f s as the test saw it" % took)
    finally:
        lab.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
