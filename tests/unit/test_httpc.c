/* httpc against a raw TCP server in the test: canned responses split at
 * every byte boundary, keep-alive corner cases (HEAD, 204/304, 1xx,
 * Connection: close, stale connections), timeouts, caps, cancel and pool
 * close. Real loopback sockets on ephemeral ports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/err.h"
#include "core/httpc.h"
#include "tests/unit/http_test_util.h"

/* Set around API calls: a completion arriving while it is set was called
 * synchronously from inside the API, which the contract forbids. */
static int in_api;

typedef struct result {
    int done;
    int status;
    int http_status;
    buf_t body;
    char *hdr; /* value of hdr_name, copied */
    const char *hdr_name;
    int headers_calls;
    int data_calls;
    int headers_before_data;
    int abort_after; /* on_data returns 1 after this many calls (0 = never) */
    int saw_trailer;
} result;

static void res_init(result *r, const char *hdr_name)
{
    memset(r, 0, sizeof(*r));
    buf_init(&r->body, 64 << 20);
    r->hdr_name = hdr_name;
    r->headers_before_data = 1;
}

static void res_reset(result *r)
{
    buf_reset(&r->body);
    free(r->hdr);
    r->hdr = NULL;
    r->done = r->status = r->http_status = r->headers_calls = r->data_calls = r->saw_trailer = 0;
}

static void res_free(result *r)
{
    buf_free(&r->body);
    free(r->hdr);
}

static void on_done(hc_req *req, int status, const hc_response *resp, void *data)
{
    result *r = data;
    (void)req;
    assert_false(in_api);
    assert_non_null(resp);
    r->done++;
    r->status = status;
    r->http_status = resp->status;
    if (status == 0 && resp->body_len)
        assert_int_equal(buf_append(&r->body, resp->body, resp->body_len), 0);
    if (status == 0 && r->hdr_name) {
        const char *v = hc_header_get(resp, r->hdr_name);
        free(r->hdr);
        r->hdr = v ? xstrdup(v) : NULL;
    }
    if (status == 0 && hc_header_get(resp, "X-Trailer"))
        r->saw_trailer = 1;
}

static void on_headers(hc_req *req, const hc_response *resp, void *data)
{
    result *r = data;
    (void)req;
    r->headers_calls++;
    if (r->data_calls)
        r->headers_before_data = 0;
    if (r->hdr_name) {
        const char *v = hc_header_get(resp, r->hdr_name);
        free(r->hdr);
        r->hdr = v ? xstrdup(v) : NULL;
    }
}

static int on_data(hc_req *req, const char *p, size_t n, void *data)
{
    result *r = data;
    (void)req;
    if (!r->headers_calls)
        r->headers_before_data = 0;
    r->data_calls++;
    assert_int_equal(buf_append(&r->body, p, n), 0);
    if (r->abort_after && r->data_calls >= r->abort_after)
        return 1;
    return 0;
}

static hc_req *submit(hc_pool *pool, const char *method, const char *path, const char *body, result *r,
                      int streaming, unsigned req_to, unsigned idle_to)
{
    hc_req_opts o = {
        .method = method,
        .path = path,
        .body = body,
        .body_len = body ? strlen(body) : 0,
        .request_timeout_ms = req_to,
        .idle_timeout_ms = idle_to,
        .on_done = on_done,
        .on_headers = streaming ? on_headers : NULL,
        .on_data = streaming ? on_data : NULL,
        .data = r,
    };
    in_api = 1;
    hc_req *req = hc_request(pool, &o);
    in_api = 0;
    return req;
}

static hc_pool *pool_for(uv_loop_t *loop, int port, const hc_pool_opts *o)
{
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
    int err = 0;
    hc_pool *pool = hc_pool_new(loop, url, o, &err);
    assert_non_null(pool);
    return pool;
}

static int pool_closed;
static void on_pool_closed(void *data)
{
    (void)data;
    assert_false(in_api);
    pool_closed = 1;
}

static void close_pool(test_loop *tl, hc_pool *pool)
{
    pool_closed = 0;
    in_api = 1;
    hc_pool_close(pool, on_pool_closed, NULL);
    in_api = 0;
    tl_run_until(tl, &pool_closed);
}

/* --- canned responses at every split --------------------------------------- */

typedef struct canned {
    const char *resp;
    size_t len;
    int dribble;
    size_t split;
} canned;

static void canned_on_request(raw_conn *rc, const char *req, size_t len, int idx, void *data)
{
    canned *cc = data;
    (void)req;
    (void)len;
    (void)idx;
    if (cc->dribble)
        raw_send_dribble(rc, cc->resp, cc->len, 1);
    else
        raw_send_split(rc, cc->resp, cc->len, cc->split);
}

static void run_canned(const char *resp, int streaming, int want_status, const char *want_body,
                       const char *hdr_name, const char *hdr_value)
{
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 60000);
    canned cc = {resp, strlen(resp), 0, 0};
    raw_server *srv = raw_listen(loop, canned_on_request, &cc);
    hc_pool_opts po = {.max_conns = 1};
    hc_pool *pool = pool_for(loop, srv->port, &po);
    result r;
    res_init(&r, hdr_name);
    int requests = 0;
    /* split == len means: one piece, then dribble one byte at a time. */
    for (size_t split = 1; split <= cc.len; split++) {
        cc.split = split < cc.len ? split : 0;
        cc.dribble = split == cc.len;
        res_reset(&r);
        submit(pool, "GET", "/canned", NULL, &r, streaming, 5000, 0);
        requests++;
        tl_run_until(&tl, &r.done);
        if (r.status != 0)
            fail_msg("split at %zu: %s", split, err_str(r.status));
        assert_int_equal(r.done, 1);
        assert_int_equal(r.http_status, want_status);
        assert_int_equal(r.body.len, strlen(want_body));
        assert_memory_equal(r.body.data ? r.body.data : "", want_body, strlen(want_body));
        assert_non_null(r.hdr);
        assert_string_equal(r.hdr, hdr_value);
        assert_false(r.saw_trailer); /* trailers are not headers */
        if (streaming) {
            assert_int_equal(r.headers_calls, 1);
            assert_true(r.headers_before_data);
        }
    }
    hc_stats st;
    hc_pool_stats(pool, &st);
    assert_int_equal((int)st.requests, requests);
    /* Buffered requests share one kept-alive connection; streams each get
     * their own. */
    assert_int_equal((int)st.connects, streaming ? requests : 1);
    res_free(&r);
    close_pool(&tl, pool);
    raw_server_close(srv);
    tl_finish(&tl);
}

static void test_content_length_every_split(void **state)
{
    (void)state;
    run_canned(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 11\r\nX-Test: yes\r\n\r\nhello world",
        0, 200, "hello world", "X-Test", "yes");
}

static void test_chunked_every_split(void **state)
{
    (void)state;
    run_canned("HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nX-Test: chunky\r\n\r\n"
               "5;name=val\r\nhello\r\n1;a;b=\"q\"\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: t1\r\n\r\n",
               0, 201, "hello world", "X-Test", "chunky");
}

#define NDJSON1 "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}}\n"
#define NDJSON2                                                                                              \
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"2\"}}}\n"

static void test_streaming_ndjson_every_split(void **state)
{
    (void)state;
    /* Chunk boundaries deliberately fall inside events. */
    char resp[1024];
    const char *all = NDJSON1 NDJSON2;
    size_t n1 = 30, n2 = strlen(all) - n1;
    snprintf(
        resp, sizeof(resp),
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nX-Test: watch\r\n"
        "\r\n%zx\r\n%.*s\r\n%zx\r\n%s\r\n0\r\n\r\n",
        n1, (int)n1, all, n2, all + n1);
    run_canned(resp, 1, 200, all, "X-Test", "watch");
}

/* --- scripted server for the corner cases ---------------------------------- */

typedef struct script {
    const char *const *answers; /* answer for request index i on a connection; NULL = stay silent */
    int n;
    int close_on;   /* close the connection without answering request index close_on (-1: never) */
    int close_once; /* ... only on the first connection that reaches it */
    int closed_count;
} script;

static void script_on_request(raw_conn *rc, const char *req, size_t len, int idx, void *data)
{
    script *s = data;
    (void)req;
    (void)len;
    if (idx == s->close_on && (!s->close_once || s->closed_count == 0)) {
        s->closed_count++;
        raw_close(rc);
        return;
    }
    int i = idx < s->n ? idx : s->n - 1;
    if (s->answers[i])
        raw_send(rc, s->answers[i], strlen(s->answers[i]));
}

typedef struct fixture {
    test_loop tl;
    uv_loop_t *loop;
    raw_server *srv;
    hc_pool *pool;
    script sc;
} fixture;

static void fx_start(fixture *f, const char *const *answers, int n, const hc_pool_opts *po)
{
    memset(f, 0, sizeof(*f));
    f->loop = tl_start(&f->tl, 30000);
    f->sc.answers = answers;
    f->sc.n = n;
    f->sc.close_on = -1;
    f->srv = raw_listen(f->loop, script_on_request, &f->sc);
    f->pool = pool_for(f->loop, f->srv->port, po);
}

static void fx_finish(fixture *f)
{
    close_pool(&f->tl, f->pool);
    raw_server_close(f->srv);
    tl_finish(&f->tl);
}

static void test_head_204_304_on_reused_connection(void **state)
{
    (void)state;
    /* Each bodiless response announces a length: a client that trusted it
     * would swallow the next response as body. */
    const char *answers[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nX-Test: head\r\n\r\n",
        "HTTP/1.1 204 No Content\r\nX-Test: nc\r\n\r\n",
        "HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\nX-Test: nm\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nX-Test: last\r\n\r\nbody",
    };
    hc_pool_opts po = {.max_conns = 1};
    fixture f;
    fx_start(&f, answers, 4, &po);
    const char *methods[] = {"HEAD", "DELETE", "GET", "GET"};
    const int want[] = {200, 204, 304, 200};
    const char *want_hdr[] = {"head", "nc", "nm", "last"};
    for (int i = 0; i < 4; i++) {
        result r;
        res_init(&r, "X-Test");
        submit(f.pool, methods[i], "/x", NULL, &r, 0, 5000, 0);
        tl_run_until(&f.tl, &r.done);
        assert_int_equal(r.status, 0);
        assert_int_equal(r.http_status, want[i]);
        assert_string_equal(r.hdr, want_hdr[i]);
        assert_int_equal(r.body.len, i == 3 ? 4 : 0);
        res_free(&r);
    }
    hc_stats st;
    hc_pool_stats(f.pool, &st);
    assert_int_equal((int)st.connects, 1);
    assert_int_equal((int)st.reused, 3);
    fx_finish(&f);
}

static void test_interim_and_connection_close(void **state)
{
    (void)state;
    const char *answers[] = {
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
    };
    hc_pool_opts po = {.max_conns = 1};
    fixture f;
    fx_start(&f, answers, 1, &po);
    for (int i = 0; i < 3; i++) {
        result r;
        res_init(&r, NULL);
        submit(f.pool, "GET", "/x", NULL, &r, 0, 5000, 0);
        tl_run_until(&f.tl, &r.done);
        assert_int_equal(r.status, 0);
        assert_int_equal(r.http_status, 200);
        assert_string_equal(buf_cstr(&r.body), "ok");
        res_free(&r);
    }
    hc_stats st;
    hc_pool_stats(f.pool, &st);
    assert_int_equal((int)st.connects, 3); /* Connection: close honoured every time */
    assert_int_equal((int)st.reused, 0);
    fx_finish(&f);
}

static void test_body_until_eof(void **state)
{
    (void)state;
    /* No length, no chunking: the body ends with the connection. */
    const char *answers[] = {"HTTP/1.1 200 OK\r\nX-Test: eof\r\n\r\nuntil the end"};
    hc_pool_opts po = {.max_conns = 1};
    fixture f;
    fx_start(&f, answers, 1, &po);
    /* The script server never closes by itself: close after answering. */
    f.sc.close_on = -1;
    result r;
    res_init(&r, "X-Test");
    submit(f.pool, "GET", "/x", NULL, &r, 0, 5000, 0);
    tl_run_for(&f.tl, 50);
    assert_int_equal(r.done, 0);
    raw_close(list_entry(list_first(&f.srv->conns), raw_conn, link));
    tl_run_until(&f.tl, &r.done);
    assert_int_equal(r.status, 0);
    assert_string_equal(buf_cstr(&r.body), "until the end");
    res_free(&r);
    fx_finish(&f);
}

static void stale_case(const char *method, const char *body, int want_status)
{
    /* Request 0 is answered; request 1 on the same connection finds it
     * closed by the server (no response byte). */
    const char *answers[] = {"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none",
                             "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo"};
    hc_pool_opts po = {.max_conns = 4};
    fixture f;
    fx_start(&f, answers, 2, &po);
    f.sc.close_on = 1;
    f.sc.close_once = 1;
    result r;
    res_init(&r, NULL);
    submit(f.pool, "GET", "/first", NULL, &r, 0, 5000, 0);
    tl_run_until(&f.tl, &r.done);
    assert_int_equal(r.status, 0);
    res_free(&r);
    res_init(&r, NULL);
    submit(f.pool, method, "/second", body, &r, 0, 5000, 0);
    tl_run_until(&f.tl, &r.done);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.status, want_status);
    hc_stats st;
    hc_pool_stats(f.pool, &st);
    if (want_status == 0) {
        /* Retried once, on a new connection; the new connection answers
         * its first request with answers[0]. */
        assert_string_equal(buf_cstr(&r.body), "one");
        assert_int_equal((int)st.connects, 2);
        assert_int_equal(f.srv->requests, 3);
    } else {
        assert_int_equal((int)st.connects, 1);
        assert_int_equal(f.srv->requests, 2);
    }
    res_free(&r);
    fx_finish(&f);
}

static void test_stale_keepalive_get_retried(void **state)
{
    (void)state;
    stale_case("GET", NULL, 0);
}

static void test_stale_keepalive_post_fails(void **state)
{
    (void)state;
    stale_case("POST", "{}", OP_ECLOSED);
}

static void test_idle_timeout_silent_server(void **state)
{
    (void)state;
    const char *answers[] = {NULL};
    fixture f;
    fx_start(&f, answers, 1, NULL);
    result r;
    res_init(&r, NULL);
    uint64_t t0 = uv_now(f.loop);
    submit(f.pool, "GET", "/silent", NULL, &r, 0, 0, 100);
    tl_run_until(&f.tl, &r.done);
    assert_int_equal(r.status, OP_ETIMEOUT);
    assert_true(uv_now(f.loop) - t0 >= 95);
    assert_true(uv_now(f.loop) - t0 < 2000);
    res_free(&r);
    fx_finish(&f);
}

static void test_request_timeout_trickle(void **state)
{
    (void)state;
    /* Headers arrive, the body never completes: the idle timeout (long) is
     * kept alive by the trickle, the request timeout is not. */
    const char *answers[] = {"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial"};
    fixture f;
    fx_start(&f, answers, 1, NULL);
    result r;
    res_init(&r, NULL);
    uint64_t t0 = uv_now(f.loop);
    submit(f.pool, "GET", "/slow", NULL, &r, 0, 150, 5000);
    tl_run_until(&f.tl, &r.done);
    assert_int_equal(r.status, OP_ETIMEOUT);
    assert_true(uv_now(f.loop) - t0 >= 145);
    res_free(&r);
    fx_finish(&f);
}

/* --- queue time is not the server's ---------------------------------------- */

/* Answers each request 150 ms after it arrived: one connection serves a
 * queue of them one after the other. */
typedef struct slow_server {
    uv_timer_t timer;
    raw_conn *rc;
    int answered;
} slow_server;

static void slow_answer(uv_timer_t *t)
{
    slow_server *ss = t->data;
    static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    ss->answered++;
    raw_send(ss->rc, ok, strlen(ok));
}

static void slow_on_request(raw_conn *rc, const char *req, size_t len, int idx, void *data)
{
    slow_server *ss = data;
    (void)req;
    (void)len;
    (void)idx;
    ss->rc = rc;
    uv_timer_start(&ss->timer, slow_answer, 150, 0);
}

static void test_queue_wait_not_timed(void **state)
{
    (void)state;
    /* Three requests on one connection, each answered in 150 ms, with a
     * request timeout of 250 ms: the last waits 300 ms for the connection,
     * which must not count (a burst against a busy API server otherwise
     * times out wholesale). total_timeout_ms does count the wait. */
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 30000);
    slow_server ss = {0};
    uv_timer_init(loop, &ss.timer);
    ss.timer.data = &ss;
    raw_server *srv = raw_listen(loop, slow_on_request, &ss);
    hc_pool_opts po = {.max_conns = 1};
    hc_pool *pool = pool_for(loop, srv->port, &po);
    result r[3];
    for (int i = 0; i < 3; i++) {
        res_init(&r[i], NULL);
        submit(pool, "GET", "/slow", NULL, &r[i], 0, 250, 0);
    }
    tl_run_until(&tl, &r[2].done);
    for (int i = 0; i < 3; i++) {
        if (r[i].status != 0)
            fail_msg("request %d: %s", i, err_str(r[i].status));
        assert_int_equal(r[i].http_status, 200);
        res_reset(&r[i]);
    }
    /* The same with a bound on the whole call: the third's 300 ms wait
     * plus its exchange passes 250 ms. */
    for (int i = 0; i < 3; i++) {
        hc_req_opts o = {.method = "GET", .path = "/slow", .request_timeout_ms = 250, .total_timeout_ms = 250,
                         .on_done = on_done, .data = &r[i]};
        in_api = 1;
        hc_request(pool, &o);
        in_api = 0;
    }
    tl_run_until(&tl, &r[2].done);
    assert_int_equal(r[0].status, 0);
    assert_int_equal(r[2].status, OP_ETIMEOUT);
    for (int i = 0; i < 3; i++)
        res_free(&r[i]);
    close_pool(&tl, pool);
    raw_server_close(srv);
    uv_close((uv_handle_t *)&ss.timer, NULL);
    tl_finish(&tl);
}

static void test_body_and_header_caps(void **state)
{
    (void)state;
    static char big_hdr[4096];
    memset(big_hdr, 0, sizeof(big_hdr));
    strcpy(big_hdr, "HTTP/1.1 200 OK\r\nX-Big: ");
    size_t n = strlen(big_hdr);
    memset(big_hdr + n, 'a', 3000);
    strcpy(big_hdr + n + 3000, "\r\nContent-Length: 0\r\n\r\n");
    const char *answers[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", /* announced too big */
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n"
        "0123456789012345678901234567890123456789012345678901234567890123\r\n"
        "40\r\n0123456789012345678901234567890123456789012345678901234567890123\r\n0\r\n\r\n", /* grows too
                                                                                                  big */
        big_hdr,
    };
    hc_pool_opts po = {.max_conns = 1, .max_body_bytes = 100, .max_header_bytes = 1024};
    for (int i = 0; i < 3; i++) {
        fixture f;
        const char *one[] = {answers[i]};
        fx_start(&f, one, 1, &po);
        result r;
        res_init(&r, NULL);
        submit(f.pool, "GET", "/big", NULL, &r, 0, 5000, 0);
        tl_run_until(&f.tl, &r.done);
        assert_int_equal(r.status, OP_ETOOBIG);
        res_free(&r);
        fx_finish(&f);
    }
}

static void test_on_data_abort(void **state)
{
    (void)state;
    const char *answers[] = {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"};
    fixture f;
    fx_start(&f, answers, 1, NULL);
    result r;
    res_init(&r, NULL);
    r.abort_after = 1;
    submit(f.pool, "GET", "/watch", NULL, &r, 1, 0, 0);
    tl_run_until(&f.tl, &r.done);
    assert_int_equal(r.status, OP_ECANCELED);
    assert_string_equal(buf_cstr(&r.body), "abc");
    res_free(&r);
    fx_finish(&f);
}

static void cancel_cb(uv_timer_t *t)
{
    in_api = 1;
    hc_cancel(t->data);
    in_api = 0;
    uv_close((uv_handle_t *)t, (uv_close_cb)free);
}

static void test_cancel(void **state)
{
    (void)state;
    const char *answers[] = {NULL};
    fixture f;
    fx_start(&f, answers, 1, NULL);
    /* Cancel right away: completes later, not inside hc_cancel. */
    result r1, r2, r3;
    res_init(&r1, NULL);
    res_init(&r2, NULL);
    res_init(&r3, NULL);
    hc_req *q1 = submit(f.pool, "GET", "/a", NULL, &r1, 0, 0, 0);
    in_api = 1;
    hc_cancel(q1);
    in_api = 0;
    assert_int_equal(r1.done, 0);
    /* Cancel an active request (sent, server silent) from a timer. */
    hc_req *q2 = submit(f.pool, "GET", "/b", NULL, &r2, 0, 0, 0);
    uv_timer_t *t = xmalloc(sizeof(*t));
    uv_timer_init(f.loop, t);
    t->data = q2;
    uv_timer_start(t, cancel_cb, 50, 0);
    /* And a streaming one. */
    hc_req *q3 = submit(f.pool, "GET", "/watch", NULL, &r3, 1, 0, 0);
    tl_run_until(&f.tl, &r1.done);
    tl_run_until(&f.tl, &r2.done);
    in_api = 1;
    hc_cancel(q3);
    in_api = 0;
    tl_run_until(&f.tl, &r3.done);
    assert_int_equal(r1.status, OP_ECANCELED);
    assert_int_equal(r2.status, OP_ECANCELED);
    assert_int_equal(r3.status, OP_ECANCELED);
    assert_int_equal(r1.done + r2.done + r3.done, 3);
    res_free(&r1);
    res_free(&r2);
    res_free(&r3);
    fx_finish(&f);
}

static void test_pool_close_with_queue(void **state)
{
    (void)state;
    const char *answers[] = {NULL};
    hc_pool_opts po = {.max_conns = 1};
    fixture f;
    fx_start(&f, answers, 1, &po);
    result r[6];
    for (int i = 0; i < 6; i++) {
        res_init(&r[i], NULL);
        submit(f.pool, "GET", "/q", NULL, &r[i], i == 5, 0, 0);
    }
    tl_run_for(&f.tl, 50);
    hc_stats st;
    hc_pool_stats(f.pool, &st);
    assert_int_equal(st.queued, 4); /* one active, one stream, four waiting */
    assert_int_equal(st.open_conns, 2);
    pool_closed = 0;
    in_api = 1;
    hc_pool_close(f.pool, on_pool_closed, NULL);
    in_api = 0;
    for (int i = 0; i < 6; i++)
        assert_int_equal(r[i].done, 0);
    tl_run_until(&f.tl, &pool_closed);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(r[i].done, 1);
        assert_int_equal(r[i].status, OP_ECANCELED);
        res_free(&r[i]);
    }
    raw_server_close(f.srv);
    tl_finish(&f.tl);
}

/* The queue's classes on one connection: ordinary requests wait behind
 * prio ones, prio ones in their order, and a "first" request goes ahead of
 * the prio requests queued before it (a busy pod's delete ahead of a
 * scale-in's idle-pod deletes), without a connection beyond max_conns. */
static int order_seen[8], order_n;

static void order_done(hc_req *req, int status, const hc_response *resp, void *data)
{
    (void)req;
    (void)resp;
    assert_int_equal(status, 0);
    order_seen[order_n++] = (int)(intptr_t)data;
}

static void test_queue_classes(void **state)
{
    (void)state;
    const char *answers[] = {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"};
    hc_pool_opts po = {.max_conns = 1};
    fixture f;
    fx_start(&f, answers, 1, &po);
    /* 0 takes the only connection; then ordinary 1, prio 2 and 3, first 4,
     * ordinary 5. */
    static const struct {
        int prio, first;
    } cls[] = {{0, 0}, {0, 0}, {1, 0}, {1, 0}, {0, 1}, {0, 0}};
    order_n = 0;
    for (int i = 0; i < 6; i++) {
        hc_req_opts o = {.method = "DELETE", .path = "/q", .prio = cls[i].prio, .first = cls[i].first,
                         .on_done = order_done, .data = (void *)(intptr_t)i};
        assert_non_null(hc_request(f.pool, &o));
    }
    while (order_n < 6)
        uv_run(f.loop, UV_RUN_ONCE);
    static const int want[] = {0, 4, 2, 3, 1, 5};
    for (int i = 0; i < 6; i++)
        assert_int_equal(order_seen[i], want[i]);
    hc_stats st;
    hc_pool_stats(f.pool, &st);
    assert_int_equal((int)st.connects, 1);
    fx_finish(&f);
}

static void test_connect_refused_and_bad_input(void **state)
{
    (void)state;
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 10000);
    /* Find a port nobody listens on: bind, read it, close. */
    raw_server *srv = raw_listen(loop, script_on_request, NULL);
    int port = srv->port;
    raw_server_close(srv);
    uv_run(loop, UV_RUN_NOWAIT);
    hc_pool *pool = pool_for(loop, port, NULL);
    result r;
    res_init(&r, NULL);
    submit(pool, "GET", "/", NULL, &r, 0, 0, 0);
    tl_run_until(&tl, &r.done);
    assert_int_equal(r.status, UV_ECONNREFUSED);
    /* Header injection is refused, asynchronously. */
    hc_header bad = {"X-Evil", "a\r\nInjected: 1"};
    hc_req_opts o = {
        .method = "GET", .path = "/", .headers = &bad, .n_headers = 1, .on_done = on_done, .data = &r};
    res_reset(&r);
    in_api = 1;
    hc_request(pool, &o);
    in_api = 0;
    assert_int_equal(r.done, 0);
    tl_run_until(&tl, &r.done);
    assert_int_equal(r.status, OP_EINVAL);
    res_free(&r);
    close_pool(&tl, pool);

    int err = 0;
    assert_null(hc_pool_new(loop, "ftp://x", NULL, &err));
    assert_int_equal(err, OP_EINVAL);
    assert_null(hc_pool_new(loop, "http://host:99999", NULL, &err));
    assert_null(hc_pool_new(loop, "http://host/path", NULL, &err));
    assert_null(hc_pool_new(loop, "https://host", NULL, &err)); /* https without TLS options */
    tl_finish(&tl);
}

static void test_name_resolution(void **state)
{
    (void)state;
    /* "localhost" goes through uv_getaddrinfo; it may resolve to ::1 first
     * while the server listens on 127.0.0.1 only: the next address must be
     * tried. */
    const char *answers[] = {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"};
    fixture f;
    fx_start(&f, answers, 1, NULL);
    char url[64];
    snprintf(url, sizeof(url), "http://localhost:%d", f.srv->port);
    int err = 0;
    hc_pool *pool = hc_pool_new(f.loop, url, NULL, &err);
    assert_non_null(pool);
    result r;
    res_init(&r, NULL);
    submit(pool, "GET", "/", NULL, &r, 0, 5000, 0);
    tl_run_until(&f.tl, &r.done);
    assert_int_equal(r.status, 0);
    assert_string_equal(buf_cstr(&r.body), "hi");
    res_free(&r);
    close_pool(&f.tl, pool);
    fx_finish(&f);
}

/* Malformed or hostile responses: each must fail cleanly (or succeed where
 * the bytes are valid), never crash, leak or hang. A small corpus replayed
 * through the real client on a real socket. */
typedef struct bad_case {
    const char *resp;
    size_t len;      /* 0: strlen */
    int want;        /* expected completion status */
    int close_after; /* server closes right after sending */
} bad_case;

static void bad_on_request(raw_conn *rc, const char *req, size_t len, int idx, void *data)
{
    const bad_case *bc = data;
    (void)req;
    (void)len;
    (void)idx;
    size_t n = bc->len ? bc->len : strlen(bc->resp);
    if (bc->close_after)
        raw_send_close(rc, bc->resp, n);
    else
        raw_send(rc, bc->resp, n);
}

static void test_malformed_responses(void **state)
{
    (void)state;
    static char long_reason[3000];
    memcpy(long_reason, "HTTP/1.1 200 ", 13);
    memset(long_reason + 13, 'r', 2000);
    strcpy(long_reason + 2013, "\r\nContent-Length: 0\r\n\r\n");
    const bad_case cases[] = {
        {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 0, OP_EPROTO, 0},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n", 0, OP_EPROTO, 0},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n", 0, OP_EPROTO, 0},
        {"HTTP/1.1 2000 OK\r\n\r\n", 0, OP_EPROTO, 0},
        {"XTTP/1.1 200 OK\r\n\r\n", 0, OP_EPROTO, 0},
        {"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n", 0, OP_EPROTO, 0},
        {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0, OP_EPROTO, 0},
        {"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n", 0, OP_EPROTO, 0},
        {"\0\0\0\xff\xfe garbage", 10, OP_EPROTO, 0},
        {"", 0, OP_ECLOSED, 1},
        {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", 0, OP_ECLOSED, 1},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n", 0, OP_ECLOSED, 1},
        {"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcEXTRA", 0, 0, 0},
        {long_reason, 0, OP_ETOOBIG, 0},
    };
    hc_pool_opts po = {.max_conns = 1, .max_header_bytes = 1024};
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        test_loop tl;
        uv_loop_t *loop = tl_start(&tl, 10000);
        raw_server *srv = raw_listen(loop, bad_on_request, (void *)&cases[i]);
        hc_pool *pool = pool_for(loop, srv->port, &po);
        result r;
        res_init(&r, NULL);
        submit(pool, "GET", "/bad", NULL, &r, 0, 2000, 0);
        tl_run_until(&tl, &r.done);
        if (r.status != cases[i].want)
            fail_msg("case %zu: got %s, want %s", i, err_name(r.status), err_name(cases[i].want));
        if (cases[i].want == 0) {
            /* Valid response followed by junk: delivered, connection not reused. */
            assert_string_equal(buf_cstr(&r.body), "abc");
            res_reset(&r);
            submit(pool, "GET", "/again", NULL, &r, 0, 2000, 0);
            tl_run_until(&tl, &r.done);
            hc_stats st;
            hc_pool_stats(pool, &st);
            assert_int_equal((int)st.connects, 2);
        }
        res_free(&r);
        close_pool(&tl, pool);
        raw_server_close(srv);
        tl_finish(&tl);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_content_length_every_split),
        cmocka_unit_test(test_chunked_every_split),
        cmocka_unit_test(test_streaming_ndjson_every_split),
        cmocka_unit_test(test_head_204_304_on_reused_connection),
        cmocka_unit_test(test_interim_and_connection_close),
        cmocka_unit_test(test_body_until_eof),
        cmocka_unit_test(test_stale_keepalive_get_retried),
        cmocka_unit_test(test_stale_keepalive_post_fails),
        cmocka_unit_test(test_idle_timeout_silent_server),
        cmocka_unit_test(test_request_timeout_trickle),
        cmocka_unit_test(test_queue_wait_not_timed),
        cmocka_unit_test(test_body_and_header_caps),
        cmocka_unit_test(test_on_data_abort),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_pool_close_with_queue),
        cmocka_unit_test(test_queue_classes),
        cmocka_unit_test(test_connect_refused_and_bad_input),
        cmocka_unit_test(test_name_resolution),
        cmocka_unit_test(test_malformed_responses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
