/* Shared helpers of the kubesim engine unit tests: an engine on a private
 * loop, synchronous request calls, and watch sinks that collect output. */
#ifndef TEST_KUBESIM_UTIL_H
#define TEST_KUBESIM_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kubesim/ks.h"
#include "core/buf.h"
#include "core/json.h"
#include "core/mem.h"

typedef struct tk {
    uv_loop_t loop;
    ks *k;
    ks_config cfg;
} tk;

static OP_UNUSED void tk_closed(void *data)
{
    *(int *)data = 1;
}

static OP_UNUSED void tk_init_cfg(tk *t, const ks_config *cfg)
{
    mem_init();
    assert_int_equal(uv_loop_init(&t->loop), 0);
    t->cfg = *cfg;
    int err = 0;
    t->k = ks_new(&t->loop, cfg, &err);
    assert_non_null(t->k);
}

static OP_UNUSED void tk_init(tk *t)
{
    ks_config c;
    ks_config_defaults(&c);
    c.pod_start_delay_ms = 10;
    c.pod_ready_delay_ms = 10;
    c.max_grace_ms = 50;
    c.gc_delay_ms = 1;
    c.too_large_wait_ms = 0;
    c.seed = 42;
    tk_init_cfg(t, &c);
}

/* Run the loop for about ms milliseconds. */
static OP_UNUSED void tk_run(tk *t, int ms)
{
    uint64_t end = uv_hrtime() + (uint64_t)ms * 1000000;
    do {
        uv_run(&t->loop, UV_RUN_NOWAIT);
        struct timespec ts = {0, 500000};
        nanosleep(&ts, NULL);
    } while (uv_hrtime() < end);
    uv_run(&t->loop, UV_RUN_NOWAIT);
}

static OP_UNUSED void tk_done(tk *t)
{
    int closed = 0;
    ks_close(t->k, tk_closed, &closed);
    for (int i = 0; i < 1000 && !closed; i++)
        uv_run(&t->loop, UV_RUN_NOWAIT);
    assert_true(closed);
    uv_run(&t->loop, UV_RUN_NOWAIT);
    assert_int_equal(uv_loop_close(&t->loop), 0);
}

typedef struct tres {
    int status;
    cJSON *body; /* NULL when not JSON */
    char *raw;
    char *headers;
    ks_watch *watch;
    unsigned delay_ms;
} tres;

static OP_UNUSED tres tk_call_h(tk *t, const char *method, const char *path, const char *ctype,
                                const char *body, const char *auth, const char *cn)
{
    ks_req q;
    memset(&q, 0, sizeof(q));
    q.method = method;
    char *pth = xstrdup(path);
    char *qm = strchr(pth, '?');
    if (qm)
        *qm++ = '\0';
    q.path = pth;
    q.query = qm;
    q.content_type = ctype ? ctype : (body ? "application/json" : NULL);
    q.body = body;
    q.body_len = body ? strlen(body) : 0;
    q.user_agent = "kubesim-unit/1.0";
    q.authorization = auth;
    q.client_cn = cn;
    ks_resp r;
    ks_resp_init(&r);
    ks_handle(t->k, &q, &r);
    tres out;
    memset(&out, 0, sizeof(out));
    out.status = r.status;
    out.raw = xstrdup(buf_cstr(&r.body));
    out.headers = xstrdup(buf_cstr(&r.headers));
    out.body = json_parse(out.raw, strlen(out.raw), NULL);
    out.watch = r.watch;
    out.delay_ms = r.delay_ms;
    ks_resp_free(&r);
    free(pth);
    return out;
}

static OP_UNUSED tres tk_call(tk *t, const char *method, const char *path, const char *ctype,
                              const char *body)
{
    return tk_call_h(t, method, path, ctype, body, NULL, NULL);
}

static OP_UNUSED void tres_free(tres *r)
{
    cJSON_Delete(r->body);
    free(r->raw);
    free(r->headers);
    memset(r, 0, sizeof(*r));
}

/* Call, check the status, free. */
static OP_UNUSED void tk_expect(tk *t, const char *method, const char *path, const char *ctype,
                                const char *body, int status)
{
    tres r = tk_call(t, method, path, ctype, body);
    if (r.status != status)
        fprintf(stderr, "%s %s -> %d (want %d): %s\n", method, path, r.status, status, r.raw);
    assert_int_equal(r.status, status);
    tres_free(&r);
}

static OP_UNUSED const char *jstr(const tres *r, const char *path)
{
    return json_get_str(r->body, path);
}

/* A watch sink collecting the stream. */
typedef struct tw {
    buf_t out;
    int ended, aborted;
    ks_watch *w;
} tw;

static OP_UNUSED int tw_write(void *ctx, const char *b, size_t n)
{
    tw *w = ctx;
    return buf_append(&w->out, b, n);
}

static OP_UNUSED void tw_end(void *ctx, int abort_)
{
    tw *w = ctx;
    w->ended = 1;
    w->aborted = abort_;
    w->w = NULL;
}

/* Start a watch; returns the HTTP status (200 when streaming). */
static OP_UNUSED int tw_start(tk *t, tw *w, const char *path)
{
    memset(w, 0, sizeof(*w));
    buf_init(&w->out, BUF_UNLIMITED);
    tres r = tk_call(t, "GET", path, NULL, NULL);
    int st = r.status;
    if (r.watch) {
        w->w = r.watch;
        ks_sink s = {tw_write, tw_end, w};
        ks_watch_attach(w->w, &s);
    } else {
        fprintf(stderr, "watch %s -> %d %s\n", path, r.status, r.raw);
    }
    tres_free(&r);
    return st;
}

static OP_UNUSED void tw_stop(tw *w)
{
    if (w->w && !w->ended)
        ks_watch_cancel(w->w);
    w->w = NULL;
    buf_free(&w->out);
}

/* The events received so far as a JSON array (caller frees). */
static OP_UNUSED cJSON *tw_events(tw *w)
{
    cJSON *a = cJSON_CreateArray();
    const char *p = buf_cstr(&w->out);
    while (*p) {
        const char *nl = strchr(p, '\n');
        if (nl == NULL)
            break;
        cJSON *e = json_parse(p, (size_t)(nl - p), NULL);
        assert_non_null(e);
        cJSON_AddItemToArray(a, e);
        p = nl + 1;
    }
    return a;
}

/* "TYPE:name:rv" per event, space separated, for compact assertions. */
static OP_UNUSED char *tw_summary(tw *w)
{
    cJSON *a = tw_events(w);
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    for (const cJSON *e = a->child; e; e = e->next) {
        const char *name = json_get_str_or(json_child(e, "object"), "metadata.name", "");
        if (buf_printf(&b, "%s%s:%s", b.len ? " " : "", json_get_str_or(e, "type", "?"), name) != 0)
            abort();
    }
    cJSON_Delete(a);
    char *s = xstrdup(buf_cstr(&b));
    buf_free(&b);
    return s;
}

#define POD_JSON(name, labels)                                                                               \
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"" name "\",\"labels\":" labels "},"    \
    "\"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"busybox:1.36\"}]}}"

#define CM_JSON(name)                                                                                        \
    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"" name                           \
    "\"},\"data\":{\"a\":\"1\"}}"

#endif
