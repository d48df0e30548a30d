"""slinky_peer_bench: `slurmop-bench --peer slinky --quick --sizes 32`, the
side-by-side benchmark against Slinky's newest release in its smallest
form: slurmop with its defaults and Slinky's manager (v1.2.1 unless
SLURMOP_SLINKY_VERSION says otherwise), each on its own fresh real control
plane with the same KWOK Nodes and custom resources, through scale-out 0 ->
32, churn, a kube-apiserver restart, scale-in, and the scale-in with busy
Slurm nodes (a Slurm 26.05 lab: two nodes with a slurmd and a job).

Checked: the run completes and its report has the side-by-side table; both
operators created and readied all 32 pods and took them away again; the
API server's audit log counted requests for both; slurmop deleted no busy
pod while its job ran, and every busy pod once the job had ended. Slinky's
own figures are reported, never asserted: it is the peer, not the product.
No timing is asserted (a shared machine); the numbers are in the output.

Skipped (77) like slinky_parity when Go is missing or Slinky's manager
cannot be built (tests/ci-skips.txt allows that skip), or without root (the
Slurm lab), or when the control plane is not built.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)

import test_slinky_parity as parity  # noqa: E402

BUILD = os.environ.get("OP_BUILD_DIR") or os.path.join(HERE, "..", "..", "build")
N = 32


def fail(why):
    print("FAIL: " + why, flush=True)
    sys.exit(1)


def main():
    if os.geteuid() != 0:
        parity.skip("the Slurm lab of the busy scale-in needs root")
    bench = os.path.join(BUILD, "slurmop-bench")
    if not os.access(bench, os.X_OK):
        parity.skip("slurmop-bench is not built in %s" % BUILD)
    senv = parity.slinky_env()  # skips (77) as slinky_parity does when the manager cannot be built
    version = senv.get("SLINKY_VERSION", "?")
    out = tempfile.mkdtemp(prefix="bench-peer.")
    os.chmod(out, 0o755)  # the lab's munged wants every folder above its socket searchable
    env = dict(os.environ, SLURMOP_SLINKY_VERSION=version)
    argv = [bench, "--peer", "slinky", "--quick", "--sizes", str(N), "--out", out]
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=1500, env=env)
    print("%s: exit %d in %.0f s (Slinky %s)" % (" ".join(argv[1:-2]), p.returncode, time.monotonic() - t0,
                                                 version), flush=True)
    try:
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        with open(os.path.join(out, "report.md")) as f:
            report = f.read()
    except (OSError, ValueError) as e:
        print(p.stdout[-6000:])
        print(p.stderr[-6000:])
        fail("no report from slurmop-bench: %s" % e)
    try:
        size = summary["results"]["peers"]["slinky"]["sizes"][str(N)]
    except KeyError:
        print(p.stdout[-6000:])
        fail("the report has no peer results for N = %d" % N)
    # the side-by-side table, as the report prints it
    start = report.find("slurmop / Slinky")
    print(report[max(0, start - 400):start + 6000] if start >= 0 else report[-6000:])
    if p.returncode != 0:
        print(p.stderr[-4000:])
        fail("slurmop-bench --peer exited %d" % p.returncode)
    problems = []
    for key in ("slurmop", "slinky"):
        r = size.get(key) or {}
        if not r.get("ran"):
            problems.append("%s did not run: %s" % (key, json.dumps(r)[:600]))
            continue
        out_ = r.get("scaleOut") or {}
        if out_.get("podsCreated") != N or out_.get("podsReady") != N:
            problems.append("%s: scale-out created %s, Ready %s of %d" % (key, out_.get("podsCreated"),
                                                                         out_.get("podsReady"), N))
        if not (out_.get("apiRequests") or {}).get("total"):
            problems.append("%s: no API requests counted for the scale-out (audit log)" % key)
        if key == "slurmop" and (r.get("scaleIn") or {}).get("podsLeft") != 0:
            problems.append("slurmop: scale-in left %s pods" % (r.get("scaleIn") or {}).get("podsLeft"))
    bz = (size.get("slurmop") or {}).get("busyScaleIn") or {}
    if bz.get("busyDeletedWhileJobRan") != 0:
        problems.append("slurmop deleted %s busy pods while their job ran: %s" % (bz.get("busyDeletedWhileJobRan"),
                                                                                 bz))
    if not bz.get("busy") or bz.get("busyDeletedAfterJob") != bz.get("busy"):
        problems.append("slurmop's busy scale-in: %s of %s busy pods deleted after their job: %s" % (
            bz.get("busyDeletedAfterJob"), bz.get("busy"), bz))
    if problems:
        fail("\n".join(problems) + "\n(size %d: %s)" % (N, json.dumps(size)[:3000]))
    shutil.rmtree(out, True)
    print("PASS: slurmop and Slinky %s side by side at N = %d" % (version, N))
    return 0


if __name__ == "__main__":
    sys.exit(main())
