"""slurmop-bench --cluster real, end to end on a small fleet: the harness
starts the real control plane itself (tests/k8s/cluster.sh with KWOK
Nodes), runs scale-out (with its limit), churn and restart (a real
kube-apiserver restart after an etcd compaction) on it, and stops it.
Checked: exit 0, the report says it ran on the real control plane, the
figures are there and sane (creates and Ready times finite and positive,
every cache relisted after the restart, churn events sent), and nothing of
the cluster is left running. No timing is asserted: the machine is shared.
About 2 minutes.

Exit 77 (ctest: skipped) when Go is missing or the control plane's binaries
are not built yet (tests/k8s/build.sh; see tests/k8s/README.md)."""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("OP_SOURCE_DIR") or os.path.join(HERE, "..", "..")
BUILD = os.environ.get("OP_BUILD_DIR") or os.path.join(SRC, "build")
BUILD_SH = os.path.join(SRC, "tests", "k8s", "build.sh")


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def check(cond, why):
    if not cond:
        print("FAIL: " + why)
        sys.exit(1)


def finite_positive(v, what):
    check(isinstance(v, (int, float)) and math.isfinite(v) and v > 0, "%s: %r" % (what, v))


def main():
    if shutil.which("go") is None:
        skip("no Go toolchain")
    if subprocess.run(["bash", BUILD_SH, "--check"], capture_output=True, text=True).returncode != 0:
        skip("the control plane's binaries are not built (bash tests/k8s/build.sh)")
    out = tempfile.mkdtemp(prefix="k8s-bench.")
    os.chmod(out, 0o755)
    argv = [os.path.join(BUILD, "slurmop-bench"), "--cluster", "real", "--sizes", "16", "--quick", "--no-slurm",
            "--scenario", "scale-out,churn,restart", "--churn-seconds", "2", "--out", out]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    print(p.stdout[-4000:])
    if p.returncode != 0:
        print(p.stderr[-4000:])
    check(p.returncode == 0, "slurmop-bench --cluster real exited %d" % p.returncode)
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    check(s["meta"]["cluster"] == "real", s["meta"])
    with open(os.path.join(out, "report.md")) as f:
        check("real control plane (tests/k8s/cluster.sh)" in f.read(), "report.md does not name the real control plane")
    r = s["results"]
    so = r["scale-out"][0]
    for side in ("limit", "limitWithWatch", "operator"):
        finite_positive(so[side]["allCreatesSeenSeconds"], side + " allCreatesSeenSeconds")
        finite_positive(so[side]["allReadySeconds"], side + " allReadySeconds")
    check(so["limitWithWatch"]["watchBytes"] > 0, "the limit's pod watch read nothing: %r" % so["limitWithWatch"])
    rs = r["restart"]
    check(rs["cluster"] == "real", rs)
    finite_positive(rs["resyncSeconds"], "restart resyncSeconds")
    finite_positive(rs["apiServerReadySeconds"], "restart apiServerReadySeconds")
    check(rs["caches"] > 0 and rs["cachesNotRelisted"] == 0, rs)
    check(rs["writes"] == 0, "writes after the restart: %r" % rs.get("writesBy"))
    for rate in r["churn"]["rates"]:
        check(rate["sent"] > 0, "churn sent nothing at %r" % rate)
    # cluster.sh stop ran: no process of this cluster is left
    k8s_dir = os.path.join(out, "k8s")
    left = subprocess.run(["bash", "-c", "grep -l 'K8S_CLUSTER_TAG=%s' /proc/[0-9]*/environ 2>/dev/null || true"
                           % k8s_dir], capture_output=True, text=True).stdout.split()
    check(not left, "processes of the cluster left running: %s" % left)
    check(not os.path.exists(os.path.join(k8s_dir, "etcd")), "etcd's data was not removed")
    shutil.rmtree(out, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
