/* bench_load: the limit for scale-out: a bare client that creates pods as
 * fast as the API server accepts them. Requests are rendered before the
 * clock starts; then `depth` requests are kept in flight on each of `conns`
 * keep-alive connections (HTTP/1.1 pipelining: a new request is written as
 * soon as a response completes), over the same transport and credentials
 * as the operator (TLS with the kubeconfig's client certificate, or a
 * bearer token). No JSON is parsed: only status codes are read. */
#include <llhttp.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "core/conn.h"
#include "core/err.h"
#include "core/tls.h"

typedef struct lconn {
    struct load *L;
    conn *c;
    llhttp_t parser;
    int in_flight;
    int dead;
    int closed;
} lconn;

struct load {
    bx_ctx *x;
    char **reqs;
    size_t *lens;
    size_t n, next, done;
    int depth;
    lconn *cs;
    int nconns, connected, failed_connects, closed;
    bx_load_result *res;
};

static llhttp_settings_t settings;

static void send_next(lconn *lc)
{
    struct load *L = lc->L;
    while (!lc->dead && lc->in_flight < L->depth && L->next < L->n) {
        size_t i = L->next++;
        if (conn_write_ref(lc->c, L->reqs[i], L->lens[i], NULL, NULL) != 0) {
            lc->dead = 1;
            L->res->failed++;
            L->done++;
            break;
        }
        lc->in_flight++;
    }
}

static int on_complete(llhttp_t *p)
{
    lconn *lc = p->data;
    struct load *L = lc->L;
    int status = llhttp_get_status_code(p);
    if (status == 201 || status == 200) {
        L->res->ok++;
    } else {
        if (!L->res->first_error_status)
            L->res->first_error_status = status;
        L->res->failed++;
    }
    lc->in_flight--;
    if (++L->done == L->n)
        L->res->t_end = uv_hrtime();
    send_next(lc);
    return 0;
}

static void fail_conn(lconn *lc)
{
    struct load *L = lc->L;
    if (lc->dead)
        return;
    lc->dead = 1;
    L->res->failed += (size_t)lc->in_flight;
    L->done += (size_t)lc->in_flight;
    lc->in_flight = 0;
    if (L->done == L->n)
        L->res->t_end = uv_hrtime();
}

static void on_read(conn *c, ssize_t n, const char *bytes)
{
    lconn *lc = conn_data(c);
    if (n < 0) {
        fail_conn(lc);
        return;
    }
    if (llhttp_execute(&lc->parser, bytes, (size_t)n) != HPE_OK) {
        bx_say(lc->L->x, "bench: load: bad response: %s", llhttp_get_error_reason(&lc->parser));
        fail_conn(lc);
        conn_close(c);
    }
}

static void on_connect(conn *c, int status)
{
    lconn *lc = conn_data(c);
    if (status) {
        bx_say(lc->L->x, "bench: load: connect: %s", op_strerror(status));
        lc->L->failed_connects++;
        lc->dead = 1;
        return;
    }
    lc->L->connected++;
    conn_read_start(c);
}

static void on_close(conn *c)
{
    lconn *lc = conn_data(c);
    lc->closed = 1;
    lc->L->closed++;
}

static const conn_cbs cbs = {
    .on_connect = on_connect,
    .on_read = on_read,
    .on_close = on_close,
};

static int all_connected(void *arg)
{
    struct load *L = arg;
    return L->connected + L->failed_connects == L->nconns;
}

static int all_done(void *arg)
{
    struct load *L = arg;
    int live = 0;
    for (int i = 0; i < L->nconns; i++)
        live += !L->cs[i].dead;
    return L->done == L->n || live == 0;
}

static int all_closed(void *arg)
{
    struct load *L = arg;
    return L->closed == L->nconns;
}

int bx_load_run(bx_ctx *x, const kcfg *cfg, const char *path, char *const *bodies, size_t n, int conns,
                int depth, bx_load_result *res)
{
    struct load L;
    memset(&L, 0, sizeof(L));
    memset(res, 0, sizeof(*res));
    L.x = x;
    L.n = n;
    L.depth = depth;
    L.res = res;
    L.nconns = conns;
    llhttp_settings_init(&settings);
    settings.on_message_complete = on_complete;

    tls_config *tls = NULL;
    if (cfg->tls) {
        tls_client_opts to = {
            .ca_pem = cfg->ca_pem,
            .ca_len = cfg->ca_len,
            .cert_pem = cfg->cert_pem,
            .cert_len = cfg->cert_len,
            .key_pem = cfg->key_pem,
            .key_len = cfg->key_len,
            .server_name = cfg->tls_server_name,
            .insecure_skip_verify = cfg->insecure,
        };
        int err = 0;
        tls = tls_client_config_new(&to, &err);
        if (tls == NULL) {
            bx_say(x, "bench: load: TLS configuration: %s", op_strerror(err));
            return err;
        }
    }
    /* render every request before the clock starts */
    const char *token = kcfg_token((kcfg *)cfg, uv_hrtime());
    char *auth = token ? xasprintf("Authorization: Bearer %s\r\n", token) : xstrdup("");
    char *full_path = xasprintf("%s%s", cfg->path_prefix ? cfg->path_prefix : "", path);
    L.reqs = xcalloc(n, sizeof(char *));
    L.lens = xcalloc(n, sizeof(size_t));
    for (size_t i = 0; i < n; i++) {
        size_t blen = strlen(bodies[i]);
        L.reqs[i] = xasprintf("POST %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: slurmop-bench-load\r\n"
                              "Accept: application/json\r\nContent-Type: application/json\r\n%s"
                              "Content-Length: %zu\r\n\r\n%s",
                              full_path, cfg->host, cfg->port, auth, blen, bodies[i]);
        L.lens[i] = strlen(L.reqs[i]);
    }
    free(auth);
    free(full_path);

    L.cs = xcalloc((size_t)conns, sizeof(lconn));
    for (int i = 0; i < conns; i++) {
        lconn *lc = &L.cs[i];
        lc->L = &L;
        llhttp_init(&lc->parser, HTTP_RESPONSE, &settings);
        lc->parser.data = lc;
        conn_connect_opts co = {.host = cfg->host, .port = cfg->port, .tls = tls, .timeout_ms = 10000};
        lc->c = conn_connect(x->loop, &co, &cbs, lc);
    }
    tls_config_unref(tls);
    int rc = bx_wait(x, all_connected, &L, 30);
    if (rc == 0 && L.connected == 0)
        rc = OP_ECLOSED;
    if (rc == 0) {
        res->t_start = uv_hrtime();
        for (int i = 0; i < conns; i++)
            send_next(&L.cs[i]);
        rc = bx_wait(x, all_done, &L, 600);
        if (rc == 0 && L.done < L.n) {
            bx_say(x, "bench: load: every connection failed after %zu of %zu answers", L.done, L.n);
            rc = OP_ECLOSED;
        }
    }
    x->cleanup++;
    for (int i = 0; i < conns; i++)
        conn_close(L.cs[i].c);
    (void)bx_wait(x, all_closed, &L, 10);
    x->cleanup--;
    for (size_t i = 0; i < n; i++)
        free(L.reqs[i]);
    free(L.reqs);
    free(L.lens);
    free(L.cs);
    return rc;
}
