/* loopstat: how long each iteration of the event loop keeps it busy.
 *
 * Everything slurmop does runs on one loop, so one long iteration delays
 * every event that arrives meanwhile: a reconcile's latency is its own cost
 * plus whatever the loop was doing when its event came. This module
 * measures the busy time of every iteration (wall time between two
 * consecutive uv_prepare callbacks, which run just before the loop waits
 * for I/O, minus the time libuv reports it spent waiting) and exports it:
 *   slurmop_loop_iteration_busy_seconds   histogram, one sample per iteration
 *                                          that did any work (> 0)
 *   slurmop_loop_busy_seconds_total       counter, the sum (a utilisation when
 *                                          divided by wall time)
 *   slurmop_loop_iteration_cpu_seconds    the CPU time of the loop's thread in
 *   slurmop_loop_cpu_seconds_total        the same iterations, and its sum
 * Busy time above CPU time is time the process was runnable but not
 * running: other processes on the same cores, or a container's CPU limit
 * throttling it. Either way, events wait.
 * Cost: one uv_prepare callback, three clock reads per iteration.
 *
 * loopstat_new must run before the loop first runs (libuv counts idle time
 * only when UV_METRICS_IDLE_TIME was configured from the start).
 * loopstat_close is the one close path: the handle closes, then the struct
 * is freed; metrics stay in the registry (the registry owns them). */
#ifndef OP_LOOPSTAT_H
#define OP_LOOPSTAT_H

#include <stdint.h>
#include <uv.h>

#include "core/metrics.h"

typedef struct loopstat loopstat;

/** Start measuring loop's iterations into registry r. NULL with *err set
 *  (a negative code) when the metrics cannot be registered or libuv
 *  cannot count idle time. */
loopstat *loopstat_new(uv_loop_t *loop, mx_registry *r, int *err);
/** Busy time of the longest iteration since the previous call, in
 *  nanoseconds (for logs and tests). */
uint64_t loopstat_take_max_ns(loopstat *s);
/** Stop and free (after the handle closed). NULL is fine. */
void loopstat_close(loopstat *s);
/** CPU time of the calling thread in nanoseconds (0 if the clock fails):
 *  unlike wall time it leaves out waiting for a core. */
uint64_t loopstat_thread_cpu_ns(void);

#endif
