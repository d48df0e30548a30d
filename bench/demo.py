"""Drive the demo: kubesim + slurmop + a Slurm cluster's custom resources.
Run through bench/demo.sh (which builds everything first)."""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from kubesim import Kubesim  # noqa: E402
from slurmop import NS_API, Slurmop, apply_crds, make_cluster, pods_of, set_replicas, wait_for  # noqa: E402


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


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=8, help="simulated Kubernetes nodes")
    ap.add_argument("--keep", action="store_true", help="keep running until Ctrl-C at the end")
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
        say("done")


if __name__ == "__main__":
    main()
