#include "core/evrec.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "core/err.h"
#include "core/json.h"
#include "core/log.h"
#include "core/map.h"
#include "core/rfc3339.h"

#define SERIES_CACHE_MAX 4096
#define BURST 25
#define REFILL_MS (5 * 60 * 1000)

/* One recently emitted event (for aggregation into a series). */
struct series {
    char *key; /* uid|type|reason|note */
    char *ns;
    char *name; /* the Event object's name */
    int count;
    uint64_t last_ms;
};

/* Per regarding-object spam limiter (token bucket). */
struct bucket {
    char *uid;
    double tokens;
    uint64_t at_ms;
};

struct evrec {
    uv_loop_t *loop;
    kube_client *client;
    char *controller;
    char *instance;
    map_t series;  /* key -> struct series */
    map_t buckets; /* uid -> struct bucket */
    evrec_stats stats;
};

static void series_free(void *v)
{
    struct series *s = v;
    free(s->key);
    free(s->ns);
    free(s->name);
    free(s);
}

static void bucket_free(void *v)
{
    struct bucket *b = v;
    free(b->uid);
    free(b);
}

static const map_type series_type = {.val_free = series_free};
static const map_type bucket_type = {.val_free = bucket_free};

evrec *evrec_new(uv_loop_t *loop, kube_client *client, const char *controller, const char *instance)
{
    evrec *r = xcalloc(1, sizeof(*r));
    r->loop = loop;
    r->client = client;
    r->controller = xstrdup(controller);
    r->instance = xstrdup(instance);
    map_init_type(&r->series, &series_type);
    map_init_type(&r->buckets, &bucket_type);
    return r;
}

void evrec_free(evrec *r)
{
    if (r == NULL)
        return;
    map_free(&r->series);
    map_free(&r->buckets);
    free(r->controller);
    free(r->instance);
    free(r);
}

static int take_token(evrec *r, const char *uid, uint64_t now)
{
    struct bucket *b = map_get(&r->buckets, uid);
    if (b == NULL) {
        b = xcalloc(1, sizeof(*b));
        b->uid = xstrdup(uid);
        b->tokens = BURST;
        b->at_ms = now;
        map_put(&r->buckets, b->uid, b);
    }
    b->tokens += (double)(now - b->at_ms) / REFILL_MS;
    if (b->tokens > BURST)
        b->tokens = BURST;
    b->at_ms = now;
    if (b->tokens < 1)
        return 0;
    b->tokens -= 1;
    assert(b->tokens >= 0 && b->tokens <= BURST);
    return 1;
}

/* Bound the aggregation cache: drop entries whose series has ended. */
static void prune(evrec *r, uint64_t now)
{
    if (r->series.count < SERIES_CACHE_MAX)
        return;
    size_t it = 0, n = 0;
    void *v;
    struct series **old = xmalloc(r->series.count * sizeof(*old));
    while (map_next(&r->series, &it, NULL, &v)) {
        struct series *s = v;
        if (now - s->last_ms > EVREC_SERIES_MS || n < r->series.count / 4)
            old[n++] = s;
    }
    for (size_t i = 0; i < n; i++)
        map_drop(&r->series, old[i]->key);
    free(old);
}

static void on_written(int err, const cJSON *obj, const kube_status *st, void *data)
{
    evrec *r = data;
    if (err == OP_ECANCELED)
        return;
    if (err) {
        r->stats.failed++;
        log_debug("event recorder: write failed: %s (%s)", err_str(err), st ? st->message : "");
    }
}

void evrec_emit(evrec *r, const evrec_ref *ref, const char *type, const char *reason, const char *action,
                const char *fmt, ...)
{
    char note[1025], key[2048], now_s[96];
    va_list ap;
    uint64_t now = uv_now(r->loop);
    const char *ns = (ref->ns && *ref->ns) ? ref->ns : "default";

    va_start(ap, fmt);
    vsnprintf(note, sizeof(note), fmt, ap);
    va_end(ap);
    log_at(strcmp(type, "Warning") == 0 ? LOGL_WARN : LOGL_DEBUG, "event %s %s %s/%s: %s", type, reason, ns,
           ref->name, note);
    if (!take_token(r, ref->uid ? ref->uid : ref->name, now)) {
        r->stats.dropped++;
        return;
    }
    rfc3339_now_micro(now_s);
    snprintf(key, sizeof(key), "%s|%s|%s|%s", ref->uid ? ref->uid : ref->name, type, reason, note);
    struct series *s = map_get(&r->series, key);
    if (s && now - s->last_ms <= EVREC_SERIES_MS) {
        assert(s->count > 0);
        s->count++;
        s->last_ms = now;
        cJSON *patch = cJSON_CreateObject();
        cJSON *series = json_obj_ensure(patch, "series");
        json_set_int(series, "count", s->count);
        json_set_str(series, "lastObservedTime", now_s);
        kube_patch(r->client, &KUBE_EVENTS_V1, s->ns, s->name, NULL, KUBE_PATCH_MERGE, patch, NULL, 0,
                   on_written, r);
        cJSON_Delete(patch);
        r->stats.patched++;
        return;
    }
    prune(r, now);
    struct timeval tv;
    gettimeofday(&tv, NULL);
    char *name =
        xasprintf("%s.%llx", ref->name,
                  (unsigned long long)tv.tv_sec * 1000000000ULL + (unsigned long long)tv.tv_usec * 1000ULL +
                      (unsigned long long)(r->stats.created % 1000));
    cJSON *ev = cJSON_CreateObject();
    json_set_str(ev, "apiVersion", "events.k8s.io/v1");
    json_set_str(ev, "kind", "Event");
    cJSON *meta = json_obj_ensure(ev, "metadata");
    json_set_str(meta, "name", name);
    json_set_str(meta, "namespace", ns);
    json_set_str(ev, "eventTime", now_s);
    json_set_str(ev, "reportingController", r->controller);
    json_set_str(ev, "reportingInstance", r->instance);
    json_set_str(ev, "action", action);
    json_set_str(ev, "reason", reason);
    json_set_str(ev, "type", type);
    json_set_str(ev, "note", note);
    cJSON *reg = json_obj_ensure(ev, "regarding");
    json_set_str(reg, "apiVersion", ref->api_version);
    json_set_str(reg, "kind", ref->kind);
    if (ref->ns && *ref->ns)
        json_set_str(reg, "namespace", ref->ns);
    json_set_str(reg, "name", ref->name);
    if (ref->uid)
        json_set_str(reg, "uid", ref->uid);
    kube_create(r->client, &KUBE_EVENTS_V1, ns, ev, on_written, r);
    cJSON_Delete(ev);
    r->stats.created++;

    if (s == NULL) {
        s = xcalloc(1, sizeof(*s));
        s->key = xstrdup(key);
        map_put(&r->series, s->key, s);
    } else {
        free(s->ns);
        free(s->name);
    }
    s->ns = xstrdup(ns);
    s->name = name;
    s->count = 1;
    s->last_ms = now;
}

void evrec_get_stats(const evrec *r, evrec_stats *out)
{
    *out = r->stats;
}
