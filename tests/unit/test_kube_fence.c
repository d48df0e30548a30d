/* Unit tests for core/kube's write fence and per-request options against a
 * scripted httpd on loopback: writes waiting for the limiter or for a
 * connection are canceled by the fence, a write on the wire finishes, new
 * writes are refused (asynchronously), reads go on; unthrottled and urgent
 * requests pass a drained limiter and a busy pool; a per-call timeout; prio
 * requests go ahead of queued ordinary ones for the limiter and for a
 * connection, and the limiter's debt they leave delays the requests after
 * them; the reach hook, told once when the server serves again after a
 * refused connection or a 503. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_test_util.h"

#include "core/err.h"
#include "core/httpd.h"
#include "core/json.h"
#include "core/kube.h"

#define MAX_HELD 8

struct server {
    hs_server *srv;
    int port;
    int hold_writes; /* keep write requests unanswered until released */
    hs_req *held[MAX_HELD];
    int n_held;
    int posts, patches, deletes, gets;
    char order[32]; /* the first letter of each request's method, as they arrived */
    int n_order;
};

static struct server S;
static test_loop TL;

static void held_closed(hs_req *req, void *data)
{
    for (int i = 0; i < S.n_held; i++)
        if (S.held[i] == req)
            S.held[i] = NULL;
}

static void hold(hs_req *req)
{
    assert_true(S.n_held < MAX_HELD);
    S.held[S.n_held++] = req;
    hs_req_on_close(req, held_closed, NULL);
}

static void release_held(void)
{
    for (int i = 0; i < S.n_held; i++) {
        if (S.held[i] == NULL)
            continue;
        hs_req_on_close(S.held[i], NULL, NULL);
        hs_respond(S.held[i], 200, "application/json", NULL, "{\"kind\":\"ConfigMap\"}", 20);
        S.held[i] = NULL;
    }
    S.n_held = 0;
}

static void handler(hs_req *req, void *data)
{
    const char *m = hs_req_method(req);
    const char *path = hs_req_path(req);
    int write = strcmp(m, "GET") != 0;
    if (S.n_order < (int)sizeof(S.order) - 1)
        S.order[S.n_order++] = m[0];
    if (!strcmp(m, "POST"))
        S.posts++;
    else if (!strcmp(m, "PATCH"))
        S.patches++;
    else if (!strcmp(m, "DELETE"))
        S.deletes++;
    else
        S.gets++;
    if (strstr(path, "/e503")) {
        hs_respond(req, 503, "application/json", NULL, "{}", 2);
        return;
    }
    if ((write && S.hold_writes) || strstr(path, "/hang")) {
        hold(req);
        return;
    }
    hs_respond(req, write && !strcmp(m, "POST") ? 201 : 200, "application/json", NULL,
               "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"x\"}}", 44);
}

static kube_client *client_new(double qps, int burst, int max_conns)
{
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", S.port);
    kube_client_opts o = {.server = url, .qps = qps, .burst = burst, .max_conns = max_conns};
    int err = 0;
    kube_client *c = kube_client_new(&TL.loop, &o, &err);
    assert_non_null(c);
    return c;
}

static int setup(void **state)
{
    int err = 0;
    memset(&S, 0, sizeof(S));
    tl_start(&TL, 20000);
    hs_opts ho = {.handler = handler};
    S.srv = hs_listen(&TL.loop, "127.0.0.1", 0, &ho, &err);
    assert_non_null(S.srv);
    S.port = hs_port(S.srv);
    return 0;
}

static int closed;
static void on_closed(void *data)
{
    closed++;
}

static void close_all(kube_client *c)
{
    closed = 0;
    kube_client_close(c, on_closed, NULL);
    tl_run_until(&TL, &closed);
    release_held();
    closed = 0;
    hs_close(S.srv, on_closed, NULL);
    tl_run_until(&TL, &closed);
    tl_finish(&TL);
}

struct result {
    int done;
    int err;
    char message[512];
    uint64_t at_ms;
};

static void on_result(int err, const cJSON *obj, const kube_status *st, void *data)
{
    struct result *r = data;
    r->done++;
    r->err = err;
    snprintf(r->message, sizeof(r->message), "%s", st ? st->message : "");
    r->at_ms = uv_now(&TL.loop);
}

static cJSON *cm(const char *name)
{
    cJSON *o = cJSON_CreateObject();
    json_set_str(json_obj_ensure(o, "metadata"), "name", name);
    return o;
}

static void test_fence_cancels_queued_writes(void **state)
{
    /* 2 QPS, burst 1: the first write goes out at once (and hangs on the
     * server), the others wait in the limiter for 500, 1000, ... ms. The
     * test waits for the first to arrive rather than for a fixed time: on a
     * loaded machine (sanitizers, tests in parallel) a loopback connect can
     * take longer than 50 ms, and the limiter's margin is what keeps the
     * second write queued meanwhile. */
    kube_client *c = client_new(2, 1, 4);
    S.hold_writes = 1;
    struct result w[5], g, late;
    memset(w, 0, sizeof(w));
    memset(&g, 0, sizeof(g));
    memset(&late, 0, sizeof(late));
    cJSON *o = cm("w");
    kube_create(c, &KUBE_CONFIGMAPS, "ns", o, on_result, &w[0]);
    kube_create(c, &KUBE_CONFIGMAPS, "ns", o, on_result, &w[1]);
    kube_update(c, &KUBE_CONFIGMAPS, "ns", "w", NULL, o, on_result, &w[2]);
    kube_patch(c, &KUBE_CONFIGMAPS, "ns", "w", NULL, KUBE_PATCH_MERGE, o, NULL, 0, on_result, &w[3]);
    kube_delete(c, &KUBE_CONFIGMAPS, "ns", "w", NULL, on_result, &w[4]);
    kube_get(c, &KUBE_CONFIGMAPS, "ns", "r", NULL, on_result, &g);
    tl_run_until(&TL, &S.posts);
    assert_int_equal(S.posts, 1);
    assert_int_equal(S.n_held, 1);
    assert_int_equal(kube_client_fenced(c), 0);

    assert_int_equal(kube_client_fence(c), 4);
    assert_int_equal(kube_client_fenced(c), 1);
    for (int i = 0; i < 5; i++)
        assert_int_equal(w[i].done, 0); /* never from inside the call */
    kube_create(c, &KUBE_CONFIGMAPS, "ns", o, on_result, &late);
    assert_int_equal(late.done, 0);
    cJSON_Delete(o);
    for (int i = 1; i < 5; i++) {
        tl_run_until(&TL, &w[i].done);
        assert_int_equal(w[i].err, OP_ECANCELED);
        assert_non_null(strstr(w[i].message, "fence"));
    }
    tl_run_until(&TL, &late.done);
    assert_int_equal(late.err, OP_ECANCELED);
    assert_non_null(strstr(late.message, "fence"));
    assert_int_equal(kube_client_fence(c), 0); /* once */

    /* The write that was on the wire finishes with the server's answer;
     * the read goes on through the limiter. */
    assert_int_equal(w[0].done, 0);
    release_held();
    tl_run_until(&TL, &w[0].done);
    assert_int_equal(w[0].err, 0);
    tl_run_until(&TL, &g.done);
    assert_int_equal(g.err, 0);
    tl_run_for(&TL, 300);
    assert_int_equal(S.posts, 1);
    assert_int_equal(S.patches + S.deletes, 0);
    assert_int_equal(S.gets, 1);
    kube_stats st;
    kube_client_stats(c, &st);
    assert_int_equal((int)st.fenced, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(w[i].done, 1);
    close_all(c);
}

static void test_fence_cancels_writes_waiting_for_a_connection(void **state)
{
    /* No limiter, one connection: the second write and a read wait in the
     * HTTP pool behind the first write, which hangs on the server. */
    kube_client *c = client_new(-1, 0, 1);
    S.hold_writes = 1;
    struct result w0 = {0}, w1 = {0}, g = {0};
    cJSON *o = cm("w");
    kube_create(c, &KUBE_CONFIGMAPS, "ns", o, on_result, &w0);
    kube_create(c, &KUBE_CONFIGMAPS, "ns", o, on_result, &w1);
    kube_get(c, &KUBE_CONFIGMAPS, "ns", "r", NULL, on_result, &g);
    cJSON_Delete(o);
    tl_run_until(&TL, &S.posts);
    tl_run_for(&TL, 20);
    assert_int_equal(S.posts, 1);
    assert_int_equal(kube_client_fence(c), 1);
    tl_run_until(&TL, &w1.done);
    assert_int_equal(w1.err, OP_ECANCELED);
    assert_int_equal(w0.done, 0);
    assert_int_equal(g.done, 0);
    release_held();
    tl_run_until(&TL, &w0.done);
    assert_int_equal(w0.err, 0);
    tl_run_until(&TL, &g.done);
    assert_int_equal(g.err, 0);
    assert_int_equal(S.posts, 1);
    close_all(c);
}

static void test_unthrottled_urgent_and_timeout(void **state)
{
    /* 1 QPS with a burst of 1 and a single connection, both taken by a
     * write that hangs; ordinary reads wait seconds for the limiter. */
    kube_client *c = client_new(1, 1, 1);
    S.hold_writes = 1;
    struct result w0 = {0}, g[3], fast = {0}, slow = {0};
    memset(g, 0, sizeof(g));
    cJSON *o = cm("w");
    kube_create(c, &KUBE_CONFIGMAPS, "ns", o, on_result, &w0);
    cJSON_Delete(o);
    for (int i = 0; i < 3; i++)
        kube_get(c, &KUBE_CONFIGMAPS, "ns", "r", NULL, on_result, &g[i]);
    tl_run_until(&TL, &S.posts);
    assert_int_equal(S.posts, 1);

    kube_req_opts ro = {.unthrottled = 1, .urgent = 1};
    uint64_t t0 = uv_now(&TL.loop);
    kube_get_with(c, &ro, &KUBE_CONFIGMAPS, "ns", "x", on_result, &fast);
    tl_run_until(&TL, &fast.done);
    assert_int_equal(fast.err, 0);
    assert_true(fast.at_ms - t0 < 300);
    assert_int_equal(g[0].done, 0);

    /* The whole call is bounded by its own timeout, not the client's 60 s. */
    ro.timeout_ms = 200;
    t0 = uv_now(&TL.loop);
    kube_get_with(c, &ro, &KUBE_CONFIGMAPS, "ns", "hang", on_result, &slow);
    tl_run_until(&TL, &slow.done);
    assert_int_equal(slow.err, OP_ETIMEOUT);
    assert_true(slow.at_ms - t0 >= 190);
    assert_true(slow.at_ms - t0 < 1000);
    close_all(c);
}

static void test_prio_ahead_for_a_connection(void **state)
{
    /* No limiter, one connection held by a write: two ordinary PATCHes and
     * a GET queue for it, then a prio DELETE, which must be sent next. */
    kube_client *c = client_new(-1, 0, 1);
    S.hold_writes = 1;
    struct result w0 = {0}, p1 = {0}, p2 = {0}, g = {0}, d = {0};
    cJSON *o = cm("w");
    kube_create(c, &KUBE_CONFIGMAPS, "ns", o, on_result, &w0);
    cJSON_Delete(o);
    tl_run_until(&TL, &S.posts);
    assert_int_equal(S.posts, 1);
    cJSON *patch = cm("w");
    kube_patch(c, &KUBE_CONFIGMAPS, "ns", "w", NULL, KUBE_PATCH_MERGE, patch, NULL, 0, on_result, &p1);
    kube_patch(c, &KUBE_CONFIGMAPS, "ns", "w", NULL, KUBE_PATCH_MERGE, patch, NULL, 0, on_result, &p2);
    cJSON_Delete(patch);
    kube_get(c, &KUBE_CONFIGMAPS, "ns", "r", NULL, on_result, &g);
    kube_req_opts ro = {.prio = 1};
    kube_delete_opts dop = {.grace_seconds = -1};
    kube_delete_with(c, &ro, &KUBE_CONFIGMAPS, "ns", "w", &dop, on_result, &d);
    tl_run_for(&TL, 50);
    /* one connection: nothing else was sent, and none beyond max_conns */
    assert_string_equal(S.order, "P");
    S.hold_writes = 0;
    release_held();
    tl_run_until(&TL, &g.done);
    tl_run_until(&TL, &p2.done);
    assert_int_equal(w0.err, 0);
    assert_int_equal(d.err, 0);
    assert_int_equal(p1.err, 0);
    assert_string_equal(S.order, "PDPPG");
    close_all(c);
}

static void test_prio_skips_the_limiter_wait(void **state)
{
    /* 2 QPS, burst 1: a create takes the token, so a GET waits 500 ms. A
     * prio DELETE sent after the GET goes at once; it takes a token all the
     * same, so a GET after it waits 1500 ms, not 1000 ms. The margins are
     * wide for a loaded machine. */
    kube_client *c = client_new(2, 1, 4);
    struct result w0 = {0}, g1 = {0}, d = {0}, g2 = {0};
    cJSON *o = cm("w");
    uint64_t t0 = uv_now(&TL.loop);
    kube_create(c, &KUBE_CONFIGMAPS, "ns", o, on_result, &w0);
    cJSON_Delete(o);
    kube_get(c, &KUBE_CONFIGMAPS, "ns", "r", NULL, on_result, &g1);
    kube_req_opts ro = {.prio = 1};
    kube_delete_opts dop = {.grace_seconds = -1};
    kube_delete_with(c, &ro, &KUBE_CONFIGMAPS, "ns", "w", &dop, on_result, &d);
    kube_get(c, &KUBE_CONFIGMAPS, "ns", "r", NULL, on_result, &g2);
    tl_run_until(&TL, &d.done);
    assert_int_equal(d.err, 0);
    assert_int_equal(g1.done, 0);
    assert_true(d.at_ms - t0 < 400);
    tl_run_until(&TL, &g2.done);
    assert_int_equal(g1.done, 1);
    assert_true(g1.at_ms - t0 >= 490);
    assert_true(g2.at_ms - t0 >= 1490);
    close_all(c);
}

struct reach {
    kube_reach_hook h;
    int calls;
};

static void on_reach(kube_reach_hook *h)
{
    struct reach *r = container_of(h, struct reach, h);
    r->calls++;
}

/* A GET of name, run to its end; returns its error. */
static int get_now(kube_client *c, const char *name)
{
    struct result r = {0};
    kube_get(c, &KUBE_CONFIGMAPS, "ns", name, NULL, on_result, &r);
    tl_run_until(&TL, &r.done);
    return r.err;
}

static void test_reach_hook(void **state)
{
    kube_client *c = client_new(-1, 0, 2);
    struct reach rh = {.h = {.fn = on_reach}};
    list_init(&rh.h.link);
    kube_reach_watch(c, &rh.h);
    /* answered while reachable: nothing to tell */
    assert_int_equal(get_now(c, "r"), 0);
    assert_int_equal(rh.calls, 0);
    /* the server goes away: refused, no answer */
    closed = 0;
    hs_close(S.srv, on_closed, NULL);
    tl_run_until(&TL, &closed);
    assert_int_not_equal(get_now(c, "r"), 0);
    assert_int_equal(rh.calls, 0);
    /* back on the same port: the first answer tells the hook, once */
    int err = 0;
    hs_opts ho = {.handler = handler};
    S.srv = hs_listen(&TL.loop, "127.0.0.1", S.port, &ho, &err);
    assert_non_null(S.srv);
    assert_int_equal(get_now(c, "r"), 0);
    assert_int_equal(rh.calls, 1);
    assert_int_equal(get_now(c, "r"), 0);
    assert_int_equal(rh.calls, 1);
    /* a 503 (a server starting or stopping) is not serving either; the
     * answer after it is, and tells the hook again */
    assert_int_not_equal(get_now(c, "e503"), 0);
    assert_int_equal(rh.calls, 1);
    assert_int_equal(get_now(c, "r"), 0);
    assert_int_equal(rh.calls, 2);
    kube_stats st;
    kube_client_stats(c, &st);
    assert_int_equal((int)st.reached_again, 2);
    /* the client unlinks its hooks when it closes; unwatching after is safe */
    close_all(c);
    kube_reach_unwatch(&rh.h);
    assert_false(list_is_linked(&rh.h.link));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_fence_cancels_queued_writes, setup),
        cmocka_unit_test_setup(test_fence_cancels_writes_waiting_for_a_connection, setup),
        cmocka_unit_test_setup(test_unthrottled_urgent_and_timeout, setup),
        cmocka_unit_test_setup(test_prio_ahead_for_a_connection, setup),
        cmocka_unit_test_setup(test_prio_skips_the_limiter_wait, setup),
        cmocka_unit_test_setup(test_reach_hook, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
