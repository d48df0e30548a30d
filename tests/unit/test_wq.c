/* Unit tests for core/wq on a real libuv loop: dedupe, dirty-while-processing,
 * delayed adds, rate-limited backoff, handler results, per-tick budget,
 * shutdown and metrics. Every test ends with uv_loop_close() == 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "core/buf.h"
#include "core/err.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/ratelimit.h"
#include "core/wq.h"

#define MS RL_NS_PER_MS
#define MAXREC 10240

struct call {
    char key[32];
    uint64_t first_add;
    uint64_t start;
    uint64_t end;
    unsigned iteration;
};

typedef struct tctx tctx;
typedef wq_result (*decide_fn)(tctx *t, const char *key, int nth_for_key);

struct tctx {
    uv_loop_t loop;
    uv_prepare_t prepare; /* counts loop iterations */
    unsigned iteration;
    wq_t *q;
    struct call calls[MAXREC];
    int n;
    decide_fn decide;
    int closed;
    void *extra;
};

static int count_key(tctx *t, const char *key)
{
    int c = 0;
    for (int i = 0; i < t->n; i++)
        c += strcmp(t->calls[i].key, key) == 0;
    return c;
}

static wq_result handler(const char *key, uint64_t first_add_ns, void *data)
{
    tctx *t = data;
    assert_true(t->n < MAXREC);
    struct call *c = &t->calls[t->n++];
    snprintf(c->key, sizeof(c->key), "%s", key);
    c->first_add = first_add_ns;
    c->start = uv_hrtime();
    c->iteration = t->iteration;
    assert_true(wq_is_processing(t->q, key));
    wq_result r = t->decide ? t->decide(t, key, count_key(t, key)) : WQ_RESULT_OK;
    c->end = uv_hrtime();
    return r;
}

static void on_prepare(uv_prepare_t *p)
{
    tctx *t = container_of(p, tctx, prepare);
    t->iteration++;
}

static void setup_loop(tctx *t)
{
    memset(t, 0, sizeof(*t));
    assert_int_equal(uv_loop_init(&t->loop), 0);
    uv_prepare_init(&t->loop, &t->prepare);
    uv_prepare_start(&t->prepare, on_prepare);
    uv_unref((uv_handle_t *)&t->prepare); /* must not keep the loop alive */
}

static tctx *new_ctx(const wq_opts *extra)
{
    tctx *t = calloc(1, sizeof(*t));
    setup_loop(t);
    wq_opts o = extra ? *extra : (wq_opts){0};
    o.handler = handler;
    o.data = t;
    int err = 0;
    t->q = wq_new(&t->loop, &o, &err);
    assert_non_null(t->q);
    assert_int_equal(err, 0);
    return t;
}

static void on_closed(void *data)
{
    ((tctx *)data)->closed++;
}

static void close_walk(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* Shut the queue down (unless the test did), close everything, and insist
 * that the loop closes cleanly. The caller frees t. */
static void finish(tctx *t, int already_shut)
{
    if (!already_shut)
        wq_shutdown(t->q, on_closed, t);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    assert_int_equal(t->closed, 1);
    uv_walk(&t->loop, close_walk, NULL);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&t->loop), 0);
}

/* ------------------------------------------------------------------ tests */

static void test_dedupe(void **state)
{
    tctx *t = new_ctx(NULL);
    const char *adds[] = {"ns/a", "ns/b", "ns/a", "ns/a", "ns/c", "ns/b"};
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(wq_add(t->q, adds[i]), 0);
    /* Nothing runs from inside wq_add. */
    assert_int_equal(t->n, 0);
    assert_int_equal(wq_len(t->q), 3);
    assert_int_equal(wq_get_stats(t->q)->adds, 3);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    assert_int_equal(t->n, 3);
    assert_string_equal(t->calls[0].key, "ns/a");
    assert_string_equal(t->calls[1].key, "ns/b");
    assert_string_equal(t->calls[2].key, "ns/c");
    assert_int_equal(wq_len(t->q), 0);
    /* The first add counts for latency, not the duplicates. */
    assert_true(t->calls[0].first_add <= t->calls[1].first_add);
    assert_true(t->calls[0].first_add < t->calls[0].start);
    finish(t, 0);
    free(t);
}

static wq_result dirty_decide(tctx *t, const char *key, int nth)
{
    if (strcmp(key, "a") == 0 && nth == 1) {
        uint64_t before = uv_hrtime();
        /* Added while processing: marked dirty only, never handed out twice
         * at once, re-queued once when done. */
        assert_int_equal(wq_add(t->q, "a"), 0);
        assert_int_equal(wq_add(t->q, "a"), 0);
        assert_int_equal(wq_add(t->q, "b"), 0);
        assert_int_equal(wq_len(t->q), 1); /* only b is ready */
        *(uint64_t *)t->extra = before;
    }
    return WQ_RESULT_OK;
}

static void test_dirty_while_processing(void **state)
{
    uint64_t before_readd = 0;
    tctx *t = new_ctx(NULL);
    t->decide = dirty_decide;
    t->extra = &before_readd;
    wq_add(t->q, "a");
    uv_run(&t->loop, UV_RUN_DEFAULT);
    assert_int_equal(t->n, 3);
    assert_string_equal(t->calls[0].key, "a");
    assert_string_equal(t->calls[1].key, "b");
    assert_string_equal(t->calls[2].key, "a");
    assert_int_equal(count_key(t, "a"), 2);
    /* The second pass of "a" reports the add made during the first pass. */
    assert_true(t->calls[2].first_add >= before_readd);
    assert_true(t->calls[2].first_add <= t->calls[0].end);
    assert_int_equal(wq_get_stats(t->q)->adds, 3);
    finish(t, 0);
    free(t);
}

static void test_delayed_ordering_many(void **state)
{
    wq_opts o = {.max_per_tick = 64};
    tctx *t = new_ctx(&o);
    enum { N = 2000 };
    static uint64_t deadline[N];
    uint32_t seed = 12345;
    uint64_t t0 = uv_hrtime();
    for (int i = 0; i < N; i++) {
        char key[32];
        snprintf(key, sizeof(key), "k%d", i);
        seed = seed * 1103515245u + 12345u;
        uint64_t delay = 1 + (seed >> 16) % 80; /* 1..80 ms, scrambled */
        assert_int_equal(wq_add_after(t->q, key, delay), 0);
        assert_int_equal(wq_deadline(t->q, key, &deadline[i]), 0);
        assert_true(deadline[i] >= t0 + delay * MS);
    }
    assert_int_equal(wq_waiting(t->q), N);
    assert_int_equal(wq_len(t->q), 0);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    assert_int_equal(t->n, N);
    assert_int_equal(wq_waiting(t->q), 0);
    uint64_t prev = 0;
    for (int i = 0; i < N; i++) {
        int k = atoi(t->calls[i].key + 1);
        /* Processed in deadline order, never early, and the latency clock
         * starts at the deadline. */
        assert_true(deadline[k] >= prev);
        prev = deadline[k];
        assert_true(t->calls[i].start >= deadline[k]);
        assert_int_equal(t->calls[i].first_add, deadline[k]);
    }
    finish(t, 0);
    free(t);
}

static void test_earliest_deadline_wins(void **state)
{
    tctx *t = new_ctx(NULL);
    uint64_t t0 = uv_hrtime(), d1, d2;
    wq_add_after(t->q, "later-then-sooner", 400);
    wq_add_after(t->q, "later-then-sooner", 20);
    wq_add_after(t->q, "sooner-then-later", 30);
    wq_add_after(t->q, "sooner-then-later", 400);
    assert_int_equal(wq_waiting(t->q), 2);
    assert_int_equal(wq_deadline(t->q, "later-then-sooner", &d1), 0);
    assert_int_equal(wq_deadline(t->q, "sooner-then-later", &d2), 0);
    assert_true(d1 >= t0 + 20 * MS && d1 < t0 + 200 * MS);
    assert_true(d2 >= t0 + 30 * MS && d2 < t0 + 200 * MS);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    assert_int_equal(t->n, 2);
    assert_string_equal(t->calls[0].key, "later-then-sooner");
    assert_string_equal(t->calls[1].key, "sooner-then-later");
    /* Nothing was left waiting for the 400 ms deadlines. */
    assert_true(uv_hrtime() - t0 < 350 * MS);
    assert_int_equal(wq_deadline(t->q, "later-then-sooner", &d1), OP_ENOTFOUND);

    /* A delayed add of a key that is also ready happens on its own (as
     * client-go): processed now and again at the deadline. */
    wq_add_after(t->q, "both", 10);
    wq_add(t->q, "both");
    uv_run(&t->loop, UV_RUN_DEFAULT);
    assert_int_equal(count_key(t, "both"), 2);
    finish(t, 0);
    free(t);
}

/* The backoff of a requeued key is measured exactly: the prepare handle
 * runs in the same loop iteration right after the handler, and the deadline
 * was set between the handler's return and then. */
struct backoff_probe {
    uv_prepare_t prep;
    tctx *t;
    int seen; /* calls already examined */
    uint64_t lo[16], hi[16];
    int n;
};

static void probe_prepare(uv_prepare_t *p)
{
    struct backoff_probe *bp = container_of(p, struct backoff_probe, prep);
    tctx *t = bp->t;
    if (t->n == bp->seen)
        return;
    bp->seen = t->n;
    uint64_t d, now = uv_hrtime();
    if (wq_deadline(t->q, "g", &d) == 0 && bp->n < 16) {
        bp->lo[bp->n] = d - now;                    /* apply happened before now */
        bp->hi[bp->n] = d - t->calls[t->n - 1].end; /* and after the handler returned */
        bp->n++;
    }
}

static wq_result requeue_decide(tctx *t, const char *key, int nth)
{
    /* Failure count seen by the handler: nth - 1 requeues so far. */
    assert_int_equal(wq_num_requeues(t->q, key), (unsigned)(nth - 1));
    if (nth <= 7)
        return WQ_RESULT_REQUEUE;
    return WQ_RESULT_OK;
}

static void test_rate_limited_backoff_and_forget(void **state)
{
    wq_opts o = {.base_delay_ns = 2 * MS, .max_delay_ns = 16 * MS};
    tctx *t = new_ctx(&o);
    t->decide = requeue_decide;
    struct backoff_probe bp = {.t = t};
    uv_prepare_init(&t->loop, &bp.prep);
    uv_prepare_start(&bp.prep, probe_prepare);
    uv_unref((uv_handle_t *)&bp.prep);

    wq_add(t->q, "g");
    uv_run(&t->loop, UV_RUN_DEFAULT);
    assert_int_equal(t->n, 8);
    const uint64_t want[] = {2, 4, 8, 16, 16, 16, 16};
    assert_int_equal(bp.n, 7);
    for (int i = 0; i < 7; i++) {
        assert_true(bp.lo[i] <= want[i] * MS);
        assert_true(bp.hi[i] >= want[i] * MS);
        /* and the key was never processed before its deadline */
        assert_true(t->calls[i + 1].start - t->calls[i].end >= want[i] * MS);
    }
    /* WQ_OK forgot the failures, and the key is gone. */
    assert_int_equal(wq_num_requeues(t->q, "g"), 0);
    assert_int_equal(wq_get_stats(t->q)->retries, 7);
    uv_close((uv_handle_t *)&bp.prep, NULL);

    /* Direct use: every rate-limited add counts a failure; the earlier
     * deadline stays; forget clears the count but not the waiting add. */
    uint64_t t0 = uv_hrtime(), d;
    wq_add_rate_limited(t->q, "x");
    wq_add_rate_limited(t->q, "x");
    wq_add_rate_limited(t->q, "x");
    assert_int_equal(wq_num_requeues(t->q, "x"), 3);
    assert_int_equal(wq_deadline(t->q, "x", &d), 0);
    assert_true(d >= t0 + 2 * MS && d < t0 + 4 * MS);
    wq_forget(t->q, "x");
    assert_int_equal(wq_num_requeues(t->q, "x"), 0);
    assert_int_equal(wq_waiting(t->q), 1);
    wq_forget(t->q, "never-seen");
    assert_int_equal(wq_num_requeues(t->q, "never-seen"), 0);
    t->decide = NULL;
    uv_run(&t->loop, UV_RUN_DEFAULT);
    assert_int_equal(count_key(t, "x"), 1);
    finish(t, 0);
    free(t);
}

static wq_result result_decide(tctx *t, const char *key, int nth)
{
    if (strcmp(key, "err") == 0)
        return nth <= 2 ? WQ_RESULT_ERROR : WQ_RESULT_OK;
    if (strcmp(key, "after") == 0) {
        /* A failure first, then REQUEUE_AFTER must forget it. */
        if (nth == 1)
            return WQ_RESULT_REQUEUE;
        if (nth == 2) {
            assert_int_equal(wq_num_requeues(t->q, key), 1);
            return WQ_RESULT_AFTER(40);
        }
        assert_int_equal(wq_num_requeues(t->q, key), 0);
        return WQ_RESULT_OK;
    }
    if (strcmp(key, "now") == 0)
        return nth == 1 ? WQ_RESULT_AFTER(0) : WQ_RESULT_OK;
    return WQ_RESULT_OK;
}

static void test_results_error_and_requeue_after(void **state)
{
    wq_opts o = {.base_delay_ns = 1 * MS, .max_delay_ns = 4 * MS};
    tctx *t = new_ctx(&o);
    t->decide = result_decide;
    wq_add(t->q, "err");
    wq_add(t->q, "after");
    wq_add(t->q, "now");
    uv_run(&t->loop, UV_RUN_DEFAULT);
    assert_int_equal(count_key(t, "err"), 3);
    assert_int_equal(wq_get_stats(t->q)->errors, 2);
    assert_int_equal(count_key(t, "now"), 2);
    /* REQUEUE after 1 ms, then REQUEUE_AFTER(40) with the count forgotten. */
    assert_int_equal(wq_num_requeues(t->q, "after"), 0);
    uint64_t first_end = 0, last_start = 0;
    int n_after = 0;
    for (int i = 0; i < t->n; i++) {
        if (strcmp(t->calls[i].key, "after"))
            continue;
        if (++n_after == 2)
            first_end = t->calls[i].end;
        last_start = t->calls[i].start;
    }
    assert_int_equal(n_after, 3);
    assert_true(last_start - first_end >= 40 * MS);
    finish(t, 0);
    free(t);
}

static void test_budget_per_tick(void **state)
{
    wq_opts o = {.max_per_tick = 3};
    tctx *t = new_ctx(&o);
    for (int i = 0; i < 10; i++) {
        char key[8];
        snprintf(key, sizeof(key), "b%d", i);
        wq_add(t->q, key);
    }
    uv_run(&t->loop, UV_RUN_DEFAULT);
    assert_int_equal(t->n, 10);
    int per[64] = {0};
    unsigned first = t->calls[0].iteration;
    for (int i = 0; i < 10; i++) {
        unsigned it = t->calls[i].iteration - first;
        assert_true(it < 64);
        per[it]++;
    }
    /* 3 + 3 + 3 + 1, one batch per loop iteration. */
    assert_int_equal(per[0], 3);
    assert_int_equal(per[1], 3);
    assert_int_equal(per[2], 3);
    assert_int_equal(per[3], 1);
    /* With nothing ready the idle handle is stopped: the loop is not alive. */
    assert_false(uv_loop_alive(&t->loop));
    finish(t, 0);
    free(t);
}

static wq_result slow_decide(tctx *t, const char *key, int nth)
{
    uint64_t until = uv_hrtime() + 2 * MS;
    while (uv_hrtime() < until)
        ;
    return WQ_RESULT_OK;
}

static void test_time_budget_per_tick(void **state)
{
    wq_opts o = {.max_per_tick = 100, .max_tick_ns = 1 * MS};
    tctx *t = new_ctx(&o);
    t->decide = slow_decide;
    for (int i = 0; i < 4; i++) {
        char key[8];
        snprintf(key, sizeof(key), "s%d", i);
        wq_add(t->q, key);
    }
    uv_run(&t->loop, UV_RUN_DEFAULT);
    assert_int_equal(t->n, 4);
    for (int i = 1; i < 4; i++)
        assert_true(t->calls[i].iteration > t->calls[i - 1].iteration);
    finish(t, 0);
    free(t);
}

static void test_shutdown_with_pending(void **state)
{
    tctx *t = new_ctx(NULL);
    for (int i = 0; i < 100; i++) {
        char key[16];
        snprintf(key, sizeof(key), "r%d", i);
        wq_add(t->q, key);
        snprintf(key, sizeof(key), "d%d", i);
        wq_add_after(t->q, key, 10000);
        snprintf(key, sizeof(key), "f%d", i);
        wq_add_rate_limited(t->q, key);
    }
    wq_shutdown(t->q, on_closed, t);
    wq_shutdown(t->q, on_closed, t); /* second call is a no-op */
    assert_int_equal(wq_add(t->q, "late"), OP_ECANCELED);
    assert_int_equal(wq_add_after(t->q, "late", 1), OP_ECANCELED);
    assert_int_equal(wq_add_rate_limited(t->q, "late"), OP_ECANCELED);
    assert_int_equal(t->closed, 0); /* completion is asynchronous */
    /* The loop must not wait for the 10 s deadlines. */
    uint64_t t0 = uv_hrtime();
    finish(t, 1);
    assert_true(uv_hrtime() - t0 < 1000 * MS);
    assert_int_equal(t->n, 0);
    free(t);
}

static wq_result shutdown_decide(tctx *t, const char *key, int nth)
{
    if (strcmp(key, "stop") == 0) {
        wq_shutdown(t->q, on_closed, t);
        assert_int_equal(wq_add(t->q, "more"), OP_ECANCELED);
        /* The key being processed is still valid for the handler. */
        assert_string_equal(key, "stop");
        return WQ_RESULT_REQUEUE;
    }
    return WQ_RESULT_OK;
}

static void test_shutdown_from_handler(void **state)
{
    tctx *t = new_ctx(NULL);
    t->decide = shutdown_decide;
    wq_add(t->q, "one");
    wq_add(t->q, "stop");
    wq_add(t->q, "three");
    wq_add_after(t->q, "four", 5);
    finish(t, 1);
    assert_int_equal(t->n, 2);
    assert_string_equal(t->calls[1].key, "stop");
    free(t);
}

static void test_metrics(void **state)
{
    mx_registry *reg = mx_registry_new();
    wq_opts o = {.name = "nodeset", .metrics = reg, .base_delay_ns = 1 * MS};
    tctx *t = new_ctx(&o);
    t->decide = NULL;
    wq_add(t->q, "a");
    wq_add(t->q, "a");
    wq_add(t->q, "b");
    wq_add_rate_limited(t->q, "c");

    buf_t b;
    buf_init(&b, 1 << 20);
    assert_int_equal(mx_render(reg, &b), 0);
    assert_non_null(strstr(buf_cstr(&b), "\nworkqueue_depth{name=\"nodeset\",controller=\"nodeset\"} 2\n"));
    assert_non_null(
        strstr(buf_cstr(&b), "\nworkqueue_retries_total{name=\"nodeset\",controller=\"nodeset\"} 1\n"));
    buf_reset(&b);

    /* A second live queue with the same name is refused. */
    int err = 0;
    wq_opts o2 = {.name = "nodeset", .metrics = reg, .handler = handler, .data = t};
    log_setup(-1, LOGF_TEXT);
    assert_null(wq_new(&t->loop, &o2, &err));
    log_setup(LOGL_INFO, LOGF_TEXT);
    assert_int_equal(err, OP_EEXISTS);

    uv_run(&t->loop, UV_RUN_DEFAULT);
    assert_int_equal(t->n, 3);
    assert_int_equal(mx_render(reg, &b), 0);
    const char *s = buf_cstr(&b);
    assert_non_null(strstr(s, "\nworkqueue_depth{name=\"nodeset\",controller=\"nodeset\"} 0\n"));
    assert_non_null(strstr(s, "\nworkqueue_adds_total{name=\"nodeset\",controller=\"nodeset\"} 3\n"));
    assert_non_null(
        strstr(s, "\nworkqueue_queue_duration_seconds_count{name=\"nodeset\",controller=\"nodeset\"} 3\n"));
    assert_non_null(
        strstr(s, "\nworkqueue_work_duration_seconds_count{name=\"nodeset\",controller=\"nodeset\"} 3\n"));
    assert_non_null(strstr(s, "\nworkqueue_queue_duration_seconds_bucket{name=\"nodeset\",controller="
                              "\"nodeset\",le=\"+Inf\"} 3\n"));
    assert_non_null(strstr(
        s, "\nworkqueue_longest_running_processor_seconds{name=\"nodeset\",controller=\"nodeset\"} 0\n"));
    assert_non_null(
        strstr(s, "\nworkqueue_unfinished_work_seconds{name=\"nodeset\",controller=\"nodeset\"} 0\n"));
    assert_non_null(
        strstr(s, "\ncontroller_runtime_reconcile_total{controller=\"nodeset\",result=\"success\"} 3\n"));
    buf_reset(&b);

    /* Shutdown removes the queue's series; a new queue may take the name. */
    wq_shutdown(t->q, on_closed, t);
    assert_int_equal(mx_render(reg, &b), 0);
    assert_null(strstr(buf_cstr(&b), "nodeset"));
    uv_run(&t->loop, UV_RUN_DEFAULT);
    wq_t *q2 = wq_new(&t->loop, &o2, &err);
    assert_non_null(q2);
    t->q = q2;
    t->closed = 0;
    buf_free(&b);
    finish(t, 0);
    free(t);
    mx_registry_free(reg);
}

static void test_memory_per_key(void **state)
{
    /* 10,000 distinct keys with short delays: everything is processed once
     * and freed (ASan's leak check and finish() verify the rest). */
    wq_opts o = {.max_per_tick = 1000};
    tctx *t = new_ctx(&o);
    enum { N = 10000 };
    for (int i = 0; i < N; i++) {
        char key[48];
        snprintf(key, sizeof(key), "namespace-%d/nodeset-%d", i % 7, i);
        if (i % 2)
            wq_add_after(t->q, key, 1 + i % 5);
        else
            wq_add(t->q, key);
    }
    assert_int_equal(wq_len(t->q) + wq_waiting(t->q), N);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    assert_int_equal(t->n, N);
    assert_int_equal(wq_len(t->q), 0);
    assert_int_equal(wq_waiting(t->q), 0);
    finish(t, 0);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dedupe),
        cmocka_unit_test(test_dirty_while_processing),
        cmocka_unit_test(test_delayed_ordering_many),
        cmocka_unit_test(test_earliest_deadline_wins),
        cmocka_unit_test(test_rate_limited_backoff_and_forget),
        cmocka_unit_test(test_results_error_and_requeue_after),
        cmocka_unit_test(test_budget_per_tick),
        cmocka_unit_test(test_time_budget_per_tick),
        cmocka_unit_test(test_shutdown_with_pending),
        cmocka_unit_test(test_shutdown_from_handler),
        cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_memory_per_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
