"""Helpers for integration tests that need a Kubernetes API server: start
kubesim, read its kubeconfig and port file, talk HTTP(S) with client
certificates or tokens, and stream watches.

Python standard library only. Typical use:

    from kubesim import Kubesim
    with Kubesim(nodes=4) as ks:
        c = ks.client()                      # HTTPS, client certificate from the kubeconfig
        r = c.post("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "a"}})
        assert r.status == 201, r.text
        with c.watch("/api/v1/namespaces/default/pods", resourceVersion=r.json()["metadata"]["resourceVersion"]) as w:
            ev = w.next_event(timeout=5)
        ks.admin("POST", "/kubesim/faults", {"rate429": 0.5})

The binary is found through $OP_BUILD_DIR (set by ctest) or $KUBESIM_BIN.
"""

import base64
import json
import os
import select
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.parse
import http.client

__all__ = ["Kubesim", "Client", "Response", "Watch", "load_kubeconfig", "kubesim_binary"]


def kubesim_binary():
    """Path of the kubesim executable."""
    if os.environ.get("KUBESIM_BIN"):
        return os.environ["KUBESIM_BIN"]
    build = os.environ.get("OP_BUILD_DIR")
    if not build:
        here = os.path.dirname(os.path.abspath(__file__))
        build = os.path.join(here, "..", "..", "build")
    return os.path.join(build, "kubesim")


# ---- kubeconfig -------------------------------------------------------------

def _scalar(v):
    v = v.strip()
    if v in ("", "~", "null"):
        return None
    if v == "{}":
        return {}
    if v == "[]":
        return []
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        return v[1:-1]
    if v in ("true", "false"):
        return v == "true"
    try:
        return int(v)
    except ValueError:
        return v


def _parse_yaml(text):
    """A small YAML subset: block maps, block lists of maps or scalars,
    plain/quoted scalars, {} and []. Enough for kubeconfigs (ours and
    kind's). JSON documents are parsed as JSON."""
    if text.lstrip().startswith("{"):
        return json.loads(text)
    lines = []
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        lines.append((len(raw) - len(raw.lstrip(" ")), raw.strip()))
    pos = [0]

    def parse_block(indent):
        if pos[0] >= len(lines):
            return None
        ind, s = lines[pos[0]]
        if s.startswith("- ") or s == "-":
            return parse_list(ind)
        return parse_map(ind)

    def parse_map(indent, first=None):
        out = {}
        while pos[0] < len(lines):
            ind, s = lines[pos[0]]
            if first is not None:
                ind, s = first
                first = None
            elif ind < indent:
                break
            else:
                pos[0] += 1
            if ind > indent:
                raise ValueError("bad indentation: %r" % s)
            key, _, rest = s.partition(":")
            key = _scalar(key)
            if rest.strip():
                out[key] = _scalar(rest)
            elif pos[0] < len(lines) and (lines[pos[0]][0] > ind or
                                          (lines[pos[0]][0] == ind and lines[pos[0]][1].startswith("-"))):
                out[key] = parse_block(lines[pos[0]][0])
            else:
                out[key] = None
        return out

    def parse_list(indent):
        out = []
        while pos[0] < len(lines):
            ind, s = lines[pos[0]]
            if ind != indent or not (s.startswith("- ") or s == "-"):
                break
            pos[0] += 1
            item = s[2:].strip() if s != "-" else ""
            if not item:
                out.append(parse_block(lines[pos[0]][0]) if pos[0] < len(lines) else None)
            elif ":" in item and not item.startswith(("'", '"')):
                # a map whose first key sits on the dash line
                out.append(parse_map(indent + 2, first=(indent + 2, item)))
            else:
                out.append(_scalar(item))
        return out

    return parse_block(0)


def load_kubeconfig(path):
    """The current context of a kubeconfig as a dict:
    {"server", "ca_pem", "cert_pem", "key_pem", "token", "namespace"} (bytes for PEMs, None when absent)."""
    with open(path) as f:
        doc = _parse_yaml(f.read())
    ctx_name = doc.get("current-context")
    ctx = next(c["context"] for c in doc["contexts"] if c["name"] == ctx_name)
    cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
    user = next((u["user"] for u in doc.get("users") or [] if u["name"] == ctx.get("user")), {}) or {}
    base = os.path.dirname(os.path.abspath(path))

    def data(obj, key):
        if obj.get(key + "-data"):
            return base64.b64decode(obj[key + "-data"])
        if obj.get(key):
            p = obj[key] if os.path.isabs(obj[key]) else os.path.join(base, obj[key])
            with open(p, "rb") as f:
                return f.read()
        return None

    return {
        "server": cluster["server"],
        "ca_pem": data(cluster, "certificate-authority"),
        "cert_pem": data(user, "client-certificate"),
        "key_pem": data(user, "client-key"),
        "token": user.get("token"),
        "namespace": ctx.get("namespace") or "default",
    }


# ---- HTTP client -------------------------------------------------------------

class Response:
    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers  # list of (name, value)
        self.body = body

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def header(self, name):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<Response %d %s>" % (self.status, self.text[:200])


def _qs(path, params):
    if not params:
        return path
    items = [(k, "true" if v is True else "false" if v is False else str(v)) for k, v in params.items()
             if v is not None]
    return path + ("&" if "?" in path else "?") + urllib.parse.urlencode(items)


class Client:
    """A keep-alive HTTP/1.1 client for one server. ca/cert/key are PEM file
    paths; token is a bearer token. Not thread-safe."""

    def __init__(self, base_url, ca_file=None, cert_file=None, key_file=None, token=None, timeout=30,
                 user_agent="kubesim-test/1.0"):
        u = urllib.parse.urlsplit(base_url)
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = u.port
        self.ca_file, self.cert_file, self.key_file = ca_file, cert_file, key_file
        self.token = token
        self.timeout = timeout
        self.user_agent = user_agent
        self._conn = None

    def ssl_context(self):
        ctx = ssl.create_default_context(cafile=self.ca_file) if self.ca_file else ssl._create_unverified_context()
        if self.cert_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    def _connect(self):
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self.ssl_context())
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def close(self):
        if self._conn:
            self._conn.close()
            self._conn = None

    def headers(self, extra=None):
        h = {"User-Agent": self.user_agent, "Accept": "application/json"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        if extra:
            h.update(extra)
        return h

    def request(self, method, path, body=None, content_type=None, headers=None, params=None, retry=True):
        """Send one request; body may be bytes, str or a JSON-able object."""
        path = _qs(path, params)
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        h = self.headers(headers)
        if body is not None:
            h["Content-Type"] = content_type or "application/json"
        for attempt in (0, 1):
            if self._conn is None:
                self._conn = self._connect()
            try:
                self._conn.request(method, path, body=body, headers=h)
                r = self._conn.getresponse()
                data = r.read()
                resp = Response(r.status, r.reason, r.getheaders(), data)
                if r.getheader("Connection", "").lower() == "close":
                    self.close()
                return resp
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                    http.client.CannotSendRequest, http.client.BadStatusLine):
                self.close()
                if attempt or not retry:
                    raise
        raise AssertionError("unreachable")

    def get(self, path, **params):
        return self.request("GET", path, params=params)

    def post(self, path, body, **kw):
        return self.request("POST", path, body=body, **kw)

    def put(self, path, body, **kw):
        return self.request("PUT", path, body=body, **kw)

    def patch(self, path, body, patch_type="merge", **kw):
        ct = {"merge": "application/merge-patch+json", "json": "application/json-patch+json",
              "strategic": "application/strategic-merge-patch+json",
              "apply": "application/apply-patch+yaml"}.get(patch_type, patch_type)
        return self.request("PATCH", path, body=body, content_type=ct, **kw)

    def delete(self, path, body=None, **kw):
        return self.request("DELETE", path, body=body, **kw)

    def watch(self, path, **params):
        """Open a watch (?watch=1 added) and return a Watch (a context manager)."""
        params = dict(params)
        params.setdefault("watch", "1")
        return Watch(self, _qs(path, params))


class Watch:
    """A watch stream read from a raw socket, chunked decoding done here so
    that framing (chunk boundaries, the zero-size terminator) can be checked.

    next_event() returns the next event dict, or None when the stream ended;
    ended_cleanly tells whether the terminating 0-size chunk arrived."""

    def __init__(self, client, path, read_size=65536):
        self.client = client
        self.path = path
        self.read_size = read_size
        self.sock = None
        self.status = None
        self.headers = {}
        self.buf = b""        # undecoded bytes from the socket
        self.data = b""       # decoded body bytes not yet split into events
        self.chunks = 0
        self.ended = False
        self.ended_cleanly = False
        self.error_body = b""
        self._open()

    def _open(self):
        c = self.client
        raw = socket.create_connection((c.host, c.port), timeout=c.timeout)
        if c.scheme == "https":
            raw = c.ssl_context().wrap_socket(raw, server_hostname=c.host)
        self.sock = raw
        h = c.headers()
        lines = ["GET %s HTTP/1.1" % self.path, "Host: %s:%d" % (c.host, c.port)]
        lines += ["%s: %s" % kv for kv in h.items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            b = self.sock.recv(1)
            if not b:
                raise ConnectionError("closed before the response head")
            head += b
        status_line, *hdrs = head.decode().split("\r\n")
        self.status = int(status_line.split()[1])
        for h in hdrs:
            if ":" in h:
                k, v = h.split(":", 1)
                self.headers[k.strip().lower()] = v.strip()
        if self.headers.get("transfer-encoding", "").lower() != "chunked":
            n = int(self.headers.get("content-length", "0"))
            while len(self.error_body) < n:
                b = self.sock.recv(n - len(self.error_body))
                if not b:
                    break
                self.error_body += b
            self.ended = True

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def close(self):
        if self.sock:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None

    def _recv(self, timeout):
        if self.sock is None:
            return b""
        # TLS may hold decrypted bytes that select cannot see
        pending = isinstance(self.sock, ssl.SSLSocket) and self.sock.pending()
        if not pending:
            r, _, _ = select.select([self.sock], [], [], timeout)
            if not r:
                raise TimeoutError("no data within %.1fs" % timeout)
        try:
            return self.sock.recv(self.read_size)
        except (ConnectionResetError, ssl.SSLError, OSError):
            return b""

    def _decode(self):
        """Move complete chunks from buf to data. Returns False at the terminator."""
        while True:
            i = self.buf.find(b"\r\n")
            if i < 0:
                return True
            size = int(self.buf[:i].split(b";")[0], 16)
            if size == 0:
                if len(self.buf) >= i + 4:
                    self.ended = True
                    self.ended_cleanly = self.buf[i + 2:i + 4] == b"\r\n"
                    return False
                return True
            if len(self.buf) < i + 2 + size + 2:
                return True
            self.data += self.buf[i + 2:i + 2 + size]
            self.chunks += 1
            self.buf = self.buf[i + 2 + size + 2:]

    def next_event(self, timeout=10):
        """The next event, or None when the stream ended. Raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            nl = self.data.find(b"\n")
            if nl >= 0:
                line, self.data = self.data[:nl], self.data[nl + 1:]
                if line.strip():
                    return json.loads(line)
                continue
            if self.ended:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no event within %.1fs" % timeout)
            b = self._recv(left)
            if not b:
                self.ended = True
                return None
            self.buf += b
            self._decode()

    def events(self, count, timeout=10):
        """Exactly count events (AssertionError if the stream ends first)."""
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < count:
            ev = self.next_event(max(0.01, deadline - time.monotonic()))
            if ev is None:
                raise AssertionError("stream ended after %d of %d events: %r" % (len(out), count, out))
            out.append(ev)
        return out

    def until(self, pred, timeout=10):
        """Events up to and including the first one for which pred(ev) is true."""
        out = []
        deadline = time.monotonic() + timeout
        while True:
            ev = self.next_event(max(0.01, deadline - time.monotonic()))
            if ev is None:
                raise AssertionError("stream ended before the expected event: %r" % out)
            out.append(ev)
            if pred(ev):
                return out

    def drain(self, timeout=10):
        """Every event until the stream ends."""
        out = []
        deadline = time.monotonic() + timeout
        while True:
            ev = self.next_event(max(0.01, deadline - time.monotonic()))
            if ev is None:
                return out
            out.append(ev)


# ---- the server ----------------------------------------------------------------

class Kubesim:
    """A kubesim process on loopback. Keyword arguments become flags
    (nodes=4 -> --nodes 4, require_client_cert=True -> --require-client-cert,
    node_label=["a=b","c=d"] -> repeated). A plain-HTTP listener is always
    added (for admin calls and plain tests): see http_url."""

    def __init__(self, *args, tls=True, http_listener=True, state=None, workdir=None, env=None, **flags):
        self.tmp = tempfile.TemporaryDirectory(prefix="kubesim-") if workdir is None else None
        self.dir = workdir or self.tmp.name
        self.args = list(args)
        self.tls = tls
        self.http_listener = http_listener
        self.state = state
        self.flags = flags
        self.env = env
        self.proc = None
        self.url = None
        self.http_url = None
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        self.port_file = os.path.join(self.dir, "port.json")
        self.stderr_path = os.path.join(self.dir, "stderr.log")
        self._stderr = None

    def command(self):
        cmd = [kubesim_binary(), "--write-kubeconfig", self.kubeconfig, "--port-file", self.port_file]
        if not self.tls:
            cmd.append("--plain")
        elif self.http_listener:
            cmd += ["--http-port", "0"]
        if self.state:
            cmd += ["--state", self.state]
        for k, v in self.flags.items():
            opt = "--" + k.replace("_", "-")
            if v is True:
                cmd.append(opt)
            elif v is False or v is None:
                continue
            elif isinstance(v, (list, tuple)):
                for x in v:
                    cmd += [opt, str(x)]
            else:
                cmd += [opt, str(v)]
        return cmd + self.args

    def start(self, timeout=20):
        for p in (self.port_file,):
            if os.path.exists(p):
                os.unlink(p)
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        if self.env:
            env.update(self.env)
        self._stderr = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=self._stderr, env=env)
        deadline = time.monotonic() + timeout
        line = b""
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:
                b = self.proc.stdout.read1(4096) if hasattr(self.proc.stdout, "read1") else os.read(
                    self.proc.stdout.fileno(), 4096)
                if not b:
                    break
                line += b
                if b"listening on" in line and b"\n" in line[line.find(b"listening on"):]:
                    break
            if self.proc.poll() is not None:
                break
        if b"listening on" not in line:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("kubesim did not start: %r\n%s" % (line, self.stderr()))
        first = line[line.find(b"listening on"):].split(b"\n")[0]
        self.url = first.split()[-1].decode()
        with open(self.port_file) as f:
            pf = json.load(f)
        self.http_url = pf.get("http") or None
        # keep draining stdout so the child never blocks on a full pipe
        threading.Thread(target=self._drain, daemon=True).start()
        self._write_pems()
        return self

    def _drain(self):
        try:
            while self.proc and self.proc.stdout.read(4096):
                pass
        except (ValueError, OSError):
            pass

    def _write_pems(self):
        kc = load_kubeconfig(self.kubeconfig)
        self.kc = kc
        self.ca_file = self.cert_file = self.key_file = None
        if kc["ca_pem"]:
            self.ca_file = os.path.join(self.dir, "ca.crt")
            with open(self.ca_file, "wb") as f:
                f.write(kc["ca_pem"])
        if kc["cert_pem"]:
            self.cert_file = os.path.join(self.dir, "client.crt")
            self.key_file = os.path.join(self.dir, "client.key")
            with open(self.cert_file, "wb") as f:
                f.write(kc["cert_pem"])
            with open(self.key_file, "wb") as f:
                f.write(kc["key_pem"])

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def client(self, cert=True, token=None, plain=False, **kw):
        """A Client for the primary URL with the kubeconfig's credentials
        (cert=False: no client certificate); plain=True: the HTTP listener."""
        if plain:
            return Client(self.http_url, token=token, **kw)
        return Client(self.url, ca_file=self.ca_file, cert_file=self.cert_file if cert else None,
                      key_file=self.key_file if cert else None, token=token if token is not None else self.kc["token"],
                      **kw)

    def admin(self, method, path, body=None):
        """Call a /kubesim/ admin endpoint; returns the decoded JSON."""
        c = Client(self.http_url) if self.http_url else self.client()
        try:
            r = c.request(method, path, body=body if body is not None else ({} if method == "POST" else None))
        finally:
            c.close()
        if r.status >= 300:
            raise AssertionError("admin %s %s -> %d %s" % (method, path, r.status, r.text))
        return r.json()

    def counters(self):
        return self.admin("GET", "/kubesim/counters")

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return -1

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM, timeout=20, check=True):
        """Stop the process; with check, assert a clean exit (status 0, no sanitizer report)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("kubesim did not stop within %ds\n%s" % (timeout, self.stderr()))
        rc = self.proc.returncode
        self.proc.stdout.close()
        self.proc = None
        if self._stderr:
            self._stderr.close()
            self._stderr = None
        if check:
            err = self.stderr()
            if rc != 0 or "Sanitizer" in err or "runtime error" in err:
                raise AssertionError("kubesim exited with %s:\n%s" % (rc, err[-4000:]))
        return rc

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        self.stop(check=exc_type is None)
        if self.tmp:
            self.tmp.cleanup()


# ---- a tiny test runner ----------------------------------------------------------

def run_tests(ns, argv=None):
    """Run every test_* function of a module namespace in definition order;
    exit 1 if any failed, 77 if every one raised backend.Skip. Arguments (sys.argv[1:]) select tests by substring."""
    import sys
    import traceback
    argv = sys.argv[1:] if argv is None else argv
    tests = [(n, f) for n, f in ns.items() if n.startswith("test_") and callable(f)]
    if argv:
        tests = [(n, f) for n, f in tests if any(a in n for a in argv)]
    failed = []
    skipped = []
    for name, fn in tests:
        t0 = time.monotonic()
        try:
            fn()
            print("ok   %-50s %.2fs" % (name, time.monotonic() - t0), flush=True)
        except Exception as e:
            if type(e).__name__ == "Skip":  # backend.Skip: the chosen API server cannot run it
                skipped.append(name)
                print("skip %-50s %s" % (name, e), flush=True)
                continue
            failed.append(name)
            print("FAIL %-50s %.2fs" % (name, time.monotonic() - t0), flush=True)
            traceback.print_exc()
    print("%d passed, %d failed%s%s" % (len(tests) - len(failed) - len(skipped), len(failed),
                                         (": " + ", ".join(failed)) if failed else "",
                                         (", %d skipped" % len(skipped)) if skipped else ""))
    if failed:
        sys.exit(1)
    # every test skipped: ctest's "skipped" (exit 77)
    sys.exit(77 if tests and len(skipped) == len(tests) else 0)
