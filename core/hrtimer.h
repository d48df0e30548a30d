/* hrtimer: a one-shot timer for a deadline on the uv_hrtime() clock, kept
 * to the microsecond.
 *
 * A uv_timer counts whole milliseconds from the loop's cached time, which
 * libuv reads from a coarse clock (a jiffy behind the precise one). A
 * deadline in nanoseconds is then met a millisecond or two late, or early
 * and re-armed a millisecond later. The work queue counts a delayed add's
 * latency from its deadline, so that lateness was most of the operator's
 * event -> action tail on a real API server: every throttled status write
 * came 0.7-1.3 ms after its deadline.
 *
 * On Linux the timer is a timerfd (CLOCK_MONOTONIC, the clock of
 * uv_hrtime(), armed with an absolute deadline) that a uv_poll_t watches, so
 * the loop wakes within the kernel's timer slack (50 us by default) of the
 * deadline. Elsewhere, or when timerfd_create fails, it is a uv_timer whose
 * milliseconds are rounded up from the loop's cached time: never early, up
 * to two milliseconds late.
 *
 * Like a uv_timer it keeps the loop alive only while armed. The callback
 * runs on the loop, never inside hrtimer_start, and never before the
 * deadline (uv_hrtime() >= deadline when it runs). Not thread-safe.
 */
#ifndef OP_HRTIMER_H
#define OP_HRTIMER_H

#include <stdint.h>
#include <uv.h>

typedef struct hrtimer hrtimer;
typedef void (*hrtimer_cb)(hrtimer *t);

/** All fields but data are private; the struct is public so that it can be
 *  embedded. */
struct hrtimer {
    void *data; /* the user's */
    union {
        uv_handle_t handle;
        uv_poll_t poll;   /* fd >= 0: watches the timerfd */
        uv_timer_t timer; /* fd < 0 */
    } h;
    int fd;               /* the timerfd, or -1 */
    int armed;            /* started and not yet fired or stopped */
    uint64_t deadline_ns; /* while armed */
    hrtimer_cb cb;
    hrtimer_cb on_closed;
};

/** Set t up on loop. Cannot fail: without a timerfd it falls back to a
 *  uv_timer (hrtimer_precise says which). */
void hrtimer_init(uv_loop_t *loop, hrtimer *t);
/** The same with a uv_timer even where a timerfd exists (the fallback, for
 *  its tests). */
void hrtimer_init_coarse(uv_loop_t *loop, hrtimer *t);
/** Arm t for deadline_ns (a uv_hrtime() value; one in the past fires on the
 *  next loop iteration), replacing any earlier arming. */
void hrtimer_start(hrtimer *t, hrtimer_cb cb, uint64_t deadline_ns);
/** Disarm t; nothing happens when it is not armed. */
void hrtimer_stop(hrtimer *t);
/** 1 when armed. */
int hrtimer_active(const hrtimer *t);
/** 1 when t is a timerfd, 0 when it fell back to a uv_timer. */
int hrtimer_precise(const hrtimer *t);
/** Disarm and release t. Its memory must stay valid until on_closed(t) runs
 *  (on a later loop iteration; NULL: no callback), as with uv_close. */
void hrtimer_close(hrtimer *t, hrtimer_cb on_closed);

#endif
