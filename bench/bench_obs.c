/* bench_obs: the harness's own view of the pods (and of NodeSet "gpu"),
 * from a LIST and a WATCH like any client: the arrival time of every pod
 * creation, Ready transition and deletion. A watch that ends is resumed
 * from its last resourceVersion; a 410 relists and diffs. Everything here
 * runs in callbacks: nothing waits. */
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "core/err.h"
#include "core/json.h"
#include "core/map.h"

typedef struct opod {
    int ready;
    int terminating;
    unsigned gen; /* relist generation that last saw it */
    char name[];
} opod;

typedef struct tstamp {
    uint64_t t;
    char name[];
} tstamp;

/* Every termination start and creation of one pod name, in arrival order
 * (so by time), while the history is on: a churn that fails a pod name
 * again and again matches each failure with the first action after it. */
typedef struct ohist {
    size_t n, cap;
    uint64_t *t;
    unsigned char *kind;
    char name[];
} ohist;

struct owatch;
typedef void (*item_fn)(bx_obs *o, int type, const cJSON *obj, int listing);

typedef struct owatch {
    bx_obs *o;
    const kube_res *res;
    const char *field_selector;
    const char *label_selector;   /* as the watch options take it */
    const char *label_selector_q; /* ... and escaped for a LIST query */
    item_fn on_item;
    kube_watch *w;
    kube_request *list;
    char rv[32];
    int relist; /* the next start lists first */
    int watching;
    uv_timer_t retry;
} owatch;

struct bx_obs {
    bx_ctx *x;
    bx_api *api;
    char *ns;
    map_t pods;       /* name -> opod */
    map_t deleted_at; /* name -> tstamp (last deletion) */
    map_t added_at;   /* name -> tstamp (last ADDED after start) */
    map_t term_at;    /* name -> tstamp (deletionTimestamp first seen, or the deletion) */
    map_t hist;       /* name -> ohist, while history is on */
    int history;
    owatch pw, nw;
    unsigned gen;
    int initial; /* the first list is the baseline: nothing counted */
    int stopping;
    int closed;
    bx_obs_counts c;
    uint64_t *t[3];
    size_t n[3], cap[3];
    int target;
    uint64_t ns_ready_at;
};

static void ow_start(owatch *w);

static void push_time(bx_obs *o, int kind, uint64_t t)
{
    if (o->n[kind] == o->cap[kind]) {
        o->cap[kind] = o->cap[kind] ? o->cap[kind] * 2 : 1024;
        o->t[kind] = xrealloc(o->t[kind], o->cap[kind] * sizeof(uint64_t));
    }
    o->t[kind][o->n[kind]++] = t;
}

static void ohist_free(void *v)
{
    ohist *h = v;
    free(h->t);
    free(h->kind);
    free(h);
}

static const map_type ohist_type = {.val_free = ohist_free, .key_free = NULL};

static void hist_push(bx_obs *o, const char *name, int kind, uint64_t t)
{
    if (!o->history)
        return;
    ohist *h = map_get(&o->hist, name);
    if (h == NULL) {
        size_t len = strlen(name);
        h = xcalloc(1, sizeof(*h) + len + 1);
        memcpy(h->name, name, len + 1);
        map_put(&o->hist, h->name, h);
    }
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 8;
        h->t = xrealloc(h->t, h->cap * sizeof(*h->t));
        h->kind = xrealloc(h->kind, h->cap);
    }
    h->t[h->n] = t;
    h->kind[h->n++] = (unsigned char)kind;
}

static int pod_ready(const cJSON *pod)
{
    const cJSON *conds = json_get(pod, "status.conditions"), *c;
    cJSON_ArrayForEach(c, conds)
    {
        const char *type = json_get_str(c, "type");
        if (type && strcmp(type, "Ready") == 0) {
            const char *st = json_get_str(c, "status");
            return st && strcmp(st, "True") == 0;
        }
    }
    return 0;
}

static void stamp(map_t *m, const char *name, uint64_t t, int keep_first)
{
    size_t len = strlen(name);
    tstamp *d = map_get(m, name);
    if (d == NULL) {
        d = xmalloc(sizeof(*d) + len + 1);
        memcpy(d->name, name, len + 1);
        d->t = 0;
        map_put(m, d->name, d);
    }
    if (!keep_first || d->t == 0)
        d->t = t;
}

static void pod_gone(bx_obs *o, opod *p, uint64_t now)
{
    if (p->ready)
        o->c.ready--;
    if (p->terminating)
        o->c.terminating--;
    o->c.exist--;
    o->c.deleted++;
    push_time(o, 2, now);
    stamp(&o->deleted_at, p->name, now, 0);
    if (!p->terminating) {
        stamp(&o->term_at, p->name, now, 1);
        hist_push(o, p->name, BX_OBS_TERMINATING, now);
    }
    map_del(&o->pods, p->name);
    free(p);
}

static void on_pod(bx_obs *o, int type, const cJSON *obj, int listing)
{
    const char *name = json_get_str(obj, "metadata.name");
    if (name == NULL)
        return;
    uint64_t now = uv_hrtime();
    opod *p = map_get(&o->pods, name);
    if (type == KUBE_EV_DELETED) {
        if (p)
            pod_gone(o, p, now);
        return;
    }
    if (p == NULL) {
        size_t len = strlen(name);
        p = xcalloc(1, sizeof(*p) + len + 1);
        memcpy(p->name, name, len + 1);
        map_put(&o->pods, p->name, p);
        o->c.exist++;
        if (!o->initial) {
            o->c.created++;
            push_time(o, 0, now);
            stamp(&o->added_at, name, now, 0);
            map_drop(&o->term_at, name); /* a new pod of that name: its own first termination */
            hist_push(o, name, BX_OBS_ADDED, now);
        }
    }
    p->gen = o->gen;
    int ready = pod_ready(obj);
    int term = json_get(obj, "metadata.deletionTimestamp") != NULL &&
               !cJSON_IsNull(json_get(obj, "metadata.deletionTimestamp"));
    if (ready && !p->ready) {
        o->c.ready++;
        if (!o->initial) {
            o->c.became_ready++;
            push_time(o, 1, now);
        }
    } else if (!ready && p->ready) {
        o->c.ready--;
    }
    if (term != p->terminating)
        o->c.terminating += term ? 1 : -1;
    if (term && !p->terminating && !o->initial) {
        stamp(&o->term_at, name, now, 1);
        hist_push(o, name, BX_OBS_TERMINATING, now);
    }
    p->ready = ready;
    p->terminating = term;
    (void)listing;
}

static void on_nodeset(bx_obs *o, int type, const cJSON *obj, int listing)
{
    (void)listing;
    if (type == KUBE_EV_DELETED) {
        o->c.ns_replicas = o->c.ns_ready = -1;
        return;
    }
    o->c.ns_replicas = (int)json_get_int(obj, "status.replicas", 0);
    o->c.ns_ready = (int)json_get_int(obj, "status.readyReplicas", 0);
    int spec = (int)json_get_int(obj, "spec.replicas", -1);
    if (o->target >= 0 && o->ns_ready_at == 0 && spec == o->target && o->c.ns_replicas == o->target &&
        o->c.ns_ready == o->target)
        o->ns_ready_at = uv_hrtime();
}

/* ---- list / watch plumbing ---- */

static void retry_cb(uv_timer_t *t)
{
    owatch *w = t->data;
    ow_start(w);
}

static void retry_later(owatch *w, unsigned ms)
{
    if (!w->o->stopping)
        uv_timer_start(&w->retry, retry_cb, ms, 0);
}

static void on_event(int type, const cJSON *obj, void *data)
{
    owatch *w = data;
    const char *rv = json_get_str(obj, "metadata.resourceVersion");
    if (rv)
        snprintf(w->rv, sizeof(w->rv), "%s", rv);
    w->o->c.events++;
    if (type != KUBE_EV_BOOKMARK)
        w->on_item(w->o, type, obj, 0);
}

static void on_watch_done(int err, const kube_status *st, int events_seen, void *data)
{
    owatch *w = data;
    (void)st;
    (void)events_seen;
    w->w = NULL;
    w->watching = 0;
    if (err == OP_ECANCELED || w->o->stopping)
        return;
    if (err == OP_EGONE)
        w->relist = 1;
    retry_later(w, err ? 200 : 0);
}

static void start_watch(owatch *w)
{
    kube_watch_opts wo;
    memset(&wo, 0, sizeof(wo));
    wo.resource_version = w->rv;
    wo.field_selector = w->field_selector;
    wo.label_selector = w->label_selector;
    wo.timeout_seconds = 3600;
    wo.bookmarks = 1;
    wo.max_event_bytes = 16u << 20;
    w->watching = 1;
    w->w = kube_watch_start(w->o->api->kc, w->res, w->o->ns, &wo, on_event, on_watch_done, w);
}

static void on_list(int err, const cJSON *list, const kube_status *st, void *data)
{
    owatch *w = data;
    bx_obs *o = w->o;
    (void)st;
    w->list = NULL;
    if (err == OP_ECANCELED || o->stopping)
        return;
    if (err) {
        retry_later(w, 500);
        return;
    }
    const char *rv = json_get_str(list, "metadata.resourceVersion");
    snprintf(w->rv, sizeof(w->rv), "%s", rv ? rv : "");
    if (w == &o->pw)
        o->gen++;
    const cJSON *it;
    cJSON_ArrayForEach(it, json_get(list, "items")) w->on_item(o, KUBE_EV_ADDED, it, 1);
    if (w == &o->pw) {
        /* pods that the relist no longer shows were deleted meanwhile */
        size_t i = 0, n = 0;
        const char *key;
        void *val;
        opod **gone = xcalloc(o->pods.count + 1, sizeof(*gone));
        while (map_next(&o->pods, &i, &key, &val))
            if (((opod *)val)->gen != o->gen)
                gone[n++] = val;
        for (size_t k = 0; k < n; k++)
            pod_gone(o, gone[k], uv_hrtime());
        free(gone);
        o->initial = 0;
    }
    w->relist = 0;
    start_watch(w);
}

static void ow_start(owatch *w)
{
    if (w->o->stopping)
        return;
    if (!w->relist) {
        start_watch(w);
        return;
    }
    char q[600];
    if (w->field_selector)
        snprintf(q, sizeof(q), "fieldSelector=%s", w->field_selector);
    else if (w->label_selector)
        snprintf(q, sizeof(q), "labelSelector=%s", w->label_selector_q);
    else
        q[0] = '\0';
    w->list = kube_list(w->o->api->kc, w->res, w->o->ns, q[0] ? q : NULL, on_list, w);
}

static void ow_init(bx_obs *o, owatch *w, const kube_res *res, const char *fs, item_fn fn)
{
    w->o = o;
    w->res = res;
    w->field_selector = fs;
    w->on_item = fn;
    w->relist = 1;
    uv_timer_init(o->x->loop, &w->retry);
    w->retry.data = w;
}

/* ---- public ---- */

static int both_watching(void *arg)
{
    bx_obs *o = arg;
    return o->pw.watching && o->nw.watching;
}

bx_obs *bx_obs_start(bx_ctx *x, bx_api *api, const char *ns)
{
    bx_obs *o = xcalloc(1, sizeof(*o));
    o->x = x;
    o->api = api;
    o->ns = xstrdup(ns);
    o->initial = 1;
    o->target = -1;
    o->c.ns_replicas = o->c.ns_ready = -1;
    map_init_type(&o->pods, &map_type_free_val);
    map_init_type(&o->deleted_at, &map_type_free_val);
    map_init_type(&o->added_at, &map_type_free_val);
    map_init_type(&o->term_at, &map_type_free_val);
    map_init_type(&o->hist, &ohist_type);
    ow_init(o, &o->pw, &KUBE_PODS, NULL, on_pod);
    /* Only NodeSet gpu's pods (and the limit's, built alike): on a real
     * cluster the Controller's StatefulSet runs a slurmctld pod beside them */
    o->pw.label_selector = "app.kubernetes.io/instance=gpu";
    o->pw.label_selector_q = "app.kubernetes.io%2Finstance%3Dgpu";
    ow_init(o, &o->nw, &SLINKY_NODESETS, "metadata.name=gpu", on_nodeset);
    ow_start(&o->pw);
    ow_start(&o->nw);
    if (bx_wait(x, both_watching, o, 120) != 0)
        bx_say(x, "bench: the pod observer could not start its watches");
    return o;
}

static void timer_closed(uv_handle_t *h)
{
    owatch *w = h->data;
    w->o->closed++;
}

static int closed_pred(void *arg)
{
    return ((bx_obs *)arg)->closed == 2;
}

static int idle_pred(void *arg)
{
    bx_obs *o = arg;
    return !o->pw.w && !o->nw.w && !o->pw.list && !o->nw.list;
}

void bx_obs_stop(bx_ctx *x, bx_obs *o)
{
    if (o == NULL)
        return;
    o->stopping = 1;
    x->cleanup++;
    owatch *ws[2] = {&o->pw, &o->nw};
    for (int i = 0; i < 2; i++) {
        if (ws[i]->w)
            kube_watch_stop(ws[i]->w);
        if (ws[i]->list)
            kube_cancel(ws[i]->list);
        uv_timer_stop(&ws[i]->retry);
        uv_close((uv_handle_t *)&ws[i]->retry, timer_closed);
    }
    (void)bx_wait(x, idle_pred, o, 10);
    (void)bx_wait(x, closed_pred, o, 10);
    x->cleanup--;
    map_free(&o->pods);
    map_free(&o->deleted_at);
    map_free(&o->added_at);
    map_free(&o->term_at);
    map_free(&o->hist);
    for (int k = 0; k < 3; k++)
        free(o->t[k]);
    free(o->ns);
    free(o);
}

void bx_obs_counts_get(const bx_obs *o, bx_obs_counts *c)
{
    *c = o->c;
}

const uint64_t *bx_obs_times(const bx_obs *o, int kind, size_t *n)
{
    *n = o->n[kind];
    return o->t[kind];
}

void bx_obs_watch_ready(bx_obs *o, int target)
{
    o->target = target;
    o->ns_ready_at = 0;
}

uint64_t bx_obs_ns_ready_at(const bx_obs *o)
{
    return o->ns_ready_at;
}

uint64_t bx_obs_deleted_at(const bx_obs *o, const char *pod)
{
    const tstamp *d = map_get(&o->deleted_at, pod);
    return d ? d->t : 0;
}

uint64_t bx_obs_added_at(const bx_obs *o, const char *pod)
{
    const tstamp *d = map_get(&o->added_at, pod);
    return d ? d->t : 0;
}

uint64_t bx_obs_terminating_at(const bx_obs *o, const char *pod)
{
    const tstamp *d = map_get(&o->term_at, pod);
    return d ? d->t : 0;
}

void bx_obs_history(bx_obs *o, int on)
{
    o->history = on;
    if (!on)
        map_free(&o->hist);
}

uint64_t bx_obs_first_after(const bx_obs *o, const char *pod, int kind, uint64_t t)
{
    const ohist *h = map_get(&o->hist, pod);
    if (h == NULL)
        return 0;
    size_t lo = 0, hi = h->n; /* the first entry at or after t */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (h->t[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < h->n; i++)
        if (h->kind[i] == kind)
            return h->t[i];
    return 0;
}

int bx_obs_pod_state(const bx_obs *o, const char *pod)
{
    const opod *p = map_get(&o->pods, pod);
    return p == NULL ? 0 : p->terminating ? 2 : 1;
}
