"""The NodeSet engine (Kubernetes side) against kubesim over real sockets:
every created object checked against the spec in StatefulSet and DaemonSet
mode, the scale subresource, a rolling update of 20 pods with
maxUnavailable 25% sampled so that no more than 5 are ever unavailable,
DaemonSet mode following Nodes being labelled, tainted, added and deleted,
failed pods replaced, orphan pods adopted (and strangers left alone), and
a NodeSet deleted and recreated under the same name converging at once.
No Slurm runs here (no RestApi): the tests that scale in, roll or delete
opt out of the drain before delete (make_cluster(no_drain=True)); what the
operator does without that opt-out is test_nodeset_safety.py's.

Also on a real control plane (integration.k8s.nodeset_engine,
tests/lib/backend.py): kube-scheduler binds the pods to KWOK nodes and kwok
makes them Ready; a failed pod is a status write of phase Failed (what a
kubelet writes); taints, node deletion and new nodes are API writes; the
volume claims bind to PersistentVolumes the test creates (the cluster has
no provisioner)."""
# backends: kubesim k8s

import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from backend import api_server, is_k8s  # noqa: E402
from kubesim import run_tests  # noqa: E402
from slurmop import NS_API, Slurmop, apply_crds, make_cluster, pods_of, set_replicas, wait_for  # noqa: E402

IMAGES = {"slurmd": {"image": "ghcr.io/slinkyproject/slurmd:test"}, "logfile": {"image": "alpine:test"}}


def is_ready(p):
    return any(c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", []))


def ready_pods(c, name):
    return [p for p in pods_of(c, name, include_terminating=False) if is_ready(p)]


def nodeset(c, name):
    return c.get(NS_API + "/namespaces/default/nodesets/" + name).json()


def test_objects_statefulset_mode():
    with api_server(nodes=8) as ks:
        c = ks.client()
        apply_crds(c)
        a, b = make_cluster(c, nodesets={
            "cpu": dict(replicas=2, ordinalPadding=2, extraConf="Weight=5",
                        template={"metadata": {"labels": {"team": "hpc"}}, "spec": {"hostname": "cpu-"}}, **IMAGES),
            "gpu": dict(replicas=1, **IMAGES)})
        with Slurmop(ks.kubeconfig) as op:
            op.wait_ready()
            wait_for(lambda: len(ready_pods(c, "cpu")) == 2 and len(ready_pods(c, "gpu")) == 1, 30)
            pods = sorted(pods_of(c, "cpu"), key=lambda p: p["metadata"]["name"])
            assert [p["metadata"]["name"] for p in pods] == ["cpu-00", "cpu-01"]
            # Status follows the pods' watch events (eventually, not in the same instant).
            wait_for(lambda: nodeset(c, "cpu").get("status", {}).get("readyReplicas") == 2, 10,
                     what="status.readyReplicas == 2")
            ns = nodeset(c, "cpu")
            h = ns["status"]["nodeSetHash"]
            for i, p in enumerate(pods):
                m, spec = p["metadata"], p["spec"]
                assert m["labels"]["team"] == "hpc"
                assert m["labels"]["nodeset.slinky.slurm.net/pod-index"] == "%02d" % i
                assert m["labels"]["controller-revision-hash"] in (h, h.split("-")[-1]), (m["labels"], h)
                assert m["annotations"]["kubectl.kubernetes.io/default-container"] == "slurmd"
                assert spec["hostname"] == "cpu-%02d" % i and spec["subdomain"] == "slurm-workers-slurm"
                slurmd = [x for x in spec["containers"] if x["name"] == "slurmd"][0]
                args = slurmd["args"]
                assert args[0] == "-Z" and "--conf-server" in args, args
                assert args[args.index("--conf-server") + 1] == "slurm-controller.default:6817"
                conf = args[args.index("--conf") + 1]
                assert "Features=cpu" in conf and "Weight=5" in conf, conf
                tol = spec.get("tolerations", [])
                assert any(t.get("key") == "nodeset.slinky.slurm.net/worker" for t in tol), tol
                anti = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                assert anti[0]["topologyKey"] == "kubernetes.io/hostname"
                assert "nodeName" in spec  # set by kubesim's scheduler, never by us
            # The revision object.
            revs = c.get("/apis/apps/v1/namespaces/default/controllerrevisions").json()["items"]
            mine = [r for r in revs if r["metadata"]["ownerReferences"][0]["uid"] == a["metadata"]["uid"]]
            assert len(mine) == 1 and mine[0]["metadata"]["name"].endswith(h.split("-")[-1]), mine
            # The shared Service and PDB belong to both NodeSets (non-controller refs).
            svc = c.get("/api/v1/namespaces/default/services/slurm-workers-slurm").json()
            pdb = c.get("/apis/policy/v1/namespaces/default/poddisruptionbudgets/slurm-workers-pdb-slurm").json()
            for o in (svc, pdb):
                refs = o["metadata"]["ownerReferences"]
                assert sorted(r["name"] for r in refs) == ["cpu", "gpu"], refs
                assert all(not r.get("controller") and r.get("blockOwnerDeletion") for r in refs), refs
            assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
            assert svc["spec"]["selector"] == {"app.kubernetes.io/name": "slurmd", "slinky.slurm.net/cluster": "slurm"}
            assert pdb["spec"]["maxUnavailable"] == 0
            # The scale subresource, as kubectl scale / HPA / KEDA read it.
            sc = c.get(NS_API + "/namespaces/default/nodesets/cpu/scale").json()
            assert sc["kind"] == "Scale" and sc["spec"]["replicas"] == 2 and sc["status"]["replicas"] == 2, sc
            assert sc["status"]["selector"] == "app.kubernetes.io/instance=cpu,app.kubernetes.io/name=slurmd", sc
            # Read again until it holds: once, on the real control plane under
            # load, the status read right after readyReplicas reached 2 showed
            # 1 (not explained yet; the operator's log showed no pod change).
            ns = wait_for(lambda: (lambda o: o if (o["status"].get("replicas"), o["status"].get("readyReplicas"),
                                                   o["status"].get("updatedReplicas"), o["status"].get("desired"))
                                   == (2, 2, 2, 2) else None)(nodeset(c, "cpu")), 10,
                          what="status 2/2/2/2")
            st = ns["status"]
            assert st["observedGeneration"] == ns["metadata"]["generation"]
            # A failed pod is replaced.
            ks.fail_pod("default", "cpu-01")
            wait_for(lambda: any(p["metadata"]["name"] == "cpu-01" and
                                 p["metadata"]["uid"] != pods[1]["metadata"]["uid"] and is_ready(p)
                                 for p in pods_of(c, "cpu")), 30, what="cpu-01 replaced")


def test_rolling_update_budget():
    with api_server(nodes=24, max_grace="300ms") as ks:
        c = ks.client()
        apply_crds(c)
        make_cluster(c, nodesets={"cpu": dict(replicas=20, updateStrategy={
            "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}}, **IMAGES)}, no_drain=True)
        with Slurmop(ks.kubeconfig) as op:
            op.wait_ready()
            wait_for(lambda: len(ready_pods(c, "cpu")) == 20, 60, what="20 ready pods")
            old_hash = nodeset(c, "cpu")["status"]["nodeSetHash"]
            worst = [0]
            stop = threading.Event()
            sc = ks.client()

            def sample():
                while not stop.is_set():
                    worst[0] = max(worst[0], 20 - len(ready_pods(sc, "cpu")))
                    time.sleep(0.02)
            t = threading.Thread(target=sample)
            t.start()
            try:
                r = c.patch(NS_API + "/namespaces/default/nodesets/cpu",
                            {"spec": {"template": {"metadata": {"annotations": {"rollout": "2"}}}}})
                assert r.status == 200, r.text

                def done():
                    st = nodeset(c, "cpu")["status"]
                    ps = pods_of(c, "cpu")
                    return (st["nodeSetHash"] != old_hash and st.get("updatedReplicas") == 20 and
                            st.get("readyReplicas") == 20 and len(ps) == 20 and
                            all(p["metadata"]["annotations"].get("rollout") == "2" for p in ps))
                wait_for(done, 120, interval=0.2, what="rollout finished")
            finally:
                stop.set()
                t.join()
            assert 1 <= worst[0] <= 5, "at worst %d pods were unavailable (maxUnavailable 25%% of 20 = 5)" % worst[0]


def node_names(c):
    return [n["metadata"]["name"] for n in c.get("/api/v1/nodes").json()["items"]]


def label_node(c, name, labels):
    r = c.patch("/api/v1/nodes/" + name, {"metadata": {"labels": labels}})
    assert r.status == 200, r.text


def test_daemonset_mode_follows_nodes():
    with api_server(nodes=4) as ks:
        c = ks.client()
        apply_crds(c)
        nodes = sorted(node_names(c))
        label_node(c, nodes[0], {"pool": "a"})
        label_node(c, nodes[1], {"pool": "a"})
        make_cluster(c, nodesets={"ds": dict(scalingMode="DaemonSet",
                                             template={"spec": {"nodeSelector": {"pool": "a"}}}, **IMAGES)},
                     no_drain=True)
        with Slurmop(ks.kubeconfig) as op:
            op.wait_ready()

            def on_nodes():
                return sorted(p["spec"].get("nodeName", "?") for p in ready_pods(c, "ds"))
            wait_for(lambda: on_nodes() == nodes[:2], 30, what="pods on the two pool=a nodes")
            p = pods_of(c, "ds")[0]
            assert p["metadata"]["generateName"] == "ds-" and p["metadata"]["labels"][
                "nodeset.slinky.slurm.net/scaling-mode"] == "DaemonSet"
            assert p["spec"]["hostname"] == p["spec"]["nodeName"]
            # A third node joins the pool.
            label_node(c, nodes[2], {"pool": "a"})
            wait_for(lambda: on_nodes() == nodes[:3], 30, what="a pod on the newly labelled node")
            # An untolerated NoExecute taint evicts; NoSchedule alone would not.
            ks.taint_node(nodes[1], {"key": "maint", "value": "x", "effect": "NoExecute"})
            wait_for(lambda: on_nodes() == [nodes[0], nodes[2]], 30, what="pod gone from the tainted node")
            # A node is deleted; a new one is added and labelled.
            ks.delete_node(nodes[0])
            wait_for(lambda: on_nodes() == [nodes[2]], 30, what="pod gone with its node")
            new = ks.add_node()
            label_node(c, new, {"pool": "a"})
            # k8s: the pod of the deleted node stays Terminating (no kubelet
            # confirms it) until the pod garbage collector force-deletes it
            # (40 s of quarantine); only then does slurmop place the new pod.
            try:
                wait_for(lambda: on_nodes() == sorted([nodes[2], new]), 90 if is_k8s() else 30,
                         what="pod on the added node")
            except AssertionError as e:
                raise AssertionError("%s: nodes %r, pods %r" % (e, node_names(c), [
                    (p["metadata"]["name"], p["spec"].get("nodeName"), p["spec"].get("affinity"),
                     p.get("status", {}).get("phase"), p["metadata"].get("deletionTimestamp"))
                    for p in pods_of(c, "ds")]))
            st = nodeset(c, "ds")["status"]
            wait_for(lambda: nodeset(c, "ds")["status"].get("desired") == 2, 10, what="status.desired == 2")
            assert st["selector"] == "app.kubernetes.io/instance=ds,app.kubernetes.io/name=slurmd"


def test_delete_and_recreate_converges_at_once():
    with api_server(nodes=8, max_grace="200ms") as ks:
        c = ks.client()
        apply_crds(c)
        make_cluster(c, nodesets={"cpu": dict(replicas=3, **IMAGES)}, no_drain=True)
        with Slurmop(ks.kubeconfig) as op:
            op.wait_ready()
            wait_for(lambda: len(ready_pods(c, "cpu")) == 3, 30)
            r = c.delete(NS_API + "/namespaces/default/nodesets/cpu")
            assert r.status == 200, r.text
            wait_for(lambda: len(pods_of(c, "cpu")) == 0, 30, what="pods garbage-collected")
            t0 = time.monotonic()
            make_cluster(c, nodesets={"cpu": dict(replicas=2, **IMAGES)}, no_drain=True)
            wait_for(lambda: len(ready_pods(c, "cpu")) == 2, 30, what="the recreated NodeSet's pods")
            took = time.monotonic() - t0
            # Stale expectations would hold it for five minutes (Slinky #74).
            assert took < 10, "recreated NodeSet converged after %.1f s" % took
            set_replicas(c, "cpu", 4)
            wait_for(lambda: len(ready_pods(c, "cpu")) == 4, 30)



def orphan(c, name, instance="cpu"):
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {"app.kubernetes.io/name": "slurmd", "app.kubernetes.io/instance": instance}},
            "spec": {"containers": [{"name": "slurmd", "image": "ghcr.io/slinkyproject/slurmd:test"}]}}
    r = c.post("/api/v1/namespaces/default/pods", body)
    assert r.status == 201, r.text


def test_orphan_adoption():
    """A pod with the NodeSet's selector labels and one of its ordinal names
    but no owner is adopted (no twin is created); one with the labels and a
    foreign name is left alone; so is an orphan that turns up later, once the
    fleet is steady (the pass looks for orphans only when the label's index
    holds more pods than the NodeSet owns)."""
    with api_server(nodes=8) as ks:
        c = ks.client()
        apply_crds(c)
        make_cluster(c, nodesets={"cpu": dict(replicas=2, **IMAGES)})
        orphan(c, "cpu-1")
        orphan(c, "stranger")
        uid = nodeset(c, "cpu")["metadata"]["uid"]

        def owner(p):
            refs = p["metadata"].get("ownerReferences") or []
            return [r["uid"] for r in refs if r.get("controller")]

        with Slurmop(ks.kubeconfig) as op:
            op.wait_ready()
            wait_for(lambda: sorted(p["metadata"]["name"] for p in pods_of(c, "cpu") if owner(p) == [uid])
                     == ["cpu-0", "cpu-1"], 30, what="cpu-0 created and cpu-1 adopted")
            names = sorted(p["metadata"]["name"] for p in pods_of(c, "cpu"))
            assert names == ["cpu-0", "cpu-1", "stranger"], names
            stranger = c.get("/api/v1/namespaces/default/pods/stranger").json()
            assert owner(stranger) == [], stranger["metadata"]
            # With the stranger gone only owned pods carry the label, so
            # passes skip the scan; a later orphan with a name the NodeSet
            # will want is still adopted when scaling to 3, not twinned.
            assert c.delete("/api/v1/namespaces/default/pods/stranger").status == 200
            wait_for(lambda: len(pods_of(c, "cpu")) == 2, 30, what="the stranger gone")
            orphan(c, "cpu-2")
            set_replicas(c, "cpu", 3)
            wait_for(lambda: sorted(p["metadata"]["name"] for p in pods_of(c, "cpu") if owner(p) == [uid])
                     == ["cpu-0", "cpu-1", "cpu-2"], 30, what="cpu-2 adopted")
            time.sleep(1)
            names = sorted(p["metadata"]["name"] for p in pods_of(c, "cpu"))
            assert names == ["cpu-0", "cpu-1", "cpu-2"], names

def test_claims_retention_and_pin_to_node():
    with api_server(nodes=8, max_grace="200ms") as ks:
        c = ks.client()
        apply_crds(c)
        claim = {"metadata": {"name": "data"},
                 "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
        make_cluster(c, nodesets={"cpu": dict(replicas=2, pinToNode=True, volumeClaimTemplates=[claim],
                                              persistentVolumeClaimRetentionPolicy={"whenDeleted": "Retain",
                                                                                    "whenScaled": "Delete"},
                                              **IMAGES)}, no_drain=True)

        if is_k8s():
            # No provisioner on the real cluster: static volumes for the claims to bind.
            for i in range(3):
                r = c.post("/api/v1/persistentvolumes", {
                    "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "engine-pv-%d" % i},
                    "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                             "persistentVolumeReclaimPolicy": "Delete",
                             "hostPath": {"path": "/tmp/engine-pv-%d" % i}}})
                assert r.status in (201, 409), r.text

        def pvcs():
            items = c.get("/api/v1/namespaces/default/persistentvolumeclaims").json()["items"]
            return {i["metadata"]["name"]: i for i in items}
        with Slurmop(ks.kubeconfig) as op:
            op.wait_ready()
            wait_for(lambda: len(ready_pods(c, "cpu")) == 2, 30)
            assert sorted(pvcs()) == ["data-cpu-0", "data-cpu-1"], pvcs()
            pod0 = [p for p in pods_of(c, "cpu") if p["metadata"]["name"] == "cpu-0"][0]
            vols = {v["name"]: v for v in pod0["spec"]["volumes"]}
            assert vols["data"]["persistentVolumeClaim"]["claimName"] == "data-cpu-0", vols
            assert not pvcs()["data-cpu-0"]["metadata"].get("ownerReferences"), pvcs()["data-cpu-0"]
            # pinToNode: the ordinal's node is remembered, and a replacement returns there.
            wait_for(lambda: sorted(nodeset(c, "cpu")["status"].get("ordinalToNode", {})) == ["0", "1"], 10,
                     what="status.ordinalToNode")
            node0 = pod0["spec"]["nodeName"]
            assert nodeset(c, "cpu")["status"]["ordinalToNode"]["0"] == node0
            r = c.delete("/api/v1/namespaces/default/pods/cpu-0")
            assert r.status == 200, r.text
            wait_for(lambda: any(p["metadata"]["name"] == "cpu-0" and p["metadata"]["uid"] != pod0["metadata"]["uid"]
                                 and is_ready(p) for p in pods_of(c, "cpu")), 30, what="cpu-0 recreated")
            again = [p for p in pods_of(c, "cpu") if p["metadata"]["name"] == "cpu-0"][0]
            assert again["spec"]["nodeName"] == node0, (again["spec"]["nodeName"], node0)
            # whenScaled=Delete: the scaled-away pod's claim goes with it, the other stays.
            set_replicas(c, "cpu", 1)
            wait_for(lambda: sorted(pvcs()) == ["data-cpu-0"], 30, what="data-cpu-1 deleted with its pod")
            assert len(pods_of(c, "cpu")) == 1


def test_failures_while_writes_are_in_flight():
    """Pods failing one after the other, faster than their replacements are
    made: the incremental step that runs while writes are in flight deletes
    each ended pod and creates its replacement at once. Every replacement
    must carry the update revision (none is condemned), keep its ordinal (no
    node renamed, no ordinal beyond the replicas), and no pod may be created
    twice; with a Debug build the operator also compares its state with a
    full rebuild after each step (an error line on any difference). The
    operator runs with --log-level debug, whose line says the step created
    pods while others were in flight (the test cannot pass without it)."""
    n = 12
    with api_server(nodes=n + 2, max_grace="100ms") as ks:
        c = ks.client()
        apply_crds(c)
        make_cluster(c, nodesets={"cpu": dict(replicas=n, **IMAGES)})
        with Slurmop(ks.kubeconfig) as op:
            op.wait_ready()
            wait_for(lambda: len(ready_pods(c, "cpu")) == n, 60, what="%d ready pods" % n)
            before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods_of(c, "cpu")}
            h = nodeset(c, "cpu")["status"]["nodeSetHash"]
            incr0 = op.metric("slurmop_nodeset_passes_total", kind="incremental")
            resync0 = op.metric("slurmop_nodeset_full_passes_total", reason="resync")
            # Rounds over every Running pod, back to back: the deletes and
            # creates of earlier failures are still in flight when the next
            # one comes (pods take up to 100 ms to terminate).
            t0 = time.monotonic()
            while time.monotonic() - t0 < 1.5:
                for p in pods_of(c, "cpu", include_terminating=False):
                    if p.get("status", {}).get("phase") == "Running":
                        ks.fail_pod("default", p["metadata"]["name"])
                time.sleep(0.05)

            def settled():
                pods = pods_of(c, "cpu")
                return (len(pods) == n and all(is_ready(p) for p in pods) and
                        nodeset(c, "cpu").get("status", {}).get("readyReplicas") == n)
            wait_for(settled, 90, what="%d ready pods again" % n)
            pods = pods_of(c, "cpu")
            assert sorted(p["metadata"]["name"] for p in pods) == sorted(before), [p["metadata"]["name"] for p in pods]
            replaced = [p for p in pods if p["metadata"]["uid"] != before[p["metadata"]["name"]]]
            assert replaced, "no pod was replaced"
            for p in pods:
                rev = p["metadata"]["labels"].get("controller-revision-hash")
                assert rev in (h, h.split("-")[-1]), (p["metadata"]["name"], rev, h)
            assert op.metric("slurmop_nodeset_passes_total", kind="incremental") > incr0
            err = op.stderr()
            if not is_k8s():  # kwok's pace decides whether creates overlap there
                assert "create(s) are in flight" in err, "the step under test never created"
            assert "incremental state differs" not in err, err[-4000:]
            # Nothing here asks for a victim (same spec, same replicas): a
            # condemnation means a pod was made wrong (a replacement without
            # the update revision is rolled, and kept for want of a drain).
            assert "DrainBlocked" not in err, [l for l in err.splitlines() if "DrainBlocked" in l][:3]
            # The pods that terminated meanwhile were waited for; the wake that
            # is the safety net for a DELETED event that never comes is an
            # incremental pass once the wait is over, not a full one (before,
            # every wait brought a full pass 5 s later).
            time.sleep(6)
            assert op.metric("slurmop_nodeset_full_passes_total", reason="resync") == resync0, \
                [k for k in op.metrics().items() if k[0][0] == "slurmop_nodeset_full_passes_total"]
            # A change of the NodeSet itself needs a pass over every pod, and
            # the operator says why (slurmop_nodeset_full_passes_total{reason}).
            full0 = op.metric("slurmop_nodeset_full_passes_total", reason="nodeset")
            r = c.patch(NS_API + "/namespaces/default/nodesets/cpu", {"metadata": {"labels": {"touched": "1"}}})
            assert r.status == 200, r.text
            wait_for(lambda: op.metric("slurmop_nodeset_full_passes_total", reason="nodeset") > full0, 30,
                     what="a full pass counted for the NodeSet's own change")
            assert op.metric("slurmop_nodeset_full_passes_total", reason="other") == 0, \
                [k for k in op.metrics() if k[0] == "slurmop_nodeset_full_passes_total"]
            assert "AlreadyExists" not in err and "already exists" not in err, err[-4000:]


def test_daemonset_failed_pod_backoff():
    with api_server(nodes=1, max_grace="100ms") as ks:
        c = ks.client()
        apply_crds(c)
        make_cluster(c, nodesets={"ds": dict(scalingMode="DaemonSet", **IMAGES)})
        with Slurmop(ks.kubeconfig) as op:
            op.wait_ready()
            wait_for(lambda: len(ready_pods(c, "ds")) == 1, 30)
            uids = set()
            t0 = time.monotonic()
            # Fail the node's pod again and again for ~4 s: the replacements
            # must slow down (1 s, 2 s, ...), not follow at once every time.
            while time.monotonic() - t0 < 4:
                for p in pods_of(c, "ds", include_terminating=False):
                    uids.add(p["metadata"]["uid"])
                    if p.get("status", {}).get("phase") == "Running":
                        ks.fail_pod("default", p["metadata"]["name"])
                time.sleep(0.05)
            assert 2 <= len(uids) <= 5, "%d pods created in 4 s of failures" % len(uids)
            wait_for(lambda: len(ready_pods(c, "ds")) == 1, 60, what="a pod again after the failures stop")


if __name__ == "__main__":
    run_tests(globals())
