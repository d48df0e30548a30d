/* Shared helpers for the HTTP/TLS tests: a loop with a watchdog, the
 * libuv-style "walk, close, loop_close == 0" teardown, a raw TCP server
 * that answers with canned bytes (optionally split or dribbled), and a raw
 * TCP client that writes a blob and collects everything it gets back.
 *
 * Include after cmocka.h. Everything is static and marked unused so each
 * test file takes what it needs.
 */
#ifndef HTTP_TEST_UTIL_H
#define HTTP_TEST_UTIL_H

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "core/buf.h"
#include "core/list.h"
#include "core/mem.h"

/* --- loop with watchdog ---------------------------------------------------- */

typedef struct test_loop {
    uv_loop_t loop;
    uv_timer_t watchdog;
} test_loop;

static void watchdog_cb(uv_timer_t *t)
{
    (void)t;
    fail_msg("watchdog: test did not finish in time");
}

OP_UNUSED static uv_loop_t *tl_start(test_loop *tl, unsigned timeout_ms)
{
    assert_int_equal(uv_loop_init(&tl->loop), 0);
    uv_timer_init(&tl->loop, &tl->watchdog);
    uv_timer_start(&tl->watchdog, watchdog_cb, timeout_ms, 0);
    uv_unref((uv_handle_t *)&tl->watchdog);
    return &tl->loop;
}

/* Run until *flag becomes non-zero. The watchdog fails the test if it
 * never does. */
OP_UNUSED static void tl_run_until(test_loop *tl, const int *flag)
{
    uv_ref((uv_handle_t *)&tl->watchdog);
    while (!*flag)
        uv_run(&tl->loop, UV_RUN_ONCE);
    uv_unref((uv_handle_t *)&tl->watchdog);
}

/* Run until *count reaches n: what a test waits for when a loaded machine
 * (sanitizers, tests in parallel) may take longer than any fixed time. */
OP_UNUSED static void tl_run_until_count(test_loop *tl, const int *count, int n)
{
    uv_ref((uv_handle_t *)&tl->watchdog);
    while (*count < n)
        uv_run(&tl->loop, UV_RUN_ONCE);
    uv_unref((uv_handle_t *)&tl->watchdog);
}

/* Run for ms milliseconds. */
static void sleep_cb(uv_timer_t *t)
{
    *(int *)t->data = 1;
    uv_close((uv_handle_t *)t, (uv_close_cb)free);
}

OP_UNUSED static void tl_run_for(test_loop *tl, unsigned ms)
{
    int done = 0;
    uv_timer_t *t = xmalloc(sizeof(*t));
    uv_timer_init(&tl->loop, t);
    t->data = &done;
    uv_timer_start(t, sleep_cb, ms, 0);
    tl_run_until(tl, &done);
}

typedef struct walk_count {
    test_loop *tl;
    int open;
} walk_count;

static void count_handle(uv_handle_t *h, void *arg)
{
    walk_count *wc = arg;
    if (h == (uv_handle_t *)&wc->tl->watchdog)
        return;
    if (!uv_is_closing(h)) {
        wc->open++;
        fprintf(stderr, "open handle left: type=%s\n", uv_handle_type_name(h->type));
    }
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* Teardown: everything the test created must already be closed (the
 * watchdog excepted); then walk and close as libuv's tests do, and the
 * loop must close cleanly. */
OP_UNUSED static void tl_finish(test_loop *tl)
{
    uv_run(&tl->loop, UV_RUN_DEFAULT);
    walk_count wc = {tl, 0};
    uv_walk(&tl->loop, count_handle, &wc);
    assert_int_equal(wc.open, 0);
    uv_walk(&tl->loop, close_walk, NULL);
    uv_run(&tl->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&tl->loop), 0);
}

/* --- raw TCP server with canned answers ------------------------------------ */

typedef struct raw_server raw_server;
typedef struct raw_conn raw_conn;

/* Called for each complete request (head plus Content-Length body); index
 * counts requests on this connection from 0. */
typedef void (*raw_on_request)(raw_conn *rc, const char *req, size_t len, int index, void *data);

typedef struct raw_piece {
    list_node link;
    char *p;
    size_t len;
    unsigned delay_ms; /* before this piece */
    int close_after;
} raw_piece;

struct raw_conn {
    raw_server *srv;
    uv_tcp_t tcp;
    uv_timer_t timer;
    list_node link;
    list_node pieces;
    buf_t in;
    int nreq;
    int closing;
    int timer_busy;
    int handles;
};

struct raw_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    int port;
    raw_on_request on_request;
    void *data;
    list_node conns;
    int accepted; /* connections accepted */
    int requests; /* requests seen */
    int closed;   /* listener closed */
    int eof_seen; /* a client closed its side */
};

static void raw_conn_closed(uv_handle_t *h)
{
    raw_conn *rc = h->data;
    if (--rc->handles == 0) {
        list_node *pos, *tmp;
        list_foreach_safe(pos, tmp, &rc->pieces)
        {
            raw_piece *pc = list_entry(pos, raw_piece, link);
            list_remove(pos);
            free(pc->p);
            free(pc);
        }
        buf_free(&rc->in);
        free(rc);
    }
}

OP_UNUSED static void raw_close(raw_conn *rc)
{
    if (rc->closing)
        return;
    rc->closing = 1;
    list_remove(&rc->link);
    uv_close((uv_handle_t *)&rc->tcp, raw_conn_closed);
    uv_close((uv_handle_t *)&rc->timer, raw_conn_closed);
}

typedef struct raw_wreq {
    uv_write_t req;
    char *p;
} raw_wreq;

static void raw_write_cb(uv_write_t *req, int status)
{
    raw_wreq *w = (raw_wreq *)req;
    (void)status;
    free(w->p);
    free(w);
}

static void raw_write_now(raw_conn *rc, const char *p, size_t len)
{
    if (rc->closing || len == 0)
        return;
    raw_wreq *w = xmalloc(sizeof(*w));
    w->p = xmalloc(len);
    memcpy(w->p, p, len);
    uv_buf_t b = uv_buf_init(w->p, (unsigned)len);
    if (uv_write(&w->req, (uv_stream_t *)&rc->tcp, &b, 1, raw_write_cb) != 0) {
        free(w->p);
        free(w);
    }
}

static void raw_pump(raw_conn *rc);

static void raw_timer_cb(uv_timer_t *t)
{
    raw_conn *rc = t->data;
    rc->timer_busy = 0;
    raw_pump(rc);
}

/* Send queued pieces, waiting delay_ms before each. */
static void raw_pump(raw_conn *rc)
{
    while (!rc->closing && !rc->timer_busy && !list_empty(&rc->pieces)) {
        raw_piece *pc = list_entry(list_first(&rc->pieces), raw_piece, link);
        if (pc->delay_ms) {
            pc->delay_ms = 0;
            rc->timer_busy = 1;
            uv_timer_start(&rc->timer, raw_timer_cb, 1, 0);
            return;
        }
        list_remove(&pc->link);
        raw_write_now(rc, pc->p, pc->len);
        int close_after = pc->close_after;
        free(pc->p);
        free(pc);
        if (close_after)
            raw_close(rc);
    }
}

static void raw_queue(raw_conn *rc, const char *p, size_t len, unsigned delay, int close_after)
{
    raw_piece *pc = xcalloc(1, sizeof(*pc));
    pc->p = xmalloc(len ? len : 1);
    memcpy(pc->p, p, len);
    pc->len = len;
    pc->delay_ms = delay;
    pc->close_after = close_after;
    list_init(&pc->link);
    list_insert_tail(&rc->pieces, &pc->link);
}

/* Send bytes at once (after anything queued). */
OP_UNUSED static void raw_send(raw_conn *rc, const char *p, size_t len)
{
    raw_queue(rc, p, len, 0, 0);
    raw_pump(rc);
}

/* Send [0, at) now and [at, len) after a short pause, so that the client
 * sees two reads split exactly there. */
OP_UNUSED static void raw_send_split(raw_conn *rc, const char *p, size_t len, size_t at)
{
    raw_queue(rc, p, at, 0, 0);
    raw_queue(rc, p + at, len - at, 1, 0);
    raw_pump(rc);
}

/* Send in pieces of n bytes with a pause between each. */
OP_UNUSED static void raw_send_dribble(raw_conn *rc, const char *p, size_t len, size_t n)
{
    for (size_t off = 0; off < len; off += n)
        raw_queue(rc, p + off, off + n <= len ? n : len - off, off ? 1 : 0, 0);
    raw_pump(rc);
}

/* Close after everything queued was sent. */
OP_UNUSED static void raw_send_close(raw_conn *rc, const char *p, size_t len)
{
    raw_queue(rc, p, len, 0, 1);
    raw_pump(rc);
}

static size_t raw_request_len(const char *p, size_t n)
{
    const char *end = NULL;
    for (size_t i = 0; i + 3 < n; i++) {
        if (memcmp(p + i, "\r\n\r\n", 4) == 0) {
            end = p + i + 4;
            break;
        }
    }
    if (!end)
        return 0;
    size_t head = (size_t)(end - p), body = 0;
    for (const char *q = p; q < end; q++) {
        if ((q == p || q[-1] == '\n') && strncasecmp(q, "Content-Length:", 15) == 0) {
            body = (size_t)strtoul(q + 15, NULL, 10);
            break;
        }
    }
    return head + body <= n ? head + body : 0;
}

static void raw_alloc(uv_handle_t *h, size_t sz, uv_buf_t *b)
{
    (void)h;
    b->base = xmalloc(sz);
    b->len = sz;
}

static void raw_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    raw_conn *rc = s->data;
    if (n < 0) {
        rc->srv->eof_seen++;
        raw_close(rc);
    } else if (n > 0 && !rc->closing) {
        assert_int_equal(buf_append(&rc->in, b->base, (size_t)n), 0);
        size_t len;
        while (!rc->closing && (len = raw_request_len(rc->in.data, rc->in.len)) > 0) {
            char *req = xstrndup(rc->in.data, len);
            buf_consume(&rc->in, len);
            rc->srv->requests++;
            int idx = rc->nreq++;
            rc->srv->on_request(rc, req, len, idx, rc->srv->data);
            free(req);
        }
    }
    free(b->base);
}

static void raw_on_conn(uv_stream_t *l, int status)
{
    raw_server *srv = l->data;
    assert_int_equal(status, 0);
    raw_conn *rc = xcalloc(1, sizeof(*rc));
    rc->srv = srv;
    list_init(&rc->pieces);
    list_init(&rc->link);
    buf_init(&rc->in, 1 << 20);
    uv_tcp_init(srv->loop, &rc->tcp);
    uv_timer_init(srv->loop, &rc->timer);
    rc->tcp.data = rc->timer.data = rc;
    rc->handles = 2;
    assert_int_equal(uv_accept(l, (uv_stream_t *)&rc->tcp), 0);
    uv_tcp_nodelay(&rc->tcp, 1); /* split writes must not wait for delayed ACKs */
    list_insert_tail(&srv->conns, &rc->link);
    srv->accepted++;
    uv_read_start((uv_stream_t *)&rc->tcp, raw_alloc, raw_read);
}

OP_UNUSED static raw_server *raw_listen(uv_loop_t *loop, raw_on_request cb, void *data)
{
    raw_server *srv = xcalloc(1, sizeof(*srv));
    srv->loop = loop;
    srv->on_request = cb;
    srv->data = data;
    list_init(&srv->conns);
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    uv_tcp_init(loop, &srv->listener);
    srv->listener.data = srv;
    assert_int_equal(uv_tcp_bind(&srv->listener, (const struct sockaddr *)&a, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&srv->listener, 64, raw_on_conn), 0);
    int len = sizeof(a);
    uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&a, &len);
    srv->port = ntohs(a.sin_port);
    return srv;
}

static void raw_listener_closed(uv_handle_t *h)
{
    free(h->data);
}

OP_UNUSED static void raw_server_close(raw_server *srv)
{
    while (!list_empty(&srv->conns))
        raw_close(list_entry(list_first(&srv->conns), raw_conn, link));
    uv_close((uv_handle_t *)&srv->listener, raw_listener_closed);
}

/* --- raw TCP client -------------------------------------------------------- */

typedef struct raw_client {
    uv_tcp_t tcp;
    uv_connect_t creq;
    buf_t in;
    int connected;
    int eof; /* the server closed (or error) */
    int err;
    int closed;
    char *pending; /* sent at connect */
    size_t pending_len;
} raw_client;

static void rcl_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    raw_client *cl = s->data;
    if (n < 0) {
        cl->eof = 1;
        cl->err = (int)n;
        uv_read_stop(s);
    } else if (n > 0) {
        assert_int_equal(buf_append(&cl->in, b->base, (size_t)n), 0);
    }
    free(b->base);
}

OP_UNUSED static void rcl_write(raw_client *cl, const char *p, size_t len)
{
    raw_wreq *w = xmalloc(sizeof(*w));
    w->p = xmalloc(len);
    memcpy(w->p, p, len);
    uv_buf_t b = uv_buf_init(w->p, (unsigned)len);
    assert_int_equal(uv_write(&w->req, (uv_stream_t *)&cl->tcp, &b, 1, raw_write_cb), 0);
}

static void rcl_connected(uv_connect_t *req, int status)
{
    raw_client *cl = req->data;
    assert_int_equal(status, 0);
    cl->connected = 1;
    uv_tcp_nodelay(&cl->tcp, 1);
    uv_read_start((uv_stream_t *)&cl->tcp, raw_alloc, rcl_read);
    if (cl->pending_len)
        rcl_write(cl, cl->pending, cl->pending_len);
    free(cl->pending);
    cl->pending = NULL;
}

/* Connect to 127.0.0.1:port and send blob (may be NULL) once connected. */
OP_UNUSED static raw_client *rcl_connect(uv_loop_t *loop, int port, const char *blob, size_t len)
{
    raw_client *cl = xcalloc(1, sizeof(*cl));
    buf_init(&cl->in, 64 << 20);
    uv_tcp_init(loop, &cl->tcp);
    cl->tcp.data = cl;
    cl->creq.data = cl;
    if (blob && len) {
        cl->pending = xmalloc(len);
        memcpy(cl->pending, blob, len);
        cl->pending_len = len;
    }
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", port, &a);
    assert_int_equal(uv_tcp_connect(&cl->creq, &cl->tcp, (const struct sockaddr *)&a, rcl_connected), 0);
    return cl;
}

static void rcl_closed(uv_handle_t *h)
{
    raw_client *cl = h->data;
    buf_free(&cl->in);
    free(cl->pending);
    free(cl);
}

OP_UNUSED static void rcl_close(raw_client *cl)
{
    uv_close((uv_handle_t *)&cl->tcp, rcl_closed);
}

/* Count occurrences of needle in the client's received bytes. */
OP_UNUSED static int rcl_count(const raw_client *cl, const char *needle)
{
    int n = 0;
    const char *p = buf_cstr(&cl->in);
    while ((p = strstr(p, needle)) != NULL) {
        n++;
        p += strlen(needle);
    }
    return n;
}

#endif
