/* kauth: TokenReview + SubjectAccessReview with a small verdict cache. See kauth.h. */
#include "core/kauth.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/crypto.h"
#include "core/err.h"
#include "core/json.h"
#include "core/list.h"
#include "core/log.h"
#include "core/map.h"
#include "core/mem.h"

static const kube_res RES_TOKENREVIEWS = {"authentication.k8s.io", "v1", "tokenreviews", "TokenReview", 0};
static const kube_res RES_SARS = {"authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview",
                                  0};

/* SHA-256 hex of the token, then verb and path: the token is never kept. */
#define KEY_MAX (2 * SHA256_LEN + 1 + 16 + 256)

typedef struct entry {
    char key[KEY_MAX];
    int status;
    char reason[160];
    char user[256];
    uint64_t expires;
    list_node link; /* a->lru, oldest first */
} entry;

struct kauth_check {
    kauth *a;
    list_node link; /* a->due (answer ready) or a->waiting (review in flight) */
    kube_request *req;
    int canceled;
    kauth_cb cb;
    void *data;
    char key[KEY_MAX];
    char verb[16];
    char path[256];
    /* the answer, for a check on a->due */
    int status;
    char reason[160];
    char user[256];
};

struct kauth {
    uv_loop_t *loop;
    kube_client *client;
    kauth_opts o;
    map_t cache; /* key -> entry */
    list_node lru;
    list_node due;
    list_node waiting;
    uv_timer_t timer; /* delivers a->due on the next iteration */
    int in_flight;
    int closing;
    int timer_closed;
    void (*on_closed)(void *data);
    void *closed_data;
    unsigned long long reviews, hits;
};

kauth *kauth_new(uv_loop_t *loop, kube_client *client, const kauth_opts *opts)
{
    kauth *a = xcalloc(1, sizeof(*a));
    a->loop = loop;
    a->client = client;
    if (opts)
        a->o = *opts;
    if (!a->o.ttl_ms)
        a->o.ttl_ms = 60000;
    if (!a->o.deny_ttl_ms)
        a->o.deny_ttl_ms = 10000;
    if (!a->o.max_entries)
        a->o.max_entries = 1024;
    if (!a->o.timeout_ms)
        a->o.timeout_ms = 10000;
    map_init(&a->cache);
    list_init(&a->lru);
    list_init(&a->due);
    list_init(&a->waiting);
    uv_timer_init(loop, &a->timer);
    a->timer.data = a;
    return a;
}

/* --- cache ----------------------------------------------------------------- */

static void entry_drop(kauth *a, entry *e)
{
    map_del(&a->cache, e->key);
    list_remove(&e->link);
    free(e);
}

static const entry *cache_get(kauth *a, const char *key)
{
    entry *e = map_get(&a->cache, key);
    if (e && e->expires <= uv_now(a->loop)) {
        entry_drop(a, e);
        e = NULL;
    }
    return e;
}

static void cache_put(kauth *a, const kauth_check *c)
{
    entry *old = map_get(&a->cache, c->key);
    if (old)
        entry_drop(a, old);
    if (a->cache.count >= a->o.max_entries) {
        /* Expired entries first, then the oldest: the bound holds whatever
         * mix of TTLs the cache has. */
        uint64_t now = uv_now(a->loop);
        list_node *n, *tmp;
        list_foreach_safe(n, tmp, &a->lru) {
            entry *e = list_entry(n, entry, link);
            if (e->expires <= now)
                entry_drop(a, e);
        }
        while (a->cache.count >= a->o.max_entries && !list_empty(&a->lru))
            entry_drop(a, list_entry(list_first(&a->lru), entry, link));
    }
    entry *e = xcalloc(1, sizeof(*e));
    memcpy(e->key, c->key, sizeof(e->key));
    e->status = c->status;
    memcpy(e->reason, c->reason, sizeof(e->reason));
    memcpy(e->user, c->user, sizeof(e->user));
    e->expires = uv_now(a->loop) + (c->status == 200 ? a->o.ttl_ms : a->o.deny_ttl_ms);
    list_insert_tail(&a->lru, &e->link);
    map_put(&a->cache, e->key, e);
}

/* --- completion --------------------------------------------------------------- */

static void maybe_closed(kauth *a)
{
    if (a->closing && a->timer_closed && a->in_flight == 0 && list_empty(&a->waiting)) {
        map_free(&a->cache);
        void (*cb)(void *) = a->on_closed;
        void *data = a->closed_data;
        free(a);
        if (cb)
            cb(data);
    }
}

static void set_answer(kauth_check *c, int status, const char *user, const char *fmt, ...) OP_PRINTF(4, 5);
static void set_answer(kauth_check *c, int status, const char *user, const char *fmt, ...)
{
    va_list ap;
    c->status = status;
    if (user != c->user) /* the reviews pass the user already kept in c */
        snprintf(c->user, sizeof(c->user), "%s", user ? user : "");
    va_start(ap, fmt);
    vsnprintf(c->reason, sizeof(c->reason), fmt, ap);
    va_end(ap);
}

static void on_timer(uv_timer_t *t)
{
    kauth *a = t->data;
    /* One at a time from the head: a callback may cancel other due checks. */
    while (!list_empty(&a->due)) {
        kauth_check *c = list_entry(list_first(&a->due), kauth_check, link);
        list_remove(&c->link);
        c->cb(c->status, c->reason, c->user[0] ? c->user : NULL, c->data);
        free(c);
    }
}

/* Answer on the next loop iteration (the caller is still inside kauth_check_start). */
static kauth_check *answer_later(kauth_check *c)
{
    list_insert_tail(&c->a->due, &c->link);
    uv_timer_start(&c->a->timer, on_timer, 0, 0);
    return c;
}

/* A review returned: answer now (this is already a later tick). */
static void finish(kauth_check *c, int cache)
{
    kauth *a = c->a;
    /* Only a check that sent a review is on the waiting list and counted. */
    assert(list_is_linked(&c->link) && a->in_flight > 0);
    list_remove(&c->link);
    a->in_flight--;
    if (cache && !a->closing)
        cache_put(a, c);
    if (!c->canceled)
        c->cb(c->status, c->reason, c->user[0] ? c->user : NULL, c->data);
    free(c);
    maybe_closed(a);
}

static kube_request *post(kauth_check *c, const kube_res *res, cJSON *obj, kube_cb cb)
{
    kauth *a = c->a;
    /* Unthrottled: a scrape must not wait behind the reconcilers' writes for
     * the client's QPS tokens; KAUTH_MAX_INFLIGHT bounds what it may add. */
    kube_req_opts ro = {.timeout_ms = a->o.timeout_ms, .unthrottled = 1};
    a->reviews++;
    kube_request *r = kube_create_with(a->client, &ro, res, NULL, obj, cb, c);
    cJSON_Delete(obj);
    return r;
}

static void on_sar(int err, const cJSON *obj, const kube_status *st, void *data)
{
    kauth_check *c = data;
    c->req = NULL;
    if (c->canceled) {
        finish(c, 0);
        return;
    }
    if (err) {
        log_warn("metrics auth: SubjectAccessReview failed: %s (%d %s)", err_str(err), st ? st->http : 0,
                 st ? st->message : "");
        set_answer(c, 500, c->user, "authorization check failed: %s", err_str(err));
        finish(c, 0);
        return;
    }
    if (json_get_bool(obj, "status.allowed", 0) && !json_get_bool(obj, "status.denied", 0)) {
        set_answer(c, 200, c->user, "allowed");
    } else {
        const char *why = json_get_str(obj, "status.reason");
        set_answer(c, 403, c->user, "user \"%.100s\" is not allowed to %s %s%s%.80s", c->user, c->verb,
                   c->path, why && *why ? ": " : "", why ? why : "");
    }
    finish(c, 1);
}

static void on_token_review(int err, const cJSON *obj, const kube_status *st, void *data)
{
    kauth_check *c = data;
    c->req = NULL;
    if (c->canceled) {
        finish(c, 0);
        return;
    }
    if (err) {
        log_warn("metrics auth: TokenReview failed: %s (%d %s)", err_str(err), st ? st->http : 0,
                 st ? st->message : "");
        set_answer(c, 500, NULL, "authentication check failed: %s", err_str(err));
        finish(c, 0);
        return;
    }
    const char *user = json_get_str(obj, "status.user.username");
    if (!json_get_bool(obj, "status.authenticated", 0) || user == NULL || *user == '\0') {
        set_answer(c, 401, NULL, "unauthorized: the token is not valid");
        finish(c, 1);
        return;
    }
    snprintf(c->user, sizeof(c->user), "%s", user);
    cJSON *sar = cJSON_CreateObject();
    json_set_str(sar, "apiVersion", "authorization.k8s.io/v1");
    json_set_str(sar, "kind", "SubjectAccessReview");
    cJSON *spec = json_obj_ensure(sar, "spec");
    json_set_str(spec, "user", user);
    const char *uid = json_get_str(obj, "status.user.uid");
    if (uid && *uid)
        json_set_str(spec, "uid", uid);
    const cJSON *groups = json_get(obj, "status.user.groups");
    if (cJSON_IsArray(groups))
        json_set(spec, "groups", cJSON_Duplicate(groups, 1));
    const cJSON *extra = json_get(obj, "status.user.extra");
    if (cJSON_IsObject(extra))
        json_set(spec, "extra", cJSON_Duplicate(extra, 1));
    cJSON *nra = json_obj_ensure(spec, "nonResourceAttributes");
    json_set_str(nra, "path", c->path);
    json_set_str(nra, "verb", c->verb);
    c->req = post(c, &RES_SARS, sar, on_sar);
}

/* "Bearer <token>" (scheme case-insensitive): the token, or NULL. */
static const char *bearer(const char *h, size_t *len)
{
    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
        return NULL;
    h += 7;
    while (*h == ' ')
        h++;
    size_t n = strcspn(h, " \t\r\n");
    if (n == 0 || h[n] != '\0' || n > KUBE_MAX_BEARER_TOKEN)
        return NULL;
    *len = n;
    return h;
}

kauth_check *kauth_check_start(kauth *a, const char *authorization, const char *verb, const char *path,
                               kauth_cb cb, void *data)
{
    kauth_check *c = xcalloc(1, sizeof(*c));
    c->a = a;
    c->cb = cb;
    c->data = data;
    snprintf(c->verb, sizeof(c->verb), "%s", verb);
    snprintf(c->path, sizeof(c->path), "%s", path);
    size_t n = 0;
    const char *tok = bearer(authorization, &n);
    if (a->closing) {
        set_answer(c, 500, NULL, "shutting down");
        return answer_later(c);
    }
    if (tok == NULL) {
        set_answer(c, 401, NULL, "unauthorized: %s",
                   authorization ? "the Authorization header is not \"Bearer <token>\"" : "no bearer token");
        return answer_later(c);
    }
    char hex[2 * SHA256_LEN + 1];
    sha256_hex(tok, n, hex);
    snprintf(c->key, sizeof(c->key), "%s %s %s", hex, c->verb, c->path);
    const entry *e = cache_get(a, c->key);
    if (e) {
        a->hits++;
        c->status = e->status;
        memcpy(c->reason, e->reason, sizeof(c->reason));
        memcpy(c->user, e->user, sizeof(c->user));
        return answer_later(c);
    }
    if (a->in_flight >= KAUTH_MAX_INFLIGHT) {
        set_answer(c, 429, NULL, "too many authentication checks in flight");
        return answer_later(c);
    }
    cJSON *tr = cJSON_CreateObject();
    json_set_str(tr, "apiVersion", "authentication.k8s.io/v1");
    json_set_str(tr, "kind", "TokenReview");
    cJSON *spec = json_obj_ensure(tr, "spec");
    json_set_str(spec, "token", tok); /* bearer() checked that it ends the header value */
    list_insert_tail(&a->waiting, &c->link);
    a->in_flight++;
    assert(a->in_flight <= KAUTH_MAX_INFLIGHT);
    c->req = post(c, &RES_TOKENREVIEWS, tr, on_token_review);
    return c;
}

void kauth_cancel(kauth_check *c)
{
    if (c == NULL || c->canceled)
        return;
    c->canceled = 1;
    if (c->req) {
        kube_cancel(c->req); /* on_* runs later with OP_ECANCELED and frees c */
        return;
    }
    /* Not waiting for a review: it is on a->due. */
    list_remove(&c->link);
    free(c);
}

static void on_timer_closed(uv_handle_t *h)
{
    kauth *a = h->data;
    a->timer_closed = 1;
    maybe_closed(a);
}

void kauth_close(kauth *a, void (*on_closed)(void *data), void *data)
{
    a->closing = 1;
    a->on_closed = on_closed;
    a->closed_data = data;
    while (!list_empty(&a->due))
        kauth_cancel(list_entry(list_first(&a->due), kauth_check, link));
    list_node *n, *tmp;
    list_foreach_safe(n, tmp, &a->waiting) kauth_cancel(list_entry(n, kauth_check, link));
    while (!list_empty(&a->lru))
        entry_drop(a, list_entry(list_first(&a->lru), entry, link));
    uv_close((uv_handle_t *)&a->timer, on_timer_closed);
}

void kauth_get_stats(const kauth *a, kauth_stats *out)
{
    out->reviews = a->reviews;
    out->cache_hits = a->hits;
    out->cached = a->cache.count;
    out->in_flight = a->in_flight;
}
