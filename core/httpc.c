/* httpc: HTTP/1.1 client pool on conn + llhttp. See httpc.h for the contract.
 *
 * Objects and their lifetimes:
 *  - hc_pool: freed when it was closed and its last connection and request
 *    are gone (counted in n_live_conns / n_live_reqs) and its own timer
 *    handle is closed, so on_closed always runs from a close callback;
 *  - hc_conn: one conn plus a response parser. It is IDLE (in pool->idle,
 *    most recently used first), or ACTIVE (in pool->active: connecting or
 *    carrying one request), or closing (in no list). A streaming request
 *    gets an ACTIVE conn of its own that does not count against max_conns;
 *  - hc_req: queued (pool->queue_prio or pool->queue), bound to a connecting conn, active on a
 *    conn, completing (result stored, delivered from its timer on the next
 *    turn), or done. Each request has a uv_timer_t that serves its
 *    deadlines (request timeout and idle timeout, re-armed lazily) and the
 *    asynchronous completions; the request is freed in that timer's close
 *    callback after on_done returned.
 *
 * The request bytes (line, headers and body) are built once at submit in
 * one reference-counted block that conn writes without copying; a retry on
 * a fresh connection writes the same block again. Buffered bodies are
 * reserved to their Content-Length so they are copied once, and streamed
 * bodies are handed to on_data straight from the read buffer.
 */
#include "core/httpc.h"

#include <assert.h>
#include <llhttp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/conn.h"
#include "core/err.h"
#include "core/list.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/tls.h"

#define DEF_MAX_CONNS 16
#define DEF_MAX_HEADER (64 * 1024)
#define DEF_MAX_BODY (64 * 1024 * 1024)
#define DEF_CONNECT_MS 10000
#define DEF_IDLE_CONN_MS 90000
/* A buffered body this big gets huge pages (mem_advise_huge): a node table
 * of 8,192 nodes (11 MB) spent more of its receive in page faults than in
 * copying. */
#define HUGE_BODY_BYTES (4u << 20)

enum req_state { RQ_NEW, RQ_QUEUED, RQ_CONNECTING, RQ_ACTIVE, RQ_COMPLETING, RQ_DONE };
enum conn_state { HCS_CONNECTING, HCS_IDLE, HCS_BUSY, HCS_CLOSING };

typedef struct wire {
    int refs;
    size_t len;
    char data[];
} wire;

typedef struct hc_conn hc_conn;

struct hc_req {
    hc_pool *pool;
    list_node link; /* pool->queue_prio or pool->queue */
    hc_conn *hconn;
    int state;
    wire *w;
    int streaming;
    int urgent;
    int prio;
    int first; /* hc_req_opts.first: at the head of queue_prio, within max_conns */
    int idempotent;
    int is_head;
    int close_after; /* the caller sent Connection: close */
    int retried;
    int need_fresh;
    int on_reused; /* sent on a kept-alive connection */
    int got_bytes; /* some response byte arrived */
    int paused;    /* hc_pause: the connection's reading is stopped */
    int result;    /* status for a pending completion */
    int err;       /* error decided inside a parser callback */
    unsigned idle_ms;
    unsigned exchange_ms; /* request_timeout_ms: armed when a connection takes the request */
    uint64_t deadline;    /* 0 = none; the earlier of the exchange's and total_timeout_ms's */
    int dispatched;       /* a connection took it once: the exchange's clock is running */
    uint64_t last_activity;
    hc_headers_cb on_headers;
    hc_data_cb on_data;
    hc_done_cb on_done;
    void *data;
    uv_timer_t timer;
    /* response */
    int status;
    int informational;
    int headers_done;
    size_t hdr_bytes;
    buf_t hdr;
    size_t *hoff;
    size_t nh, hcap;
    size_t name_off, val_off;
    int field_open;
    hc_header *harr;
    buf_t body;
};

struct hc_conn {
    hc_pool *pool;
    conn *c;
    list_node link;
    int state;
    int counted; /* against max_conns */
    int streaming;
    hc_req *req;
    llhttp_t parser;
    unsigned served;
    int keep_alive;
    int msg_done;
};

struct hc_pool {
    uv_loop_t *loop;
    char *host;     /* without brackets */
    char *host_hdr; /* Host header value */
    int port;
    tls_config *tls;
    hc_pool_opts opts;
    list_node idle;
    list_node active;
    list_node queue_prio; /* urgent (at its head) and prio requests, served before queue */
    list_node queue;      /* ordinary requests */
    int n_counted; /* conns against max_conns */
    int n_open;    /* conns not closing */
    int n_queued;
    int n_live_conns;
    int n_live_reqs;
    int closing;
    int in_api; /* hc_* calls under way: on_done never runs inside one (httpc.h) */
    int timer_open;
    uv_timer_t timer; /* only closed, to make the final callback asynchronous */
    void (*on_closed)(void *data);
    void *closed_data;
    hc_stats stats;
};

static llhttp_settings_t resp_settings;
static int settings_ready;

static void pump(hc_pool *pool);
static void hconn_close(hc_conn *hc);
static void req_deliver(hc_req *r, int status);
static void send_req(hc_conn *hc, hc_req *r);
static void maybe_free_pool(hc_pool *pool);

/* --- wire blocks --------------------------------------------------------- */

static void wire_unref(void *arg)
{
    wire *w = arg;
    assert(w->refs > 0);
    if (--w->refs == 0)
        free(w);
}

static int bad_token(const char *s)
{
    for (; *s; s++) {
        if (*s == '\r' || *s == '\n' || *s == '\0')
            return 1;
    }
    return 0;
}

static int has_space(const char *s)
{
    for (; *s; s++) {
        if (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
            return 1;
    }
    return 0;
}

static int skip_header(const char *name)
{
    return strcasecmp(name, "Host") == 0 || strcasecmp(name, "Content-Length") == 0 ||
           strcasecmp(name, "Transfer-Encoding") == 0;
}

static int method_has_body(const char *m)
{
    return strcmp(m, "POST") == 0 || strcmp(m, "PUT") == 0 || strcmp(m, "PATCH") == 0;
}

static int method_idempotent(const char *m)
{
    return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 || strcmp(m, "PUT") == 0 ||
           strcmp(m, "DELETE") == 0 || strcmp(m, "OPTIONS") == 0;
}

/* Build the whole request in one block of exactly the right size. */
static int build_wire(hc_pool *pool, hc_req *r, const hc_req_opts *o)
{
    if (!o->method || !*o->method || has_space(o->method) || !o->path || o->path[0] != '/' ||
        has_space(o->path))
        return OP_EINVAL;
    size_t body_len = o->body ? o->body_len : 0;
    char cl[48] = "";
    if (body_len || method_has_body(o->method))
        snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", body_len);
    size_t total = strlen(o->method) + 1 + strlen(o->path) + 11 + 6 + strlen(pool->host_hdr) + 2 +
                   strlen(cl) + 2 + body_len;
    for (size_t i = 0; i < o->n_headers; i++) {
        const hc_header *h = &o->headers[i];
        if (!h->name || !h->value || !*h->name || bad_token(h->name) || bad_token(h->value) ||
            strchr(h->name, ':'))
            return OP_EINVAL;
        if (skip_header(h->name))
            continue;
        if (strcasecmp(h->name, "Connection") == 0 && strcasecmp(h->value, "close") == 0)
            r->close_after = 1;
        total += strlen(h->name) + 2 + strlen(h->value) + 2;
    }
    wire *w = xmalloc(sizeof(*w) + total + 1);
    w->refs = 1;
    char *p = w->data;
#define PUT(s, n)                                                                                            \
    do {                                                                                                     \
        memcpy(p, (s), (n));                                                                                 \
        p += (n);                                                                                            \
    } while (0)
#define PUTS(s) PUT((s), strlen(s))
    PUTS(o->method);
    PUT(" ", 1);
    PUTS(o->path);
    PUT(" HTTP/1.1\r\n", 11);
    PUT("Host: ", 6);
    PUTS(pool->host_hdr);
    PUT("\r\n", 2);
    for (size_t i = 0; i < o->n_headers; i++) {
        const hc_header *h = &o->headers[i];
        if (skip_header(h->name))
            continue;
        PUTS(h->name);
        PUT(": ", 2);
        PUTS(h->value);
        PUT("\r\n", 2);
    }
    PUTS(cl);
    PUT("\r\n", 2);
    if (body_len)
        PUT(o->body, body_len);
#undef PUT
#undef PUTS
    w->len = (size_t)(p - w->data);
    assert(w->len == total);
    r->w = w;
    return 0;
}

/* --- request timer and completion ---------------------------------------- */

static void req_closed(uv_handle_t *h)
{
    hc_req *r = h->data;
    hc_pool *pool = r->pool;
    assert(r->state == RQ_DONE && pool->n_live_reqs > 0);
    if (r->w)
        wire_unref(r->w);
    buf_free(&r->hdr);
    buf_free(&r->body);
    free(r->hoff);
    free(r->harr);
    free(r);
    pool->n_live_reqs--;
    maybe_free_pool(pool);
}

static void req_timer_cb(uv_timer_t *t);

/* A connection takes the request: the exchange's clock starts now, not at
 * submit. Time spent in the pool's queue behind other requests is the
 * client's own backlog, not a slow server: counting it made every request
 * of a large burst against a busy API server time out together, and the
 * callers' retries only deepened the queue. A retry on a fresh connection
 * keeps the clock it had. */
static void req_dispatched(hc_req *r)
{
    if (r->dispatched)
        return;
    r->dispatched = 1;
    if (r->exchange_ms) {
        uint64_t d = uv_now(r->pool->loop) + r->exchange_ms;
        if (!r->deadline || d < r->deadline)
            r->deadline = d;
    }
}

static void req_arm(hc_req *r)
{
    if (r->state == RQ_DONE || r->state == RQ_COMPLETING)
        return;
    uint64_t next = UINT64_MAX;
    if (r->deadline)
        next = r->deadline;
    if (r->state == RQ_ACTIVE && r->idle_ms && !r->paused && r->last_activity + r->idle_ms < next)
        next = r->last_activity + r->idle_ms;
    if (next == UINT64_MAX) {
        uv_timer_stop(&r->timer);
        return;
    }
    uint64_t now = uv_now(r->pool->loop);
    uv_timer_start(&r->timer, req_timer_cb, next > now ? next - now : 0, 0);
}

/* Queue r for a connection: urgent requests at the head of the priority
 * queue, prio ones behind them, ordinary ones in their own queue; again
 * (a retry) at the head of its class, as it was handed out once already. */
static void queue_put(hc_pool *pool, hc_req *r, int again)
{
    list_node *q = r->urgent || r->prio || r->first ? &pool->queue_prio : &pool->queue;
    /* A closing pool completes requests instead of queueing them. */
    assert(!pool->closing && r->hconn == NULL && !list_is_linked(&r->link));
    r->state = RQ_QUEUED;
    if (r->urgent || r->first || again)
        list_insert_head(q, &r->link);
    else
        list_insert_tail(q, &r->link);
    pool->n_queued++;
}

static hc_req *queue_first(hc_pool *pool)
{
    list_node *n = list_first(&pool->queue_prio);
    if (n == NULL)
        n = list_first(&pool->queue);
    return n ? list_entry(n, hc_req, link) : NULL;
}

/* Take the request out of wherever it is. An active exchange cannot be
 * resumed, so its connection is closed; a connection still connecting
 * goes on without it. */
static void req_detach(hc_req *r)
{
    hc_pool *pool = r->pool;
    switch (r->state) {
    case RQ_QUEUED:
        assert(pool->n_queued > 0 && list_is_linked(&r->link));
        list_remove(&r->link);
        pool->n_queued--;
        break;
    case RQ_CONNECTING: {
        hc_conn *hc = r->hconn;
        assert(hc != NULL && hc->req == r);
        hc->req = NULL;
        if (hc->streaming)
            hconn_close(hc);
        break;
    }
    case RQ_ACTIVE: {
        hc_conn *hc = r->hconn;
        assert(hc != NULL && hc->req == r);
        hc->req = NULL;
        hconn_close(hc);
        break;
    }
    default:
        break;
    }
    r->hconn = NULL;
}

/* Complete from the loop on the next turn (API calls must not call back). */
static void req_complete_async(hc_req *r, int status)
{
    if (r->state == RQ_DONE || r->state == RQ_COMPLETING)
        return;
    req_detach(r);
    r->state = RQ_COMPLETING;
    r->result = status;
    uv_timer_start(&r->timer, req_timer_cb, 0, 0);
}

/* Complete now (only from loop callbacks, never from inside hc_*()). */
static void req_fail(hc_req *r, int status)
{
    if (r->state == RQ_DONE || r->state == RQ_COMPLETING)
        return;
    req_detach(r);
    req_deliver(r, status);
}

static void req_deliver(hc_req *r, int status)
{
    /* on_done runs exactly once, for a request no queue or connection
     * holds any more. */
    assert(r->state != RQ_DONE);
    assert(r->hconn == NULL && !list_is_linked(&r->link));
    assert(r->pool->in_api == 0);
    r->state = RQ_DONE;
    uv_timer_stop(&r->timer);
    hc_response resp;
    memset(&resp, 0, sizeof(resp));
    resp.body = "";
    if (status == 0) {
        resp.status = r->status;
        resp.headers = r->harr;
        resp.n_headers = r->harr ? r->nh : 0;
        resp.body = buf_cstr(&r->body);
        resp.body_len = r->body.len;
    }
    if (status < 0)
        log_debug("httpc %s: request failed: %s", r->pool->host_hdr, err_str(status));
    r->on_done(r, status, &resp, r->data);
    uv_close((uv_handle_t *)&r->timer, req_closed);
}

char *hc_take_body(hc_req *r, size_t *len)
{
    *len = 0;
    if (r->state != RQ_DONE || r->streaming || r->body.data == NULL || r->body.len == 0)
        return NULL;
    return buf_detach(&r->body, len);
}

static void req_timer_cb(uv_timer_t *t)
{
    hc_req *r = t->data;
    if (r->state == RQ_COMPLETING) {
        req_deliver(r, r->result);
        pump(r->pool);
        return;
    }
    if (r->state == RQ_DONE)
        return;
    uint64_t now = uv_now(r->pool->loop);
    int expired = (r->deadline && now >= r->deadline) ||
                  (r->state == RQ_ACTIVE && r->idle_ms && !r->paused && now >= r->last_activity + r->idle_ms);
    if (!expired) {
        req_arm(r);
        return;
    }
    hc_pool *pool = r->pool;
    req_fail(r, OP_ETIMEOUT);
    pump(pool);
}

/* --- response parser ----------------------------------------------------- */

static hc_req *cur_req(llhttp_t *p)
{
    return ((hc_conn *)p->data)->req;
}

static int parse_fail(llhttp_t *p, hc_req *r, int err, const char *why)
{
    if (r)
        r->err = err;
    llhttp_set_error_reason(p, why);
    return HPE_USER;
}

static int count_hdr(llhttp_t *p, hc_req *r, size_t n)
{
    r->hdr_bytes += n;
    if (r->hdr_bytes > r->pool->opts.max_header_bytes)
        return parse_fail(p, r, OP_ETOOBIG, "response headers too large");
    return 0;
}

static void resp_reset(hc_req *r)
{
    r->status = 0;
    r->informational = 0;
    r->headers_done = 0;
    r->hdr_bytes = 0;
    buf_reset(&r->hdr);
    r->nh = 0;
    r->field_open = 0;
    free(r->harr);
    r->harr = NULL;
    buf_reset(&r->body);
}

static int on_message_begin(llhttp_t *p)
{
    hc_req *r = cur_req(p);
    if (!r)
        return HPE_USER;
    resp_reset(r);
    return 0;
}

static int on_status(llhttp_t *p, const char *at, size_t n)
{
    hc_req *r = cur_req(p);
    return r ? count_hdr(p, r, n) : HPE_USER;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    hc_req *r = cur_req(p);
    if (!r)
        return HPE_USER;
    if (count_hdr(p, r, n))
        return HPE_USER;
    if (r->headers_done)
        return 0; /* trailers: counted, not kept */
    if (!r->field_open) {
        r->field_open = 1;
        r->name_off = r->hdr.len;
    }
    if (buf_append(&r->hdr, at, n) != 0)
        return parse_fail(p, r, OP_ETOOBIG, "response headers too large");
    return 0;
}

static int on_header_field_complete(llhttp_t *p)
{
    hc_req *r = cur_req(p);
    if (!r)
        return HPE_USER;
    if (r->headers_done)
        return 0;
    if (!r->field_open)
        r->name_off = r->hdr.len;
    r->field_open = 0;
    if (buf_putc(&r->hdr, '\0') != 0)
        return parse_fail(p, r, OP_ETOOBIG, "response headers too large");
    r->val_off = r->hdr.len;
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    hc_req *r = cur_req(p);
    if (!r)
        return HPE_USER;
    if (count_hdr(p, r, n))
        return HPE_USER;
    if (r->headers_done)
        return 0;
    if (buf_append(&r->hdr, at, n) != 0)
        return parse_fail(p, r, OP_ETOOBIG, "response headers too large");
    return 0;
}

static int on_header_value_complete(llhttp_t *p)
{
    hc_req *r = cur_req(p);
    if (!r)
        return HPE_USER;
    if (count_hdr(p, r, 4))
        return HPE_USER;
    if (r->headers_done)
        return 0;
    if (buf_putc(&r->hdr, '\0') != 0)
        return parse_fail(p, r, OP_ETOOBIG, "response headers too large");
    if (r->nh == r->hcap) {
        r->hcap = r->hcap ? r->hcap * 2 : 16;
        r->hoff = xrealloc(r->hoff, r->hcap * 2 * sizeof(size_t));
    }
    assert(r->nh < r->hcap && r->name_off < r->val_off && r->val_off < r->hdr.len);
    r->hoff[2 * r->nh] = r->name_off;
    r->hoff[2 * r->nh + 1] = r->val_off;
    r->nh++;
    return 0;
}

static void make_resp(hc_req *r, hc_response *resp)
{
    resp->status = r->status;
    resp->headers = r->harr;
    resp->n_headers = r->harr ? r->nh : 0;
    resp->body = "";
    resp->body_len = 0;
}

static int on_headers_complete(llhttp_t *p)
{
    hc_conn *hc = p->data;
    hc_req *r = hc->req;
    if (!r)
        return HPE_USER;
    r->status = p->status_code;
    if (r->status >= 100 && r->status < 200 && r->status != 101) {
        /* Interim response (100 Continue, 103 Early Hints): skip it and
         * parse the real one that follows. */
        r->informational = 1;
        return 1;
    }
    r->headers_done = 1;
    if (r->nh) {
        r->harr = xmalloc(r->nh * sizeof(hc_header));
        for (size_t i = 0; i < r->nh; i++) {
            assert(r->hoff[2 * i] < r->hoff[2 * i + 1] && r->hoff[2 * i + 1] < r->hdr.len);
            r->harr[i].name = r->hdr.data + r->hoff[2 * i];
            r->harr[i].value = r->hdr.data + r->hoff[2 * i + 1];
        }
    }
    int no_body = r->is_head || r->status == 204 || r->status == 304;
    if (!r->streaming && !no_body && (p->flags & F_CONTENT_LENGTH)) {
        if (p->content_length > r->pool->opts.max_body_bytes)
            return parse_fail(p, r, OP_ETOOBIG, "response body too large");
        /* One allocation of the right size: the body is copied once. */
        if (buf_reserve(&r->body, (size_t)p->content_length) != 0)
            return parse_fail(p, r, OP_ETOOBIG, "response body too large");
        if (p->content_length >= HUGE_BODY_BYTES)
            mem_advise_huge(r->body.data, r->body.cap);
    }
    if (r->on_headers) {
        hc_response resp;
        make_resp(r, &resp);
        assert(r->pool->in_api == 0);
        r->on_headers(r, &resp, r->data);
        if (hc->req != r)
            return HPE_USER; /* canceled from the callback */
    }
    /* The parser cannot know the request was HEAD, and 204/304 never have a
     * body whatever their headers say: without this, a reused connection
     * would misparse the next response. */
    return no_body ? 1 : 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    hc_conn *hc = p->data;
    hc_req *r = hc->req;
    if (!r)
        return HPE_USER;
    if (r->streaming) {
        assert(r->pool->in_api == 0);
        if (r->on_data(r, at, n, r->data) != 0) {
            if (hc->req == r)
                r->err = OP_ECANCELED;
            return parse_fail(p, NULL, 0, "aborted by on_data");
        }
        if (hc->req != r)
            return HPE_USER;
        return 0;
    }
    if (buf_append(&r->body, at, n) != 0)
        return parse_fail(p, r, OP_ETOOBIG, "response body too large");
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    hc_conn *hc = p->data;
    hc_req *r = hc->req;
    if (!r)
        return HPE_USER;
    if (r->informational) {
        resp_reset(r);
        return 0;
    }
    hc->keep_alive = llhttp_should_keep_alive(p);
    hc->msg_done = 1;
    return HPE_PAUSED;
}

static void settings_init(void)
{
    if (settings_ready)
        return;
    llhttp_settings_init(&resp_settings);
    resp_settings.on_message_begin = on_message_begin;
    resp_settings.on_status = on_status;
    resp_settings.on_header_field = on_header_field;
    resp_settings.on_header_field_complete = on_header_field_complete;
    resp_settings.on_header_value = on_header_value;
    resp_settings.on_header_value_complete = on_header_value_complete;
    resp_settings.on_headers_complete = on_headers_complete;
    resp_settings.on_body = on_body;
    resp_settings.on_message_complete = on_message_complete;
    settings_ready = 1;
}

/* --- connections --------------------------------------------------------- */

static void hconn_make_idle(hc_conn *hc)
{
    hc_pool *pool = hc->pool;
    /* Only a pooled connection with no request goes idle; a streaming one
     * is closed after its one request. */
    assert(hc->req == NULL && !hc->streaming && hc->state != HCS_CLOSING && !pool->closing);
    hc->state = HCS_IDLE;
    list_remove(&hc->link);
    list_insert_head(&pool->idle, &hc->link);
    if (pool->opts.idle_conn_timeout_ms)
        conn_timer_start(hc->c, pool->opts.idle_conn_timeout_ms);
}

static void hconn_close(hc_conn *hc)
{
    if (hc->state == HCS_CLOSING)
        return;
    hc_pool *pool = hc->pool;
    assert(pool->n_open > 0 && list_is_linked(&hc->link));
    hc->state = HCS_CLOSING;
    list_remove(&hc->link);
    if (hc->counted) {
        assert(pool->n_counted > 0);
        hc->counted = 0;
        pool->n_counted--;
    }
    pool->n_open--;
    conn_close(hc->c);
}

/* A complete response arrived. */
static void response_done(hc_conn *hc, int extra_bytes)
{
    hc_pool *pool = hc->pool;
    hc_req *r = hc->req;
    assert(r != NULL && r->hconn == hc && r->state == RQ_ACTIVE && hc->state == HCS_BUSY);
    int keep = hc->keep_alive && !extra_bytes && !hc->streaming && !r->close_after && !pool->closing;
    hc->req = NULL;
    r->hconn = NULL;
    hc->served++;
    /* Make the connection available before on_done so that a request
     * submitted from the callback reuses it. */
    if (keep)
        hconn_make_idle(hc);
    else
        hconn_close(hc);
    req_deliver(r, 0);
    pump(pool);
}

static int is_reset(int err)
{
    return err == UV_EOF || err == UV_ECONNRESET || err == UV_EPIPE || err == UV_ECONNABORTED;
}

/* The read side ended while a request was active. */
static void hconn_ended(hc_conn *hc, int err)
{
    hc_pool *pool = hc->pool;
    hc_req *r = hc->req;
    if (!r || hc->state == HCS_CONNECTING) {
        /* Not established yet (conn reports those through on_connect; be
         * safe anyway) or idle: nothing to salvage. */
        hc->req = NULL;
        hconn_close(hc);
        if (r) {
            r->hconn = NULL;
            req_deliver(r, is_reset(err) ? OP_ECLOSED : err);
        }
        pump(pool);
        return;
    }
    if (r->got_bytes) {
        if (err == UV_EOF) {
            /* A body delimited by the end of the connection ends here. */
            hc->msg_done = 0;
            llhttp_errno_t e = llhttp_finish(&hc->parser);
            if (hc->msg_done && hc->req == r) {
                hc->keep_alive = 0;
                response_done(hc, 0);
                return;
            }
            (void)e;
        }
        req_fail(r, is_reset(err) ? OP_ECLOSED : err);
        hconn_close(hc);
        pump(pool);
        return;
    }
    if (is_reset(err) && r->on_reused && !r->retried && r->idempotent) {
        /* The server closed a kept-alive connection as we reused it: the
         * request never reached it, so send it once more on a new one. */
        log_debug("httpc %s: kept-alive connection was closed, retrying on a new one", pool->host_hdr);
        hc->req = NULL;
        r->hconn = NULL;
        hconn_close(hc);
        r->retried = 1;
        r->need_fresh = 1;
        r->on_reused = 0;
        queue_put(pool, r, 1);
        pump(pool);
        return;
    }
    req_fail(r, is_reset(err) ? OP_ECLOSED : err);
    hconn_close(hc);
    pump(pool);
}

static void hc_on_read(conn *c, ssize_t nread, const char *bytes)
{
    hc_conn *hc = conn_data(c);
    hc_pool *pool = hc->pool;
    if (hc->state == HCS_CLOSING)
        return;
    if (nread < 0) {
        hconn_ended(hc, (int)nread);
        return;
    }
    hc_req *r = hc->req;
    if (!r) {
        /* Bytes on an idle connection: nothing can be parsed from them. */
        hconn_close(hc);
        pump(pool);
        return;
    }
    pool->stats.bytes_in += (unsigned long long)nread;
    r->got_bytes = 1;
    r->last_activity = uv_now(pool->loop);
    hc->msg_done = 0;
    llhttp_errno_t err = llhttp_execute(&hc->parser, bytes, (size_t)nread);
    if (hc->state == HCS_CLOSING || hc->req != r)
        return; /* canceled or the pool closed from a callback */
    if (err == HPE_OK)
        return;
    if (err == HPE_PAUSED && hc->msg_done) {
        const char *pos = llhttp_get_error_pos(&hc->parser);
        size_t used = (size_t)(pos - bytes);
        response_done(hc, used < (size_t)nread);
        return;
    }
    int code = r->err ? r->err : OP_EPROTO;
    if (!r->err)
        log_debug("httpc %s: bad response: %s (%s)", pool->host_hdr, llhttp_errno_name(err),
                  llhttp_get_error_reason(&hc->parser));
    req_fail(r, code);
    pump(pool);
}

static void hc_on_connect(conn *c, int status)
{
    hc_conn *hc = conn_data(c);
    hc_pool *pool = hc->pool;
    hc_req *r = hc->req;
    /* conn reports no connect after hconn_close (it calls no user callback
     * once closed), and a request detached from a connecting conn left it. */
    assert(hc->state == HCS_CONNECTING);
    assert(r == NULL || (r->hconn == hc && r->state == RQ_CONNECTING));
    if (status < 0) {
        log_debug("httpc %s: connect failed: %s", pool->host_hdr, err_str(status));
        hc->req = NULL;
        hconn_close(hc);
        if (r) {
            r->hconn = NULL;
            r->state = RQ_NEW; /* detached already */
            req_deliver(r, status);
        }
        pump(pool);
        return;
    }
    if (r) {
        send_req(hc, r);
        return;
    }
    hconn_make_idle(hc);
    pump(pool);
}

static void hc_on_timer(conn *c)
{
    hc_conn *hc = conn_data(c);
    if (hc->state == HCS_IDLE) {
        hconn_close(hc);
        pump(hc->pool);
    }
}

static void hc_on_close(conn *c)
{
    hc_conn *hc = conn_data(c);
    hc_pool *pool = hc->pool;
    assert(hc->state == HCS_CLOSING && hc->req == NULL && pool->n_live_conns > 0);
    pool->n_live_conns--;
    free(hc);
    maybe_free_pool(pool);
}

static const conn_cbs hc_conn_cbs = {
    .on_connect = hc_on_connect,
    .on_read = hc_on_read,
    .on_timer = hc_on_timer,
    .on_close = hc_on_close,
};

static hc_conn *hconn_new(hc_pool *pool, hc_req *r, int streaming)
{
    assert((r->state == RQ_NEW || r->state == RQ_QUEUED) && !list_is_linked(&r->link) && r->hconn == NULL);
    hc_conn *hc = xcalloc(1, sizeof(*hc));
    hc->pool = pool;
    hc->state = HCS_CONNECTING;
    hc->streaming = streaming;
    hc->counted = !streaming;
    list_init(&hc->link);
    list_insert_tail(&pool->active, &hc->link);
    if (hc->counted)
        pool->n_counted++;
    pool->n_open++;
    pool->n_live_conns++;
    pool->stats.connects++;
    hc->req = r;
    r->hconn = hc;
    r->state = RQ_CONNECTING;
    req_dispatched(r);
    req_arm(r);
    conn_connect_opts co = {
        .host = pool->host,
        .port = pool->port,
        .tls = pool->tls,
        .timeout_ms = pool->opts.connect_timeout_ms,
    };
    hc->c = conn_connect(pool->loop, &co, &hc_conn_cbs, hc);
    conn_read_start(hc->c);
    return hc;
}

static void send_req(hc_conn *hc, hc_req *r)
{
    hc_pool *pool = hc->pool;
    assert(hc->state == HCS_IDLE || hc->state == HCS_CONNECTING);
    assert(hc->req == NULL || hc->req == r);
    assert(r->w != NULL && r->w->refs > 0 && !list_is_linked(&r->link));
    if (hc->state == HCS_IDLE)
        conn_timer_stop(hc->c);
    hc->state = HCS_BUSY;
    list_remove(&hc->link);
    list_insert_tail(&pool->active, &hc->link);
    hc->req = r;
    r->hconn = hc;
    r->state = RQ_ACTIVE;
    req_dispatched(r); /* armed below */
    r->got_bytes = 0;
    r->err = 0;
    r->on_reused = hc->served > 0;
    if (r->on_reused)
        pool->stats.reused++;
    resp_reset(r);
    llhttp_init(&hc->parser, HTTP_RESPONSE, &resp_settings);
    hc->parser.data = hc;
    hc->msg_done = 0;
    r->w->refs++;
    pool->stats.bytes_out += r->w->len;
    if (conn_write_ref(hc->c, r->w->data, r->w->len, wire_unref, r->w) != 0) {
        /* The conn already failed: its on_read reports the end. */
        log_debug("httpc %s: write refused", pool->host_hdr);
    }
    r->last_activity = uv_now(pool->loop);
    req_arm(r);
}

/* Hand queued requests to idle or new connections: the priority queue
 * first, each queue oldest first. */
static void pump(hc_pool *pool)
{
    if (pool->closing)
        return;
    hc_req *r;
    while ((r = queue_first(pool)) != NULL) {
        hc_conn *hc = NULL;
        if (!r->need_fresh && !list_empty(&pool->idle))
            hc = list_entry(list_first(&pool->idle), hc_conn, link);
        if (!hc && pool->n_counted >= pool->opts.max_conns && !r->urgent) {
            if (!r->need_fresh || list_empty(&pool->idle))
                break;
            /* A retry needs a new connection: give up the oldest idle one. */
            hconn_close(list_entry(pool->idle.prev, hc_conn, link));
        }
        list_remove(&r->link);
        pool->n_queued--;
        r->need_fresh = 0;
        if (hc)
            send_req(hc, r);
        else
            hconn_new(pool, r, 0);
    }
}

/* --- pool ---------------------------------------------------------------- */

static void maybe_free_pool(hc_pool *pool)
{
    if (!pool->closing || pool->timer_open || pool->n_live_conns > 0 || pool->n_live_reqs > 0)
        return;
    assert(pool->n_live_conns == 0 && pool->n_live_reqs == 0 && pool->n_open == 0 && pool->n_queued == 0);
    assert(list_empty(&pool->idle) && list_empty(&pool->active) && list_empty(&pool->queue_prio) &&
           list_empty(&pool->queue));
    void (*cb)(void *) = pool->on_closed;
    void *data = pool->closed_data;
    tls_config_unref(pool->tls);
    free(pool->host);
    free(pool->host_hdr);
    free(pool);
    if (cb)
        cb(data);
}

static void pool_timer_closed(uv_handle_t *h)
{
    hc_pool *pool = h->data;
    pool->timer_open = 0;
    maybe_free_pool(pool);
}

static int parse_url(const char *url, int *https, char **host, char **host_hdr, int *port)
{
    const char *p;
    if (strncasecmp(url, "http://", 7) == 0) {
        *https = 0;
        p = url + 7;
    } else if (strncasecmp(url, "https://", 8) == 0) {
        *https = 1;
        p = url + 8;
    } else {
        return OP_EINVAL;
    }
    const char *hs = p, *he;
    if (*p == '[') {
        he = strchr(p, ']');
        if (!he)
            return OP_EINVAL;
        he++;
        p = he;
    } else {
        while (*p && *p != ':' && *p != '/')
            p++;
        he = p;
    }
    if (he == hs)
        return OP_EINVAL;
    int prt = *https ? 443 : 80;
    int explicit_port = 0;
    if (*p == ':') {
        char *end;
        long v = strtol(p + 1, &end, 10);
        if (end == p + 1 || v <= 0 || v > 65535)
            return OP_EINVAL;
        prt = (int)v;
        explicit_port = 1;
        p = end;
    }
    if (*p && strcmp(p, "/") != 0)
        return OP_EINVAL; /* no path part */
    size_t hl = (size_t)(he - hs);
    for (size_t i = 0; i < hl; i++) {
        if (hs[i] == ' ' || hs[i] == '\r' || hs[i] == '\n' || hs[i] == '@')
            return OP_EINVAL;
    }
    *host_hdr = explicit_port ? xasprintf("%.*s:%d", (int)hl, hs, prt) : xstrndup(hs, hl);
    if (hs[0] == '[')
        *host = xstrndup(hs + 1, hl - 2);
    else
        *host = xstrndup(hs, hl);
    *port = prt;
    return 0;
}

hc_pool *hc_pool_new(uv_loop_t *loop, const char *base_url, const hc_pool_opts *opts, int *err)
{
    static const hc_pool_opts defaults = {0};
    if (!opts)
        opts = &defaults;
    int https = 0, port = 0;
    char *host = NULL, *host_hdr = NULL;
    int rc = base_url ? parse_url(base_url, &https, &host, &host_hdr, &port) : OP_EINVAL;
    if (rc) {
        *err = rc;
        return NULL;
    }
    tls_config *tls = NULL;
    if (https) {
        if (!opts->tls) {
            rc = OP_EINVAL;
        } else {
            tls_client_opts to = {
                .ca_pem = opts->tls->ca_pem,
                .ca_len = opts->tls->ca_len,
                .cert_pem = opts->tls->cert_pem,
                .cert_len = opts->tls->cert_len,
                .key_pem = opts->tls->key_pem,
                .key_len = opts->tls->key_len,
                .server_name = opts->tls->server_name,
                .insecure_skip_verify = opts->tls->insecure_skip_verify,
            };
            tls = tls_client_config_new(&to, &rc);
        }
        if (!tls) {
            free(host);
            free(host_hdr);
            *err = rc;
            return NULL;
        }
    }
    settings_init();
    hc_pool *pool = xcalloc(1, sizeof(*pool));
    pool->loop = loop;
    pool->host = host;
    pool->host_hdr = host_hdr;
    pool->port = port;
    pool->tls = tls;
    pool->opts = *opts;
    pool->opts.tls = NULL;
    if (pool->opts.max_conns <= 0)
        pool->opts.max_conns = DEF_MAX_CONNS;
    if (!pool->opts.max_header_bytes)
        pool->opts.max_header_bytes = DEF_MAX_HEADER;
    if (!pool->opts.max_body_bytes)
        pool->opts.max_body_bytes = DEF_MAX_BODY;
    if (!pool->opts.connect_timeout_ms)
        pool->opts.connect_timeout_ms = DEF_CONNECT_MS;
    if (!pool->opts.idle_conn_timeout_ms)
        pool->opts.idle_conn_timeout_ms = DEF_IDLE_CONN_MS;
    list_init(&pool->idle);
    list_init(&pool->active);
    list_init(&pool->queue_prio);
    list_init(&pool->queue);
    uv_timer_init(loop, &pool->timer);
    pool->timer.data = pool;
    pool->timer_open = 1;
    return pool;
}

static void hc_pool_close_in(hc_pool *pool, void (*on_closed)(void *data), void *data)
{
    if (pool->closing)
        return;
    pool->closing = 1;
    pool->on_closed = on_closed;
    pool->closed_data = data;
    hc_req *r;
    while ((r = queue_first(pool)) != NULL)
        req_complete_async(r, OP_ECANCELED);
    while (!list_empty(&pool->active)) {
        hc_conn *hc = list_entry(list_first(&pool->active), hc_conn, link);
        if (hc->req)
            req_complete_async(hc->req, OP_ECANCELED); /* closes hc when active */
        hconn_close(hc);
    }
    while (!list_empty(&pool->idle))
        hconn_close(list_entry(list_first(&pool->idle), hc_conn, link));
    assert(pool->n_queued == 0 && pool->n_open == 0 && pool->n_counted == 0);
    uv_close((uv_handle_t *)&pool->timer, pool_timer_closed);
}

void hc_pool_close(hc_pool *pool, void (*on_closed)(void *data), void *data)
{
    pool->in_api++;
    hc_pool_close_in(pool, on_closed, data);
    pool->in_api--;
}

static hc_req *hc_request_in(hc_pool *pool, const hc_req_opts *opts)
{
    hc_req *r = xcalloc(1, sizeof(*r));
    r->pool = pool;
    r->state = RQ_NEW;
    list_init(&r->link);
    buf_init(&r->hdr, pool->opts.max_header_bytes + 4096);
    buf_init(&r->body, pool->opts.max_body_bytes);
    uv_timer_init(pool->loop, &r->timer);
    r->timer.data = r;
    pool->n_live_reqs++;
    pool->stats.requests++;
    r->on_done = opts->on_done;
    r->on_headers = opts->on_headers;
    r->on_data = opts->on_data;
    r->data = opts->data;
    r->streaming = opts->on_data != NULL;
    r->idle_ms = opts->idle_timeout_ms;
    r->urgent = opts->urgent;
    r->prio = opts->prio;
    r->first = opts->first;
    if (!opts->on_done) {
        /* Nobody to tell: a programming error. */
        log_error("httpc: hc_request without on_done");
        abort();
    }
    int rc = pool->closing ? OP_ECANCELED : build_wire(pool, r, opts);
    if (rc) {
        req_complete_async(r, rc);
        return r;
    }
    r->is_head = strcmp(opts->method, "HEAD") == 0;
    r->idempotent = method_idempotent(opts->method);
    r->exchange_ms = opts->request_timeout_ms;
    if (opts->total_timeout_ms)
        r->deadline = uv_now(pool->loop) + opts->total_timeout_ms;
    if (r->streaming) {
        hconn_new(pool, r, 1);
    } else {
        /* An urgent request goes first; it may exceed max_conns (see pump),
         * so a pool full of slow writes cannot hold it back. A prio one
         * goes ahead of ordinary requests but waits for a connection. */
        queue_put(pool, r, 0);
        pump(pool);
    }
    req_arm(r);
    return r;
}

/* The API calls count themselves in pool->in_api, which every user callback
 * site asserts is 0 (httpc.h: completions are always asynchronous). */
hc_req *hc_request(hc_pool *pool, const hc_req_opts *opts)
{
    pool->in_api++;
    hc_req *r = hc_request_in(pool, opts);
    pool->in_api--;
    return r;
}

static void hc_cancel_in(hc_req *req)
{
    if (!req || req->state == RQ_DONE || req->state == RQ_COMPLETING)
        return;
    hc_pool *pool = req->pool;
    req_complete_async(req, OP_ECANCELED);
    pump(pool);
}

void hc_cancel(hc_req *req)
{
    if (!req)
        return;
    hc_pool *pool = req->pool;
    pool->in_api++;
    hc_cancel_in(req);
    pool->in_api--;
}

void hc_pause(hc_req *req)
{
    if (!req || !req->streaming || req->paused || req->state != RQ_ACTIVE || !req->hconn || !req->hconn->c)
        return;
    req->paused = 1;
    conn_read_stop(req->hconn->c);
}

void hc_resume(hc_req *req)
{
    if (!req || !req->paused)
        return;
    req->paused = 0;
    if (req->state != RQ_ACTIVE || !req->hconn || !req->hconn->c)
        return;
    /* The pause was the consumer's, not the server's silence. */
    req->last_activity = uv_now(req->pool->loop);
    req_arm(req);
    conn_read_start(req->hconn->c);
}

int hc_req_on_wire(const hc_req *req)
{
    return req->state == RQ_ACTIVE;
}

const char *hc_header_get(const hc_response *resp, const char *name)
{
    for (size_t i = 0; i < resp->n_headers; i++) {
        if (strcasecmp(resp->headers[i].name, name) == 0)
            return resp->headers[i].value;
    }
    return NULL;
}

void hc_pool_stats(const hc_pool *pool, hc_stats *out)
{
    *out = pool->stats;
    out->open_conns = pool->n_open;
    out->queued = pool->n_queued;
}
