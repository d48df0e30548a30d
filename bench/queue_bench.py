#!/usr/bin/env python3
"""Queue -> nodes: how long a job that needs a whole NodeSet waits for it.

A Slurm lab of N static nodes slinky-0..N-1 (tests/slurm/slurmlab.sh; they
stand in for the NodeSet's pods, matched by name) and an API server
(kubesim, or the real control plane with SLURMOP_TEST_BACKEND=k8s). The
NodeSet starts at N replicas and is scaled to 0, which drains every node
(Slurm then keeps them, drained: a NodeSet with no pods). Two rounds, each
from that empty NodeSet, each `sbatch --exclusive -N N`:

  queue  the NodeSet follows the queue (slurmop.slinky.slurm.net/autoscale,
         max=N): the operator sees the job and writes replicas;
  ideal  the limit beside it: replicas set to N by the harness in the same
         instant the job is queued, as a scaler with perfect knowledge would.

Reported per round: queued -> replicas N written, -> N pods Ready, -> N
nodes undrained, -> job RUNNING; and queue/ideal. Needs root and the Slurm
packages (as the Slurm tests); run from a build tree:

  OP_BUILD_DIR=build-rel python3 bench/queue_bench.py [--nodes 64] [--slurm-version 26.05]
"""
import argparse
import os
import sys
import tempfile
import shutil
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
os.environ.setdefault("OP_SOURCE_DIR", os.path.join(HERE, ".."))

ANN = "slurmop.slinky.slurm.net/autoscale"
IMAGES = {"slurmd": {"image": "ghcr.io/slinkyproject/slurmd:test"}, "logfile": {"image": "alpine:test"}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--slurm-version", default=os.environ.get("SLURMLAB_VERSION", "22.05"))
    args = ap.parse_args()
    os.environ["SLURMLAB_VERSION"] = args.slurm_version
    # imported after SLURMLAB_VERSION is set: slurmlab reads it once
    from backend import api_server
    from slurmop import NS_API, Slurmop, apply_crds, pods_of, set_replicas, wait_for
    from slurmlab import Lab, lab_cluster, skip_unless_runnable

    n = args.nodes
    names = ["slinky-%d" % i for i in range(n)]
    skip_unless_runnable(("sbatch",))
    tmp = tempfile.mkdtemp(prefix="queue_bench.")
    os.chmod(tmp, 0o755)
    lab = Lab(tmp, names)

    def drained():
        out = lab.run("sinfo", "-h", "-N", "-o", "%N %t").stdout.split("\n")
        return sum(1 for line in out if line.split()[1:2] and line.split()[1].startswith("dr"))

    def ready(c):
        return sum(1 for p in pods_of(c, "slinky", include_terminating=False)
                   if any(x["type"] == "Ready" and x["status"] == "True"
                          for x in p.get("status", {}).get("conditions", [])))

    def replicas(c):
        return c.get(NS_API + "/namespaces/default/nodesets/slinky").json()["spec"].get("replicas")

    rows = {}
    try:
        lab.start()
        with api_server(nodes=n) as ks:
            c = ks.client()
            apply_crds(c)
            lab_cluster(c, lab, {"slinky": dict(replicas=n, **IMAGES)})
            with Slurmop(ks.kubeconfig, log_level="info", **lab.slurmop_flags()) as op:
                op.wait_ready()
                wait_for(lambda: ready(c) == n, 120, what="%d pods Ready" % n)
                for mode in ("ideal", "queue"):
                    set_replicas(c, "slinky", 0)
                    wait_for(lambda: not pods_of(c, "slinky"), 180, what="the NodeSet empty")
                    wait_for(lambda: drained() == n, 60, what="every node drained")
                    if mode == "queue":
                        r = c.patch(NS_API + "/namespaces/default/nodesets/slinky",
                                    {"metadata": {"annotations": {ANN: "min=0,max=%d,cooldown=600" % n}}})
                        assert r.status == 200, r.text
                        time.sleep(2)
                    p = lab.run("sbatch", "--parsable", "--exclusive", "-N%d" % n, "-n%d" % n, "-D", "/tmp",
                                "-o", "/dev/null", "--wrap", "sleep 5")
                    t0 = time.monotonic()
                    job = p.stdout.strip().split(";")[0]
                    if mode == "ideal":
                        set_replicas(c, "slinky", n)
                    marks = {}
                    deadline = t0 + 300
                    while len(marks) < 4 and time.monotonic() < deadline:
                        now = time.monotonic() - t0
                        if "replicas" not in marks and replicas(c) == n:
                            marks["replicas"] = now
                        if "ready" not in marks and ready(c) == n:
                            marks["ready"] = now
                        if "undrained" not in marks and drained() == 0:
                            marks["undrained"] = now
                        if "running" not in marks and lab.job_state(job)[0] in ("RUNNING", "COMPLETING",
                                                                                "COMPLETED"):
                            marks["running"] = now
                        time.sleep(0.05)
                    rows[mode] = marks
                    wait_for(lambda: lab.job_state(job)[0] in ("COMPLETED", None), 60, what="job %s done" % job)
                    r = c.patch(NS_API + "/namespaces/default/nodesets/slinky",
                                {"metadata": {"annotations": {ANN: None}}})
                    assert r.status == 200, r.text
    finally:
        lab.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("\nSlurm %s, %d nodes, %s: an empty NodeSet, `sbatch --exclusive -N%d`, times from the job queued" %
          (args.slurm_version, n, os.environ.get("SLURMOP_TEST_BACKEND", "kubesim"), n))
    print("| step | follows the queue | ideal scaler (replicas set at submit) | ratio |")
    print("|---|---:|---:|---:|")
    for k, what in (("replicas", "replicas %d written" % n), ("ready", "%d pods Ready" % n),
                    ("undrained", "%d nodes undrained" % n), ("running", "job RUNNING")):
        q, i = rows.get("queue", {}).get(k), rows.get("ideal", {}).get(k)
        fmt = (lambda v: "%.2f s" % v if v is not None else "not reached")
        ratio = "%.2f×" % (q / i) if q is not None and i and i >= 0.05 else ""
        print("| %s | %s | %s | %s |" % (what, fmt(q), fmt(i), ratio))


if __name__ == "__main__":
    main()
