/* Unit tests for reconcilers/nodeset_write: the value gate (the same value
 * not sent twice while in flight or settling, a new value at once, a
 * failure reopening it, the sweep keeping it bounded), the pace of a
 * NodeSet's status (one in flight, one a second, the held-back pass
 * queued at the end), and the writer's completions (its count of writes
 * in flight, the retry a failure asks for, nothing after stop). The module
 * is compiled into the test to drive its completions directly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "reconcilers/nodeset_write.c"

static void test_gate(void **state)
{
    (void)state;
    nsw_gates g;
    nsw_gates_init(&g);
    nsw_ticket *t = nsw_gate_take(&g, "uid-1", "label x", 7, 1000);
    assert_non_null(t);
    char *key = xstrdup(nsw_ticket_key(t));
    assert_string_equal(key, "uid-1\x1flabel x");
    /* The same value: not while in flight, however long. */
    assert_null(nsw_gate_take(&g, "uid-1", "label x", 7, 1000 + 10 * NSW_VALUE_TTL_MS));
    /* Another value, another object or another field: at once. */
    assert_non_null(nsw_gate_take(&g, "uid-2", "label x", 7, 1000));
    assert_non_null(nsw_gate_take(&g, "uid-1", "label y", 7, 1000));
    nsw_gate_end(&g, key, 0);
    /* Done: the same value waits out the TTL from its sending. */
    assert_null(nsw_gate_take(&g, "uid-1", "label x", 7, 1000 + NSW_VALUE_TTL_MS - 1));
    t = nsw_gate_take(&g, "uid-1", "label x", 7, 1000 + NSW_VALUE_TTL_MS);
    assert_non_null(t);
    nsw_gate_end(&g, key, 0);
    /* A new value while the old settles goes; it failing reopens the gate
     * for any value, the old one included. */
    assert_non_null(nsw_gate_take(&g, "uid-1", "label x", 8, 40000));
    assert_null(nsw_gate_take(&g, "uid-1", "label x", 8, 40001));
    nsw_gate_end(&g, key, OP_EIO);
    assert_non_null(nsw_gate_take(&g, "uid-1", "label x", 8, 40002));
    nsw_gate_end(&g, "no such key", 0); /* swept or cleared meanwhile: nothing */
    free(key);
    nsw_gates_free(&g);
}

/* Entries long written go at the sweep; those in flight or settling stay. */
static void test_gate_sweep(void **state)
{
    (void)state;
    nsw_gates g;
    nsw_gates_init(&g);
    char uid[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(uid, sizeof(uid), "old-%d", i);
        nsw_ticket *t = nsw_gate_take(&g, uid, "w", 1, 0);
        char *k = xstrdup(nsw_ticket_key(t));
        nsw_gate_end(&g, k, 0);
        free(k);
    }
    for (int i = 0; i < 10; i++) { /* in flight from 0: kept */
        snprintf(uid, sizeof(uid), "busy-%d", i);
        assert_non_null(nsw_gate_take(&g, uid, "w", 1, 0));
    }
    assert_int_equal((int)nsw_gates_count(&g), 1010);
    for (int i = 0; i < SWEEP_EVERY - 1010; i++) { /* written just now: kept */
        snprintf(uid, sizeof(uid), "new-%d", i);
        assert_non_null(nsw_gate_take(&g, uid, "w", 1, NSW_VALUE_TTL_MS + 5));
    }
    assert_int_equal((int)nsw_gates_count(&g), SWEEP_EVERY - 1000);
    assert_null(nsw_gate_take(&g, "busy-3", "w", 1, NSW_VALUE_TTL_MS + 5));
    assert_non_null(nsw_gate_take(&g, "old-3", "w", 1, NSW_VALUE_TTL_MS + 5));
    nsw_gates_free(&g); /* LSan: owned by the map */
}

static void test_pace(void **state)
{
    (void)state;
    nsw_pace p;
    memset(&p, 0, sizeof(p));
    assert_int_equal(nsw_pace_take(&p, 5000), 0);
    assert_int_equal(nsw_pace_take(&p, 5100), NSW_PACE_BUSY);
    assert_int_equal(p.again, 1);
    /* Its end queues the held-back pass a second after the sending. */
    assert_int_equal(nsw_pace_end(&p, 5300), 700);
    assert_int_equal(nsw_pace_take(&p, 5500), 500); /* not sooner */
    assert_int_equal(nsw_pace_take(&p, 6000), 0);
    assert_int_equal(nsw_pace_end(&p, 6100), -1); /* nothing held back */
    assert_int_equal(nsw_pace_take(&p, 9000), 0);
    assert_int_equal(nsw_pace_take(&p, 9001), NSW_PACE_BUSY);
    assert_int_equal(nsw_pace_end(&p, 12000), 0); /* late: the pass runs now */
}

static int retried;
static char retried_set[64];

static void on_retry(void *ctx, const char *set, uint64_t ms)
{
    (void)ctx;
    assert_int_equal((int)ms, 1000);
    snprintf(retried_set, sizeof(retried_set), "%s", set);
    retried++;
}

static int own_calls, own_err;

static void on_own(int err, const cJSON *obj, const kube_status *st, void *data)
{
    (void)obj;
    (void)st;
    assert_ptr_equal(data, &own_calls);
    own_err = err;
    own_calls++;
}

static void *slots[OPR__COUNT];

static void test_writer_completions(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    operator op;
    memset(&op, 0, sizeof(op));
    op.loop = &loop;
    op.state = slots;
    nsw_state *w = RC_NODESET_WRITE.new_state();
    slots[OPR_NODESET_WRITE] = w;
    assert_ptr_equal(nsw_of(&op), w);
    nsw_setup(&op, &(nsw_hooks){.retry = on_retry});

    /* A failure: counted until its end, the gate reopened, a retry. */
    nsw_ticket *t = nsw_take(&op, "uid-1", "label x", 1);
    assert_non_null(t);
    gated_ctx *c = gated_ctx_new(w, t, "ns/set", "label x of pod p");
    assert_int_equal((int)nsw_inflight(&op), 1);
    assert_null(nsw_take(&op, "uid-1", "label x", 1));
    gated_done(OP_EIO, NULL, NULL, c);
    assert_int_equal((int)nsw_inflight(&op), 0);
    assert_int_equal(retried, 1);
    assert_string_equal(retried_set, "ns/set");
    /* The pod gone: no retry; cancelled (stopping): no retry either, and
     * the gate is no longer in flight. */
    gated_done(OP_ENOTFOUND, NULL, NULL,
               gated_ctx_new(w, nsw_take(&op, "uid-1", "label x", 1), "ns/set", "x"));
    t = nsw_take(&op, "uid-1", "label x", 1);
    assert_non_null(t);
    gated_done(OP_ECANCELED, NULL, NULL, gated_ctx_new(w, t, "ns/set", "x"));
    assert_int_equal(retried, 1);
    assert_null(nsw_take(&op, "uid-1", "label x", 1)); /* sent just now: settling */
    /* The reconciler's own writes: its callback, then the count. */
    own_done(OP_ECONFLICT, NULL, NULL, own_ctx_new(w, on_own, &own_calls));
    assert_int_equal(own_calls, 1);
    assert_int_equal(own_err, OP_ECONFLICT);
    assert_int_equal((int)nsw_inflight(&op), 0);
    /* After stop: nothing taken, a late failure asks for nothing. */
    t = nsw_take(&op, "uid-9", "label x", 1);
    c = gated_ctx_new(w, t, "ns/set", "x");
    nsw_stop(&op);
    assert_null(nsw_take(&op, "uid-10", "label x", 1));
    gated_done(OP_EIO, NULL, NULL, c);
    assert_int_equal(retried, 1);
    RC_NODESET_WRITE.free_state(w); /* nothing in flight (asserted) */
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gate),
        cmocka_unit_test(test_gate_sweep),
        cmocka_unit_test(test_pace),
        cmocka_unit_test(test_writer_completions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
