#include "reconcilers/objsync.h"

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/err.h"
#include "core/json.h"
#include "core/log.h"
#include "core/map.h"
#include "core/mem.h"

/* Writes that succeeded but whose result the cache has not shown yet: the
 * resourceVersion the cached object had when the write was sent ("" when
 * it did not exist). While the cache still shows that version, the object
 * is treated as pending, so a pass in the gap between the answer and the
 * watch event does not write the same thing again. Records expire after
 * SETTLE_MS in case the event never comes (the relist repairs the cache). */
#define SETTLE_MS 30000
struct settle {
    char *key;
    char *rv;
    uint64_t at_ms;
};

static void settle_free(void *v)
{
    struct settle *st = v;
    free(st->key);
    free(st->rv);
    free(st);
}

static const map_type settle_type = {.val_free = settle_free};

/* Names of label-filtered kinds (Secrets, ConfigMaps: the caches hold only
 * objects with our managed-by label) whose create was answered AlreadyExists
 * and whose live object turned out not to be ours: "plural/ns/name" -> the
 * time it was seen. objsync_ensure answers
 * OBJSYNC_NOT_OWNED for them without a request until FOREIGN_MS have passed,
 * then tries again (the name may be free by then). Shorter than the
 * reconcilers' conflict retry (CRC_CONFLICT_RETRY_MS, 30 s): with both at
 * 30 s the retry could fire a millisecond before the mark ran out, find the
 * name still marked and wait 30 s more, so a freed name took 60 s. */
#define FOREIGN_MS 25000
struct foreign {
    char *key;
    uint64_t at_ms;
};

static void foreign_free(void *v)
{
    struct foreign *f = v;
    free(f->key);
    free(f);
}

static const map_type foreign_type = {.val_free = foreign_free};

#define MAX_FILTERED 8

struct objsync {
    kube_client *client;
    /* Keys ("plural/ns/name") of objects with a write in flight (values:
     * the struct write, owned by its request). */
    map_t in_flight;
    map_t settling; /* key -> struct settle */
    map_t foreign;  /* key -> struct foreign */
    /* caches that hold only objects with our managed-by label */
    const store *filtered[MAX_FILTERED];
    int n_filtered;
    /* objsync_free was called while writes were in flight: the last one to
     * finish frees the context */
    int freeing;
};

struct write {
    objsync *os;
    char *key;
    char *rv_before;
    uint64_t sent_ms;
    objsync_cb cb;
    void *data;
    /* creates of label-filtered kinds: what to check on AlreadyExists */
    const kube_res *res;
    char *ns, *name;
    cJSON *want;
};

static uint64_t now_ms(void)
{
    return uv_hrtime() / 1000000;
}

static void settle_drop(objsync *os, const char *key)
{
    map_drop(&os->settling, key);
    if (os->settling.count == 0)
        map_free(&os->settling);
}

/* Still waiting for the cache to show our last write to this object? */
static int settling_on(objsync *os, const char *key, const sobj *cur)
{
    struct settle *st = map_get(&os->settling, key);
    if (st == NULL)
        return 0;
    const char *rv = cur ? cur->rv : "";
    if (now_ms() - st->at_ms > SETTLE_MS || strcmp(rv, st->rv) != 0) {
        settle_drop(os, key);
        return 0;
    }
    return 1;
}

objsync *objsync_new(kube_client *client)
{
    objsync *os = xcalloc(1, sizeof(*os));
    os->client = client;
    map_init(&os->in_flight);
    map_init_type(&os->settling, &settle_type);
    map_init_type(&os->foreign, &foreign_type);
    return os;
}

int objsync_label_filtered(objsync *os, const store *cache)
{
    if (os->n_filtered == MAX_FILTERED)
        return OP_ETOOBIG;
    os->filtered[os->n_filtered++] = cache;
    return 0;
}

static int is_filtered(const objsync *os, const store *cache)
{
    for (int i = 0; i < os->n_filtered; i++)
        if (os->filtered[i] == cache)
            return 1;
    return 0;
}

static void free_now(objsync *os)
{
    assert(os->in_flight.count == 0);
    map_free(&os->in_flight);
    map_free(&os->foreign);
    map_free(&os->settling);
    free(os);
}

void objsync_free(objsync *os)
{
    if (os == NULL)
        return;
    if (os->in_flight.count > 0) {
        os->freeing = 1;
        return;
    }
    free_now(os);
}

int objsync_in_flight(const objsync *os)
{
    return (int)os->in_flight.count;
}

static void foreign_drop(objsync *os, const char *key)
{
    map_drop(&os->foreign, key);
    if (os->foreign.count == 0)
        map_free(&os->foreign);
}

static int foreign_fresh(objsync *os, const char *key)
{
    struct foreign *f = map_get(&os->foreign, key);
    if (f == NULL)
        return 0;
    if (now_ms() - f->at_ms < FOREIGN_MS)
        return 1;
    foreign_drop(os, key);
    return 0;
}

/* A write is over: out of the in-flight table; the context goes with the
 * last write when objsync_free came first. */
static void write_done(struct write *w)
{
    objsync *os = w->os;
    /* One write per object in flight, and this is it. */
    assert(map_get(&os->in_flight, w->key) == w);
    map_del(&os->in_flight, w->key);
    if (os->in_flight.count == 0) {
        map_free(&os->in_flight);
        if (os->freeing)
            free_now(os);
    }
}

static void write_free(struct write *w)
{
    free(w->key);
    free(w->rv_before);
    free(w->ns);
    free(w->name);
    cJSON_Delete(w->want);
    free(w);
}

static void on_written(int err, const cJSON *obj, const kube_status *st, void *data);
static cJSON *adopt_patch(const cJSON *want);

/* The create of a label-filtered kind was answered AlreadyExists: the object
 * is not in our cache, so it lacks our label. Ours by an ownerReference (made
 * before the label existed): converge it, label included, so it enters the
 * cache. Anybody else's: remember it as foreign and tell the caller with
 * OP_EEXISTS (its next pass gets OBJSYNC_NOT_OWNED). */
static void on_existing(int err, const cJSON *live, const kube_status *st, void *data)
{
    struct write *w = data;
    assert(w->want != NULL && map_get(&w->os->in_flight, w->key) == w);
    cJSON *want = w->want;
    w->want = NULL;
    if (err == 0 && live && objsync_owned(want, live)) {
        /* Ours by an ownerReference, without our label: another operator
         * made it for the same owner (or slurmop before the label): adopted
         * as it is (see the header). */
        cJSON *patch = adopt_patch(want);
        cJSON_Delete(want);
        if (patch) {
            log_info("objsync: adopting %s as it is (it has our owner, not our label)", w->key);
            kube_patch(w->os->client, w->res, w->ns, w->name, NULL, KUBE_PATCH_MERGE, patch, NULL, 0,
                       on_written, w);
            cJSON_Delete(patch);
            return;
        }
        on_written(0, live, st, w);
        return;
    }
    cJSON_Delete(want);
    if (err == 0 && live) {
        foreign_drop(w->os, w->key);
        struct foreign *f = xcalloc(1, sizeof(*f));
        f->key = xstrdup(w->key);
        f->at_ms = now_ms();
        map_put(&w->os->foreign, f->key, f);
        log_debug("objsync: %s exists and is not ours: left alone", w->key);
        err = OP_EEXISTS;
    } else if (err == OP_ENOTFOUND) {
        err = OP_EEXISTS; /* gone again in between: the caller's next pass creates it */
    }
    write_done(w);
    if (w->cb)
        w->cb(err, w->key, w->data);
    write_free(w);
}

static void on_written(int err, const cJSON *obj, const kube_status *st, void *data)
{
    struct write *w = data;
    if (err == OP_EEXISTS && w->want) {
        kube_get(w->os->client, w->res, w->ns, w->name, NULL, on_existing, w);
        return;
    }
    /* A write that changed nothing (the same resourceVersion back) has no
     * watch event to wait for; a create that found the object already there
     * waits for the cache to show it. */
    const char *rv_after = err == 0 ? json_get_str(obj, "metadata.resourceVersion") : NULL;
    int noop = rv_after && w->rv_before && strcmp(rv_after, w->rv_before) == 0;
    if (((err == 0 && !noop) || err == OP_EEXISTS) && w->rv_before) {
        settle_drop(w->os, w->key);
        struct settle *rec = xcalloc(1, sizeof(*rec));
        rec->key = xstrdup(w->key);
        rec->rv = xstrdup(w->rv_before);
        rec->at_ms = now_ms();
        map_put(&w->os->settling, rec->key, rec);
    }
    write_done(w);
    if (err == OP_EEXISTS || err == OP_ENOTFOUND)
        err = 0; /* the cache was behind; the next pass sees the truth */
    if (err && err != OP_ECANCELED)
        log_warn("objsync: writing %s failed: %s (%s)", w->key, err_str(err), st ? st->message : "");
    if (w->cb)
        w->cb(err, w->key, w->data);
    write_free(w);
}

static struct write *begin(objsync *os, const kube_res *res, const char *ns, const char *name,
                           const sobj *cur, objsync_cb cb, void *data)
{
    char *key = xasprintf("%s/%s/%s", res->plural, ns ? ns : "", name);
    if (map_get(&os->in_flight, key)) {
        free(key);
        return NULL;
    }
    struct write *w = xcalloc(1, sizeof(*w));
    w->os = os;
    w->key = key;
    w->rv_before = xstrdup(cur ? cur->rv : "");
    w->cb = cb;
    w->data = data;
    map_put(&os->in_flight, w->key, w);
    return w;
}

static int is_pending(objsync *os, const kube_res *res, const char *ns, const char *name, const sobj *cur)
{
    char key[1024];
    snprintf(key, sizeof(key), "%s/%s/%s", res->plural, ns ? ns : "", name);
    return map_get(&os->in_flight, key) != NULL || settling_on(os, key, cur);
}

/* The smallest merge patch that makes want a subset of have: objects are
 * descended into, anything else (scalars, arrays, type changes) is sent
 * whole. NULL when want is already a subset. */
static cJSON *subset_diff(const cJSON *want, const cJSON *have)
{
    if (json_subset(want, have))
        return NULL;
    /* The API server stores an empty map as no map at all: asking for one
     * again would send a patch that changes nothing, on every pass. */
    if (cJSON_IsObject(want) && want->child == NULL && (have == NULL || cJSON_IsNull(have)))
        return NULL;
    if (!cJSON_IsObject(want) || !cJSON_IsObject(have))
        return cJSON_Duplicate(want, 1);
    cJSON *out = cJSON_CreateObject();
    for (const cJSON *w = want->child; w; w = w->next) {
        cJSON *d = subset_diff(w, json_child(have, w->string));
        if (d)
            cJSON_AddItemToObject(out, w->string, d);
    }
    if (out->child == NULL) {
        cJSON_Delete(out);
        return NULL;
    }
    return out;
}

/* ConfigMap and Secret data are ours as a whole: keys we no longer
 * generate are removed (Slinky replaces the data map too). */
static int owns_whole(const cJSON *desired, const char *field)
{
    const char *kind = json_get_str_or(desired, "kind", "");
    return (strcmp(kind, "ConfigMap") == 0 || strcmp(kind, "Secret") == 0) &&
           (strcmp(field, "data") == 0 || strcmp(field, "binaryData") == 0);
}

cJSON *objsync_diff(const cJSON *desired, const cJSON *live)
{
    cJSON *patch = cJSON_CreateObject();
    const cJSON *dmeta = json_child(desired, "metadata");
    const cJSON *lmeta = json_child(live, "metadata");
    static const char *const maps[] = {"labels", "annotations"};
    for (size_t i = 0; i < 2; i++) {
        cJSON *d = subset_diff(json_child(dmeta, maps[i]), json_child(lmeta, maps[i]));
        if (d)
            json_set(json_obj_ensure(patch, "metadata"), maps[i], d);
    }
    const cJSON *refs = json_child(dmeta, "ownerReferences");
    if (refs && !json_subset(refs, json_child(lmeta, "ownerReferences")))
        json_set(json_obj_ensure(patch, "metadata"), "ownerReferences", cJSON_Duplicate(refs, 1));
    for (const cJSON *f = desired ? desired->child : NULL; f; f = f->next) {
        if (!strcmp(f->string, "metadata") || !strcmp(f->string, "apiVersion") ||
            !strcmp(f->string, "kind") || !strcmp(f->string, "status"))
            continue;
        cJSON *d;
        if (owns_whole(desired, f->string)) {
            /* A generated file that is gone must go from the object too. */
            const cJSON *l = json_child(live, f->string);
            cJSON *empty = l ? NULL : cJSON_CreateObject();
            d = json_merge_diff(l ? l : empty, f);
            cJSON_Delete(empty);
        } else {
            d = subset_diff(f, json_child(live, f->string));
        }
        if (d)
            json_set(patch, f->string, d);
    }
    if (patch->child == NULL) {
        cJSON_Delete(patch);
        return NULL;
    }
    return patch;
}

static int has_ref_uid(const cJSON *live, const char *uid)
{
    const cJSON *refs = json_get(live, "metadata.ownerReferences");
    if (uid == NULL || *uid == '\0')
        return 0;
    for (const cJSON *r = cJSON_IsArray(refs) ? refs->child : NULL; r; r = r->next)
        if (strcmp(json_get_str_or(r, "uid", ""), uid) == 0)
            return 1;
    return 0;
}

static int has_managed_label(const cJSON *live)
{
    const cJSON *labels = json_get(live, "metadata.labels");
    /* json_child, not a path lookup: the label key has dots. */
    const cJSON *v = json_child(labels, OBJSYNC_MANAGED_BY_LABEL);
    return cJSON_IsString(v) && strcmp(v->valuestring, OBJSYNC_MANAGED_BY) == 0;
}

int objsync_owned_by(const cJSON *live, const char *owner_uid)
{
    return has_managed_label(live) || has_ref_uid(live, owner_uid);
}

int objsync_owned(const cJSON *desired, const cJSON *live)
{
    if (has_managed_label(live))
        return 1;
    const cJSON *refs = json_get(desired, "metadata.ownerReferences");
    for (const cJSON *r = cJSON_IsArray(refs) ? refs->child : NULL; r; r = r->next)
        if (has_ref_uid(live, json_get_str(r, "uid")))
            return 1;
    return 0;
}

/* desired with the managed-by label (a new object, owned by the caller). */
static cJSON *with_label(const cJSON *desired)
{
    cJSON *obj = cJSON_Duplicate(desired, 1);
    cJSON *labels = json_obj_ensure(json_obj_ensure(obj, "metadata"), "labels");
    json_set_str(labels, OBJSYNC_MANAGED_BY_LABEL, OBJSYNC_MANAGED_BY);
    return obj;
}

static void hash_of(const cJSON *want, char out[OBJSYNC_HASH_MAX])
{
    char *bytes = json_canonical(want);
    uint64_t h = 14695981039346656037ull;
    for (const unsigned char *p = (const unsigned char *)(bytes ? bytes : ""); *p; p++) {
        h ^= *p;
        h *= 1099511628211ull;
    }
    free(bytes);
    snprintf(out, OBJSYNC_HASH_MAX, "%016llx", (unsigned long long)h);
}

void objsync_adopted_hash(const cJSON *desired, char out[OBJSYNC_HASH_MAX])
{
    cJSON *want = with_label(desired);
    hash_of(want, out);
    cJSON_Delete(want);
}

static const char *adopted_mark(const cJSON *live)
{
    const cJSON *v = json_child(json_get(live, "metadata.annotations"), OBJSYNC_ADOPTED_ANNOTATION);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int objsync_adopted_keeps(const cJSON *desired, const cJSON *live)
{
    if (live == NULL || !objsync_owned(desired, live))
        return 0;
    if (!has_managed_label(live))
        return 1;
    const char *mark = adopted_mark(live);
    if (mark == NULL)
        return 0;
    char h[OBJSYNC_HASH_MAX];
    objsync_adopted_hash(desired, h);
    return strcmp(mark, h) == 0;
}

/* The adoption write: our label and the hash of want (which has it), and
 * nothing else of the object. */
static cJSON *adopt_patch(const cJSON *want)
{
    char h[OBJSYNC_HASH_MAX];
    hash_of(want, h);
    cJSON *patch = cJSON_CreateObject();
    cJSON *meta = json_obj_ensure(patch, "metadata");
    json_set_str(json_obj_ensure(meta, "labels"), OBJSYNC_MANAGED_BY_LABEL, OBJSYNC_MANAGED_BY);
    json_set_str(json_obj_ensure(meta, "annotations"), OBJSYNC_ADOPTED_ANNOTATION, h);
    return patch;
}

/* Appends to out (size bytes, always NUL-terminated); a long list is cut. */
static void addf(char *out, size_t size, const char *fmt, const char *a, const char *b)
{
    size_t n = strlen(out);
    if (n + 1 < size)
        snprintf(out + n, size - n, fmt, a, b);
}

/* The fields of a patch and, for data maps, their keys ("data [slurm.conf
 * set, cgroup.conf removed]"): what a debug line may say about a write.
 * Values never reach a log, so a Secret's keys, tokens and passwords cannot
 * leak through it at any level. */
static void describe_patch(const cJSON *patch, char *out, size_t size)
{
    out[0] = '\0';
    for (const cJSON *f = patch ? patch->child : NULL; f; f = f->next) {
        addf(out, size, "%s%s", f == patch->child ? "" : ", ", f->string);
        if (!cJSON_IsObject(f))
            continue;
        int data = strcmp(f->string, "data") == 0 || strcmp(f->string, "stringData") == 0 ||
                   strcmp(f->string, "binaryData") == 0;
        addf(out, size, "%s%s", " [", "");
        for (const cJSON *k = f->child; k; k = k->next)
            addf(out, size, "%s%s", k == f->child ? "" : ", ", k->string);
        if (data)
            addf(out, size, "%s%s", " (values not logged)", "");
        addf(out, size, "%s%s", "]", "");
    }
}

int objsync_ensure(objsync *os, const store *cache, const kube_res *res, const cJSON *desired, objsync_cb cb,
                   void *data)
{
    const char *name = json_get_str(desired, "metadata.name");
    const char *ns = json_get_str_or(desired, "metadata.namespace", "");
    if (name == NULL || *name == '\0')
        return OP_EINVAL;
    const sobj *cur = store_get(cache, ns, name);
    if (is_pending(os, res, ns, name, cur))
        return OBJSYNC_PENDING;
    cJSON *want = with_label(desired);
    if (cur == NULL) {
        char fkey[1024];
        snprintf(fkey, sizeof(fkey), "%s/%s/%s", res->plural, ns, name);
        if (foreign_fresh(os, fkey)) {
            cJSON_Delete(want);
            return OBJSYNC_NOT_OWNED;
        }
        struct write *w = begin(os, res, ns, name, cur, cb, data);
        if (is_filtered(os, cache)) {
            w->res = res;
            w->ns = xstrdup(ns);
            w->name = xstrdup(name);
            w->want = cJSON_Duplicate(want, 1);
        }
        log_debug("objsync: creating %s %s/%s", res->kind, ns, name);
        kube_create(os->client, res, ns, want, on_written, w);
        cJSON_Delete(want);
        return OBJSYNC_WRITING;
    }
    const cJSON *live = cur->json;
    if (live == NULL) {
        cJSON_Delete(want);
        return OP_EINVAL; /* the store of this kind must keep JSON */
    }
    if (!objsync_owned(desired, live)) {
        cJSON_Delete(want);
        return OBJSYNC_NOT_OWNED;
    }
    if (json_get_bool(live, "immutable", 0)) {
        cJSON_Delete(want);
        return OBJSYNC_IN_SYNC;
    }

    cJSON *patch;
    const char *mark = adopted_mark(live);
    if (!has_managed_label(live)) {
        patch = adopt_patch(want);
        log_info("objsync: adopting %s %s/%s as it is (it has our owner, not our label)", res->kind, ns,
                 name);
    } else if (mark) {
        char h[OBJSYNC_HASH_MAX];
        hash_of(want, h);
        if (strcmp(mark, h) == 0) {
            cJSON_Delete(want);
            return OBJSYNC_IN_SYNC;
        }
        patch = objsync_diff(want, live);
        if (patch == NULL)
            patch = cJSON_CreateObject();
        json_set(json_obj_ensure(json_obj_ensure(patch, "metadata"), "annotations"),
                 OBJSYNC_ADOPTED_ANNOTATION, cJSON_CreateNull());
        log_info("objsync: %s %s/%s was adopted as it was; what slurmop writes for it changed: converging it",
                 res->kind, ns, name);
    } else {
        patch = objsync_diff(want, live);
    }
    cJSON_Delete(want);
    if (patch == NULL)
        return OBJSYNC_IN_SYNC;
    struct write *w = begin(os, res, ns, name, cur, cb, data);
    if (log_enabled(LOGL_DEBUG)) {
        /* Field names only: a Secret's or ConfigMap's values (keys, tokens,
         * passwords) must never reach a log at any level. */
        char what[512];
        describe_patch(patch, what, sizeof(what));
        log_debug("objsync: patching %s %s/%s: %s", res->kind, ns, name, what);
    }
    kube_patch(os->client, res, ns, name, NULL, KUBE_PATCH_MERGE, patch, NULL, 0, on_written, w);
    cJSON_Delete(patch);
    return OBJSYNC_WRITING;
}

int objsync_delete(objsync *os, const store *cache, const kube_res *res, const char *ns, const char *name,
                   objsync_cb cb, void *data)
{
    const sobj *cur = store_get(cache, ns, name);
    if (is_pending(os, res, ns, name, cur))
        return OBJSYNC_PENDING;
    if (cur == NULL || cur->deleting)
        return OBJSYNC_IN_SYNC;
    struct write *w = begin(os, res, ns, name, cur, cb, data);
    kube_delete_opts o = {.uid = cur->uid, .grace_seconds = -1, .propagation = "Background"};
    kube_delete(os->client, res, ns, name, &o, on_written, w);
    return OBJSYNC_WRITING;
}
