"""kubesim fault injection, counters, kubelet admin actions, and the --state
round trip across a restart."""

import os
import time

from kubesim import Kubesim, run_tests

CMS = "/api/v1/namespaces/default/configmaps"
CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: nodesets.slinky.example.com
spec:
  group: slinky.example.com
  scope: Namespaced
  names: {plural: nodesets, kind: NodeSet}
  versions:
  - name: v1beta1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"""
PODS = "/api/v1/namespaces/default/pods"


def pod(name, **spec):
    s = {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    s.update(spec)
    return {"metadata": {"name": name}, "spec": s}


def wait_for(fn, timeout=10, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("condition not met within %ss" % timeout)
        time.sleep(interval)


def test_429_500_latency_and_counters():
    with Kubesim(seed=5) as ks:
        c = ks.client()
        ks.admin("POST", "/kubesim/counters/reset")
        ks.admin("POST", "/kubesim/faults", {"rate429": 1.0, "retryAfter": 3})
        r = c.get(CMS)
        assert r.status == 429, r
        assert r.text == "Too many requests, please try again later.\n"
        assert r.header("Retry-After") == "3" and r.header("Content-Type").startswith("text/plain")
        ks.admin("POST", "/kubesim/faults", {"rate429": 0, "rate500": 1.0})
        r = c.get(CMS)
        assert r.status == 500 and r.json()["reason"] == "InternalError", r
        # a fraction: roughly that many
        ks.admin("POST", "/kubesim/faults", {"rate500": 0, "rate429": 0.3})
        codes = [c.get(CMS).status for _ in range(200)]
        n429 = codes.count(429)
        assert 30 < n429 < 90 and codes.count(200) == 200 - n429, n429
        ks.admin("POST", "/kubesim/faults", {"rate429": 0, "latencyMs": 150})
        t0 = time.monotonic()
        assert c.get(CMS).status == 200
        assert time.monotonic() - t0 >= 0.14
        ks.admin("POST", "/kubesim/faults", {"latencyMs": 0})
        # health is never faulted
        ks.admin("POST", "/kubesim/faults", {"rate500": 1.0})
        assert c.get("/healthz").status == 200
        ks.admin("POST", "/kubesim/faults", {"rate500": 0})
        for i in range(3):
            assert c.post(CMS, {"metadata": {"name": "x%d" % i}}).status == 201
        with c.watch(CMS, timeoutSeconds=1) as w:
            w.drain(timeout=5)
        cnt = ks.counters()
        assert cnt["creates"]["configmaps"] == 3, cnt["creates"]
        assert cnt["watches"] == 1 and cnt["lists"] >= 200 - n429, cnt
        assert cnt["byResource"]["configmaps"]["create"] == 3
        assert cnt["byCode"]["201"] == 3
        assert any(e["verb"] == "injected" and e["code"] == 429 for e in cnt["requests"])
        ks.admin("POST", "/kubesim/counters/reset")
        assert ks.counters()["total"] == 0
        c.close()


def test_write_rate_fault():
    """writeRate: writes are applied one per 1/rate seconds, in arrival
    order, each seen (by a read or a watch) only once applied; reads are not
    held.

    Every client's connection (TCP and the TLS handshake) is opened before
    the clock starts: under ASan on a loaded CI machine five handshakes take
    the simulator's one thread well over 0.2 s, and timing them measured the
    handshakes, not the fault. What the fault controls is what is bounded: a
    read sent behind four held writes returns before the last of them (a held
    read would come after it), and sees no more writes than their slots
    allow by the time it returns."""
    import threading
    with Kubesim(seed=5) as ks:
        ks.admin("POST", "/kubesim/faults", {"writeRate": 4})
        assert ks.admin("GET", "/kubesim/faults")["writeRate"] == 4
        done = {}
        writers = [ks.client() for _ in range(4)]
        for w in writers:
            assert w.get(CMS).status == 200  # connected: the timed part is the request alone
        c = ks.client()
        assert c.get(CMS).status == 200

        def create(i):
            try:
                r = writers[i].post(CMS, {"metadata": {"name": "w%d" % i}})
                done[i] = (r.status, time.monotonic())
            finally:
                writers[i].close()
        t0 = time.monotonic()
        threads = [threading.Thread(target=create, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.1)
        names = [o["metadata"]["name"] for o in c.get(CMS).json()["items"]]
        t_read = time.monotonic()
        # at 4 a second from t0 on, no more writes can have been applied
        assert len([n for n in names if n.startswith("w")]) <= 1 + int((t_read - t0) * 4), (names, t_read - t0)
        for t in threads:
            t.join(10)
        assert sorted(done) == [0, 1, 2, 3] and all(v[0] == 201 for v in done.values()), done
        last = max(v[1] for v in done.values())
        assert t_read < last, ("a read waited for the held writes", t_read - t0, last - t0)
        took = last - t0
        assert 0.7 <= took < 5, took  # four writes at 4 a second: slots at 0, 0.25, 0.5, 0.75 s
        ks.admin("POST", "/kubesim/faults", {"writeRate": 0})
        t1 = time.monotonic()
        for i in range(4):
            assert c.post(CMS, {"metadata": {"name": "after%d" % i}}).status == 201
        # held, four writes would take at least 0.75 s
        assert time.monotonic() - t1 < 0.6, time.monotonic() - t1
        c.close()


def test_expire_watches_fault():
    with Kubesim(expire_watches=1) as ks:
        c = ks.client()
        with c.watch(CMS) as w:
            evs = w.drain(timeout=5)
            assert len(evs) == 1 and evs[0]["type"] == "ERROR" and evs[0]["object"]["code"] == 410, evs
        ks.admin("POST", "/kubesim/faults", {"expireWatches": 2})
        for _ in range(2):
            with c.watch(CMS, resourceVersion="1") as w:
                assert w.drain(timeout=5)[0]["object"]["reason"] == "Expired"
        with c.watch(CMS) as w:
            assert w.next_event(timeout=5)["type"] == "ADDED"
        c.close()


def test_restart_drops_connections():
    with Kubesim() as ks:
        c = ks.client()
        rv = c.get(CMS).json()["metadata"]["resourceVersion"]
        w = c.watch(CMS, resourceVersion=rv)
        ks.admin("POST", "/kubesim/restart")
        assert w.drain(timeout=5) == [] and not w.ended_cleanly
        w.close()
        time.sleep(0.2)
        # the store is kept, the old RV is gone for watches
        c.close()
        assert c.get(CMS + "/kube-root-ca.crt").status == 200
        with c.watch(CMS, resourceVersion=str(int(rv) - 1)) as w2:
            assert w2.drain(timeout=5)[0]["type"] == "ERROR"
        c.close()


def test_kubelet_admin_actions():
    with Kubesim(nodes=2, pod_start_delay="20ms", pod_ready_delay="20ms", max_grace="200ms") as ks:
        c = ks.client()
        assert c.post(PODS, pod("p1")).status == 201

        def ready():
            p = c.get(PODS + "/p1").json()
            conds = {x["type"]: x["status"] for x in p["status"].get("conditions", [])}
            return p if conds.get("Ready") == "True" else None
        p = wait_for(ready)
        assert p["status"]["phase"] == "Running" and p["spec"]["nodeName"].startswith("node-")
        out = ks.admin("POST", "/kubesim/pods/fail", {"namespace": "default", "name": "p1", "exitCode": 3})
        assert out["updated"] == 1
        p = c.get(PODS + "/p1").json()
        assert p["status"]["phase"] == "Failed"
        assert p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
        # cordon both nodes: new pods stay pending with an Unschedulable condition
        ks.admin("POST", "/kubesim/nodes/cordon", {"names": ["node-00001", "node-00002"]})
        assert c.post(PODS, pod("p2")).status == 201
        wait_for(lambda: any(x.get("reason") == "Unschedulable"
                             for x in c.get(PODS + "/p2").json()["status"].get("conditions", [])))
        out = ks.admin("POST", "/kubesim/nodes/add", {"count": 1})
        assert out["added"] == ["node-00003"]
        wait_for(lambda: c.get(PODS + "/p2").json()["spec"].get("nodeName") == "node-00003", timeout=5)
        ks.admin("POST", "/kubesim/nodes/delete", {"names": ["node-00003"]})
        wait_for(lambda: c.get(PODS + "/p2").status == 404)
        c.close()


def test_state_round_trip():
    tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"), "kubesim-state-%d.json" % os.getpid())
    if os.path.exists(tmp):
        os.unlink(tmp)
    try:
        ks = Kubesim(nodes=2, state=tmp)
        ks.start()
        c = ks.client()
        assert c.post(CMS, {"metadata": {"name": "keep"}, "data": {"a": "1"}}).status == 201
        r = c.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=CRD,
                      content_type="application/yaml")
        assert r.status == 201, r
        assert c.post("/apis/slinky.example.com/v1beta1/namespaces/default/nodesets",
                      {"metadata": {"name": "n1"}, "spec": {"replicas": 2}}).status == 201
        assert c.post(PODS, pod("p")).status == 201
        wait_for(lambda: c.get(PODS + "/p").json()["status"]["phase"] == "Running")
        before = c.get(CMS + "/keep").json()
        list_rv = c.get(CMS).json()["metadata"]["resourceVersion"]
        c.close()
        ks.stop()  # SIGTERM writes the state
        assert os.path.exists(tmp)
        ks2 = Kubesim(nodes=2, state=tmp)
        ks2.start()
        c = ks2.client()
        after = c.get(CMS + "/keep").json()
        assert after == before, (before, after)
        n1 = c.get("/apis/slinky.example.com/v1beta1/namespaces/default/nodesets/n1")
        assert n1.status == 200 and n1.json()["spec"]["replicas"] == 2
        assert c.get(PODS + "/p").json()["status"]["phase"] == "Running"
        assert len(c.get("/api/v1/nodes").json()["items"]) == 2
        # RVs continue; the old window is gone
        new = c.post(CMS, {"metadata": {"name": "new"}}).json()
        assert int(new["metadata"]["resourceVersion"]) > int(list_rv)
        with c.watch(CMS, resourceVersion=str(int(list_rv) - 1)) as w:
            assert w.drain(timeout=5)[0]["type"] == "ERROR"
        # the admin endpoint writes it too
        out = ks2.admin("POST", "/kubesim/state/save")
        assert out["path"] == tmp
        c.close()
        ks2.stop()
        ks2.tmp.cleanup()
        ks.tmp.cleanup()
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


if __name__ == "__main__":
    run_tests(globals())
