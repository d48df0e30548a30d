#include "watchers/reflector.h"

#include <assert.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/crypto.h"
#include "core/err.h"
#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"

#define BACKOFF_INITIAL_MS 800
#define BACKOFF_MAX_MS 30000
#define BACKOFF_RESET_MS 120000
#define SHORT_WATCH_MS 1000
/* After the API server serves again, a reflector backing off tries again
 * within this (jittered: not all at once). */
#define REACHED_JITTER_MS 250

enum rf_state { RF_IDLE, RF_LISTING, RF_WATCHING, RF_BACKOFF, RF_STOPPING };
static const char *const state_names[] = {"idle", "listing", "watching", "backoff", "stopping"};

/* What to do when the backoff timer fires. */
enum rf_next { NEXT_LIST, NEXT_WATCH };

struct reflector {
    uv_loop_t *loop;
    rf_opts o;
    char *name;
    char *ns;
    char *label_selector;
    char *field_selector;
    enum rf_state state;
    enum rf_next next;
    uv_timer_t timer;
    kube_request *req; /* the LIST page or WATCH in flight */
    char *last_rv;
    char *cont;       /* continue token of the list in progress */
    int list_paged;   /* 0 after an expired continue token: list without limit */
    int list_started; /* store relist begun */
    uint64_t list_t0;
    uint64_t watch_t0;
    unsigned backoff_ms;
    uint64_t last_failure_ms;
    int gone_streak;
    kube_reach_hook reach; /* ends a backoff once the server serves again */
    rf_stats stats;
    void (*on_stopped)(void *);
    void *stopped_data;
};

static void start_list(reflector *rf);
static void start_watch(reflector *rf);

static void set_state(reflector *rf, enum rf_state s, int line)
{
    assert(s >= RF_IDLE && s <= RF_STOPPING);
    if (rf->state == s)
        return;
    assert(rf->state != RF_STOPPING); /* stopping is final */
    log_trace("reflector %s: %s -> %s (line %d)", rf->name, state_names[rf->state], state_names[s], line);
    rf->state = s;
}
#define SET_STATE(rf, s) set_state((rf), (s), __LINE__)

static void set_rv(reflector *rf, const char *rv)
{
    if (rv == NULL || *rv == '\0')
        return;
    if (rf->last_rv && strcmp(rf->last_rv, rv) == 0)
        return;
    free(rf->last_rv);
    rf->last_rv = xstrdup(rv);
}

static void maybe_free(reflector *rf)
{
    if (rf->state != RF_STOPPING || rf->req != NULL || !uv_is_closing((uv_handle_t *)&rf->timer))
        return;
    /* Still waiting for the timer's close callback? */
    if (rf->timer.data != NULL)
        return;
    assert(!list_is_linked(&rf->reach.link));
    void (*cb)(void *) = rf->on_stopped;
    void *data = rf->stopped_data;
    free(rf->name);
    free(rf->ns);
    free(rf->label_selector);
    free(rf->field_selector);
    free(rf->last_rv);
    free(rf->cont);
    free(rf);
    if (cb)
        cb(data);
}

static void on_timer(uv_timer_t *t)
{
    reflector *rf = t->data;
    /* The timer runs only for a backoff: rf_stop stops it, and a list or
     * watch starts only from a completion or from here. */
    assert(rf->state == RF_BACKOFF && rf->req == NULL);
    if (rf->state != RF_BACKOFF)
        return;
    if (rf->next == NEXT_WATCH && rf->last_rv)
        start_watch(rf);
    else
        start_list(rf);
}

/* Jittered exponential backoff; returns the delay for the next attempt. */
static unsigned next_backoff(reflector *rf)
{
    uint64_t now = uv_now(rf->loop);
    if (rf->last_failure_ms && now - rf->last_failure_ms > BACKOFF_RESET_MS)
        rf->backoff_ms = 0;
    rf->last_failure_ms = now;
    rf->backoff_ms = rf->backoff_ms ? rf->backoff_ms * 2 : BACKOFF_INITIAL_MS;
    if (rf->backoff_ms > BACKOFF_MAX_MS)
        rf->backoff_ms = BACKOFF_MAX_MS;
    uint32_t r;
    random_bytes(&r, sizeof(r));
    /* jitter 1.0: the wait is uniformly within [d, 2d) */
    return rf->backoff_ms + (unsigned)((uint64_t)r * rf->backoff_ms >> 32);
}

static void back_off(reflector *rf, enum rf_next next, unsigned delay_ms)
{
    assert(rf->req == NULL);
    SET_STATE(rf, RF_BACKOFF);
    rf->next = next;
    uv_timer_start(&rf->timer, on_timer, delay_ms, 0);
}

/* The API server serves again after it did not (kube_reach_hook): what this
 * reflector backs off from was most likely that, whatever answer it got
 * (none, 503, or a 403 of a restarted server whose authorizer had not
 * synced yet), and it has nothing left to wait for. */
static void on_reached(kube_reach_hook *h)
{
    reflector *rf = container_of(h, reflector, reach);
    if (rf->state != RF_BACKOFF)
        return;
    uint32_t r;
    random_bytes(&r, sizeof(r));
    uint64_t left = uv_timer_get_due_in(&rf->timer);
    uint64_t soon = (uint64_t)r % REACHED_JITTER_MS;
    if (left > soon) {
        log_debug("reflector %s: the API server answers again; retrying in %llu ms instead of %llu ms",
                  rf->name, (unsigned long long)soon, (unsigned long long)left);
        uv_timer_start(&rf->timer, on_timer, soon, 0);
    }
}

/* ---------------- LIST ---------------- */

static void on_list_page(int err, const cJSON *obj, const kube_status *st, void *data)
{
    reflector *rf = data;
    /* One request in flight, and this is its answer. */
    assert(rf->req != NULL && (rf->state == RF_LISTING || rf->state == RF_STOPPING));
    rf->req = NULL;
    if (rf->state == RF_STOPPING) {
        maybe_free(rf);
        return;
    }
    if (err) {
        rf->stats.failures++;
        if (err == OP_EGONE && rf->cont) {
            /* The continue token expired: restart without paging (a single
             * consistent list) instead of looping on the same token. */
            log_info("reflector %s: continue token expired, listing again without paging", rf->name);
            free(rf->cont);
            rf->cont = NULL;
            rf->list_paged = 0;
            start_list(rf);
            return;
        }
        unsigned d = next_backoff(rf);
        log_warn("reflector %s: list failed: %s (%s); retrying in %u ms", rf->name, err_str(err),
                 st ? st->message : "", d);
        back_off(rf, NEXT_LIST, d);
        return;
    }
    if (!rf->list_started) {
        store_relist_begin(rf->o.store, rf->ns);
        rf->list_started = 1;
    }
    const cJSON *items = json_child(obj, "items");
    for (const cJSON *it = items ? items->child : NULL; it; it = it->next) {
        store_upsert(rf->o.store, it);
        rf->stats.list_items++;
    }
    const char *cont = json_get_str(obj, "metadata.continue");
    const char *rv = json_get_str(obj, "metadata.resourceVersion");
    free(rf->cont);
    rf->cont = (cont && *cont) ? xstrdup(cont) : NULL;
    if (rf->cont) {
        start_list(rf);
        return;
    }
    /* The list is complete: drop what vanished, then watch from its RV. */
    store_relist_end(rf->o.store, rf->ns);
    rf->list_started = 0;
    rf->list_paged = 1;
    set_rv(rf, rv);
    rf->stats.last_list_seconds = (double)(uv_hrtime() - rf->list_t0) / 1e9;
    if (!rf->stats.synced) {
        rf->stats.synced = 1;
        log_info("reflector %s: synced %zu objects at resourceVersion %s in %.3f s", rf->name,
                 store_count(rf->o.store), rf->last_rv ? rf->last_rv : "?", rf->stats.last_list_seconds);
        if (rf->o.on_synced)
            rf->o.on_synced(rf, rf->o.data);
    } else {
        rf->stats.relists++;
        log_info("reflector %s: relisted %zu objects at resourceVersion %s in %.3f s", rf->name,
                 store_count(rf->o.store), rf->last_rv ? rf->last_rv : "?", rf->stats.last_list_seconds);
    }
#ifdef __GLIBC__
    /* A big list parsed page by page leaves freed pages in malloc's arenas;
     * hand them back so the resident size reflects the cache, not the peak. */
    if (store_count(rf->o.store) >= 1000)
        malloc_trim(0);
#endif
    start_watch(rf);
}

static void start_list(reflector *rf)
{
    buf_t q;
    buf_init(&q, 16384);
    int rc = 0;
    assert(rf->req == NULL);
    SET_STATE(rf, RF_LISTING);
    if (rf->cont == NULL) {
        rf->list_t0 = uv_hrtime();
        /* A half-applied relist (failed mid-way) starts over cleanly. */
        rf->list_started = 0;
    }
    if (rf->list_paged)
        rc = buf_printf(&q, "limit=%d", rf->o.page_size);
    if (rc == 0 && rf->cont) {
        rc = buf_puts(&q, q.len ? "&continue=" : "continue=");
        rc = rc ? rc : kube_query_escape(&q, rf->cont);
    }
    if (rc == 0 && rf->label_selector) {
        rc = buf_puts(&q, q.len ? "&labelSelector=" : "labelSelector=");
        rc = rc ? rc : kube_query_escape(&q, rf->label_selector);
    }
    if (rc == 0 && rf->field_selector) {
        rc = buf_puts(&q, q.len ? "&fieldSelector=" : "fieldSelector=");
        rc = rc ? rc : kube_query_escape(&q, rf->field_selector);
    }
    rf->stats.lists++;
    rf->req = kube_list(rf->o.client, rf->o.res, rf->ns, buf_cstr(&q), on_list_page, rf);
    assert(rf->req != NULL); /* kube answers later, never from inside the call */
    buf_free(&q);
}

/* ---------------- WATCH ---------------- */

static void on_watch_event(int type, const cJSON *obj, void *data)
{
    reflector *rf = data;
    const char *rv = json_get_str(obj, "metadata.resourceVersion");
    if (rf->state != RF_WATCHING)
        return;
    rf->stats.events++;
    switch (type) {
    case KUBE_EV_ADDED:
    case KUBE_EV_MODIFIED:
        store_upsert(rf->o.store, obj);
        break;
    case KUBE_EV_DELETED:
        store_delete(rf->o.store, json_get_str(obj, "metadata.namespace"),
                     json_get_str_or(obj, "metadata.name", ""));
        break;
    case KUBE_EV_BOOKMARK:
        break;
    }
    set_rv(rf, rv);
}

static void on_watch_done(int err, const kube_status *st, int events_seen, void *data)
{
    reflector *rf = data;
    assert(rf->req != NULL && (rf->state == RF_WATCHING || rf->state == RF_STOPPING));
    rf->req = NULL;
    if (rf->state == RF_STOPPING || err == OP_ECANCELED) {
        maybe_free(rf);
        return;
    }
    uint64_t ms = (uv_hrtime() - rf->watch_t0) / 1000000;
    if (err == 0) {
        rf->stats.watch_ends++;
        if (events_seen == 0 && ms < SHORT_WATCH_MS) {
            unsigned d = next_backoff(rf);
            log_warn("reflector %s: watch ended after %llu ms without events; relisting in %u ms", rf->name,
                     (unsigned long long)ms, d);
            back_off(rf, NEXT_LIST, d);
            return;
        }
        log_debug("reflector %s: watch ended after %llu ms, %d events; watching again from %s", rf->name,
                  (unsigned long long)ms, events_seen, rf->last_rv);
        rf->gone_streak = 0;
        start_watch(rf);
        return;
    }
    if (err == OP_EGONE) {
        rf->stats.gone++;
        log_info("reflector %s: resourceVersion %s expired (%s); relisting", rf->name,
                 rf->last_rv ? rf->last_rv : "", st ? st->message : "");
        if (rf->gone_streak++ == 0) {
            start_list(rf);
        } else {
            back_off(rf, NEXT_LIST, next_backoff(rf));
        }
        return;
    }
    rf->stats.failures++;
    unsigned d = next_backoff(rf);
    int rewatch = (st && (st->http == 0 || st->http == 429));
    log_warn("reflector %s: watch failed: %s (%s); %s in %u ms", rf->name, err_str(err),
             st ? st->message : "", rewatch ? "watching again" : "relisting", d);
    back_off(rf, rewatch ? NEXT_WATCH : NEXT_LIST, d);
}

static void start_watch(reflector *rf)
{
    uint32_t r;
    random_bytes(&r, sizeof(r));
    kube_watch_opts wo = {
        .resource_version = rf->last_rv,
        .label_selector = rf->label_selector,
        .field_selector = rf->field_selector,
        .timeout_seconds = 300 + (int)(r % 300),
        .bookmarks = 1,
    };
    assert(rf->req == NULL);
    SET_STATE(rf, RF_WATCHING);
    rf->watch_t0 = uv_hrtime();
    rf->stats.watches++;
    rf->req = kube_watch_start(rf->o.client, rf->o.res, rf->ns, &wo, on_watch_event, on_watch_done, rf);
    assert(rf->req != NULL);
}

/* ---------------- lifecycle ---------------- */

reflector *rf_start(uv_loop_t *loop, const rf_opts *opts)
{
    reflector *rf = xcalloc(1, sizeof(*rf));
    rf->loop = loop;
    rf->o = *opts;
    if (rf->o.page_size <= 0)
        rf->o.page_size = 500;
    rf->ns = (opts->ns && *opts->ns) ? xstrdup(opts->ns) : NULL;
    rf->label_selector = opts->label_selector ? xstrdup(opts->label_selector) : NULL;
    rf->field_selector = opts->field_selector ? xstrdup(opts->field_selector) : NULL;
    rf->name = rf->ns ? xasprintf("%s@%s", opts->res->plural, rf->ns) : xstrdup(opts->res->plural);
    rf->list_paged = 1;
    uv_timer_init(loop, &rf->timer);
    rf->timer.data = rf;
    list_init(&rf->reach.link);
    rf->reach.fn = on_reached;
    kube_reach_watch(rf->o.client, &rf->reach);
    start_list(rf);
    return rf;
}

static void on_timer_closed(uv_handle_t *h)
{
    reflector *rf = container_of((uv_timer_t *)(void *)h, reflector, timer);
    assert(rf->state == RF_STOPPING && rf->timer.data == rf);
    rf->timer.data = NULL;
    maybe_free(rf);
}

void rf_stop(reflector *rf, void (*on_stopped)(void *data), void *data)
{
    if (rf->state == RF_STOPPING)
        return;
    SET_STATE(rf, RF_STOPPING);
    kube_reach_unwatch(&rf->reach);
    rf->on_stopped = on_stopped;
    rf->stopped_data = data;
    if (rf->req)
        kube_cancel(rf->req);
    uv_timer_stop(&rf->timer);
    uv_close((uv_handle_t *)&rf->timer, on_timer_closed);
}

int rf_synced(const reflector *rf)
{
    return rf->stats.synced;
}

void rf_get_stats(const reflector *rf, rf_stats *out)
{
    *out = rf->stats;
}

const char *rf_name(const reflector *rf)
{
    return rf->name;
}

const char *rf_last_rv(const reflector *rf)
{
    return rf->last_rv ? rf->last_rv : "";
}
