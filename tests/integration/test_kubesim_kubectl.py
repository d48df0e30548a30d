#!/usr/bin/env python3
"""kubectl against kubesim, typed as a user types it:

- `kubectl apply -f crds/` (client validation on: kubectl reads kubesim's
  OpenAPI v3 documents, sees that the server validates fields, and sends
  fieldValidation=Strict) creates the six CRDs, then leaves them unchanged;
  an unknown field in a custom resource is refused by the server;
- `kubectl get crd` shows CREATED AT; `kubectl get nodesets` shows the CRD's
  printer columns (and -o wide the priority 1 ones) with values from status;
- `kubectl scale nodeset` works through the scale subresource;
- `kubectl describe nodeset` and `kubectl explain nodeset.spec` work;
- `kubectl get pods|nodes|namespaces|configmaps` show the real server's columns;
- `kubectl create namespace|configmap|secret|serviceaccount` (protobuf bodies) work.

Needs kubectl from tests/k8s (built by tests/k8s/build.sh, or $K8S_BIN);
exit 77 (skipped) when it is absent.
"""
import json
import os
import sys
import tempfile
import time

from k8s_real import SRC, k8s_bin
from kubesim import Kubesim
import subprocess

NODESET = """apiVersion: slinky.slurm.net/v1beta1
kind: NodeSet
metadata:
  name: gpu
spec:
  controllerRef:
    name: slurm
  replicas: 2
"""


def fail(why):
    print("FAIL: " + why)
    sys.exit(1)


def check(cond, why):
    if not cond:
        fail(why)


def main():
    bin_dir = k8s_bin()
    if bin_dir is None:
        print("SKIP: kubectl is not built (bash tests/k8s/build.sh)")
        sys.exit(77)
    kubectl = os.path.join(bin_dir, "kubectl")
    home = tempfile.TemporaryDirectory(prefix="kubectl-home-")
    with Kubesim(nodes=2, pod_start_delay="0", pod_ready_delay="0") as ks:
        env = dict(os.environ, KUBECONFIG=ks.kubeconfig, HOME=home.name)

        def k(*args, ok=True, stdin=None):
            p = subprocess.run([kubectl] + list(args), env=env, capture_output=True, text=True, input=stdin,
                               timeout=60)
            if ok and p.returncode != 0:
                fail("kubectl %s exited %d\nstdout: %s\nstderr: %s" % (" ".join(args), p.returncode, p.stdout,
                                                                      p.stderr))
            return p

        def header(out):
            return out.splitlines()[0].split()

        # apply -f crds/ with validation on, twice.
        p = k("apply", "-f", os.path.join(SRC, "crds"))
        check(p.stdout.count(" created") == 6 and not p.stderr.strip(), "apply crds/: %s %s" % (p.stdout, p.stderr))
        p = k("apply", "-f", os.path.join(SRC, "crds"))
        check(p.stdout.count(" unchanged") == 6 and not p.stderr.strip(), "apply crds/ again: %s %s" % (p.stdout,
                                                                                                       p.stderr))
        p = k("get", "crd")
        check(header(p.stdout) == ["NAME", "CREATED", "AT"] and "nodesets.slinky.slurm.net" in p.stdout, p.stdout)

        # A NodeSet, its printer columns, status values in them.
        k("apply", "-f", "-", stdin=NODESET)
        p = k("get", "nodesets")
        check(header(p.stdout) == ["NAME", "DESIRED", "REPLICAS", "UPDATED", "READY", "AGE"], p.stdout)
        k("patch", "nodeset", "gpu", "--subresource=status", "--type=merge", "-p",
          json.dumps({"status": {"desired": 2, "replicas": 2, "updatedReplicas": 1, "readyReplicas": 1,
                                 "slurmIdle": 2, "nodeSetHash": "h", "selector": "app=gpu"}}))
        p = k("get", "nodesets")
        row = p.stdout.splitlines()[1].split()
        check(row[:5] == ["gpu", "2", "2", "1", "1"], p.stdout)
        p = k("get", "nodeset", "gpu", "-o", "wide")
        check(header(p.stdout) == ["NAME", "DESIRED", "REPLICAS", "UPDATED", "READY", "IDLE", "ALLOCATED", "DOWN",
                                   "DRAIN", "BLOCKED", "AGE"], p.stdout)
        check(p.stdout.splitlines()[1].split()[5] == "2", p.stdout)
        p = k("get", "nss", "-A")
        check(header(p.stdout)[0] == "NAMESPACE" and "default" in p.stdout, p.stdout)

        # get -w: the watch events are Tables too (the printer columns stay).
        w = subprocess.Popen([kubectl, "get", "nodesets", "-w"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        k("patch", "nodeset", "gpu", "--subresource=status", "--type=merge", "-p",
          json.dumps({"status": {"readyReplicas": 2}}))
        time.sleep(1.0)
        w.terminate()
        out, _ = w.communicate(timeout=10)
        lines = out.splitlines()
        check(len(lines) >= 3 and lines[0].split() == ["NAME", "DESIRED", "REPLICAS", "UPDATED", "READY", "AGE"]
              and lines[-1].split()[:5] == ["gpu", "2", "2", "1", "2"], out)

        # scale, describe, explain.
        p = k("scale", "nodeset", "gpu", "--replicas=3")
        check("scaled" in p.stdout, p.stdout)
        p = k("get", "nodeset", "gpu", "-o", "jsonpath={.spec.replicas}")
        check(p.stdout == "3", p.stdout)
        p = k("describe", "nodeset", "gpu")
        check("Kind:         NodeSet" in p.stdout and "Replicas:" in p.stdout and "Events:" in p.stdout, p.stdout)
        p = k("explain", "nodeset.spec.replicas")
        check("FIELD: replicas <integer>" in p.stdout, p.stdout)

        # The server validates: an unknown field is refused (fieldValidation=Strict).
        p = k("apply", "-f", "-", ok=False, stdin=NODESET.replace("name: gpu", "name: bad").replace(
            "replicas: 2", "replicas: 2\n  bogus: 1"))
        check(p.returncode != 0 and 'unknown field "spec.bogus"' in p.stderr, p.stderr)
        # server-side apply
        p = k("apply", "--server-side", "-f", "-", stdin=NODESET)
        check("serverside-applied" in p.stdout, p.stdout)

        # Core kinds: the real printers' columns.
        k("run", "p1", "--image=nginx")
        deadline = time.monotonic() + 20
        while True:
            p = k("get", "pods", "-o", "wide")
            if "Running" in p.stdout or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        check(header(p.stdout) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED", "NODE",
                                   "READINESS", "GATES"], p.stdout)
        row = p.stdout.splitlines()[1].split()
        check(row[0] == "p1" and row[1] == "1/1" and row[2] == "Running" and row[6].startswith("node-"), p.stdout)
        p = k("get", "nodes")
        check(header(p.stdout) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"] and " Ready " in p.stdout, p.stdout)
        p = k("get", "namespaces")
        check(header(p.stdout) == ["NAME", "STATUS", "AGE"] and "Active" in p.stdout, p.stdout)
        p = k("get", "configmaps")
        check(header(p.stdout) == ["NAME", "DATA", "AGE"], p.stdout)
        # a plain apply of a ConfigMap, then a change: strategic merge computed by kubectl
        k("apply", "-f", "-", stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1}\ndata: {a: '1'}\n")
        p = k("apply", "-f", "-", stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1}\ndata: {b: '2'}\n")
        check("configured" in p.stdout, p.stdout)
        p = k("get", "configmap", "c1", "-o", "jsonpath={.data}")
        check(json.loads(p.stdout) == {"b": "2"}, p.stdout)
        # kubectl create of built-ins sends protobuf bodies.
        k("create", "namespace", "team")
        k("create", "configmap", "c2", "-n", "team", "--from-literal=a=b", "--from-literal=c=")
        k("create", "secret", "generic", "s1", "-n", "team", "--from-literal=pw=x", "--type=Opaque")
        k("create", "serviceaccount", "robot", "-n", "team")
        p = k("get", "configmap", "c2", "-n", "team", "-o", "json")
        check(json.loads(p.stdout)["data"] == {"a": "b", "c": ""}, p.stdout)
        p = k("get", "secret", "s1", "-n", "team", "-o", "json")
        s1 = json.loads(p.stdout)
        check(s1["data"] == {"pw": "eA=="} and s1["type"] == "Opaque", p.stdout)
        p = k("get", "serviceaccount", "robot", "-n", "team", "-o", "jsonpath={.metadata.name}")
        check(p.stdout == "robot", p.stdout)
        p = k("get", "namespace", "team", "-o", "jsonpath={.status.phase}")
        check(p.stdout == "Active", p.stdout)
        k("delete", "nodeset", "gpu")
        p = k("get", "nodesets")
        check("No resources found" in p.stderr, p.stderr)
    print("PASS")


if __name__ == "__main__":
    main()
