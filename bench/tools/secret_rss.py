#!/usr/bin/env python3
"""RSS of an idle slurmop in a namespace full of Secrets it has nothing to do with.

Starts kubesim, creates --count Secrets of --size bytes each (random data,
like Helm release Secrets: unlabelled, referenced by nothing), plus one small
Controller whose key Secrets are referenced, then starts each given slurmop
binary in turn against it and prints, once /readyz answers and the process
has been idle for a few seconds: VmRSS, VmHWM and slurmop_cache_objects for
secrets and configmaps. Use Release builds (an ASan build's RSS says nothing).

    python3 bench/tools/secret_rss.py --kubesim build-rel/kubesim \\
        before=/path/to/old/slurmop after=build-rel/slurmop

Python standard library plus tests/lib.
"""

import argparse
import base64
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "lib"))

from kubesim import Kubesim  # noqa: E402
from slurmop import Slurmop, apply_crds, wait_for  # noqa: E402

CORE = "/api/v1/namespaces/default"


def vm(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])  # kB
    return -1


def measure(kubeconfig, binary, settle):
    os.environ["SLURMOP_BIN"] = binary
    with Slurmop(kubeconfig, log_level="info", cluster_domain="cluster.local") as op:
        t0 = time.time()
        op.wait_ready(timeout=600)
        ready_s = time.time() - t0
        time.sleep(settle)
        pid = op.proc.pid
        rss, hwm = vm(pid, "VmRSS"), vm(pid, "VmHWM")
        sec = op.metric("slurmop_cache_objects", resource="secrets")
        cm = op.metric("slurmop_cache_objects", resource="configmaps")
        return {"rss_kb": rss, "hwm_kb": hwm, "ready_s": ready_s, "cached_secrets": sec, "cached_configmaps": cm}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubesim", required=True, help="kubesim binary")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--size", type=int, default=100 * 1024, help="bytes of data per Secret")
    ap.add_argument("--settle", type=float, default=5.0, help="idle seconds before reading RSS")
    ap.add_argument("binaries", nargs="+", help="LABEL=PATH of a slurmop binary")
    a = ap.parse_args()
    os.environ["KUBESIM_BIN"] = os.path.abspath(a.kubesim)
    with Kubesim(nodes=1) as ks:
        c = ks.client()
        apply_crds(c)
        for name, data in (("slurm-key", {"slurm.key": base64.b64encode(os.urandom(64)).decode()}),
                           ("slurm-jwt", {"jwt.key": base64.b64encode(os.urandom(64)).decode()})):
            r = c.post(CORE + "/secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                                           "data": data})
            assert r.status == 201, r.text
        blob = base64.b64encode(os.urandom(a.size * 3 // 4)).decode()
        t0 = time.time()
        for i in range(a.count):
            r = c.post(CORE + "/secrets", {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                                           "metadata": {"name": "sh.helm.release.v1.app%04d.v1" % i,
                                                        "labels": {"owner": "helm", "name": "app%04d" % i}},
                                           "data": {"release": blob[:-8] + "%08d" % i}})
            assert r.status == 201, r.text
        print("created %d Secrets of %d bytes in %.1f s" % (a.count, a.size, time.time() - t0), flush=True)
        r = c.post("/apis/slinky.slurm.net/v1beta1/namespaces/default/controllers", {
            "apiVersion": "slinky.slurm.net/v1beta1", "kind": "Controller", "metadata": {"name": "c1"},
            "spec": {"slurmKeyRef": {"name": "slurm-key", "key": "slurm.key"},
                     "jwtHs256KeyRef": {"name": "slurm-jwt", "key": "jwt.key"},
                     "slurmctld": {"image": "slurmctld"}}})
        assert r.status == 201, r.text
        print("| binary | VmRSS | VmHWM | ready after | cached Secrets | cached ConfigMaps |")
        print("|---|---|---|---|---|---|")
        for spec in a.binaries:
            label, _, path = spec.partition("=")
            res = measure(ks.kubeconfig, os.path.abspath(path), a.settle)
            print("| %s | %.1f MiB | %.1f MiB | %.1f s | %s | %s |" % (
                label, res["rss_kb"] / 1024, res["hwm_kb"] / 1024, res["ready_s"], res["cached_secrets"],
                res["cached_configmaps"]), flush=True)


if __name__ == "__main__":
    main()
