/* bench_load: the limit for scale-out: a bare client that creates pods as
 * fast as the API server accepts them. Requests are rendered before the
 * clock starts; then `depth` requests are kept in flight on each of `conns`
 * keep-alive connections (HTTP/1.1 pipelining: a new request is written as
 * soon as a response completes), over the same transport and credentials
 * as the operator (TLS with the kubeconfig's client certificate, or a
 * bearer token). No JSON is parsed: only status codes are read.
 *
 * Optionally the client also holds a watch of the pods it creates, as any
 * controller must, and reads (and drops) its stream: the API server then
 * serves the same streams as in the operator's run. And it can run on a
 * thread of its own pinned to the operator's CPU (--pin-operator), so that
 * its own costs land where the operator's do, not on the server's core. */
#include <llhttp.h>
#include <pthread.h>
#include <sched.h>
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
    conn *watch;     /* NULL: no watch */
    char *watch_req; /* its request, written once connected */
    int watch_state; /* W_* */
};

enum { W_CONNECTING, W_SENT, W_STREAMING, W_FAILED, W_CLOSED };

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
        bx_say(lc->L->x, "bench: load: connect: %s", err_str(status));
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

/* The watch: its request is written once connected; every byte read after
 * is counted and dropped (decrypting it is the cost it stands for). */
static void watch_on_connect(conn *c, int status)
{
    struct load *L = conn_data(c);
    if (status) {
        bx_say(L->x, "bench: load: watch connect: %s", err_str(status));
        L->watch_state = W_FAILED;
        return;
    }
    if (conn_write(c, L->watch_req, strlen(L->watch_req)) != 0) {
        L->watch_state = W_FAILED;
        return;
    }
    L->watch_state = W_SENT;
    conn_read_start(c);
}

static void watch_on_read(conn *c, ssize_t n, const char *bytes)
{
    struct load *L = conn_data(c);
    (void)bytes;
    if (n < 0) {
        if (L->watch_state != W_STREAMING)
            L->watch_state = W_FAILED;
        return;
    }
    if (L->watch_state == W_SENT)
        L->watch_state = W_STREAMING;
    L->res->watch_bytes += (size_t)n;
}

static void watch_on_close(conn *c)
{
    struct load *L = conn_data(c);
    L->watch_state = W_CLOSED;
}

static const conn_cbs watch_cbs = {
    .on_connect = watch_on_connect,
    .on_read = watch_on_read,
    .on_close = watch_on_close,
};

static int watch_answered(void *arg)
{
    struct load *L = arg;
    return L->watch_state != W_CONNECTING && L->watch_state != W_SENT;
}

static int watch_closed(void *arg)
{
    return ((struct load *)arg)->watch_state == W_CLOSED;
}

static int load_inline(bx_ctx *x, const kcfg *cfg, const char *path, char *const *bodies, size_t n,
                       const bx_load_opts *o, bx_load_result *res)
{
    struct load L;
    int conns = o->conns;
    memset(&L, 0, sizeof(L));
    memset(res, 0, sizeof(*res));
    L.x = x;
    L.n = n;
    L.depth = o->depth;
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
            bx_say(x, "bench: load: TLS configuration: %s", err_str(err));
            return err;
        }
    }
    /* render every request before the clock starts */
    const char *token = kcfg_token((kcfg *)cfg, uv_hrtime());
    char *auth = token ? xasprintf("Authorization: Bearer %s\r\n", token) : xstrdup("");
    char *auth_line = xstrdup(auth);
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
    if (o->watch_path) {
        conn_connect_opts co = {.host = cfg->host, .port = cfg->port, .tls = tls, .timeout_ms = 10000};
        L.watch_req = xasprintf("GET %s%s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: slurmop-bench-load\r\n"
                              "Accept: application/json\r\n%s\r\n",
                              cfg->path_prefix ? cfg->path_prefix : "", o->watch_path, cfg->host, cfg->port,
                              auth_line);
        L.watch = conn_connect(x->loop, &co, &watch_cbs, &L);
        if (L.watch == NULL)
            L.watch_state = W_FAILED;
    }
    free(auth_line);
    tls_config_unref(tls);
    int rc = bx_wait(x, all_connected, &L, 30);
    if (rc == 0 && L.connected == 0)
        rc = OP_ECLOSED;
    /* the watch must be streaming before the clock starts, as the
     * operator's is before its scale PATCH */
    if (rc == 0 && L.watch && (bx_wait(x, watch_answered, &L, 30) != 0 || L.watch_state != W_STREAMING)) {
        bx_say(x, "bench: load: the watch %s did not answer", o->watch_path);
        rc = OP_EIO;
    }
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
    /* A connection closed after a bad response may be freed already (its
     * on_close ran): only the others are closed here. */
    for (int i = 0; i < conns; i++)
        if (!L.cs[i].closed)
            conn_close(L.cs[i].c);
    (void)bx_wait(x, all_closed, &L, 10);
    if (L.watch) {
        conn_close(L.watch);
        (void)bx_wait(x, watch_closed, &L, 10);
    }
    free(L.watch_req);
    x->cleanup--;
    for (size_t i = 0; i < n; i++)
        free(L.reqs[i]);
    free(L.reqs);
    free(L.lens);
    free(L.cs);
    return rc;
}

/* ------------------------------------------------------------------ */
/* on a thread of its own, pinned */

struct load_thread {
    bx_ctx x; /* a copy: its own loop, no progress line */
    uv_loop_t loop;
    const kcfg *cfg;
    const char *path;
    char *const *bodies;
    size_t n;
    bx_load_opts o;
    bx_load_result *res;
    int rc;
    volatile int done;
};

static void *load_thread_main(void *arg)
{
    struct load_thread *t = arg;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(t->o.cpu, &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) != 0)
        bx_say(&t->x, "bench: load: cannot pin the client to CPU %d; it runs unpinned", t->o.cpu);
    t->rc = load_inline(&t->x, t->cfg, t->path, t->bodies, t->n, &t->o, t->res);
    uv_run(&t->loop, UV_RUN_NOWAIT);
    t->done = 1;
    return NULL;
}

static int thread_done(void *arg)
{
    return ((struct load_thread *)arg)->done;
}

int bx_load_run(bx_ctx *x, const kcfg *cfg, const char *path, char *const *bodies, size_t n,
                const bx_load_opts *o, bx_load_result *res)
{
    if (o->cpu < 0)
        return load_inline(x, cfg, path, bodies, n, o, res);
    struct load_thread *t = xcalloc(1, sizeof(*t));
    t->x = *x;
    t->x.loop = &t->loop;
    t->x.status_fn = NULL;
    t->x.step[0] = '\0';
    t->x.interrupted = 0;
    t->x.cleanup = 0;
    t->cfg = cfg;
    t->path = path;
    t->bodies = bodies;
    t->n = n;
    t->o = *o;
    t->res = res;
    pthread_t th;
    int rc = uv_loop_init(&t->loop);
    if (rc == 0 && pthread_create(&th, NULL, load_thread_main, t) != 0)
        rc = OP_EIO;
    if (rc != 0) {
        bx_say(x, "bench: load: cannot start the client's thread");
        free(t);
        return OP_EIO;
    }
    /* this thread's loop keeps serving the observer's watch meanwhile */
    if (bx_wait(x, thread_done, t, 700) != 0)
        t->x.interrupted = 1; /* its waits end within 5 ms */
    pthread_join(th, NULL);
    rc = t->rc;
    (void)uv_loop_close(&t->loop);
    free(t);
    return rc;
}
