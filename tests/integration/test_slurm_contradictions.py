#!/usr/bin/env python3
"""Answers that contradict themselves are held, never taken as proof.

slurmop against kubesim and a real Slurm lab of SLURMLAB_VERSION (22.05 by
default; 26.05 through the version loop of tests/CMakeLists.txt), talking to
slurmrestd through tests/lib/faultproxy.py. A NodeSet of four pods
(slinky-0..3); slinky-0..2 are kept by their deletion cost, so a scale-in
4 -> 3 condemns slinky-3.

  duplicate  a job runs on slinky-3; every node read lists slinky-3 twice,
             first as Slurm has it (busy), then idle and drained with
             Slurm's reason and reason time, and every job read comes back
             with an empty list (a lying proxy). For HOLD_S seconds after the
             scale-in the pod must stay (before: deleted 0.10 s after the
             scale-in, issue 39 finding 4), slurmop must count the
             contradiction (slurmop_slurm_contradictions_total{kind=
             "duplicate"}) and say so in a DrainHeldSlurmContradiction
             Warning Event; once the proxy passes through and the job is
             cancelled, the pod goes.
  future     slinky-3 idle; one node table answer gives it a reason time an
             hour in the future; then the scale-in. The pod must go within
             FUTURE_BOUND_S seconds (before: kept for as long as the
             future time was ahead, issue 39 finding 12: the drain's proof
             compared Slurm's new reason time with the poisoned one), and
             the contradiction is counted (kind "future_time").

Exit 77 (skipped) without the Slurm binaries or root.
Environment: CONTRA_CASES=duplicate,future, HOLD_S (default 8),
SLURMOP_LOG=path (keep slurmop's log).
"""
# backends: kubesim
import copy
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from backend import api_server  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402
from slurmlab import VERSION, Lab, lab_cluster, skip_unless_runnable  # noqa: E402
from slurmop import apply_crds, set_replicas, wait_for  # noqa: E402
from test_slurm_nodeset import IMAGES, NODES, PREFIX, Op, annotate, flags, live_names, log, pod  # noqa: E402

VICTIM = "slinky-3"
HOLD_S = float(os.environ.get("HOLD_S", "8"))
FUTURE_BOUND_S = 10.0
CLUSTER = "default/slurm"


def events(c, reason):
    r = c.get("/apis/events.k8s.io/v1/namespaces/default/events")
    assert r.status == 200, r.text
    return [e for e in r.json().get("items") or [] if e.get("reason") == reason]


def gone(c, uid):
    p = pod(c, VICTIM)
    return p is None or p["metadata"]["uid"] != uid or bool(p["metadata"].get("deletionTimestamp"))


def set_reason_time(n, t):
    if isinstance(n.get("reason_changed_at"), dict):
        n["reason_changed_at"] = {"set": True, "infinite": False, "number": t}
    else:
        n["reason_changed_at"] = t


def idle_drained(n):
    """n as Slurm would show it idle and drained (same reason, same time)."""
    m = copy.deepcopy(n)
    if isinstance(m.get("state"), list):
        m["state"] = ["IDLE", "DRAIN"]
    else:
        m["state"] = "idle"
        m["state_flags"] = ["DRAIN"]
    for k in ("alloc_cpus", "alloc_memory"):
        if k in m:
            m[k] = 0
    return m


def twice(doc):
    nodes = doc.get("nodes") or []
    out = []
    for n in nodes:
        out.append(n)
        if n.get("name") == VICTIM:
            out.append(idle_drained(n))
    doc["nodes"] = out
    return doc


def future(doc):
    for n in doc.get("nodes") or []:
        if n.get("name") == VICTIM:
            set_reason_time(n, int(time.time()) + 3600)
    return doc


def back_to_four(c, lab):
    set_replicas(c, "slinky", 4)
    wait_for(lambda: live_names(c) == NODES, 60, what="4 pods again")
    wait_for(lambda: "DRAIN" not in flags(lab.node(VICTIM)), 60, what="%s undrained again" % VICTIM)


def case_duplicate(c, op, lab, fp):
    uid = pod(c, VICTIM)["metadata"]["uid"]
    job = lab.sbatch([VICTIM], 300)
    wait_for(lambda: lab.job_state(job)[0] == "RUNNING", 30, what="job %s running" % job)
    wait_for(lambda: (lab.node(VICTIM) or {}).get("state") in ("allocated", "mixed"), 10, what="victim busy")
    r1 = fp.add_rule("rewrite", kind="node_reads", fn=twice)
    r2 = fp.add_rule("empty", kind="jobs")
    t0 = time.monotonic()
    set_replicas(c, "slinky", 3)
    end = t0 + HOLD_S
    while time.monotonic() < end:
        assert not gone(c, uid), "duplicate: pod %s deleted %.2f s after the scale-in while its job runs" % (
            VICTIM, time.monotonic() - t0)
        time.sleep(0.1)
    doubled = fp.count(r1)
    assert doubled > 0 and fp.count(r2) > 0, fp.describe()
    n = op.metric("slurmop_slurm_contradictions_total", cluster=CLUSTER, kind="duplicate")
    assert n > 0, "no duplicate counted"
    evs = events(c, "DrainHeldSlurmContradiction")
    assert evs and "twice" in evs[0].get("note", ""), evs
    fp.clear_rules()
    lab.scancel(job)
    t1 = time.monotonic()
    wait_for(lambda: gone(c, uid), 30, what="the pod deleted once the proxy passes and the job ended")
    n3 = lab.node(VICTIM)
    assert "DRAIN" in flags(n3) and n3["reason"].startswith(PREFIX), n3
    log("ok duplicate: pod kept %.1f s through %d doubled answers (%d contradictions counted, Event: %s); "
        "deleted %.2f s after the job's cancel" % (t1 - t0, doubled, n, evs[0].get("note"),
                                                   time.monotonic() - t1))
    back_to_four(c, lab)


def case_future(c, op, lab, fp):
    uid = pod(c, VICTIM)["metadata"]["uid"]
    before = op.metric("slurmop_slurm_contradictions_total", cluster=CLUSTER, kind="future_time")
    r = fp.add_rule("rewrite", kind="nodes", fn=future, times=1)
    lab.scontrol("update", "nodename=slinky-0", "comment=poke")  # a table change: the next poll is a full read
    wait_for(lambda: fp.count(r) >= 1, 20, what="the future answer sent")
    time.sleep(0.5)
    fp.clear_rules()
    t0 = time.monotonic()
    set_replicas(c, "slinky", 3)
    wait_for(lambda: gone(c, uid), FUTURE_BOUND_S, what="idle victim deleted after one future reason time")
    took = time.monotonic() - t0
    n = op.metric("slurmop_slurm_contradictions_total", cluster=CLUSTER, kind="future_time") - before
    assert n > 0, "no future time counted"
    log("ok future: idle victim deleted %.2f s after the scale-in (bound %.0f s), %d future time(s) counted" %
        (took, FUTURE_BOUND_S, n))
    back_to_four(c, lab)


CASES = [("duplicate", case_duplicate), ("future", case_future)]


def main():
    skip_unless_runnable(("sbatch",))
    every = [n for n, _ in CASES]
    want = [x for x in os.environ.get("CONTRA_CASES", "").split(",") if x] or every
    if set(want) - set(every):
        raise SystemExit("unknown cases: %s" % ", ".join(sorted(set(want) - set(every))))
    if os.environ.get("SLURMOP_LOG"):
        open(os.environ["SLURMOP_LOG"], "w").close()
    tmp = tempfile.mkdtemp(prefix="test_slurm_contradictions.")
    os.chmod(tmp, 0o755)  # munged needs every directory above its socket searchable
    lab = Lab(tmp, NODES)
    failed = []
    try:
        lab.start()
        log("Slurm %s lab started: %s (REST %s)" % (VERSION, lab.url, lab.api))
        with FaultProxy(lab.url) as fp, api_server(nodes=4) as ks:
            c = ks.client()
            apply_crds(c)
            lab_cluster(c, lab, {"slinky": dict(replicas=4, **IMAGES)})
            with Op(ks.kubeconfig, **lab.slurmop_flags(fp.url)) as op:
                op.wait_ready()
                wait_for(lambda: live_names(c) == NODES, 30, what="4 pods")
                for n in NODES[:3]:
                    annotate(c, n, "nodeset.slinky.slurm.net/pod-deletion-cost", "100")
                wait_for(lambda: (lab.node(VICTIM) or {}).get("comment"), 30, what="pod info on the victim")
                for name, fn in CASES:
                    if name not in want:
                        continue
                    try:
                        fn(c, op, lab, fp)
                    except AssertionError as e:
                        log("FAIL %s: %s" % (name, e))
                        failed.append(name)
                        fp.clear_rules()
                        for j in (lab.run("squeue", "-h", "-o", "%i", check=False).stdout.split()):
                            lab.scancel(j)
                        try:
                            back_to_four(c, lab)
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
