"""Leader election on a Lease against kubesim: of two slurmop processes with
--leader-elect only the holder of the Lease reconciles; when it stops
(SIGTERM releases the Lease) the other takes over at once and keeps the
NodeSet converged. Both expose leader_election_master_status.

Fencing: with --qps 2 a leader's writes pile up in its client-side limiter,
yet its Lease renewals (which skip the limiter) keep it leading. When the
API server stalls (kubesim SIGSTOPped) for longer than the lease duration,
the leader steps down at its renew deadline, cancels every queued write and
exits 1; the successor acquires after the stall, and kubesim's own record
(the resourceVersions of watch events, one global sequence) shows no write
of the old leader after the successor's acquiring write.

Also on a real control plane (integration.k8s.leader_election): both run
with the ServiceAccount token of deploy/, whose Role grants the Lease
slurmop in slurmop-system only (so the Lease lives there). The fencing test
is kubesim only (it SIGSTOPs the API server process and reads kubesim's
global resourceVersion sequence)."""
# backends: kubesim k8s

import os
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from backend import api_server, kubesim_only  # noqa: E402
from kubesim import Kubesim, run_tests  # noqa: E402
from slurmop import Slurmop, apply_crds, make_cluster, pods_of, set_replicas, wait_for  # noqa: E402

IMAGES = {"slurmd": {"image": "ghcr.io/slinkyproject/slurmd:test"}, "logfile": {"image": "alpine:test"}}


def leader(op):
    # A process just started may not listen yet, or answer slowly on a
    # loaded machine: that is "not leading yet", not a failure.
    try:
        return op.metric("leader_election_master_status") == 1.0
    except OSError:
        return False


def lease(c, ns):
    r = c.get("/apis/coordination.k8s.io/v1/namespaces/%s/leases/slurmop" % ns)
    return r.json() if r.status == 200 else None


def test_one_leader_and_failover():
    with api_server(nodes=8) as ks:
        c = ks.client()
        apply_crds(c)
        make_cluster(c, nodesets={"cpu": dict(replicas=2, **IMAGES)})
        a = Slurmop(ks.kubeconfig, leader_elect=True, leader_elect_namespace=ks.lease_namespace).start()
        try:
            wait_for(lambda: leader(a), 60, what="the first process leads")
            b = Slurmop(ks.kubeconfig, leader_elect=True, leader_elect_namespace=ks.lease_namespace).start()
            try:
                b.wait_ready()  # caches sync on followers too
                wait_for(lambda: len(pods_of(c, "cpu")) == 2, 30, what="2 pods")
                time.sleep(2.5)  # more than a retry period: the follower stays a follower
                assert not leader(b)
                holder = lease(c, ks.lease_namespace)["spec"]["holderIdentity"]
                assert holder and "_" in holder, holder
                creates = ks.counters()["creates"]["pods"]
                assert creates == 2, "only the leader writes (%d pod creates)" % creates

                t0 = time.monotonic()
                a.stop()  # SIGTERM releases the Lease
                wait_for(lambda: leader(b), 15, what="the second process takes over")
                took = time.monotonic() - t0
                assert took < 10, "failover took %.1f s (the released Lease should be taken at once)" % took
                assert lease(c, ks.lease_namespace)["spec"]["holderIdentity"] != holder
                assert lease(c, ks.lease_namespace)["spec"].get("leaseTransitions", 0) >= 1
                set_replicas(c, "cpu", 4)
                wait_for(lambda: len(pods_of(c, "cpu")) == 4, 30, what="the new leader scales")
            finally:
                b.stop()
        finally:
            a.stop()


def test_sighup_and_sigquit_release_the_lease():
    """SIGHUP and SIGQUIT (whose default actions end the process without a
    word) take the graceful path: exit 0 with the Lease released, so a
    standby takes over within about a retry period, not a lease duration."""
    timing = dict(leader_elect_lease_duration=15, leader_elect_renew_deadline=10, leader_elect_retry_period=1)
    with api_server(nodes=8) as ks:
        c = ks.client()
        apply_crds(c)
        procs = []
        try:
            a = Slurmop(ks.kubeconfig, leader_elect=True, leader_elect_namespace=ks.lease_namespace,
                        **timing).start()
            procs.append(a)
            wait_for(lambda: leader(a), 60, what="the first process leads")
            for sig in (signal.SIGHUP, signal.SIGQUIT):
                b = Slurmop(ks.kubeconfig, leader_elect=True, leader_elect_namespace=ks.lease_namespace,
                            **timing).start()
                procs.append(b)
                b.wait_ready()
                time.sleep(1.5)  # more than a retry period: b saw the Lease held
                assert leader(a) and not leader(b)
                holder = lease(c, ks.lease_namespace)["spec"]["holderIdentity"]
                t0 = time.monotonic()
                a.proc.send_signal(sig)
                wait_for(lambda: leader(b), 20, what="the standby takes over after %s" % sig.name)
                took = time.monotonic() - t0
                print("%s: the standby led %.2f s after the signal (lease duration 15 s)" % (sig.name, took))
                assert took < 4, "failover after %s took %.1f s: the Lease was not released" % (sig.name, took)
                assert lease(c, ks.lease_namespace)["spec"]["holderIdentity"] != holder
                assert "received %s" % sig.name in a.stderr(), a.stderr()[-3000:]
                # already exiting: no further signal (one landing after its
                # handlers are gone kills it), wait, check exit 0 and the log
                rc = a.stop(sig=None, timeout=20)
                assert rc == 0, rc
                a = b
        finally:
            for p in procs:
                if p.proc:
                    p.stop(check=False)


def test_second_signal_still_releases_the_lease():
    """A second SIGTERM while writes wait out the shutdown grace cancels
    them and still releases the Lease (it used to exit 1 at once, leaving
    the successor a whole lease duration to wait)."""
    kubesim_only("it needs a pile-up of writes behind a 2 QPS limiter, which kubesim answers at once")
    timing = dict(leader_elect_lease_duration=15, leader_elect_renew_deadline=10, leader_elect_retry_period=1)
    with api_server(nodes=8) as ks:
        c = ks.client()
        apply_crds(c)
        make_cluster(c, nodesets={"cpu": dict(replicas=1, **IMAGES)})
        a = Slurmop(ks.kubeconfig, leader_elect=True, leader_elect_namespace=ks.lease_namespace, qps=2, burst=2,
                    shutdown_grace=60, **timing).start()
        b = Slurmop(ks.kubeconfig, leader_elect=True, leader_elect_namespace=ks.lease_namespace, **timing)
        try:
            wait_for(lambda: leader(a), 60, what="the first process leads")
            b.start()
            b.wait_ready()
            wait_for(lambda: len(pods_of(c, "cpu")) == 1, 30, what="1 pod")
            set_replicas(c, "cpu", 40)
            wait_for(lambda: a.metric("slurmop_api_requests_waiting") >= 8, 20, what="writes queued in the limiter")
            a.proc.send_signal(signal.SIGTERM)
            wait_for(lambda: "shutting down" in a.stderr(), 10, what="the graceful stop begins")
            time.sleep(1)
            assert not leader(b), "the Lease went before the grace was over"
            t0 = time.monotonic()
            a.proc.send_signal(signal.SIGTERM)
            wait_for(lambda: leader(b), 20, what="the standby takes over after the second SIGTERM")
            took = time.monotonic() - t0
            print("second SIGTERM: the standby led %.2f s later (lease duration 15 s)" % took)
            assert took < 4, "failover took %.1f s: the Lease was not released" % took
            assert "canceling writes in flight, then releasing the lease" in a.stderr(), a.stderr()[-3000:]
            rc = a.stop(sig=None, timeout=20)  # already exiting, as above
            assert rc == 0, rc
        finally:
            b.stop()
            if a.proc:
                a.stop(check=False)


class Recorder:
    """Every event of a watch, collected by a thread."""

    def __init__(self, client, path, **params):
        self.events = []
        self.w = client.watch(path, **params)
        self.w.__enter__()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        try:
            while True:
                ev = self.w.next_event(timeout=3600)
                if ev is None:
                    return
                self.events.append(ev)
        except Exception:  # noqa: BLE001 - the stream is closed at the end of the test
            return

    def close(self):
        self.w.close()


def rv(obj):
    return int(obj["metadata"]["resourceVersion"])


TIMING = dict(leader_elect_lease_duration=4, leader_elect_renew_deadline=3, leader_elect_retry_period=1)


def test_old_leader_fenced_after_stall():
    kubesim_only("it stops the API server process with SIGSTOP and reads kubesim's global resourceVersion order")
    with Kubesim(nodes=8) as ks:
        c = ks.client()
        apply_crds(c)
        names = ["cpu%d" % i for i in range(4)]
        make_cluster(c, nodesets={n: dict(replicas=1, **IMAGES) for n in names})
        r = c.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
        assert r.status in (201, 409), r.text
        # The old leader: slow client-side limiter, as in the field report.
        a = Slurmop(ks.kubeconfig, leader_elect=True, leader_elect_namespace="default", qps=2, burst=2,
                    **TIMING).start()
        # The successor watches (and so writes) only namespace "other": any
        # write in "default" after it acquired can only be the old leader's.
        b = Slurmop(ks.kubeconfig, leader_elect=True, leader_elect_namespace="default", namespace="other", qps=2,
                    burst=2, **TIMING)
        try:
            wait_for(lambda: leader(a), 60, what="the first process leads")
            b.start()
            b.wait_ready(60)
            b_id = re.search(r"campaigning for lease \S+ as (\S+)", b.stderr()).group(1)
            a_id = lease(c, "default")["spec"]["holderIdentity"]
            assert a_id and a_id != b_id
            wait_for(lambda: all(len(pods_of(c, n)) == 1 for n in names), 60, what="1 pod per NodeSet")

            # Pile writes up behind the limiter (2 QPS): 4 x 40 pods, their
            # events and status updates are minutes of work for the leader.
            start_rv = rv(c.get("/api/v1/namespaces/default/pods").json())
            pods = Recorder(c, "/api/v1/namespaces/default/pods", resourceVersion=str(start_rv))
            events = Recorder(c, "/api/v1/namespaces/default/events", resourceVersion=str(start_rv))
            leases = Recorder(c, "/apis/coordination.k8s.io/v1/namespaces/default/leases",
                              resourceVersion=str(start_rv))
            for n in names:
                set_replicas(c, n, 40)
            wait_for(lambda: a.metric("slurmop_api_requests_waiting") >= 8, 20, what="writes queued in the limiter")
            # Longer than the lease duration: renewals must not wait in the queue.
            time.sleep(6)
            assert leader(a), "the leader lost its lease while its writes were queued\n" + a.stderr()[-3000:]
            assert not leader(b)
            assert lease(c, "default")["spec"]["holderIdentity"] == a_id
            assert a.metric("slurmop_api_requests_waiting") >= 8, "the pile-up drained already"

            # Stall the API server for longer than the lease duration.
            os.kill(ks.pid, signal.SIGSTOP)
            try:
                wait_for(lambda: "lost the leader lease" in a.stderr(), 10, what="the old leader steps down")
                time.sleep(2)
            finally:
                os.kill(ks.pid, signal.SIGCONT)
            wait_for(lambda: leader(b), 30, what="the successor acquires")
            rc = a.stop(check=False) if a.proc and a.proc.wait(30) is not None else None
            assert rc == 1, "the old leader should exit 1 (got %s)" % rc
            err_a = a.stderr()
            assert "renew deadline passed" in err_a, err_a[-3000:]
            m = re.search(r"write fence closed: (\d+) queued writes canceled", err_a)
            assert m and int(m.group(1)) > 0, err_a[-3000:]
            assert "Sanitizer" not in err_a and "runtime error" not in err_a, err_a[-3000:]

            # kubesim's record: the successor's acquiring write, then nothing
            # of the old leader's in namespace default.
            wait_for(lambda: any(e["object"]["spec"].get("holderIdentity") == b_id for e in leases.events), 10,
                     what="the acquisition in the Lease watch")
            acquired = min(rv(e["object"]) for e in leases.events
                           if e["object"]["spec"].get("holderIdentity") == b_id)
            time.sleep(1)
            late_pods = [(e["type"], e["object"]["metadata"]["name"], rv(e["object"])) for e in pods.events
                         if e["type"] == "ADDED" and rv(e["object"]) > acquired]
            late_events = [(e["type"], e["object"].get("reason"), rv(e["object"])) for e in events.events
                           if e["type"] in ("ADDED", "MODIFIED") and rv(e["object"]) > acquired]
            before = [e for e in pods.events + events.events
                      if e["type"] in ("ADDED", "MODIFIED") and rv(e["object"]) < acquired]
            assert before, "no write of the old leader was recorded at all"
            print("old leader: %d pod/event writes before rv %d (the acquisition), %s queued writes fenced" %
                  (len(before), acquired, m.group(1)))
            assert not late_pods, "pods created by the old leader after rv %d: %r" % (acquired, late_pods)
            assert not late_events, "events written by the old leader after rv %d: %r" % (acquired, late_events)
            for rec in (pods, events, leases):
                rec.close()
        finally:
            b.stop()
            if a.proc:
                a.stop(check=False)


if __name__ == "__main__":
    run_tests(globals())
