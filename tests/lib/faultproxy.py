#!/usr/bin/env python3
"""faultproxy: a fault-injecting HTTP proxy for slurmrestd (Python 3 standard
library only), put between slurmop and a real slurmrestd in the tests.

It forwards every request (any method, keep-alive, all end-to-end headers
including X-SLURM-USER-NAME / X-SLURM-USER-TOKEN, request bodies) to the real
slurmrestd, and applies *rules* that can be changed at run time, either with
the Python API (the proxy runs in threads of the test process) or through a
small JSON control endpoint on its own port (when run as a script).

Rules
-----
A rule matches a request by method regex and path regex (the path includes the
query string), or by a *kind* name (see KINDS: "nodes" = GET .../nodes,
"node" = GET .../node/NAME, "node_reads" = both, "jobs", "ping", "writes",
"any"). The first matching rule (in the order they were added) applies; no
rule = pass through. Each rule counts the requests it applied to; a rule with
`times=N` applies to the next N matching requests only, then stops matching.

Actions (params in brackets):

  pass          forward unchanged
  empty         the real answer with its list ("nodes", else "jobs") emptied,
                HTTP 200
  drop          the real answer without the named entries [names=[...]]
                (nodes by "name", jobs by "job_id" or "name")
  shrink        keep only the first K entries [keep=K] or a fraction of them
                [fraction=F, rounded down]
  stale         replay an older recorded answer of the same path instead of
                asking slurmrestd. Which one is chosen at the rule's first
                use (and then kept, frozen): [age=K] the K-th newest answer
                recorded before that (1 = the newest; default: the oldest
                kept), or [drained_idle=[names]] the newest recorded answer in
                which every one of these nodes that appears is drained
                (DRAIN flag) and idle (no allocated CPUs), at least one
                appearing, or, in-process only, [select=callable(list of
                Answer) -> Answer or None]. Nothing suitable recorded: the
                request is passed through (counted in `stale_miss`).
  error         HTTP 500 with a Slurm-shaped error body (v0.0.38 shape:
                meta, errors=[{error, errno}], empty list) without asking
                slurmrestd [status=500, error="...", errno=N, forward=False;
                forward=True sends the request on (a write then happens) and
                replaces only the answer]
  errors200     the real answer, HTTP 200, with a non-empty "errors" array
                [error, errno]
  slow          the real answer, sent N seconds after it was read [delay=N];
                its content is as old as the delay when it arrives
  oversize      HTTP 200 whose body is the real answer padded (an extra
                leading "padding" string member) to a size [size=bytes,
                default 300 MiB, over slurmop's 64 MiB cap], streamed
                chunked without Content-Length [chunked=True] or with the
                exact Content-Length [chunked=False]
  cut           the real answer's headers with its full Content-Length, then
                part of the body [fraction=0.5], then the connection is
                closed
  close         the connection is closed without an answer (as when
                slurmrestd dies)
  rewrite       in-process only: the real answer, HTTP 200, with its JSON
                document replaced by fn(doc) [fn=callable(dict) -> dict]
                (e.g. the pings of a ping answer, to stage a failover)

update_time: slurmop polls GET nodes?update_time=T and slurmrestd answers 304
(no body) when nothing changed. For every action that alters or replaces the
body of a read (empty, drop, shrink, errors200, oversize, cut), the proxy
removes update_time from the query it sends on (so slurmrestd answers a full
200 table) and alters that, so the fault bites on every poll and not only on
the first one after a change. Set force_full=False on the rule to keep
update_time (a 304 is then passed through as it is).
Healing: once a path has been answered with an altered or replayed body, the
next request to it that passes through is sent without update_time too (once,
until a real 200 comes back), so that after the rule is removed a 304 ("no
change since the altered answer") cannot confirm the lie; a real transient
fault would be followed by a real change. FaultProxy(heal=False) turns this off.

Recording: every real 200 answer to a GET is kept, per path without the
query, in a ring of the last `history` answers (default 64); replayed or
altered answers are not recorded.

Python API (in-process):

    from faultproxy import FaultProxy
    with FaultProxy("http://127.0.0.1:6820") as fp:      # fp.url, fp.control_url
        rid = fp.add_rule("empty", kind="node_reads")
        ...
        fp.count(rid)            # requests the rule applied to
        fp.clear_rules()         # pass through again
        fp.kind_counts()         # requests seen per kind
        fp.recorded(path)        # the real answers kept for a path (Answer: status, headers, body, when)
        fp.recorded_paths()

Script:

    python3 faultproxy.py --upstream http://127.0.0.1:6820 [--listen 127.0.0.1:0]
                          [--control 127.0.0.1:0] [--rule JSON]...
    prints "faultproxy: proxy http://HOST:PORT control http://HOST:PORT"

Control endpoint (JSON bodies):

    GET    /rules             the rules with their counts
    POST   /rules             add a rule {"action": ..., "kind" | "method"+"path", params...} -> {"id": N}
    PUT    /rules             replace all rules with a list of rules
    DELETE /rules             remove every rule (pass through)
    DELETE /rules/ID          remove one rule
    GET    /counts            {"rules": {id: n}, "kinds": {kind: n}, "total": n, "stale_miss": n}
    POST   /counts/reset      zero the counts
    GET    /history?path=P    the recorded answers of path P (time, status, size)
"""

import argparse
import collections
import http.client
import http.server
import json
import re
import socket
import socketserver
import sys
import threading
import time
import urllib.parse

__all__ = ["FaultProxy", "Rule", "Answer", "KINDS", "control"]

# Request kinds: name -> (method regex, path regex). Matched in this order for
# the per-kind counts; usable as `kind=` in rules.
KINDS = collections.OrderedDict([
    ("nodes", ("GET", r"^/slurm/v[^/]+/nodes/?(\?.*)?$")),
    ("node", ("GET", r"^/slurm/v[^/]+/node/[^/?]+/?(\?.*)?$")),
    ("jobs", ("GET", r"^/slurm/v[^/]+/jobs/?(\?.*)?$")),
    ("ping", ("GET", r"^/slurm/v[^/]+/ping/?(\?.*)?$")),
    ("reservations", ("GET", r"^/slurm/v[^/]+/reservations?(/.*)?(\?.*)?$")),
    ("openapi", ("GET", r"^/openapi")),
    ("writes", ("POST|PUT|PATCH|DELETE", r".*")),
    ("other", (".*", r".*")),
])
# Aliases usable in rules only.
KIND_ALIASES = {
    "node_reads": ("GET", r"^/slurm/v[^/]+/nodes?(/[^/?]*)?/?(\?.*)?$"),
    "reads": ("GET", r".*"),
    "any": (".*", r".*"),
}

ACTIONS = ("pass", "empty", "drop", "shrink", "stale", "error", "errors200", "slow", "oversize", "cut", "close",
           "rewrite")
# Actions that need a whole body from slurmrestd (update_time is removed).
BODY_ACTIONS = ("empty", "drop", "shrink", "errors200", "oversize", "cut", "rewrite")

HOP = {"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te",
       "trailer", "trailers", "transfer-encoding", "upgrade", "content-length"}

MIB = 1 << 20


class Answer:
    """One answer: status, headers (list of pairs), body bytes, when read."""

    def __init__(self, status, reason, headers, body, when=None):
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body
        self.when = time.time() if when is None else when

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def summary(self):
        return {"time": self.when, "status": self.status, "size": len(self.body)}


class Rule:
    _ids = 0
    _lock = threading.Lock()

    def __init__(self, action, kind=None, method=None, path=None, times=None, name=None, force_full=True,
                 **params):
        if action not in ACTIONS:
            raise ValueError("unknown action %r (want one of %s)" % (action, ", ".join(ACTIONS)))
        if kind is not None:
            table = dict(KINDS, **KIND_ALIASES)
            if kind not in table:
                raise ValueError("unknown kind %r" % kind)
            km, kp = table[kind]
            method = method or km
            path = path or kp
        with Rule._lock:
            Rule._ids += 1
            self.id = Rule._ids
        self.action = action
        self.kind = kind
        self.method = method or ".*"
        self.path = path or ".*"
        self._mre = re.compile(r"^(?:%s)$" % self.method, re.I)
        self._pre = re.compile(self.path)
        self.times = times
        self.name = name or "%s#%d" % (action, self.id)
        self.force_full = force_full
        self.params = params
        self.count = 0
        self.frozen = {}  # stale: path -> the Answer chosen at first use

    def matches(self, method, path):
        if self.times is not None and self.count >= self.times:
            return False
        return bool(self._mre.match(method) and self._pre.search(path))

    def describe(self):
        p = {k: v for k, v in self.params.items() if not callable(v)}
        return {"id": self.id, "name": self.name, "action": self.action, "kind": self.kind,
                "method": self.method, "path": self.path, "times": self.times, "force_full": self.force_full,
                "params": p, "count": self.count}


def classify(method, path):
    for name, (m, p) in KINDS.items():
        if re.match(r"^(?:%s)$" % m, method, re.I) and re.search(p, path):
            return name
    return "other"


def strip_update_time(path):
    u = urllib.parse.urlsplit(path)
    if not u.query:
        return path
    q = [(k, v) for k, v in urllib.parse.parse_qsl(u.query, keep_blank_values=True) if k != "update_time"]
    return urllib.parse.urlunsplit(("", "", u.path, urllib.parse.urlencode(q), ""))


def path_key(path):
    return urllib.parse.urlsplit(path).path


def list_key(doc):
    for k in ("nodes", "jobs", "reservations"):
        if isinstance(doc.get(k), list):
            return k
    return None


def slurm_error_doc(error, errno, list_name="nodes"):
    return {"meta": {"plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
                     "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": "22.05.8"}},
            "errors": [{"error": error, "errno": errno}], list_name: []}


def node_drained_idle(n):
    flags = set(n.get("state_flags") or [])
    state = n.get("state")
    if isinstance(state, list):  # v0.0.40+
        flags |= set(state)
        state = "idle" if "IDLE" in state else "busy"
    return "DRAIN" in flags and not (n.get("alloc_cpus") or 0) and str(state).lower() == "idle"


def pick_drained_idle(names):
    names = set(names)

    def select(answers):
        for a in reversed(answers):
            doc = a.json()
            if not isinstance(doc, dict):
                continue
            seen = [n for n in doc.get("nodes") or [] if isinstance(n, dict) and n.get("name") in names]
            if seen and all(node_drained_idle(n) for n in seen):
                return a
        return None
    return select


class FaultProxy:
    """The proxy (and optionally its control endpoint), served by threads."""

    def __init__(self, upstream, listen=("127.0.0.1", 0), control=("127.0.0.1", 0), history=64, timeout=60,
                 log=None, heal=True):
        u = urllib.parse.urlsplit(upstream)
        if u.scheme != "http":
            raise ValueError("upstream must be http://HOST:PORT")
        self.upstream = (u.hostname, u.port or 80)
        self.listen = listen
        self.control_addr = control
        self.history_len = history
        self.timeout = timeout
        self.log = log
        self.lock = threading.Lock()
        self.rules = []
        self.kinds = collections.Counter()
        self.total = 0
        self.stale_miss = 0
        self.history = {}  # path -> deque of Answer
        self.heal = heal
        self.owed = set()  # paths owed a full real answer (see "Healing")
        self.servers = []
        self.threads = []
        self.url = None
        self.control_url = None

    # ---- lifecycle ----

    def start(self):
        proxy = self

        class Srv(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 128

        class PH(_ProxyHandler):
            fp = proxy

        s = Srv(self.listen, PH)
        self.servers.append(s)
        self.url = "http://%s:%d" % s.server_address[:2]
        if self.control_addr:
            class CH(_ControlHandler):
                fp = proxy
            c = Srv(self.control_addr, CH)
            self.servers.append(c)
            self.control_url = "http://%s:%d" % c.server_address[:2]
        for srv in self.servers:
            t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def stop(self):
        for s in self.servers:
            s.shutdown()
            s.server_close()
        self.servers = []

    def __enter__(self):
        return self.start()

    def __exit__(self, *a):
        self.stop()

    # ---- rules ----

    def add_rule(self, action, **kw):
        """Add a rule (see the module doc); returns its id."""
        r = kw.pop("rule", None) or Rule(action, **kw)
        with self.lock:
            self.rules.append(r)
        return r.id

    def set_rules(self, specs):
        """Replace every rule; specs are dicts of add_rule's arguments."""
        new = [Rule(**dict(s)) for s in specs]
        with self.lock:
            self.rules = new
        return [r.id for r in new]

    def remove_rule(self, rid):
        with self.lock:
            n = len(self.rules)
            self.rules = [r for r in self.rules if r.id != rid]
            return len(self.rules) != n

    def clear_rules(self):
        with self.lock:
            self.rules = []

    def describe(self):
        with self.lock:
            return [r.describe() for r in self.rules]

    def rule(self, rid):
        with self.lock:
            for r in self.rules:
                if r.id == rid:
                    return r
        return None

    def count(self, rid):
        r = self.rule(rid)
        return r.count if r else 0

    def counts(self):
        with self.lock:
            return {"rules": {r.id: r.count for r in self.rules}, "kinds": dict(self.kinds), "total": self.total,
                    "stale_miss": self.stale_miss}

    def kind_counts(self):
        with self.lock:
            return dict(self.kinds)

    def reset_counts(self):
        with self.lock:
            for r in self.rules:
                r.count = 0
            self.kinds.clear()
            self.total = 0
            self.stale_miss = 0

    def recorded_paths(self):
        with self.lock:
            return sorted(self.history)

    def recorded(self, path):
        with self.lock:
            return list(self.history.get(path_key(path), ()))

    # ---- internals used by the handler ----

    def _match(self, method, path):
        kind = classify(method, path)
        with self.lock:
            self.total += 1
            self.kinds[kind] += 1
            for r in self.rules:
                if r.matches(method, path):
                    r.count += 1
                    return r
        return None

    def _owe(self, path):
        if self.heal:
            with self.lock:
                self.owed.add(path_key(path))

    def _owed(self, path):
        with self.lock:
            return path_key(path) in self.owed

    def _paid(self, path):
        with self.lock:
            self.owed.discard(path_key(path))

    def _record(self, path, ans):
        with self.lock:
            d = self.history.setdefault(path_key(path), collections.deque(maxlen=self.history_len))
            d.append(ans)

    def _stale_pick(self, rule, path):
        key = path_key(path)
        with self.lock:
            if key in rule.frozen:
                return rule.frozen[key]
            answers = list(self.history.get(key, ()))
        p = rule.params
        chosen = None
        if answers:
            if callable(p.get("select")):
                chosen = p["select"](answers)
            elif p.get("drained_idle"):
                chosen = pick_drained_idle(p["drained_idle"])(answers)
            elif p.get("age"):
                k = int(p["age"])
                chosen = answers[-k] if k <= len(answers) else None
            else:
                chosen = answers[0]
        with self.lock:
            if chosen is None:
                self.stale_miss += 1
            else:
                rule.frozen[key] = chosen
        return chosen

    def _say(self, msg):
        if self.log:
            self.log("faultproxy: " + msg)


class _Upstream:
    """One keep-alive connection to slurmrestd per client connection."""

    def __init__(self, addr, timeout):
        self.addr = addr
        self.timeout = timeout
        self.conn = None

    def request(self, method, path, headers, body):
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.addr[0], self.addr[1], timeout=self.timeout)
            try:
                self.conn.request(method, path, body=body, headers=headers)
                r = self.conn.getresponse()
                data = r.read()
                hdrs = [(k, v) for k, v in r.getheaders() if k.lower() not in HOP]
                if r.will_close:
                    self.close()
                return Answer(r.status, r.reason, hdrs, data)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                # A keep-alive connection slurmrestd closed: try once more on a new one.
                self.close()
                if attempt or method not in ("GET", "HEAD"):
                    raise e
            except Exception:
                self.close()
                raise
        raise OSError("unreachable")

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class _Close(Exception):
    pass


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fp = None  # set by FaultProxy.start

    def log_message(self, fmt, *args):
        pass

    def setup(self):
        super().setup()
        self.up = _Upstream(self.fp.upstream, self.fp.timeout)

    def finish(self):
        try:
            super().finish()
        finally:
            self.up.close()

    def _body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            out = b""
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline(65537)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else None

    def _forward(self, path):
        hdrs = {k: v for k, v in self.headers.items() if k.lower() not in HOP and k.lower() != "host"}
        hdrs["Host"] = "%s:%d" % self.fp.upstream
        body = self.req_body
        if body is not None:
            hdrs["Content-Length"] = str(len(body))
        try:
            ans = self.up.request(self.command, path, hdrs, body)
        except OSError as e:
            self.fp._say("upstream %s %s: %s" % (self.command, path, e))
            raise _Close()
        if self.command == "GET" and ans.status == 200:
            self.fp._record(path, ans)
        return ans

    def _send(self, ans, body=None):
        body = ans.body if body is None else body
        self.send_response(ans.status, ans.reason)
        for k, v in ans.headers:
            self.send_header(k, v)
        if ans.status not in (204, 304) and not (100 <= ans.status < 200):
            self.send_header("Content-Length", str(len(body)))
        else:
            body = b""
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def _handle(self):
        self.req_body = self._body()
        path = self.path
        rule = self.fp._match(self.command, path)
        action = rule.action if rule else "pass"
        p = rule.params if rule else {}
        send_path = path
        if rule and action in BODY_ACTIONS and rule.force_full:
            send_path = strip_update_time(path)
        healing = action == "pass" and self.command == "GET" and self.fp._owed(path)
        if healing:
            send_path = strip_update_time(path)

        if action == "close":
            raise _Close()
        if action == "error":
            if p.get("forward"):
                self._forward(send_path)
            doc = slurm_error_doc(p.get("error", "Unspecified error"), p.get("errno", -1),
                                  "jobs" if "/jobs" in path else "nodes")
            body = json.dumps(doc).encode()
            self._send(Answer(int(p.get("status", 500)), None, [("Content-Type", "application/json")], body))
            return
        if action == "stale":
            old = self.fp._stale_pick(rule, path)
            if old is not None:
                self.fp._owe(path)
                self._send(old)
                return
            action = "pass"
        ans = self._forward(send_path)
        if action == "pass":
            if healing and ans.status == 200:
                self.fp._paid(path)
            self._send(ans)
            return
        if action == "slow":
            time.sleep(float(p.get("delay", 5)))
            self._send(ans)
            return
        doc = ans.json() if ans.status == 200 and ans.body else None
        if not isinstance(doc, dict):
            if action in ("oversize", "cut"):
                doc = {}
            else:  # a 304, an error, not JSON: nothing to alter
                self._send(ans)
                return
        if action in ("empty", "drop", "shrink"):
            k = list_key(doc)
            if k:
                items = doc[k]
                if action == "empty":
                    items = []
                elif action == "drop":
                    names = set(p.get("names") or [])
                    items = [x for x in items if not (isinstance(x, dict) and (
                        x.get("name") in names or str(x.get("job_id")) in names))]
                else:
                    if "keep" in p:
                        keep = int(p["keep"])
                    else:
                        keep = int(len(items) * float(p.get("fraction", 0.5)))
                    items = items[:max(0, keep)]
                doc[k] = items
            self.fp._owe(path)
            self._send(ans, json.dumps(doc).encode())
            return
        if action == "rewrite":
            doc = p["fn"](doc)
            self.fp._owe(path)
            self._send(ans, json.dumps(doc).encode())
            return
        if action == "errors200":
            doc["errors"] = [{"error": p.get("error", "Unable to contact slurm controller (connect failure)"),
                              "errno": p.get("errno", 1007)}]
            self.fp._owe(path)
            self._send(ans, json.dumps(doc).encode())
            return
        self.fp._owe(path)
        if action == "oversize":
            self._oversize(ans, doc, int(p.get("size", 300 * MIB)), p.get("chunked", True))
            return
        if action == "cut":
            body = json.dumps(doc).encode()
            part = body[:int(len(body) * float(p.get("fraction", 0.5)))]
            self.send_response(200)
            for k, v in ans.headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(part)
            self.wfile.flush()
            raise _Close()
        raise AssertionError(action)

    def _oversize(self, ans, doc, size, chunked):
        tail = json.dumps(doc).encode()
        # {"padding":"xxx...", + the real members
        head = b'{"padding":"'
        rest = b'"' + ((b"," + tail[1:]) if len(tail) > 2 else b"}")
        pad = max(0, size - len(head) - len(rest))
        self.send_response(200)
        for k, v in ans.headers:
            self.send_header(k, v)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(len(head) + pad + len(rest)))
        self.end_headers()
        block = b"x" * MIB

        def put(b):
            if chunked:
                self.wfile.write(b"%x\r\n" % len(b) + b + b"\r\n")
            else:
                self.wfile.write(b)
        put(head)
        left = pad
        while left > 0:
            n = min(left, MIB)
            put(block if n == MIB else block[:n])
            left -= n
        put(rest)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _run(self):
        try:
            self._handle()
        except _Close:
            self.close_connection = True
            try:
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _run


class _ControlHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fp = None

    def log_message(self, fmt, *args):
        pass

    def _reply(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self):
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"null") if n else None

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        if u.path == "/rules":
            return self._reply(200, self.fp.describe())
        if u.path == "/counts":
            c = self.fp.counts()
            c["rules"] = {str(k): v for k, v in c["rules"].items()}
            return self._reply(200, c)
        if u.path == "/history":
            q = dict(urllib.parse.parse_qsl(u.query))
            return self._reply(200, [a.summary() for a in self.fp.recorded(q.get("path", ""))])
        self._reply(404, {"error": "not found"})

    def do_POST(self):
        try:
            if self.path == "/rules":
                return self._reply(201, {"id": self.fp.add_rule(**self._json())})
            if self.path == "/counts/reset":
                self.fp.reset_counts()
                return self._reply(200, {})
        except (TypeError, ValueError) as e:
            return self._reply(400, {"error": str(e)})
        self._reply(404, {"error": "not found"})

    def do_PUT(self):
        try:
            if self.path == "/rules":
                return self._reply(200, {"ids": self.fp.set_rules(self._json() or [])})
        except (TypeError, ValueError) as e:
            return self._reply(400, {"error": str(e)})
        self._reply(404, {"error": "not found"})

    def do_DELETE(self):
        if self.path == "/rules":
            self.fp.clear_rules()
            return self._reply(200, {})
        m = re.match(r"^/rules/(\d+)$", self.path)
        if m:
            ok = self.fp.remove_rule(int(m.group(1)))
            return self._reply(200 if ok else 404, {})
        self._reply(404, {"error": "not found"})


def control(control_url, method, path, body=None, timeout=10):
    """A request to a faultproxy's control endpoint; returns the decoded JSON."""
    u = urllib.parse.urlsplit(control_url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        r = c.getresponse()
        out = json.loads(r.read() or b"null")
        if r.status >= 400:
            raise RuntimeError("%s %s: %s %s" % (method, path, r.status, out))
        return out
    finally:
        c.close()


def _addr(s):
    host, _, port = s.rpartition(":")
    return (host or "127.0.0.1", int(port))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--upstream", required=True, help="the real slurmrestd, http://HOST:PORT")
    ap.add_argument("--listen", default="127.0.0.1:0", help="proxy address (default 127.0.0.1:0)")
    ap.add_argument("--control", default="127.0.0.1:0", help="control address (default 127.0.0.1:0)")
    ap.add_argument("--history", type=int, default=64, help="answers recorded per path (default 64)")
    ap.add_argument("--rule", action="append", default=[], help="a rule as JSON (repeatable)")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args(argv)
    fp = FaultProxy(a.upstream, listen=_addr(a.listen), control=_addr(a.control), history=a.history,
                    log=(lambda m: print(m, file=sys.stderr, flush=True)) if a.verbose else None)
    for r in a.rule:
        fp.add_rule(**json.loads(r))
    fp.start()
    print("faultproxy: proxy %s control %s" % (fp.url, fp.control_url), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        fp.stop()


if __name__ == "__main__":
    main()
