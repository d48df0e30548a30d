/* msec: HTTPS /metrics behind TokenReview + SubjectAccessReview. See msec.h. */
#include "reconcilers/msec.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/file.h"
#include "core/httpd.h"
#include "core/kauth.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/selfcert.h"

struct msec {
    hs_server *srv;
    kauth *auth;
    msec_render_fn render;
    void *data;
    int pending; /* server and kauth still closing */
    void (*on_closed)(void *data);
    void *closed_data;
};

static void on_req_closed(hs_req *req, void *data)
{
    (void)req;
    kauth_cancel(data); /* the scraper went away before its reviews returned */
}

static void on_verdict(int status, const char *reason, const char *user, void *data)
{
    hs_req *req = data;
    msec *m = hs_req_get_data(req);
    if (status != 200) {
        log_debug("metrics scrape from %s%s%s denied with HTTP %d: %s", hs_req_peer(req), user ? " by " : "",
                  user ? user : "", status, reason);
        char body[256];
        int n = snprintf(body, sizeof(body), "%s\n", reason);
        hs_respond(req, status, "text/plain; charset=utf-8",
                   status == 401 ? "WWW-Authenticate: Bearer realm=\"slurmop metrics\"\r\n" : NULL, body,
                   n < 0 ? 0 : (size_t)n < sizeof(body) ? (size_t)n : sizeof(body) - 1);
        return;
    }
    buf_t b;
    buf_init(&b, 64u << 20);
    if (m->render(m->data, &b) != 0) {
        buf_free(&b);
        hs_respond(req, 500, "text/plain", NULL, "metrics too large\n", 18);
        return;
    }
    hs_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, b.data ? b.data : "", b.len);
    buf_free(&b);
}

static void serve(hs_req *req, void *data)
{
    msec *m = data;
    const char *method = hs_req_method(req);
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        hs_respond(req, 405, "text/plain", "Allow: GET, HEAD\r\n", "method not allowed\n", 19);
        return;
    }
    if (strcmp(hs_req_path(req), "/metrics") != 0) {
        hs_respond(req, 404, "text/plain", NULL, "404 page not found\n", 19);
        return;
    }
    hs_req_set_data(req, m);
    kauth_check *c =
        kauth_check_start(m->auth, hs_req_header(req, "Authorization"), "get", "/metrics", on_verdict, req);
    hs_req_on_close(req, on_req_closed, c);
}

/* The serving certificate: the files, or a self-signed one for localhost,
 * the loopback addresses and this host's name. */
static int load_cert(const msec_opts *o, char **cert, size_t *cert_len, char **key, size_t *key_len,
                     char *err, size_t errlen)
{
    int have_cert = o->cert_file && *o->cert_file, have_key = o->key_file && *o->key_file;
    if (have_cert != have_key) {
        snprintf(err, errlen, "--metrics-cert-file and --metrics-key-file go together");
        return OP_EINVAL;
    }
    if (have_cert) {
        int rc = file_read_all(o->cert_file, 1u << 20, cert, cert_len);
        if (rc) {
            snprintf(err, errlen, "--metrics-cert-file %s: %s", o->cert_file, err_str(rc));
            return OP_ECONFIG;
        }
        rc = file_read_all(o->key_file, 1u << 20, key, key_len);
        if (rc) {
            snprintf(err, errlen, "--metrics-key-file %s: %s", o->key_file, err_str(rc));
            free(*cert);
            *cert = NULL;
            return OP_ECONFIG;
        }
        return 0;
    }
    char host[256] = "";
    if (gethostname(host, sizeof(host) - 1) != 0)
        host[0] = '\0';
    const char *names[] = {host};
    int rc = selfcert_new("localhost", names, host[0] ? 1 : 0, cert, key);
    if (rc) {
        snprintf(err, errlen, "cannot make a self-signed metrics certificate: %s", err_str(rc));
        return rc;
    }
    *cert_len = strlen(*cert);
    *key_len = strlen(*key);
    log_info("metrics: serving with a self-signed certificate made at start (localhost, %s)",
             host[0] ? host : "no host name");
    return 0;
}

msec *msec_start(uv_loop_t *loop, const msec_opts *o, int *rc, char *err, size_t errlen)
{
    char *cert = NULL, *key = NULL;
    size_t cert_len = 0, key_len = 0;
    *rc = load_cert(o, &cert, &cert_len, &key, &key_len, err, errlen);
    if (*rc)
        return NULL;
    msec *m = xcalloc(1, sizeof(*m));
    m->render = o->render;
    m->data = o->data;
    hs_tls_opts tls = {.cert_pem = cert, .cert_len = cert_len, .key_pem = key, .key_len = key_len};
    hs_opts ho;
    hs_opts_get_only(&ho);
    ho.tls = &tls;
    ho.handler = serve;
    ho.data = m;
    m->srv = hs_listen(loop, o->host, o->port, &ho, rc);
    memset(key, 0, key_len);
    free(key);
    free(cert);
    if (m->srv == NULL) {
        snprintf(err, errlen, "cannot serve HTTPS /metrics on %s:%d: %s%s", o->host ? o->host : "0.0.0.0",
                 o->port, err_str(*rc),
                 *rc == OP_ECONFIG ? " (certificate or key does not parse, or they do not match)" : "");
        free(m);
        return NULL;
    }
    m->auth = kauth_new(loop, o->client, NULL);
    log_info("serving /metrics over HTTPS (TokenReview + SubjectAccessReview) on %s:%d",
             o->host ? o->host : "0.0.0.0", hs_port(m->srv));
    return m;
}

int msec_port(const msec *m)
{
    return hs_port(m->srv);
}

static void one_closed(void *data)
{
    msec *m = data;
    assert(m->pending > 0);
    if (--m->pending > 0)
        return;
    void (*cb)(void *) = m->on_closed;
    void *cb_data = m->closed_data;
    free(m);
    if (cb)
        cb(cb_data);
}

static void on_srv_closed(void *data)
{
    msec *m = data;
    /* Every request got its on_close (checks canceled) before this runs. */
    kauth_close(m->auth, one_closed, m);
}

void msec_close(msec *m, void (*on_closed)(void *data), void *data)
{
    m->on_closed = on_closed;
    m->closed_data = data;
    m->pending = 1;
    hs_close(m->srv, on_srv_closed, m);
}
