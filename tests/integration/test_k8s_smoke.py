#!/usr/bin/env python3
"""A real Kubernetes control plane (tests/k8s/cluster.sh: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok) on loopback:

- it starts with 8 KWOK GPU nodes, and `kubectl get nodes` shows 8 Ready;
- `kubectl apply -f crds/` (server-side validation on) accepts all six
  CustomResourceDefinitions, which become Established, with no warning;
- helm installs and uninstalls deploy/helm/slurm (its custom resources pass
  the CRDs' schemas);
- a Pod asking for a GPU is bound by kube-scheduler to a KWOK node and turns
  Running and Ready; a StatefulSet gets 2 Ready pods, which go with it;
- `kubectl create token default` returns a ServiceAccount token that the API
  server authenticates as system:serviceaccount:default:default;
- `cluster.sh stop` leaves no process behind.

Exit 77 (ctest: skipped) when Go is missing, or when the binaries are not
built yet (tests/k8s/build.sh; a cold build takes long, see tests/k8s/README.md)
unless SLURMOP_K8S_BUILD=1 asks this test to build them.
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SRC = os.environ.get("OP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
K8S = os.path.join(SRC, "tests", "k8s")
CLUSTER_SH = os.path.join(K8S, "cluster.sh")
BUILD_SH = os.path.join(K8S, "build.sh")
CRDS = os.path.join(SRC, "crds")
NODES = 8


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def fail(why):
    print("FAIL: " + why)
    sys.exit(1)


def check(cond, why):
    if not cond:
        fail(why)


def run(args, env=None, ok=True, timeout=120, stdin=None):
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout, input=stdin)
    if ok and p.returncode != 0:
        fail("%s exited %d\nstdout: %s\nstderr: %s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p


def parse_exports(text):
    env = {}
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line[len("export "):].split("=", 1)
            env[k] = v
    return env


def tagged_pids(tag):
    want = b"K8S_CLUSTER_TAG=" + tag.encode()
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                if want in f.read().split(b"\0"):
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


def wait_for(what, fn, timeout=60.0):
    limit = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > limit:
            fail("timed out waiting for " + what)
        time.sleep(0.2)


def main():
    if shutil.which("go") is None:
        skip("Go is not installed")
    have = subprocess.run(["bash", BUILD_SH, "--check"], capture_output=True, text=True)
    if have.returncode == 77:
        skip("Go is not installed")
    if have.returncode != 0:
        if os.environ.get("SLURMOP_K8S_BUILD") != "1":
            skip("the Kubernetes binaries are not built: run `bash tests/k8s/build.sh` "
                 "(or set SLURMOP_K8S_BUILD=1)")
        t0 = time.monotonic()
        b = subprocess.run(["bash", BUILD_SH], text=True, stdout=subprocess.PIPE)
        if b.returncode == 77:
            skip("Go is not installed")
        check(b.returncode == 0, "tests/k8s/build.sh failed (exit %d)" % b.returncode)
        print("built the binaries in %.0f s" % (time.monotonic() - t0))

    kdir = tempfile.mkdtemp(prefix="slurmop-k8s-test.")
    env = dict(os.environ, K8S_DIR=kdir)
    started = False
    try:
        t0 = time.monotonic()
        p = run(["bash", CLUSTER_SH, "start", "--nodes", str(NODES)], env=env, ok=False, timeout=600)
        started = True
        if p.returncode == 77:
            skip("cluster.sh start: " + p.stderr.strip().splitlines()[-1])
        check(p.returncode == 0, "cluster.sh start exited %d\n%s" % (p.returncode, p.stderr))
        print("cluster started with %d nodes in %.1f s" % (NODES, time.monotonic() - t0))
        exports = parse_exports(p.stdout)
        for k in ("K8S_DIR", "KUBECONFIG", "K8S_BIN"):
            check(k in exports, "start printed no export of %s:\n%s" % (k, p.stdout))
        env.update(exports)
        kubectl = os.path.join(exports["K8S_BIN"], "kubectl")
        check(os.access(os.path.join(exports["K8S_BIN"], "helm"), os.X_OK), "no helm in K8S_BIN")

        def k(*args, ok=True, stdin=None):
            return run([kubectl] + list(args), env=env, ok=ok, stdin=stdin)

        st = run(["bash", CLUSTER_SH, "status"], env=env, ok=False)
        check(st.returncode == 0, "status of a started cluster exited %d:\n%s%s" % (st.returncode, st.stdout, st.stderr))
        print(st.stdout.rstrip())

        # Server version: the binaries carry the pinned release, not v0.0.0.
        ver = json.loads(k("version", "-o", "json").stdout)
        check(ver["serverVersion"]["gitVersion"].startswith("v1."), "server version %r" % ver["serverVersion"])

        # Nodes.
        nodes = json.loads(k("get", "nodes", "-o", "json").stdout)["items"]
        ready = [n["metadata"]["name"] for n in nodes
                 if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))]
        check(len(nodes) == NODES and len(ready) == NODES,
              "want %d Ready nodes, got %d nodes, %d Ready" % (NODES, len(nodes), len(ready)))
        gpus = {n["status"]["allocatable"].get("nvidia.com/gpu") for n in nodes}
        check(gpus == {"8"}, "nodes' allocatable nvidia.com/gpu: %r" % gpus)
        print(k("get", "nodes").stdout.rstrip())

        # CRDs: validation on (kubectl's default is --validate=strict, done by
        # the server), every one accepted, Established, and no warning.
        ap = k("apply", "--validate=strict", "-f", CRDS, ok=False)
        print(ap.stdout.rstrip())
        check(ap.returncode == 0, "kubectl apply -f crds/ exited %d:\n%s" % (ap.returncode, ap.stderr))
        warnings = [l for l in ap.stderr.splitlines() if l.strip()]
        crd_files = sorted(f for f in os.listdir(CRDS) if f.endswith(".yaml"))
        check(len(crd_files) == 6, "want 6 CRD files, found %r" % crd_files)
        k("wait", "--for=condition=Established", "--timeout=60s", "-f", CRDS)
        crds = json.loads(k("get", "crd", "-o", "json").stdout)["items"]
        slinky = sorted(c["metadata"]["name"] for c in crds if c["spec"]["group"] == "slinky.slurm.net")
        check(len(slinky) == 6, "want 6 slinky.slurm.net CRDs, got %r" % slinky)
        for c in crds:
            conds = {x["type"]: x["status"] for x in c.get("status", {}).get("conditions", [])}
            check(conds.get("NamesAccepted") == "True" and conds.get("Established") == "True",
                  "%s: conditions %r" % (c["metadata"]["name"], conds))
            check(conds.get("NonStructuralSchema") is None, "%s is not structural" % c["metadata"]["name"])
        check(not warnings, "the API server warned about crds/:\n" + "\n".join(warnings))
        # Each served version is discoverable.
        res = k("api-resources", "--api-group=slinky.slurm.net", "-o", "name").stdout.split()
        check(len(res) == 6, "api-resources of slinky.slurm.net: %r" % res)

        # helm against the cluster: the slurm chart (which asks for
        # kubeVersion >= 1.29) installs its Secrets and custom resources, all
        # accepted by the CRDs' schemas, and uninstalls.
        helm = os.path.join(exports["K8S_BIN"], "helm")
        chart = os.path.join(SRC, "deploy", "helm", "slurm")
        hi = run([helm, "install", "smoke", chart, "--namespace", "helm-smoke", "--create-namespace"], env=env, ok=False)
        check(hi.returncode == 0, "helm install of deploy/helm/slurm failed:\n%s" % hi.stderr)
        got = k("get", "-n", "helm-smoke", "controllers,restapis", "-o", "name").stdout.split()
        check(len(got) == 2, "after helm install: %r" % got)
        run([helm, "uninstall", "smoke", "--namespace", "helm-smoke", "--wait"], env=env)
        print("helm install/uninstall of deploy/helm/slurm: ok (%s)" % ", ".join(got))

        # A Pod bound by the scheduler to a KWOK node, then Running and Ready.
        pod = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "smoke", "namespace": "default"},
            "spec": {
                "nodeSelector": {"type": "kwok", "nvidia.com/gpu.present": "true"},
                "containers": [{
                    "name": "main", "image": "registry.invalid/smoke:1",
                    "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"}},
                }],
            },
        }
        k("create", "-f", "-", stdin=json.dumps(pod))

        def pod_running():
            o = json.loads(k("get", "pod", "smoke", "-o", "json").stdout)
            conds = {c["type"]: c["status"] for c in o["status"].get("conditions", [])}
            if o["status"].get("phase") == "Running" and conds.get("Ready") == "True":
                return o
            return None

        o = wait_for("the pod to run", pod_running, 60)
        node = o["spec"]["nodeName"]
        check(node in ready, "pod bound to %r, not a KWOK node" % node)
        ev = json.loads(k("get", "events", "--field-selector", "involvedObject.name=smoke,reason=Scheduled",
                          "-o", "json").stdout)["items"]
        check(any(e.get("reportingComponent") == "default-scheduler" or
                  e.get("source", {}).get("component") == "default-scheduler" for e in ev),
              "no Scheduled event from default-scheduler: %r" % ev)
        print("pod smoke bound to %s by default-scheduler, Running, podIP %s" % (node, o["status"].get("podIP")))

        # The controller manager: a StatefulSet makes its pods (kwok runs
        # them), and deleting it with cascading removes them again (garbage
        # collector; kwok plays the kubelet that confirms the deletion).
        sts = {
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 2, "serviceName": "web",
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "main", "image": "registry.invalid/web:1"}]},
                },
            },
        }
        k("create", "-f", "-", stdin=json.dumps(sts))

        def sts_ready():
            o = json.loads(k("get", "statefulset", "web", "-o", "json").stdout)
            return o["status"].get("readyReplicas") == 2

        wait_for("StatefulSet web to have 2 ready replicas", sts_ready, 60)
        k("delete", "statefulset", "web", "--cascade=foreground", "--wait=true", "--timeout=60s")
        wait_for("the pods of web to go",
                 lambda: not k("get", "pods", "-l", "app=web", "-o", "name").stdout.strip(), 60)
        print("StatefulSet web: 2 pods Ready, deleted with its pods")

        # ServiceAccount tokens.
        tok = k("create", "token", "default", "--duration=10m").stdout.strip()
        parts = tok.split(".")
        check(len(parts) == 3, "not a JWT: %r" % tok)
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        check(claims.get("sub") == "system:serviceaccount:default:default", "token claims %r" % claims)
        server = json.loads(k("config", "view", "--raw", "-o", "json").stdout)["clusters"][0]["cluster"]["server"]
        who = run([kubectl, "--kubeconfig=/dev/null", "--server", server,
                   "--certificate-authority", os.path.join(kdir, "pki", "ca.crt"), "--token", tok,
                   "auth", "whoami", "-o", "json"], env=env)
        user = json.loads(who.stdout)["status"]["userInfo"]["username"]
        check(user == "system:serviceaccount:default:default", "the token authenticates as %r" % user)
        print("kubectl create token default: authenticates as " + user)

        # Stop: nothing left.
        t1 = time.monotonic()
        run(["bash", CLUSTER_SH, "stop"], env=env)
        started = False
        left = tagged_pids(kdir)
        check(not left, "processes left after stop: %r" % left)
        st = run(["bash", CLUSTER_SH, "status"], env=env, ok=False)
        check(st.returncode == 3, "status after stop exited %d" % st.returncode)
        print("stopped in %.1f s, no process left" % (time.monotonic() - t1))
    finally:
        if started:
            subprocess.run(["bash", CLUSTER_SH, "stop"], env=env, capture_output=True, timeout=120)
        if not tagged_pids(kdir):
            shutil.rmtree(kdir, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
