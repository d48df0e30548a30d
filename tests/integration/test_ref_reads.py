#!/usr/bin/env python3
"""A referenced user Secret whose read failed is read again within seconds.

slurmop does not watch the Secrets a custom resource references but does not
own (watchers/byname.h): it GETs each by name, then again every
--ref-poll-interval (30 s by default; the first re-read 15-30 s after the
first read). A GET that fails (an API server restarting answers 403 until
its authorizer has synced; a 500; a lost connection) used to wait for that
poll too, and a name whose first read failed stays absent meanwhile: a Token
got no Secret for up to half a minute.

kubesim answers every request for the Token's JWT key Secret with 500
(POST /kubesim/faults with faultPath); a Token referencing it is created and
slurmop's read fails ("cannot read Secret"); the fault is lifted; the
Token's Secret must appear within RETRY_S (8) s, well before the poll.

kubesim only: a real API server cannot be made to fail the GETs of one
object (its faults here are restarts, and a restarted kube-apiserver's 403s
last an unpredictable moment).
"""
import base64
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from kubesim import Kubesim, run_tests  # noqa: E402
from slurmop import NS_API, Slurmop, apply_crds, wait_for  # noqa: E402

CORE = "/api/v1/namespaces/default"
RETRY_S = 8.0


def test_failed_read_retried_before_the_poll():
    with Kubesim(nodes=0) as ks:
        c = ks.client()
        apply_crds(c)
        r = c.post(CORE + "/secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "auth-jwt"},
                                       "data": {"jwt.key": base64.b64encode(os.urandom(32)).decode()}})
        assert r.status == 201, r.text
        # A Token signs only with a Controller's JWT key (test_tenants.py): an external one naming it.
        r = c.post(NS_API + "/namespaces/default/controllers",
                   {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "Controller", "metadata": {"name": "ext"},
                    "spec": {"external": True, "externalConfig": {"host": "slurmctld", "port": 6817},
                             "jwtKeyRef": {"name": "auth-jwt", "key": "jwt.key"}}})
        assert r.status == 201, r.text
        ks.admin("POST", "/kubesim/faults", {"rate500": 1.0, "faultPath": "/secrets/auth-jwt"})
        with Slurmop(ks.kubeconfig) as op:
            op.wait_ready()
            r = c.post(NS_API + "/namespaces/default/tokens",
                       {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "Token", "metadata": {"name": "t"},
                        "spec": {"username": "alice", "lifetime": "15m",
                                 "jwtKeyRef": {"name": "auth-jwt", "key": "jwt.key"}}})
            assert r.status == 201, r.text
            wait_for(lambda: "cannot read Secret default/auth-jwt" in op.stderr(), 20,
                     what="slurmop's failed read of the key Secret")
            time.sleep(1.5)  # a retry or two fail too
            assert c.get(CORE + "/secrets/t-jwt-alice").status == 404
            ks.admin("POST", "/kubesim/faults", {"rate500": 0, "faultPath": None})
            t = time.monotonic()
            wait_for(lambda: c.get(CORE + "/secrets/t-jwt-alice").status == 200, RETRY_S,
                     what="the Token's Secret within %.0f s of the key Secret being readable" % RETRY_S)
            print("the Token's Secret %.2f s after the fault was lifted" % (time.monotonic() - t))
            assert "Secret default/auth-jwt readable again" in op.stderr(), op.stderr()[-2000:]


if __name__ == "__main__":
    run_tests(globals())
