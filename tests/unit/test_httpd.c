/* httpd on loopback, driven by httpc and by raw sockets: request
 * accessors, keep-alive and pool limits, pipelining in order, deferred
 * responses, streaming, caps (413/431), Expect: 100-continue, chunked
 * request bodies, on_close, dropping connections, idle timeout and the
 * slow-reader cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/err.h"
#include "core/httpc.h"
#include "core/httpd.h"
#include "tests/unit/http_test_util.h"

/* --- the server under test ------------------------------------------------- */

typedef struct srv_state {
    hs_server *srv;
    int port;
    char order[256]; /* handler invocation order: one letter per request */
    int closed_reqs; /* on_close calls */
    hs_req *held;    /* a deferred or streaming request */
    int stream_rc;   /* last hs_stream_write result */
    int stream_chunks;
    uv_timer_t timer;
    int timer_ready;
    int server_closed;
    char cn[128];
} srv_state;

static srv_state S;

static void append_order(char ch)
{
    size_t n = strlen(S.order);
    if (n + 1 < sizeof(S.order)) {
        S.order[n] = ch;
        S.order[n + 1] = '\0';
    }
}

static void req_closed(hs_req *req, void *data)
{
    (void)req;
    (void)data;
    S.closed_reqs++;
    S.held = NULL;
    uv_timer_stop(&S.timer);
}

static void slow_answer(uv_timer_t *t)
{
    (void)t;
    hs_req *r = S.held;
    S.held = NULL;
    hs_respond(r, 200, "text/plain", NULL, "slow", 4);
}

static void stream_tick(uv_timer_t *t)
{
    (void)t;
    char line[64];
    int n = snprintf(line, sizeof(line), "{\"n\":%d}\n", S.stream_chunks);
    S.stream_rc = hs_stream_write(S.held, line, (size_t)n);
    assert_int_equal(S.stream_rc, 0);
    if (++S.stream_chunks == 5) {
        uv_timer_stop(&S.timer);
        hs_req *r = S.held;
        S.held = NULL;
        hs_stream_end(r);
    }
}

static void flood_tick(uv_timer_t *t)
{
    (void)t;
    static char chunk[64 * 1024];
    memset(chunk, 'x', sizeof(chunk));
    S.stream_rc = hs_stream_write(S.held, chunk, sizeof(chunk));
    S.stream_chunks++;
    if (S.stream_rc != 0)
        uv_timer_stop(&S.timer);
}

static void handler(hs_req *req, void *data)
{
    (void)data;
    const char *path = hs_req_path(req);
    if (strcmp(path, "/echo") == 0) {
        append_order('e');
        size_t len;
        const char *body = hs_req_body(req, &len);
        hs_respond(req, 200, "text/plain", "X-Echo: 1\r\n", body, len);
    } else if (strcmp(path, "/info") == 0) {
        append_order('i');
        char out[1024];
        const char *y = hs_req_param(req, "y");
        const char *flag = hs_req_param(req, "flag");
        const char *hdr = hs_req_header(req, "x-HDR");
        size_t blen;
        const char *body = hs_req_body(req, &blen);
        snprintf(out, sizeof(out),
                 "method=%s path=%s query=%s x=%s y=%s flag=%s missing=%s hdr=%s body=%s peer=%d",
                 hs_req_method(req), path, hs_req_query(req), hs_req_param(req, "x"), y ? y : "(null)",
                 flag ? (*flag ? flag : "(empty)") : "(null)", hs_req_param(req, "nope") ? "yes" : "no",
                 hdr ? hdr : "(null)", body, strncmp(hs_req_peer(req), "127.0.0.1:", 10) == 0);
        hs_respond(req, 200, "text/plain", NULL, out, strlen(out));
    } else if (strncmp(path, "/n/", 3) == 0) {
        append_order(path[3]);
        hs_respond(req, 200, "text/plain", NULL, path + 3, strlen(path + 3));
    } else if (strcmp(path, "/slow") == 0) {
        append_order('s');
        S.held = req;
        uv_timer_start(&S.timer, slow_answer, 200, 0);
    } else if (strcmp(path, "/stream") == 0) {
        append_order('w');
        S.held = req;
        S.stream_chunks = 0;
        hs_req_on_close(req, req_closed, NULL);
        hs_stream_begin(req, 200, "application/json", NULL);
        uv_timer_start(&S.timer, stream_tick, 20, 20);
    } else if (strcmp(path, "/watch") == 0) {
        /* Held open until the client goes or the server drops it. */
        append_order('W');
        S.held = req;
        hs_req_on_close(req, req_closed, NULL);
        hs_stream_begin(req, 200, "application/json", NULL);
        assert_int_equal(hs_stream_write(req, "{}\n", 3), 0);
    } else if (strcmp(path, "/flood") == 0) {
        append_order('f');
        S.held = req;
        S.stream_chunks = 0;
        hs_req_on_close(req, req_closed, NULL);
        hs_stream_begin(req, 200, "application/octet-stream", NULL);
        uv_timer_start(&S.timer, flood_tick, 1, 1);
    } else if (strcmp(path, "/cn") == 0) {
        const char *cn = hs_req_client_cn(req);
        snprintf(S.cn, sizeof(S.cn), "%s", cn ? cn : "(none)");
        hs_respond(req, 200, "text/plain", NULL, S.cn, strlen(S.cn));
    } else {
        append_order('?');
        hs_respond(req, 404, "text/plain", NULL, "not found\n", 10);
    }
}

static void on_server_closed(void *data)
{
    (void)data;
    S.server_closed = 1;
}

static void server_start(uv_loop_t *loop, const hs_opts *extra)
{
    memset(&S, 0, sizeof(S));
    hs_opts o = {0};
    if (extra)
        o = *extra;
    o.handler = handler;
    int err = 0;
    S.srv = hs_listen(loop, "127.0.0.1", 0, &o, &err);
    assert_non_null(S.srv);
    S.port = hs_port(S.srv);
    assert_true(S.port > 0);
    uv_timer_init(loop, &S.timer);
    S.timer_ready = 1;
}

static void server_stop(test_loop *tl)
{
    hs_close(S.srv, on_server_closed, NULL);
    uv_close((uv_handle_t *)&S.timer, NULL);
    tl_run_until(tl, &S.server_closed);
}

/* --- client helpers -------------------------------------------------------- */

typedef struct result {
    int done;
    int status;
    int http_status;
    buf_t body;
    int data_calls;
    uint64_t first_data;
    uint64_t done_at;
    uv_loop_t *loop;
    int *counter;
} result;

static void res_init(result *r, uv_loop_t *loop)
{
    memset(r, 0, sizeof(*r));
    buf_init(&r->body, 64 << 20);
    r->loop = loop;
}

static void on_done(hc_req *req, int status, const hc_response *resp, void *data)
{
    result *r = data;
    (void)req;
    r->done++;
    r->status = status;
    r->http_status = resp->status;
    r->done_at = uv_hrtime();
    if (resp->body_len)
        assert_int_equal(buf_append(&r->body, resp->body, resp->body_len), 0);
    if (r->counter)
        (*r->counter)++;
}

static int on_data(hc_req *req, const char *p, size_t n, void *data)
{
    result *r = data;
    (void)req;
    if (!r->data_calls)
        r->first_data = uv_hrtime();
    r->data_calls++;
    assert_int_equal(buf_append(&r->body, p, n), 0);
    return 0;
}

static hc_req *submit_h(hc_pool *pool, const char *method, const char *path, const hc_header *h, size_t nh,
                        const char *body, size_t blen, result *r, int streaming)
{
    hc_req_opts o = {
        .method = method,
        .path = path,
        .headers = h,
        .n_headers = nh,
        .body = body,
        .body_len = blen,
        .request_timeout_ms = streaming ? 0 : 5000,
        .on_done = on_done,
        .on_data = streaming ? on_data : NULL,
        .data = r,
    };
    return hc_request(pool, &o);
}

static hc_pool *client(uv_loop_t *loop, int max_conns)
{
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", S.port);
    hc_pool_opts po = {.max_conns = max_conns};
    int err = 0;
    hc_pool *p = hc_pool_new(loop, url, &po, &err);
    assert_non_null(p);
    return p;
}

static int pool_done;
static void pool_closed_cb(void *d)
{
    (void)d;
    pool_done = 1;
}

static void client_close(test_loop *tl, hc_pool *p)
{
    pool_done = 0;
    hc_pool_close(p, pool_closed_cb, NULL);
    tl_run_until(tl, &pool_done);
}

/* Run until the raw client holds n occurrences of needle (or saw EOF when
 * n < 0). */
static void wait_raw(test_loop *tl, raw_client *cl, const char *needle, int n)
{
    uv_ref((uv_handle_t *)&tl->watchdog);
    while (n < 0 ? !cl->eof : rcl_count(cl, needle) < n)
        uv_run(&tl->loop, UV_RUN_ONCE);
    uv_unref((uv_handle_t *)&tl->watchdog);
}

/* --- tests ----------------------------------------------------------------- */

static void test_request_accessors(void **state)
{
    (void)state;
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 20000);
    server_start(loop, NULL);
    hc_pool *pool = client(loop, 1);
    result r;
    res_init(&r, loop);
    hc_header h = {"X-Hdr", "v1"};
    submit_h(pool, "POST", "/inf%6F?x=1&y=a%20b%2Bc+d&flag#frag", &h, 1, "hello", 5, &r, 0);
    tl_run_until(&tl, &r.done);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.http_status, 200);
    assert_string_equal(buf_cstr(&r.body),
                        "method=POST path=/info query=x=1&y=a%20b%2Bc+d&flag x=1 y=a b+c d "
                        "flag=(empty) missing=no hdr=v1 body=hello peer=1");
    /* Unknown path, HEAD: headers only. */
    result r2;
    res_init(&r2, loop);
    submit_h(pool, "HEAD", "/nothing", NULL, 0, NULL, 0, &r2, 0);
    tl_run_until(&tl, &r2.done);
    assert_int_equal(r2.http_status, 404);
    assert_int_equal(r2.body.len, 0);
    hs_stats st;
    hs_server_stats(S.srv, &st);
    assert_int_equal((int)st.requests, 2);
    assert_int_equal((int)st.connections, 1);
    buf_free(&r.body);
    buf_free(&r2.body);
    client_close(&tl, pool);
    server_stop(&tl);
    tl_finish(&tl);
}

static void test_keepalive_pool_limits(void **state)
{
    (void)state;
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 20000);
    server_start(loop, NULL);
    hc_pool *pool = client(loop, 2);
    result r[20];
    int finished = 0, all = 0;
    for (int i = 0; i < 20; i++) {
        res_init(&r[i], loop);
        r[i].counter = &finished;
        char path[32];
        snprintf(path, sizeof(path), "/n/%c", 'a' + i);
        submit_h(pool, "GET", path, NULL, 0, NULL, 0, &r[i], 0);
    }
    hc_stats st;
    hc_pool_stats(pool, &st);
    assert_int_equal(st.queued, 18);
    uv_ref((uv_handle_t *)&tl.watchdog);
    while (finished < 20)
        uv_run(loop, UV_RUN_ONCE);
    all = 1;
    (void)all;
    for (int i = 0; i < 20; i++) {
        assert_int_equal(r[i].status, 0);
        char want[2] = {(char)('a' + i), 0};
        assert_string_equal(buf_cstr(&r[i].body), want);
        buf_free(&r[i].body);
    }
    hc_pool_stats(pool, &st);
    assert_true(st.connects <= 2);
    assert_int_equal((int)st.reused, 20 - (int)st.connects);
    assert_int_equal((int)st.requests, 20);
    assert_true(st.bytes_in > 0 && st.bytes_out > 0);
    hs_stats ss;
    hs_server_stats(S.srv, &ss);
    assert_true(ss.connections <= 2);
    assert_int_equal((int)ss.requests, 20);
    client_close(&tl, pool);
    server_stop(&tl);
    tl_finish(&tl);
}

static void test_pipelined_in_order(void **state)
{
    (void)state;
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 20000);
    server_start(loop, NULL);
    const char *blob = "GET /n/1 HTTP/1.1\r\nHost: x\r\n\r\n"
                       "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                       "HEAD /n/3 HTTP/1.1\r\nHost: x\r\n\r\n"
                       "GET /n/4 HTTP/1.1\r\nHost: x\r\n\r\n";
    raw_client *cl = rcl_connect(loop, S.port, blob, strlen(blob));
    wait_raw(&tl, cl, "HTTP/1.1 200 OK", 4);
    const char *in = buf_cstr(&cl->in);
    const char *p1 = strstr(in, "\r\n\r\n1");
    const char *p2 = strstr(in, "\r\n\r\nhello");
    const char *p3 = strstr(in, "Content-Length: 1\r\n\r\nHTTP/1.1"); /* HEAD: no body follows */
    const char *p4 = strstr(in, "\r\n\r\n4");
    assert_non_null(p1);
    assert_non_null(p2);
    assert_non_null(p3);
    assert_non_null(p4);
    assert_true(p1 < p2 && p2 < p3 && p3 < p4);
    assert_string_equal(S.order, "1e34");
    hs_stats st;
    hs_server_stats(S.srv, &st);
    assert_int_equal((int)st.connections, 1);
    rcl_close(cl);
    server_stop(&tl);
    tl_finish(&tl);
}

static void test_deferred_holds_pipeline(void **state)
{
    (void)state;
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 20000);
    server_start(loop, NULL);
    const char *blob = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
                       "GET /n/f HTTP/1.1\r\nHost: x\r\n\r\n";
    raw_client *cl = rcl_connect(loop, S.port, blob, strlen(blob));
    tl_run_for(&tl, 25);
    /* The slow request is with its handler; the next one is not parsed. */
    assert_string_equal(S.order, "s");
    assert_int_equal(rcl_count(cl, "HTTP/1.1"), 0);
    wait_raw(&tl, cl, "HTTP/1.1 200 OK", 2);
    assert_string_equal(S.order, "sf");
    const char *in = buf_cstr(&cl->in);
    assert_true(strstr(in, "slow") < strstr(in, "\r\n\r\nf"));
    rcl_close(cl);
    server_stop(&tl);
    tl_finish(&tl);
}

static void test_streaming_response(void **state)
{
    (void)state;
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 20000);
    server_start(loop, NULL);
    hc_pool *pool = client(loop, 1);
    result r;
    res_init(&r, loop);
    submit_h(pool, "GET", "/stream", NULL, 0, NULL, 0, &r, 1);
    tl_run_until(&tl, &r.done);
    assert_int_equal(r.status, 0);
    assert_string_equal(buf_cstr(&r.body), "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n");
    /* Delivered incrementally: first bytes well before the end. */
    assert_true(r.data_calls >= 2); /* usually 5; loopback may batch under load */
    assert_true(r.done_at - r.first_data >= 50 * 1000000ull);
    hs_stats st;
    hs_server_stats(S.srv, &st);
    assert_int_equal(st.open_streams, 0);
    assert_int_equal(S.closed_reqs, 0); /* finished normally: no on_close */
    /* The connection stays usable after the terminating chunk. */
    const char *blob = "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n";
    raw_client *cl = rcl_connect(loop, S.port, blob, strlen(blob));
    wait_raw(&tl, cl, "0\r\n\r\n", 1);
    rcl_write(cl, "GET /n/z HTTP/1.1\r\nHost: x\r\n\r\n", 31);
    wait_raw(&tl, cl, "HTTP/1.1 200 OK", 2);
    assert_non_null(strstr(buf_cstr(&cl->in), "Transfer-Encoding: chunked\r\n\r\n8\r\n{\"n\":0}\n\r\n"));
    buf_free(&r.body);
    rcl_close(cl);
    client_close(&tl, pool);
    server_stop(&tl);
    tl_finish(&tl);
}

static void test_caps_413_431(void **state)
{
    (void)state;
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 20000);
    hs_opts o = {.max_header_bytes = 1024, .max_body_bytes = 100};
    server_start(loop, &o);
    hc_pool *pool = client(loop, 1);
    char big[2000];
    memset(big, 'h', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    hc_header h = {"X-Big", big};
    result r1, r2;
    res_init(&r1, loop);
    res_init(&r2, loop);
    submit_h(pool, "GET", "/echo", &h, 1, NULL, 0, &r1, 0);
    tl_run_until(&tl, &r1.done);
    assert_int_equal(r1.status, 0);
    assert_int_equal(r1.http_status, 431);
    char body[1000];
    memset(body, 'b', sizeof(body));
    submit_h(pool, "POST", "/echo", NULL, 0, body, sizeof(body), &r2, 0);
    tl_run_until(&tl, &r2.done);
    assert_int_equal(r2.status, 0);
    assert_int_equal(r2.http_status, 413);
    hc_stats st;
    hc_pool_stats(pool, &st);
    assert_int_equal((int)st.connects, 2); /* each refusal closed its connection */
    /* A chunked body that grows past the cap. */
    const char *blob = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "40\r\n0123456789012345678901234567890123456789012345678901234567890123\r\n"
                       "40\r\n0123456789012345678901234567890123456789012345678901234567890123\r\n0\r\n\r\n";
    raw_client *cl = rcl_connect(loop, S.port, blob, strlen(blob));
    wait_raw(&tl, cl, NULL, -1);
    assert_non_null(strstr(buf_cstr(&cl->in), "HTTP/1.1 413 "));
    assert_non_null(strstr(buf_cstr(&cl->in), "Connection: close"));
    rcl_close(cl);
    /* Garbage is a 400. */
    cl = rcl_connect(loop, S.port, "BLAH\x01 / HTTP/1.1\r\n\r\n", 20);
    wait_raw(&tl, cl, NULL, -1);
    assert_non_null(strstr(buf_cstr(&cl->in), "HTTP/1.1 400 "));
    rcl_close(cl);
    assert_string_equal(S.order, ""); /* the handler saw none of them */
    buf_free(&r1.body);
    buf_free(&r2.body);
    client_close(&tl, pool);
    server_stop(&tl);
    tl_finish(&tl);
}

static void test_expect_continue_and_chunked_body(void **state)
{
    (void)state;
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 20000);
    server_start(loop, NULL);
    const char *head = "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n";
    raw_client *cl = rcl_connect(loop, S.port, head, strlen(head));
    wait_raw(&tl, cl, "HTTP/1.1 100 Continue\r\n\r\n", 1);
    assert_int_equal(rcl_count(cl, "HTTP/1.1 200"), 0);
    rcl_write(cl, "world", 5);
    wait_raw(&tl, cl, "HTTP/1.1 200 OK", 1);
    tl_run_for(&tl, 5);
    assert_non_null(strstr(buf_cstr(&cl->in), "\r\n\r\nworld"));
    /* Chunked request body, with an extension and a trailer. */
    const char *ch = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n";
    rcl_write(cl, ch, strlen(ch));
    wait_raw(&tl, cl, "HTTP/1.1 200 OK", 2);
    tl_run_for(&tl, 5);
    assert_non_null(strstr(buf_cstr(&cl->in), "Content-Length: 5\r\nX-Echo: 1\r\n\r\nabcde"));
    rcl_close(cl);
    server_stop(&tl);
    tl_finish(&tl);
}

static void test_on_close_and_drop(void **state)
{
    (void)state;
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 20000);
    server_start(loop, NULL);
    hc_pool *pool = client(loop, 4);
    /* The client cancels its watch: the server hears on_close. */
    result r1;
    res_init(&r1, loop);
    hc_req *w1 = submit_h(pool, "GET", "/watch", NULL, 0, NULL, 0, &r1, 1);
    while (r1.data_calls == 0)
        uv_run(loop, UV_RUN_ONCE);
    hs_stats st;
    hs_server_stats(S.srv, &st);
    assert_int_equal(st.open_streams, 1);
    hc_cancel(w1);
    tl_run_until(&tl, &r1.done);
    assert_int_equal(r1.status, OP_ECANCELED);
    while (S.closed_reqs < 1)
        uv_run(loop, UV_RUN_ONCE);
    assert_null(S.held);
    /* The server drops every connection: the watch ends truncated. */
    result r2;
    res_init(&r2, loop);
    submit_h(pool, "GET", "/watch", NULL, 0, NULL, 0, &r2, 1);
    while (r2.data_calls == 0)
        uv_run(loop, UV_RUN_ONCE);
    hs_drop_connections(S.srv);
    assert_int_equal(S.closed_reqs, 1); /* on_close is asynchronous */
    tl_run_until(&tl, &r2.done);
    assert_int_equal(r2.status, OP_ECLOSED);
    while (S.closed_reqs < 2)
        uv_run(loop, UV_RUN_ONCE);
    hs_server_stats(S.srv, &st);
    assert_int_equal(st.open_streams, 0);
    /* Still listening. */
    result r3;
    res_init(&r3, loop);
    submit_h(pool, "GET", "/n/k", NULL, 0, NULL, 0, &r3, 0);
    tl_run_until(&tl, &r3.done);
    assert_int_equal(r3.http_status, 200);
    /* hs_close with a watch open: on_close, then on_closed. */
    result r4;
    res_init(&r4, loop);
    submit_h(pool, "GET", "/watch", NULL, 0, NULL, 0, &r4, 1);
    while (r4.data_calls == 0)
        uv_run(loop, UV_RUN_ONCE);
    hs_close(S.srv, on_server_closed, NULL);
    uv_close((uv_handle_t *)&S.timer, NULL);
    tl_run_until(&tl, &S.server_closed);
    assert_int_equal(S.closed_reqs, 3);
    tl_run_until(&tl, &r4.done);
    assert_int_equal(r4.status, OP_ECLOSED);
    buf_free(&r1.body);
    buf_free(&r2.body);
    buf_free(&r3.body);
    buf_free(&r4.body);
    client_close(&tl, pool);
    tl_finish(&tl);
}

static void test_idle_timeout(void **state)
{
    (void)state;
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 20000);
    hs_opts o = {.idle_timeout_ms = 100};
    server_start(loop, &o);
    uint64_t t0 = uv_hrtime();
    raw_client *cl = rcl_connect(loop, S.port, NULL, 0);
    wait_raw(&tl, cl, NULL, -1);
    uint64_t ms = (uv_hrtime() - t0) / 1000000;
    assert_true(ms >= 90 && ms < 3000);
    assert_int_equal(cl->in.len, 0);
    rcl_close(cl);
    /* A kept-alive connection idles out after its last response too. */
    cl = rcl_connect(loop, S.port, "GET /n/a HTTP/1.1\r\nHost: x\r\n\r\n", 30);
    wait_raw(&tl, cl, NULL, -1);
    assert_int_equal(rcl_count(cl, "HTTP/1.1 200 OK"), 1);
    rcl_close(cl);
    server_stop(&tl);
    tl_finish(&tl);
}

static void test_slow_reader_cap(void **state)
{
    (void)state;
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 30000);
    hs_opts o = {.max_write_queue = 256 * 1024};
    server_start(loop, &o);
    const char *req = "GET /flood HTTP/1.1\r\nHost: x\r\n\r\n";
    raw_client *cl = rcl_connect(loop, S.port, req, strlen(req));
    while (!cl->connected)
        uv_run(loop, UV_RUN_ONCE);
    uv_read_stop((uv_stream_t *)&cl->tcp); /* never read again */
    while (S.closed_reqs == 0)
        uv_run(loop, UV_RUN_ONCE);
    assert_int_equal(S.stream_rc, OP_ETOOBIG);
    assert_true(S.stream_chunks > 4); /* the kernel buffers took some first */
    hs_stats st;
    hs_server_stats(S.srv, &st);
    assert_int_equal(st.open_streams, 0);
    assert_int_equal(st.open_conns, 0);
    rcl_close(cl);
    server_stop(&tl);
    tl_finish(&tl);
}

/* Hostile requests: each is refused with 400 and a close; the handler never
 * sees any of them. */
static void test_malformed_requests(void **state)
{
    (void)state;
    const char *cases[] = {
        "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -3\r\n\r\n",
        "GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET / HTTP/1.1\r\nBad Header\r\n\r\n",
        "GET / XTTP/1.1\r\n\r\n",
        "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", /* a TLS ClientHello on a plain port */
    };
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 20000);
    server_start(loop, NULL);
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        size_t n = strlen(cases[i]);
        raw_client *cl = rcl_connect(loop, S.port, cases[i], n);
        wait_raw(&tl, cl, NULL, -1);
        if (!strstr(buf_cstr(&cl->in), "HTTP/1.1 400 "))
            fail_msg("case %zu: no 400 in '%s'", i, buf_cstr(&cl->in));
        rcl_close(cl);
    }
    assert_string_equal(S.order, "");
    hs_stats st;
    hs_server_stats(S.srv, &st);
    assert_int_equal((int)st.requests, 0);
    /* An upgrade request is answered like any other, then the connection
     * ends: what would follow is not HTTP/1.1. */
    const char *up = "GET /n/u HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n"
                     "\x80\x03\x00\x01 binary";
    raw_client *cl = rcl_connect(loop, S.port, up, strlen(up));
    wait_raw(&tl, cl, NULL, -1);
    assert_int_equal(rcl_count(cl, "HTTP/1.1 200 OK"), 1);
    assert_int_equal(rcl_count(cl, "HTTP/1.1"), 1);
    assert_string_equal(S.order, "u");
    rcl_close(cl);
    server_stop(&tl);
    tl_finish(&tl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_accessors),
        cmocka_unit_test(test_keepalive_pool_limits),
        cmocka_unit_test(test_pipelined_in_order),
        cmocka_unit_test(test_deferred_holds_pipeline),
        cmocka_unit_test(test_streaming_response),
        cmocka_unit_test(test_caps_413_431),
        cmocka_unit_test(test_expect_continue_and_chunked_body),
        cmocka_unit_test(test_on_close_and_drop),
        cmocka_unit_test(test_idle_timeout),
        cmocka_unit_test(test_slow_reader_cap),
        cmocka_unit_test(test_malformed_requests),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
