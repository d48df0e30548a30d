/* The lifetime of nodeset_slurm's state (nss_state, nss_of):
 * Slurm write completions reach it through their context and may arrive
 * after the operator let go of it, so freeing it with writes in flight
 * only marks it released and the last completion frees it. The module is
 * compiled into the test to drive its completions directly, with an
 * operator on the heap that is freed before they arrive: ASan reports a
 * completion that touches the operator or a state freed too early, LSan a
 * state never freed. The queue hook counts what the completions queue.
 * Also the marks of pods whose delete was decided (no status writes for
 * them): they last 60 s, and the ones of pods gone are swept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "reconcilers/nodeset_slurm.c"

static int queued_now, queued_after;

static void q_now(void *ctx, const char *key)
{
    (void)ctx;
    (void)key;
    queued_now++;
}

static void q_after(void *ctx, const char *key, uint64_t ms)
{
    (void)ctx;
    (void)key;
    (void)ms;
    queued_after++;
}

static void q_pod(void *ctx, const char *key, const sobj *pod)
{
    (void)pod;
    q_now(ctx, key);
}

/* The records' parts: one NodeSet's at most. */
static nss_set *part_of_set;

static nss_set **q_part(void *ctx, const char *key, int make)
{
    (void)ctx;
    return strcmp(key, "ns/set") == 0 && (make || part_of_set) ? &part_of_set : NULL;
}

static nss_set *q_next_part(void *ctx, size_t *it)
{
    (void)ctx;
    return (*it)++ == 0 ? part_of_set : NULL;
}

/* The registry's slots of the bare operators below. */
static void *slots[OPR__COUNT];

/* A state as nss_setup leaves it, on a bare operator that has a loop. */
static nss_state *state_on(operator *op, uv_loop_t *loop)
{
    memset(op, 0, sizeof(*op));
    op->loop = loop;
    memset(slots, 0, sizeof(slots));
    op->state = slots;
    nss_state *st = RC_NODESET_SLURM.new_state();
    slots[OPR_NODESET_SLURM] = st;
    assert_ptr_equal(nss_of(op), st);
    st->op = op;
    st->q =
        (nss_queue){.now = q_now, .after = q_after, .pod = q_pod, .part = q_part, .next_part = q_next_part};
    queued_now = queued_after = 0;
    return st;
}

static sw_ctx *slurm_ctx(nss_state *st)
{
    sw_ctx *c = xcalloc(1, sizeof(*c));
    c->st = st;
    c->set = xstrdup("ns/set");
    c->bkey = join_key("ns/ctl", "n1");
    write_sent(st);
    return c;
}

static resv_ctx *resv_ctx_new(nss_state *st)
{
    resv_ctx *c = xcalloc(1, sizeof(*c));
    c->st = st;
    c->set = xstrdup("ns/set");
    write_sent(st);
    return c;
}

static void test_free_idle(void **state)
{
    (void)state;
    assert_true(RC_NODESET_SLURM.free_late); /* its completions may outlive the free */
    RC_NODESET_SLURM.free_state(NULL);
    nss_state *st = RC_NODESET_SLURM.new_state();
    assert_non_null(st->ik_mode);
    RC_NODESET_SLURM.free_state(st); /* nothing in flight: freed now (LSan) */
}

/* While running, a failed write backs off and queues its NodeSet; the
 * writes still in flight when the operator lets go complete afterwards,
 * queue nothing, touch neither the freed operator nor the state's maps,
 * and the last one frees the state. */
static void test_released_state_freed_by_last_completion(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    operator *op = xmalloc(sizeof(*op));
    nss_state *st = state_on(op, &loop);

    slurm_written("n1", OP_EIO, slurm_ctx(st));
    assert_int_equal(queued_after, 1);
    assert_int_equal(st->backoff.count, 1);
    assert_int_equal(st->inflight, 0);

    sw_ctx *sw = slurm_ctx(st);
    sw_ctx *sw2 = slurm_ctx(st);
    resv_ctx *rv = resv_ctx_new(st);
    assert_int_equal(st->inflight, 3);

    nss_stop(op);
    RC_NODESET_SLURM.free_state(st);
    free(op); /* the operator is gone before the completions arrive */
    /* Released, not freed: ASan would report these reads otherwise. */
    assert_int_equal(st->released, 1);
    assert_int_equal(st->stopped, 1);

    slurm_written("n1", OP_EIO, sw);
    resv_done(0, rv);
    assert_int_equal(st->inflight, 1);
    assert_int_equal(st->backoff.count, 0);
    slurm_written("n1", OP_EIO, sw2); /* the last: frees the state */
    assert_int_equal(queued_now, 0);
    assert_int_equal(queued_after, 1);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* Freed with nothing in flight, then no completion can come: freed at once,
 * even when nss_stop never ran (a start that failed after setup). */
static void test_free_without_stop(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    operator op;
    nss_state *st = state_on(&op, &loop);
    slurm_written("n1", 0, slurm_ctx(st));
    resv_done(0, resv_ctx_new(st));
    assert_int_equal(queued_now, 1); /* a reservation write that completed queues its NodeSet */
    assert_int_equal(st->inflight, 0);
    RC_NODESET_SLURM.free_state(st);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_deleting_marks(void **state)
{
    (void)state;
    nss_set s;
    memset(&s, 0, sizeof(s));
    map_init_type(&s.deleting, &deleting_type);
    sobj pod;
    memset(&pod, 0, sizeof(pod));
    snprintf(pod.uid, sizeof(pod.uid), "uid-x");
    assert_int_equal(is_deleting(&s, &pod, 0), 0);
    mark_deleting(&s, &pod, 1000);
    assert_int_equal(is_deleting(&s, &pod, 1000 + DELETING_MS - 1), 1);
    assert_int_equal(is_deleting(&s, &pod, 1000 + DELETING_MS), 0); /* stale: dropped */
    assert_int_equal((int)s.deleting.count, 0);
    /* 200 pods marked at 0 and gone (never looked up again), then 56 more
     * after their marks ran out: a sweep leaves only the 56. */
    for (int i = 0; i < 256; i++) {
        snprintf(pod.uid, sizeof(pod.uid), "uid-%d", i);
        mark_deleting(&s, &pod, i < 200 ? 0 : DELETING_MS + 10000);
    }
    assert_int_equal((int)s.deleting.count, 56);
    snprintf(pod.uid, sizeof(pod.uid), "uid-255");
    assert_int_equal(is_deleting(&s, &pod, DELETING_MS + 10000), 1);
    map_free(&s.deleting); /* LSan: the marks are owned by the map */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_free_idle),
        cmocka_unit_test(test_released_state_freed_by_last_completion),
        cmocka_unit_test(test_free_without_stop),
        cmocka_unit_test(test_deleting_marks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
