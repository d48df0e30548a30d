#!/usr/bin/env python3
"""A NodeSet that follows Slurm's queue (annotation
slurmop.slinky.slurm.net/autoscale; reconcilers/nodedemand.h), against a
real slurmctld (tests/slurm/slurmlab.sh, SLURMLAB_VERSION) and kubesim.

The lab's static nodes slinky-0..3 stand in for the NodeSet's pods, matched
by name. The NodeSet is scaled 4 -> 2 first, so slinky-2 and slinky-3 stay
in Slurm drained by us, as nodes without a pod (Slurm accepts jobs of up to
four nodes, and they pend while those two are drained). First, a bad
annotation (Event AutoscaleInvalid) and, with max=3, a 4-node job (Event
JobNeverFits) are reported and scale nothing. Then, with
"min=2,max=4,cooldown=5":
  1. job A runs on slinky-0,1; job B (-N2) pends: the NodeSet's replicas go
     to 4 within seconds (status.slurmPendingNodes shows 2 first), the new
     pods' nodes are undrained and B runs and completes on them;
  2. once B has ended, slinky-2,3 are given back after the cool-down (the
     idle nodes, not A's), through the drain path; A is never disturbed and
     completes; replicas never go below min;
  3. without the annotation the status fields go away;
  4. while every job read fails (a proxy in front of slurmrestd), idle
     nodes past the cool-down are not given back; once reads succeed they
     are, down to min=0;
  5. from no pod at all, a job in the partitions its nodes were seen in
     grows it again, and runs.
Exit 77 without the Slurm binaries or root (24.11, 26.05).
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from backend import api_server  # noqa: E402
from slurmop import NS_API, Slurmop, apply_crds, pods_of, set_replicas, wait_for  # noqa: E402
from slurmlab import VERSION, lab_cluster, run_in_lab  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402

NODES = ["slinky-0", "slinky-1", "slinky-2", "slinky-3"]
IMAGES = {"slurmd": {"image": "ghcr.io/slinkyproject/slurmd:test"}, "logfile": {"image": "alpine:test"}}
ANN = "slurmop.slinky.slurm.net/autoscale"
PREFIX = "slurm-operator: "
T0 = time.monotonic()


def log(msg):
    print("%8.2f %s" % (time.monotonic() - T0, msg), flush=True)


def nodeset(c):
    return c.get(NS_API + "/namespaces/default/nodesets/slinky").json()


def replicas(c):
    return nodeset(c)["spec"].get("replicas")


def live(c):
    return sorted(p["metadata"]["name"] for p in pods_of(c, "slinky", include_terminating=False))


def annotate(c, value):
    r = c.patch(NS_API + "/namespaces/default/nodesets/slinky", {"metadata": {"annotations": {ANN: value}}})
    assert r.status == 200, r.text


def flags(n):
    return set(n.get("state_flags") or []) if n else set()


def events(c, reason):
    r = c.get("/apis/events.k8s.io/v1/namespaces/default/events")
    return [e for e in r.json().get("items") or [] if e.get("reason") == reason
            and (e.get("regarding") or {}).get("name") == "slinky"]


def submit(lab, nodes, seconds, exclude=None):
    # --exclusive: a job takes whole nodes, so that B cannot share A's.
    args = ["--parsable", "--exclusive", "-N%d" % nodes, "-n%d" % nodes, "-D", "/tmp", "-o", "/dev/null"]
    if exclude:
        args += ["-x", ",".join(exclude)]
    p = lab.run("sbatch", *(args + ["--wrap", "sleep %d" % seconds]))
    return p.stdout.strip().split(";")[0]


def scenario(ks, lab):
    c = ks.client()
    apply_crds(c)
    lab_cluster(c, lab, {"slinky": dict(replicas=4, **IMAGES)})
    with FaultProxy(lab.url) as fp, Slurmop(ks.kubeconfig, **lab.slurmop_flags(url=fp.url)) as op:
        op.wait_ready()
        wait_for(lambda: live(c) == NODES, 30, what="4 pods")
        wait_for(lambda: nodeset(c).get("status", {}).get("slurmIdle") == 4, 30, what="4 idle nodes")
        set_replicas(c, "slinky", 2)
        wait_for(lambda: live(c) == NODES[:2], 30, what="2 pods after the scale-in")
        for n in NODES[2:]:
            wait_for(lambda: "DRAIN" in flags(lab.node(n)), 10, what="%s drained" % n)
        assert "slurmPendingNodes" not in nodeset(c).get("status", {}), "demand shown without the annotation"

        # 0. First (an object's Events are limited to a burst of 25, which
        #    the scaling below uses up): a bad annotation and a job that no
        #    NodeSet may ever hold are reported, and nothing is scaled.
        annotate(c, "max=two")
        ev = wait_for(lambda: events(c, "AutoscaleInvalid"), 15, what="AutoscaleInvalid Event")
        assert "max=two" in ev[0].get("note", ""), ev[0]
        annotate(c, "min=2,max=3,cooldown=5")
        big = submit(lab, 4, 5)
        ev = wait_for(lambda: events(c, "JobNeverFits"), 15, what="JobNeverFits Event")
        assert ("job %s " % big) in ev[0].get("note", ""), ev[0]
        time.sleep(2)
        assert replicas(c) == 2, "scaled for a job it can never hold: %r" % replicas(c)
        assert nodeset(c)["status"]["slurmPendingNodes"] == 0, nodeset(c)["status"]
        lab.scancel(big)
        wait_for(lambda: lab.job_state(big)[0] in ("CANCELLED", None), 10, what="job %s cancelled" % big)
        time.sleep(2)  # a job read after the cancel
        log("ok 0: AutoscaleInvalid and JobNeverFits reported, nothing scaled")

        annotate(c, "min=2,max=4,cooldown=5")
        st = wait_for(lambda: (lambda s: s if "slurmPendingNodes" in s else None)(nodeset(c).get("status", {})),
                      15, what="status.slurmPendingNodes")
        assert st["slurmPendingNodes"] == 0, st
        time.sleep(7)  # past the cool-down: two idle nodes, min 2, nothing to give back
        assert replicas(c) == 2, nodeset(c)["spec"]

        # 1. The queue grows the NodeSet.
        a = submit(lab, 2, 25)
        wait_for(lambda: lab.job_state(a)[0] == "RUNNING", 30, what="job A running")
        t = time.monotonic()
        b = submit(lab, 2, 5)
        assert lab.job_state(b)[0] == "PENDING", lab.job_state(b)
        wait_for(lambda: replicas(c) == 4, 15, what="replicas 4 for job B", interval=0.05)
        up = time.monotonic() - t
        assert op.metric("slurmop_nodeset_autoscale_total", namespace="default", nodeset="slinky",
                         direction="up") >= 1
        wait_for(lambda: events(c, "ScaledUp"), 10, what="ScaledUp Event")
        wait_for(lambda: live(c) == NODES, 20, what="4 pods")
        wait_for(lambda: lab.job_state(b)[0] in ("RUNNING", "COMPLETING", "COMPLETED"), 40, what="job B started")
        ran = time.monotonic() - t
        try:
            state, code, where = wait_for(lambda: (lambda s: s if s[0] == "COMPLETED" else None)(lab.job_state(b)),
                                          40, what="job B completed")
        except AssertionError as e:
            raise AssertionError("%s\n%s" % (e, lab.job_report(b)))
        assert code == "0:0", (state, code)
        assert lab.job_state(a)[0] == "RUNNING", lab.job_state(a)
        log("ok 1: job B queued -> replicas 4 in %.2f s, running in %.2f s (on %s)" % (up, ran, where))

        # 2. Idle past the cool-down: the idle nodes go, A's stay.
        t = time.monotonic()
        wait_for(lambda: replicas(c) == 2, 30, what="replicas back to 2 after the cool-down")
        down = time.monotonic() - t
        assert down >= 3, "scaled in %.1f s after job B ended: before the 5 s cool-down" % down
        wait_for(lambda: live(c) == NODES[:2], 30, what="the idle pods deleted")
        state = lab.job_state(a)[0]
        assert state == "RUNNING", "job A (on slinky-0,1) is %s after the scale-in" % state
        for n in NODES[2:]:
            nd = lab.node(n)
            assert "DRAIN" in flags(nd) and nd["reason"].startswith(PREFIX), nd
        assert events(c, "ScaledDown"), "no ScaledDown Event"
        state, code, _ = wait_for(lambda: (lambda s: s if s[0] == "COMPLETED" else None)(lab.job_state(a)), 60,
                                  what="job A completed")
        assert code == "0:0", code
        time.sleep(7)
        assert replicas(c) == 2, "went below min: %r" % replicas(c)
        log("ok 2: the idle nodes given back %.1f s after B ended; A completed; min held" % down)

        # 3. Opting out: the status fields go, replicas stay.
        r = c.patch(NS_API + "/namespaces/default/nodesets/slinky", {"metadata": {"annotations": {ANN: None}}})
        assert r.status == 200, r.text
        wait_for(lambda: "slurmPendingNodes" not in nodeset(c).get("status", {}), 15,
                 what="status.slurmPendingNodes gone without the annotation")
        assert replicas(c) == 2
        log("ok 3: opting out clears the status; replicas kept")

        # 4. The queue unknown (every job read fails): nothing is given back,
        #    however long the nodes have been idle; once it reads, they go.
        rid = fp.add_rule("error", method="GET", path=r"/jobs", status=500, error="Unable to read jobs")
        wait_for(lambda: fp.count(rid) >= 2, 20, what="2 failed job reads")
        annotate(c, "min=0,max=4,cooldown=2")
        time.sleep(5)
        assert replicas(c) == 2, "scaled to %r while the job list could not be read" % replicas(c)
        fp.remove_rule(rid)
        wait_for(lambda: replicas(c) == 0, 20, what="replicas 0 once the job list reads")
        wait_for(lambda: not live(c), 30, what="the idle pods deleted")
        log("ok 4: nothing given back while the job list failed; min=0 reached once it read")

        # 5. From no pod at all: the partitions its nodes were seen in are
        #    still served, so a job there grows the NodeSet again.
        t = time.monotonic()
        d = submit(lab, 2, 3)
        wait_for(lambda: replicas(c) == 2, 15, what="replicas 2 from an empty NodeSet")
        up = time.monotonic() - t
        state, code, _ = wait_for(lambda: (lambda s: s if s[0] == "COMPLETED" else None)(lab.job_state(d)), 60,
                                  what="job D completed")
        assert code == "0:0", code
        log("ok 5: an empty NodeSet grown for job D in %.2f s; the job completed" % up)
    for n in NODES:
        if "DRAIN" in flags(lab.node(n)):
            lab.scontrol("update", "nodename=" + n, "state=resume")
    log("Slurm %s: PASS" % VERSION)


if __name__ == "__main__":
    run_in_lab("test_slurm_autoscale", NODES, scenario, lambda: api_server(nodes=4), extra_bins=("sbatch",))
