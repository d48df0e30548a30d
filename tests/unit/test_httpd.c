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
    int big_answers; /* /big requests handled */
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
    } else if (strcmp(path, "/big") == 0) {
        static char big[8192];
        memset(big, 'b', sizeof(big));
        S.big_answers++;
        hs_respond(req, 200, "text/plain", NULL, big, sizeof(big));
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

/* This process's resident set, in bytes. */
static long rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024;
}

/* A client that pipelines requests and never reads its answers: the server
 * stops taking its requests once max_pending_out of answers wait, so its
 * memory stays put (it used to answer every request, queuing 48 MB here),
 * and serves the rest, in order, once the client reads. */
static void test_pipeline_unread_bounded(void **state)
{
    (void)state;
    enum { N = 6000 };
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 60000);
    hs_opts o = {.max_pending_out = 64 * 1024};
    server_start(loop, &o);
    static const char one[] = "GET /big HTTP/1.1\r\nHost: x\r\n\r\n";
    size_t n1 = sizeof(one) - 1;
    char *blob = xmalloc(N * n1);
    for (int i = 0; i < N; i++)
        memcpy(blob + (size_t)i * n1, one, n1);
    long rss0 = rss_bytes();
    raw_client *cl = rcl_connect(loop, S.port, blob, N * n1);
    free(blob);
    while (!cl->connected)
        uv_run(loop, UV_RUN_ONCE);
    uv_read_stop((uv_stream_t *)&cl->tcp); /* never read (for now) */
    hs_stats st;
    uv_ref((uv_handle_t *)&tl.watchdog);
    do { /* until the server stopped reading it (the watchdog bounds the wait) */
        uv_run(loop, UV_RUN_ONCE);
        hs_server_stats(S.srv, &st);
    } while (st.reads_paused == 0 && S.big_answers < N);
    uv_unref((uv_handle_t *)&tl.watchdog);
    tl_run_for(&tl, 300); /* and nothing more is answered meanwhile */
    hs_server_stats(S.srv, &st);
    long grown = rss_bytes() - rss0;
    print_message("unread pipeline: %d of %d answered, %zu bytes queued, RSS +%ld KiB\n", S.big_answers, N,
                  st.queued_out, grown / 1024);
    assert_true(S.big_answers < N / 2); /* the kernel's buffers hold a few MB at most */
    assert_true(st.queued_out <= 64 * 1024 + 8192 + 512);
    assert_int_equal(st.reads_paused, 1);
    assert_true(grown < 16L << 20);
    /* The client reads: every answer comes, in order, and nothing waits. */
    uv_read_start((uv_stream_t *)&cl->tcp, raw_alloc, rcl_read);
    uv_ref((uv_handle_t *)&tl.watchdog);
    while (S.big_answers < N || cl->in.len < (size_t)N * 8192)
        uv_run(loop, UV_RUN_ONCE);
    tl_run_for(&tl, 50);
    uv_unref((uv_handle_t *)&tl.watchdog);
    /* memmem, not rcl_count: ASan's strstr measures the whole 49 MB each call */
    int answers = 0;
    const char *p = cl->in.data, *end = cl->in.data + cl->in.len;
    while ((p = memmem(p, (size_t)(end - p), "HTTP/1.1 200 OK", 15)) != NULL) {
        answers++;
        p += 15;
    }
    assert_int_equal(answers, N);
    hs_server_stats(S.srv, &st);
    assert_int_equal(st.reads_paused, 0);
    assert_int_equal((int)st.queued_out, 0);
    rcl_close(cl);
    server_stop(&tl);
    tl_finish(&tl);
}

/* An endpoint that takes no body refuses one before reading it. */
static int get_only(hs_req *req, void *data)
{
    (void)data;
    if (strcmp(hs_req_method(req), "GET") != 0 && strcmp(hs_req_method(req), "HEAD") != 0)
        return 405;
    return hs_req_has_body(req) ? 413 : 0;
}

/* 120 clients each send the headers of a 3 MB body and 1 MB of it, then
 * hold: with on_head every one is refused at its headers (the 120 MB are
 * never buffered), and a plain GET still works. */
static void test_partial_bodies_refused_before_buffering(void **state)
{
    (void)state;
    enum { N = 120, PART = 1 << 20 };
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 60000);
    hs_opts o = {.on_head = get_only};
    server_start(loop, &o);
    static const char post[] = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3000000\r\n\r\n";
    static const char get[] = "GET /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3000000\r\n\r\n";
    char *blob = xmalloc(sizeof(post) + PART);
    raw_client *cl[N];
    for (int i = 0; i < N; i++) {
        const char *head = i % 2 ? post : get;
        size_t hn = strlen(head);
        memcpy(blob, head, hn);
        memset(blob + hn, 'x', PART);
        cl[i] = rcl_connect(loop, S.port, blob, hn + PART);
    }
    free(blob);
    /* Each is answered and closed: wait for all of them (the watchdog
     * bounds it), however loaded the machine. */
    for (int i = 0; i < N; i++)
        wait_raw(&tl, cl[i], NULL, -1);
    hs_stats st;
    hs_server_stats(S.srv, &st);
    print_message("partial bodies: %llu refused at their headers\n", st.head_refused);
    int refused = 0;
    for (int i = 0; i < N; i++) {
        refused += strstr(buf_cstr(&cl[i]->in), i % 2 ? "HTTP/1.1 405 " : "HTTP/1.1 413 ") != NULL;
        rcl_close(cl[i]);
    }
    assert_int_equal(refused, N);
    assert_int_equal((int)st.head_refused, N);
    assert_string_equal(S.order, ""); /* the handler saw none of them */
    /* (RSS here counts the clients' own copies of what they send too: the
     * operator's is measured by tests/integration/test_server_bounds.py) */
    hc_pool *pool = client(loop, 1);
    result r;
    res_init(&r, loop);
    submit_h(pool, "GET", "/n/g", NULL, 0, NULL, 0, &r, 0);
    tl_run_until(&tl, &r.done);
    assert_int_equal(r.http_status, 200);
    buf_free(&r.body);
    client_close(&tl, pool);
    server_stop(&tl);
    tl_finish(&tl);
}

/* A raw client from a given loopback address (127.0.0.x). */
static raw_client *rcl_connect_from(uv_loop_t *loop, int port, const char *src)
{
    raw_client *cl = xcalloc(1, sizeof(*cl));
    buf_init(&cl->in, 1 << 20);
    uv_tcp_init(loop, &cl->tcp);
    cl->tcp.data = cl;
    cl->creq.data = cl;
    struct sockaddr_in a, b;
    uv_ip4_addr(src, 0, &b);
    assert_int_equal(uv_tcp_bind(&cl->tcp, (const struct sockaddr *)&b, 0), 0);
    uv_ip4_addr("127.0.0.1", port, &a);
    assert_int_equal(uv_tcp_connect(&cl->creq, &cl->tcp, (const struct sockaddr *)&a, rcl_connected), 0);
    return cl;
}

/* Run until the server accepted n connections in all. */
static void wait_accepted(test_loop *tl, unsigned long long n)
{
    hs_stats st;
    uv_ref((uv_handle_t *)&tl->watchdog);
    do {
        uv_run(&tl->loop, UV_RUN_ONCE);
        hs_server_stats(S.srv, &st);
    } while (st.connections < n);
    uv_unref((uv_handle_t *)&tl->watchdog);
}

/* A flood of connections that send nothing: past the per-peer and total
 * caps each new one takes the place of the one that waited longest, so at
 * most the caps stay open, and a normal request still gets through. When
 * every connection is with the handler a new one is refused with 503. */
static void test_connection_caps(void **state)
{
    (void)state;
    enum { PER_PEER = 16, TOTAL = 40, N = 300 };
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 60000);
    hs_opts o = {.max_conns = TOTAL, .max_conns_per_peer = PER_PEER};
    server_start(loop, &o);
    raw_client *cl[N];
    for (int i = 0; i < N; i++)
        cl[i] = rcl_connect(loop, S.port, NULL, 0);
    wait_accepted(&tl, N);
    tl_run_for(&tl, 100);
    int open = 0;
    for (int i = 0; i < N; i++)
        open += cl[i]->connected && !cl[i]->eof;
    hs_stats st;
    hs_server_stats(S.srv, &st);
    print_message("one peer, %d connections: %d still open, %llu evicted\n", N, open, st.evicted);
    assert_true(open <= PER_PEER);
    assert_true(st.evicted >= N - PER_PEER);
    hc_pool *pool = client(loop, 1);
    result r;
    res_init(&r, loop);
    submit_h(pool, "GET", "/n/a", NULL, 0, NULL, 0, &r, 0);
    tl_run_until(&tl, &r.done);
    assert_int_equal(r.http_status, 200);
    buf_free(&r.body);
    /* Many peers: the total cap. */
    raw_client *more[N];
    char src[32];
    for (int i = 0; i < N; i++) {
        snprintf(src, sizeof(src), "127.0.0.%d", 2 + i % 20);
        more[i] = rcl_connect_from(loop, S.port, src);
    }
    wait_accepted(&tl, 2 * N + 1);
    tl_run_for(&tl, 100);
    hs_server_stats(S.srv, &st);
    print_message("20 peers, %d connections: %d open\n", N, st.open_conns);
    assert_true(st.open_conns <= TOTAL);
    res_init(&r, loop);
    submit_h(pool, "GET", "/n/b", NULL, 0, NULL, 0, &r, 0);
    tl_run_until(&tl, &r.done);
    assert_int_equal(r.http_status, 200);
    buf_free(&r.body);
    client_close(&tl, pool);
    for (int i = 0; i < N; i++) {
        rcl_close(cl[i]);
        rcl_close(more[i]);
    }
    server_stop(&tl);
    tl_finish(&tl);

    /* Both slots streaming: nothing may be taken, the third is refused. */
    loop = tl_start(&tl, 20000);
    hs_opts o2 = {.max_conns = 2};
    server_start(loop, &o2);
    static const char watch[] = "GET /watch HTTP/1.1\r\nHost: x\r\n\r\n";
    raw_client *w1 = rcl_connect(loop, S.port, watch, strlen(watch));
    raw_client *w2 = rcl_connect(loop, S.port, watch, strlen(watch));
    wait_raw(&tl, w1, "{}", 1);
    wait_raw(&tl, w2, "{}", 1);
    raw_client *w3 = rcl_connect(loop, S.port, watch, strlen(watch));
    wait_raw(&tl, w3, NULL, -1);
    assert_non_null(strstr(buf_cstr(&w3->in), "HTTP/1.1 503 "));
    hs_server_stats(S.srv, &st);
    assert_int_equal((int)st.refused, 1);
    assert_int_equal(st.open_streams, 2);
    rcl_close(w1);
    rcl_close(w2);
    rcl_close(w3);
    server_stop(&tl);
    tl_finish(&tl);
}

typedef struct trickle {
    raw_client *cl;
    const char *bytes;
    size_t off, len;
} trickle;

static void trickle_tick(uv_timer_t *t)
{
    trickle *tr = t->data;
    if (tr->cl->eof) {
        uv_timer_stop(t);
        return;
    }
    rcl_write(tr->cl, tr->bytes + tr->off, 1);
    if (++tr->off == tr->len)
        tr->off = 0; /* header lines without end */
}

/* A request that trickles in a byte at a time is cut off at its deadline
 * (408), however steady the bytes: they used to re-arm the idle timer. */
static void test_trickle_cannot_extend_the_deadline(void **state)
{
    (void)state;
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 20000);
    hs_opts o = {.request_timeout_ms = 400, .idle_timeout_ms = 10000};
    server_start(loop, &o);
    static const char head[] = "GET /n/a HTTP/1.1\r\n";
    raw_client *cl = rcl_connect(loop, S.port, head, strlen(head));
    while (!cl->connected)
        uv_run(loop, UV_RUN_ONCE);
    trickle tr = {.cl = cl, .bytes = "X-A: b\r\n", .len = 8};
    uv_timer_t t;
    uv_timer_init(loop, &t);
    t.data = &tr;
    uint64_t t0 = uv_hrtime();
    uv_timer_start(&t, trickle_tick, 30, 30);
    wait_raw(&tl, cl, NULL, -1);
    uint64_t ms = (uv_hrtime() - t0) / 1000000;
    uv_close((uv_handle_t *)&t, NULL);
    print_message("trickling request closed after %llu ms\n", (unsigned long long)ms);
    assert_true(ms >= 350 && ms < 10000); /* never, before: the watchdog ended it */
    assert_non_null(strstr(buf_cstr(&cl->in), "HTTP/1.1 408 "));
    assert_string_equal(S.order, "");
    rcl_close(cl);
    hs_stats st;
    hs_server_stats(S.srv, &st);
    assert_int_equal((int)st.timeouts, 1);
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
        cmocka_unit_test(test_pipeline_unread_bounded),
        cmocka_unit_test(test_partial_bodies_refused_before_buffering),
        cmocka_unit_test(test_connection_caps),
        cmocka_unit_test(test_trickle_cannot_extend_the_deadline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
