"""Helpers for tests that use the real Kubernetes binaries of tests/k8s/:
find kubectl without building anything, and start or stop a real control
plane (tests/k8s/cluster.sh) in a folder of the test's own.

Python standard library only. Typical use:

    from k8s_real import k8s_bin, RealCluster
    bin_dir = k8s_bin()                      # None: not built (skip with 77)
    with RealCluster(nodes=2) as rc:         # rc.env has KUBECONFIG, K8S_BIN
        rc.kubectl("get", "nodes")
"""

import os
import shutil
import subprocess
import tempfile

__all__ = ["k8s_bin", "RealCluster", "SRC"]

SRC = os.environ.get("OP_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
K8S = os.path.join(SRC, "tests", "k8s")


def k8s_bin():
    """The folder holding kubectl and the control-plane binaries: $K8S_BIN when
    it has kubectl, else tests/k8s/build.sh --check (which never builds); None
    when they are not built or Go is missing."""
    env_bin = os.environ.get("K8S_BIN")
    if env_bin and os.access(os.path.join(env_bin, "kubectl"), os.X_OK):
        return env_bin
    if shutil.which("go") is None:
        return None
    p = subprocess.run(["bash", os.path.join(K8S, "build.sh"), "--check"], capture_output=True, text=True)
    if p.returncode != 0 or not p.stdout.strip():
        return None
    d = p.stdout.strip().splitlines()[-1]
    return d if os.access(os.path.join(d, "kubectl"), os.X_OK) else None


def _exports(text):
    env = {}
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line[len("export "):].split("=", 1)
            env[k] = v
    return env


class RealCluster:
    """A real control plane in a temporary $K8S_DIR (stopped and removed on exit)."""

    def __init__(self, nodes=2):
        self.nodes = nodes
        self.dir = tempfile.mkdtemp(prefix="slurmop-k8s-diff.")
        self.env = dict(os.environ, K8S_DIR=self.dir)
        self.started = False

    def start(self, timeout=600):
        p = subprocess.run(["bash", os.path.join(K8S, "cluster.sh"), "start", "--nodes", str(self.nodes)],
                           env=self.env, capture_output=True, text=True, timeout=timeout)
        self.started = True
        if p.returncode != 0:
            raise RuntimeError("cluster.sh start exited %d:\n%s" % (p.returncode, p.stderr))
        self.env.update(_exports(p.stdout))
        return self

    def kubectl(self, *args, stdin=None, check=True):
        p = subprocess.run([os.path.join(self.env["K8S_BIN"], "kubectl")] + list(args), env=self.env,
                           capture_output=True, text=True, input=stdin, timeout=120)
        if check and p.returncode != 0:
            raise RuntimeError("kubectl %s: %s" % (" ".join(args), p.stderr))
        return p

    def stop(self):
        if self.started:
            subprocess.run(["bash", os.path.join(K8S, "cluster.sh"), "stop", "--clean"], env=self.env,
                           capture_output=True, text=True, timeout=120)
            self.started = False
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *a):
        self.stop()
