#!/usr/bin/env python3
"""A rotated JWT key reaches slurmop within seconds, not at its next poll.

The Controller's JWT key Secret is the user's (no managed-by label), so
slurmop does not watch it: it reads it by name and again every
--ref-poll-interval (30 s by default, the first re-read 15-30 s after the
first). A Slurm lab (22.05 by default, SLURMLAB_VERSION) and kubesim or a
real control plane (tests/lib/backend.py):

  1. the Secret holds a key slurmctld does not know; slurmop starts and
     every node poll is refused (22.05: HTTP 500 with Slurm's generic
     error; 24.11, 26.05: 511 with its authentication error;
     slurmop_slurm_node_polls_total{result="error"} grows, no full read);
  2. the Secret is rotated to the lab's key 3 s after slurmop started;
  3. slurmop must read the node table (a full poll) within ROTATE_S (8) s
     of the rotation: the refusals make it read the Secret again at once
     (op_ref_refresh). Without that, its first re-read of the Secret comes
     15 s after its start at the earliest, after the deadline.
Then the pods' Slurm conditions appear (the client is usable, not just
polling). Exit 77 (skipped) without the Slurm binaries or root.
"""
# backends: kubesim k8s
import base64
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from backend import api_server  # noqa: E402
from slurmlab import lab_cluster, run_in_lab  # noqa: E402
from slurmop import Slurmop, apply_crds, wait_for  # noqa: E402
from test_slurm_nodeset import IMAGES, conds, log, pod  # noqa: E402

NODES = ["slinky-0", "slinky-1"]
ROTATE_S = 8.0
WRONG_KEY = b"not the lab's key, but 32 bytes." * 2


def set_key(c, key):
    r = c.patch("/api/v1/namespaces/default/secrets/slurm-auth-jwt",
                {"data": {"jwt.key": base64.b64encode(key).decode()}})
    assert r.status == 200, r.text


def polls(op, result):
    return op.metric("slurmop_slurm_node_polls_total", result=result)


def scenario(ks, lab):
    c = ks.client()
    apply_crds(c)
    lab_cluster(c, lab, {"slinky": dict(replicas=2, **IMAGES)})
    set_key(c, WRONG_KEY)
    with Slurmop(ks.kubeconfig, **lab.slurmop_flags()) as op:
        op.wait_ready()
        t_start = time.monotonic()
        wait_for(lambda: polls(op, "error") >= 1, 20, what="a refused node poll (the wrong key)")
        assert polls(op, "full") == 0, "a full node poll with a key slurmctld does not know"
        log("refused polls: %d; rotating the key" % polls(op, "error"))
        time.sleep(max(0.0, 3.0 - (time.monotonic() - t_start)))
        set_key(c, lab.jwt_key)
        t_rot = time.monotonic()
        wait_for(lambda: polls(op, "full") >= 1, ROTATE_S,
                 what="a full node poll within %.0f s of the key's rotation" % ROTATE_S)
        log("first full poll %.2f s after the rotation (%.2f s after slurmop was ready)" %
            (time.monotonic() - t_rot, time.monotonic() - t_start))
        assert time.monotonic() - t_start < 15.0, "the Secret was not read again before its poll"
        wait_for(lambda: all("SlurmNodeStateIdle" in conds(pod(c, n)) for n in NODES), 30,
                 what="SlurmNodeStateIdle on both pods")
        log("both pods carry their Slurm state")


def main():
    run_in_lab("test_slurm_key_rotation", NODES, scenario, lambda: api_server(nodes=2))


if __name__ == "__main__":
    main()
