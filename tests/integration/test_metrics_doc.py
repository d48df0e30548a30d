#!/usr/bin/env python3
"""docs/metrics.md is the list of what /metrics serves, and a blocked drain
says what it is, what keeps it and what to do, in metrics, status and logs.

One operator on kubesim, with what makes every family show (a health rule among them, for the
slurmop_health_* families): a Controller
with a RestApi whose slurmrestd URL (--slurmrestd) is a closed port (so
Slurm cannot be read), a NodeSet of 2 scaled to 0 (so its 2 condemned pods
are kept, DrainBlockedSlurmUnknown), a NodeSet of 1 of another Controller
without a RestApi scaled to 0 (DrainBlockedNoRestApi), the topology webhook
on, JSON logs at info level. Checked:

- test_metric_list: every family of /metrics is in docs/metrics.md with the
  same type and label names, and every metric the page lists is served (both
  ways: the check fails when either side lists one the other does not); a
  name ending in _total is a counter.
- test_blocked_drain: the NodeSet's DrainBlocked condition and its Warning
  Event name the one cause that applies (the connection refused) and the
  next step, and so does DrainBlockedNoRestApi's;
  slurmop_drains_blocked{reason="DrainBlockedSlurmUnknown"} is 2 (1 for
  DrainBlockedNoRestApi),
  slurmop_drain_blocked_oldest_seconds grows, the Slurm side reads down
  (slurmop_slurm_up 0, a node table age that grows), and client-go's
  rest_client_requests_total and controller-runtime's workqueue labels are
  there.
- test_log_fields: every log line is one JSON object; lines logged inside a
  reconcile carry controller, namespace, name and reconcileID (a UUID, a new
  one per reconcile); the Event line of the NodeSet names it so.
- test_unreachable_once: the reason Slurm cannot be read is logged at info
  level once while at least 3 polls failed with it (not once per attempt).

kubesim only; about 15 s. Run directly (python3 test_metrics_doc.py
[name-substring]) or through ctest.
"""
import json
import os
import re
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from kubesim import Kubesim, run_tests  # noqa: E402
from slurmop import SRC, NS_API, Slurmop, apply_crds, make_cluster, pods_of, set_replicas, wait_for  # noqa: E402

IMAGES = {"slurmd": {"image": "ghcr.io/slinkyproject/slurmd:test"}, "logfile": {"image": "alpine:test"}}
DOC = os.path.join(SRC, "docs", "metrics.md")
NAME = re.compile(r"`([a-zA-Z_:][a-zA-Z0-9_:]*)`")
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def doc_metrics(path=DOC):
    """{name: (type, frozenset(labels))} from the page's tables: a row whose
    first cell names metrics in backquotes, then type, then labels."""
    out = {}
    for line in open(path, encoding="utf-8"):
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) >= 4, "a metric row needs metric | type | labels | meaning: %r" % line
        labels = frozenset(x.strip() for x in cells[2].split(",") if x.strip())
        for name in NAME.findall(cells[0]):
            assert name not in out, "docs/metrics.md lists %s twice" % name
            out[name] = (cells[1], labels)
    return out


def live_metrics(text):
    """{family: (type, frozenset(label names))} from Prometheus text."""
    types, labels = {}, {}
    for line in text.splitlines():
        m = re.match(r"^# TYPE (\S+) (\S+)$", line)
        if m:
            types[m.group(1)] = m.group(2)
            labels.setdefault(m.group(1), set())
            continue
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s", line)
        name = m.group(1)
        fam = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and types.get(name[:-len(suffix)]) == "histogram":
                fam = name[:-len(suffix)]
        assert fam in types, "sample %s before its # TYPE line" % name
        for lm in re.finditer(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"', m.group(2) or ""):
            if not (lm.group(1) == "le" and types[fam] == "histogram"):
                labels[fam].add(lm.group(1))
    return {k: (types[k], frozenset(labels[k])) for k in types}


class Scenario:
    """The operator run every test reads (started once, by the first)."""
    done = None

    @classmethod
    def get(cls):
        if cls.done is None:
            cls.done = cls.run()
        return cls.done

    @staticmethod
    def run():
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there: every slurmrestd read is refused
        out = {}
        with Kubesim(nodes=4) as ks:
            c = ks.client()
            apply_crds(c)
            make_cluster(c, nodesets={"cpu": dict(replicas=2, **IMAGES)})
            # a second Controller without a RestApi: its scale-in is DrainBlockedNoRestApi
            make_cluster(c, ctl="other", key_secret="other-key", jwt_secret="other-jwt",
                         nodesets={"gpu": dict(replicas=1, **IMAGES)})
            r = c.post(NS_API + "/namespaces/default/restapis",
                       {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "RestApi", "metadata": {"name": "slurm"},
                        "spec": {"controllerRef": {"name": "slurm"}}})
            assert r.status == 201, r.text
            # gpu follows the queue (for the slurmop_nodeset_* demand families;
            # with no RestApi nothing is read, so nothing is scaled)
            r = c.patch(NS_API + "/namespaces/default/nodesets/gpu",
                        {"metadata": {"annotations": {"slurmop.slinky.slurm.net/autoscale": "max=1"}}})
            assert r.status == 200, r.text
            with Slurmop(ks.kubeconfig, log_level="info", log_format="json", topology_webhook=True,
                         webhook_addr="127.0.0.1:0", slurmrestd="default/slurm=http://127.0.0.1:%d" % port,
                         unhealthy_node_condition="GpuUnhealthy") as op:
                op.wait_ready()
                for ns_name, n in (("cpu", 2), ("gpu", 1)):
                    wait_for(lambda: len([p for p in pods_of(c, ns_name)
                                          if p.get("status", {}).get("phase") == "Running"]) == n, 30,
                             what="%d pods of %s Running" % (n, ns_name))
                set_replicas(c, "cpu", 0)
                set_replicas(c, "gpu", 0)

                def blocked(name):
                    st = c.get(NS_API + "/namespaces/default/nodesets/" + name).json().get("status", {})
                    return [x for x in st.get("conditions", []) if x["type"] == "DrainBlocked"]
                out["condition"] = wait_for(lambda: blocked("cpu"), 20, what="DrainBlocked condition")[0]
                out["norest"] = wait_for(lambda: blocked("gpu"), 20, what="DrainBlocked condition of gpu")[0]
                out["m1"] = op.metrics()
                # 1 + 2 + 4 s of backoff: at least 3 failed polls
                wait_for(lambda: op.metric("slurmop_slurm_node_polls_total", result="error") >= 3, 20,
                         what="3 failed polls")
                time.sleep(0.5)
                out["m2"] = op.metrics()
                status, out["text"] = op.get(op.metrics_url + "/metrics")
                assert status == 200
                evs = c.get("/apis/events.k8s.io/v1/namespaces/default/events").json().get("items") or []
                out["events"] = [e for e in evs if e.get("reason", "").startswith("DrainBlocked")]
                out["log"] = op.stderr()
        return out


def test_metric_list():
    doc = doc_metrics()
    live = live_metrics(Scenario.get()["text"])
    missing_doc = sorted(set(live) - set(doc))
    missing_live = sorted(set(doc) - set(live))
    assert not missing_doc, "served but not in docs/metrics.md: %s" % missing_doc
    assert not missing_live, "in docs/metrics.md but not served: %s" % missing_live
    bad = ["%s: docs say %s {%s}, /metrics has %s {%s}" % (n, doc[n][0], ",".join(sorted(doc[n][1])), live[n][0],
                                                         ",".join(sorted(live[n][1])))
           for n in sorted(doc) if doc[n] != live[n]]
    assert not bad, "type or labels differ:\n  " + "\n  ".join(bad)
    wrong = [n for n, (t, _) in live.items() if n.endswith("_total") and t != "counter"]
    assert not wrong, "named _total but not counters: %s" % wrong
    print("  %d families, docs and /metrics agree" % len(live))


def test_blocked_drain():
    sc = Scenario.get()
    cond = sc["condition"]
    msg = cond["message"]
    assert cond["status"] == "True" and cond["reason"] == "DrainBlockedSlurmUnknown", cond
    assert "connection refused" in msg and "Next: " in msg, msg
    # one cause, not the list of what it might be
    assert "unreachable, answering errors, or" not in msg, msg
    assert sc["events"] and all("Next: " in e["note"] for e in sc["events"]), sc["events"]
    nr = sc["norest"]
    assert nr["reason"] == "DrainBlockedNoRestApi" and "has no RestApi" in nr["message"] and \
        "Next: create a RestApi" in nr["message"], nr

    def v(m, metric, **labels):
        return sum(x for (n, ls), x in m.items() if n == metric and all((k, w) in ls for k, w in labels.items()))
    m1, m2 = sc["m1"], sc["m2"]
    assert v(m2, "slurmop_drains_blocked", reason="DrainBlockedSlurmUnknown") == 2, m2
    assert v(m2, "slurmop_drains_blocked", reason="DrainBlockedNoRestApi") == 1, m2
    assert v(m2, "slurmop_drains_blocked") == 3
    assert v(m2, "slurmop_busy_pods_kept") == 0
    assert v(m2, "slurmop_drain_blocked_oldest_seconds") > v(m1, "slurmop_drain_blocked_oldest_seconds") > 0
    assert v(m2, "slurmop_slurm_up", cluster="default/slurm") == 0
    assert v(m2, "slurmop_slurm_node_table_age_seconds", cluster="default/slurm") > \
        v(m1, "slurmop_slurm_node_table_age_seconds", cluster="default/slurm") > 0
    assert v(m2, "rest_client_requests_total", method="POST", code="201") >= 2  # the two pods at least
    assert v(m2, "rest_client_requests_total", method="GET") > 0  # lists and watches are GETs
    assert v(m2, "workqueue_adds_total", name="nodeset-controller", controller="nodeset-controller") > 0
    assert v(m2, "controller_runtime_reconcile_total", controller="nodeset-controller") > 0


def test_log_fields():
    lines = [ln for ln in Scenario.get()["log"].splitlines() if ln.strip()]
    ids = set()
    inside = 0
    for ln in lines:
        o = json.loads(ln)  # every line is one JSON object
        for k in ("ts", "level", "caller", "msg"):
            assert k in o, ln
        if "reconcileID" in o:
            inside += 1
            for k in ("controller", "namespace", "name"):
                assert k in o, ln
            assert UUID.match(o["reconcileID"]), ln
            ids.add(o["reconcileID"])
    assert inside > 0 and len(ids) > 1, (inside, ids)
    ev = [json.loads(ln) for ln in lines if "DrainBlockedSlurmUnknown" in ln]
    assert ev, "no log line of the DrainBlockedSlurmUnknown Event"
    assert ev[0].get("controller") == "nodeset-controller" and ev[0].get("namespace") == "default" and \
        ev[0].get("name") == "cpu", ev[0]


def test_unreachable_once():
    sc = Scenario.get()
    said = [json.loads(ln) for ln in sc["log"].splitlines() if "cannot read the node table" in ln]
    errors = sum(x for (n, ls), x in sc["m2"].items() if n == "slurmop_slurm_node_polls_total" and
                 ("result", "error") in ls)
    assert errors >= 3, errors
    assert len(said) == 1, [x["msg"] for x in said]
    assert said[0]["level"] == "info" and "connection refused" in said[0]["msg"], said[0]


if __name__ == "__main__":
    run_tests(globals())
