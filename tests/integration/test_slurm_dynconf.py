#!/usr/bin/env python3
"""slurmd's arguments and a dynamic node's features, on the real slurmd of
the lab (tests/lib/slurmlab.py, SLURMLAB_VERSION 22.05, 24.11 or 26.05) with
slurmop against kubesim (issue 32, defects 2 and 3).

The lab runs one dynamic node (slurmd -Z) named dyn-0, the Slurm name of the
first pod of NodeSet "dyn" (hostname prefix "dyn-"); neither kubesim nor kwok
runs slurmd, so the lab's slurmd stands in for the pod's and is started with
the pod's arguments.

  1. The --conf argument slurmop gives the pod (extraConf "Features=fresh
     Weight=7") is the same list of words when a shell evaluates the
     arguments joined by spaces (as Slinky's image entrypoints do) as when
     they are passed literally; it has no empty Topology= item.
  2. A dynamic node started with exactly those arguments (the record deleted
     first, so that this is a first registration) registers with the
     NodeSet's features (dyn, fresh) and Weight=7: slurmd read every item.
  3. The NodeSet's extraConf changes to "Features=fresher Weight=7": the
     rolling update replaces the pod, the lab's slurmd registers again with
     the new pod's arguments, and Slurm, which keeps a dynamic node's first
     features, is corrected by slurmop: the node's features become
     dyn,fresher (before the fix they stayed dyn,fresh for good).
  4. A new revision (OnDelete) sets RealMemory, which Slurm neither takes
     from a registration nor lets anyone update (issue 33); the pod is
     deleted by hand while a job runs on dyn-0, and the lab's slurmd
     registers again with the new pod's arguments. slurmop drains the node
     (reason "node record out of date") and keeps record and pod while the
     job runs; once it has ended and its record aged out (MinJobAge=2
     here), it deletes the node's record, then the pod; the node registers
     anew with the new RealMemory, undrained.
  5. Node records made first (docs/internals/NODESET.md): NodeSet "fx" of 3
     replicas whose extraConf declares CPUs= and RealMemory=. On 25.11 and
     newer, slurmop makes fx-[0-2] FUTURE with that hardware before the pods
     register (slurmop_slurm_node_precreates_total{result="created"} 3); the
     lab's slurmd, started as fx-0 with the pod's --conf, registers into its
     record (IDLE, the record's hardware). A scale-in to 0 deletes the three
     pods (one registered and idle, two never registered) and the two FUTURE
     records; a scale-out to 2 makes fx-1's anew, not fx-0's (registered). A
     record made by hand (fx-3) makes slurmctld refuse the scale-out to 5's
     request: it is split, fx-2 and fx-4 are made. A scale-in to 2 deletes
     fx-[2-4]'s records, and deleting the NodeSet deletes fx-1's before its
     finalizer goes. Older versions have no create endpoint: nothing is
     asked, no record is made.
  6. (25.11 and newer) NodeSet "fy" of 2, whose slurmd never start: its
     records are made FUTURE with RealMemory=100; extraConf changes to
     RealMemory=200, and the rolling update's replacements come with their
     records deleted and made again with 200; deleting the NodeSet deletes
     both.
Exit 77 (skipped) without the Slurm binaries or root, or when the lab's root
file system cannot be built (24.11, 26.05).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from backend import api_server  # noqa: E402
from slurmlab import LAB_SH, Lab, lab_cluster, skip_unless_runnable  # noqa: E402
from slurmop import NS_API, Slurmop, apply_crds, pods_of, set_replicas, wait_for  # noqa: E402

IMAGES = {"slurmd": {"image": "ghcr.io/slinkyproject/slurmd:test"}, "logfile": {"image": "alpine:test"}}
NODE = "dyn-0"
T0 = time.monotonic()


def log(msg):
    print("%8.2f %s" % (time.monotonic() - T0, msg), flush=True)


def slurmd_args(c, want_revision=None):
    pods = [p for p in pods_of(c, "dyn", include_terminating=False)
            if want_revision is None or p["metadata"]["labels"].get("controller-revision-hash") != want_revision]
    if not pods:
        return None, None
    p = pods[0]
    slurmd = [x for x in p["spec"]["containers"] if x["name"] == "slurmd"][0]
    return slurmd["args"], p["metadata"]["labels"].get("controller-revision-hash")


def slurmd_args_of(c, name):
    r = c.get("/api/v1/namespaces/default/pods/" + name)
    assert r.status == 200, r.text
    return [x for x in r.json()["spec"]["containers"] if x["name"] == "slurmd"][0]["args"]


def conf_of(args):
    return args[args.index("--conf") + 1]


def shell_words(args):
    """What a shell makes of the arguments joined by spaces (the contract of
    Slinky's entrypoints: SLURMD_OPTIONS="$*", then `exec slurmd $SLURMD_OPTIONS`
    inside `bash -c`)."""
    p = subprocess.run(["bash", "-c", "printf '%s\\0' " + " ".join(args)], capture_output=True, check=True)
    return p.stdout.decode().split("\0")[:-1]


def features(lab):
    n = lab.node(NODE) or {}
    return set(f for f in (n.get("features") or "").split(",") if f and not f.startswith("k8s/"))


def restart_dynamic(lab, conf):
    env = dict(lab.env, SLURMLAB_DYNAMIC_CONF=conf)
    p = subprocess.run(["bash", LAB_SH, "restart-dynamic"], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr


def show_node(lab):
    return lab.scontrol("show", "node", NODE, check=False)


def node_field(lab, key):
    for w in (show_node(lab) or "").split():
        if w.startswith(key + "="):
            return w.split("=", 1)[1]
    return None


def real_memory(lab):
    v = node_field(lab, "RealMemory")
    return int(v) if v is not None else None


def pod_uid(c):
    r = c.get("/api/v1/namespaces/default/pods/" + NODE)
    return r.json()["metadata"]["uid"] if r.status == 200 else None


def events(c, reason):
    r = c.get("/apis/events.k8s.io/v1/namespaces/default/events")
    assert r.status == 200, r.text
    return [e for e in r.json().get("items") or [] if e.get("reason") == reason]


def scenario(ks, lab):
    c = ks.client()
    apply_crds(c)
    lab_cluster(c, lab, {"dyn": dict(replicas=1, extraConf="Features=fresh Weight=7", **IMAGES)})
    with Slurmop(ks.kubeconfig, **lab.slurmop_flags()) as op:
        op.wait_ready()
        wait_for(lambda: slurmd_args(c)[0], 30, what="pod dyn-0")
        args, rev = slurmd_args(c)
        conf = conf_of(args)
        assert shell_words(args) == args, (shell_words(args), args)
        items = conf.split()
        assert "Topology=" not in items and all(not i.startswith("Topology=") for i in items), items
        assert sorted(items) == ["Features=dyn,fresh", "Weight=7"], items
        log("ok 1: the args are the same words through a shell: %r" % args)

        # A first registration with exactly the pod's --conf: delete the
        # record (the lab registered dyn-0 with its own conf), then start.
        lab.scontrol("delete", "nodename=" + NODE, check=False)
        restart_dynamic(lab, conf)
        wait_for(lambda: "Weight=7" in (show_node(lab) or ""), 30, what="dyn-0 registered with Weight=7")
        wait_for(lambda: features(lab) == {"dyn", "fresh"}, 30, what="dyn-0's features dyn,fresh")
        log("ok 2: Slurm %s registered the literal --conf: %s" % (
            lab.version, [x.strip() for x in show_node(lab).split("\n") if "Features" in x or "Weight" in x]))

        r = c.patch(NS_API + "/namespaces/default/nodesets/dyn", {"spec": {"extraConf": "Features=fresher Weight=7"}})
        assert r.status == 200, r.text
        wait_for(lambda: slurmd_args(c, want_revision=rev)[0], 60, what="dyn-0 replaced by the new revision")
        args2, _ = slurmd_args(c, want_revision=rev)
        assert sorted(conf_of(args2).split()) == ["Features=dyn,fresher", "Weight=7"], args2
        restart_dynamic(lab, conf_of(args2))
        wait_for(lambda: features(lab) == {"dyn", "fresher"}, 30,
                 what="dyn-0's features corrected to dyn,fresher (Slurm kept %r)" % features(lab))
        log("ok 3: the features of the re-registered node follow the NodeSet: %s" % sorted(features(lab)))

        mem0 = real_memory(lab)
        want = 500 if mem0 != 500 else 400
        # OnDelete: the pod goes when a person deletes it, here while a job
        # runs on its node (the lab's slurmd runs on; a real one would be
        # the new pod's, registering while the job's record still names the
        # node). Slurm could also schedule a job in the moment between a
        # registration and slurmop's drain; either way the job must end
        # before the record goes.
        r = c.patch(NS_API + "/namespaces/default/nodesets/dyn",
                    {"spec": {"updateStrategy": {"type": "OnDelete"},
                              "extraConf": "Features=fresher Weight=7 RealMemory=%d" % want}})
        assert r.status == 200, r.text
        job = lab.sbatch([NODE], 8)
        wait_for(lambda: lab.job_state(job)[0] == "RUNNING", 30, what="job %s running on %s" % (job, NODE))
        rev2 = slurmd_args(c)[1]
        r = c.delete("/api/v1/namespaces/default/pods/" + NODE)
        assert r.status in (200, 202), r.text
        wait_for(lambda: slurmd_args(c, want_revision=rev2)[0], 60, what="dyn-0 of the RealMemory revision")
        args3, _ = slurmd_args(c, want_revision=rev2)
        assert "realmemory=%d" % want in conf_of(args3).lower().split(), args3
        restart_dynamic(lab, conf_of(args3))
        assert real_memory(lab) == mem0, "Slurm took RealMemory from a registration: %r" % real_memory(lab)
        wait_for(lambda: "record out of date" in (lab.node(NODE) or {}).get("reason", ""), 30,
                 what="dyn-0 drained for its record")
        uid = pod_uid(c)
        while lab.job_state(job)[0] in ("RUNNING", "COMPLETING"):
            assert real_memory(lab) == mem0, "the record went while job %s ran" % job
            assert pod_uid(c) == uid, "the pod went while job %s ran" % job
            time.sleep(0.2)
        ended = time.monotonic()
        wait_for(lambda: pod_uid(c) not in (None, uid), 90, what="dyn-0's pod restarted after its record went")
        took = time.monotonic() - ended
        # slurmctld purged the job's record before slurmop deleted the node's.
        assert lab.job_state(job)[0] is None, "the node's record went while job %s's record named it" % job
        assert events(c, "SlurmRecordStale") and events(c, "SlurmRecordDeleted")
        restart_dynamic(lab, conf_of(slurmd_args(c)[0]))
        wait_for(lambda: real_memory(lab) == want, 30, what="dyn-0 registered anew with RealMemory=%d" % want)
        wait_for(lambda: node_field(lab, "State") and "DRAIN" not in node_field(lab, "State"), 30,
                 what="dyn-0 not drained")
        log("ok 4: RealMemory %d -> %d: record and pod kept while job %s ran, both made anew %.1f s after it ended"
            % (mem0, want, job, took))
        precreate(c, lab, op)
    log("ok: slurmop stopped")


def future_node(lab, name):
    """The fields of a FUTURE-or-registered record, or None when Slurm has none."""
    out = lab.scontrol("--future", "show", "node", name, check=False)
    if not out or "NodeName=" + name not in out:
        return None
    return dict(w.split("=", 1) for w in out.split() if "=" in w)


def precreate(c, lab, op):
    made = lab.version.split(".") >= ["25", "11"]
    fx = ["fx-0", "fx-1", "fx-2"]
    r = c.post(NS_API + "/namespaces/default/nodesets",
               {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet", "metadata": {"name": "fx"},
                "spec": {"controllerRef": {"name": "slurm"}, "replicas": 3, "extraConf": "CPUs=1 RealMemory=100",
                         "template": {"spec": {"hostname": "fx-"}}, **IMAGES}})
    assert r.status == 201, r.text
    wait_for(lambda: len(pods_of(c, "fx")) == 3, 30, what="3 pods of fx")
    if not made:
        time.sleep(2)
        assert op.metric("slurmop_slurm_node_precreates_total") == 0
        assert all(future_node(lab, n) is None for n in fx), [future_node(lab, n) for n in fx]
        log("ok 5: Slurm %s has no create endpoint: no record asked for before the pods" % lab.version)
        return
    wait_for(lambda: op.metric("slurmop_slurm_node_precreates_total", result="created") == 3, 20,
             what="3 records made first")
    recs = [future_node(lab, n) for n in fx]
    for n, rec in zip(fx, recs):
        assert rec and rec.get("State", "").startswith("FUTURE"), (n, rec)
        assert rec.get("CPUTot") == "1" and rec.get("RealMemory") == "100", (n, rec)
    log("ok 5a: fx-[0-2] made FUTURE before their slurmd: %s" % [(r["State"], r["CPUTot"], r["RealMemory"])
                                                                 for r in recs])
    # The lab's one dynamic slurmd becomes fx-0, with the pod's own --conf.
    conf = conf_of(slurmd_args_of(c, "fx-0"))
    assert sorted(conf.lower().split()) == ["cpus=1", "features=fx", "realmemory=100"], repr(conf)
    with open(os.path.join(lab.dir, "etc", "dynamic"), "w") as f:
        f.write("fx-0")
    restart_dynamic(lab, conf)
    wait_for(lambda: (future_node(lab, "fx-0") or {}).get("State", "").startswith("IDLE"), 30,
             what="fx-0 registered into its record (%r)" % future_node(lab, "fx-0"))
    rec = future_node(lab, "fx-0")
    assert rec.get("CPUTot") == "1" and rec.get("RealMemory") == "100", rec
    log("ok 5b: fx-0's slurmd registered into its record: %s %s CPUs, %s MB" % (
        rec["State"], rec["CPUTot"], rec["RealMemory"]))
    set_replicas(c, "fx", 0)
    wait_for(lambda: not pods_of(c, "fx"), 60, what="fx scaled in to 0 (%r)" %
             [p["metadata"]["name"] for p in pods_of(c, "fx")])
    # The registered node was drained before its pod went; the two never registered lose their FUTURE records.
    assert "DRAIN" in future_node(lab, "fx-0").get("State", ""), future_node(lab, "fx-0")
    deleted = "slurmop_slurm_node_precreates_deleted_total"
    wait_for(lambda: future_node(lab, "fx-1") is None and future_node(lab, "fx-2") is None, 30,
             what="the FUTURE records of fx-1 and fx-2 deleted (%r)" % [future_node(lab, n) for n in fx[1:]])
    assert op.metric(deleted) == 2, op.metric(deleted)
    assert events(c, "SlurmNodeRecordsDeleted")
    log("ok 5c: scale-in to 0 deleted the registered pod (drained first) and the two never registered, "
        "and their FUTURE records")
    set_replicas(c, "fx", 2)
    wait_for(lambda: len(pods_of(c, "fx")) == 2, 30, what="2 pods of fx")
    # fx-0 is in the node table (registered): not asked for; fx-1 is made anew.
    wait_for(lambda: op.metric("slurmop_slurm_node_precreates_total", result="created") == 4, 20,
             what="fx-1 made anew")
    assert (future_node(lab, "fx-1") or {}).get("State", "").startswith("FUTURE"), future_node(lab, "fx-1")
    log("ok 5d: scale-out to 2 made fx-1's record anew, not fx-0's (registered)")
    # A record the operator did not make (by hand here; after a restart, one it made and forgot) makes
    # slurmctld refuse a request that names it: the request is split until the refusal names it alone.
    lab.scontrol("create", "NodeName=fx-3", "State=FUTURE", "CPUs=1", "RealMemory=100")
    set_replicas(c, "fx", 5)
    wait_for(lambda: len(pods_of(c, "fx")) == 5, 30, what="5 pods of fx")
    wait_for(lambda: op.metric("slurmop_slurm_node_precreates_total", result="created") == 6 and
             op.metric("slurmop_slurm_node_precreates_total", result="exists") == 1, 20,
             what="fx-2 and fx-4 made, fx-3 found existing (created %s, exists %s)" % (
                 op.metric("slurmop_slurm_node_precreates_total", result="created"),
                 op.metric("slurmop_slurm_node_precreates_total", result="exists")))
    for n in ("fx-2", "fx-3", "fx-4"):
        assert (future_node(lab, n) or {}).get("State", "").startswith("FUTURE"), (n, future_node(lab, n))
    log("ok 5e: a request naming a record made by hand (fx-3) was split: fx-2 and fx-4 made")
    set_replicas(c, "fx", 2)
    wait_for(lambda: all(future_node(lab, n) is None for n in ("fx-2", "fx-3", "fx-4")), 60,
             what="the FUTURE records of fx-[2-4] deleted (%r)" % [future_node(lab, n) for n in fx])
    assert op.metric(deleted) == 5, op.metric(deleted)
    assert (future_node(lab, "fx-1") or {}).get("State", "").startswith("FUTURE"), future_node(lab, "fx-1")
    log("ok 5f: scale-in to 2 deleted the FUTURE records of fx-[2-4]; fx-1's (ordinal 1 < 2) stays")
    r = c.delete(NS_API + "/namespaces/default/nodesets/fx")
    assert r.status in (200, 202), r.text
    wait_for(lambda: c.get(NS_API + "/namespaces/default/nodesets/fx").status == 404, 60,
             what="NodeSet fx deleted")
    assert future_node(lab, "fx-1") is None, future_node(lab, "fx-1")
    assert future_node(lab, "fx-0") is not None, "the registered node's record is not one made first"
    assert op.metric(deleted) == 6, op.metric(deleted)
    log("ok 5g: deleting NodeSet fx deleted fx-1's FUTURE record before its finalizer went; fx-0's stays")
    remade(c, lab, op)


def remade(c, lab, op):
    """Step 6: NodeSet fy, whose slurmd never start: its pods' hardware changes before they register."""
    fy = ["fy-0", "fy-1"]
    name = "slurmop_slurm_node_precreates_total"
    created = op.metric(name, result="created")
    deleted = op.metric("slurmop_slurm_node_precreates_deleted_total")
    r = c.post(NS_API + "/namespaces/default/nodesets",
               {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet", "metadata": {"name": "fy"},
                "spec": {"controllerRef": {"name": "slurm"}, "replicas": 2, "extraConf": "CPUs=1 RealMemory=100",
                         "template": {"spec": {"hostname": "fy-"}}, **IMAGES}})
    assert r.status == 201, r.text
    wait_for(lambda: op.metric(name, result="created") == created + 2, 20, what="fy-[0-1] made first")
    r = c.patch(NS_API + "/namespaces/default/nodesets/fy", {"spec": {"extraConf": "CPUs=1 RealMemory=200"}})
    assert r.status == 200, r.text
    wait_for(lambda: all((future_node(lab, n) or {}).get("RealMemory") == "200" for n in fy), 60,
             what="fy-[0-1] made again with RealMemory=200 (%r)" % [future_node(lab, n) for n in fy])
    assert all(future_node(lab, n)["State"].startswith("FUTURE") for n in fy), [future_node(lab, n) for n in fy]
    assert op.metric(name, result="created") == created + 4, op.metric(name, result="created")
    log("ok 6a: extraConf RealMemory 100 -> 200 before fy's slurmd registered: the replacements' FUTURE "
        "records were made again with the new hardware")
    r = c.delete(NS_API + "/namespaces/default/nodesets/fy")
    assert r.status in (200, 202), r.text
    wait_for(lambda: c.get(NS_API + "/namespaces/default/nodesets/fy").status == 404, 60,
             what="NodeSet fy deleted")
    assert all(future_node(lab, n) is None for n in fy), [future_node(lab, n) for n in fy]
    assert op.metric("slurmop_slurm_node_precreates_deleted_total") == deleted + 2
    log("ok 6b: deleting NodeSet fy deleted its two FUTURE records")

def main():
    skip_unless_runnable(())
    tmp = tempfile.mkdtemp(prefix="test_slurm_dynconf.")
    os.chmod(tmp, 0o755)  # munged needs every folder above its socket searchable
    lab = Lab(tmp, ["static-0"], extra_env={"SLURMLAB_DYNAMIC": "1", "SLURMLAB_DYNAMIC_NAME": NODE,
                                            "SLURMLAB_EXTRA_CONF": "MinJobAge=2"})
    try:
        lab.start()
        log("Slurm %s lab started in %.1f s" % (lab.version, lab.start_s))
        with api_server(nodes=1, max_grace="200ms") as ks:
            scenario(ks, lab)
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
