"""Drive the demo: kubesim + slurmop + a Slurm cluster's custom resources.
Run through bench/demo.sh (which builds everything first).

With a real Slurm (root and the Slurm packages: tests/slurm/slurmlab.sh runs
slurmctld, slurmd for each worker pod's node, and slurmrestd on loopback),
it then shows what matters first: a scale-in whose victim runs a job keeps
its pod, drained, until the job ends, and only then deletes it."""
import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from kubesim import Kubesim  # noqa: E402
from slurmop import NS_API, Slurmop, apply_crds, make_cluster, pods_of, set_replicas, wait_for  # noqa: E402

SLURM_NODES = ["slinky-0", "slinky-1", "slinky-2"]


def say(msg):
    print("demo: " + msg, flush=True)


def table(c, name):
    pods = sorted(pods_of(c, name), key=lambda p: p["metadata"]["name"])
    for p in pods:
        st = p.get("status", {})
        ready = any(x["type"] == "Ready" and x["status"] == "True" for x in st.get("conditions", []))
        print("       %-12s %-9s node=%-12s ready=%s%s" % (
            p["metadata"]["name"], st.get("phase", "-"), p["spec"].get("nodeName", "-"), ready,
            " (terminating)" if p["metadata"].get("deletionTimestamp") else ""))
    s = c.get(NS_API + "/namespaces/default/nodesets/" + name).json().get("status", {})
    print("       status: replicas=%s ready=%s updated=%s hash=%s" % (
        s.get("replicas"), s.get("readyReplicas"), s.get("updatedReplicas"), s.get("nodeSetHash")))


def ready_count(c, name):
    return sum(1 for p in pods_of(c, name, include_terminating=False)
               if any(x["type"] == "Ready" and x["status"] == "True"
                      for x in p.get("status", {}).get("conditions", [])))


def slurm_runnable():
    """Why the Slurm part cannot run here, or None."""
    if os.geteuid() != 0:
        return "not root"
    missing = [b for b in ("slurmctld", "slurmd", "slurmrestd", "munged", "sbatch") if not shutil.which(b)]
    return "missing %s" % " ".join(missing) if missing else None


def slurm_part(args):
    """A scale-in against a real Slurm: the busy victim waits for its job."""
    from slurmlab import Lab, lab_cluster
    tmp = tempfile.mkdtemp(prefix="slurmop-demo.")
    os.chmod(tmp, 0o755)  # munged needs every folder above its socket searchable
    lab = Lab(tmp, SLURM_NODES)
    try:
        lab.start()
        say("Slurm %s runs on loopback: slurmctld, slurmd for %s, slurmrestd at %s (REST %s)" %
            (lab.version, ", ".join(SLURM_NODES), lab.url, lab.api))
        with Kubesim(nodes=len(SLURM_NODES)) as ks:
            c = ks.client()
            apply_crds(c)
            lab_cluster(c, lab, {"slinky": {"replicas": 3, "slurmd": {"image": "ghcr.io/slinkyproject/slurmd:25.11"},
                                            "logfile": {"image": "alpine:latest"}}})
            say("NodeSet 'slinky' (replicas 3) and a RestApi: the pods are Slurm nodes %s" % ", ".join(SLURM_NODES))
            with Slurmop(ks.kubeconfig, log_level="info", **lab.slurmop_flags()):
                wait_for(lambda: sorted(p["metadata"]["name"] for p in pods_of(c, "slinky")) == SLURM_NODES, 60,
                         what="3 pods")
                for n in SLURM_NODES[:2]:  # the scale-in's victim is slinky-2
                    c.patch("/api/v1/namespaces/default/pods/" + n, {"metadata": {"annotations": {
                        "nodeset.slinky.slurm.net/pod-deletion-cost": "100"}}})
                job = lab.sbatch(["slinky-2"], args.job_seconds)
                wait_for(lambda: lab.job_state(job)[0] == "RUNNING", 30, what="the job running")
                say("sbatch -w slinky-2: job %s runs for %d s on slinky-2" % (job, args.job_seconds))
                wait_for(lambda: (c.get("/api/v1/namespaces/default/pods/slinky-2").json().get("metadata", {})
                                  .get("labels", {}).get("nodeset.slinky.slurm.net/pod-protect")) == "true", 15,
                         what="pod-protect on slinky-2")
                say("kubectl scale nodeset slinky --replicas=2   (victim: slinky-2, which runs job %s)" % job)
                set_replicas(c, "slinky", 2)
                t0 = time.monotonic()
                last = None
                while True:
                    r = c.get("/api/v1/namespaces/default/pods/slinky-2")
                    pod = r.json() if r.status == 200 else None
                    node = lab.node("slinky-2") or {}
                    state = lab.job_state(job)[0]
                    slurm = "%s%s" % (node.get("state", "?"), "+" + "+".join(node.get("state_flags") or [])
                                      if node.get("state_flags") else "")
                    now = ("pod slinky-2 %s; Slurm node %s; job %s %s" % (
                        "gone" if pod is None else "kept", slurm, job, state))
                    if now != last:
                        say("  t=%5.1f s  %s" % (time.monotonic() - t0, now))
                        last = now
                    if pod is None:
                        break
                    if time.monotonic() - t0 > args.job_seconds + 60:
                        raise SystemExit("demo: slinky-2 still there a minute after its job should have ended")
                    time.sleep(0.2)
                say("the busy pod stayed while its job ran and went once Slurm showed its node drained and idle")
    finally:
        lab.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=8, help="simulated Kubernetes nodes")
    ap.add_argument("--keep", action="store_true", help="keep running until Ctrl-C at the end")
    ap.add_argument("--slurm", choices=("auto", "on", "off"), default="auto",
                    help="the part with a real Slurm (auto: when root with the Slurm packages)")
    ap.add_argument("--job-seconds", type=int, default=10, help="length of the job the scale-in waits for")
    args = ap.parse_args()
    with Kubesim(nodes=args.nodes, node_gpus=8) as ks:
        say("kubesim serves %s with %d nodes (kubeconfig %s)" % (ks.url, args.nodes, ks.kubeconfig))
        c = ks.client()
        apply_crds(c)
        say("installed the six slinky.slurm.net/v1beta1 CRDs")
        # No Slurm runs in the demo, so nothing can confirm a drain: without
        # the opt-out the scale-in below would keep its pods (cordoned).
        make_cluster(c, nodesets={"gpu": {"replicas": 2, "slurmd": {"image": "ghcr.io/slinkyproject/slurmd:25.11"},
                                          "logfile": {"image": "alpine:latest"}}}, no_drain=True)
        say("created Secrets slurm-auth-slurm/slurm-auth-jwt, Controller 'slurm' and NodeSet 'gpu' (replicas 2, "
            "annotated delete-without-drain: no Slurm runs here)")
        with Slurmop(ks.kubeconfig, log_level="info") as op:
            say("slurmop is running (metrics %s/metrics, health %s/readyz)" % (op.metrics_url, op.health_url))
            op.wait_ready()
            for n in (2, 6, 3):
                if n != 2:
                    say("kubectl scale nodeset gpu --replicas=%d" % n)
                    set_replicas(c, "gpu", n)
                t0 = time.monotonic()
                wait_for(lambda: ready_count(c, "gpu") == n and len(pods_of(c, "gpu")) == n, 60)
                say("%d pod(s) ready after %.2f s:" % (n, time.monotonic() - t0))
                table(c, "gpu")
            shared = [o["metadata"]["name"] for o in c.get("/api/v1/namespaces/default/services").json()["items"]]
            say("services: %s" % ", ".join(shared))
            m = op.metrics()
            adds = sum(v for (k, ls), v in m.items() if k == "workqueue_adds_total")
            say("operator metrics: %d work queue adds, %d pod creates seen by kubesim" %
                (adds, ks.counters()["creates"].get("pods", 0)))
            if args.keep:
                say("running; press Ctrl-C to stop")
                try:
                    while True:
                        time.sleep(1)
                except KeyboardInterrupt:
                    pass
            say("stopping slurmop (SIGTERM)")
    why = slurm_runnable()
    if args.slurm == "off" or (why and args.slurm == "auto"):
        say("skipping the part with a real Slurm (%s)" % ("--slurm off" if args.slurm == "off" else why))
    elif why:
        raise SystemExit("demo: --slurm on, but %s" % why)
    else:
        slurm_part(args)
    say("done")


if __name__ == "__main__":
    main()
