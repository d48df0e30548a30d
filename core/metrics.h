/* metrics: a small Prometheus registry and text exposition (format 0.0.4).
 *
 * A registry holds families; a family has a type (counter, gauge,
 * histogram), a name, a help text and a fixed list of label names, and owns
 * its children, one per distinct tuple of label values. A family without
 * labels has exactly one child, created with it.
 *
 * Hot path. A child is a small public struct; code that updates a metric
 * looks the child up once (mx_counter_get & co.) and keeps the pointer, so
 * an update is a plain add (the inline helpers below). Looking a child up
 * by label values does not allocate once the child exists (label values
 * longer than a few hundred bytes in total are the exception). The process
 * has one thread, so nothing here is atomic; never update metrics from a
 * uv threadpool work callback.
 *
 * Children are never freed behind the caller's back; only
 * mx_child_remove() and mx_registry_free() free them. Each family accepts
 * a bounded number of children (default MX_DEFAULT_MAX_CHILDREN): past that
 * the lookup returns a shared "overflow" child that is never exported, and
 * a warning is logged once, so a label with unbounded values (a pod name
 * by mistake) cannot grow memory without limit.
 *
 * Names are validated: metric names match [a-zA-Z_:][a-zA-Z0-9_:]*, label
 * names [a-zA-Z_][a-zA-Z0-9_]* and must not start with "__"; histograms may
 * not use the label "le". Label values are exported as given (escaped), so
 * they should be UTF-8.
 */
#ifndef OP_METRICS_H
#define OP_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

#define MX_DEFAULT_MAX_CHILDREN 10000

typedef enum mx_type { MX_COUNTER = 0, MX_GAUGE, MX_HISTOGRAM } mx_type;

typedef struct mx_registry mx_registry;
typedef struct mx_family mx_family;

/** A counter child. value is readable; change it only with mx_counter_*. */
typedef struct mx_counter {
    double value;
} mx_counter;

/** A gauge child. value is readable and may be written directly. */
typedef struct mx_gauge {
    double value;
} mx_gauge;

/** A histogram child. Read-only for users; update with mx_histogram_observe. */
typedef struct mx_histogram {
    const double *bounds; /* the family's upper bounds, ascending, +Inf implied */
    uint32_t n_bounds;
    uint64_t *buckets; /* n_bounds + 1 counts, NOT cumulative; the last is (bounds[n-1], +Inf) */
    uint64_t count;
    double sum;
} mx_histogram;

/** Value of a callback child, computed at scrape time. */
typedef double (*mx_value_fn)(void *data);

/** Build the label-values argument in place: MX_LV("queue-a", "200"). */
#define MX_LV(...) ((const char *const[]){__VA_ARGS__})

/* ---------------------------------------------------------------- registry */

mx_registry *mx_registry_new(void);
/** Free the registry, its families and every child (pointers to children
 *  become invalid). NULL is accepted. */
void mx_registry_free(mx_registry *r);

/** Register fn(data) to run at the start of every mx_render, before any
 *  value is read (the process collector refreshes its gauges this way). At
 *  most 16 hooks; OP_ETOOBIG past that. */
int mx_registry_on_scrape(mx_registry *r, void (*fn)(void *data), void *data);

/** Append the exposition text of every family (in registration order, each
 *  family's children in creation order; families without children are left
 *  out) to out. OP_ETOOBIG when out's maximum is reached; out then holds a
 *  truncated text that must not be served. */
int mx_render(mx_registry *r, buf_t *out);

/* ---------------------------------------------------------------- families */

/** Create a family, or return the existing one of that name when its type,
 *  label names and buckets are the same (so that, e.g., every work queue can
 *  ask for "workqueue_depth"). labels is a comma-separated list of label
 *  names ("name" or "namespace,nodeset"); NULL or "" for none. For
 *  histograms, bounds are the n_bounds finite upper bounds, strictly
 *  ascending (copied; +Inf is implied and may also be given last); ignored
 *  for the other types. Returns NULL with *err (if err is not NULL) set to
 *  OP_EINVAL for a bad name, label or bucket list, or OP_EEXISTS for a name
 *  already registered differently; the reason is logged. */
mx_family *mx_family_new(mx_registry *r, mx_type type, const char *name, const char *help, const char *labels,
                         const double *bounds, size_t n_bounds, int *err);

/** Change the bound on the number of children (default MX_DEFAULT_MAX_CHILDREN). */
void mx_family_set_max_children(mx_family *f, size_t max);
/** Number of exported children. */
size_t mx_family_children(const mx_family *f);
mx_type mx_family_type(const mx_family *f);

/** n bounds start, start*factor, ... (client-go's ExponentialBuckets); out
 *  must hold n values. */
void mx_exponential_buckets(double start, double factor, size_t n, double *out);

/* ---------------------------------------------------------------- children */

/** The child of a counter family for these label values (one per label
 *  name, in order; NULL for a family without labels), created on first use.
 *  Never NULL for a counter family (see the overflow child above); NULL if
 *  f is not a counter family. */
mx_counter *mx_counter_get(mx_family *f, const char *const *values);
mx_gauge *mx_gauge_get(mx_family *f, const char *const *values);
mx_histogram *mx_histogram_get(mx_family *f, const char *const *values);

/** Make the child for these values a callback child of a counter or gauge
 *  family: fn(data) is called at scrape time and its result exported.
 *  OP_EEXISTS if the child already exists (remove it first), OP_EINVAL for a
 *  histogram family, OP_ETOOBIG past the family's child bound. */
int mx_child_fn(mx_family *f, const char *const *values, mx_value_fn fn, void *data);

/** Remove (and free) the child for these values, if any; a pointer to it
 *  must not be used afterwards. Returns 1 when a child was removed. */
int mx_child_remove(mx_family *f, const char *const *values);

/* ------------------------------------------------------- unlabeled helpers */

/** Create (or reuse) an unlabeled family and return its single child; NULL
 *  with *err set as mx_family_new. */
mx_counter *mx_counter_new(mx_registry *r, const char *name, const char *help, int *err);
mx_gauge *mx_gauge_new(mx_registry *r, const char *name, const char *help, int *err);
mx_histogram *mx_histogram_new(mx_registry *r, const char *name, const char *help, const double *bounds,
                               size_t n_bounds, int *err);
/** An unlabeled callback gauge (e.g. a queue depth read at scrape time). */
int mx_gauge_fn_new(mx_registry *r, const char *name, const char *help, mx_value_fn fn, void *data);

/* ------------------------------------------------------------- hot path */

static inline void mx_counter_inc(mx_counter *c)
{
    c->value += 1;
}

/** Counters only go up: a negative v is ignored. */
static inline void mx_counter_add(mx_counter *c, double v)
{
    if (v > 0)
        c->value += v;
}

static inline void mx_gauge_set(mx_gauge *g, double v)
{
    g->value = v;
}

static inline void mx_gauge_add(mx_gauge *g, double v)
{
    g->value += v;
}

static inline void mx_histogram_observe(mx_histogram *h, double v)
{
    uint32_t i = 0;
    /* Buckets are "less than or equal"; a handful of bounds makes a linear
     * scan cheaper than a binary search. */
    while (i < h->n_bounds && v > h->bounds[i])
        i++;
    h->buckets[i]++;
    h->count++;
    h->sum += v;
}

/* --------------------------------------------------- process collector */

/** Register process_cpu_seconds_total, process_resident_memory_bytes,
 *  process_virtual_memory_bytes, process_start_time_seconds,
 *  process_open_fds and process_max_fds, refreshed from /proc/self at every
 *  scrape. 0 or a negative code (OP_EEXISTS when already registered, or
 *  an errno code when /proc cannot be read). */
int mx_process_collector(mx_registry *r);

/* ------------------------------------------------ validation and internals */

/** 1 when s is a valid metric name / label name. */
int mx_valid_metric_name(const char *s);
int mx_valid_label_name(const char *s);

/** What the process collector reads from /proc/self/stat (exposed for tests). */
typedef struct mx__proc_stat {
    double cpu_seconds; /* utime + stime */
    double start_ticks; /* starttime, clock ticks after boot */
    double vsize;       /* bytes */
    double rss_pages;
} mx__proc_stat;
/** Parse the text of /proc/<pid>/stat. 0 or OP_EPARSE. */
int mx__proc_parse_stat(const char *text, long ticks_per_sec, mx__proc_stat *out);
/** Format a sample value as the exposition does ("+Inf", "0.25", "42"). */
void mx__format_value(double v, char out[32]);

#endif
