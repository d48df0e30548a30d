#!/usr/bin/env python3
"""kubesim serves Events as kube-apiserver does: core/v1 and events.k8s.io/v1
are one resource. slurmop writes events.k8s.io/v1; `kubectl describe` and
`kubectl events` read core/v1:

- the Events slurmop writes for a NodeSet show in `kubectl describe nodeset`
  (Type, Reason, From, Message), `kubectl events --for nodeset/NAME` and
  `kubectl get events`;
- the core/v1 view of each is the events.k8s.io/v1 object under core/v1's
  field names (involvedObject, message, reportingComponent), with the same
  uid and resourceVersion; a field selector on involvedObject finds it;
- an Event written through core/v1 is read through events.k8s.io/v1, a
  watch of either group sees the other's writes, and a delete through one
  removes it from both.

Needs kubectl from tests/k8s (tests/k8s/build.sh, or $K8S_BIN); exit 77
(skipped) when it is absent."""
# backends: kubesim

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from k8s_real import k8s_bin  # noqa: E402
from kubesim import Kubesim, run_tests  # noqa: E402
from slurmop import Slurmop, apply_crds, make_cluster, pods_of, wait_for  # noqa: E402

IMAGES = {"slurmd": {"image": "ghcr.io/slinkyproject/slurmd:test"}, "logfile": {"image": "alpine:test"}}
V1 = "/apis/events.k8s.io/v1/namespaces/default/events"
CORE = "/api/v1/namespaces/default/events"
RENAMED = {"regarding": "involvedObject", "note": "message", "reportingController": "reportingComponent"}


def kubectl_runner(ks):
    bin_dir = k8s_bin()
    if bin_dir is None:
        print("SKIP: kubectl is not built (bash tests/k8s/build.sh)")
        sys.exit(77)
    home = tempfile.mkdtemp(prefix="kubectl-home-")
    env = dict(os.environ, KUBECONFIG=ks.kubeconfig, HOME=home)

    def k(*args):
        p = subprocess.run([os.path.join(bin_dir, "kubectl")] + list(args), env=env, capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0, "kubectl %s exited %d: %s %s" % (" ".join(args), p.returncode, p.stdout, p.stderr)
        return p.stdout
    return k


def test_operator_events_in_describe_and_events():
    with Kubesim(nodes=2, pod_start_delay="0", pod_ready_delay="0") as ks:
        k = kubectl_runner(ks)
        c = ks.client()
        apply_crds(c)
        make_cluster(c, nodesets={"cpu": dict(replicas=1, **IMAGES)}, no_drain=True)
        with Slurmop(ks.kubeconfig) as op:
            op.wait_ready()
            wait_for(lambda: pods_of(c, "cpu"), 30, what="cpu-0 created")
            mine = wait_for(lambda: [e for e in c.get(V1).json()["items"]
                                     if (e.get("regarding") or {}).get("name") == "cpu"
                                     and e["regarding"].get("kind") == "NodeSet"], 30, what="a NodeSet Event")
        ev = mine[0]
        name = ev["metadata"]["name"]

        # The core/v1 view: core/v1 names, one uid and resourceVersion.
        core = c.get(CORE + "/" + name)
        assert core.status == 200, core.text
        core = core.json()
        assert core["apiVersion"] == "v1" and core["kind"] == "Event", core
        for v1f, coref in RENAMED.items():
            assert core.get(coref) == ev[v1f], (coref, core.get(coref), ev[v1f])
            assert v1f not in core, core
        for f in ("reason", "type", "action", "reportingInstance", "eventTime"):
            assert core.get(f) == ev.get(f), (f, core.get(f), ev.get(f))
        assert core["metadata"]["uid"] == ev["metadata"]["uid"], (core["metadata"], ev["metadata"])
        assert core["metadata"]["resourceVersion"] == ev["metadata"]["resourceVersion"]
        # What kubectl describe asks for.
        sel = ",".join("involvedObject.%s=%s" % (f, ev["regarding"][f]) for f in ("name", "namespace", "kind", "uid"))
        found = c.get(CORE, fieldSelector=sel).json()["items"]
        assert name in [e["metadata"]["name"] for e in found], (sel, found)

        out = k("describe", "nodeset", "cpu")
        print(out.rstrip())
        section = out[out.index("Events:"):]
        assert "<none>" not in section.splitlines()[0], section
        row = [ln for ln in section.splitlines() if ev["reason"] in ln]
        assert row and ev["type"] in row[0] and ev["reportingController"] in row[0], section
        assert " ".join(ev["note"].split())[:40] in " ".join(section.split()), section

        out = k("events", "--for", "nodeset/cpu")
        print(out.rstrip())
        assert ev["reason"] in out and "NodeSet/cpu" in out, out
        out = k("get", "events")
        assert ev["reason"] in out, out

        # Written through core/v1: read through events.k8s.io/v1; watches of both groups see it;
        # deleted through events.k8s.io/v1: gone from both.
        rv = c.get(V1).json()["metadata"]["resourceVersion"]
        w_v1 = c.watch(V1, resourceVersion=rv)
        w_core = c.watch(CORE, resourceVersion=rv)
        r = c.post(CORE, {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "by-hand"},
                          "involvedObject": {"kind": "NodeSet", "name": "cpu", "namespace": "default"},
                          "reason": "Hand", "message": "written through core/v1", "type": "Normal",
                          "source": {"component": "tester"}, "count": 2,
                          "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:05Z"})
        assert r.status == 201, r.text
        made = r.json()
        got = c.get(V1 + "/by-hand").json()
        assert got["note"] == "written through core/v1" and got["regarding"]["name"] == "cpu", got
        assert got["deprecatedSource"] == {"component": "tester"} and got["deprecatedCount"] == 2, got
        assert got["deprecatedLastTimestamp"] == "2026-01-01T00:00:05Z", got
        assert got["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"], (got, made)
        r = c.delete(V1 + "/by-hand")
        assert r.status == 200, r.text
        assert c.get(CORE + "/by-hand").status == 404
        for w, field in ((w_v1, "note"), (w_core, "message")):
            evs = w.events(2)
            assert [e["type"] for e in evs] == ["ADDED", "DELETED"], evs
            assert evs[0]["object"].get(field) == "written through core/v1", evs[0]
            w.close()
        print(json.dumps(core, indent=1, sort_keys=True))


if __name__ == "__main__":
    run_tests(globals())
