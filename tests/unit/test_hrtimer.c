/* Unit tests for core/hrtimer on a real libuv loop: never early, in order,
 * re-arming and stopping, a past deadline, the loop kept alive only while
 * armed, close; the timerfd and the uv_timer fallback both; and the point of
 * the module, a deadline just after a millisecond boundary met within a
 * fraction of a millisecond (the fallback misses it by most of one). Every
 * test ends with uv_loop_close() == 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/hrtimer.h"

#define US 1000ull
#define MS 1000000ull

typedef struct {
    uv_loop_t loop;
    hrtimer t;
    int fired;
    uint64_t fired_at[64];
    uint64_t deadline[64];
    int closed;
    int coarse;
    int rearm_left;         /* on_fire_rearm: arm again this many times */
    uint64_t rearm_step_ns; /* ... this far after the previous deadline */
} tctx;

static void setup(tctx *c, int coarse)
{
    memset(c, 0, sizeof(*c));
    assert_int_equal(uv_loop_init(&c->loop), 0);
    c->coarse = coarse;
    if (coarse)
        hrtimer_init_coarse(&c->loop, &c->t);
    else
        hrtimer_init(&c->loop, &c->t);
    c->t.data = c;
    assert_int_equal(hrtimer_precise(&c->t), !coarse);
}

static void on_closed(hrtimer *t)
{
    ((tctx *)t->data)->closed++;
}

static void finish(tctx *c)
{
    hrtimer_close(&c->t, on_closed);
    assert_int_equal(c->closed, 0); /* asynchronous, as uv_close */
    uv_run(&c->loop, UV_RUN_DEFAULT);
    assert_int_equal(c->closed, 1);
    assert_int_equal(uv_loop_close(&c->loop), 0);
}

static void on_fire(hrtimer *t)
{
    tctx *c = t->data;
    assert_true(c->fired < 64);
    c->fired_at[c->fired++] = uv_hrtime();
    assert_false(hrtimer_active(t));
}

/* Arms itself again from its own callback, rearm_left times. */
static void on_fire_rearm(hrtimer *t)
{
    tctx *c = t->data;
    on_fire(t);
    if (c->rearm_left-- > 0) {
        c->deadline[c->fired] = c->deadline[c->fired - 1] + c->rearm_step_ns;
        hrtimer_start(t, on_fire_rearm, c->deadline[c->fired]);
    }
}

static void check_never_early(int coarse)
{
    tctx c;
    setup(&c, coarse);
    c.rearm_left = 19;
    c.rearm_step_ns = 700 * US; /* off the millisecond grid on purpose */
    c.deadline[0] = uv_hrtime() + 300 * US;
    hrtimer_start(&c.t, on_fire_rearm, c.deadline[0]);
    assert_true(hrtimer_active(&c.t));
    assert_int_equal(c.fired, 0); /* never from inside hrtimer_start */
    uv_run(&c.loop, UV_RUN_DEFAULT);  /* returns once nothing is armed */
    assert_int_equal(c.fired, 20);
    for (int i = 0; i < 20; i++)
        assert_true(c.fired_at[i] >= c.deadline[i]);
    finish(&c);
}

static void test_never_early(void **state)
{
    (void)state;
    check_never_early(0);
}

static void test_never_early_coarse(void **state)
{
    (void)state;
    check_never_early(1);
}

static void on_fire_count(hrtimer *t)
{
    on_fire(t);
}

static void check_rearm_stop_past(int coarse)
{
    tctx c;
    setup(&c, coarse);
    uint64_t t0 = uv_hrtime();

    /* Re-arming replaces: the later deadline is the one kept, and an earlier
     * one replacing a later one fires early enough. */
    hrtimer_start(&c.t, on_fire_count, t0 + 5 * MS);
    hrtimer_start(&c.t, on_fire_count, t0 + 30 * MS);
    uv_run(&c.loop, UV_RUN_DEFAULT);
    assert_int_equal(c.fired, 1);
    assert_true(c.fired_at[0] >= t0 + 30 * MS);

    t0 = uv_hrtime();
    hrtimer_start(&c.t, on_fire_count, t0 + 500 * MS);
    hrtimer_start(&c.t, on_fire_count, t0 + 2 * MS);
    uv_run(&c.loop, UV_RUN_DEFAULT);
    assert_int_equal(c.fired, 2);
    assert_true(c.fired_at[1] >= t0 + 2 * MS && c.fired_at[1] < t0 + 400 * MS);

    /* Stopped: never fires, and the loop is not kept alive. */
    t0 = uv_hrtime();
    hrtimer_start(&c.t, on_fire_count, t0 + 20 * MS);
    hrtimer_stop(&c.t);
    assert_false(hrtimer_active(&c.t));
    hrtimer_stop(&c.t); /* twice is fine */
    uv_run(&c.loop, UV_RUN_DEFAULT);
    assert_true(uv_hrtime() - t0 < 15 * MS);
    assert_int_equal(c.fired, 2);

    /* A deadline already past (and 0) fires on the next iteration. */
    hrtimer_start(&c.t, on_fire_count, uv_hrtime() - 5 * MS);
    assert_int_equal(c.fired, 2);
    uv_run(&c.loop, UV_RUN_DEFAULT);
    assert_int_equal(c.fired, 3);
    hrtimer_start(&c.t, on_fire_count, 0);
    uv_run(&c.loop, UV_RUN_DEFAULT);
    assert_int_equal(c.fired, 4);

    /* Closed while armed: the callback never runs, on_closed does. */
    hrtimer_start(&c.t, on_fire_count, uv_hrtime() + 1 * MS);
    finish(&c);
    assert_int_equal(c.fired, 4);
}

static void test_rearm_stop_past(void **state)
{
    (void)state;
    check_rearm_stop_past(0);
}

static void test_rearm_stop_past_coarse(void **state)
{
    (void)state;
    check_rearm_stop_past(1);
}

/* The median lateness of 40 deadlines each 100 us after a millisecond
 * boundary of the uv_hrtime() clock. */
static void sort_u64(uint64_t *v, int n)
{
    for (int i = 1; i < n; i++) /* insertion sort */
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            uint64_t x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
}

/* One sample: arm c for 100 us after the millisecond boundary after next,
 * run its loop until it fires, return how late it fired. */
static uint64_t one_lateness(tctx *c)
{
    uint64_t d = (uv_hrtime() / MS + 2) * MS + 100 * US;
    uv_update_time(&c->loop);
    int before = c->fired;
    hrtimer_start(&c->t, on_fire_count, d);
    uv_run(&c->loop, UV_RUN_DEFAULT);
    assert_int_equal(c->fired, before + 1);
    assert_true(c->fired_at[before % 64] >= d);
    uint64_t late = c->fired_at[before % 64] - d;
    if (c->fired == 64)
        c->fired = 0;
    return late;
}

/* The median lateness of the timerfd (*fine) and of the uv_timer fallback
 * (*coarse) over 40 samples each, taken in turn, so that both see the same
 * load on the machine. */
static void median_lateness(uint64_t *fine, uint64_t *coarse)
{
    tctx f, c;
    setup(&f, 0);
    setup(&c, 1);
    uint64_t lf[40], lc[40];
    for (int i = 0; i < 40; i++) {
        lf[i] = one_lateness(&f);
        lc[i] = one_lateness(&c);
    }
    finish(&f);
    finish(&c);
    sort_u64(lf, 40);
    sort_u64(lc, 40);
    *fine = lf[20];
    *coarse = lc[20];
}

/* The timerfd meets such deadlines within the kernel's timer slack; a
 * millisecond timer cannot fire before the next boundary, 900 us later.
 * Both also wait for the scheduler to run the process after the wake, which
 * the module does not control: beside other tests on a loaded two-core
 * machine that alone took the timerfd's median past a fixed 500 us now and
 * then. So what is bounded is the module's gain over the uv_timer measured
 * in the same run (the wake-up delay adds to both): the timerfd fires at
 * least 400 us earlier (about 850 us is expected; a timerfd rounded to the
 * millisecond as uv_timer gains nothing), the best of up to five tries. A
 * 2 ms absolute bound stays, far above the timer slack, as a floor for a
 * run where both are late together. */
static void test_precision(void **state)
{
    (void)state;
    uint64_t best_fine = UINT64_MAX, best_gain = 0, coarse_min = UINT64_MAX;
    for (int k = 0; k < 5 && (best_gain < 400 * US || best_fine >= 2 * MS); k++) {
        uint64_t fine, coarse;
        median_lateness(&fine, &coarse);
        printf("median lateness: timerfd %.0f us, uv_timer %.0f us\n", (double)fine / 1e3,
               (double)coarse / 1e3);
        best_fine = fine < best_fine ? fine : best_fine;
        coarse_min = coarse < coarse_min ? coarse : coarse_min;
        if (coarse > fine && coarse - fine > best_gain)
            best_gain = coarse - fine;
    }
    assert_true(best_gain >= 400 * US);
    assert_true(best_fine < 2 * MS);
    assert_true(coarse_min >= 900 * US); /* rounded up to the next boundary, never early */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_never_early),
        cmocka_unit_test(test_never_early_coarse),
        cmocka_unit_test(test_rearm_stop_past),
        cmocka_unit_test(test_rearm_stop_past_coarse),
        cmocka_unit_test(test_precision),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
