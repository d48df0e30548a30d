"""slinky_takeover_slurm_26.05: the takeover of test_slinky_takeover.py with
a real Slurm and a job running through it.

A Slurm 26.05 lab (tests/lib/slurmlab.py) whose static nodes edge-0 and
edge-1 are the Slurm nodes of the NodeSet edge's two pods (KWOK pods on the
real control plane; their slurmd are the lab's). Slinky's manager makes the
cluster from the parity test's custom resources (edge with 2 replicas, the
Controller's JWT key the lab's) and is stopped; a job runs on edge-1;
slurmop starts, pointed at the lab's slurmrestd (REST v0.0.45):

  - no pod re-created, the slurmctld StatefulSet kept (same uid);
  - scale-in of edge 2 -> 1 takes the idle edge-0 (drained and proven free
    through Slurm, then deleted), edge-1 and its job stay; 1 -> 0 drains
    edge-1, its pod stays while the job runs, the job completes, then the
    pod goes.

Skipped (77) as slinky_takeover, and when the lab cannot run here.
"""

import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)

import backend  # noqa: E402
import slurmlab  # noqa: E402
import test_slinky_parity as P  # noqa: E402
import test_slinky_takeover as T  # noqa: E402
from slurmop import Slurmop, slurmop_binary  # noqa: E402

NS = "takeover-slurm"
JOB_S = 50
BASE_INPUTS = P.inputs  # the parity inputs without the neighbour namespace (test_slinky_takeover)


def inputs_with_two_edges():
    out = []
    for o in BASE_INPUTS():
        if o["kind"] == "NodeSet" and o["metadata"]["name"] == "edge":
            o["spec"]["replicas"] = 2
        out.append(o)
    return out


def main():
    if not os.access(slurmop_binary(), os.X_OK):
        P.skip("slurmop is not built")
    slurmlab.skip_unless_runnable()
    senv = T.env_slinky()
    tmp = tempfile.mkdtemp(prefix="takeover-slurm.")
    os.chmod(tmp, 0o755)
    lab = slurmlab.Lab(tmp, ["edge-0", "edge-1"])
    try:
        lab.start()
        T.log("Slurm %s lab started in %.1f s (REST %s)" % (lab.version, lab.start_s, lab.api))
        return scenario(senv, lab)
    finally:
        lab.stop()


def scenario(senv, lab):
    P.JWT_KEY = lab.jwt_key  # the Controller's key Secret: slurmop's tokens must be the lab's
    P.inputs = inputs_with_two_edges
    theirs = P.check_crds(senv["SLINKY_DIR"])
    cl = backend.k8s_cluster(crds=False)
    cl.cluster_sh("nodes", "4")
    work = tempfile.mkdtemp(prefix="slinky-takeover-slurm-")
    cl.kubectl("apply", "--server-side", *sum((["-f", f] for f in theirs), []))
    cl.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    cl.kubectl("create", "namespace", NS)
    slinky_kc = P.slinky_rbac(cl, senv["SLINKY_DIR"], work)
    c = cl.client()
    failures = []

    sl = P.SlinkyManager(senv["SLINKY_BIN"], slinky_kc, work).start()
    try:
        T.run_side(cl, NS)
        T.wait("edge-1 Running", lambda: any(
            p["metadata"]["name"] == "edge-1" and (p.get("status") or {}).get("phase") == "Running"
            for p in c.get("/api/v1/namespaces/%s/pods" % NS).json()["items"]))
    except AssertionError:
        print("---- Slinky's manager (tail) ----\n" + sl.text()[-6000:], file=sys.stderr)
        raise
    finally:
        sl.stop()
    pods0, wl0 = T.pods(c, NS), T.workloads(c, NS)
    job = lab.sbatch(["edge-1"], JOB_S)
    T.wait("job %s running" % job, lambda: lab.job_state(job)[0] == "RUNNING", timeout=30)
    T.log("Slinky %s made %d pods; job %s runs on edge-1" % (senv["SLINKY_VERSION"], len(pods0), job))

    flags = lab.slurmop_flags()
    flags["slurmrestd"] = "%s/slurm=%s" % (NS, lab.url)
    op = Slurmop(cl.operator_kubeconfig, namespace=[NS], leader_elect_namespace=backend.OPERATOR_NS,
                 token_users="*,slurm", allow_node_taints=True, log_level="info", **flags)
    op._cluster = cl
    op.start()
    try:
        op.wait_ready()
        P.settle(cl, NS, T.WANT, quiet=5.0, timeout=120)
        pods1, wl1 = T.pods(c, NS), T.workloads(c, NS)
        recreated = [n for n in pods0 if n not in pods1 or pods1[n][0] != pods0[n][0] or pods1[n][1]]
        T.log("slurmop took over: pods re-created %s, new %s" % (recreated, sorted(set(pods1) - set(pods0))))
        if recreated or set(pods1) - set(pods0):
            failures.append("pods re-created or added on takeover: %s" % recreated)
        for key, (uid, _gen, _svc) in sorted(wl0.items()):
            if wl1.get(key, (None,))[0] != uid:
                failures.append("%s/%s was replaced on takeover" % key)
        if lab.job_state(job)[0] != "RUNNING":
            failures.append("job %s no longer runs after the takeover: %s" % (job, lab.job_state(job)))

        # Scale-in through Slurm. 2 -> 1: slurmop picks the idle edge-0 (drained,
        # proven free, deleted); edge-1 and its job stay.
        nsp = "/apis/%s/v1beta1/namespaces/%s/nodesets/edge" % (P.GROUP, NS)
        r = c.patch(nsp, {"spec": {"replicas": 1}})
        assert r.status == 200, r.text
        t0 = time.monotonic()
        T.wait("edge-0's pod gone", lambda: "edge-0" not in T.pods(c, NS), timeout=60)
        T.log("scale-in 2 -> 1: the idle edge-0 drained and deleted in %.1f s" % (time.monotonic() - t0))
        p2 = T.pods(c, NS)
        if p2.get("edge-1", (None,))[0] != pods0["edge-1"][0] or lab.job_state(job)[0] != "RUNNING":
            failures.append("scale-in 2 -> 1 touched edge-1 or its job: %s %s" % (p2.get("edge-1"),
                                                                                 lab.job_state(job)))
        # 1 -> 0: edge-1 drains, its pod stays while the job runs, then goes.
        r = c.patch(nsp, {"spec": {"replicas": 0}})
        assert r.status == 200, r.text
        t0 = time.monotonic()
        T.wait("edge-1 draining in Slurm", lambda: "DRAIN" in (lab.scontrol("show", "node", "edge-1", "-o",
                                                                            check=False) or ""), timeout=60)
        T.log("scale-in 1 -> 0: edge-1 draining in Slurm after %.1f s, job %s %s" % (
            time.monotonic() - t0, job, lab.job_state(job)[0]))
        while lab.job_state(job)[0] in ("RUNNING", "COMPLETING"):
            if "edge-1" not in T.pods(c, NS):
                failures.append("edge-1's pod went while job %s still ran" % job)
                break
            time.sleep(0.5)
        state = lab.job_state(job)[0]
        T.log("job %s: %s" % (job, state))
        if state != "COMPLETED":
            failures.append("job %s ended %s, not COMPLETED" % (job, state))
        T.wait("edge-1's pod gone after its job", lambda: "edge-1" not in T.pods(c, NS), timeout=90)
        T.log("edge-1's pod gone %.1f s after the scale-in to 0" % (time.monotonic() - t0))
    except AssertionError:
        print("---- slurmop (tail) ----\n" + op.stderr()[-8000:], file=sys.stderr)
        raise
    finally:
        op.stop()
    c.close()
    if failures:
        print("\n%d failure(s):" % len(failures), file=sys.stderr)
        for f in failures:
            print("- " + f, file=sys.stderr)
        return 1
    print("ok: taken over with a job running; it completed; scale-in drained through Slurm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
