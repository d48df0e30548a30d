#!/usr/bin/env python3
"""A deleted NodeSet leaves slurm.conf only once slurmctld keeps no job record
of its partition (nss_jobrec_clear in reconcilers/nodeset_slurm.h).

slurmctld keeps an ended job's record MinJobAge seconds (300 by default; its
purge runs every 60 s), and a record naming a partition that slurm.conf no
longer has made slurmctld crash on the next reconfigure, and again at every
start (Slinky issue 138). slurmop against kubesim and the real Slurm lab
(SLURMLAB_VERSION, 22.05 by default) whose slurm.conf has MinJobAge=10 and a
partition "slinky" of slinky-0 and slinky-1, the NodeSet's own (its
spec.partition is enabled, so the partition is the NodeSet's name).

  1. a job in partition slinky runs and completes;
  2. the NodeSet is deleted: its pods are drained and deleted, but the
     NodeSet (its drain finalizer) stays while `scontrol show job` still
     shows the record (sampled every 0.2 s), with a WaitingForJobRecords
     Warning Event; before the fix it went with its pods;
  3. once slurmctld purged the record, the NodeSet goes within 10 s (the job
     list is read every 3 s, a vanished partition confirmed by a read 1 s
     later, the NodeSet looked at every second).
Exit 77 (skipped) without the Slurm binaries or root.
"""
# backends: kubesim
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from backend import api_server  # noqa: E402
from slurmlab import VERSION, Lab, lab_cluster, skip_unless_runnable  # noqa: E402
from slurmop import NS_API, apply_crds, wait_for  # noqa: E402
from test_slurm_nodeset import IMAGES, Op, all_names, live_names, log  # noqa: E402

NODES = ["slinky-0", "slinky-1"]
NS_PATH = NS_API + "/namespaces/default/nodesets/slinky"


def events(c, reason):
    r = c.get("/apis/events.k8s.io/v1/namespaces/default/events")
    assert r.status == 200, r.text
    return [e for e in r.json().get("items") or [] if e.get("reason") == reason]


def record(lab, job):
    return lab.job_state(job)[0]


def main():
    skip_unless_runnable(("sbatch",))
    if os.environ.get("SLURMOP_LOG"):
        open(os.environ["SLURMOP_LOG"], "w").close()
    tmp = tempfile.mkdtemp(prefix="test_slurm_jobrec.")
    os.chmod(tmp, 0o755)  # munged needs every directory above its socket searchable
    lab = Lab(tmp, NODES, extra_env={
        "SLURMLAB_EXTRA_CONF": "MinJobAge=10\nPartitionName=slinky Nodes=slinky-[0-1] State=UP MaxTime=INFINITE"})
    try:
        lab.start()
        log("Slurm %s lab started: %s (REST %s)" % (VERSION, lab.url, lab.api))
        with api_server(nodes=2) as ks:
            c = ks.client()
            apply_crds(c)
            lab_cluster(c, lab, {"slinky": dict(replicas=2, partition={"enabled": True}, **IMAGES)})
            with Op(ks.kubeconfig, **lab.slurmop_flags()) as op:
                op.wait_ready()
                wait_for(lambda: live_names(c) == NODES, 30, what="2 pods")
                wait_for(lambda: all((lab.node(n) or {}).get("state") == "idle" for n in NODES), 30,
                         what="2 idle nodes")
                p = lab.run("sbatch", "--parsable", "-p", "slinky", "-w", "slinky-1", "-N1", "-n1", "-D", "/tmp",
                            "-o", "/dev/null", "--wrap", "sleep 1")
                job = p.stdout.strip().split(";")[0]
                wait_for(lambda: record(lab, job) == "COMPLETED", 30, what="job %s completed" % job)
                ended = time.monotonic()
                log("ok 1: job %s in partition slinky completed" % job)
                r = c.delete(NS_PATH)
                assert r.status in (200, 202), r.text
                # Gone, not only terminating: until then the pods hold the
                # NodeSet anyway.
                wait_for(lambda: all_names(c) == [], 30, what="the pods gone")
                held = 0
                while record(lab, job) is not None:
                    assert c.get(NS_PATH).status == 200, \
                        "the NodeSet went %.1f s after the job ended, while slurmctld still keeps job %s's " \
                        "record in its partition" % (time.monotonic() - ended, job)
                    held += 1
                    time.sleep(0.2)
                    assert time.monotonic() - ended < 120, "slurmctld kept the record for 120 s (MinJobAge=10)"
                purged = time.monotonic()
                assert held > 0, "the record was purged before the pods went: nothing was checked"
                assert events(c, "WaitingForJobRecords"), "no WaitingForJobRecords Event"
                log("ok 2: the NodeSet stayed %.1f s (%d samples) while job %s's record was kept" % (
                    purged - ended, held, job))
                wait_for(lambda: c.get(NS_PATH).status == 404, 10, what="the NodeSet gone once the record was purged")
                log("ok 3: the NodeSet went %.2f s after the record was purged" % (time.monotonic() - purged))
    finally:
        lab.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
