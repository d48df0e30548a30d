#include "core/metrics.h"

#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/err.h"
#include "core/list.h"
#include "core/log.h"
#include "core/map.h"
#include "core/mem.h"

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#define MX_HAVE_MALLINFO2 1

/* AddressSanitizer replaces malloc: glibc's arenas then hold nothing of ours. */
static int mx_sanitized(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return 1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    return 1;
#else
    return 0;
#endif
#else
    return 0;
#endif
}
#endif

#define MAX_HOOKS 16
/* Lookup keys up to this size are built on the stack (no allocation). */
#define KEY_STACK 512

struct scrape_hook {
    void (*fn)(void *data);
    void *data;
    void (*free_data)(void *data); /* set when the registry owns data */
};

struct mx_registry {
    list_node families; /* mx_family.link, registration order */
    map_t by_name;
    struct scrape_hook hooks[MAX_HOOKS];
    size_t n_hooks;
};

struct mx_child {
    list_node link; /* mx_family.children, creation order */
    char *key;      /* lookup key: the encoded label values */
    char *lstr;     /* rendered label pairs without braces: a="x",b="y" ("" without labels) */
    mx_value_fn fn; /* callback child when not NULL */
    void *fn_data;
    union {
        mx_counter c;
        mx_gauge g;
        mx_histogram h;
    } u;
};

struct mx_family {
    list_node link;
    mx_type type;
    char *name;
    char *help;
    char **labels;
    size_t n_labels;
    double *bounds; /* histograms: finite upper bounds */
    size_t n_bounds;
    char **le; /* rendered bounds, n_bounds + 1 with "+Inf" */
    map_t by_key;
    list_node children;
    size_t n_children;
    size_t max_children;
    struct mx_child *overflow; /* shared sink past max_children, never exported */
    int warned;
};

/* ---------------------------------------------------------------- helpers */

int mx_valid_metric_name(const char *s)
{
    if (s == NULL || *s == '\0')
        return 0;
    for (const char *p = s; *p; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
                 (p != s && c >= '0' && c <= '9');
        if (!ok)
            return 0;
    }
    return 1;
}

int mx_valid_label_name(const char *s)
{
    if (s == NULL || *s == '\0' || strncmp(s, "__", 2) == 0)
        return 0;
    for (const char *p = s; *p; p++) {
        char c = *p;
        int ok =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (p != s && c >= '0' && c <= '9');
        if (!ok)
            return 0;
    }
    return 1;
}

void mx__format_value(double v, char out[32])
{
    if (isnan(v)) {
        strcpy(out, "NaN");
    } else if (isinf(v)) {
        strcpy(out, v > 0 ? "+Inf" : "-Inf");
    } else if (v == 0) {
        strcpy(out, "0"); /* also for -0 */
    } else if (v == trunc(v) && fabs(v) < 1e15) {
        snprintf(out, 32, "%.0f", v);
    } else {
        /* The shortest of 15 or 17 significant digits that reads back as
         * the same double. */
        snprintf(out, 32, "%.15g", v);
        if (strtod(out, NULL) != v)
            snprintf(out, 32, "%.17g", v);
    }
}

void mx_exponential_buckets(double start, double factor, size_t n, double *out)
{
    double v = start;
    for (size_t i = 0; i < n; i++) {
        out[i] = v;
        v *= factor;
    }
}

static void free_strv(char **v, size_t n)
{
    if (v == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Split "a,b,c" into validated label names. */
static int parse_labels(const char *labels, mx_type type, const char *name, char ***out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    if (labels == NULL || *labels == '\0')
        return 0;
    size_t n = 1;
    for (const char *p = labels; *p; p++)
        n += *p == ',';
    char **v = xcalloc(n, sizeof(char *));
    const char *p = labels;
    for (size_t i = 0; i < n; i++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        v[i] = xstrndup(p, len);
        p = comma ? comma + 1 : p + len;
        int bad = !mx_valid_label_name(v[i]) || (type == MX_HISTOGRAM && strcmp(v[i], "le") == 0);
        for (size_t j = 0; j < i && !bad; j++)
            bad = strcmp(v[j], v[i]) == 0;
        if (bad) {
            log_error("Invalid or duplicate label name. metric=%s label=\"%s\"", name, v[i]);
            free_strv(v, i + 1);
            return OP_EINVAL;
        }
    }
    *out = v;
    *n_out = n;
    return 0;
}

static int same_shape(const mx_family *f, mx_type type, char **labels, size_t n_labels, const double *bounds,
                      size_t n_bounds)
{
    if (f->type != type || f->n_labels != n_labels)
        return 0;
    for (size_t i = 0; i < n_labels; i++)
        if (strcmp(f->labels[i], labels[i]) != 0)
            return 0;
    if (type == MX_HISTOGRAM) {
        if (f->n_bounds != n_bounds)
            return 0;
        for (size_t i = 0; i < n_bounds; i++)
            if (f->bounds[i] != bounds[i])
                return 0;
    }
    return 1;
}

/* Append s to b with the escapes of the exposition format: backslash and
 * newline always, the double quote only inside label values. */
static int put_escaped(buf_t *b, const char *s, int quote)
{
    const char *run = s;
    int rc = 0;
    for (const char *p = s; *p && rc == 0; p++) {
        const char *esc = NULL;
        if (*p == '\\')
            esc = "\\\\";
        else if (*p == '\n')
            esc = "\\n";
        else if (*p == '"' && quote)
            esc = "\\\"";
        if (esc) {
            rc = buf_append(b, run, (size_t)(p - run));
            if (rc == 0)
                rc = buf_puts(b, esc);
            run = p + 1;
        }
    }
    if (rc == 0)
        rc = buf_puts(b, run);
    return rc;
}

/* ----------------------------------------------------------- child keys */

/* The lookup key encodes each value as <decimal length>:<bytes>, so no two
 * different tuples can produce the same key whatever bytes they contain.
 * Returns the key length, or (size_t)-1 when a value is NULL. The key is
 * built in stack (size stack_len) when it fits, else in *heap. */
static size_t make_key(const mx_family *f, const char *const *values, char *stack, size_t stack_len,
                       char **heap, char **key)
{
    size_t need = 1;
    for (size_t i = 0; i < f->n_labels; i++) {
        if (values == NULL || values[i] == NULL)
            return (size_t)-1;
        need += strlen(values[i]) + 21;
    }
    char *k = stack;
    *heap = NULL;
    if (need > stack_len)
        k = *heap = xmalloc(need);
    size_t len = 0;
    for (size_t i = 0; i < f->n_labels; i++) {
        size_t vl = strlen(values[i]);
        len += (size_t)snprintf(k + len, need - len, "%zu:", vl);
        memcpy(k + len, values[i], vl);
        len += vl;
    }
    assert(len < need);
    k[len] = '\0';
    *key = k;
    return len;
}

static struct mx_child *child_alloc(mx_family *f, const char *key, const char *const *values)
{
    struct mx_child *c = xcalloc(1, sizeof(*c));
    list_init(&c->link);
    c->key = xstrdup(key ? key : "");
    if (f->type == MX_HISTOGRAM) {
        c->u.h.bounds = f->bounds;
        c->u.h.n_bounds = (uint32_t)f->n_bounds;
        c->u.h.buckets = xcalloc(f->n_bounds + 1, sizeof(uint64_t));
    }
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    int rc = 0;
    for (size_t i = 0; values && i < f->n_labels && rc == 0; i++) {
        rc = buf_printf(&b, "%s%s=\"", i ? "," : "", f->labels[i]);
        if (rc == 0)
            rc = put_escaped(&b, values[i], 1);
        if (rc == 0)
            rc = buf_putc(&b, '"');
    }
    (void)rc; /* an unlimited buf cannot fail (allocation aborts) */
    c->lstr = b.data ? buf_detach(&b, NULL) : xstrdup("");
    return c;
}

static void child_free(struct mx_child *c, mx_type type)
{
    if (c == NULL)
        return;
    free(c->key);
    free(c->lstr);
    if (type == MX_HISTOGRAM)
        free(c->u.h.buckets);
    free(c);
}

/* Find or create. create: 0 = find only, 1 = create when missing. Returns
 * NULL when not found (create == 0), or the overflow child past the bound
 * (*overflow set). */
static struct mx_child *child_lookup(mx_family *f, const char *const *values, int create, int *overflow)
{
    char stack[KEY_STACK], *heap, *key;
    if (overflow)
        *overflow = 0;
    size_t len = make_key(f, values, stack, sizeof(stack), &heap, &key);
    if (len == (size_t)-1) {
        log_error("Missing label value. metric=%s labels=%zu", f->name, f->n_labels);
        return NULL;
    }
    struct mx_child *c = map_getn(&f->by_key, key, len);
    if (c || !create) {
        free(heap);
        return c;
    }
    if (f->n_children >= f->max_children) {
        free(heap);
        if (!f->warned) {
            log_warn("Metric family reached its bound on label sets; further ones are not exported. "
                     "metric=%s max=%zu",
                     f->name, f->max_children);
            f->warned = 1;
        }
        if (f->overflow == NULL)
            f->overflow = child_alloc(f, NULL, NULL);
        if (overflow)
            *overflow = 1;
        return f->overflow;
    }
    c = child_alloc(f, key, values);
    free(heap);
    map_put(&f->by_key, c->key, c);
    list_insert_tail(&f->children, &c->link);
    f->n_children++;
    /* Every exported child is both in the key map and on the list. */
    assert(f->n_children == f->by_key.count && f->n_children <= f->max_children);
    return c;
}

/* ---------------------------------------------------------------- registry */

mx_registry *mx_registry_new(void)
{
    mx_registry *r = xcalloc(1, sizeof(*r));
    list_init(&r->families);
    map_init(&r->by_name);
    return r;
}

static void family_free(mx_family *f)
{
    list_node *pos, *tmp;
    list_foreach_safe(pos, tmp, &f->children)
    {
        child_free(list_entry(pos, struct mx_child, link), f->type);
    }
    child_free(f->overflow, f->type);
    map_free(&f->by_key);
    free_strv(f->labels, f->n_labels);
    free_strv(f->le, f->le ? f->n_bounds + 1 : 0);
    free(f->bounds);
    free(f->name);
    free(f->help);
    free(f);
}

void mx_registry_free(mx_registry *r)
{
    if (r == NULL)
        return;
    list_node *pos, *tmp;
    list_foreach_safe(pos, tmp, &r->families)
    {
        family_free(list_entry(pos, mx_family, link));
    }
    for (size_t i = 0; i < r->n_hooks; i++)
        if (r->hooks[i].free_data)
            r->hooks[i].free_data(r->hooks[i].data);
    map_free(&r->by_name);
    free(r);
}

static int add_hook(mx_registry *r, void (*fn)(void *data), void *data, void (*free_data)(void *data))
{
    if (r->n_hooks == MAX_HOOKS)
        return OP_ETOOBIG;
    r->hooks[r->n_hooks].fn = fn;
    r->hooks[r->n_hooks].data = data;
    r->hooks[r->n_hooks].free_data = free_data;
    r->n_hooks++;
    return 0;
}

int mx_registry_on_scrape(mx_registry *r, void (*fn)(void *data), void *data)
{
    return add_hook(r, fn, data, NULL);
}

/* ---------------------------------------------------------------- families */

static const char *type_name(mx_type t)
{
    switch (t) {
    case MX_COUNTER:
        return "counter";
    case MX_GAUGE:
        return "gauge";
    case MX_HISTOGRAM:
        return "histogram";
    }
    return "untyped";
}

mx_family *mx_family_new(mx_registry *r, mx_type type, const char *name, const char *help, const char *labels,
                         const double *bounds, size_t n_bounds, int *err)
{
    int dummy;
    if (err == NULL)
        err = &dummy;
    *err = 0;
    if (type != MX_COUNTER && type != MX_GAUGE && type != MX_HISTOGRAM) {
        *err = OP_EINVAL;
        return NULL;
    }
    if (!mx_valid_metric_name(name)) {
        log_error("Invalid metric name. name=\"%s\"", name ? name : "(null)");
        *err = OP_EINVAL;
        return NULL;
    }
    if (type == MX_HISTOGRAM) {
        if (n_bounds > 0 && isinf(bounds[n_bounds - 1]) && bounds[n_bounds - 1] > 0)
            n_bounds--; /* +Inf is implied */
        for (size_t i = 0; i < n_bounds; i++) {
            if (!isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
                log_error("Histogram buckets must be finite and strictly ascending. metric=%s", name);
                *err = OP_EINVAL;
                return NULL;
            }
        }
    } else {
        bounds = NULL;
        n_bounds = 0;
    }
    char **lv;
    size_t nl;
    int rc = parse_labels(labels, type, name, &lv, &nl);
    if (rc) {
        *err = rc;
        return NULL;
    }

    mx_family *f = map_get(&r->by_name, name);
    if (f) {
        int same = same_shape(f, type, lv, nl, bounds, n_bounds);
        free_strv(lv, nl);
        if (same)
            return f;
        log_error("Metric already registered with another type, labels or buckets. metric=%s", name);
        *err = OP_EEXISTS;
        return NULL;
    }

    f = xcalloc(1, sizeof(*f));
    f->type = type;
    f->name = xstrdup(name);
    f->help = xstrdup(help ? help : "");
    f->labels = lv;
    f->n_labels = nl;
    f->max_children = MX_DEFAULT_MAX_CHILDREN;
    map_init(&f->by_key);
    list_init(&f->children);
    if (type == MX_HISTOGRAM) {
        f->n_bounds = n_bounds;
        f->bounds = xmalloc((n_bounds ? n_bounds : 1) * sizeof(double));
        if (n_bounds)
            memcpy(f->bounds, bounds, n_bounds * sizeof(double));
        f->le = xcalloc(n_bounds + 1, sizeof(char *));
        for (size_t i = 0; i <= n_bounds; i++) {
            char v[32];
            mx__format_value(i < n_bounds ? f->bounds[i] : INFINITY, v);
            f->le[i] = xstrdup(v);
        }
    }
    list_insert_tail(&r->families, &f->link);
    map_put(&r->by_name, f->name, f);
    /* The single child of an unlabeled family always exists, so that a
     * metric that never moved still exports its zero. */
    if (nl == 0)
        (void)child_lookup(f, NULL, 1, NULL);
    return f;
}

void mx_family_set_max_children(mx_family *f, size_t max)
{
    f->max_children = max;
}

size_t mx_family_children(const mx_family *f)
{
    return f->n_children;
}

mx_type mx_family_type(const mx_family *f)
{
    return f->type;
}

/* ---------------------------------------------------------------- children */

mx_counter *mx_counter_get(mx_family *f, const char *const *values)
{
    if (f == NULL || f->type != MX_COUNTER)
        return NULL;
    struct mx_child *c = child_lookup(f, values, 1, NULL);
    return c ? &c->u.c : NULL;
}

mx_gauge *mx_gauge_get(mx_family *f, const char *const *values)
{
    if (f == NULL || f->type != MX_GAUGE)
        return NULL;
    struct mx_child *c = child_lookup(f, values, 1, NULL);
    return c ? &c->u.g : NULL;
}

mx_histogram *mx_histogram_get(mx_family *f, const char *const *values)
{
    if (f == NULL || f->type != MX_HISTOGRAM)
        return NULL;
    struct mx_child *c = child_lookup(f, values, 1, NULL);
    return c ? &c->u.h : NULL;
}

int mx_child_fn(mx_family *f, const char *const *values, mx_value_fn fn, void *data)
{
    if (f == NULL || f->type == MX_HISTOGRAM || fn == NULL)
        return OP_EINVAL;
    if (f->n_labels == 0) {
        /* The single child exists from the start; it may become a callback
         * child once. */
        struct mx_child *c = list_entry(list_first(&f->children), struct mx_child, link);
        if (c->fn)
            return OP_EEXISTS;
        c->fn = fn;
        c->fn_data = data;
        return 0;
    }
    if (child_lookup(f, values, 0, NULL))
        return OP_EEXISTS;
    int overflow;
    struct mx_child *c = child_lookup(f, values, 1, &overflow);
    if (c == NULL)
        return OP_EINVAL;
    if (overflow)
        return OP_ETOOBIG;
    c->fn = fn;
    c->fn_data = data;
    return 0;
}

int mx_child_remove(mx_family *f, const char *const *values)
{
    if (f == NULL)
        return 0;
    struct mx_child *c = child_lookup(f, values, 0, NULL);
    if (c == NULL)
        return 0;
    assert(c != f->overflow && f->n_children > 0);
    map_del(&f->by_key, c->key);
    list_remove(&c->link);
    f->n_children--;
    assert(f->n_children == f->by_key.count);
    child_free(c, f->type);
    if (f->n_labels == 0)
        (void)child_lookup(f, NULL, 1, NULL); /* keep the single child's invariant */
    return 1;
}

/* ------------------------------------------------------- unlabeled helpers */

mx_counter *mx_counter_new(mx_registry *r, const char *name, const char *help, int *err)
{
    return mx_counter_get(mx_family_new(r, MX_COUNTER, name, help, NULL, NULL, 0, err), NULL);
}

mx_gauge *mx_gauge_new(mx_registry *r, const char *name, const char *help, int *err)
{
    return mx_gauge_get(mx_family_new(r, MX_GAUGE, name, help, NULL, NULL, 0, err), NULL);
}

mx_histogram *mx_histogram_new(mx_registry *r, const char *name, const char *help, const double *bounds,
                               size_t n_bounds, int *err)
{
    return mx_histogram_get(mx_family_new(r, MX_HISTOGRAM, name, help, NULL, bounds, n_bounds, err), NULL);
}

int mx_gauge_fn_new(mx_registry *r, const char *name, const char *help, mx_value_fn fn, void *data)
{
    int err;
    mx_family *f = mx_family_new(r, MX_GAUGE, name, help, NULL, NULL, 0, &err);
    if (f == NULL)
        return err;
    return mx_child_fn(f, NULL, fn, data);
}

/* ---------------------------------------------------------------- render */

/* name{lstr[,extra]} value\n */
static int put_sample(buf_t *b, const char *name, const char *suffix, const char *lstr, const char *le,
                      double v)
{
    char num[32];
    mx__format_value(v, num);
    int rc = buf_puts(b, name);
    if (rc == 0 && suffix)
        rc = buf_puts(b, suffix);
    if (rc == 0 && (*lstr || le)) {
        rc = buf_putc(b, '{');
        if (rc == 0)
            rc = buf_puts(b, lstr);
        if (rc == 0 && le)
            rc = buf_printf(b, "%sle=\"%s\"", *lstr ? "," : "", le);
        if (rc == 0)
            rc = buf_putc(b, '}');
    }
    if (rc == 0)
        rc = buf_putc(b, ' ');
    if (rc == 0)
        rc = buf_puts(b, num);
    if (rc == 0)
        rc = buf_putc(b, '\n');
    return rc;
}

static int render_family(const mx_family *f, buf_t *b)
{
    int rc = buf_printf(b, "# HELP %s ", f->name);
    if (rc == 0)
        rc = put_escaped(b, f->help, 0);
    if (rc == 0)
        rc = buf_printf(b, "\n# TYPE %s %s\n", f->name, type_name(f->type));
    const list_node *pos;
    list_foreach(pos, &f->children)
    {
        if (rc)
            break;
        const struct mx_child *c = list_entry(pos, const struct mx_child, link);
        if (f->type == MX_HISTOGRAM) {
            uint64_t cum = 0;
            for (size_t i = 0; i <= f->n_bounds && rc == 0; i++) {
                cum += c->u.h.buckets[i];
                rc = put_sample(b, f->name, "_bucket", c->lstr, f->le[i], (double)cum);
            }
            if (rc == 0)
                rc = put_sample(b, f->name, "_sum", c->lstr, NULL, c->u.h.sum);
            if (rc == 0)
                rc = put_sample(b, f->name, "_count", c->lstr, NULL, (double)c->u.h.count);
        } else {
            double v = c->fn ? c->fn(c->fn_data) : c->u.g.value;
            rc = put_sample(b, f->name, NULL, c->lstr, NULL, v);
        }
    }
    return rc;
}

int mx_render(mx_registry *r, buf_t *out)
{
    for (size_t i = 0; i < r->n_hooks; i++)
        r->hooks[i].fn(r->hooks[i].data);
    const list_node *pos;
    list_foreach(pos, &r->families)
    {
        const mx_family *f = list_entry(pos, const mx_family, link);
        if (f->n_children == 0)
            continue;
        int rc = render_family(f, out);
        if (rc)
            return rc;
    }
    return 0;
}

/* --------------------------------------------------- process collector */

struct proc_collector {
    mx_counter *cpu;
    mx_gauge *rss;
    mx_gauge *vsize;
    mx_gauge *start;
    mx_gauge *open_fds;
    mx_gauge *max_fds;
    mx_gauge *heap_used; /* NULL without glibc's mallinfo2 */
    mx_gauge *heap_free;
    long ticks;
    long page_size;
    double boot_time; /* seconds since the epoch, from /proc/stat btime */
};

int mx__proc_parse_stat(const char *text, long ticks_per_sec, mx__proc_stat *out)
{
    /* The command name (field 2) is in parentheses and may itself contain
     * spaces and parentheses, so fields are counted from the last ')'. We
     * need 14 utime, 15 stime, 22 starttime, 23 vsize and 24 rss. */
    const char *p = strrchr(text, ')');
    if (p == NULL || ticks_per_sec <= 0)
        return OP_EPARSE;
    p++;
    unsigned long long f[25] = {0};
    int field;
    for (field = 3; field <= 24; field++) {
        while (*p == ' ')
            p++;
        if (*p == '\0' || *p == '\n')
            return OP_EPARSE;
        const char *start = p;
        while (*p && *p != ' ' && *p != '\n')
            p++;
        if (field < 14)
            continue; /* state, ppid, ... are not needed (and field 3 is a letter) */
        /* Fields a kernel may print as negative (rss on odd kernels) read as 0. */
        if (*start == '-')
            continue;
        char *end;
        f[field] = strtoull(start, &end, 10);
        if (end != p)
            return OP_EPARSE;
    }
    out->cpu_seconds = (double)(f[14] + f[15]) / (double)ticks_per_sec;
    out->start_ticks = (double)f[22];
    out->vsize = (double)f[23];
    out->rss_pages = (double)f[24];
    return 0;
}

static int read_small(const char *path, char *out, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return OP_ERRNO(errno);
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t r = read(fd, out + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    out[n] = '\0';
    return 0;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    /* The directory stream's own descriptor was listed too. */
    return n > 0 ? n - 1 : 0;
}

/* The boot time (seconds since the epoch) from the "btime" line of
 * /proc/stat. The file is read line by line: on machines with many CPUs and
 * interrupts it is tens of kilobytes long before that line. */
static int boot_time(double *out)
{
    FILE *f = fopen("/proc/stat", "re");
    if (f == NULL)
        return OP_ERRNO(errno);
    char *line = NULL;
    size_t cap = 0;
    int rc = OP_EPARSE;
    while (getline(&line, &cap, f) > 0) {
        if (strncmp(line, "btime ", 6) == 0) {
            *out = strtod(line + 6, NULL);
            rc = *out > 0 ? 0 : OP_EPARSE;
            break;
        }
    }
    free(line);
    fclose(f);
    return rc;
}

static void proc_refresh(void *data)
{
    struct proc_collector *pc = data;
    char text[4096];
    mx__proc_stat st;
    if (read_small("/proc/self/stat", text, sizeof(text)) == 0 &&
        mx__proc_parse_stat(text, pc->ticks, &st) == 0) {
        /* A counter is only ever moved forward. */
        if (st.cpu_seconds > pc->cpu->value)
            pc->cpu->value = st.cpu_seconds;
        mx_gauge_set(pc->rss, st.rss_pages * (double)pc->page_size);
        mx_gauge_set(pc->vsize, st.vsize);
        mx_gauge_set(pc->start, pc->boot_time + st.start_ticks / (double)pc->ticks);
    }
    int fds = count_fds();
    if (fds >= 0)
        mx_gauge_set(pc->open_fds, fds);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        mx_gauge_set(pc->max_fds, rl.rlim_cur == RLIM_INFINITY ? INFINITY : (double)rl.rlim_cur);
#if defined(MX_HAVE_MALLINFO2)
    if (pc->heap_used && mx_sanitized()) {
        mx_gauge_set(pc->heap_used, NAN);
        mx_gauge_set(pc->heap_free, NAN);
    } else if (pc->heap_used) {
        /* A walk of the arenas under their locks: cheap next to a scrape's
         * rendering, and only done on a scrape. */
        struct mallinfo2 mi = mallinfo2();
        mx_gauge_set(pc->heap_used, (double)(mi.uordblks + mi.hblkhd));
        mx_gauge_set(pc->heap_free, (double)mi.fordblks);
    }
#endif
}

int mx_process_collector(mx_registry *r)
{
    if (map_get(&r->by_name, "process_cpu_seconds_total"))
        return OP_EEXISTS;
    double btime = 0;
    int rc = boot_time(&btime);
    if (rc)
        return rc;

    int err = 0; /* the code of the last call; only read when one failed */
    struct proc_collector pc = {0};
    pc.ticks = sysconf(_SC_CLK_TCK);
    pc.page_size = sysconf(_SC_PAGESIZE);
    pc.boot_time = btime;
    if (pc.ticks <= 0 || pc.page_size <= 0)
        return OP_EINVAL;
    pc.cpu = mx_counter_new(r, "process_cpu_seconds_total",
                            "User plus system CPU time used by the process, in seconds.", &err);
    pc.rss =
        mx_gauge_new(r, "process_resident_memory_bytes", "Resident set size of the process, in bytes.", &err);
    pc.vsize = mx_gauge_new(r, "process_virtual_memory_bytes",
                            "Virtual address space size of the process, in bytes.", &err);
    pc.start = mx_gauge_new(r, "process_start_time_seconds",
                            "When the process started, in seconds since the Unix epoch.", &err);
    pc.open_fds = mx_gauge_new(r, "process_open_fds", "File descriptors the process holds open.", &err);
    pc.max_fds =
        mx_gauge_new(r, "process_max_fds", "Soft limit on the number of open file descriptors.", &err);
    if (!pc.cpu || !pc.rss || !pc.vsize || !pc.start || !pc.open_fds || !pc.max_fds)
        return err ? err : OP_EEXISTS;
#if defined(MX_HAVE_MALLINFO2)
    /* RSS keeps every page the allocator ever touched; these say how much
     * of it is live and how much is free inside the heap (fragmentation),
     * which is what a memory figure per pod needs. Sanitizer builds have
     * their own allocator, which glibc's statistics do not see: NaN there. */
    {
        pc.heap_used = mx_gauge_new(r, "slurmop_heap_inuse_bytes",
                                    "Bytes of heap allocated and not yet freed (glibc mallinfo2: "
                                    "uordblks plus hblkhd).",
                                    &err);
        pc.heap_free = mx_gauge_new(r, "slurmop_heap_free_bytes",
                                    "Bytes free inside the heap's arenas (glibc mallinfo2 fordblks): held "
                                    "by the process, in RSS when touched, but not in use.",
                                    &err);
        if (!pc.heap_used || !pc.heap_free)
            return err ? err : OP_EEXISTS;
    }
#endif

    /* The registry owns the collector's state and frees it with itself. */
    struct proc_collector *heap = xmalloc(sizeof(*heap));
    *heap = pc;
    rc = add_hook(r, proc_refresh, heap, free);
    if (rc) {
        free(heap);
        return rc;
    }
    return 0;
}
