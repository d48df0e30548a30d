"""The operator's plain HTTP server (/metrics, /healthz, /readyz) under
hostile clients, against the real binary on kubesim; the operator's
resident memory (VmRSS of its process) is measured around each attack.

- test_unread_pipeline: one client pipelines GET /metrics for 5 s and never
  reads an answer. The server stops reading that connection once 256 KiB of
  answers wait (it used to answer every request: +812 MiB), so the RSS grows
  by less than 48 MiB and a normal scrape meanwhile works.
- test_partial_bodies: 120 clients (from four loopback addresses) each send the headers of a 3 MB body
  (POST, or GET with a body) and 1 MB of it, then hold. Each is refused at
  its headers (405 / 413) before a byte of the body is buffered (it used to
  buffer them all: +286 MiB); RSS grows by less than 48 MiB.
- test_connection_flood: 1,500 connections from one address that send
  nothing. At most 32 of them (the per-address cap) stay open: each new one
  takes the place of the one that waited longest; a normal scrape and
  /healthz still answer during the flood and RSS stays bounded.

Run directly (python3 test_server_bounds.py [name-substring]) or through ctest.
"""
import os
import resource
import socket
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from kubesim import Kubesim, run_tests  # noqa: E402
from slurmop import Slurmop, apply_crds  # noqa: E402

MIB = 1 << 20


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS for %d" % pid)


def hostport(url):
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    return host, int(port)


def scrape(url, path="/metrics", timeout=5):
    with urllib.request.urlopen(url + path, timeout=timeout) as r:
        body = r.read()
        assert r.status == 200, r.status
        return body


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096 and hard > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))


class Running:
    def __enter__(self):
        self.ks = Kubesim(nodes=2).__enter__()
        apply_crds(self.ks.client())
        self.op = Slurmop(self.ks.kubeconfig).start()
        self.op.wait_ready()
        scrape(self.op.metrics_url)  # warm: the first render's allocations
        time.sleep(0.5)
        self.rss0 = rss(self.op.proc.pid)
        return self

    def grown(self):
        return rss(self.op.proc.pid) - self.rss0

    def __exit__(self, *exc):
        try:
            self.op.stop()
        finally:
            self.ks.__exit__(*exc)


def test_unread_pipeline():
    with Running() as r:
        host, port = hostport(r.op.metrics_url)
        s = socket.create_connection((host, port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        s.setblocking(False)
        req = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 64
        sent = 0
        end = time.monotonic() + 5
        peak = 0
        while time.monotonic() < end:
            try:
                sent += s.send(req)
            except BlockingIOError:
                time.sleep(0.01)
            peak = max(peak, r.grown())
        time.sleep(0.5)
        peak = max(peak, r.grown())
        print("unread pipeline: %d requests sent in 5 s, operator RSS +%.1f MiB at most" %
              (sent // 35, peak / MIB))
        assert peak < 48 * MIB, "RSS grew by %.0f MiB" % (peak / MIB)
        scrape(r.op.metrics_url)  # a normal scrape still works meanwhile
        s.close()


def test_partial_bodies():
    raise_fd_limit()
    with Running() as r:
        host, port = hostport(r.op.metrics_url)
        part = b"x" * MIB
        socks = []
        for i in range(120):
            # four source addresses, 30 each: under the per-address cap (32),
            # so none is taken for a newer one and each must be answered
            s = socket.create_connection((host, port), source_address=("127.0.0.%d" % (2 + i % 4), 0))
            method = b"POST" if i % 2 else b"GET"
            s.sendall(method + b" /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3000000\r\n\r\n")
            s.setblocking(False)
            socks.append([s, 0])
        end = time.monotonic() + 8
        peak = 0
        while time.monotonic() < end and any(n < len(part) for _, n in socks):
            for e in socks:
                if e[1] < len(part):
                    try:
                        e[1] += e[0].send(part[e[1]:])
                    except BlockingIOError:
                        pass
                    except OSError:
                        e[1] = len(part)  # refused and closed: nothing more goes in
            peak = max(peak, r.grown())
            time.sleep(0.01)
        time.sleep(0.5)
        peak = max(peak, r.grown())
        refused = 0
        for i, (s, _) in enumerate(socks):
            s.setblocking(True)
            s.settimeout(2)
            try:
                got = s.recv(4096)
            except OSError:
                got = b""
            want = b"HTTP/1.1 405 " if i % 2 else b"HTTP/1.1 413 "
            refused += got.startswith(want)
            s.close()
        print("partial bodies: %d of 120 refused at their headers, operator RSS +%.1f MiB at most" %
              (refused, peak / MIB))
        assert peak < 48 * MIB, "RSS grew by %.0f MiB" % (peak / MIB)
        assert refused >= 110, "only %d of 120 bodies were refused at their headers" % refused
        scrape(r.op.metrics_url)


def test_connection_flood():
    raise_fd_limit()
    with Running() as r:
        host, port = hostport(r.op.metrics_url)
        socks = []
        for _ in range(1500):
            s = socket.socket()
            s.setblocking(False)
            try:
                s.connect((host, port))
            except BlockingIOError:
                pass
            socks.append(s)
        t0 = time.monotonic()
        scrape(r.op.metrics_url, timeout=10)  # an honest scrape during the flood
        scrape(r.op.health_url, "/healthz", timeout=10)
        took = time.monotonic() - t0
        # Connections still in the listen queue look open until accepted:
        # wait (bounded) for the server to have taken them all.
        closed = set()

        def still_open():
            n = 0
            for i, s in enumerate(socks):
                if i in closed:
                    continue
                try:
                    s.recv(1)  # a 503 (refused) or the end (taken for a newer one)
                    closed.add(i)
                except BlockingIOError:
                    n += 1  # nothing to read, not closed: held by the server (or not accepted yet)
                except OSError:
                    closed.add(i)
            return n
        deadline = time.monotonic() + 30
        open_ = still_open()
        while open_ > 33 and time.monotonic() < deadline:
            time.sleep(0.2)
            open_ = still_open()
        grown = r.grown()
        print("connection flood: %d of 1500 still open, scrape %.3f s, operator RSS +%.1f MiB" %
              (open_, took, grown / MIB))
        assert open_ <= 33, "%d flood connections held open (cap 32 per address)" % open_
        assert grown < 48 * MIB, "RSS grew by %.0f MiB" % (grown / MIB)
        for s in socks:
            s.close()


if __name__ == "__main__":
    run_tests(globals())
