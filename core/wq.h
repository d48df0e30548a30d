/* wq: a work queue with client-go workqueue semantics, driven by libuv.
 *
 * Keys are strings (usually "namespace/name") copied by the queue. The
 * semantics are those of client-go's rate-limiting delaying queue
 * (docs/internals/KUBE-API.md#client-norms):
 *  - dedupe: a key waiting to be processed is stored once; adding it again
 *    is a no-op;
 *  - a key being processed is never handed out again at the same time: an
 *    add meanwhile only marks it dirty, and it is queued once more when its
 *    processing is done, so no add is lost;
 *  - wq_add_after: a delayed add; if the key already waits, the earlier
 *    ready time wins. A key can wait and be ready at the same time (as in
 *    client-go); the delayed add still happens at its deadline;
 *  - wq_add_rate_limited: a delayed add after the key's exponential backoff,
 *    base * 2^failures capped (5 ms and 1000 s by default), each call
 *    counting one failure; wq_forget clears the count; wq_num_requeues
 *    reads it. An optional overall token bucket (off by default) can stretch
 *    the delay further, as client-go's default controller limiter does.
 *
 * Driving. The queue calls the handler itself, from a uv_idle callback that
 * is active only while keys are ready, for one key at a time, at most
 * max_per_tick keys (and about max_tick_ns of handler time) per loop
 * iteration, so one busy queue cannot starve the loop's I/O. Delayed keys
 * sit in a min-heap with one timer (hrtimer.h: to the microsecond) armed for
 * the earliest deadline. The handler is never called from inside a wq_*
 * call; it always runs from the loop.
 *
 * Handler results (controller-runtime's rules):
 *  - WQ_OK: success, the key's failure count is forgotten;
 *  - WQ_REQUEUE: the key is re-added rate-limited (backoff grows);
 *  - WQ_REQUEUE_AFTER(ms): the failure count is forgotten and the key is
 *    re-added after ms;
 *  - WQ_ERROR: like WQ_REQUEUE, and counted as an error.
 *
 * Memory: about 64 bytes plus the key per key the queue knows (a key stays
 * known while it is ready, processing, waiting or has a non-zero failure
 * count), plus its slot in the hash map and heap.
 *
 * Lifetime: wq_shutdown() is the one close path; it may be called from
 * inside the handler. Time is CLOCK_MONOTONIC nanoseconds as uv_hrtime().
 */
#ifndef OP_WQ_H
#define OP_WQ_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/metrics.h"

typedef struct wq wq_t;

typedef enum wq_action { WQ_OK = 0, WQ_REQUEUE, WQ_REQUEUE_AFTER, WQ_ERROR } wq_action;

/** What the handler asks for; build it with the macros below. */
typedef struct wq_result {
    wq_action action;
    uint32_t after_ms; /* WQ_REQUEUE_AFTER only */
} wq_result;

#define WQ_RESULT_OK ((wq_result){WQ_OK, 0})
#define WQ_RESULT_REQUEUE ((wq_result){WQ_REQUEUE, 0})
#define WQ_RESULT_ERROR ((wq_result){WQ_ERROR, 0})
#define WQ_RESULT_AFTER(ms) ((wq_result){WQ_REQUEUE_AFTER, (uint32_t)(ms)})

/** Process one key. key is valid only during the call (copy it to keep
 *  it). first_add_ns is the uv_hrtime() of the earliest add of this key
 *  since it was last handed out (for a delayed add: its deadline), for
 *  event-to-action latency. The handler may call any wq_* function on its
 *  own queue, including wq_shutdown. */
typedef wq_result (*wq_handler)(const char *key, uint64_t first_add_ns, void *data);

typedef struct wq_opts {
    const char
        *name; /* labels "name" and "controller" of the metrics and in logs (default "default"); copied */
    wq_handler handler;     /* required */
    void *data;             /* passed to handler */
    unsigned max_per_tick;  /* keys handled per loop iteration (default 64) */
    uint64_t max_tick_ns;   /* stop a tick's batch after this much handler time (default 10 ms);
                               at least one key is always handled */
    uint64_t base_delay_ns; /* rate-limited backoff base (default 5 ms) */
    uint64_t max_delay_ns;  /* rate-limited backoff cap (default 1000 s) */
    double bucket_qps;      /* overall token bucket over rate-limited adds; 0 = off */
    int bucket_burst;       /* its burst (default 100 when bucket_qps > 0) */
    mx_registry *metrics;   /* optional; must outlive the queue */
} wq_opts;

/** Counters for tests and logs. */
typedef struct wq_stats {
    uint64_t adds;      /* adds that were not deduplicated */
    uint64_t processed; /* handler calls */
    uint64_t errors;    /* WQ_ERROR results */
    uint64_t retries;   /* rate-limited adds */
} wq_stats;

/** Create a queue on loop. NULL with *err set: OP_EINVAL (no handler),
 *  OP_EEXISTS (a live queue with the same name already exports metrics to
 *  the same registry), or a libuv code. */
wq_t *wq_new(uv_loop_t *loop, const wq_opts *opts, int *err);

/** Add key now. 0, or OP_ECANCELED after wq_shutdown. */
int wq_add(wq_t *q, const char *key);

/** Add key after delay_ms (0 = wq_add). If the key is already waiting, the
 *  earlier deadline is kept. 0 or OP_ECANCELED. */
int wq_add_after(wq_t *q, const char *key, uint64_t delay_ms);

/** Count a failure of key and add it after its backoff (see above).
 *  0 or OP_ECANCELED. */
int wq_add_rate_limited(wq_t *q, const char *key);

/** Clear key's failure count (does not remove it from the queue). */
void wq_forget(wq_t *q, const char *key);

/** Failures counted for key since the last forget. */
unsigned wq_num_requeues(const wq_t *q, const char *key);

/** Keys ready to be handed out (the depth metric). */
size_t wq_len(const wq_t *q);
/** Keys waiting for a deadline. */
size_t wq_waiting(const wq_t *q);
/** When key is waiting, store its deadline (uv_hrtime ns) and return 0;
 *  OP_ENOTFOUND otherwise. */
int wq_deadline(const wq_t *q, const char *key, uint64_t *deadline_ns);
/** 1 while the handler is running for key. */
int wq_is_processing(const wq_t *q, const char *key);
const wq_stats *wq_get_stats(const wq_t *q);

/** Stop accepting adds (they return OP_ECANCELED), drop every pending and
 *  waiting key, remove the queue's metrics and close its handles. The
 *  handler is not called again (a handler that is running when this is
 *  called finishes normally, and its result is ignored). on_closed(data)
 *  (optional) runs from the loop once the handles are closed; the queue is
 *  freed right after it, and q must not be used once wq_shutdown returns
 *  except from the handler that is running. Calling it twice is a no-op. */
void wq_shutdown(wq_t *q, void (*on_closed)(void *data), void *data);

#endif
