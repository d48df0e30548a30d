"""slinky_takeover: a cluster made by Slinky's slurm-operator, handed to
slurmop with nothing restarted, and handed back.

One real control plane (tests/k8s/cluster.sh) with KWOK Nodes, Slinky's
CRDs, and the custom resources of the parity test (tests/slinky/
test_slinky_parity.py: a Controller with accounting and persistence, three
NodeSets in StatefulSet and DaemonSet mode, a LoginSet, a RestApi, an
Accounting, a Token; not its neighbour namespace, since Slinky 1.1.1 and
later refuse references across namespaces):

  1. Slinky's manager (tests/slinky/build.sh) makes every object and is
     stopped (as `helm uninstall slurm-operator` would).
  2. slurmop starts. Once what it wrote has settled:
     - no pod was re-created or deleted (every pod keeps its uid);
     - no StatefulSet or Deployment was replaced (same uid), no StatefulSet
       had its spec written (same generation; a Deployment's moves with its
       annotations, its spec is compared): the slurmctld StatefulSet keeps
       its serviceName and its pod;
     - the ConfigMaps and Secrets Slinky made keep their data (slurm.conf,
       slurmdbd.conf, SSH host keys), the Services their spec;
     - each object slurmop changed is printed with the paths it changed, and
       only the adoption marks (its managed-by label and the
       slurmop.slinky.slurm.net/adopted hash) are allowed.
  3. The NodeSet cpu scales out (2 -> 3: one new pod, the old ones kept;
     it stays Pending, as nothing provisions its claim here)
     and in (3 -> 1, with delete-without-drain since no Slurm runs here:
     the pods with the highest ordinals go, cpu-0 stays).
     Then the LoginSet changes (replicas 2): its Deployment converges to
     slurmop's and loses the adoption mark.
  4. The way back: slurmop stops, Slinky's manager starts again; what it
     re-creates is printed, and the cluster must converge under it (the
     NodeSet's pods match its replicas, the slurmctld StatefulSet exists
     and has a pod).

Skipped (77) when Go is missing, the control plane, Slinky's manager or
slurmop is not built. SLINKY_BIN / SLINKY_DIR override build.sh's answer;
SLINKY_TAKEOVER_DUMP=FILE writes Slinky's objects and the custom resources
there; TAKEOVER_LOG_LEVEL sets slurmop's (default info). A failure keeps
slurmop's whole log and prints its path.
"""

import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)

import backend  # noqa: E402
import test_slinky_parity as P  # noqa: E402
from slurmop import Slurmop, slurmop_binary  # noqa: E402

NS = "takeover"
ADOPTED = "slurmop.slinky.slurm.net/adopted"
MANAGED = "app.kubernetes.io/managed-by"
WORKLOADS = ("StatefulSet", "Deployment", "DaemonSet")
ADOPTS = ("ConfigMap", "Secret", "Service", "StatefulSet", "Deployment", "PodDisruptionBudget")
# What slurmop may change on an object Slinky made: its adoption marks.
ALLOWED = ("/labels/app.kubernetes.io~1managed-by", "/annotations/slurmop.slinky.slurm.net~1adopted")


def log(msg):
    print("[%6.1f] %s" % (time.monotonic() - T0, msg), flush=True)


T0 = time.monotonic()


def env_slinky():
    if os.environ.get("SLINKY_BIN") and os.environ.get("SLINKY_DIR"):
        return {"SLINKY_BIN": os.environ["SLINKY_BIN"], "SLINKY_DIR": os.environ["SLINKY_DIR"],
                "SLINKY_VERSION": os.environ.get("SLINKY_VERSION", "?")}
    return P.slinky_env()


# The parity test's inputs without its neighbour namespace: Slinky 1.1.1
# and later refuse a reference into another namespace (their LoginSet looks
# for its Controller in its own), and the takeover is not about that.
_ALL_INPUTS = P.inputs
P.inputs = lambda: [o for o in _ALL_INPUTS() if not o.get("_xns")]
WANT_FIRST = [w for w in P.WANT_FIRST if not w[1].endswith("+xns")]
WANT = [w for w in P.WANT if not w[1].endswith("+xns")]


def run_side(cl, ns):
    """As the parity test's run_side: the RestApi once the NodeSets' pods exist."""
    P.apply_inputs(cl, ns, restapi=False)
    P.settle(cl, ns, WANT_FIRST)
    P.apply_inputs(cl, ns, restapi=True)
    return P.settle(cl, ns, WANT)


def pods(c, ns):
    """name -> (uid, deleting) of every pod of ns and ns-xns (the xns ones as name+xns)."""
    out = {}
    for space, suffix in ((ns, ""), (ns + P.XNS, "+xns")):
        for p in c.get("/api/v1/namespaces/%s/pods" % space).json().get("items") or []:
            m = p["metadata"]
            out[m["name"] + suffix] = (m["uid"], bool(m.get("deletionTimestamp")))
    return out


def workloads(c, ns):
    out = {}
    for space, suffix in ((ns, ""), (ns + P.XNS, "+xns")):
        for plural, kind in (("statefulsets", "StatefulSet"), ("deployments", "Deployment"),
                             ("daemonsets", "DaemonSet")):
            r = c.get("/apis/apps/v1/namespaces/%s/%s" % (space, plural))
            for o in r.json().get("items") or []:
                m = o["metadata"]
                out[(kind, m["name"] + suffix)] = (m["uid"], m.get("generation"), o["spec"].get("serviceName"))
    return out


def wait(what, fn, timeout=90):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(0.3)


def changes(before, after, ns):
    """[(kind, name, path, old, new)] between two collect_side() results."""
    out = []
    for key in sorted(set(before) | set(after)):
        kind, name = key
        if key not in after:
            out.append((kind, name, "<object>", "present", "gone"))
            continue
        if key not in before:
            out.append((kind, name, "<object>", "absent", "made by slurmop"))
            continue
        a, b = P.normalize(before[key], ns), P.normalize(after[key], ns)
        if before[key]["metadata"]["uid"] != after[key]["metadata"]["uid"]:
            out.append((kind, name, "<uid>", "replaced", ""))
        for path, x, y in P.diff(a, b):
            out.append((kind, name, path, x, y))
    return out


def main():
    if not os.access(slurmop_binary(), os.X_OK):
        P.skip("slurmop is not built")
    senv = env_slinky()
    theirs = P.check_crds(senv["SLINKY_DIR"])
    cl = backend.k8s_cluster(crds=False)
    cl.cluster_sh("nodes", "4")
    work = tempfile.mkdtemp(prefix="slinky-takeover-")
    cl.kubectl("apply", "--server-side", *sum((["-f", f] for f in theirs), []))
    with open(os.path.join(work, "sm-crd.json"), "w") as f:
        json.dump(P.SM_CRD, f)
    cl.kubectl("apply", "--server-side", "-f", os.path.join(work, "sm-crd.json"))
    cl.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    for ns in (NS, NS + P.XNS):
        cl.kubectl("create", "namespace", ns)
    slinky_kc = P.slinky_rbac(cl, senv["SLINKY_DIR"], work)
    c = cl.client()
    failures = []

    # 1. Slinky makes the cluster.
    sl = P.SlinkyManager(senv["SLINKY_BIN"], slinky_kc, work).start()
    try:
        run_side(cl, NS)
    except AssertionError:
        print("---- Slinky's manager (tail) ----\n" + sl.text()[-8000:], file=sys.stderr)
        raise
    finally:
        rc = sl.stop()
    before = P.collect_side(c, NS)
    dump = os.environ.get("SLINKY_TAKEOVER_DUMP")
    if dump:
        with open(dump, "w") as f:
            crs = {k: c.get("/apis/%s/v1beta1/namespaces/%s/%s" % (P.GROUP, NS, k)).json()["items"]
                   for k in ("nodesets", "controllers", "loginsets")}
            json.dump({"objects": {"%s/%s" % k: v for k, v in before.items()}, "crs": crs}, f, indent=1)
    pods0, wl0 = pods(c, NS), workloads(c, NS)
    log("Slinky %s made %d objects, %d pods (manager exit %s)" % (senv["SLINKY_VERSION"], len(before), len(pods0),
                                                                  rc))

    # 2. slurmop takes over.
    t0 = time.monotonic()
    op = Slurmop(cl.operator_kubeconfig, namespace=[NS, NS + P.XNS], leader_elect_namespace=backend.OPERATOR_NS,
                 token_users="*,slurm", allow_node_taints=True,
                 log_level=os.environ.get("TAKEOVER_LOG_LEVEL", "info"))
    op._cluster = cl
    op.start()
    try:
        op.wait_ready()
        after = P.settle(cl, NS, WANT, quiet=5.0, timeout=120)
        took = time.monotonic() - t0
        pods1, wl1 = pods(c, NS), workloads(c, NS)
        found = changes(before, after, NS)
        log("slurmop settled %.1f s after its start; %d change(s) to Slinky's objects:" % (took, len(found)))
        for kind, name, path, x, y in found:
            ok = path in ALLOWED or (path == "<object>" and x == "absent")
            print("  %s %s/%s %s%s" % ("ok  " if ok else "FAIL", kind, name, path,
                                       "" if ok else ": %s -> %s" % (json.dumps(x)[:300], json.dumps(y)[:300])))
            if not ok:
                failures.append("%s/%s %s changed on takeover: %s -> %s" % (kind, name, path, json.dumps(x)[:500],
                                                                             json.dumps(y)[:500]))
        recreated = [n for n in pods0 if n not in pods1 or pods1[n][0] != pods0[n][0] or pods1[n][1]]
        new = sorted(set(pods1) - set(pods0))
        log("pods: %d before, %d re-created or deleting %s, %d new %s" % (len(pods0), len(recreated), recreated,
                                                                         len(new), new))
        if recreated or new:
            failures.append("pods re-created, deleted or added on takeover: %s %s" % (recreated, new))
        for key, (uid, gen, svc) in sorted(wl0.items()):
            got = wl1.get(key)
            if got is None or got[0] != uid:
                failures.append("%s/%s was replaced on takeover" % key)
            elif got[1] != gen and key[0] != "Deployment":
                failures.append("%s/%s: its spec was written (generation %s -> %s)" % (key + (gen, got[1])))
            elif got[1] != gen:
                # A Deployment's generation also moves when its annotations
                # change (the API server's rule, from the old rollback
                # annotation): slurmop's adoption mark does that, with spec
                # and template equal (compared above) and no pod made.
                log("%s/%s: generation %s -> %s after a metadata-only write (spec compared equal above)"
                    % (key + (gen, got[1])))
        sts = wl1.get(("StatefulSet", "slurm-controller"))
        log("slurmctld StatefulSet: uid %s, serviceName %s (Slinky's: %s)" % (
            "kept" if sts and sts[0] == wl0[("StatefulSet", "slurm-controller")][0] else "CHANGED",
            sts and sts[2], wl0[("StatefulSet", "slurm-controller")][2]))
        # What slurmop writes through objsync carries its label once adopted
        # (pods, claims and revisions are the NodeSet's own business; the
        # LoginSet's host keys are read, never written).
        for key in sorted(after):
            m = after[key]["metadata"]
            if key in before and key[0] in ADOPTS and (m.get("labels") or {}).get(MANAGED) != "slurmop" \
                    and not key[1].endswith("-ssh-host-keys"):
                failures.append("%s/%s: not adopted (no managed-by label)" % key)
        for line in op.stderr().splitlines():
            if "objsync:" in line and ("adopt" in line or "converging" in line):
                print("  slurmop: " + line.split("] ", 1)[-1])

        # 3. Scale-out and scale-in of the NodeSet cpu.
        nsp = "/apis/%s/v1beta1/namespaces/%s/nodesets/cpu" % (P.GROUP, NS)
        r = c.patch(nsp, {"spec": {"replicas": 3}})
        assert r.status == 200, r.text
        t1 = time.monotonic()
        # Created, not Running: its claim (the NodeSet's volumeClaimTemplate)
        # has no provisioner here.
        wait("cpu-2 created", lambda: "cpu-2" in pods(c, NS))
        p2 = pods(c, NS)
        log("scale-out 2 -> 3: cpu-2 created in %.1f s" % (time.monotonic() - t1))
        for n in ("cpu-0", "cpu-1"):
            if p2.get(n, (None,))[0] != pods0[n][0]:
                failures.append("scale-out re-created %s" % n)
        r = c.patch(nsp, {"metadata": {"annotations": {"nodeset.slinky.slurm.net/delete-without-drain": "true"}},
                          "spec": {"replicas": 1}})
        assert r.status == 200, r.text
        t1 = time.monotonic()
        wait("cpu-1 and cpu-2 gone", lambda: not {"cpu-1", "cpu-2"} & set(pods(c, NS)))
        p3 = pods(c, NS)
        log("scale-in 3 -> 1: cpu-1, cpu-2 gone in %.1f s; cpu-0 %s" % (
            time.monotonic() - t1, "kept" if p3.get("cpu-0", (None,))[0] == pods0["cpu-0"][0] else "RE-CREATED"))
        if p3.get("cpu-0", (None,))[0] != pods0["cpu-0"][0]:
            failures.append("scale-in re-created cpu-0")
        others = {n: v for n, v in pods0.items() if not n.startswith("cpu-")}
        moved = [n for n, v in others.items() if p3.get(n, (None,))[0] != v[0]]
        if moved:
            failures.append("scaling cpu re-created other pods: %s" % moved)
        # A change to a custom resource ends the adoption of what it makes:
        # the login Deployment converges to slurmop's (its pod rolls, as
        # under Slinky for a change of the LoginSet).
        r = c.patch("/apis/%s/v1beta1/namespaces/%s/loginsets/login" % (P.GROUP, NS), {"spec": {"replicas": 2}})
        assert r.status == 200, r.text

        def login_converged():
            d = c.get("/apis/apps/v1/namespaces/%s/deployments/login" % NS).json()
            return d["spec"].get("replicas") == 2 and ADOPTED not in (d["metadata"].get("annotations") or {})
        wait("the login Deployment converging after a LoginSet change", login_converged)
        log("LoginSet login changed (replicas 2): its Deployment converged, adoption mark removed")
    except AssertionError:
        print("---- slurmop (tail) ----\n" + op.stderr()[-8000:], file=sys.stderr)
        with open(os.path.join(work, "slurmop.log"), "w") as f:
            f.write(op.stderr())
        print("slurmop log: " + os.path.join(work, "slurmop.log"), file=sys.stderr)
        raise
    finally:
        op.stop()
    if "adopting" not in op.stderr():
        failures.append("slurmop never said it adopted an object")

    # 4. The way back: Slinky's manager again.
    mid = P.collect_side(c, NS)
    podsm, wlm = pods(c, NS), workloads(c, NS)
    sl = P.SlinkyManager(senv["SLINKY_BIN"], slinky_kc, work).start()
    t1 = time.monotonic()
    try:
        back = P.settle(cl, NS, [w for w in WANT if w != ("Pod", "cpu-1")], quiet=5.0, timeout=120)

        def converged():
            ps = [p for p in c.get("/api/v1/namespaces/%s/pods" % NS,
                                   labelSelector="app.kubernetes.io/instance=cpu").json()["items"]
                  if not p["metadata"].get("deletionTimestamp")]
            ctl = [p for p in c.get("/api/v1/namespaces/%s/pods" % NS).json()["items"]
                   if p["metadata"]["name"] == "slurm-controller-0"]
            return len(ps) == 1 and ctl
        wait("Slinky converging the cluster again", converged)
    except AssertionError:
        print("---- Slinky's manager (tail) ----\n" + sl.text()[-8000:], file=sys.stderr)
        raise
    finally:
        sl.stop()
    podsb, wlb = pods(c, NS), workloads(c, NS)
    again = [n for n in podsm if n not in podsb or podsb[n][0] != podsm[n][0]]
    replaced = [k for k in wlm if k not in wlb or wlb[k][0] != wlm[k][0]]
    respec = [k for k in wlm if k in wlb and wlb[k][0] == wlm[k][0] and wlb[k][1] != wlm[k][1]]
    log("way back: Slinky settled in %.1f s; pods re-created %s; workloads replaced %s; specs rewritten %s" % (
        time.monotonic() - t1, sorted(again), sorted("%s/%s" % k for k in replaced),
        sorted("%s/%s" % k for k in respec)))
    for kind, name, path, x, y in changes(mid, back, NS):
        print("  way back: %s/%s %s" % (kind, name, path))
    c.close()
    log("run time %.1f s" % (time.monotonic() - T0))
    if failures:
        print("\n%d failure(s):" % len(failures), file=sys.stderr)
        for f in failures:
            print("- " + f, file=sys.stderr)
        return 1
    print("ok: Slinky's cluster taken over with 0 pods re-created, 0 workloads replaced or rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
