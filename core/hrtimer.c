#include "core/hrtimer.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef __linux__
#include <sys/timerfd.h>
#endif

#include "core/log.h"
#include "core/mem.h"

#define NS_PER_MS 1000000ull
#define NS_PER_SEC 1000000000ull

/* hrtimer.h: never before the deadline. */
static void fire(hrtimer *t)
{
    assert(t->armed && t->cb != NULL && uv_hrtime() >= t->deadline_ns);
    assert(!uv_is_closing(&t->h.handle));
    t->armed = 0;
    t->cb(t);
}

/* ------------------------------------------------------------ uv_timer */

static void arm_fallback(hrtimer *t);

static void on_uv_timer(uv_timer_t *h)
{
    hrtimer *t = container_of(h, hrtimer, h.timer);
    if (!t->armed)
        return;
    if (uv_hrtime() < t->deadline_ns) {
        arm_fallback(t); /* cannot happen with the rounding below; cheap to be sure */
        return;
    }
    fire(t);
}

/* The loop's time is whole milliseconds of a clock at or behind
 * uv_hrtime()'s, and the timer runs once it reaches now + ms: rounding the
 * deadline up to a millisecond keeps the callback from coming early. */
static void arm_fallback(hrtimer *t)
{
    uint64_t now_ms = uv_now(t->h.handle.loop);
    uint64_t due_ms = (t->deadline_ns + NS_PER_MS - 1) / NS_PER_MS;
    uv_timer_start(&t->h.timer, on_uv_timer, due_ms > now_ms ? due_ms - now_ms : 0, 0);
}

/* ------------------------------------------------------------- timerfd */

#ifdef __linux__
static void on_poll(uv_poll_t *p, int status, int events)
{
    (void)status; /* an error on a timerfd: look at the clock anyway */
    (void)events;
    hrtimer *t = container_of(p, hrtimer, h.poll);
    uint64_t ticks;
    while (read(t->fd, &ticks, sizeof(ticks)) < 0 && errno == EINTR)
        ; /* EAGAIN: already read, or re-armed meanwhile */
    if (!t->armed) {
        uv_poll_stop(p);
        return;
    }
    if (uv_hrtime() < t->deadline_ns)
        return; /* not this arming's expiry */
    uv_poll_stop(p);
    fire(t);
}

static void settime(hrtimer *t, uint64_t deadline_ns)
{
    struct itimerspec its;
    memset(&its, 0, sizeof(its));
    its.it_value.tv_sec = (time_t)(deadline_ns / NS_PER_SEC);
    its.it_value.tv_nsec = (long)(deadline_ns % NS_PER_SEC);
    if (timerfd_settime(t->fd, deadline_ns ? TFD_TIMER_ABSTIME : 0, &its, NULL) != 0) {
        /* Only a bad descriptor or value gets here: a bug, not a condition. */
        log_error("hrtimer: timerfd_settime: %s", strerror(errno));
        abort();
    }
}
#endif

/* ---------------------------------------------------------------- API */

void hrtimer_init_coarse(uv_loop_t *loop, hrtimer *t)
{
    memset(t, 0, sizeof(*t));
    t->fd = -1;
    uv_timer_init(loop, &t->h.timer);
}

void hrtimer_init(uv_loop_t *loop, hrtimer *t)
{
#ifdef __linux__
    memset(t, 0, sizeof(*t));
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    int rc = fd < 0 ? -errno : uv_poll_init(loop, &t->h.poll, fd);
    if (rc == 0) {
        t->fd = fd;
        return;
    }
    if (fd >= 0)
        close(fd);
    log_warn("hrtimer: no timerfd (%s): timers keep to the millisecond", uv_strerror(rc));
#endif
    hrtimer_init_coarse(loop, t);
}

void hrtimer_start(hrtimer *t, hrtimer_cb cb, uint64_t deadline_ns)
{
    assert(cb != NULL && !uv_is_closing(&t->h.handle));
    t->cb = cb;
    t->deadline_ns = deadline_ns;
#ifdef __linux__
    if (t->fd >= 0) {
        /* 0 would disarm a timerfd; a deadline of 1 ns is as past. */
        settime(t, deadline_ns ? deadline_ns : 1);
        if (!t->armed)
            uv_poll_start(&t->h.poll, UV_READABLE, on_poll);
        t->armed = 1;
        return;
    }
#endif
    t->armed = 1;
    arm_fallback(t);
}

void hrtimer_stop(hrtimer *t)
{
    if (!t->armed)
        return;
    t->armed = 0;
#ifdef __linux__
    if (t->fd >= 0) {
        settime(t, 0);
        uv_poll_stop(&t->h.poll);
        return;
    }
#endif
    uv_timer_stop(&t->h.timer);
}

int hrtimer_active(const hrtimer *t)
{
    return t->armed;
}

int hrtimer_precise(const hrtimer *t)
{
    return t->fd >= 0;
}

static void on_handle_closed(uv_handle_t *h)
{
    hrtimer *t = container_of(h, hrtimer, h.handle);
    if (t->fd >= 0) {
        close(t->fd); /* only now: libuv watches it until the handle is closed */
        t->fd = -1;
    }
    if (t->on_closed)
        t->on_closed(t);
}

void hrtimer_close(hrtimer *t, hrtimer_cb on_closed)
{
    assert(!uv_is_closing(&t->h.handle)); /* closed once, as any libuv handle */
    hrtimer_stop(t);
    t->on_closed = on_closed;
    uv_close(&t->h.handle, on_handle_closed);
}
