/* ks_server: the engine behind core/httpd. See ks_server.h. */
#include "kubesim/ks_server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/crypto.h"
#include "core/err.h"
#include "core/file.h"
#include "core/httpd.h"
#include "core/log.h"
#include "core/mem.h"
#include "kubesim/pki.h"

struct ks_server {
    uv_loop_t *loop;
    ks *k;
    hs_server *https, *http;
    int https_port, http_port;
    char *url, *http_url;
    pki_pair ca; /* key may be NULL when only a CA certificate was given */
    pki_pair serving;
    pki_pair client; /* NULL strings when not issued */
    char *client_ca;
    hs_tls_opts tls;
    uv_timer_t drop_timer;
    int closing;
    int pending; /* listeners + the drop timer still open */
    void (*close_cb)(void *);
    void *close_data;
};

/* ---- requests ---------------------------------------------------------- */

/* A response held back by a timer (latency faults, too-large RVs). */
typedef struct delayed {
    uv_timer_t timer;
    hs_req *hr; /* NULL once the client went away */
    int status;
    const char *ctype;
    char *headers;
    char *body;
    size_t len;
} delayed;

static void delayed_closed(uv_handle_t *h)
{
    delayed *d = h->data;
    free(d->headers);
    free(d->body);
    free(d);
}

static void delayed_fire(uv_timer_t *t)
{
    delayed *d = t->data;
    if (d->hr) {
        hs_req_on_close(d->hr, NULL, NULL);
        hs_respond(d->hr, d->status, d->ctype, d->headers, d->body, d->len);
        d->hr = NULL;
    }
    uv_close((uv_handle_t *)&d->timer, delayed_closed);
}

static void delayed_gone(hs_req *hr, void *data)
{
    delayed *d = data;
    (void)hr;
    d->hr = NULL;
    uv_timer_stop(&d->timer);
    uv_close((uv_handle_t *)&d->timer, delayed_closed);
}

/* A watch stream. */
typedef struct gw {
    hs_req *hr;
    ks_watch *w;
} gw;

static int gw_write(void *ctx, const char *b, size_t n)
{
    gw *g = ctx;
    return hs_stream_write(g->hr, b, n);
}

static void gw_end(void *ctx, int abort_stream)
{
    gw *g = ctx;
    /* finishing the request means its on_close will not run */
    if (abort_stream)
        hs_stream_abort(g->hr);
    else
        hs_stream_end(g->hr);
    free(g);
}

static void gw_gone(hs_req *hr, void *data)
{
    gw *g = data;
    (void)hr;
    ks_watch_cancel(g->w);
    free(g);
}

static void drop_cb(uv_timer_t *t)
{
    ks_server_drop_connections(t->data);
}

/* A write held by the write-rate fault until its slot (ks_write_wait_ms). */
typedef struct held {
    uv_timer_t timer;
    ks_server *s;
    hs_req *hr; /* NULL once the client went away */
} held;

static void serve(ks_server *s, hs_req *hr);

static void held_closed(uv_handle_t *h)
{
    free(h->data);
}

static void held_fire(uv_timer_t *t)
{
    held *h = t->data;
    if (h->hr) {
        hs_req_on_close(h->hr, NULL, NULL);
        serve(h->s, h->hr);
        h->hr = NULL;
    }
    uv_close((uv_handle_t *)&h->timer, held_closed);
}

static void held_gone(hs_req *hr, void *data)
{
    held *h = data;
    (void)hr;
    h->hr = NULL;
    uv_timer_stop(&h->timer);
    uv_close((uv_handle_t *)&h->timer, held_closed);
}

static void on_request(hs_req *hr, void *data)
{
    ks_server *s = data;
    if (s->k == NULL) {
        hs_respond(hr, 503, "text/plain", "Retry-After: 1\r\n", "starting\n", 9);
        return;
    }
    unsigned wait = ks_write_wait_ms(s->k, hs_req_method(hr), hs_req_path(hr), uv_now(s->loop));
    if (wait) {
        held *h = xcalloc(1, sizeof(*h));
        h->s = s;
        h->hr = hr;
        uv_timer_init(s->loop, &h->timer);
        h->timer.data = h;
        uv_timer_start(&h->timer, held_fire, wait, 0);
        hs_req_on_close(hr, held_gone, h);
        return;
    }
    serve(s, hr);
}

static void serve(ks_server *s, hs_req *hr)
{
    ks_req q;
    memset(&q, 0, sizeof(q));
    q.method = hs_req_method(hr);
    q.path = hs_req_path(hr);
    q.query = hs_req_query(hr);
    q.content_type = hs_req_header(hr, "Content-Type");
    q.accept = hs_req_header(hr, "Accept");
    q.user_agent = hs_req_header(hr, "User-Agent");
    q.authorization = hs_req_header(hr, "Authorization");
    q.client_cn = hs_req_client_cn(hr);
    q.body = hs_req_body(hr, &q.body_len);
    ks_resp r;
    ks_resp_init(&r);
    ks_handle(s->k, &q, &r);
    const char *hdrs = r.headers.len ? r.headers.data : NULL;
    if (r.watch) {
        gw *g = xcalloc(1, sizeof(*g));
        g->hr = hr;
        g->w = r.watch;
        hs_stream_begin(hr, 200, "application/json", hdrs);
        hs_req_on_close(hr, gw_gone, g);
        ks_sink sink = {gw_write, gw_end, g};
        ks_watch_attach(r.watch, &sink);
    } else if (r.delay_ms) {
        delayed *d = xcalloc(1, sizeof(*d));
        d->hr = hr;
        d->status = r.status;
        d->ctype = r.content_type;
        d->headers = hdrs ? xstrdup(hdrs) : NULL;
        d->body = buf_detach(&r.body, &d->len);
        if (d->body == NULL)
            d->body = xstrdup("");
        uv_timer_init(s->loop, &d->timer);
        d->timer.data = d;
        uv_timer_start(&d->timer, delayed_fire, r.delay_ms, 0);
        hs_req_on_close(hr, delayed_gone, d);
    } else {
        hs_respond(hr, r.status ? r.status : 500, r.content_type ? r.content_type : "text/plain", hdrs,
                   r.body.data ? r.body.data : "", r.body.len);
    }
    if (r.after == KS_AFTER_DROP_CONNECTIONS && !s->closing)
        uv_timer_start(&s->drop_timer, drop_cb, 50, 0);
    ks_resp_free(&r);
}

/* ---- certificates ------------------------------------------------------ */

static int read_pem(const char *path, char **out)
{
    size_t len;
    int rc = file_read_all(path, 1 << 20, out, &len);
    if (rc)
        log_error("kubesim: cannot read %s: %s", path, err_str(rc));
    return rc;
}

static int setup_pki(ks_server *s, const ks_server_opts *o)
{
    int rc = 0;
    if (o->ca_cert_file) {
        if ((rc = read_pem(o->ca_cert_file, &s->ca.cert_pem)) != 0)
            return rc;
        if (o->ca_key_file && (rc = read_pem(o->ca_key_file, &s->ca.key_pem)) != 0)
            return rc;
    } else if ((rc = pki_ca_new("kubesim-ca", 0, &s->ca)) != 0) {
        return rc;
    }
    if (o->tls_cert_file) {
        if ((rc = read_pem(o->tls_cert_file, &s->serving.cert_pem)) != 0)
            return rc;
        if (!o->tls_key_file) {
            log_error("kubesim: --tls-cert needs --tls-key");
            return OP_ECONFIG;
        }
        if ((rc = read_pem(o->tls_key_file, &s->serving.key_pem)) != 0)
            return rc;
    } else if (s->ca.key_pem) {
        static const char *const dns[] = {"localhost", "kubernetes", "kubernetes.default",
                                          "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"};
        static const char *const ips[] = {"127.0.0.1", "::1"};
        pki_leaf_opts lo = {
            .cn = "kube-apiserver", .dns = dns, .n_dns = 5, .ips = ips, .n_ips = 2, .usage = PKI_SERVER_AUTH};
        if ((rc = pki_leaf_new(&s->ca, &lo, &s->serving)) != 0)
            return rc;
    } else {
        log_error("kubesim: a serving certificate needs --tls-cert/--tls-key or a CA key");
        return OP_ECONFIG;
    }
    if (s->ca.key_pem) {
        pki_leaf_opts lo = {
            .cn = "kubernetes-admin", .org = "kubeadm:cluster-admins", .usage = PKI_CLIENT_AUTH};
        if ((rc = pki_leaf_new(&s->ca, &lo, &s->client)) != 0)
            return rc;
    }
    if (o->client_ca_file) {
        if ((rc = read_pem(o->client_ca_file, &s->client_ca)) != 0)
            return rc;
    } else {
        s->client_ca = xstrdup(s->ca.cert_pem);
    }
    return 0;
}

/* ---- lifecycle --------------------------------------------------------- */

static void listener_closed(void *data)
{
    ks_server *s = data;
    if (--s->pending == 0) {
        void (*cb)(void *) = s->close_cb;
        void *cd = s->close_data;
        pki_pair_free(&s->ca);
        pki_pair_free(&s->serving);
        pki_pair_free(&s->client);
        free(s->client_ca);
        free(s->url);
        free(s->http_url);
        free(s);
        if (cb)
            cb(cd);
    }
}

static void drop_timer_closed(uv_handle_t *h)
{
    listener_closed(h->data);
}

static char *url_of(const char *scheme, const char *host, int port)
{
    if (strchr(host, ':'))
        return xasprintf("%s://[%s]:%d", scheme, host, port);
    return xasprintf("%s://%s:%d", scheme, host, port);
}

ks_server *ks_server_new(uv_loop_t *loop, ks *k, const ks_server_opts *o, int *err)
{
    ks_server *s = xcalloc(1, sizeof(*s));
    s->loop = loop;
    s->k = k;
    const char *host = o->host ? o->host : "127.0.0.1";
    int rc = 0;
    uv_timer_init(loop, &s->drop_timer);
    s->drop_timer.data = s;
    s->pending = 1;
    if (o->https_port >= 0 && (rc = setup_pki(s, o)) != 0)
        goto fail;
    hs_opts ho;
    memset(&ho, 0, sizeof(ho));
    ho.max_body_bytes = 8u * 1024 * 1024; /* the engine answers 413 above 3 MiB itself */
    ho.max_write_queue = o->max_write_queue ? o->max_write_queue : (size_t)256 * 1024 * 1024;
    /* A simulator for benches that open thousands of watches: no
     * connection cap to speak of. */
    ho.max_conns = 65536;
    ho.handler = on_request;
    ho.data = s;
    if (o->https_port >= 0) {
        s->tls.cert_pem = s->serving.cert_pem;
        s->tls.cert_len = strlen(s->serving.cert_pem);
        s->tls.key_pem = s->serving.key_pem;
        s->tls.key_len = strlen(s->serving.key_pem);
        s->tls.client_ca_pem = s->client_ca;
        s->tls.client_ca_len = strlen(s->client_ca);
        s->tls.require_client_cert = o->require_client_cert;
        ho.tls = &s->tls;
        s->https = hs_listen(loop, host, o->https_port, &ho, &rc);
        if (s->https == NULL)
            goto fail;
        s->pending++;
        s->https_port = hs_port(s->https);
        s->url = url_of("https", host, s->https_port);
    }
    if (o->http_port >= 0) {
        ho.tls = NULL;
        s->http = hs_listen(loop, host, o->http_port, &ho, &rc);
        if (s->http == NULL)
            goto fail;
        s->pending++;
        s->http_port = hs_port(s->http);
        s->http_url = url_of("http", host, s->http_port);
        if (s->url == NULL)
            s->url = xstrdup(s->http_url);
    }
    return s;
fail:
    if (err)
        *err = rc ? rc : OP_ECONFIG;
    ks_server_close(s, NULL, NULL);
    return NULL;
}

void ks_server_set_engine(ks_server *s, ks *k)
{
    s->k = k;
}

int ks_server_https_port(const ks_server *s)
{
    return s->https_port;
}

int ks_server_http_port(const ks_server *s)
{
    return s->http_port;
}

const char *ks_server_url(const ks_server *s)
{
    return s->url;
}

const char *ks_server_http_url(const ks_server *s)
{
    return s->http_url;
}

const char *ks_server_ca_pem(const ks_server *s)
{
    return s->ca.cert_pem;
}

void ks_server_drop_connections(ks_server *s)
{
    if (s->https)
        hs_drop_connections(s->https);
    if (s->http)
        hs_drop_connections(s->http);
}

void ks_server_close(ks_server *s, void (*cb)(void *data), void *data)
{
    if (s->closing)
        return;
    s->closing = 1;
    s->close_cb = cb;
    s->close_data = data;
    uv_timer_stop(&s->drop_timer);
    if (s->https)
        hs_close(s->https, listener_closed, s);
    if (s->http)
        hs_close(s->http, listener_closed, s);
    uv_close((uv_handle_t *)&s->drop_timer, drop_timer_closed);
}

/* ---- kubeconfig -------------------------------------------------------- */

static int b64_line(buf_t *b, const char *key, const char *pem)
{
    char *enc = base64_encode(pem, strlen(pem));
    int rc = buf_printf(b, "    %s: %s\n", key, enc);
    free(enc);
    return rc;
}

int ks_server_write_kubeconfig(const ks_server *s, const char *path, const char *token)
{
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    int rc = buf_printf(&b,
                        "apiVersion: v1\nkind: Config\ncurrent-context: kubesim\nclusters:\n- name: kubesim\n"
                        "  cluster:\n    server: %s\n",
                        s->url);
    if (rc == 0 && s->https && strncmp(s->url, "https", 5) == 0)
        rc = b64_line(&b, "certificate-authority-data", s->ca.cert_pem);
    int any = (s->client.cert_pem && strncmp(s->url, "https", 5) == 0) || token;
    if (rc == 0)
        rc = buf_puts(&b,
                      any ? "users:\n- name: kubesim\n  user:\n" : "users:\n- name: kubesim\n  user: {}\n");
    if (rc == 0 && s->client.cert_pem && strncmp(s->url, "https", 5) == 0) {
        rc = b64_line(&b, "client-certificate-data", s->client.cert_pem);
        if (rc == 0)
            rc = b64_line(&b, "client-key-data", s->client.key_pem);
    }
    if (rc == 0 && token)
        rc = buf_printf(&b, "    token: %s\n", token);
    if (rc == 0)
        rc = buf_puts(&b, "contexts:\n- name: kubesim\n  context:\n    cluster: kubesim\n    user: kubesim\n"
                          "    namespace: default\npreferences: {}\n");
    if (rc == 0) {
        char *tmp = xasprintf("%s.tmp", path);
        FILE *f = fopen(tmp, "w");
        if (f == NULL) {
            rc = OP_ERRNO(errno);
        } else {
            if (fwrite(b.data, 1, b.len, f) != b.len)
                rc = OP_EIO;
            if (fclose(f) != 0 && rc == 0)
                rc = OP_EIO;
            if (rc == 0 && rename(tmp, path) != 0)
                rc = OP_ERRNO(errno);
        }
        free(tmp);
    }
    buf_free(&b);
    return rc;
}
