#!/usr/bin/env python3
"""The user's path on real pods: slurmop and a Slurm cluster installed by their
helm charts on real Nodes (tests/k8s/nodes.sh: kubelet + containerd + runc),
from images built on this machine (deploy/images/build.sh), for one Slurm
version (SLURMOP_PODS_SLURM: 26.05 or 24.11).

1. cluster.sh start --kubelets 3 (a real control plane and 3 real Nodes);
   the images imported into each Node's containerd.
   With SLURMOP_PODS_RELEASE=1, deploy/release.sh makes a release first
   (its SHA256SUMS checked), and its packaged charts and operator image are
   what steps 2, 3 and 7 install, with no image values for the operator.
2. helm install the CRD chart and the operator chart: the operator runs
   in-cluster from its image with the chart's ServiceAccount and RBAC and
   leader election on; it takes the Lease, its /metrics answers from the
   pod, and its log never shows a 403 (checked again at the end).
3. helm install the cluster chart (values.json.in, images pointed at the
   local ones, this machine's cgroup-v1 settings): slurmctld, slurmrestd,
   the LoginSet and 3 slurmd pods Ready, the slurmd pods on 3 Nodes, each
   Slurm node registered with its NodeSet's feature; StateSaveLocation not
   world-writable.
4. From the login pod (kubectl exec): sinfo; srun across the 3 Nodes.
5. Scale-in while a job runs on the victim: the pod stays until the job
   ends, then goes; the Slurm node record goes with it.
6. A slurmd pod deleted: its replacement is Ready and registered within
   seconds.
7. helm uninstall of the cluster chart completes and leaves no pod, custom
   resource or Slurm object behind; then the operator's charts go too;
   cluster.sh stop leaves nothing running, mounted or in iptables.

Measurements go to stdout as "measure: NAME VALUE".

Exit 77 when this machine cannot run real pods (not root, Go missing, no
deploy/images/build.sh yet); fails otherwise.
"""
import calendar
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import day2

SRC = os.environ.get("OP_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
K8S = os.path.join(SRC, "tests", "k8s")
HERE = os.path.dirname(os.path.abspath(__file__))
VERSION = os.environ.get("SLURMOP_PODS_SLURM", "26.05")
KUBELETS = 3
# SLURMOP_PODS_RELEASE=1 (ctest sets it for 26.05): the operator, its CRDs and
# the cluster are installed from what `deploy/release.sh` makes (packaged
# charts, the operator image's OCI archive, checked against SHA256SUMS), as
# a platform team would install a release; otherwise from deploy/helm/.
FROM_RELEASE = os.environ.get("SLURMOP_PODS_RELEASE") == "1"
RELEASE = {}  # chart name -> packaged chart (.tgz), "oci" -> the image archive, "version"
NS_OP = "slurmop"
NS = "slurm"
T_START = time.time()


def log(msg):
    print("[%6.1f s] %s" % (time.time() - T_START, msg), flush=True)


def skip(why):
    print("SKIP: " + why, flush=True)
    sys.exit(77)


class Fail(Exception):
    pass


def check(cond, why):
    if not cond:
        raise Fail(why)


def measure(name, value, unit="s"):
    print("measure: %s %.1f %s" % (name, value, unit), flush=True)


ENV = dict(os.environ)

# Defects of issue 32 that real pods show and whose fix is not on main yet:
# the test reports them ("KNOWN DEFECT") and goes on. The commit that fixes
# one removes it here, so the test fails before the fix and passes after.
# SLURMOP_PODS_STRICT=1 fails on them anyway.
# (Defect 8, helm uninstall hanging on the NodeSet's drain finalizer, was
# here until the Controller and RestApi got their nodesets finalizer.)
KNOWN_OPEN = set() if os.environ.get("SLURMOP_PODS_STRICT") == "1" else set()


def known_defect(n, what):
    print("KNOWN DEFECT (issue 32, defect %d, not fixed on main yet): %s" % (n, what), flush=True)


def run(args, ok=True, timeout=180, stdin=None):
    p = subprocess.run(args, capture_output=True, text=True, env=ENV, timeout=timeout, input=stdin)
    if ok and p.returncode != 0:
        raise Fail("%s exited %d\nstdout: %s\nstderr: %s" % (" ".join(args), p.returncode, p.stdout[-4000:],
                                                           p.stderr[-4000:]))
    return p


def kubectl(*args, ok=True, timeout=120, stdin=None):
    return run([os.path.join(ENV["K8S_BIN"], "kubectl")] + list(args), ok=ok, timeout=timeout, stdin=stdin)


def helm(*args, ok=True, timeout=300):
    return run([os.path.join(ENV["K8S_BIN"], "helm")] + list(args), ok=ok, timeout=timeout)


def jget(*args):
    return json.loads(kubectl(*args, "-o", "json").stdout)


def wait_for(what, fn, timeout, every=0.5):
    """Call fn until it returns a true value; that value, or Fail after timeout s."""
    limit = time.time() + timeout
    last = None
    while True:
        try:
            v = fn()
            if v:
                return v
        except Fail as e:
            last = str(e)
        if time.time() > limit:
            raise Fail("timed out after %d s waiting for %s%s" % (timeout, what, ("; last: " + last) if last else ""))
        time.sleep(every)


def pods(ns, selector=None):
    args = ["-n", ns, "get", "pods"]
    if selector:
        args += ["-l", selector]
    return jget(*args)["items"]


def ready(p):
    if p["metadata"].get("deletionTimestamp"):
        return False
    return any(c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", []))


def component(p):
    return p["metadata"].get("labels", {}).get("app.kubernetes.io/component", "")


def slurm_pods():
    return [p for p in pods(NS) if not p["metadata"].get("deletionTimestamp")]


def by_component(ps, comp):
    return [p for p in ps if component(p) == comp]


def login_pod():
    ps = [p for p in by_component(slurm_pods(), "login") if ready(p)]
    check(ps, "no Ready login pod")
    return ps[0]["metadata"]["name"]


# A Slurm command in the login pod that finds no configuration (sackd has not
# fetched it yet, or is being started again) is tried again, and each retry
# is printed. On 24.11 that was once every few commands: the login image's
# sackd (no -D there) restarts itself as a new process on a reconfigure, the
# entrypoint took that for its end, and the sackd it started then exited at
# once, every second (check_sackd_kept below fails on it).
NO_CONFIG = "Could not establish a configuration source"


def in_login(cmd, ok=True, timeout=120):
    for attempt in range(5):
        p = kubectl("-n", NS, "exec", login_pod(), "-c", "login", "--", "bash", "-c", cmd, ok=False, timeout=timeout)
        if p.returncode == 0 or NO_CONFIG not in p.stderr:
            break
        print("RETRY (login pod without its Slurm configuration, attempt %d): %s" % (attempt + 1, cmd), flush=True)
        time.sleep(1)
    if ok and p.returncode != 0:
        raise Fail("in the login pod: %s exited %d\nstdout: %s\nstderr: %s" % (cmd, p.returncode, p.stdout[-4000:],
                                                                            p.stderr[-4000:]))
    return p


def check_sackd_kept(when):
    """The login pod's sackd was never started again by its entrypoint
    (deploy/images/slurm/lib.sh logs "run_sackd exited" when it does): one
    sackd from the start, through every reconfigure."""
    lp = login_pod()
    out = kubectl("-n", NS, "logs", lp, "-c", "login", ok=False).stdout
    again = [line for line in out.splitlines() if "run_sackd exited" in line]
    follow = [line for line in out.splitlines() if "restarted itself" in line]
    if follow:
        log("login pod %s: %s" % (lp, follow[-1]))
    check(not again, "the login pod's sackd was started again %s (%d times):\n%s" % (
        when, len(again), "\n".join(again[:5])))


def in_ctld(cmd, ok=True, timeout=60):
    ps = [p for p in by_component(slurm_pods(), "controller") if ready(p)]
    check(ps, "no Ready slurmctld pod")
    return kubectl("-n", NS, "exec", ps[0]["metadata"]["name"], "-c", "slurmctld", "--", "bash", "-c", cmd,
                   ok=ok, timeout=timeout)


def slurm_nodes():
    """{name: (state, features)} from sinfo in the login pod."""
    out = in_login("sinfo -N -h -o '%N|%T|%f'").stdout
    nodes = {}
    for line in out.splitlines():
        if "|" in line:
            n, st, f = line.strip().split("|", 2)
            nodes[n] = (st, f)
    return nodes


# ---- setup -----------------------------------------------------------------

def start_cluster(k8s_dir):
    t0 = time.time()
    p = run(["bash", os.path.join(K8S, "cluster.sh"), "start", "--kubelets", str(KUBELETS)], ok=False, timeout=1800)
    if p.returncode == 77:
        skip("cluster.sh start --kubelets: " + p.stderr.strip().splitlines()[-1])
    if p.returncode != 0:
        raise Fail("cluster.sh start --kubelets %d exited %d:\n%s" % (KUBELETS, p.returncode, p.stderr[-6000:]))
    for line in p.stdout.splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line[len("export "):].split("=", 1)
            ENV[k] = v
    measure("cluster_start_with_%d_real_nodes" % KUBELETS, time.time() - t0)
    nodes = [n for n in jget("get", "nodes", "-l", "slurmop.test/real=true")["items"]]
    check(len(nodes) == KUBELETS, "%d real Nodes, want %d" % (len(nodes), KUBELETS))


def build_images():
    """{image ref: archive path} from deploy/images/build.sh."""
    script = os.environ.get("SLURMOP_PODS_IMAGES") or os.path.join(SRC, "deploy", "images", "build.sh")
    if not os.path.isfile(script):
        skip("deploy/images/build.sh is not there yet: no images to run")
    t0 = time.time()
    p = run(["bash", script, "--slurm", VERSION, "operator", "slurm", "mariadb"], ok=False, timeout=3600)
    if p.returncode == 77:
        skip("deploy/images/build.sh: " + (p.stderr.strip().splitlines() or ["exit 77"])[-1])
    if p.returncode != 0:
        raise Fail("deploy/images/build.sh exited %d:\n%s" % (p.returncode, p.stderr[-6000:]))
    images = {}
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) == 2:
            images[f[0]] = f[1]
    measure("images_build_or_cache", time.time() - t0)
    return images


def project_version():
    with open(os.path.join(SRC, "CMakeLists.txt")) as f:
        return re.search(r"project\(slurmop VERSION ([0-9.]+)", f.read()).group(1)


def make_release(images, tmp):
    """deploy/release.sh VERSION-pods.1 into tmp: its charts and image
    replace the tree's (images gets the release's operator image)."""
    t0 = time.time()
    v = project_version() + "-pods.1"
    out = os.path.join(tmp, "release")
    env = dict(os.environ, HELM=os.path.join(ENV["K8S_BIN"], "helm"))
    p = subprocess.run(["bash", os.path.join(SRC, "deploy", "release.sh"), "--out", out, v], env=env,
                       capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise Fail("deploy/release.sh %s exited %d:\n%s" % (v, p.returncode, p.stderr[-4000:]))
    sums = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=out, capture_output=True, text=True)
    check(sums.returncode == 0, "the release's SHA256SUMS do not match: %s" % sums.stdout + sums.stderr)
    for chart in ("slurmop-crds", "slurmop", "slurm"):
        f = os.path.join(out, "%s-%s.tgz" % (chart, v))
        check(os.path.isfile(f), "release.sh wrote no %s" % f)
        RELEASE[chart] = f
    RELEASE["oci"] = os.path.join(out, "slurmop-%s.oci.tar" % v)
    check(os.path.isfile(RELEASE["oci"]), "release.sh wrote no %s" % RELEASE["oci"])
    RELEASE["version"] = v
    images["docker.io/library/slurmop:" + v] = RELEASE["oci"]
    measure("release_sh", time.time() - t0)
    log("installing release %s (%s)" % (v, out))


def chart_path(chart):
    return RELEASE.get(chart) or os.path.join(SRC, "deploy", "helm", chart)


def import_images(images):
    t0 = time.time()
    run(["bash", os.path.join(K8S, "nodes.sh"), "import"] + sorted(set(images.values())), timeout=900)
    measure("images_import_%d_nodes" % KUBELETS, time.time() - t0)


def chart_app_version(chart):
    with open(os.path.join(SRC, "deploy", "helm", chart, "Chart.yaml")) as f:
        m = re.search(r'^appVersion:\s*"?([^"\s]+)"?', f.read(), re.M)
    return m.group(1)


def slurm_image(images, name):
    ref = "localhost/slurmop/%s:%s" % (name, VERSION)
    check(ref in images, "deploy/images/build.sh gave no %s (gave %s)" % (ref, sorted(images)))
    repo, tag = ref.rsplit(":", 1)
    return {"repository": repo, "tag": tag}


def install_operator(images):
    t0 = time.time()
    app = RELEASE.get("version") or chart_app_version("slurmop")
    ref = "docker.io/library/slurmop:%s" % app
    check(ref in images, "deploy/images/build.sh gave no %s (gave %s)" % (ref, sorted(images)))
    helm("install", "slurmop-crds", chart_path("slurmop-crds"), "-n", NS_OP,
         "--create-namespace", "--wait", "--timeout", "60s")
    # A release's chart names its own image by default: no image values.
    image = [] if RELEASE else ["--set", "image.repository=docker.io/library/slurmop", "--set", "image.tag=" + app]
    helm("install", "slurmop", chart_path("slurmop"), "-n", NS_OP, *image,
         "--set", "leaderElection.enabled=true", "--set", "logLevel=debug", "--wait", "--timeout", "120s")
    if RELEASE:
        got = jget("-n", NS_OP, "get", "deploy", "slurmop")["spec"]["template"]["spec"]["containers"][0]["image"]
        check(got.endswith("slurmop:" + app), "the release's chart runs image %s, want its own slurmop:%s" % (got, app))
    measure("helm_install_operator_to_ready", time.time() - t0)
    op = [p for p in pods(NS_OP) if ready(p)]
    check(len(op) == 1, "one Ready operator pod, got %d" % len(op))
    pod = op[0]
    sa = pod["spec"].get("serviceAccountName", "")
    check(sa and sa != "default", "operator pod runs as ServiceAccount %r, not the chart's" % sa)

    def leader():
        for lease in jget("-n", NS_OP, "get", "leases")["items"]:
            holder = lease.get("spec", {}).get("holderIdentity", "")
            if holder and holder.startswith(pod["metadata"]["name"]):
                return lease["metadata"]["name"]
        return None
    lease = wait_for("the operator to hold its leader Lease", leader, 60)
    log("operator %s holds Lease %s" % (pod["metadata"]["name"], lease))
    port = 8080
    for c in pod["spec"]["containers"]:
        for cp in c.get("ports", []):
            if cp.get("name") == "metrics":
                port = cp["containerPort"]
    m = kubectl("get", "--raw", "/api/v1/namespaces/%s/pods/%s:%d/proxy/metrics" % (NS_OP, pod["metadata"]["name"],
                                                                                  port)).stdout
    check("# TYPE" in m, "the operator's /metrics from its pod has no metric:\n" + m[:2000])
    return pod["metadata"]["name"]


def operator_log_403(pod):
    out = kubectl("-n", NS_OP, "logs", pod, ok=False).stdout
    # A refused request logs the error's name ("forbidden") and the API
    # server's message ("... is forbidden: User ..."); a bare 403 matched a
    # resourceVersion of 403 in a routine line.
    bad = [line for line in out.splitlines()
           if re.search(r'[Ff]orbidden|(?:status|code|HTTP)[ =:"]*403\b', line)]
    return bad


def cluster_values(images):
    with open(os.path.join(HERE, "values.json.in")) as f:
        text = f.read()
    img = {n: slurm_image(images, n) for n in ("slurmctld", "slurmd", "slurmrestd", "slurmdbd", "login")}
    for n, v in img.items():
        text = text.replace("@%s_REPO@" % n.upper(), v["repository"]).replace("@%s_TAG@" % n.upper(), v["tag"])
    text = text.replace("@REPLICAS@", str(KUBELETS))
    values = day2.adjust_values(sys.modules[__name__], json.loads(text))
    path = os.path.join(ENV["K8S_DIR"], "values-%s.json" % VERSION)
    with open(path, "w") as f:
        json.dump(values, f, indent=1)
    return path


def all_slurm_ready(replicas):
    ps = slurm_pods()
    want = {"controller": 1, "restapi": 1, "login": 1, "worker": replicas}
    got = {k: len([p for p in by_component(ps, k) if ready(p)]) for k in want}
    return got == want and got


def all_idle(replicas):
    nodes = slurm_nodes()
    return len(nodes) == replicas and all(st == "idle" for st, _ in nodes.values())


def registered(replicas, feature):
    nodes = slurm_nodes()
    ok = [n for n, (st, f) in nodes.items() if feature in f.split(",") and st.startswith("idle")]
    return len(ok) == replicas and nodes


# ---- scenarios ----------------------------------------------------------------

def worker_pods():
    return sorted(by_component(slurm_pods(), "worker"), key=lambda p: p["metadata"]["name"])


def nodeset_name():
    items = jget("-n", NS, "get", "nodesets.slinky.slurm.net")["items"]
    check(len(items) == 1, "one NodeSet, got %d" % len(items))
    return items[0]["metadata"]["name"]


def nodeset_feature():
    """The feature slurmd registers with: the Feature= of the NodeSet line of
    the slurm.conf slurmop generated."""
    cms = jget("-n", NS, "get", "configmaps")["items"]
    for cm in cms:
        conf = cm.get("data", {}).get("slurm.conf", "")
        m = re.search(r"^NodeSet=\S+ Feature=(\S+)", conf, re.M)
        if m:
            return m.group(1)
    raise Fail("no NodeSet line in any slurm.conf ConfigMap of %s" % NS)


def ctld_incarnation():
    """(StatefulSet generation, pod uid, slurmctld container restarts) of the
    cluster's one slurmctld: what a restart of slurmctld changes."""
    sts = jget("-n", NS, "get", "statefulsets", "-l", "app.kubernetes.io/name=slurmctld")["items"]
    check(len(sts) == 1, "one slurmctld StatefulSet, got %d" % len(sts))
    ps = by_component(slurm_pods(), "controller")
    check(len(ps) == 1, "one slurmctld pod, got %d" % len(ps))
    restarts = sum(c.get("restartCount", 0) for c in ps[0].get("status", {}).get("containerStatuses", [])
                   if c["name"] == "slurmctld")
    return sts[0]["metadata"]["generation"], ps[0]["metadata"]["uid"], restarts


def check_ctld_not_restarted(first, when):
    """slurmctld runs as it was first started: its StatefulSet never changed
    (generation 1), the same pod, its container never restarted. Without
    persistence a restart loses every registered dynamic node (24.11's
    slurmds never register again: slurmop rolled slurmctld as the NodeSets
    of a new cluster appeared)."""
    now = ctld_incarnation()
    check(now[0] == 1 and now[1:] == first[1:],
          "slurmctld restarted %s: (StatefulSet generation, pod uid, restarts) %s, first %s" % (when, now, first))


def nodeset_partition():
    """The partition of the NodeSet's line in the generated slurm.conf."""
    for cm in jget("-n", NS, "get", "configmaps")["items"]:
        m = re.search(r"^PartitionName=(\S+) Nodes=\1 ", cm.get("data", {}).get("slurm.conf", ""), re.M)
        if m:
            return m.group(1)
    raise Fail("no NodeSet partition line in any slurm.conf ConfigMap of %s" % NS)


def partition_change_reconfigures(first):
    """A NodeSet's partition changed: slurmctld takes it by `scontrol
    reconfigure` (the reconfigure sidecar, the kubelet refreshing /etc/slurm
    for the pod's new config hash), is not restarted, and keeps every node."""
    part = nodeset_partition()
    t0 = time.time()
    kubectl("-n", NS, "patch", "nodeset.slinky.slurm.net", nodeset_name(), "--type", "merge",
            "-p", json.dumps({"spec": {"partition": {"config": "State=UP MaxTime=90"}}}))
    wait_for("partition %s with MaxTime=01:30:00 in slurmctld" % part,
             lambda: "MaxTime=01:30:00" in in_ctld("scontrol show partition %s" % part, ok=False).stdout, 90, every=1)
    measure("nodeset_partition_change_to_slurmctld", time.time() - t0)
    check_ctld_not_restarted(first, "for a NodeSet's partition change")


def job_state(jobid):
    return in_login("squeue -h -j %s -o %%T" % jobid, ok=False).stdout.strip()


def busy_scale_in(replicas):
    """Scale the NodeSet in by one while a job runs on every Slurm node (so
    whichever pod the operator picks is busy): no pod may go while the job on
    its node runs; one goes after its job ends."""
    ns_name = nodeset_name()
    before = {p["metadata"]["name"]: slurm_node_of(p) for p in worker_pods()}
    jobs = {}
    for i, node in enumerate(sorted(before.values())):
        # Different lengths: the last node's job ends last.
        jobs[node] = in_login("sbatch --parsable -w %s -N1 --wrap 'sleep %d'" % (node, 12 + 8 * i)
                              ).stdout.strip().split(";")[0]
    wait_for("a job running on each node",
             lambda: all(job_state(j) == "RUNNING" for j in jobs.values()), 60)
    t0 = time.time()
    kubectl("-n", NS, "scale", "nodeset.slinky.slurm.net", ns_name, "--replicas", str(replicas - 1))
    gone = None
    while gone is None:
        # Pods first, then the jobs: a pod missing before its job is seen
        # ended went while the job ran.
        # A pod being deleted counts as gone: a busy pod must not even be
        # deleted before its job ends.
        names = {p["metadata"]["name"] for p in worker_pods()}
        states = {n: job_state(j) for n, j in jobs.items()}
        for pod, node in before.items():
            if pod not in names:
                check(states[node] != "RUNNING", "pod %s went while job %s still ran on %s" % (pod, jobs[node], node))
                gone = (pod, node)
        if time.time() - t0 > 120:
            raise Fail("no worker pod went within 120 s of the scale-in (jobs %s)" % states)
        time.sleep(0.5)
    pod, node = gone
    # When its job ended: the job's end time from scontrol (kept a while
    # after completion).
    end = in_login("scontrol show job %s | sed -n 's/.*EndTime=\\([^ ]*\\).*/\\1/p'" % jobs[node], ok=False).stdout
    log("scale-in: pod %s (node %s) went %.1f s after the scale PATCH; its job %s ended %s" % (
        pod, node, time.time() - t0, jobs[node], end.strip()))
    measure("busy_scale_in_patch_to_pod_deleted", time.time() - t0)
    wait_for("pod %s gone" % pod, lambda: pod not in [p["metadata"]["name"] for p in pods(NS)], 60)
    measure("busy_scale_in_patch_to_pod_gone", time.time() - t0)
    left = [p for p in worker_pods()]
    check(len(left) == replicas - 1, "%d worker pods after the scale-in, want %d" % (len(left), replicas - 1))
    # The node record may stay (pruneSlurmNodeRecords: Never, the default),
    # but never as a node that takes work.
    rec = slurm_nodes().get(node)
    log("after the scale-in, node %s in sinfo: %s" % (node, rec))
    check(rec is None or not rec[0].startswith(("idle", "mix", "alloc")),
          "node %s of the removed pod still takes work: %s" % (node, rec))
    for n, j in jobs.items():
        wait_for("job %s to end" % j, lambda: job_state(j) not in ("RUNNING", "PENDING"), 60)
    return ns_name


def slurm_node_of(pod):
    """The Slurm node of a NodeSet pod: slurmd registers under the pod's
    hostname."""
    return pod["spec"].get("hostname") or pod["metadata"]["name"]


def pod_delete_replaced(feature):
    vp = worker_pods()[0]
    victim = vp["metadata"]["name"]
    uid = vp["metadata"]["uid"]
    node = slurm_node_of(vp)
    t0 = time.time()
    kubectl("-n", NS, "delete", "pod", victim, "--wait=false")

    def replaced():
        for p in worker_pods():
            if p["metadata"]["name"] == victim and p["metadata"]["uid"] != uid and ready(p):
                return True
        return False
    wait_for("replacement of %s Ready" % victim, replaced, 120)
    dt = time.time() - t0
    measure("pod_delete_to_replacement_ready", dt)
    pod_start_breakdown(victim, t0)
    wait_for("%s registered again (idle, feature %s)" % (node, feature),
             lambda: (lambda n: node in n and n[node][0].startswith("idle") and feature in n[node][1])(
                 slurm_nodes()), 60)
    measure("pod_delete_to_replacement_registered", time.time() - t0)
    # A sidecar that ignores SIGTERM holds a pod for its whole 30 s grace
    # period (issue 32, defect 7). About 4 s is usual now (the startup probe
    # asks every second; it was 12-14 s with a 10 s period).
    check(dt < 20, "pod delete -> replacement Ready took %.1f s (a container ignoring SIGTERM?)" % dt)


def rfc3339(ts):
    return calendar.timegm(time.strptime(ts, "%Y-%m-%dT%H:%M:%SZ")) if ts else None


def pod_start_breakdown(name, t0):
    """Where a replacement pod's time went, from its own timestamps (1 s
    resolution, the API server's clock, which is this machine's): created
    (the old pod gone and the operator's create), each container started,
    Ready."""
    p = jget("-n", NS, "get", "pod", name)
    st = p.get("status", {})
    marks = [("created", rfc3339(p["metadata"].get("creationTimestamp")))]
    for kind in ("initContainerStatuses", "containerStatuses"):
        for c in st.get(kind, []):
            run_at = (c.get("state", {}).get("running") or {}).get("startedAt")
            marks.append(("started_" + c["name"], rfc3339(run_at)))
    for c in st.get("conditions", []):
        if c["type"] in ("Initialized", "ContainersReady", "Ready"):
            marks.append((c["type"].lower(), rfc3339(c.get("lastTransitionTime"))))
    for what, at in marks:
        if at is not None:
            measure("pod_delete_to_%s" % what, at - t0)


def uninstall_cluster():
    t0 = time.time()
    known = 8 in KNOWN_OPEN
    p = helm("uninstall", "slurm", "-n", NS, "--wait", "--timeout", "45s" if known else "180s", ok=False, timeout=240)
    dt = time.time() - t0
    measure("helm_uninstall_cluster", dt)
    if p.returncode != 0 and known:
        # Issue 32, defect 8: the RestApi goes in the same uninstall and the
        # NodeSet's drain finalizer then waits for one forever. Free it the
        # documented way so that the rest of the test still runs.
        known_defect(8, "helm uninstall of the cluster chart failed after %.0f s: %s" % (dt, p.stderr.strip()))
        for ns_obj in kubectl("-n", NS, "get", "nodesets.slinky.slurm.net", "-o", "name").stdout.split():
            kubectl("-n", NS, "annotate", "--overwrite", ns_obj, "nodeset.slinky.slurm.net/delete-without-drain=true")
        p = helm("uninstall", "slurm", "-n", NS, "--wait", "--timeout", "120s", ok=False, timeout=180)
        if p.returncode != 0 and "not found" not in p.stderr:
            raise Fail("helm uninstall after delete-without-drain failed: %s" % p.stderr)
    elif p.returncode == 0 and known:
        print("NOTE: defect 8 is listed in KNOWN_OPEN but helm uninstall completed: remove it from KNOWN_OPEN",
              flush=True)
    else:
        check(p.returncode == 0, "helm uninstall of the cluster chart failed after %.0f s: %s" % (dt, p.stderr))

    def empty():
        left = kubectl("-n", NS, "get", "pods,nodesets.slinky.slurm.net,controllers.slinky.slurm.net,"
                       "restapis.slinky.slurm.net,loginsets.slinky.slurm.net,accountings.slinky.slurm.net,"
                       "tokens.slinky.slurm.net,statefulsets,deployments,services,configmaps,secrets",
                       "-l", "!" + day2.LABEL, "-o", "name").stdout.split()
        left = [x for x in left if not x.startswith("configmap/kube-root-ca.crt")]
        return not left or None
    wait_for("nothing left in namespace %s" % NS, empty, 60)
    measure("helm_uninstall_to_namespace_empty", time.time() - t0)


def install_cluster(images):
    """helm install of the cluster chart: every Slurm pod Ready, every slurmd
    registered with its NodeSet's feature, slurmctld started once. Returns
    (feature, slurmctld's first incarnation)."""
    values = cluster_values(images)
    t0 = time.time()
    helm("install", "slurm", chart_path("slurm"), "-n", NS, "--create-namespace",
         "-f", values, "--timeout", "120s")
    got = wait_for("all Slurm pods Ready", lambda: all_slurm_ready(KUBELETS), 240, every=1)
    t_ready = time.time() - t0
    measure("helm_install_cluster_to_all_slurm_pods_ready", t_ready)
    log("Slurm pods Ready: %s" % got)
    first = ctld_incarnation()
    hosts = {p["spec"].get("nodeName") for p in worker_pods()}
    check(len(hosts) == KUBELETS, "slurmd pods on %d Nodes, want %d: %s" % (len(hosts), KUBELETS, hosts))
    feature = nodeset_feature()
    nodes = wait_for("%d slurmd registered idle with feature %s" % (KUBELETS, feature),
                     lambda: registered(KUBELETS, feature), 120, every=1)
    measure("helm_install_cluster_to_slurmd_registered", time.time() - t0)
    log("sinfo: %s" % nodes)
    check_ctld_not_restarted(first, "during the cluster's start-up")

    # StateSaveLocation: slurmctld refuses nothing but logs that a
    # world-writable state directory is unsafe (issue 32, defect 9).
    ssl = in_ctld("scontrol show config | sed -n 's/^StateSaveLocation *= *//p'").stdout.strip()
    mode = in_ctld("stat -c %%a %s" % ssl).stdout.strip()
    log("StateSaveLocation %s mode %s" % (ssl, mode))
    check(mode and int(mode, 8) & 0o002 == 0, "StateSaveLocation %s is world-writable (mode %s)" % (ssl, mode))
    return feature, first


def jobs_from_login():
    out = in_login("sinfo").stdout
    log("sinfo from the login pod:\n" + out)
    check_sackd_kept("after the partition change's reconfigure")
    t1 = time.time()
    # srun's own account (-vv, each line stamped) is printed when it is slow.
    p = in_login("srun -vv -N%d -n%d hostname 2> >(while IFS= read -r l; do echo \"$(date +%%T.%%N) $l\"; done >&2)"
                 " | sort" % (KUBELETS, KUBELETS), timeout=120)
    out = p.stdout.split()
    dt = time.time() - t1
    measure("srun_N%d" % KUBELETS, dt)
    check(len(set(out)) == KUBELETS, "srun -N%d ran on %s" % (KUBELETS, out))
    # Usually 0.4-1.8 s. 24.11 took 10.6 s twice: once while slurmctld was
    # still rolled during the start-up (the step then stayed COMPLETING 62
    # s, which the idle check below catches), once in a loaded CI run with
    # nothing else wrong (the login pod's name does not resolve from
    # slurmctld; a 10 s message timeout is the suspect). Reported above 5 s,
    # a failure only past 30 s: a time, not a behaviour (bench/ measures).
    lp = login_pod()
    log("the login pod's name from slurmctld: %r" % in_ctld("getent hosts %s || echo unresolved" % lp,
                                                            ok=False).stdout.strip())
    if dt >= 5:
        print("NOTE: srun -N%d from the login pod took %.1f s (usually under 2 s); its -vv output:\n%s" % (
            KUBELETS, dt, p.stderr[-6000:]), flush=True)
        slow_step_logs()
    check(dt < 30, "srun -N%d from the login pod took %.1f s" % (KUBELETS, dt))

    # Every node idle again (a step's completion must be in, or the pod
    # deleted next would take it along).
    # 24.11 left the step COMPLETING about 60 s in 2 of about 12 runs, each
    # after a 10 s srun (above): Slurm's message timeouts, not the operator
    # (whose drain proof holds a node with a COMPLETING step; the next
    # scenario waits for idle nodes). Reported above 20 s; a failure only
    # when the nodes never come back (150 s).
    t1 = time.time()
    wait_for("every node idle after srun", lambda: all_idle(KUBELETS), 150, every=1)
    dt = time.time() - t1
    measure("srun_end_to_nodes_idle", dt)
    if dt >= 20:
        print("NOTE: the nodes were idle %.1f s after srun ended (its step stayed COMPLETING)" % dt, flush=True)
        slow_step_logs()


def slow_step_logs():
    """What slurmctld and each slurmd logged last: where a slow step's time
    went."""
    for p in by_component(slurm_pods(), "controller") + worker_pods():
        for c in [c["name"] for c in p["spec"]["containers"] if c["name"] in ("slurmctld", "slurmd", "logfile")]:
            out = kubectl("-n", NS, "logs", p["metadata"]["name"], "-c", c, "--tail", "25", "--timestamps",
                          ok=False)
            print("--- %s/%s (last 25 lines)\n%s" % (p["metadata"]["name"], c, out.stdout), flush=True)


def main():
    if os.geteuid() != 0:
        skip("real Nodes need root")
    k8s_dir = tempfile.mkdtemp(prefix="slurmop-pods.")
    ENV["K8S_DIR"] = k8s_dir
    started = False
    rc = 1
    op_pod = None
    try:
        images = build_images()
        started = True
        start_cluster(k8s_dir)
        if FROM_RELEASE:
            make_release(images, k8s_dir)
        import_images(images)
        day2.prepare(sys.modules[__name__], images)
        op_pod = install_operator(images)
        log("operator Ready: %s" % op_pod)

        # The scenarios, in order; each leaves every node idle.
        feature, first = install_cluster(images)
        partition_change_reconfigures(first)
        jobs_from_login()
        pod_delete_replaced(feature)
        wait_for("every node idle after the pod delete", lambda: all_idle(KUBELETS), 60, every=1)
        busy_scale_in(KUBELETS)
        day2.run(sys.modules[__name__])

        bad = operator_log_403(op_pod)
        check(not bad, "the operator's log shows RBAC refusals:\n" + "\n".join(bad[:20]))
        uninstall_cluster()
        day2.teardown(sys.modules[__name__])
        bad = operator_log_403(op_pod)
        check(not bad, "the operator's log shows RBAC refusals:\n" + "\n".join(bad[:20]))
        helm("uninstall", "slurmop", "-n", NS_OP, "--wait", "--timeout", "60s")
        helm("uninstall", "slurmop-crds", "-n", NS_OP, "--wait", "--timeout", "60s")
        rc = 0
    except Fail as e:
        print("FAIL: %s" % e, flush=True)
        diagnose()
    except subprocess.TimeoutExpired as e:
        print("FAIL: timed out: %s" % e, flush=True)
        diagnose()
    finally:
        if started:
            t0 = time.time()
            p = run(["bash", os.path.join(K8S, "cluster.sh"), "stop", "--clean"], ok=False, timeout=300)
            measure("cluster_stop", time.time() - t0)
            log("cluster.sh stop: " + " | ".join(p.stderr.strip().splitlines()[-4:]))
            if p.returncode != 0:
                print("FAIL: cluster.sh stop exited %d:\n%s" % (p.returncode, p.stderr[-4000:]), flush=True)
                rc = 1
    measure("test_wall_%s" % VERSION, time.time() - T_START)
    return rc


def diagnose():
    """What a failure needs to be understood, from the live cluster."""
    if "K8S_BIN" not in ENV:
        return
    for args in (["get", "nodes", "-o", "wide"], ["get", "pods", "-A", "-o", "wide"],
                 ["get", "events", "-A", "--sort-by=.lastTimestamp"],
                 ["-n", NS, "get", "nodesets.slinky.slurm.net,controllers.slinky.slurm.net", "-o", "yaml"]):
        p = kubectl(*args, ok=False)
        print("--- kubectl %s\n%s%s" % (" ".join(args), p.stdout[-6000:], p.stderr[-2000:]), flush=True)
    for ns in (NS_OP, NS):
        try:
            ps = pods(ns)
        except Fail:
            continue
        for p in ps:
            for c in p["spec"].get("containers", []) + p["spec"].get("initContainers", []):
                out = kubectl("-n", ns, "logs", p["metadata"]["name"], "-c", c["name"], "--tail", "40", ok=False)
                print("--- logs %s/%s/%s\n%s%s" % (ns, p["metadata"]["name"], c["name"], out.stdout, out.stderr),
                      flush=True)
    d = ENV.get("K8S_DIR", "")
    for f in ("node-0-kubelet.log", "node-0-containerd.log", "kube-proxy.log", "coredns.log"):
        path = os.path.join(d, "log", f)
        if os.path.isfile(path):
            with open(path, errors="replace") as fh:
                print("--- %s (tail)\n%s" % (f, "".join(fh.readlines()[-30:])), flush=True)


if __name__ == "__main__":
    sys.exit(main())
