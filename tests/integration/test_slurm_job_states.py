#!/usr/bin/env python3
"""A drained node is free only when no job of any state holds it.

slurmop against kubesim (or a real control plane, tests/lib/backend.py) and a
real Slurm lab of SLURMLAB_VERSION (22.05 by default; 24.11, 26.05 through
the version loop of tests/CMakeLists.txt). A NodeSet of four pods
(slinky-0..3, static slurmd nodes of the lab matched by name); slinky-0..2
are kept by their deletion cost, so a scale-in 4 -> 3 condemns slinky-3.

Per case, a job is put on slinky-3 in a state that holds the node, the
NodeSet is scaled in, and for HOLD_S seconds (sampled every 0.1 s) the pod of
slinky-3 must stay, while Slurm shows the node drained by slurmop; then the
job is let go and the pod must go within 20 s; then back to 4 replicas.

  suspended    sbatch, then `scontrol suspend`: the node reads IDLE (+DRAIN)
               on 22.05 and 26.05 alike while the job's processes sit
               stopped there. Before the job reads, slurmop deleted the pod
               about 0.1 s after the scale-in (issue 39, finding 1).
  salloc       an allocation with no step (`salloc --no-shell`).
  stopped      `scancel --signal=STOP`: the job's processes stopped.
  completing   the job ends while its epilog runs (the lab's Epilog sleeps
               while a flag file exists): Slurm shows it COMPLETING.
  requeuehold  `scontrol requeuehold` of a running job: it is killed (its
               epilog runs, COMPLETING), then waits held with no node. The
               pod stays while Slurm still ties the job to the node, and may
               go once the job is pending with no node (it holds nothing there
               then; the check is that it goes, the job still held).

Exit 77 (skipped) without the Slurm binaries or root.
Environment: JOB_CASES=name,name (a subset, in the order above), HOLD_S
(default 6), SLURMOP_LOG=path (keep slurmop's log).
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
from slurmop import apply_crds, set_replicas, wait_for  # noqa: E402
from test_slurm_nodeset import IMAGES, NODES, PREFIX, Op, annotate, flags, live_names, log, pod  # noqa: E402

VICTIM = "slinky-3"
HOLD_S = float(os.environ.get("HOLD_S", "6"))


def gone(c, uid):
    p = pod(c, VICTIM)
    return p is None or p["metadata"]["uid"] != uid or bool(p["metadata"].get("deletionTimestamp"))


def node_state(lab):
    n = lab.node(VICTIM) or {}
    return n.get("state"), flags(n)


def ours_drained(lab):
    n = lab.node(VICTIM) or {}
    return "DRAIN" in flags(n) and (n.get("reason") or "").startswith(PREFIX)


def squeue_jobs(lab):
    p = lab.run("squeue", "-h", "-o", "%i", "-w", VICTIM, check=False)
    return [j for j in p.stdout.split() if j]


class Case:
    """start(lab) -> job id; holds(lab, job) -> what Slurm shows while the
    job holds the node (a true string) or ""; release(lab, job)."""

    slow_epilog = False

    def holds(self, lab, job):
        state, _, nodes = lab.job_state(job)
        if state is None:
            return ""
        if state in ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "PREEMPTED", "NODE_FAIL") and \
                "COMPLETING" not in node_state(lab)[1]:
            return ""
        if state == "PENDING" and nodes in (None, "", "(null)"):
            return ""
        return "%s on %s (node %s)" % (state, nodes, "+".join([node_state(lab)[0] or "?"] +
                                                              sorted(node_state(lab)[1])))

    def release(self, lab, job):
        lab.scancel(job)


class Suspended(Case):
    name = "suspended"

    def start(self, lab):
        job = lab.sbatch([VICTIM], 300)
        wait_for(lambda: lab.job_state(job)[0] == "RUNNING", 30, what="job %s running" % job)
        lab.scontrol("suspend", job)
        wait_for(lambda: lab.job_state(job)[0] == "SUSPENDED", 10, what="job %s suspended" % job)
        # The point of the case: the node's own state shows no job.
        wait_for(lambda: node_state(lab)[0] == "idle", 10, what="%s reads idle with the job suspended" % VICTIM)
        return job

    def release(self, lab, job):
        lab.scontrol("resume", job, check=False)
        lab.scancel(job)


class Salloc(Case):
    name = "salloc"

    def start(self, lab):
        p = lab.run("salloc", "--no-shell", "-w", VICTIM, "-N1", "-n1", "-t", "10", check=True, timeout=30)
        out = p.stdout + p.stderr
        job = [w for w in out.replace(".", " ").split() if w.isdigit()]
        assert job, out
        job = job[-1]
        wait_for(lambda: lab.job_state(job)[0] == "RUNNING", 30, what="allocation %s running" % job)
        return job


class Stopped(Case):
    name = "stopped"

    def start(self, lab):
        job = lab.sbatch([VICTIM], 300)
        wait_for(lambda: lab.job_state(job)[0] == "RUNNING", 30, what="job %s running" % job)
        lab.run("scancel", "--signal=STOP", job)
        time.sleep(0.5)
        return job

    def release(self, lab, job):
        lab.run("scancel", "--signal=CONT", job, check=False)
        lab.scancel(job)


class Completing(Case):
    name = "completing"
    slow_epilog = True

    def start(self, lab):
        job = lab.sbatch([VICTIM], 3)
        wait_for(lambda: lab.job_state(job)[0] == "RUNNING", 30, what="job %s running" % job)
        return job

    def holds(self, lab, job):
        # Running, then completing for as long as the epilog sleeps.
        return Case.holds(self, lab, job) or ("COMPLETING" in node_state(lab)[1] and "node COMPLETING")

    def release(self, lab, job):
        lab.epilog_off()


class RequeueHold(Case):
    name = "requeuehold"
    slow_epilog = True

    def start(self, lab):
        job = lab.sbatch([VICTIM], 300)
        wait_for(lambda: lab.job_state(job)[0] == "RUNNING", 30, what="job %s running" % job)
        return job

    def requeue(self, lab, job):
        lab.scontrol("requeuehold", job)

    def release(self, lab, job):
        lab.epilog_off()


CASES = [Suspended(), Salloc(), Stopped(), Completing(), RequeueHold()]


def run_case(c, op, lab, case):
    p = pod(c, VICTIM)
    uid = p["metadata"]["uid"]
    if case.slow_epilog:
        lab.epilog_on()
    job = case.start(lab)
    what = case.holds(lab, job)
    assert what, "%s: the job does not hold %s before the scale-in" % (case.name, VICTIM)
    t0 = time.monotonic()
    set_replicas(c, "slinky", 3)
    if isinstance(case, RequeueHold):
        wait_for(lambda: ours_drained(lab), 10, what="%s drained by slurmop" % VICTIM)
        case.requeue(lab, job)
    drained_at = None
    end = time.monotonic() + HOLD_S
    held = 0
    while time.monotonic() < end or (case.slow_epilog and case.holds(lab, job) and time.monotonic() < end + 10):
        what = case.holds(lab, job)
        if gone(c, uid):
            assert not what, "%s: pod %s deleted %.2f s after the scale-in while Slurm shows %s" % (
                case.name, VICTIM, time.monotonic() - t0, what)
            break
        if drained_at is None and ours_drained(lab):
            drained_at = time.monotonic() - t0
        held += bool(what)
        time.sleep(0.1)
    assert held > 0, "%s: the job never held the node during the scale-in" % case.name
    assert drained_at is not None or gone(c, uid), "%s: %s never drained by slurmop" % (case.name, VICTIM)
    case.release(lab, job)
    t1 = time.monotonic()
    wait_for(lambda: gone(c, uid), 30, what="%s: pod %s deleted once the job let go" % (case.name, VICTIM))
    log("ok %s: pod kept %.1f s while Slurm showed the job (%d samples), drained after %.2f s; deleted %.2f s "
        "after the job let go" % (case.name, t1 - t0, held, drained_at or -1, time.monotonic() - t1))
    for j in squeue_jobs(lab) + [job]:
        lab.scontrol("resume", j, check=False)
        lab.scancel(j)
    lab.epilog_off()
    # Back to four: the pod comes again and slurmop undrains its drain.
    set_replicas(c, "slinky", 4)
    wait_for(lambda: live_names(c) == NODES, 60, what="4 pods again")
    wait_for(lambda: not squeue_jobs(lab) and "DRAIN" not in flags(lab.node(VICTIM)) and
             node_state(lab)[0] == "idle", 60, what="%s idle and undrained again" % VICTIM)


def main():
    skip_unless_runnable(("sbatch", "salloc"))
    every = [cs.name for cs in CASES]
    want = [x for x in os.environ.get("JOB_CASES", "").split(",") if x] or every
    if set(want) - set(every):
        raise SystemExit("unknown cases: %s (have %s)" % (", ".join(sorted(set(want) - set(every))),
                                                          ", ".join(every)))
    if os.environ.get("SLURMOP_LOG"):
        open(os.environ["SLURMOP_LOG"], "w").close()
    tmp = tempfile.mkdtemp(prefix="test_slurm_job_states.")
    os.chmod(tmp, 0o755)  # munged needs every directory above its socket searchable
    labdir = os.path.join(tmp, "lab")
    flag = os.path.join(labdir, "slow-epilog")
    epilog = os.path.join(labdir, "epilog.sh")
    # The lab's folder is seen at its own path inside the newer versions'
    # root file system, so slurmd finds the epilog there too.
    lab = Lab(tmp, NODES, extra_env={"SLURMLAB_EXTRA_CONF": "Epilog=%s" % epilog})
    lab.epilog_on = lambda: open(flag, "w").close()
    lab.epilog_off = lambda: os.path.exists(flag) and os.unlink(flag)
    failed = []
    try:
        lab.start()
        with open(epilog, "w") as f:
            f.write("#!/bin/sh\n# slows a job's end while %s exists\nn=0\n"
                    "while [ -e %s ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n+1)); done\nexit 0\n" % (flag, flag))
        os.chmod(epilog, 0o755)
        log("Slurm %s lab started: %s (REST %s)" % (VERSION, lab.url, lab.api))
        with api_server(nodes=4) as ks:
            c = ks.client()
            apply_crds(c)
            lab_cluster(c, lab, {"slinky": dict(replicas=4, **IMAGES)})
            with Op(ks.kubeconfig, **lab.slurmop_flags()) as op:
                op.wait_ready()
                wait_for(lambda: live_names(c) == NODES, 30, what="4 pods")
                for n in NODES[:3]:
                    annotate(c, n, "nodeset.slinky.slurm.net/pod-deletion-cost", "100")
                wait_for(lambda: all(node_state(lab)[0] == "idle" for _ in [0]), 30, what="%s idle" % VICTIM)
                for case in CASES:
                    if case.name not in want:
                        continue
                    try:
                        run_case(c, op, lab, case)
                    except AssertionError as e:
                        log("FAIL %s: %s" % (case.name, e))
                        failed.append(case.name)
                        lab.epilog_off()
                        for j in squeue_jobs(lab):
                            lab.scontrol("resume", j, check=False)
                            lab.scancel(j)
                        set_replicas(c, "slinky", 4)
                        try:
                            wait_for(lambda: live_names(c) == NODES, 60, what="4 pods again")
                        except AssertionError:
                            break
    finally:
        lab.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if failed:
        print("FAIL: %s" % ", ".join(failed))
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
