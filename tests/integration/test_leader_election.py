"""Leader election on a Lease against kubesim: of two slurmop processes with
--leader-elect only the holder of the Lease reconciles; when it stops
(SIGTERM releases the Lease) the other takes over at once and keeps the
NodeSet converged. Both expose leader_election_master_status."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from kubesim import Kubesim, run_tests  # noqa: E402
from slurmop import Slurmop, apply_crds, make_cluster, pods_of, set_replicas, wait_for  # noqa: E402

IMAGES = {"slurmd": {"image": "ghcr.io/slinkyproject/slurmd:test"}, "logfile": {"image": "alpine:test"}}


def leader(op):
    return op.metric("leader_election_master_status") == 1.0


def lease(c):
    r = c.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/slurmop")
    return r.json() if r.status == 200 else None


def test_one_leader_and_failover():
    with Kubesim(nodes=8) as ks:
        c = ks.client()
        apply_crds(c)
        make_cluster(c, nodesets={"cpu": dict(replicas=2, **IMAGES)})
        a = Slurmop(ks.kubeconfig, leader_elect=True, leader_elect_namespace="default").start()
        try:
            wait_for(lambda: leader(a), 20, what="the first process leads")
            b = Slurmop(ks.kubeconfig, leader_elect=True, leader_elect_namespace="default").start()
            try:
                b.wait_ready()  # caches sync on followers too
                wait_for(lambda: len(pods_of(c, "cpu")) == 2, 30, what="2 pods")
                time.sleep(2.5)  # more than a retry period: the follower stays a follower
                assert not leader(b)
                holder = lease(c)["spec"]["holderIdentity"]
                assert holder and "_" in holder, holder
                creates = ks.counters()["creates"]["pods"]
                assert creates == 2, "only the leader writes (%d pod creates)" % creates

                t0 = time.monotonic()
                a.stop()  # SIGTERM releases the Lease
                wait_for(lambda: leader(b), 15, what="the second process takes over")
                took = time.monotonic() - t0
                assert took < 10, "failover took %.1f s (the released Lease should be taken at once)" % took
                assert lease(c)["spec"]["holderIdentity"] != holder
                assert lease(c)["spec"].get("leaseTransitions", 0) >= 1
                set_replicas(c, "cpu", 4)
                wait_for(lambda: len(pods_of(c, "cpu")) == 4, 30, what="the new leader scales")
            finally:
                b.stop()
        finally:
            a.stop()


if __name__ == "__main__":
    run_tests(globals())
