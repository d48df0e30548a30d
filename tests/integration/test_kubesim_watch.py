"""kubesim watches over real sockets: framing read byte by byte, bookmarks,
timeouts with a clean terminator, watch-list, 410 after compaction, several
concurrent watchers, selector transitions."""

import time

from kubesim import Kubesim, run_tests

CMS = "/api/v1/namespaces/default/configmaps"


def rv_of(obj):
    return obj["metadata"]["resourceVersion"]


def test_byte_by_byte_stream_yields_whole_events():
    with Kubesim() as ks:
        c = ks.client()
        start = rv_of(c.get(CMS).json())
        w = c.watch(CMS, resourceVersion=start)
        w.read_size = 1  # one byte per recv: events still come out whole
        for i in range(20):
            assert c.post(CMS, {"metadata": {"name": "cm-%02d" % i}, "data": {"i": str(i) * 50}}).status == 201
        evs = w.events(20, timeout=20)
        assert [e["object"]["metadata"]["name"] for e in evs] == ["cm-%02d" % i for i in range(20)]
        assert all(e["type"] == "ADDED" and e["object"]["kind"] == "ConfigMap" for e in evs)
        assert w.headers["content-type"] == "application/json"
        assert w.headers["transfer-encoding"] == "chunked"
        w.close()
        c.close()


def test_timeout_bookmarks_and_clean_end():
    with Kubesim(bookmark_interval="100ms") as ks:
        c = ks.client()
        start = rv_of(c.get(CMS).json())
        t0 = time.monotonic()
        w = c.watch(CMS, resourceVersion=start, allowWatchBookmarks="true", timeoutSeconds=3)
        nb = c.watch(CMS, resourceVersion=start, timeoutSeconds=1)
        # a write elsewhere moves the RV: the bookmark tells the watcher
        r = c.post("/api/v1/namespaces/default/secrets", {"metadata": {"name": "s"}})
        assert r.status == 201
        ev = w.next_event(timeout=5)
        assert ev["type"] == "BOOKMARK", ev
        assert ev["object"]["kind"] == "ConfigMap" and ev["object"]["apiVersion"] == "v1"
        assert ev["object"]["metadata"]["resourceVersion"] == rv_of(r.json())
        # the stream then ends at timeoutSeconds with the chunked terminator
        rest = w.drain(timeout=10)
        elapsed = time.monotonic() - t0
        assert all(e["type"] == "BOOKMARK" for e in rest), rest
        assert w.ended_cleanly, "no terminating chunk"
        assert 2.5 < elapsed < 6, elapsed
        # without allowWatchBookmarks: nothing but the end
        assert nb.drain(timeout=5) == []
        assert nb.ended_cleanly
        w.close()
        nb.close()
        c.close()


def test_watch_list_end_bookmark():
    with Kubesim() as ks:
        c = ks.client()
        for n in ("a", "b"):
            assert c.post(CMS, {"metadata": {"name": n}}).status == 201
        w = c.watch(CMS, sendInitialEvents="true", allowWatchBookmarks="true", resourceVersionMatch="NotOlderThan")
        evs = w.until(lambda e: e["type"] == "BOOKMARK", timeout=5)
        added = sorted(e["object"]["metadata"]["name"] for e in evs[:-1])
        assert added == ["a", "b", "kube-root-ca.crt"], added
        end = evs[-1]["object"]["metadata"]
        assert end["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert int(end["resourceVersion"]) >= max(int(rv_of(e["object"])) for e in evs[:-1])
        c.patch(CMS + "/a", {"data": {"x": "1"}})
        ev = w.next_event(timeout=5)
        assert ev["type"] == "MODIFIED" and ev["object"]["metadata"]["name"] == "a"
        w.close()
        r = c.get(CMS, watch="1", sendInitialEvents="true")
        assert r.status == 422 and r.json()["reason"] == "Invalid", r
        c.close()


def test_compacted_rv_gets_410_error_event():
    with Kubesim(history=5) as ks:
        c = ks.client()
        first = rv_of(c.post(CMS, {"metadata": {"name": "a"}}).json())
        for i in range(10):
            assert c.patch(CMS + "/a", {"data": {"i": str(i)}}).status == 200
        with c.watch(CMS, resourceVersion=first) as w:
            assert w.status == 200
            evs = w.drain(timeout=5)
            assert len(evs) == 1, evs
            e = evs[0]
            assert e["type"] == "ERROR"
            st = e["object"]
            assert st["kind"] == "Status" and st["apiVersion"] == "v1" and st["status"] == "Failure"
            assert st["reason"] == "Expired" and st["code"] == 410
            assert st["message"].startswith("too old resource version: %s (" % first), st["message"]
            assert w.ended_cleanly
        # a restart compacts everything before it
        now = rv_of(c.get(CMS).json())
        ks.admin("POST", "/kubesim/restart")
        time.sleep(0.2)
        c.close()
        with c.watch(CMS, resourceVersion=str(int(now) - 1)) as w:
            evs = w.drain(timeout=5)
            assert evs and evs[0]["type"] == "ERROR" and evs[0]["object"]["code"] == 410, evs
        with c.watch(CMS, resourceVersion=now) as w:
            c2 = ks.client()
            c2.patch(CMS + "/a", {"data": {"i": "x"}})
            assert w.next_event(timeout=5)["type"] == "MODIFIED"
            c2.close()
        c.close()


def test_many_watchers_and_selector_transitions():
    with Kubesim() as ks:
        c = ks.client()
        start = rv_of(c.get(CMS).json())
        ws = [c.watch(CMS, resourceVersion=start, labelSelector="app=web") for _ in range(5)]
        r = c.post(CMS, {"metadata": {"name": "a", "labels": {"app": "web"}}})
        c.patch(CMS + "/a", {"metadata": {"labels": {"app": "db"}}})
        c.patch(CMS + "/a", {"metadata": {"labels": {"app": "web"}}})
        c.delete(CMS + "/a")
        for w in ws:
            evs = w.events(4, timeout=5)
            assert [e["type"] for e in evs] == ["ADDED", "DELETED", "ADDED", "DELETED"], evs
            # the DELETED of the transition still shows the matching labels
            assert evs[1]["object"]["metadata"]["labels"] == {"app": "web"}
            w.close()
        assert ks.admin("GET", "/kubesim/stats")["watches"] >= 0
        c.close()


def test_drop_watches_fault():
    with Kubesim() as ks:
        c = ks.client()
        w = c.watch(CMS)
        w.until(lambda e: e["object"]["metadata"]["name"] == "kube-root-ca.crt")
        out = ks.admin("POST", "/kubesim/drop-watches")
        assert out["dropped"] == 1, out
        assert w.drain(timeout=5) == []
        assert w.ended and not w.ended_cleanly
        w.close()
        # a clean end on request
        w = c.watch(CMS)
        w.next_event(timeout=5)
        ks.admin("POST", "/kubesim/drop-watches", {"clean": True})
        assert w.drain(timeout=5) == []
        assert w.ended_cleanly
        w.close()
        c.close()


if __name__ == "__main__":
    run_tests(globals())
