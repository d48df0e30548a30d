#!/usr/bin/env python3
"""Controller HA: the label controller.slinky.slurm.net/active=true follows
the slurmctld that Slurm's ping says responds (slurmop against kubesim or a
real control plane, tests/lib/backend.py, and a real Slurm 22.05,
tests/slurm/slurmlab.sh).

The lab's slurm.conf gets a second SlurmctldHost (the backup, at the same
address, so the real ping answers UP for both). kubesim runs no StatefulSet
controller, so there the test creates the two slurmctld pods of the HA
Controller itself; on the real control plane kube-controller-manager's
StatefulSet controller makes them from slurmop's StatefulSet (kwok runs
them), once the shared statesave claim is bound to a PersistentVolume the
test provides (no provisioner there). slurmop reads slurmrestd through
tests/lib/faultproxy.py, whose rewrite action stages the failover in the
ping answer:

  1. both respond: pod 0 is active;
  2. the primary stops responding: the label moves to pod 1 (and leaves 0);
  3. no slurmctld responds, then slurmrestd is unreachable: the label stays
     on pod 1 (it is not moved back to pod 0, the one that failed);
  4. the primary responds again: the label returns to pod 0;
  5. the real slurmctld stopped for 12 s (both pings DOWN for real): the
     label stays on pod 0, and is still there after slurmctld is back.
Exit 77 (skipped) without the Slurm binaries or root.
"""
# backends: kubesim k8s
import base64
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from faultproxy import FaultProxy  # noqa: E402
from backend import api_server, is_k8s  # noqa: E402
from slurmop import NS_API, Slurmop, apply_crds, wait_for  # noqa: E402
from slurmlab import LAB_SH  # noqa: E402
from test_slurm_nodeset import NODES, Lab, log, skip  # noqa: E402

ACTIVE = "controller.slinky.slurm.net/active"
PODS = ["slurm-controller-0", "slurm-controller-1"]


def active(c):
    out = []
    for n in PODS:
        r = c.get("/api/v1/namespaces/default/pods/" + n)
        assert r.status == 200, r.text
        if (r.json()["metadata"].get("labels") or {}).get(ACTIVE) == "true":
            out.append(n)
    return out


def pings(responding):
    """A rewrite of the ping answer: pings[i] responds when responding[i]."""
    def fn(doc):
        for i, p in enumerate(doc.get("pings") or []):
            up = responding[i] if i < len(responding) else False
            if "responding" in p:
                p["responding"] = up
            if "pinged" in p:
                p["pinged"] = "UP" if up else "DOWN"
            if "ping" in p:
                p["ping"] = "UP" if up else "DOWN"
        return doc
    return fn


def stays(c, want, seconds, what):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        got = active(c)
        assert got == want, "%s: active %r, want %r" % (what, got, want)
        time.sleep(0.25)


def scenario(ks, lab, fp):
    c = ks.client()
    apply_crds(c)
    for name, key, data in (("slurm-auth-slurm", "slurm.key", b"k" * 64), ("slurm-auth-jwt", "jwt.key", lab.jwt_key)):
        r = c.post("/api/v1/namespaces/default/secrets", {"apiVersion": "v1", "kind": "Secret",
                                                          "metadata": {"name": name},
                                                          "data": {key: base64.b64encode(data).decode()}})
        assert r.status == 201, r.text
    r = c.post("/api/v1/namespaces/default/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "statesave"},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                 "resources": {"requests": {"storage": "1Gi"}}}})
    assert r.status == 201, r.text
    if is_k8s():
        # The scheduler places no pod whose claim is unbound, and nothing
        # provisions one here: a volume bound to the claim ahead (kwok
        # mounts nothing, the path is never used).
        r = c.post("/api/v1/persistentvolumes", {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "test-statesave"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
                     "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": "/nonexistent/statesave"},
                     "claimRef": {"namespace": "default", "name": "statesave"}}})
        assert r.status == 201, r.text
    r = c.post(NS_API + "/namespaces/default/controllers", {
        "apiVersion": "slinky.slurm.net/v1beta1", "kind": "Controller", "metadata": {"name": "slurm"},
        "spec": {"slurmKeyRef": {"name": "slurm-auth-slurm", "key": "slurm.key"},
                 "jwtKeyRef": {"name": "slurm-auth-jwt", "key": "jwt.key"},
                 "slurmctld": {"image": "ghcr.io/slinkyproject/slurmctld:test"}, "logfile": {"image": "alpine:test"},
                 "reconfigure": {"image": "ghcr.io/slinkyproject/slurmctld:test"},
                 "ha": {"enabled": True, "backups": 1},
                 "persistence": {"enabled": True, "existingClaim": "statesave"}}})
    assert r.status == 201, r.text
    r = c.post(NS_API + "/namespaces/default/restapis", {
        "apiVersion": "slinky.slurm.net/v1beta1", "kind": "RestApi", "metadata": {"name": "slurm"},
        "spec": {"controllerRef": {"name": "slurm"}}})
    assert r.status == 201, r.text
    # kubesim: the StatefulSet's pods, as its controller would make them.
    for n in ([] if is_k8s() else PODS):
        r = c.post("/api/v1/namespaces/default/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": n, "labels": {"app.kubernetes.io/name": "slurmctld",
                                               "app.kubernetes.io/instance": "slurm"}},
            "spec": {"containers": [{"name": "slurmctld", "image": "ghcr.io/slinkyproject/slurmctld:test"}]}})
        assert r.status == 201, r.text

    with Slurmop(ks.kubeconfig, slurmrestd="default/slurm=" + fp.url, slurm_conf=lab.conf,
                 env={"SLURM_CONF": lab.conf}) as op:
        op.wait_ready()
        sts = wait_for(lambda: c.get("/apis/apps/v1/namespaces/default/statefulsets/slurm-controller").json()
                       if c.get("/apis/apps/v1/namespaces/default/statefulsets/slurm-controller").status == 200
                       else None, 30, what="the slurmctld StatefulSet")
        assert sts["spec"]["replicas"] == 2, sts["spec"]
        # k8s: pod 1 comes once pod 0 runs and is Ready (OrderedReady).
        wait_for(lambda: all(c.get("/api/v1/namespaces/default/pods/" + n).status == 200 for n in PODS), 60,
                 what="the StatefulSet controller's two slurmctld pods")
        wait_for(lambda: active(c) == ["slurm-controller-0"], 30, what="pod 0 active")
        # Pod 0 is also the default while no ping has answered yet: wait for
        # the pings, then for pod 0 to stay active with them.
        wait_for(lambda: fp.kind_counts().get("ping", 0) > 0, 15, what="slurmop pinging the slurmctlds")
        wait_for(lambda: active(c) == ["slurm-controller-0"], 10, what="pod 0 active after the pings")
        log("ok 1: both slurmctld respond, pod 0 is active")

        rid = fp.add_rule("rewrite", kind="ping", fn=pings([False, True]))
        t = time.monotonic()
        wait_for(lambda: active(c) == ["slurm-controller-1"], 30, what="the label on pod 1")
        log("ok 2: the primary stopped responding; pod 1 active %.1f s later" % (time.monotonic() - t))

        fp.remove_rule(rid)
        rid = fp.add_rule("rewrite", kind="ping", fn=pings([False, False]))
        stays(c, ["slurm-controller-1"], 12, "no slurmctld responds")
        fp.remove_rule(rid)
        rid = fp.add_rule("close", kind="ping")
        stays(c, ["slurm-controller-1"], 12, "slurmrestd unreachable")
        assert fp.count(rid) > 0
        log("ok 3: no answer, or none responding: the label stays on pod 1")

        fp.remove_rule(rid)
        wait_for(lambda: active(c) == ["slurm-controller-0"], 30, what="the label back on pod 0")
        log("ok 4: the primary responds again: pod 0 active")

        env = dict(lab.env)
        p = subprocess.Popen(["bash", LAB_SH, "restart-ctld", "--down", "12"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: subprocess.run(["scontrol", "ping"], env=lab.cli_env, capture_output=True,
                                        text=True).stdout.count("DOWN") >= 2, 15, what="slurmctld down")
        stays(c, ["slurm-controller-0"], 10, "slurmctld stopped")
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        stays(c, ["slurm-controller-0"], 6, "slurmctld back")
        log("ok 5: the real slurmctld down for 12 s: the label stayed on pod 0")


def main():
    missing = [b for b in ("slurmctld", "slurmd", "slurmrestd", "munged", "scontrol") if not shutil.which(b)]
    if missing:
        skip("Slurm binaries missing: %s" % " ".join(missing))
    if os.geteuid() != 0:
        skip("the Slurm lab needs root")
    tmp = tempfile.mkdtemp(prefix="test_slurm_controller_ha.")
    os.chmod(tmp, 0o755)
    lab = Lab(tmp, NODES)
    lab.env["SLURMLAB_EXTRA_CONF"] = "SlurmctldHost=backup(127.0.0.1)"
    try:
        lab.start()
        log("lab started: %s" % lab.url)
        with FaultProxy(lab.url) as fp, api_server(nodes=2) as ks:
            scenario(ks, lab, fp)
    finally:
        lab.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
