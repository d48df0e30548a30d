#include "watchers/byname.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/map.h"
#include "core/mem.h"

#define DEFAULT_POLL_MS 30000u
#define DEFAULT_IDLE_MS 600000u

struct entry {
    byname *b;
    char *key; /* "ns/name" */
    char *ns;
    char *name;
    uint64_t used_ms; /* last lookup */
    uint64_t due_ms;  /* next GET */
    uint64_t sent_ms; /* the last GET started */
    kube_request *req;
    int resolved; /* the first GET was answered */
    int touched;  /* idle: handlers ran once more, dropped at the next poll */
    int failing;  /* the last GET failed (not 404): logged once */
    uint32_t retry_ms; /* after a failed GET: the wait before the next, doubling up to the poll interval */
};

struct byname {
    uv_loop_t *loop;
    bn_opts o;
    uv_timer_t timer;
    map_t entries; /* key -> struct entry */
    map_t per_ns;  /* namespace -> struct nscount (its names in entries) */
    uint64_t full_logged_ms; /* the last "no room" warning (one per 10 s) */
    int in_flight;
    int stopping;
    int timer_closed;
    bn_stats stats;
    void (*on_stopped)(void *);
    void *stopped_data;
};

static void entry_free(void *v)
{
    struct entry *e = v;
    free(e->key);
    free(e->ns);
    free(e->name);
    free(e);
}

static const map_type entry_type = {.val_free = entry_free};
/* Names of one namespace in the table (the key is the struct's ns). */
struct nscount {
    char *ns;
    size_t n;
};

static void nscount_free(void *v)
{
    struct nscount *c = v;
    free(c->ns);
    free(c);
}

static const map_type count_type = {.val_free = nscount_free};

static void ns_take(byname *b, const char *ns)
{
    struct nscount *c = map_get(&b->per_ns, ns);
    if (c == NULL) {
        c = xcalloc(1, sizeof(*c));
        c->ns = xstrdup(ns);
        map_put(&b->per_ns, c->ns, c);
    }
    c->n++;
}

static void ns_release(byname *b, const char *ns)
{
    struct nscount *c = map_get(&b->per_ns, ns);
    assert(c != NULL && c->n > 0); /* every entry took its namespace's count */
    if (c && --c->n == 0)
        map_drop(&b->per_ns, ns);
}

static size_t ns_names(const byname *b, const char *ns)
{
    const struct nscount *c = map_get(&b->per_ns, ns);
    return c ? c->n : 0;
}

/* Room for one more name of namespace ns (see byname.h). */
static int room_for(const byname *b, const char *ns)
{
    size_t have = ns_names(b, ns);
    if (have >= BN_NS_SHARE || b->entries.count >= BN_HARD_MAX)
        return 0;
    return b->entries.count < BN_MAX_ENTRIES || have < BN_NS_RESERVE;
}

static void maybe_free(byname *b)
{
    if (!b->stopping || !b->timer_closed || b->in_flight > 0)
        return;
    assert(b->in_flight == 0 && b->per_ns.count <= b->entries.count);
    map_free(&b->entries);
    map_free(&b->per_ns);
    void (*cb)(void *) = b->on_stopped;
    void *data = b->stopped_data;
    free(b);
    if (cb)
        cb(data);
}

static void on_got(int err, const cJSON *obj, const kube_status *st, void *data)
{
    struct entry *e = data;
    byname *b = e->b;
    assert(e->req != NULL && b->in_flight > 0);
    e->req = NULL;
    b->in_flight--;
    if (b->stopping || err == OP_ECANCELED) {
        maybe_free(b);
        return;
    }
    b->stats.gets++;
    if (err == 0 && obj) {
        e->resolved = 1;
        if (e->failing)
            log_info("%s %s readable again", b->o.res->kind, e->key);
        e->failing = 0;
        e->retry_ms = 0;
        store_upsert(b->o.store, obj);
    } else if (err == OP_ENOTFOUND) {
        e->resolved = 1;
        b->stats.not_found++;
        e->failing = 0;
        e->retry_ms = 0;
        store_delete(b->o.store, e->ns, e->name);
    } else {
        /* Keep what we had: a transient failure must not look like a
         * deleted key to the reconcilers. Try again sooner than the poll
         * (a restarted API server answers 403 until its authorizer has
         * synced; a first read that failed leaves the name absent). */
        b->stats.failures++;
        if (!e->failing)
            log_warn("cannot read %s %s: %s (%s); keeping the last copy, retrying", b->o.res->kind, e->key,
                     err_str(err), st && st->message[0] ? st->message : "no detail");
        e->failing = 1;
        e->retry_ms = e->retry_ms ? e->retry_ms * 2 : BN_RETRY_MIN_MS;
        if (e->retry_ms > b->o.poll_ms)
            e->retry_ms = b->o.poll_ms;
        e->due_ms = uv_now(b->loop) + e->retry_ms;
    }
}

static void fetch(byname *b, struct entry *e, uint64_t now)
{
    e->due_ms = now + b->o.poll_ms;
    if (e->req)
        return;
    assert(!b->stopping);
    e->sent_ms = now;
    b->in_flight++;
    e->req = kube_get(b->o.client, b->o.res, e->ns, e->name, NULL, on_got, e);
    assert(e->req != NULL);
}

static void on_tick(uv_timer_t *t)
{
    byname *b = t->data;
    uint64_t now = uv_now(b->loop);
    size_t it = 0, n_drop = 0;
    void *v;
    struct entry **drop = NULL;
    while (map_next(&b->entries, &it, NULL, &v)) {
        struct entry *e = v;
        if (e->req)
            continue;
        if (now - e->used_ms >= b->o.idle_ms) {
            if (e->touched) {
                drop = xrealloc(drop, (n_drop + 1) * sizeof(*drop));
                drop[n_drop++] = e;
                continue;
            }
            /* Whoever still uses the object looks it up again now. */
            e->touched = 1;
            const sobj *o = store_get(b->o.store, e->ns, e->name);
            if (o)
                store_notify(b->o.store, o, o);
            continue;
        }
        if (now >= e->due_ms)
            fetch(b, e, now);
    }
    for (size_t i = 0; i < n_drop; i++) {
        struct entry *e = drop[i];
        /* Only an entry with no GET out is dropped: on_got uses it. */
        assert(e->req == NULL);
        ns_release(b, e->ns);
        map_del(&b->entries, e->key);
        b->stats.dropped++;
        log_debug("%s %s: no longer referenced, forgotten", b->o.res->kind, e->key);
        store_delete(b->o.store, e->ns, e->name);
        entry_free(e);
    }
    free(drop);
}

static uint32_t tick_ms(uint32_t poll_ms)
{
    uint32_t t = poll_ms / 8;
    return t < 100 ? 100 : t > 5000 ? 5000 : t;
}

byname *bn_start(uv_loop_t *loop, const bn_opts *opts)
{
    byname *b = xcalloc(1, sizeof(*b));
    b->loop = loop;
    b->o = *opts;
    if (b->o.poll_ms == 0)
        b->o.poll_ms = DEFAULT_POLL_MS;
    if (b->o.idle_ms == 0)
        b->o.idle_ms = DEFAULT_IDLE_MS;
    map_init_type(&b->entries, &entry_type);
    map_init_type(&b->per_ns, &count_type);
    uv_timer_init(loop, &b->timer);
    b->timer.data = b;
    uint32_t t = tick_ms(b->o.poll_ms);
    uv_timer_start(&b->timer, on_tick, t, t);
    return b;
}

static void on_timer_closed(uv_handle_t *h)
{
    byname *b = h->data;
    b->timer_closed = 1;
    maybe_free(b);
}

void bn_stop(byname *b, void (*on_stopped)(void *data), void *data)
{
    if (b->stopping)
        return;
    b->stopping = 1;
    b->on_stopped = on_stopped;
    b->stopped_data = data;
    size_t it = 0;
    void *v;
    while (map_next(&b->entries, &it, NULL, &v)) {
        struct entry *e = v;
        if (e->req)
            kube_cancel(e->req);
    }
    uv_timer_stop(&b->timer);
    uv_close((uv_handle_t *)&b->timer, on_timer_closed);
}

const sobj *bn_get(byname *b, const char *ns, const char *name, int *pending)
{
    char key[512];
    if (pending)
        *pending = 0;
    if (name == NULL || *name == '\0' || ns == NULL || b->stopping)
        return NULL;
    snprintf(key, sizeof(key), "%s/%s", ns, name);
    uint64_t now = uv_now(b->loop);
    struct entry *e = map_get(&b->entries, key);
    if (e == NULL) {
        if (!room_for(b, ns)) {
            b->stats.full++;
            if (b->full_logged_ms == 0 || now - b->full_logged_ms >= 10000) {
                log_warn("%s %s: not read, no room (%zu names in all, %zu of namespace %s; at most %d per "
                         "namespace, %d in all): the lookup waits",
                         b->o.res->kind, key, (size_t)b->entries.count, ns_names(b, ns), ns, BN_NS_SHARE,
                         BN_MAX_ENTRIES);
                b->full_logged_ms = now ? now : 1;
            }
            if (pending)
                *pending = BN_PENDING_FULL;
            return NULL;
        }
        ns_take(b, ns);
        e = xcalloc(1, sizeof(*e));
        e->b = b;
        e->key = xstrdup(key);
        e->ns = xstrdup(ns);
        e->name = xstrdup(name);
        map_put(&b->entries, e->key, e);
        /* Spread the polls of names asked for together over the interval. */
        fetch(b, e, now);
        e->due_ms = now + b->o.poll_ms / 2 + (map_hash(key, strlen(key)) % (b->o.poll_ms / 2 + 1));
    }
    e->used_ms = now;
    e->touched = 0;
    if (!e->resolved) {
        if (pending)
            *pending = BN_PENDING_READ;
        return NULL;
    }
    return store_get(b->o.store, ns, name);
}

int bn_refresh(byname *b, const char *ns, const char *name)
{
    char key[512];
    if (name == NULL || ns == NULL || b->stopping)
        return 0;
    snprintf(key, sizeof(key), "%s/%s", ns, name);
    struct entry *e = map_get(&b->entries, key);
    uint64_t now = uv_now(b->loop);
    if (e == NULL || e->req || now - e->sent_ms < BN_REFRESH_MIN_MS)
        return 0;
    fetch(b, e, now);
    return 1;
}

void bn_get_stats(const byname *b, bn_stats *out)
{
    *out = b->stats;
    out->entries = b->entries.count;
}
