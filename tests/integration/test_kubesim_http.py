"""kubesim over real sockets: HTTPS with client certificates, tokens, the
kubeconfig, basic verbs and error shapes, pipelining and keep-alive."""

import json
import os
import socket
import ssl
import time

from kubesim import Kubesim, Client, load_kubeconfig, run_tests

CMS = "/api/v1/namespaces/default/configmaps"


def test_kubeconfig_and_crud_over_https():
    with Kubesim(nodes=2) as ks:
        kc = load_kubeconfig(ks.kubeconfig)
        assert kc["server"].startswith("https://127.0.0.1:"), kc["server"]
        assert kc["ca_pem"].startswith(b"-----BEGIN CERTIFICATE-----")
        assert kc["cert_pem"] and kc["key_pem"]
        # a client built only from the kubeconfig, verifying the server against its CA by IP
        c = ks.client()
        assert c.ssl_context().verify_mode == ssl.CERT_REQUIRED
        r = c.post(CMS, {"metadata": {"name": "a"}, "data": {"k": "v"}})
        assert r.status == 201, r
        obj = r.json()
        assert obj["metadata"]["uid"] and obj["metadata"]["resourceVersion"]
        r = c.get(CMS + "/a")
        assert r.status == 200 and r.json()["data"] == {"k": "v"}
        # stale update -> 409 Conflict with the exact message
        stale = dict(obj, data={"k": "w"})
        assert c.put(CMS + "/a", stale).status == 200
        r = c.put(CMS + "/a", stale)
        assert r.status == 409, r
        st = r.json()
        assert st["kind"] == "Status" and st["reason"] == "Conflict" and st["code"] == 409
        assert st["message"] == ('Operation cannot be fulfilled on configmaps "a": the object has been modified; '
                                 'please apply your changes to the latest version and try again')
        assert st["details"] == {"name": "a", "kind": "configmaps"}
        # unknown path: plain text
        r = c.get("/apis/nope.example.com/v1/things")
        assert r.status == 404 and r.text == "404 page not found\n"
        assert r.header("Content-Type").startswith("text/plain")
        # nodes from --nodes
        names = [n["metadata"]["name"] for n in c.get("/api/v1/nodes").json()["items"]]
        assert names == ["node-00001", "node-00002"], names
        # localhost is a SAN too
        c2 = Client(ks.url.replace("127.0.0.1", "localhost"), ca_file=ks.ca_file, cert_file=ks.cert_file,
                    key_file=ks.key_file)
        assert c2.get("/version").status == 200
        c2.close()
        c.close()


def test_client_certificate_required():
    with Kubesim(require_client_cert=True) as ks:
        c = ks.client()
        assert c.get("/api/v1/namespaces").status == 200
        c.close()
        # without a certificate the handshake is refused
        nocert = ks.client(cert=False)
        try:
            r = nocert.get("/api/v1/namespaces")
            raise AssertionError("request without a client certificate succeeded: %r" % r)
        except (ssl.SSLError, ConnectionError, OSError):
            pass
        nocert.close()


def test_auth_401_and_tokens():
    with Kubesim(token=["s3cret"]) as ks:
        kc = load_kubeconfig(ks.kubeconfig)
        assert kc["token"] == "s3cret"
        # no cert, no token: 401 Status
        anon = ks.client(cert=False, token="")
        r = anon.get("/api/v1/namespaces")
        assert r.status == 401, r
        assert r.json()["reason"] == "Unauthorized" and r.json()["message"] == "Unauthorized"
        # health endpoints stay open to anonymous clients
        assert anon.get("/healthz").text == "ok"
        anon.close()
        bad = ks.client(cert=False, token="wrong")
        assert bad.get("/healthz").status == 401
        bad.close()
        tok = ks.client(cert=False, token="s3cret")
        assert tok.get("/api/v1/namespaces").status == 200
        tok.close()
        # a client certificate alone is enough
        cert = ks.client(token="")
        assert cert.get("/api/v1/namespaces").status == 200
        cert.close()
        # tokens work over the plain listener too
        plain = ks.client(plain=True, token="s3cret")
        assert plain.get("/api/v1/namespaces").status == 200
        plain.close()
        plain = ks.client(plain=True)
        assert plain.get("/api/v1/namespaces").status == 401
        plain.close()


def test_errors_and_content_types():
    with Kubesim() as ks:
        c = ks.client()
        r = c.request("POST", CMS, body=b'{"metadata":', content_type="application/json")
        assert r.status == 400 and r.json()["reason"] == "BadRequest", r
        r = c.request("POST", CMS, body=b'a,b', content_type="text/csv")
        assert r.status == 415 and r.json()["reason"] == "UnsupportedMediaType", r
        big = b'{"metadata":{"name":"big"},"data":{"x":"' + b"a" * (3 * 1024 * 1024) + b'"}}'
        r = c.request("POST", CMS, body=big)
        assert r.status == 413 and r.json()["reason"] == "RequestEntityTooLarge", r
        r = c.post("/api/v1/namespaces/missing/configmaps", {"metadata": {"name": "x"}})
        assert r.status == 404 and r.json()["message"] == 'namespaces "missing" not found', r
        r = c.post(CMS, {"metadata": {"name": "x", "namespace": "kube-system"}})
        assert r.status == 400, r
        r = c.request("GET", "/api/v1/namespaces", headers={"Accept": "application/vnd.kubernetes.protobuf"})
        assert r.status == 406, r
        r = c.request("GET", "/api/v1/namespaces",
                      headers={"Accept": "application/vnd.kubernetes.protobuf,application/json"})
        assert r.status == 200, r
        # kubectl-style discovery
        assert c.get("/api").json()["versions"] == ["v1"]
        groups = [g["name"] for g in c.get("/apis").json()["groups"]]
        for g in ("apps", "events.k8s.io", "policy", "coordination.k8s.io", "apiextensions.k8s.io"):
            assert g in groups, groups
        c.close()


def test_pipelining_and_keepalive():
    with Kubesim(tls=False) as ks:
        host, port = ks.url.split("//")[1].split(":")
        s = socket.create_connection((host, int(port)))
        reqs = b""
        for i in range(50):
            body = json.dumps({"metadata": {"name": "p%02d" % i}}).encode()
            reqs += (b"POST " + CMS.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        s.sendall(reqs)
        data = b""
        s.settimeout(10)
        while data.count(b"HTTP/1.1 201") < 50:
            chunk = s.recv(65536)
            assert chunk, data[-300:]
            data += chunk
        s.close()
        # answered in order
        names = [json.loads(part.split(b"\r\n\r\n", 1)[1].split(b"\n")[0])["metadata"]["name"]
                 for part in data.split(b"HTTP/1.1 ")[1:]]
        assert names == ["p%02d" % i for i in range(50)], names[:5]
        c = ks.client()
        assert len(c.get(CMS, labelSelector="").json()["items"]) == 51  # + kube-root-ca.crt
        counters = ks.counters()
        assert counters["creates"]["configmaps"] == 50, counters["creates"]
        c.close()


def test_sigterm_clean_shutdown():
    ks = Kubesim(nodes=3)
    ks.start()
    c = ks.client()
    with c.watch("/api/v1/pods") as w:
        assert w.status == 200
        rc = ks.stop()  # asserts exit 0 and no sanitizer report
        assert rc == 0
        # the stream was cut: no chunked terminator
        assert w.drain(timeout=5) == []
        assert w.ended and not w.ended_cleanly
    c.close()
    ks.tmp.cleanup()


if __name__ == "__main__":
    run_tests(globals())
