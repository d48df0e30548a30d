#!/usr/bin/env python3
"""An idle Slurm costs slurmop conditional reads, and those hide no change
(slurmop against kubesim or a real control plane, tests/lib/backend.py, and a
real Slurm, tests/slurm/slurmlab.sh, any SLURMLAB_VERSION).

slurmop polls the node table with update_time (slurmctld answers 304 when
nothing changed) and the jobs likewise (22.05 answers 304; 24.11 and later
answer 200 with an empty list, "last_update" 0 and a warning "No job changes
since update_time", which is not an empty job list). Checked, with a NodeSet of
two pods and a job with a time limit on slinky-1:

1. once slurmop's own writes (pod info in the comments) are read back, every
   node poll over IDLE_S seconds answers "not modified": no full table, no
   error, under 1 KB per poll (from slurmop's /metrics);
2. through that window the job's deadline stays on slinky-1's pod
   (nodeset.slinky.slurm.net/pod-deadline): the jobs' "no change" answer
   does not clear it;
3. a person's drain of slinky-0 during the idle polls reaches the pod's
   conditions within a few seconds (one full read): update_time hides nothing;
4. the job cancelled, its deadline leaves the pod.

Exit 77 (skipped) without the Slurm binaries or root.
"""
# backends: kubesim k8s
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from backend import api_server  # noqa: E402
from slurmlab import lab_cluster, run_in_lab  # noqa: E402
from slurmop import Slurmop, apply_crds, pods_of, wait_for  # noqa: E402
from test_slurm_nodeset import IMAGES, conds, log, pod  # noqa: E402

NODES = ["slinky-0", "slinky-1"]
DEADLINE = "nodeset.slinky.slurm.net/pod-deadline"
IDLE_S = float(os.environ.get("IDLE_POLL_S", "6"))
CLUSTER = "default/slurm"


def polls(op):
    m = op.metrics()

    def get(name, **labels):
        return sum(v for (n, ls), v in m.items()
                   if n == name and ("cluster", CLUSTER) in ls and all((k, x) in ls for k, x in labels.items()))
    return {"full": get("slurmop_slurm_node_polls_total", result="full"),
            "not_modified": get("slurmop_slurm_node_polls_total", result="not_modified"),
            "error": get("slurmop_slurm_node_polls_total", result="error"),
            "bytes": get("slurmop_slurm_received_bytes"),
            "writes": get("slurmop_slurm_node_writes_total")}


def deadline(c, name):
    return ((pod(c, name) or {}).get("metadata", {}).get("annotations") or {}).get(DEADLINE)


def wait_writes_quiet(op, quiet_s=2.0, timeout=60):
    """Until slurmop's Slurm node writes stopped for quiet_s, then until a
    node poll answered "not modified": the cache has read back the last of
    them (a poll after a write reads the whole table once, as it should)."""
    end = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < end:
        w = polls(op)["writes"]
        if w != last:
            last, since = w, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("slurmop's node writes did not stop within %ds" % timeout)
    nm = polls(op)["not_modified"]
    wait_for(lambda: polls(op)["not_modified"] > nm, 30, what="a node poll answered not modified")


def scenario(ks, lab):
    c = ks.client()
    apply_crds(c)
    lab_cluster(c, lab, {"slinky": dict(replicas=2, **IMAGES)})
    with Slurmop(ks.kubeconfig, **lab.slurmop_flags()) as op:
        op.wait_ready()
        wait_for(lambda: sorted(p["metadata"]["name"] for p in pods_of(c, "slinky")) == NODES, 30, what="2 pods")
        wait_for(lambda: all("SlurmNodeStateIdle" in conds(pod(c, n)) for n in NODES), 30, what="idle pods")
        for n in NODES:
            wait_for(lambda: (lab.node(n) or {}).get("comment"), 20, what="pod info in %s's comment" % n)
        job = lab.sbatch(["slinky-1"], 120, wrap="sleep 120")
        lab.scontrol("update", "jobid=" + job, "timelimit=30")
        wait_for(lambda: lab.job_state(job)[0] == "RUNNING", 30, what="job %s running" % job)
        dl = wait_for(lambda: deadline(c, "slinky-1"), 15, what="the job's deadline on slinky-1")
        log("job %s on slinky-1, deadline %s on its pod" % (job, dl))

        # 1-2. idle
        wait_writes_quiet(op)
        p0, t0 = polls(op), time.monotonic()
        seen = set()
        while time.monotonic() < t0 + IDLE_S:
            seen.add(deadline(c, "slinky-1"))
            time.sleep(0.2)
        p1 = polls(op)
        d = {k: p1[k] - p0[k] for k in p0}
        n = d["full"] + d["not_modified"] + d["error"]
        per = d["bytes"] / n if n else float("nan")
        log("idle %.0f s: %d node polls (%d not modified, %d full, %d failed), %.0f B received per poll, "
            "%d node writes" % (IDLE_S, n, d["not_modified"], d["full"], d["error"], per, d["writes"]))
        assert d["writes"] == 0, "slurmop wrote to Slurm while idle: %r" % d
        assert d["full"] == 0 and d["error"] == 0, "an idle node poll was not a 304: %r" % d
        assert d["not_modified"] >= IDLE_S / 2, "too few node polls while idle: %r" % d
        assert per < 1000, "an idle poll moved %.0f B (want < 1 KB)" % per
        assert seen == {dl}, "the job's deadline did not stay on slinky-1's pod while idle: %r" % seen
        log("ok 1-2: idle node polls all 304, %.0f B per poll; the deadline stayed" % per)

        # 3. a person's change is seen at once
        t = time.monotonic()
        lab.scontrol("update", "nodename=slinky-0", "state=drain", "reason=person: idle poll check")
        wait_for(lambda: "SlurmNodeStateDrain" in conds(pod(c, "slinky-0")), 10,
                 what="a person's drain on slinky-0's pod")
        took = time.monotonic() - t
        assert polls(op)["full"] > p1["full"], "the drain reached the pod without a full read?"
        log("ok 3: a person's drain reached the pod in %.2f s" % took)
        lab.scontrol("update", "nodename=slinky-0", "state=resume")

        # 4. the job's end reaches the pod too
        lab.scancel(job)
        wait_for(lambda: deadline(c, "slinky-1") is None, 15, what="the deadline gone with the job")
        log("ok 4: the cancelled job's deadline left slinky-1's pod")


def main():
    run_in_lab("test_slurm_idle_poll", NODES, scenario, lambda: api_server(nodes=2), extra_bins=("sbatch",))


if __name__ == "__main__":
    main()
