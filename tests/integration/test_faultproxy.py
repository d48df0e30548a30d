#!/usr/bin/env python3
"""tests/lib/faultproxy.py against a scripted slurmrestd (no Slurm needed):
forwarding (methods, headers, bodies, keep-alive), every action, update_time
handling, rule order, `times`, counts, the recorded history, the control
endpoint and the script mode."""
import http.client
import http.server
import json
import os
import socketserver
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from faultproxy import FaultProxy, control  # noqa: E402

V = "/slurm/v0.0.38"
TOKEN = "tok.en.sig"


def node(name, drained=False, busy=False):
    return {"name": name, "state": "allocated" if busy else "idle", "state_flags": ["DRAIN"] if drained else [],
            "alloc_cpus": 2 if busy else 0, "reason": "slurm-operator: x" if drained else ""}


class Fake:
    """A scripted slurmrestd: node table, single nodes, update_time -> 304
    unless changed, writes echoed; every request is recorded."""

    def __init__(self):
        self.nodes = [node("n%d" % i) for i in range(1, 5)]
        self.changed = 0  # time of the last change
        self.requests = []
        fake = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def reply(self, status, doc=None):
                body = json.dumps(doc).encode() if doc is not None else b""
                self.send_response(status)
                if doc is not None:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                fake.requests.append((self.command, self.path, dict(self.headers), None))
                u = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(u.query))
                if u.path == V + "/nodes":
                    if "update_time" in q and int(q["update_time"]) >= fake.changed:
                        return self.reply(304)
                    return self.reply(200, {"meta": {}, "errors": [], "nodes": fake.nodes})
                if u.path.startswith(V + "/node/"):
                    name = u.path.rsplit("/", 1)[1]
                    found = [n for n in fake.nodes if n["name"] == name]
                    if not found:
                        return self.reply(500, {"errors": [{"error": "Invalid node name specified", "errno": 2018}],
                                                "nodes": []})
                    return self.reply(200, {"meta": {}, "errors": [], "nodes": found})
                if u.path == V + "/jobs":
                    return self.reply(200, {"meta": {}, "errors": [], "jobs": [{"job_id": 7, "name": "a"},
                                                                               {"job_id": 8, "name": "b"}]})
                self.reply(404, {"errors": [{"error": "Unable to find path", "errno": 9}]})

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                fake.requests.append((self.command, self.path, dict(self.headers), body))
                self.reply(200, {"got": body.decode(), "token": self.headers.get("X-SLURM-USER-TOKEN")})

            do_DELETE = do_POST

        class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.srv = S(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d" % self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


class Client:
    def __init__(self, url):
        u = urllib.parse.urlsplit(url)
        self.addr = (u.hostname, u.port)
        self.c = http.client.HTTPConnection(*self.addr, timeout=30)

    def req(self, method, path, body=None):
        h = {"X-SLURM-USER-NAME": "root", "X-SLURM-USER-TOKEN": TOKEN}
        if body is not None:
            h["Content-Type"] = "application/json"
        try:
            self.c.request(method, path, body=body, headers=h)
            r = self.c.getresponse()
            data = r.read()
        except Exception:
            self.c.close()
            self.c = http.client.HTTPConnection(*self.addr, timeout=30)
            raise
        return r.status, data, r

    def nodes(self, path=V + "/nodes"):
        s, b, _ = self.req("GET", path)
        return s, ([n["name"] for n in json.loads(b)["nodes"]] if b else None)


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok - " + what, flush=True)


def main():
    fake = Fake()
    try:
        with FaultProxy(fake.url, history=4) as fp:
            run(fake, fp)
        script(fake)
    finally:
        fake.stop()
    print("PASS")


def run(fake, fp):
    c = Client(fp.url)
    # Forwarding over one keep-alive connection.
    check(c.nodes() == (200, ["n1", "n2", "n3", "n4"]), "pass: the real table")
    s, b, _ = c.req("POST", V + "/node/n1", body=b'{"state":"drain"}')
    got = json.loads(b)
    check(s == 200 and got == {"got": '{"state":"drain"}', "token": TOKEN}, "POST body and token forwarded")
    m, p, h, body = fake.requests[-1]
    check(m == "POST" and p == V + "/node/n1" and h.get("X-SLURM-USER-NAME") == "root", "method, path, headers")
    s, _, _ = c.req("GET", V + "/nodes?update_time=%d" % (time.time() + 5))
    check(s == 304, "update_time: a 304 passed through")
    check(fp.kind_counts() == {"nodes": 2, "writes": 1}, "requests counted per kind")

    # empty, on table and single reads; update_time removed.
    rid = fp.add_rule("empty", kind="node_reads")
    check(c.nodes(V + "/nodes?update_time=%d" % (time.time() + 5)) == (200, []),
          "empty: a full 200 with no nodes for a poll with update_time")
    check("update_time" not in fake.requests[-1][1], "empty: update_time not sent on")
    check(c.nodes(V + "/node/n2") == (200, []), "empty: single-node read emptied")
    check(c.req("GET", V + "/jobs")[0] == 200 and fp.count(rid) == 2, "empty: jobs not matched; 2 counted")
    fp.clear_rules()
    ut = V + "/nodes?update_time=%d" % (time.time() + 5)
    check(c.nodes(ut) == (200, ["n1", "n2", "n3", "n4"]) and "update_time" not in fake.requests[-1][1],
          "heal: after the rule, one full real table instead of a 304")
    check(c.req("GET", ut)[0] == 304, "heal: then 304s again")

    # update_time kept with force_full=False.
    fp.add_rule("empty", kind="nodes", force_full=False)
    s, _, _ = c.req("GET", V + "/nodes?update_time=%d" % (time.time() + 5))
    check(s == 304 and "update_time" in fake.requests[-1][1], "force_full=False: update_time kept, 304 passed")
    fp.clear_rules()

    fp.add_rule("drop", kind="nodes", names=["n3", "n4"])
    check(c.nodes() == (200, ["n1", "n2"]), "drop: named nodes dropped")
    check(c.nodes(V + "/node/n3") == (200, ["n3"]), "drop on kind nodes leaves single reads alone")
    fp.set_rules([{"action": "drop", "kind": "jobs", "names": ["7"]}])
    s, b, _ = c.req("GET", V + "/jobs")
    check([j["job_id"] for j in json.loads(b)["jobs"]] == [8], "drop: jobs by job_id")
    fp.set_rules([{"action": "shrink", "kind": "nodes", "keep": 1}])
    check(c.nodes() == (200, ["n1"]), "shrink: keep=1")
    fp.set_rules([{"action": "shrink", "kind": "nodes", "fraction": 0.5}])
    check(c.nodes() == (200, ["n1", "n2"]), "shrink: fraction=0.5")

    # First matching rule wins; times=N.
    fp.set_rules([{"action": "empty", "kind": "nodes", "times": 1}, {"action": "shrink", "kind": "nodes", "keep": 3}])
    check(c.nodes() == (200, []) and c.nodes() == (200, ["n1", "n2", "n3"]),
          "rule order and times=1: empty once, then the next rule")
    fp.clear_rules()

    # stale: history of real answers; drained_idle picks the newest such answer.
    fake.nodes[2] = node("n3", drained=True)
    fake.nodes[3] = node("n4", drained=True)
    c.nodes()  # recorded: n3/n4 drained idle
    fake.nodes[2] = node("n3", drained=True, busy=True)
    fake.nodes[3] = node("n4", busy=True)
    c.nodes()  # recorded: busy
    hist = fp.recorded(V + "/nodes?update_time=1")
    check(len(hist) == 4, "history: the last 4 real answers of the path (got %d)" % len(hist))
    fp.add_rule("stale", kind="node_reads", drained_idle=["n3", "n4"])
    s, b, _ = c.req("GET", V + "/nodes")
    ns = {n["name"]: n for n in json.loads(b)["nodes"]}
    check(ns["n3"]["state_flags"] == ["DRAIN"] and ns["n4"]["alloc_cpus"] == 0, "stale: drained_idle answer replayed")
    fake.nodes[2] = node("n3")
    s, b2, _ = c.req("GET", V + "/nodes")
    check(b2 == b, "stale: the chosen answer stays frozen")
    check(c.nodes(V + "/node/n9") == (500, []), "stale: nothing recorded for the path -> passed through")
    check(fp.counts()["stale_miss"] >= 1, "stale: misses counted")
    fp.set_rules([{"action": "stale", "kind": "nodes", "age": 1}])
    s, b3, _ = c.req("GET", V + "/nodes")
    check(json.loads(b3)["nodes"][3]["alloc_cpus"] == 2, "stale: age=1 is the newest recorded answer")
    fp.clear_rules()

    # error: not forwarded by default.
    before = len(fake.requests)
    fp.add_rule("error", kind="writes")
    s, b, _ = c.req("POST", V + "/node/n1", body=b"{}")
    doc = json.loads(b)
    check(s == 500 and doc["errors"][0]["errno"] == -1 and len(fake.requests) == before,
          "error: 500 with a Slurm error body, the write not sent on")
    fp.set_rules([{"action": "error", "kind": "writes", "forward": True, "errno": 1800, "error": "x"}])
    s, b, _ = c.req("POST", V + "/node/n1", body=b"{}")
    check(s == 500 and len(fake.requests) == before + 1 and json.loads(b)["errors"][0]["errno"] == 1800,
          "error forward=True: sent on, answer replaced")
    fp.set_rules([{"action": "errors200", "kind": "nodes"}])
    s, b, _ = c.req("GET", V + "/nodes?update_time=%d" % (time.time() + 5))
    doc = json.loads(b)
    check(s == 200 and doc["errors"] and len(doc["nodes"]) == 4, "errors200: real table with errors")
    fp.set_rules([{"action": "slow", "kind": "nodes", "delay": 0.4}])
    t = time.monotonic()
    check(c.nodes()[0] == 200 and time.monotonic() - t >= 0.4, "slow: answered after the delay")

    for chunked in (True, False):
        fp.set_rules([{"action": "oversize", "kind": "nodes", "size": 3 << 20, "chunked": chunked}])
        s, b, r = c.req("GET", V + "/nodes")
        doc = json.loads(b)
        check(s == 200 and len(b) == 3 << 20 and len(doc["nodes"]) == 4 and
              (r.getheader("Transfer-Encoding") == "chunked") == chunked,
              "oversize: 3 MiB of valid JSON, chunked=%s" % chunked)

    fp.set_rules([{"action": "cut", "kind": "nodes"}])
    try:
        c.req("GET", V + "/nodes")
        check(False, "cut: the answer must be incomplete")
    except http.client.IncompleteRead:
        check(True, "cut: connection closed mid-body")
    fp.set_rules([{"action": "close", "kind": "nodes"}])
    try:
        c.req("GET", V + "/nodes")
        check(False, "close: no answer expected")
    except (http.client.RemoteDisconnected, ConnectionResetError):
        check(True, "close: connection closed without an answer")

    # Control endpoint.
    control(fp.control_url, "DELETE", "/rules")
    check(c.nodes()[0] == 200, "DELETE /rules: passing through again")
    rid = control(fp.control_url, "POST", "/rules", {"action": "drop", "kind": "nodes", "names": ["n1"]})["id"]
    check(c.nodes() == (200, ["n2", "n3", "n4"]), "POST /rules applies at once")
    cnt = control(fp.control_url, "GET", "/counts")
    check(cnt["rules"] == {str(rid): 1}, "GET /counts per rule")
    check([r["action"] for r in control(fp.control_url, "GET", "/rules")] == ["drop"], "GET /rules")
    check(len(control(fp.control_url, "GET", "/history?path=" + V + "/nodes")) == 4, "GET /history")
    control(fp.control_url, "DELETE", "/rules/%d" % rid)
    check(c.nodes() == (200, ["n1", "n2", "n3", "n4"]), "DELETE /rules/ID")
    try:
        control(fp.control_url, "POST", "/rules", {"action": "nonsense"})
        check(False, "bad rule refused")
    except RuntimeError:
        check(True, "bad rule refused with 400")


def script(fake):
    lib = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib", "faultproxy.py")
    p = subprocess.Popen([sys.executable, lib, "--upstream", fake.url, "--rule",
                          json.dumps({"action": "shrink", "kind": "nodes", "keep": 2})],
                         stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline().split()
        check(line[:2] == ["faultproxy:", "proxy"], "script prints its addresses")
        c = Client(line[2])
        check(c.nodes() == (200, ["n1", "n2"]), "script: --rule applied")
        control(line[4], "DELETE", "/rules")
        check(c.nodes()[1] == ["n1", "n2", "n3", "n4"], "script: control endpoint")
    finally:
        p.terminate()
        p.wait(10)


if __name__ == "__main__":
    main()
