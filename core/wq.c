#include "core/wq.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/hrtimer.h"
#include "core/list.h"
#include "core/log.h"
#include "core/map.h"
#include "core/mem.h"
#include "core/ratelimit.h"

#define NOT_WAITING UINT32_MAX

enum {
    F_DIRTY = 1,      /* needs processing (queued, or re-queue when done) */
    F_PROCESSING = 2, /* handed to the handler right now */
};

/* One known key. Invariants: on the ready list <=> DIRTY && !PROCESSING;
 * heap_idx != NOT_WAITING <=> in the delay heap. An item that is none of
 * ready, processing, waiting and has no failures is freed at once. */
struct wq_item {
    list_node link;        /* ready list */
    uint64_t first_add_ns; /* earliest add since last handed out; 0 = none */
    uint64_t deadline_ns;  /* while waiting */
    uint32_t heap_idx;
    uint32_t failures;
    uint8_t flags;
    char key[];
};

struct wq {
    uv_idle_t idle;   /* runs ready keys; active only while some are ready */
    hrtimer timer;    /* armed for the earliest deadline (to the microsecond: see hrtimer.h) */
    char *name;
    wq_handler handler;
    void *data;
    unsigned max_per_tick;
    uint64_t max_tick_ns;
    uint64_t base_delay_ns;
    uint64_t max_delay_ns;
    int use_bucket;
    rl_bucket bucket;

    map_t items; /* key -> wq_item */
    list_node ready;
    size_t n_ready;
    struct wq_item **heap;
    uint32_t heap_len;
    uint32_t heap_cap;
    uint64_t armed_deadline; /* deadline the timer is armed for; 0 = not armed */

    struct wq_item *current; /* being processed */
    uint64_t current_start;
    wq_stats stats;

    int closing;
    int pending_close;
    void (*on_closed)(void *data);
    void *closed_data;

    /* metrics (NULL without a registry) */
    mx_family *f_depth, *f_adds, *f_qdur, *f_wdur, *f_retries, *f_longest, *f_unfinished, *f_rtotal, *f_rerr;
    mx_family *f_active, *f_max; /* controller_runtime_active_workers, _max_concurrent_reconciles */
    mx_counter *m_adds, *m_retries, *m_res_ok, *m_res_err, *m_res_requeue, *m_res_after, *m_errors;
    mx_histogram *m_qdur, *m_wdur;
};

/* ---------------------------------------------------------------- items */

static struct wq_item *item_find(const wq_t *q, const char *key)
{
    return map_get(&q->items, key);
}

static struct wq_item *item_get(wq_t *q, const char *key)
{
    struct wq_item *it = map_get(&q->items, key);
    if (it)
        return it;
    size_t n = strlen(key);
    it = xmalloc(sizeof(*it) + n + 1);
    list_init(&it->link);
    it->first_add_ns = 0;
    it->deadline_ns = 0;
    it->heap_idx = NOT_WAITING;
    it->failures = 0;
    it->flags = 0;
    memcpy(it->key, key, n + 1);
    map_put(&q->items, it->key, it);
    return it;
}

/* Free the item when nothing refers to it any more. */
static void item_maybe_free(wq_t *q, struct wq_item *it)
{
    if (it->flags || it->heap_idx != NOT_WAITING || it->failures || it == q->current)
        return;
    assert(!list_is_linked(&it->link));
    assert(map_get(&q->items, it->key) == it);
    map_del(&q->items, it->key);
    free(it);
}

/* ---------------------------------------------------------------- heap */

static void heap_set(wq_t *q, uint32_t i, struct wq_item *it)
{
    assert(i < q->heap_len && q->heap_len <= q->heap_cap);
    q->heap[i] = it;
    it->heap_idx = i;
}

static void heap_up(wq_t *q, uint32_t i)
{
    struct wq_item *it = q->heap[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (q->heap[parent]->deadline_ns <= it->deadline_ns)
            break;
        heap_set(q, i, q->heap[parent]);
        i = parent;
    }
    heap_set(q, i, it);
    assert(i == 0 || q->heap[(i - 1) / 2]->deadline_ns <= it->deadline_ns);
}

static void heap_down(wq_t *q, uint32_t i)
{
    struct wq_item *it = q->heap[i];
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        uint64_t best = it->deadline_ns;
        if (l < q->heap_len && q->heap[l]->deadline_ns < best) {
            m = l;
            best = q->heap[l]->deadline_ns;
        }
        if (r < q->heap_len && q->heap[r]->deadline_ns < best)
            m = r;
        if (m == i)
            break;
        heap_set(q, i, q->heap[m]);
        i = m;
    }
    heap_set(q, i, it);
    assert(2 * i + 1 >= q->heap_len || it->deadline_ns <= q->heap[2 * i + 1]->deadline_ns);
}

static void heap_push(wq_t *q, struct wq_item *it)
{
    assert(it->heap_idx == NOT_WAITING);
    if (q->heap_len == q->heap_cap) {
        q->heap_cap = q->heap_cap ? q->heap_cap * 2 : 64;
        q->heap = xrealloc(q->heap, q->heap_cap * sizeof(*q->heap));
    }
    heap_set(q, q->heap_len++, it);
    heap_up(q, it->heap_idx);
}

static struct wq_item *heap_pop(wq_t *q)
{
    assert(q->heap_len > 0);
    struct wq_item *top = q->heap[0];
    assert(top->heap_idx == 0);
    top->heap_idx = NOT_WAITING;
    if (--q->heap_len > 0) {
        heap_set(q, 0, q->heap[q->heap_len]);
        heap_down(q, 0);
    }
    return top;
}

/* ---------------------------------------------------------------- driver */

static void on_idle(uv_idle_t *h);
static void on_timer(hrtimer *t);

/* Arm the timer for the earliest deadline, or stop it when nothing waits. */
static void timer_arm(wq_t *q)
{
    if (q->heap_len == 0) {
        if (q->armed_deadline) {
            hrtimer_stop(&q->timer);
            q->armed_deadline = 0;
        }
        return;
    }
    uint64_t deadline = q->heap[0]->deadline_ns;
    if (deadline == q->armed_deadline)
        return;
    hrtimer_start(&q->timer, on_timer, deadline);
    q->armed_deadline = deadline;
}

/* The item invariant: on the ready list <=> DIRTY && !PROCESSING. */
static void ready_push(wq_t *q, struct wq_item *it)
{
    assert((it->flags & F_DIRTY) && !(it->flags & F_PROCESSING));
    assert(!list_is_linked(&it->link));
    assert(!q->closing);
    list_insert_tail(&q->ready, &it->link);
    q->n_ready++;
    if (!uv_is_active((uv_handle_t *)&q->idle))
        uv_idle_start(&q->idle, on_idle);
}

/* The Add of client-go's queue, for an item we already hold; at is the
 * time the add counts from. */
static void add_item(wq_t *q, struct wq_item *it, uint64_t at)
{
    if (it->flags & F_DIRTY)
        return; /* already queued, or will be re-queued when processing ends */
    it->flags |= F_DIRTY;
    if (it->first_add_ns == 0)
        it->first_add_ns = at ? at : 1;
    q->stats.adds++;
    if (q->m_adds)
        mx_counter_inc(q->m_adds);
    if (it->flags & F_PROCESSING)
        return;
    ready_push(q, it);
}

static void add_after_ns(wq_t *q, struct wq_item *it, uint64_t delay_ns)
{
    uint64_t now = uv_hrtime();
    if (delay_ns == 0) {
        add_item(q, it, now);
        return;
    }
    assert(it->heap_idx == NOT_WAITING || (it->heap_idx < q->heap_len && q->heap[it->heap_idx] == it));
    uint64_t deadline = now + delay_ns;
    if (it->heap_idx != NOT_WAITING) {
        if (deadline < it->deadline_ns) {
            it->deadline_ns = deadline;
            heap_up(q, it->heap_idx);
        }
    } else {
        it->deadline_ns = deadline;
        heap_push(q, it);
    }
    timer_arm(q);
}

static void on_timer(hrtimer *t)
{
    wq_t *q = t->data;
    uint64_t now = uv_hrtime();
    q->armed_deadline = 0;
    while (q->heap_len > 0 && q->heap[0]->deadline_ns <= now) {
        struct wq_item *it = heap_pop(q);
        /* The add counts from the deadline, so that timer lateness shows up
         * as queue latency. */
        add_item(q, it, it->deadline_ns);
    }
    timer_arm(q);
}

static uint64_t backoff_ns(wq_t *q, struct wq_item *it)
{
    uint64_t d = rl_exp_delay(q->base_delay_ns, q->max_delay_ns, it->failures);
    if (it->failures < UINT32_MAX)
        it->failures++;
    if (q->use_bucket) {
        uint64_t b = rl_bucket_reserve(&q->bucket, uv_hrtime());
        if (b > d)
            d = b;
    }
    return d;
}

static void rate_limited(wq_t *q, struct wq_item *it)
{
    q->stats.retries++;
    if (q->m_retries)
        mx_counter_inc(q->m_retries);
    add_after_ns(q, it, backoff_ns(q, it));
}

/* Get: take the first ready key and mark it processing. */
static struct wq_item *get(wq_t *q)
{
    list_node *n = list_first(&q->ready);
    if (n == NULL)
        return NULL;
    assert(q->n_ready > 0);
    list_remove(n);
    q->n_ready--;
    struct wq_item *it = list_entry(n, struct wq_item, link);
    assert((it->flags & F_DIRTY) && !(it->flags & F_PROCESSING));
    it->flags = (uint8_t)((it->flags | F_PROCESSING) & ~F_DIRTY);
    return it;
}

/* Done: processing is over; re-queue when it was dirtied meanwhile. */
static void done(wq_t *q, struct wq_item *it)
{
    assert((it->flags & F_PROCESSING) && !list_is_linked(&it->link));
    it->flags &= (uint8_t)~F_PROCESSING;
    if (it->flags & F_DIRTY)
        ready_push(q, it);
    item_maybe_free(q, it);
}

static void apply(wq_t *q, struct wq_item *it, wq_result res)
{
    /* The default branch keeps a release build going on a handler's stray
     * value; a debug build wants to hear of it. */
    assert(res.action == WQ_OK || res.action == WQ_REQUEUE || res.action == WQ_REQUEUE_AFTER ||
           res.action == WQ_ERROR);
    switch (res.action) {
    case WQ_OK:
        it->failures = 0;
        if (q->m_res_ok)
            mx_counter_inc(q->m_res_ok);
        break;
    case WQ_REQUEUE_AFTER:
        it->failures = 0;
        if (q->m_res_after)
            mx_counter_inc(q->m_res_after);
        add_after_ns(q, it, (uint64_t)res.after_ms * RL_NS_PER_MS);
        break;
    case WQ_ERROR:
        q->stats.errors++;
        if (q->m_res_err) {
            mx_counter_inc(q->m_res_err);
            mx_counter_inc(q->m_errors);
        }
        rate_limited(q, it);
        break;
    case WQ_REQUEUE:
    default:
        if (q->m_res_requeue)
            mx_counter_inc(q->m_res_requeue);
        rate_limited(q, it);
        break;
    }
}

static void on_idle(uv_idle_t *h)
{
    wq_t *q = container_of(h, wq_t, idle);
    uint64_t start = uv_hrtime();
    unsigned n = 0;
    struct wq_item *it;
    while (!q->closing && (it = get(q)) != NULL) {
        uint64_t first = it->first_add_ns;
        it->first_add_ns = 0;
        uint64_t t0 = uv_hrtime();
        if (q->m_qdur)
            mx_histogram_observe(q->m_qdur, (double)(t0 - (first < t0 ? first : t0)) / 1e9);
        /* One handler at a time: it is never re-entered, not even by a
         * handler that runs the loop. */
        assert(q->current == NULL);
        q->current = it;
        q->current_start = t0;
        q->stats.processed++;
        log_reconcile_begin(q->name, it->key);
        wq_result res = q->handler(it->key, first, q->data);
        log_reconcile_end();
        uint64_t t1 = uv_hrtime();
        q->current = NULL;
        if (q->closing) {
            /* wq_shutdown ran inside the handler and left this item to us. */
            free(it);
            break;
        }
        if (q->m_wdur)
            mx_histogram_observe(q->m_wdur, (double)(t1 - t0) / 1e9);
        assert(item_find(q, it->key) == it);
        apply(q, it, res);
        done(q, it);
        if (++n >= q->max_per_tick || t1 - start >= q->max_tick_ns)
            break;
    }
    assert(q->closing || (q->n_ready == 0) == list_empty(&q->ready));
    if ((q->closing || q->n_ready == 0) && uv_is_active((uv_handle_t *)h))
        uv_idle_stop(h);
}

/* ---------------------------------------------------------------- metrics */

static double depth_fn(void *data)
{
    return (double)((wq_t *)data)->n_ready;
}

static double running_fn(void *data)
{
    wq_t *q = data;
    /* The handler runs on the loop thread, as does the scrape, so this is
     * only non-zero when a handler itself renders the metrics. */
    return q->current ? (double)(uv_hrtime() - q->current_start) / 1e9 : 0;
}

/* One handler at a time, on the loop thread: controller-runtime's
 * MaxConcurrentReconciles of 1, and a worker active while it runs. */
static double active_fn(void *data)
{
    return ((wq_t *)data)->current ? 1 : 0;
}

static double one_fn(void *data)
{
    (void)data;
    return 1;
}

static void metrics_remove(wq_t *q)
{
    /* The workqueue_* families carry the queue's name twice, as name and
     * controller (controller-runtime's labels, which its dashboards key
     * on); controller_runtime_reconcile_errors_total only as controller. */
    const char *const *lv = MX_LV(q->name, q->name);
    mx_family *fams[] = {q->f_depth,   q->f_adds,    q->f_qdur,      q->f_wdur,
                         q->f_retries, q->f_longest, q->f_unfinished};
    for (size_t i = 0; i < ARRAY_SIZE(fams); i++)
        if (fams[i])
            mx_child_remove(fams[i], lv);
    mx_family *by_controller[] = {q->f_rerr, q->f_active, q->f_max};
    for (size_t i = 0; i < ARRAY_SIZE(by_controller); i++)
        if (by_controller[i])
            mx_child_remove(by_controller[i], MX_LV(q->name));
    if (q->f_rtotal) {
        static const char *const results[] = {"success", "error", "requeue", "requeue_after"};
        for (size_t i = 0; i < ARRAY_SIZE(results); i++)
            mx_child_remove(q->f_rtotal, MX_LV(q->name, results[i]));
    }
}

/* mx_family_new that keeps the first error of a series of calls. */
static mx_family *family(mx_registry *r, mx_type type, const char *name, const char *help, const char *labels,
                         const double *bounds, size_t n_bounds, int *first_err)
{
    int e = 0;
    mx_family *f = mx_family_new(r, type, name, help, labels, bounds, n_bounds, &e);
    if (f == NULL && *first_err == 0)
        *first_err = e ? e : OP_EINVAL;
    return f;
}

static int metrics_setup(wq_t *q, mx_registry *r)
{
    /* controller-runtime's buckets: 10 ns to 1000 s, one per decade. */
    double b[12];
    mx_exponential_buckets(10e-9, 10, ARRAY_SIZE(b), b);
    int err = 0;
    q->f_depth = family(r, MX_GAUGE, "workqueue_depth", "Keys ready to be processed.", "name,controller",
                        NULL, 0, &err);
    if (q->f_depth == NULL)
        return err;
    /* The depth child is created first: if it exists, another live queue
     * of that name owns the children and we must not touch them. */
    int rc = mx_child_fn(q->f_depth, MX_LV(q->name, q->name), depth_fn, q);
    if (rc) {
        q->f_depth = NULL;
        return rc;
    }
    q->f_adds = family(r, MX_COUNTER, "workqueue_adds_total", "Adds handled by the queue (after dedupe).",
                       "name,controller", NULL, 0, &err);
    q->f_qdur = family(r, MX_HISTOGRAM, "workqueue_queue_duration_seconds",
                       "Time a key waited in the queue before it was processed, in seconds.",
                       "name,controller", b, ARRAY_SIZE(b), &err);
    q->f_wdur =
        family(r, MX_HISTOGRAM, "workqueue_work_duration_seconds",
               "Time spent processing one key, in seconds.", "name,controller", b, ARRAY_SIZE(b), &err);
    q->f_retries = family(r, MX_COUNTER, "workqueue_retries_total", "Rate-limited re-adds.",
                          "name,controller", NULL, 0, &err);
    q->f_longest = family(r, MX_GAUGE, "workqueue_longest_running_processor_seconds",
                          "How long the key being processed has been running, in seconds.", "name,controller",
                          NULL, 0, &err);
    q->f_unfinished =
        family(r, MX_GAUGE, "workqueue_unfinished_work_seconds",
               "Processing time of work still in progress, in seconds.", "name,controller", NULL, 0, &err);
    q->f_rtotal = family(r, MX_COUNTER, "controller_runtime_reconcile_total",
                         "Handler calls per controller and result.", "controller,result", NULL, 0, &err);
    q->f_rerr = family(r, MX_COUNTER, "controller_runtime_reconcile_errors_total",
                       "Handler calls that ended in an error.", "controller", NULL, 0, &err);
    q->f_active = family(r, MX_GAUGE, "controller_runtime_active_workers",
                         "Number of currently used workers per controller.", "controller", NULL, 0, &err);
    q->f_max = family(r, MX_GAUGE, "controller_runtime_max_concurrent_reconciles",
                      "Maximum number of concurrent reconciles per controller.", "controller", NULL, 0, &err);
    if (err)
        return err;
    q->m_adds = mx_counter_get(q->f_adds, MX_LV(q->name, q->name));
    q->m_qdur = mx_histogram_get(q->f_qdur, MX_LV(q->name, q->name));
    q->m_wdur = mx_histogram_get(q->f_wdur, MX_LV(q->name, q->name));
    q->m_retries = mx_counter_get(q->f_retries, MX_LV(q->name, q->name));
    q->m_res_ok = mx_counter_get(q->f_rtotal, MX_LV(q->name, "success"));
    q->m_res_err = mx_counter_get(q->f_rtotal, MX_LV(q->name, "error"));
    q->m_res_requeue = mx_counter_get(q->f_rtotal, MX_LV(q->name, "requeue"));
    q->m_res_after = mx_counter_get(q->f_rtotal, MX_LV(q->name, "requeue_after"));
    q->m_errors = mx_counter_get(q->f_rerr, MX_LV(q->name));
    rc = mx_child_fn(q->f_longest, MX_LV(q->name, q->name), running_fn, q);
    if (rc == 0)
        rc = mx_child_fn(q->f_unfinished, MX_LV(q->name, q->name), running_fn, q);
    if (rc == 0)
        rc = mx_child_fn(q->f_active, MX_LV(q->name), active_fn, q);
    if (rc == 0)
        rc = mx_child_fn(q->f_max, MX_LV(q->name), one_fn, q);
    return rc;
}

/* ---------------------------------------------------------------- public */

wq_t *wq_new(uv_loop_t *loop, const wq_opts *o, int *err)
{
    int dummy;
    if (err == NULL)
        err = &dummy;
    *err = 0;
    if (o == NULL || o->handler == NULL) {
        *err = OP_EINVAL;
        return NULL;
    }
    wq_t *q = xcalloc(1, sizeof(*q));
    q->name = xstrdup(o->name && *o->name ? o->name : "default");
    q->handler = o->handler;
    q->data = o->data;
    q->max_per_tick = o->max_per_tick ? o->max_per_tick : 64;
    q->max_tick_ns = o->max_tick_ns ? o->max_tick_ns : 10 * RL_NS_PER_MS;
    q->base_delay_ns = o->base_delay_ns ? o->base_delay_ns : 5 * RL_NS_PER_MS;
    q->max_delay_ns = o->max_delay_ns ? o->max_delay_ns : 1000 * RL_NS_PER_SEC;
    if (o->bucket_qps > 0) {
        q->use_bucket = 1;
        rl_bucket_init(&q->bucket, o->bucket_qps, o->bucket_burst > 0 ? o->bucket_burst : 100, uv_hrtime());
    }
    map_init(&q->items);
    list_init(&q->ready);

    if (o->metrics) {
        int rc = metrics_setup(q, o->metrics);
        if (rc) {
            log_error("Work queue metrics could not be registered. queue=%s err=%s", q->name,
                      err_str(rc));
            metrics_remove(q);
            free(q->name);
            free(q);
            *err = rc;
            return NULL;
        }
    }
    /* Neither init can fail on a valid loop, and both must succeed before
     * the queue exists, so that wq_shutdown always has two handles to close. */
    uv_idle_init(loop, &q->idle);
    hrtimer_init(loop, &q->timer);
    q->timer.data = q;
    return q;
}

int wq_add(wq_t *q, const char *key)
{
    assert(key != NULL);
    if (q->closing)
        return OP_ECANCELED;
    add_item(q, item_get(q, key), uv_hrtime());
    return 0;
}

int wq_add_after(wq_t *q, const char *key, uint64_t delay_ms)
{
    if (q->closing)
        return OP_ECANCELED;
    uint64_t ns = delay_ms > UINT64_MAX / RL_NS_PER_MS / 2 ? UINT64_MAX / 2 : delay_ms * RL_NS_PER_MS;
    add_after_ns(q, item_get(q, key), ns);
    return 0;
}

int wq_add_rate_limited(wq_t *q, const char *key)
{
    if (q->closing)
        return OP_ECANCELED;
    rate_limited(q, item_get(q, key));
    return 0;
}

void wq_forget(wq_t *q, const char *key)
{
    struct wq_item *it = item_find(q, key);
    if (it == NULL)
        return;
    it->failures = 0;
    item_maybe_free(q, it);
}

unsigned wq_num_requeues(const wq_t *q, const char *key)
{
    const struct wq_item *it = item_find(q, key);
    return it ? it->failures : 0;
}

size_t wq_len(const wq_t *q)
{
    return q->n_ready;
}

size_t wq_waiting(const wq_t *q)
{
    return q->heap_len;
}

int wq_deadline(const wq_t *q, const char *key, uint64_t *deadline_ns)
{
    const struct wq_item *it = item_find(q, key);
    if (it == NULL || it->heap_idx == NOT_WAITING)
        return OP_ENOTFOUND;
    *deadline_ns = it->deadline_ns;
    return 0;
}

int wq_is_processing(const wq_t *q, const char *key)
{
    const struct wq_item *it = item_find(q, key);
    return it && (it->flags & F_PROCESSING);
}

const wq_stats *wq_get_stats(const wq_t *q)
{
    return &q->stats;
}

static void closed_one(wq_t *q)
{
    assert(q->closing && q->pending_close > 0);
    if (--q->pending_close > 0)
        return;
    if (q->on_closed)
        q->on_closed(q->closed_data);
    free(q->name);
    free(q);
}

static void on_idle_closed(uv_handle_t *h)
{
    closed_one(h->data);
}

static void on_timer_closed(hrtimer *t)
{
    closed_one(t->data);
}

void wq_shutdown(wq_t *q, void (*on_closed)(void *data), void *data)
{
    if (q->closing)
        return;
    q->closing = 1;
    q->on_closed = on_closed;
    q->closed_data = data;
    metrics_remove(q);

    /* Drop every key. The one being processed (if this runs inside the
     * handler) stays allocated: its key is the handler's argument, and
     * on_idle frees it when the handler returns. */
    size_t it = 0;
    const char *k;
    void *v;
    while (map_next(&q->items, &it, &k, &v)) {
        struct wq_item *item = v;
        if (item != q->current)
            free(item);
    }
    map_free(&q->items);
    list_init(&q->ready);
    q->n_ready = 0;
    free(q->heap);
    q->heap = NULL;
    q->heap_len = q->heap_cap = 0;

    q->pending_close = 2;
    q->idle.data = q;
    uv_idle_stop(&q->idle);
    uv_close((uv_handle_t *)&q->idle, on_idle_closed);
    hrtimer_close(&q->timer, on_timer_closed);
}
