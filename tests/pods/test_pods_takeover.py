#!/usr/bin/env python3
"""A Slurm cluster that Slinky's operator installed and runs, on real pods,
handed to slurmop with a job running: what docs/migrate-from-slinky.md tells
a user to do, done as the user would (helm and kubectl only).

1. cluster.sh start --kubelets 3; the Slurm 26.05 images of
   deploy/images/build.sh and an image of Slinky's manager (the binary
   tests/slinky/build.sh builds, packed by deploy/images/ocipack.py)
   imported into each Node.
2. Slinky's charts from its source archive: slurm-operator-crds, then
   slurm-operator (its webhook off: it needs cert-manager), then its slurm
   chart with this suite's values (values.json.in, no Accounting). Every
   Slurm pod Ready, 3 slurmd registered with their feature.
3. A batch job runs on one node. `helm uninstall slurm-operator`; Slinky's
   CRDs and the slurm release stay.
4. `helm install slurmop` (the operator chart only, from the image built
   here). Once it holds its Lease and has settled:
   - no pod re-created (every pod keeps its uid), the slurmctld
     StatefulSet kept (same uid and generation), slurm.conf and the
     Secrets' data unchanged;
   - the job still runs; each object slurmop adopted is logged.
5. Scale-in 3 -> 2: the idle nodes are the candidates, so the job's pod
   stays and its job runs on; scale-out 2 -> 3: a new pod registers idle.
   The job completes (COMPLETED).
6. `helm uninstall slurm` completes under slurmop and leaves nothing; then
   slurmop and Slinky's CRDs go.

Exit 77 when this machine cannot run real pods, or Slinky's manager or
source cannot be had here (tests/slinky/build.sh says why).
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "slinky"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
os.environ.setdefault("SLURMOP_PODS_SLURM", "26.05")

import test_pods as T  # noqa: E402

NS_SLINKY = "slinky"
SLINKY_IMAGE = "localhost/slinky/slurm-operator"
JOB_S = 150
log, check, measure, Fail = T.log, T.check, T.measure, T.Fail


def slinky():
    """tests/slinky/build.sh's answer for the default version: {SLINKY_BIN,
    SLINKY_DIR, SLINKY_VERSION}; skip (77) when it cannot be built here."""
    if os.environ.get("SLINKY_BIN") and os.environ.get("SLINKY_DIR"):
        return {"SLINKY_BIN": os.environ["SLINKY_BIN"], "SLINKY_DIR": os.environ["SLINKY_DIR"],
                "SLINKY_VERSION": os.environ.get("SLINKY_VERSION", "?")}
    version = os.environ.get("SLURMOP_SLINKY_VERSION", "v1.2.1")
    p = subprocess.run(["bash", os.path.join(T.SRC, "tests", "slinky", "build.sh"), "--version", version],
                       capture_output=True, text=True, timeout=1800)
    if p.returncode == 77:
        T.skip("Slinky %s cannot be built here: %s" % (version, p.stderr.strip()[-800:]))
    if p.returncode != 0:
        T.skip("Slinky's manager %s is not built: run `bash tests/slinky/build.sh --version %s`" % (version, version))
    env = {}
    for line in p.stdout.splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line[len("export "):].split("=", 1)
            env[k] = v
    for k in ("SLINKY_BIN", "SLINKY_DIR", "SLINKY_VERSION"):
        check(env.get(k), "tests/slinky/build.sh gave no %s:\n%s" % (k, p.stdout))
    return env


def slinky_chart(senv, name):
    """Slinky's chart NAME, copied out of its source with its siblings (the
    operator chart's CRD dependency is file://../slurm-operator-crds) and
    its dependencies built, as `helm dependency build` makes them for a
    user installing from a clone."""
    top = os.path.join(T.ENV["K8S_DIR"], "slinky-helm")
    if not os.path.isdir(top):
        shutil.copytree(os.path.join(senv["SLINKY_DIR"], "helm"), top)
    path = os.path.join(top, name)
    check(os.path.isfile(os.path.join(path, "Chart.yaml")), "Slinky's source has no chart %s" % path)
    with open(os.path.join(path, "Chart.yaml")) as f:
        if "dependencies:" in f.read() and not os.path.isdir(os.path.join(path, "charts")):
            T.helm("dependency", "build", "--skip-refresh", path)
    return path


def pack_manager(senv):
    """Slinky's manager as an image: the static binary alone, as its own
    image has it (tag: the version). Returns (ref, archive)."""
    tag = senv["SLINKY_VERSION"].lstrip("v")
    ref = "%s:%s" % (SLINKY_IMAGE, tag)
    stage = os.path.join(T.ENV["K8S_DIR"], "slinky-image")
    os.makedirs(os.path.join(stage, "tmp"), exist_ok=True)
    os.chmod(os.path.join(stage, "tmp"), 0o1777)
    with open(senv["SLINKY_BIN"], "rb") as src, open(os.path.join(stage, "manager"), "wb") as dst:
        dst.write(src.read())
    os.chmod(os.path.join(stage, "manager"), 0o755)
    out = os.path.join(T.ENV["K8S_DIR"], "slinky-manager.tar")
    spec = {"ref": ref, "user": "65532:65532", "entrypoint": ["/manager"], "cmd": [], "workdir": "/",
            "env": ["PATH=/"], "labels": {"org.opencontainers.image.source": "tests/pods/test_pods_takeover.py"}}
    T.run([sys.executable, os.path.join(T.SRC, "deploy", "images", "ocipack.py"), "--rootfs", stage, "--out", out,
           "--image", json.dumps(spec)], timeout=300)
    return ref, out


def values_file(images):
    """values.json.in for Slinky's slurm chart: the local images, 3 workers,
    no Accounting and no persistence (the move keeps whatever slurmctld has;
    tests/pods/day2.py covers both under slurmop)."""
    with open(os.path.join(HERE, "values.json.in")) as f:
        text = f.read()
    for n in ("slurmctld", "slurmd", "slurmrestd", "slurmdbd", "login"):
        v = T.slurm_image(images, n)
        text = text.replace("@%s_REPO@" % n.upper(), v["repository"]).replace("@%s_TAG@" % n.upper(), v["tag"])
    values = json.loads(text.replace("@REPLICAS@", str(T.KUBELETS)))
    values["accounting"]["enabled"] = False
    values["controller"]["persistence"] = {"enabled": False}
    path = os.path.join(T.ENV["K8S_DIR"], "slinky-values.json")
    with open(path, "w") as f:
        json.dump(values, f, indent=1)
    return path


def digest(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def snapshot():
    """What the move must not change: pod uids, the slurmctld StatefulSet,
    the ConfigMaps' and Secrets' data."""
    pods = {p["metadata"]["name"]: p["metadata"]["uid"] for p in T.slurm_pods()}
    sts = {s["metadata"]["name"]: (s["metadata"]["uid"], s["metadata"]["generation"])
           for s in T.jget("-n", T.NS, "get", "statefulsets")["items"]}
    data = {}
    for kind in ("configmaps", "secrets"):
        for o in T.jget("-n", T.NS, "get", kind)["items"]:
            if o["metadata"]["name"] == "kube-root-ca.crt" or o.get("type") == "kubernetes.io/service-account-token":
                continue
            data["%s/%s" % (kind, o["metadata"]["name"])] = digest(o.get("data") or {})
    return {"pods": pods, "sts": sts, "data": data}


def ctld_job_state(job):
    out = T.in_ctld("scontrol show job %s -o" % job, ok=False).stdout
    m = re.search(r"JobState=(\S+)", out)
    return m.group(1) if m else "GONE"


def install_slinky(senv, images):
    t0 = time.time()
    ref, archive = pack_manager(senv)
    images[ref] = archive
    T.import_images(images)
    T.helm("install", "slurm-operator-crds", slinky_chart(senv, "slurm-operator-crds"), "-n", NS_SLINKY,
           "--create-namespace", "--wait", "--timeout", "60s")
    repo, tag = ref.rsplit(":", 1)
    T.helm("install", "slurm-operator", slinky_chart(senv, "slurm-operator"), "-n", NS_SLINKY,
           "--set", "operator.image.repository=" + repo, "--set", "operator.image.tag=" + tag,
           "--set", "webhook.enabled=false", "--set", "certManager.enabled=false",
           "--wait", "--timeout", "120s")
    measure("slinky_operator_install_to_ready", time.time() - t0)
    t0 = time.time()
    T.helm("install", "slurm", slinky_chart(senv, "slurm"), "-n", T.NS, "--create-namespace",
           "-f", values_file(images), "--timeout", "120s")
    got = T.wait_for("all Slurm pods Ready under Slinky", lambda: T.all_slurm_ready(T.KUBELETS), 300, every=1)
    measure("slinky_cluster_install_to_all_slurm_pods_ready", time.time() - t0)
    log("Slurm pods Ready under Slinky %s: %s" % (senv["SLINKY_VERSION"], got))
    feature = T.nodeset_feature()
    nodes = T.wait_for("%d slurmd registered idle with feature %s" % (T.KUBELETS, feature),
                       lambda: T.registered(T.KUBELETS, feature), 180, every=1)
    measure("slinky_cluster_install_to_slurmd_registered", time.time() - t0)
    log("sinfo under Slinky: %s" % nodes)
    return feature


def take_over(images, before, job):
    """Slinky's operator out, slurmop in; returns slurmop's pod name."""
    t0 = time.time()
    T.helm("uninstall", "slurm-operator", "-n", NS_SLINKY, "--wait", "--timeout", "60s")
    left = T.kubectl("get", "validatingwebhookconfigurations,mutatingwebhookconfigurations", "-o", "name").stdout
    check("slurm-operator" not in left, "Slinky's uninstall left a webhook configuration: %s" % left)
    app = T.chart_app_version("slurmop")
    T.helm("install", "slurmop", T.chart_path("slurmop"), "-n", T.NS_OP, "--create-namespace",
           "--set", "image.repository=docker.io/library/slurmop", "--set", "image.tag=" + app,
           "--set", "leaderElection.enabled=true", "--wait", "--timeout", "120s")
    op = T.wait_for("slurmop's pod Ready", lambda: [p for p in T.pods(T.NS_OP) if T.ready(p)], 60)[0]
    pod = op["metadata"]["name"]
    measure("takeover_slinky_uninstall_to_slurmop_ready", time.time() - t0)

    # Settled: what slurmop adopts it adopts in its first passes; nothing may
    # move for 15 s after the last adoption mark appeared.
    def settled():
        marks = T.kubectl("-n", T.NS, "get", "statefulsets,deployments,configmaps,services", "-o",
                          "jsonpath={range .items[*]}{.metadata.annotations.slurmop\\.slinky\\.slurm\\.net/adopted}"
                          "{\"\\n\"}{end}").stdout.split()
        now = (len(marks), snapshot())
        settled.seen.append((time.time(), now))
        first = [t for t, s in settled.seen if s == now]
        return marks and time.time() - min(first) >= 15
    settled.seen = []
    T.wait_for("slurmop to adopt Slinky's objects and settle", settled, 180, every=2)
    measure("takeover_slurmop_ready_to_settled", time.time() - t0)
    after = snapshot()
    recreated = sorted(n for n, uid in before["pods"].items() if after["pods"].get(n) != uid)
    added = sorted(set(after["pods"]) - set(before["pods"]))
    log("after the takeover: pods re-created %s, added %s" % (recreated, added))
    check(not recreated and not added, "the takeover re-created pods %s and added %s" % (recreated, added))
    check(after["sts"] == before["sts"], "StatefulSets changed on the takeover: %s -> %s" % (before["sts"],
                                                                                         after["sts"]))
    changed = sorted(k for k, v in before["data"].items() if after["data"].get(k) != v)
    # The Token's JWT Secret is rewritten with a fresh token (documented);
    # this values file makes no Token, so nothing may change.
    check(not changed, "the takeover changed the data of %s" % changed)
    state = ctld_job_state(job)
    check(state == "RUNNING", "job %s is %s after the takeover, want RUNNING" % (job, state))
    adopted = [line for line in T.kubectl("-n", T.NS_OP, "logs", pod).stdout.splitlines() if "adopting" in line]
    log("slurmop adopted %d objects:\n  %s" % (len(adopted), "\n  ".join(adopted[:30])))
    check(any("StatefulSet" in line for line in adopted), "slurmop's log names no adopted StatefulSet")
    return pod


def scale_after(feature, job_node, job):
    ns_name = T.nodeset_name()
    t0 = time.time()
    T.kubectl("-n", T.NS, "scale", "nodeset.slinky.slurm.net", ns_name, "--replicas", str(T.KUBELETS - 1))
    T.wait_for("one worker pod gone after the scale-in", lambda: len(T.worker_pods()) == T.KUBELETS - 1, 90)
    measure("takeover_scale_in_to_pod_gone", time.time() - t0)
    left = [T.slurm_node_of(p) for p in T.worker_pods()]
    check(job_node in left, "the scale-in took %s, whose job %s runs (left: %s)" % (job_node, job, left))
    state = ctld_job_state(job)
    check(state == "RUNNING", "job %s is %s after the scale-in, want RUNNING" % (job, state))
    t0 = time.time()
    T.kubectl("-n", T.NS, "scale", "nodeset.slinky.slurm.net", ns_name, "--replicas", str(T.KUBELETS))
    T.wait_for("%d worker pods Ready after the scale-out" % T.KUBELETS,
               lambda: len([p for p in T.worker_pods() if T.ready(p)]) == T.KUBELETS, 120)
    # Registered: responding and taking work (no "*", no drain), with the
    # NodeSet's feature; the job's node is mixed or allocated.
    nodes = T.wait_for("the new node registered with feature %s" % feature, lambda: (lambda n: len(
        [x for x, (st, f) in n.items() if feature in f.split(",") and st in ("idle", "mixed", "allocated")]
    ) == T.KUBELETS and n)(T.slurm_nodes()), 120, every=1)
    measure("takeover_scale_out_to_registered", time.time() - t0)
    log("after scale-in and scale-out under slurmop: %s" % nodes)


def main():
    if os.geteuid() != 0:
        T.skip("real Nodes need root")
    senv = slinky()
    k8s_dir = T.tempfile.mkdtemp(prefix="slurmop-takeover.")
    T.ENV["K8S_DIR"] = k8s_dir
    started = False
    rc = 1
    try:
        images = T.build_images()
        started = True
        T.start_cluster(k8s_dir)
        feature = install_slinky(senv, images)

        # A job on the first worker's node, long enough to outlive the move.
        job_node = T.slurm_node_of(T.worker_pods()[0])
        job = T.in_login("sbatch --parsable -w %s -N1 --wrap 'sleep %d'" % (job_node, JOB_S)
                         ).stdout.strip().split(";")[0]
        T.wait_for("job %s running" % job, lambda: ctld_job_state(job) == "RUNNING", 60)
        t_job = time.time()
        before = snapshot()
        log("job %s runs on %s; %d pods, StatefulSets %s" % (job, job_node, len(before["pods"]), before["sts"]))

        op_pod = take_over(images, before, job)
        scale_after(feature, job_node, job)
        T.wait_for("job %s to end" % job, lambda: ctld_job_state(job) not in ("RUNNING", "COMPLETING"),
                   JOB_S + 120 - (time.time() - t_job), every=2)
        state = ctld_job_state(job)
        check(state == "COMPLETED", "job %s ended %s, want COMPLETED" % (job, state))
        log("job %s %s after %.0f s, through the move" % (job, state, time.time() - t_job))

        bad = T.operator_log_403(op_pod)
        check(not bad, "slurmop's log shows RBAC refusals:\n" + "\n".join(bad[:20]))
        T.uninstall_cluster()
        T.helm("uninstall", "slurmop", "-n", T.NS_OP, "--wait", "--timeout", "60s")
        T.helm("uninstall", "slurm-operator-crds", "-n", NS_SLINKY, "--wait", "--timeout", "60s")
        rc = 0
    except Fail as e:
        print("FAIL: %s" % e, flush=True)
        T.diagnose()
    except subprocess.TimeoutExpired as e:
        print("FAIL: timed out: %s" % e, flush=True)
        T.diagnose()
    finally:
        if started:
            t0 = time.time()
            p = T.run(["bash", os.path.join(T.K8S, "cluster.sh"), "stop", "--clean"], ok=False, timeout=300)
            measure("cluster_stop", time.time() - t0)
            if p.returncode != 0:
                print("FAIL: cluster.sh stop exited %d:\n%s" % (p.returncode, p.stderr[-4000:]), flush=True)
                rc = 1
    measure("test_wall_takeover", time.time() - T.T_START)
    return rc


if __name__ == "__main__":
    sys.exit(main())
