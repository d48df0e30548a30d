/* loopstat: per-iteration busy time of the loop. See loopstat.h. */
#include "core/loopstat.h"

#include <stdlib.h>
#include <time.h>

#include "core/err.h"
#include "core/mem.h"

struct loopstat {
    uv_prepare_t prep;
    uv_loop_t *loop;
    uint64_t last_ns;   /* uv_hrtime() at the previous prepare, 0 before the first */
    uint64_t last_idle; /* uv_metrics_idle_time() then */
    uint64_t last_cpu;  /* the thread's CPU time then */
    uint64_t max_ns;    /* since loopstat_take_max_ns */
    mx_histogram *busy, *cpu;
    mx_counter *total, *cpu_total;
};

/* CPU time of the loop's thread: less than the busy time when the process
 * was waiting for a core (other processes, a cgroup CPU limit). */
uint64_t loopstat_thread_cpu_ns(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0)
        return 0;
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void on_prepare(uv_prepare_t *h)
{
    loopstat *s = h->data;
    uint64_t now = uv_hrtime(), idle = uv_metrics_idle_time(s->loop), cpu = loopstat_thread_cpu_ns();
    if (s->last_ns) {
        uint64_t wall = now - s->last_ns, waited = idle - s->last_idle;
        uint64_t busy = wall > waited ? wall - waited : 0;
        if (busy > 0) {
            uint64_t used = cpu > s->last_cpu ? cpu - s->last_cpu : 0;
            mx_histogram_observe(s->busy, (double)busy / 1e9);
            mx_counter_add(s->total, (double)busy / 1e9);
            mx_histogram_observe(s->cpu, (double)used / 1e9);
            mx_counter_add(s->cpu_total, (double)used / 1e9);
        }
        if (busy > s->max_ns)
            s->max_ns = busy;
    }
    s->last_ns = now;
    s->last_idle = idle;
    s->last_cpu = cpu;
}

loopstat *loopstat_new(uv_loop_t *loop, mx_registry *r, int *err)
{
    /* From 20 µs (an iteration that handled one small event) to a second
     * (a loop that is stuck). */
    static const double b[] = {0.00002, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                               0.005,   0.01,    0.025,  0.05,    0.1,    0.25,  1};
    int rc = uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
    if (rc != 0) {
        *err = rc;
        return NULL;
    }
    loopstat *s = xcalloc(1, sizeof(*s));
    s->loop = loop;
    s->busy = mx_histogram_new(r, "slurmop_loop_iteration_busy_seconds",
                               "Busy time of each event loop iteration (work between two waits for I/O)", b,
                               sizeof(b) / sizeof(b[0]), err);
    s->total = mx_counter_new(r, "slurmop_loop_busy_seconds_total",
                              "Time the event loop spent working rather than waiting for I/O", err);
    s->cpu =
        mx_histogram_new(r, "slurmop_loop_iteration_cpu_seconds",
                         "CPU time of the event loop's thread in each iteration (below the busy time when "
                         "the process waited for a core)",
                         b, sizeof(b) / sizeof(b[0]), err);
    s->cpu_total =
        mx_counter_new(r, "slurmop_loop_cpu_seconds_total", "CPU time of the event loop's thread", err);
    if (s->busy == NULL || s->total == NULL || s->cpu == NULL || s->cpu_total == NULL) {
        if (*err == 0)
            *err = OP_EINVAL;
        free(s);
        return NULL;
    }
    uv_prepare_init(loop, &s->prep);
    s->prep.data = s;
    uv_prepare_start(&s->prep, on_prepare);
    uv_unref((uv_handle_t *)&s->prep); /* measuring never keeps the loop alive */
    return s;
}

uint64_t loopstat_take_max_ns(loopstat *s)
{
    uint64_t m = s->max_ns;
    s->max_ns = 0;
    return m;
}

static void on_closed(uv_handle_t *h)
{
    free(h->data);
}

void loopstat_close(loopstat *s)
{
    if (s == NULL)
        return;
    uv_prepare_stop(&s->prep);
    uv_close((uv_handle_t *)&s->prep, on_closed);
}
