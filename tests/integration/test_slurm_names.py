#!/usr/bin/env python3
"""The Slurm name of a hostNetwork pod, against a real Slurm (tests/slurm/slurmlab.sh,
its dynamic node registered with slurmd -Z under a chosen name) and an API
server (kubesim, or the real control plane with kwok: tests/lib/backend.py).

A hostNetwork pod's slurmd registers under its host's own hostname, whole
and with its case: slurmd -Z takes gethostname() without cutting it at the
first dot (22.05, 24.11 and 26.05 alike). The lab's dynamic node plays the
host's slurmd; a Kubernetes Node plays the host. Issue 39, finding 2:

  dotted  Node "kn-3.lab.example", slurmd registered as "kn-3.lab.example", a
          DaemonSet-mode hostNetwork NodeSet on it. slurmop used to look
          up "kn-3" (the hostname, cut at the first dot): Slurm said "no
          such node", and deleting the NodeSet deleted the pod while a job
          ran on kn-3.lab.example. Now the pod's node is drained and the pod
          kept until the job has ended; its pod info reaches the node.
  case    Node "kn-3", slurmd registered as "KN-3" (the host's own name;
          the kubelet lowercases the Node's). A StatefulSet-mode
          hostNetwork NodeSet scaled to 0: slurmop cannot know the host's
          name, Slurm has no node "kn-3", and that "no such node" used to
          delete the pod while a job ran on KN-3. Now the pod stays
          (DrainBlockedNameUnproved Event, DrainBlocked=True) until a person
          sets the opt-out annotation.

  shared  Node "kn-5.lab.example", two hostNetwork NodeSets on it (kubesim
          only: kube-scheduler binds only one pod with slurmd's port on the
          host's network per Node): both pods take that one Slurm node. The
          later NodeSet is Valid=False; the earlier one's scale-in drains the
          node and keeps its pod while a job runs, the drain never undone
          (issue 39, finding 3: the later pod's cordon sync undid it).

  proved  the dynamic node named after this machine (so its NodeHostname
          agrees, as for a real hostNetwork slurmd), a DaemonSet-mode
          hostNetwork pod on a Node of that name: once its pod info is read
          back, Slurm's "no such node" (slurmctld restarted without its
          state) frees the pod when its NodeSet is deleted: the record works.

NAMES_SCENARIOS=dotted,case,shared,proved runs a subset. Exit 77 (skipped) without the
Slurm binaries or root.
"""
# backends: kubesim k8s
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from backend import api_server, is_k8s  # noqa: E402
from slurmlab import Lab, lab_cluster, skip_unless_runnable  # noqa: E402
from slurmop import NS_API, Slurmop, apply_crds, pods_of, set_replicas, wait_for  # noqa: E402
from test_slurm_nodeset import IMAGES, log  # noqa: E402

NO_DRAIN = "nodeset.slinky.slurm.net/delete-without-drain"


def events(c, reason):
    r = c.get("/apis/events.k8s.io/v1/namespaces/default/events")
    assert r.status == 200, r.text
    return [e for e in r.json().get("items") or [] if e.get("reason") == reason]


def add_node(ks, c, name):
    """A Node called name (a copy of the backend's first one; a KWOK Node
    on the real control plane)."""
    if is_k8s():
        ks.add_node(name=name)
        return
    tmpl = c.get("/api/v1/nodes").json()["items"][0]
    node = json.loads(json.dumps(tmpl))
    node["metadata"] = {"name": name, "labels": dict(tmpl["metadata"].get("labels", {}),
                                                     **{"kubernetes.io/hostname": name})}
    node["spec"] = {}
    r = c.post("/api/v1/nodes", node)
    assert r.status == 201, r.text


def live(c, nodeset):
    return [p for p in pods_of(c, nodeset, include_terminating=False)]


def keep_while_running(lab, c, nodeset, name, job, what, node=None):
    """The pod stays (not even terminating) for as long as the job runs;
    whether node (when given) was seen drained meanwhile."""
    drained = False
    while lab.job_state(job)[0] in ("RUNNING", "COMPLETING"):
        names = [p["metadata"]["name"] for p in live(c, nodeset)]
        assert name in names, "%s: pod %s was deleted while job %s ran on its Slurm node" % (what, name, job)
        if node and not drained:
            drained = "DRAIN" in set((lab.node(node) or {}).get("state_flags") or [])
        time.sleep(0.1)
    return drained


def scenario_dotted(ks, lab, host):
    c = ks.client()
    apply_crds(c)
    add_node(ks, c, host)
    tmpl = {"spec": {"hostNetwork": True, "nodeSelector": {"kubernetes.io/hostname": host}}}
    lab_cluster(c, lab, {"ds": dict(scalingMode="DaemonSet", template=tmpl, **IMAGES)})
    with Slurmop(ks.kubeconfig, **lab.slurmop_flags()) as op:
        op.wait_ready()
        pods = wait_for(lambda: [p for p in live(c, "ds") if p["spec"].get("nodeName") == host] or None, 30,
                        what="the DaemonSet pod on Node %s" % host)
        name = pods[0]["metadata"]["name"]
        assert pods[0]["spec"].get("hostname") == host.split(".")[0], pods[0]["spec"]
        job = lab.sbatch([host], 12)
        wait_for(lambda: lab.job_state(job)[0] == "RUNNING", 30, what="job %s running on %s" % (job, host))
        log("ok 1: job %s runs on %s (the dynamic node, named after the host), pod %s" % (job, host, name))
        r = c.delete(NS_API + "/namespaces/default/nodesets/ds")
        assert r.status in (200, 202), r.text
        assert keep_while_running(lab, c, "ds", name, job, "dotted", node=host), \
            "%s was never drained while its job ran" % host
        state, code, _ = lab.job_state(job)
        assert state == "COMPLETED" and code == "0:0", (state, code)
        log("ok 2: deleting the NodeSet drained %s and kept pod %s until job %s completed" % (host, name, job))
        wait_for(lambda: not live(c, "ds"), 30, what="the pod deleted once its node drained idle")
        info = json.loads((lab.node(host) or {}).get("comment") or "{}")
        assert info.get("podName") == name and info.get("node") == host, info
        log("ok 3: pod %s deleted after the job; its pod info was on %s: %s" % (name, host, info))


def scenario_case(ks, lab, host):
    c = ks.client()
    apply_crds(c)
    node = host.lower()
    add_node(ks, c, node)
    tmpl = {"spec": {"hostname": "hc-", "hostNetwork": True, "nodeSelector": {"kubernetes.io/hostname": node}}}
    lab_cluster(c, lab, {"hc": dict(replicas=1, template=tmpl, **IMAGES)})
    with Slurmop(ks.kubeconfig, **lab.slurmop_flags()) as op:
        op.wait_ready()
        pods = wait_for(lambda: [p for p in live(c, "hc") if p["spec"].get("nodeName") == node] or None, 30,
                        what="pod hc-0 on Node %s" % node)
        name = pods[0]["metadata"]["name"]
        job = lab.sbatch([host], 8)
        wait_for(lambda: lab.job_state(job)[0] == "RUNNING", 30, what="job %s running on %s" % (job, host))
        assert lab.node(node) is None, "Slurm finds %s under %s: %r" % (host, node, lab.node(node))
        log("ok 1: job %s runs on %s; Slurm has no node %s (the Node's name)" % (job, host, node))
        set_replicas(c, "hc", 0)
        keep_while_running(lab, c, "hc", name, job, "case")
        ev = wait_for(lambda: events(c, "DrainBlockedNameUnproved"), 20, what="DrainBlockedNameUnproved Event")
        assert node in ev[0].get("note", ""), ev
        t_end = time.monotonic() + 3
        while time.monotonic() < t_end:  # and after: nothing proves the name
            assert name in [p["metadata"]["name"] for p in live(c, "hc")], "pod deleted on an unproved name"
            time.sleep(0.2)
        conds = c.get(NS_API + "/namespaces/default/nodesets/hc").json().get("status", {}).get("conditions", [])
        blocked = [x for x in conds if x["type"] == "DrainBlocked"]
        assert blocked and blocked[0]["status"] == "True" and blocked[0].get("reason") == "DrainBlockedNameUnproved", \
            conds
        log("ok 2: scale 1 -> 0 kept pod %s while job %s ran on %s and after: %s" % (name, job, host,
                                                                                    ev[0].get("note")))
        r = c.patch(NS_API + "/namespaces/default/nodesets/hc", {"metadata": {"annotations": {NO_DRAIN: "true"}}})
        assert r.status == 200, r.text
        wait_for(lambda: not live(c, "hc"), 20, what="the pod deleted once the NodeSet opted out")
        log("ok 3: the opt-out annotation let pod %s go" % name)


def scenario_shared(ks, lab, host):
    """Two hostNetwork NodeSets on one Node: both pods take the host's name,
    one Slurm node. The later NodeSet is Valid=False (its pod kept, nothing
    acted on); the earlier one's scale-in drains the node and keeps its pod
    while a job runs, and the drain is never undone meanwhile (the later
    pod's cordon sync used to undrain it, being "not cordoned")."""
    c = ks.client()
    apply_crds(c)
    add_node(ks, c, host)
    tmpl = lambda prefix: {"spec": {"hostname": prefix, "hostNetwork": True,  # noqa: E731
                                    "nodeSelector": {"kubernetes.io/hostname": host}}}
    # oversubscribeNode: no anti-affinity between the Controller's workers,
    # or hb-0 could not join ha-0 on the Node.
    lab_cluster(c, lab, {"ha": dict(replicas=1, template=tmpl("ha-"), oversubscribeNode=True, **IMAGES)})
    with Slurmop(ks.kubeconfig, **lab.slurmop_flags()) as op:
        op.wait_ready()
        wait_for(lambda: json.loads((lab.node(host) or {}).get("comment") or "{}").get("podName") == "ha-0", 30,
                 what="ha-0's pod info on %s" % host)
        time.sleep(1.1)  # a later creation second: ha is the earlier NodeSet by time, not only by name
        r = c.post(NS_API + "/namespaces/default/nodesets",
                   {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet", "metadata": {"name": "hb"},
                    "spec": dict(controllerRef={"name": "slurm"}, replicas=1, template=tmpl("hb-"),
                                 oversubscribeNode=True, **IMAGES)})
        assert r.status == 201, r.text
        wait_for(lambda: [p for p in live(c, "hb") if p["spec"].get("nodeName") == host] or None, 30,
                 what="hb-0 on Node %s" % host)
        time.sleep(3)  # hb's passes run (its pod Ready, its cordon sync)
        job = lab.sbatch([host], 10)
        wait_for(lambda: lab.job_state(job)[0] == "RUNNING", 30, what="job %s running on %s" % (job, host))
        set_replicas(c, "ha", 0)
        drained = False
        while lab.job_state(job)[0] in ("RUNNING", "COMPLETING"):
            assert "ha-0" in [p["metadata"]["name"] for p in live(c, "ha")], "ha-0 deleted while job %s ran" % job
            d = "DRAIN" in set((lab.node(host) or {}).get("state_flags") or [])
            assert d or not drained, "the drain of %s was undone while ha-0 waited for job %s" % (host, job)
            drained = drained or d
            time.sleep(0.05)
        assert drained, "%s was never drained" % host
        log("ok 1: scale-in of ha drained %s and kept ha-0 until job %s ended; the drain was never undone" %
            (host, job))

        def hb_valid():
            st = c.get(NS_API + "/namespaces/default/nodesets/hb").json().get("status") or {}
            return [x for x in st.get("conditions") or [] if x["type"] == "Valid"]
        v = wait_for(lambda: hb_valid() and hb_valid()[0]["status"] == "False" and hb_valid(), 30,
                     what="hb Valid=False")
        assert host in v[0].get("message", ""), v
        log("ok 2: ha-0 and hb-0 both take Slurm node %s; the later NodeSet hb is Valid=False: %s" %
            (host, v[0].get("message")))
        wait_for(lambda: not live(c, "ha"), 30, what="ha-0 deleted after the job")
        assert [p["metadata"]["name"] for p in live(c, "hb")] == ["hb-0"], "the later NodeSet's pod went"
        log("ok 3: ha-0 deleted once its node drained idle; hb-0 (of the invalid NodeSet) kept")


def scenario_proved(ks, lab, host):
    """The record that makes "no such node" count for a hostNetwork pod: the
    dynamic node is named after this machine (as slurmd -Z without -N would
    name it), so its NodeHostname agrees; the pod's info reaches it. Then
    slurmctld loses its state (and the idle node), and the NodeSet is
    deleted: Slurm's "no such node" for a name a read showed as the pod's
    frees the pod (after the grace a lost idle node gets), instead of
    keeping it as unproved."""
    c = ks.client()
    apply_crds(c)
    add_node(ks, c, host)
    tmpl = {"spec": {"hostNetwork": True, "nodeSelector": {"kubernetes.io/hostname": host}}}
    lab_cluster(c, lab, {"dp": dict(scalingMode="DaemonSet", template=tmpl, **IMAGES)})
    with Slurmop(ks.kubeconfig, **lab.slurmop_flags()) as op:
        op.wait_ready()
        pods = wait_for(lambda: [p for p in live(c, "dp") if p["spec"].get("nodeName") == host] or None, 30,
                        what="the DaemonSet pod on Node %s" % host)
        name = pods[0]["metadata"]["name"]
        wait_for(lambda: json.loads((lab.node(host) or {}).get("comment") or "{}").get("podName") == name, 30,
                 what="%s's pod info on %s" % (name, host))
        assert (lab.node(host) or {}).get("hostname") in (None, "", host.split(".")[0]), lab.node(host)
        time.sleep(2)  # a status pass reads the comment back: the name is recorded
        log("ok 1: pod %s's info is on Slurm node %s (NodeHostname %s)" % (name, host, lab.node(host).get("hostname")))
        lab.restart_ctld("--lose-state")
        wait_for(lambda: lab.node("static-0") is not None, 30, what="slurmctld back")
        assert lab.node(host) is None, "slurmctld kept %s after losing its state" % host
        r = c.delete(NS_API + "/namespaces/default/nodesets/dp")
        assert r.status in (200, 202), r.text
        wait_for(lambda: not live(c, "dp"), 45, what="the pod deleted on Slurm's 'no such node' for a proved name")
        assert not events(c, "DrainBlockedNameUnproved"), events(c, "DrainBlockedNameUnproved")
        log("ok 2: slurmctld lost %s; deleting the NodeSet deleted pod %s on 'no such node' (name proved)" %
            (host, name))


def machine_name():
    """This machine's hostname when a Kubernetes Node may carry it (a
    lowercase DNS subdomain), else None."""
    import re
    import socket
    h = socket.gethostname()
    return h if re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?", h) else None


SCENARIOS = [("dotted", "kn-3.lab.example", scenario_dotted), ("case", "KN-3", scenario_case),
             ("shared", "kn-5.lab.example", scenario_shared), ("proved", machine_name(), scenario_proved)]


def main():
    skip_unless_runnable(("sbatch",))
    want = [s for s in os.environ.get("NAMES_SCENARIOS", "").split(",") if s]
    for label, host, fn in SCENARIOS:
        if want and label not in want:
            continue
        if host is None:
            log("skip %s: this machine's hostname cannot name a Kubernetes Node" % label)
            continue
        if label == "shared" and is_k8s():
            # kube-scheduler binds one pod with slurmd's port on the host's
            # network per Node.
            log("skip shared: the real scheduler never binds both hostNetwork pods to one Node")
            continue
        tmp = tempfile.mkdtemp(prefix="test_slurm_names." + label + ".")
        os.chmod(tmp, 0o755)  # munged needs every folder above its socket searchable
        lab = Lab(tmp, ["static-0"], extra_env={"SLURMLAB_DYNAMIC": "1", "SLURMLAB_DYNAMIC_NAME": host})
        try:
            lab.start()
            with api_server(nodes=1, max_grace="200ms") as ks:
                log("scenario %s (Slurm %s, dynamic node %s)" % (label, lab.version, host))
                fn(ks, lab, host)
        except Exception as e:
            if type(e).__name__ != "Skip":
                raise
            print("SKIP: %s" % e)
            sys.exit(77)
        finally:
            lab.stop()
            shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
