/* Unit tests for core/lease against a scripted Lease server on loopback:
 * acquire, renew and release; the renew deadline counted from when the last
 * successful renewal was sent (not from its answer) and enforced while a
 * renewal hangs (which is canceled); stepping down at once when another
 * holder took the Lease; no attempt after stepping down; invalid durations. */
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
#include "core/lease.h"

#define LEASE_PATH "/apis/coordination.k8s.io/v1/namespaces/ns/leases/lk"
#define LEASES_PATH "/apis/coordination.k8s.io/v1/namespaces/ns/leases"

/* An answer held back by the server (a delay, or a stall until released). */
typedef struct held {
    list_node link;
    hs_req *req;
    int code;
    char *body;
    int ok;     /* a successful write */
    int closed; /* the client went away first */
    uint64_t arrived_ms;
} held;

struct server {
    hs_server *srv;
    int port;
    cJSON *lease; /* NULL: none */
    long long rv;
    unsigned delay_ms; /* every answer waits this long */
    int stall;         /* requests are never answered */
    int requests;
    int puts_ok;
    uint64_t last_ok_arrival_ms; /* when the last answered successful write arrived */
    int closed_held;             /* held requests whose client went away */
    uint64_t last_close_ms;
    list_node held;
    uv_timer_t delay_timer;
};

static struct server S;
static test_loop TL;

static uint64_t now_ms(void)
{
    uv_update_time(&TL.loop);
    return uv_now(&TL.loop);
}

static const char *status_json(int code, const char *reason)
{
    static char b[256];
    snprintf(b, sizeof(b),
             "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"reason\":\"%s\","
             "\"code\":%d}",
             reason, code);
    return b;
}

static char *store_and_dump(const cJSON *body)
{
    cJSON_Delete(S.lease);
    S.lease = cJSON_Duplicate(body, 1);
    char rv[32];
    snprintf(rv, sizeof(rv), "%lld", ++S.rv);
    json_set_str(json_obj_ensure(S.lease, "metadata"), "resourceVersion", rv);
    return json_dump(S.lease);
}

static void held_closed(hs_req *req, void *data)
{
    held *h = data;
    h->closed = 1;
    h->req = NULL;
    S.closed_held++;
    S.last_close_ms = now_ms();
}

static void answer(held *h)
{
    list_remove(&h->link);
    if (!h->closed) {
        hs_req_on_close(h->req, NULL, NULL);
        hs_respond(h->req, h->code, "application/json", NULL, h->body, strlen(h->body));
        if (h->ok)
            S.last_ok_arrival_ms = h->arrived_ms;
    }
    free(h->body);
    free(h);
}

static void on_delay(uv_timer_t *t)
{
    uint64_t now = now_ms();
    list_node *pos, *tmp;
    list_foreach_safe(pos, tmp, &S.held)
    {
        held *h = list_entry(pos, held, link);
        if (h->arrived_ms + S.delay_ms <= now && !S.stall)
            answer(h);
    }
    if (!list_empty(&S.held) && !S.stall)
        uv_timer_start(&S.delay_timer, on_delay, 5, 0);
}

static void handler(hs_req *req, void *data)
{
    const char *path = hs_req_path(req);
    const char *method = hs_req_method(req);
    size_t blen;
    const char *btext = hs_req_body(req, &blen);
    cJSON *body = blen ? json_parse(btext, blen, NULL) : NULL;
    int code = 200;
    char *out = NULL;
    uint64_t arrived = now_ms();

    S.requests++;
    if (S.stall) {
        /* Neither applied nor answered (the client gives up or cancels). */
        code = 503, out = xstrdup(status_json(503, "ServiceUnavailable"));
    } else if (!strcmp(method, "GET") && !strcmp(path, LEASE_PATH)) {
        if (S.lease)
            out = json_dump(S.lease);
        else
            code = 404, out = xstrdup(status_json(404, "NotFound"));
    } else if (!strcmp(method, "POST") && !strcmp(path, LEASES_PATH)) {
        if (S.lease)
            code = 409, out = xstrdup(status_json(409, "AlreadyExists"));
        else
            code = 201, out = store_and_dump(body);
    } else if (!strcmp(method, "PUT") && !strcmp(path, LEASE_PATH)) {
        char rv[32];
        snprintf(rv, sizeof(rv), "%lld", S.rv);
        if (!S.lease || strcmp(json_get_str_or(body, "metadata.resourceVersion", ""), rv) != 0)
            code = 409, out = xstrdup(status_json(409, "Conflict"));
        else
            out = store_and_dump(body);
    } else {
        code = 404, out = xstrdup(status_json(404, "NotFound"));
    }
    cJSON_Delete(body);
    int ok = !S.stall && code < 300 && strcmp(method, "GET") != 0;
    if (ok)
        S.puts_ok++;
    if (!S.stall && S.delay_ms == 0) {
        hs_respond(req, code, "application/json", NULL, out, strlen(out));
        free(out);
        if (ok)
            S.last_ok_arrival_ms = arrived;
        return;
    }
    held *h = xcalloc(1, sizeof(*h));
    list_init(&h->link);
    h->req = req;
    h->code = code;
    h->ok = ok;
    h->body = out;
    h->arrived_ms = arrived;
    list_insert_tail(&S.held, &h->link);
    hs_req_on_close(req, held_closed, h);
    if (!S.stall)
        uv_timer_start(&S.delay_timer, on_delay, S.delay_ms, 0);
}

/* Elector callbacks. */
struct ev {
    int started, stopped_leading, stopped;
    uint64_t started_ms, lost_ms;
};
static struct ev E;

static void on_started(void *data)
{
    E.started++;
    E.started_ms = now_ms();
}

static void on_lost(void *data)
{
    E.stopped_leading++;
    E.lost_ms = now_ms();
}

static void on_stopped(void *data)
{
    E.stopped = 1;
}

static kube_client *C;

static int setup(void **state)
{
    int err = 0;
    memset(&S, 0, sizeof(S));
    memset(&E, 0, sizeof(E));
    list_init(&S.held);
    tl_start(&TL, 20000);
    hs_opts ho = {.handler = handler};
    S.srv = hs_listen(&TL.loop, "127.0.0.1", 0, &ho, &err);
    assert_non_null(S.srv);
    S.port = hs_port(S.srv);
    uv_timer_init(&TL.loop, &S.delay_timer);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", S.port);
    /* A limiter this slow would hold an ordinary request for seconds: Lease
     * requests must not wait in it. */
    kube_client_opts o = {.server = url, .qps = 0.5, .burst = 1};
    C = kube_client_new(&TL.loop, &o, &err);
    assert_non_null(C);
    return 0;
}

static int closed_flag;
static void on_closed(void *data)
{
    (*(int *)data)++;
}

static void teardown_all(lease_elector *le)
{
    if (le) {
        lease_stop(le, on_stopped, NULL);
        tl_run_until(&TL, &E.stopped);
    }
    closed_flag = 0;
    kube_client_close(C, on_closed, &closed_flag);
    tl_run_until(&TL, &closed_flag);
    while (!list_empty(&S.held))
        answer(list_entry(S.held.next, held, link));
    uv_close((uv_handle_t *)&S.delay_timer, NULL);
    closed_flag = 0;
    hs_close(S.srv, on_closed, &closed_flag);
    tl_run_until(&TL, &closed_flag);
    cJSON_Delete(S.lease);
    tl_finish(&TL);
}

static lease_elector *start(unsigned lease_ms, unsigned deadline_ms, unsigned retry_ms)
{
    lease_opts lo = {
        .client = C,
        .ns = "ns",
        .name = "lk",
        .identity = "me_1",
        .lease_ms = lease_ms,
        .renew_deadline_ms = deadline_ms,
        .retry_ms = retry_ms,
        .on_started_leading = on_started,
        .on_stopped_leading = on_lost,
    };
    int err = 0;
    lease_elector *le = lease_start(&TL.loop, &lo, &err);
    assert_non_null(le);
    return le;
}

static void test_invalid_durations(void **state)
{
    lease_opts lo = {.client = C, .ns = "ns", .name = "lk", .identity = "me_1"};
    int err = 0;
    lo.lease_ms = 1000, lo.renew_deadline_ms = 1000, lo.retry_ms = 100; /* lease must exceed the deadline */
    assert_null(lease_start(&TL.loop, &lo, &err));
    assert_int_equal(err, OP_EINVAL);
    err = 0;
    lo.lease_ms = 1000, lo.renew_deadline_ms = 600, lo.retry_ms = 500; /* deadline must exceed 1.2 x retry */
    assert_null(lease_start(&TL.loop, &lo, &err));
    assert_int_equal(err, OP_EINVAL);
    teardown_all(NULL);
}

static void test_acquire_renew_release(void **state)
{
    lease_elector *le = start(1000, 600, 100);
    tl_run_until(&TL, &E.started);
    assert_true(lease_is_leader(le));
    assert_null(lease_lost_reason(le));
    /* Renewals go out every retry period although the client's limiter
     * (0.5 QPS) would space ordinary requests 2 s apart. */
    int before = S.puts_ok;
    tl_run_for(&TL, 700);
    assert_true(S.puts_ok - before >= 4);
    assert_int_equal(E.stopped_leading, 0);
    assert_string_equal(json_get_str_or(S.lease, "spec.holderIdentity", ""), "me_1");
    lease_stop(le, on_stopped, NULL);
    tl_run_until(&TL, &E.stopped);
    assert_string_equal(json_get_str_or(S.lease, "spec.holderIdentity", "x"), "");
    assert_int_equal(json_get_int(S.lease, "spec.leaseDurationSeconds", 0), 1);
    teardown_all(NULL);
}

static void test_deadline_from_send_time(void **state)
{
    /* Every answer takes 180 ms. Counted from the answer, the deadline
     * would fall 180 ms later than counted from the send. Lease requests
     * time out after the renew deadline (600 ms), so the attempt sent
     * after the last success at A (at A+230) still hangs at A+600. */
    lease_elector *le = start(2000, 600, 50);
    tl_run_until(&TL, &E.started);
    S.delay_ms = 180;
    tl_run_for(&TL, 900);
    assert_true(lease_is_leader(le));
    /* Stall: renewals now hang (their 300 ms timeout, then a new one). */
    S.stall = 1;
    uint64_t last_ok_sent = S.last_ok_arrival_ms;
    assert_true(last_ok_sent > 0);
    tl_run_until(&TL, &E.stopped_leading);
    uint64_t lost_after = E.lost_ms - last_ok_sent;
    /* Sending happens a moment before arrival; allow some loop slack. */
    assert_true(lost_after >= 580);
    assert_true(lost_after < 600 + 150);
    assert_false(lease_is_leader(le));
    assert_non_null(lease_lost_reason(le));
    assert_non_null(strstr(lease_lost_reason(le), "renew deadline passed"));
    /* The renewal that was hanging at the deadline is canceled: its
     * connection goes away right then. */
    assert_non_null(strstr(lease_lost_reason(le), "in flight, canceled"));
    tl_run_for(&TL, 50);
    assert_true(S.closed_held >= 1);
    assert_true(S.last_close_ms >= E.lost_ms && S.last_close_ms - E.lost_ms < 50);
    /* Stepping down is final: no further attempt reaches the server. */
    int n = S.requests;
    S.stall = 0;
    S.delay_ms = 0;
    tl_run_for(&TL, 500);
    assert_int_equal(S.requests, n);
    assert_int_equal(E.stopped_leading, 1);
    teardown_all(le);
}

static void test_lease_taken(void **state)
{
    lease_elector *le = start(1000, 600, 100);
    tl_run_until(&TL, &E.started);
    /* Someone else writes the Lease: our next renewal gets 409, the read
     * that follows shows the new holder. */
    json_set_str(json_obj_ensure(S.lease, "spec"), "holderIdentity", "other_2");
    char rv[32];
    snprintf(rv, sizeof(rv), "%lld", ++S.rv);
    json_set_str(json_obj_ensure(S.lease, "metadata"), "resourceVersion", rv);
    uint64_t t0 = now_ms();
    tl_run_until(&TL, &E.stopped_leading);
    assert_true(E.lost_ms - t0 < 400); /* within a renewal or two, well before the deadline */
    assert_non_null(strstr(lease_lost_reason(le), "lease taken by \"other_2\""));
    assert_string_equal(json_get_str_or(S.lease, "spec.holderIdentity", ""), "other_2");
    int n = S.requests;
    tl_run_for(&TL, 300);
    assert_int_equal(S.requests, n);
    teardown_all(le);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_invalid_durations, setup),
        cmocka_unit_test_setup(test_acquire_renew_release, setup),
        cmocka_unit_test_setup(test_deadline_from_send_time, setup),
        cmocka_unit_test_setup(test_lease_taken, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
