/* Unit tests for core/ratelimit: token bucket, per-item exponential delay,
 * jittered backoff with reset. Time is made up, so nothing sleeps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "core/ratelimit.h"

#define MS RL_NS_PER_MS
#define SEC RL_NS_PER_SEC

static void test_bucket_burst_then_steady(void **state)
{
    rl_bucket b;
    uint64_t t0 = 1000 * SEC;
    rl_bucket_init(&b, 10, 5, t0);
    /* The burst goes through at once. */
    for (int i = 0; i < 5; i++)
        assert_int_equal(rl_bucket_reserve(&b, t0), 0);
    /* Then requests arriving together are spaced 1/qps apart. */
    assert_int_equal(rl_bucket_reserve(&b, t0), 100 * MS);
    assert_int_equal(rl_bucket_reserve(&b, t0), 200 * MS);
    assert_int_equal(rl_bucket_reserve(&b, t0), 300 * MS);
    assert_false(rl_bucket_try(&b, t0));
    /* 250 ms later two tokens are still owed (-3 + 2.5 = -0.5). */
    assert_true(fabs(rl_bucket_tokens(&b, t0 + 250 * MS) + 0.5) < 1e-9);
    assert_int_equal(rl_bucket_reserve(&b, t0 + 250 * MS), 150 * MS);

    /* After a long pause the bucket is full again, but never above burst. */
    uint64_t t1 = t0 + 60 * SEC;
    assert_true(fabs(rl_bucket_tokens(&b, t1) - 5) < 1e-9);
    for (int i = 0; i < 5; i++)
        assert_true(rl_bucket_try(&b, t1));
    assert_false(rl_bucket_try(&b, t1));

    /* Steady state at exactly qps: every request is on time. */
    for (int i = 1; i <= 50; i++)
        assert_int_equal(rl_bucket_reserve(&b, t1 + (uint64_t)i * 100 * MS), 0);
    /* Faster than qps: the wait grows by the difference each time. */
    uint64_t t2 = t1 + 50 * 100 * MS;
    assert_int_equal(rl_bucket_reserve(&b, t2 + 50 * MS), 50 * MS);
    assert_int_equal(rl_bucket_reserve(&b, t2 + 100 * MS), 100 * MS);
}

static void test_bucket_try_and_cancel(void **state)
{
    rl_bucket b;
    rl_bucket_init(&b, 2, 1, 0);
    assert_true(rl_bucket_try(&b, 0));
    assert_false(rl_bucket_try(&b, 0));
    assert_false(rl_bucket_try(&b, 499 * MS));
    assert_true(rl_bucket_try(&b, 500 * MS));
    /* A reservation given back makes room for the next request. */
    assert_int_equal(rl_bucket_reserve(&b, 500 * MS), 500 * MS);
    rl_bucket_cancel(&b, 500 * MS);
    assert_int_equal(rl_bucket_reserve(&b, 1000 * MS), 0);
    /* A clock that goes back refills nothing and breaks nothing. */
    assert_int_equal(rl_bucket_reserve(&b, 10 * MS), 500 * MS);
}

static void test_bucket_unlimited(void **state)
{
    rl_bucket b;
    rl_bucket_init(&b, 0, 0, 0);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(rl_bucket_reserve(&b, 0), 0);
    assert_true(rl_bucket_try(&b, 0));
    rl_bucket_init(&b, -1, 10, 0);
    assert_int_equal(rl_bucket_reserve(&b, 0), 0);
    /* burst 0 with a rate still lets one request through. */
    rl_bucket_init(&b, 5, 0, 0);
    assert_int_equal(rl_bucket_reserve(&b, 0), 0);
    assert_int_equal(rl_bucket_reserve(&b, 0), 200 * MS);
}

static void test_exp_delay(void **state)
{
    uint64_t base = 5 * MS, cap = 1000 * SEC;
    assert_int_equal(rl_exp_delay(base, cap, 0), 5 * MS);
    assert_int_equal(rl_exp_delay(base, cap, 1), 10 * MS);
    assert_int_equal(rl_exp_delay(base, cap, 2), 20 * MS);
    assert_int_equal(rl_exp_delay(base, cap, 10), 5120 * MS);
    assert_int_equal(rl_exp_delay(base, cap, 17), 655360 * MS);
    assert_int_equal(rl_exp_delay(base, cap, 18), cap);
    /* No overflow far past the cap. */
    assert_int_equal(rl_exp_delay(base, cap, 40), cap);
    assert_int_equal(rl_exp_delay(base, cap, 63), cap);
    assert_int_equal(rl_exp_delay(base, cap, 64), cap);
    assert_int_equal(rl_exp_delay(base, cap, 4000000000u), cap);
    assert_int_equal(rl_exp_delay(UINT64_MAX / 2, UINT64_MAX, 1), UINT64_MAX - 1);
    assert_int_equal(rl_exp_delay(UINT64_MAX / 2, UINT64_MAX, 2), UINT64_MAX);
    assert_int_equal(rl_exp_delay(0, cap, 5), 0);
}

/* The DaemonSet replacement backoff (reconcilers/nodeset.c): a pod that
 * fails at once on its Node waits 1 s, 2 s, ... up to 15 min; one that then
 * ran 20 minutes before it failed starts over at 1 s (it stayed at 15 min for
 * every later replacement when the delay only ever doubled). */
static void test_backoff_daemonset(void **state)
{
    (void)state;
    const uint64_t cap = 15 * 60 * SEC;
    rl_backoff b;
    rl_backoff_init(&b, 1 * SEC, cap, 2.0, 0.0, cap);
    uint64_t now = 0, d = 0;
    for (int i = 0; i < 12; i++) {
        d = rl_backoff_next(&b, now);
        now += d / 2; /* the replacement failed halfway through its wait's length */
    }
    assert_int_equal(d, cap);
    now += 20 * 60 * SEC;
    assert_int_equal(rl_backoff_next(&b, now), 1 * SEC);
}

static void test_backoff_sequence_and_reset(void **state)
{
    rl_backoff b;
    rl_backoff_init(&b, 800 * MS, 30 * SEC, 2.0, 0.0, 120 * SEC);
    uint64_t now = 5 * SEC;
    const uint64_t want[] = {800, 1600, 3200, 6400, 12800, 25600, 30000, 30000, 30000};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        if (i)
            now += 10 * SEC; /* failures keep coming, less than 2 min apart */
        assert_int_equal(rl_backoff_next(&b, now), want[i] * MS);
    }
    /* Just under the quiet period: no reset. */
    now += 119 * SEC;
    assert_int_equal(rl_backoff_next(&b, now), 30 * SEC);
    /* Two minutes without a backoff: start over. */
    now += 120 * SEC;
    assert_int_equal(rl_backoff_next(&b, now), 800 * MS);
    assert_int_equal(rl_backoff_next(&b, now), 1600 * MS);
    /* An explicit reset too. */
    rl_backoff_reset(&b);
    assert_int_equal(rl_backoff_next(&b, now), 800 * MS);

    /* reset == 0 never resets by itself. */
    rl_backoff_init(&b, 1 * SEC, 4 * SEC, 2.0, 0.0, 0);
    assert_int_equal(rl_backoff_next(&b, 0), 1 * SEC);
    assert_int_equal(rl_backoff_next(&b, 1000 * SEC), 2 * SEC);
    assert_int_equal(rl_backoff_next(&b, 5000 * SEC), 4 * SEC);
    assert_int_equal(rl_backoff_next(&b, 9000 * SEC), 4 * SEC);
}

static void test_backoff_jitter_bounds(void **state)
{
    rl_backoff b;
    rl_backoff_init_reflector(&b);
    b.rng = 42; /* deterministic */
    assert_int_equal(b.initial, 800 * MS);
    assert_int_equal(b.cap, 30 * SEC);
    assert_int_equal(b.reset, 120 * SEC);
    uint64_t now = 0;
    uint64_t base = 800 * MS;
    int varied = 0;
    for (int i = 0; i < 12; i++) {
        uint64_t d = rl_backoff_next(&b, now);
        /* jitter 1.0: d in [base, 2*base) */
        assert_true(d >= base);
        assert_true(d < 2 * base);
        varied += d != base;
        base = base * 2 > 30 * SEC ? 30 * SEC : base * 2;
        now += SEC;
    }
    assert_true(varied >= 10);

    /* Over many draws the jitter is spread over the whole range. */
    double sum = 0, lo = 1, hi = 0;
    for (int i = 0; i < 10000; i++) {
        double r = rl_backoff_rand(&b);
        assert_true(r >= 0 && r < 1);
        sum += r;
        lo = r < lo ? r : lo;
        hi = r > hi ? r : hi;
    }
    assert_true(sum / 10000 > 0.45 && sum / 10000 < 0.55);
    assert_true(lo < 0.01 && hi > 0.99);

    /* A jitter of 0.5 bounds to [d, 1.5d). */
    rl_backoff_init(&b, 100 * MS, 100 * MS, 2.0, 0.5, 0);
    for (int i = 0; i < 1000; i++) {
        uint64_t d = rl_backoff_next(&b, 0);
        assert_true(d >= 100 * MS && d < 150 * MS);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_burst_then_steady),   cmocka_unit_test(test_bucket_try_and_cancel),
        cmocka_unit_test(test_bucket_unlimited),           cmocka_unit_test(test_exp_delay),
        cmocka_unit_test(test_backoff_sequence_and_reset), cmocka_unit_test(test_backoff_jitter_bounds),
        cmocka_unit_test(test_backoff_daemonset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
