/* ks_store: versions, resources, objects, the write path, history and
 * LIST snapshots.
 *
 * Every change goes through ks_store_create / ks_store_update / ks_store_remove:
 * they bump the global resourceVersion, serialise the new state once,
 * record the event in the resource's history ring, hand it to the watches,
 * and run the controllers' hooks (kubelet, garbage collector, CRDs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubesim/ks_int.h"
#include "core/err.h"
#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"

/* ---- versions ---------------------------------------------------------- */

const char *ver_label(const ks_ver *v, const char *key)
{
    const char *p = v->data + v->labels_off;
    while (*p) {
        const char *val = p + strlen(p) + 1;
        if (strcmp(p, key) == 0)
            return val;
        p = val + strlen(val) + 1;
    }
    return NULL;
}

const char *ver_field(const ks_ver *v, const char *field)
{
    if (strcmp(field, "metadata.name") == 0)
        return ver_name(v);
    if (strcmp(field, "metadata.namespace") == 0)
        return ver_ns(v);
    const char *p = v->data + v->fields_off;
    while (*p) {
        const char *val = p + strlen(p) + 1;
        if (strcmp(p, field) == 0)
            return val;
        p = val + strlen(val) + 1;
    }
    return "";
}

void ver_ref(ks_ver *v)
{
    v->refs++;
}

void ver_unref(ks_ver *v)
{
    if (v && --v->refs == 0)
        free(v);
}

cJSON *ver_parse(const ks_ver *v)
{
    cJSON *o = json_parse(v->data, v->len, NULL);
    if (o == NULL)
        abort(); /* our own serialisation: cannot be malformed */
    return o;
}

/* Go's ObjectMeta field order, which is also the order kube-apiserver
 * writes; resourceVersion precedes labels and annotations, so the first
 * "resourceVersion" key after "metadata" is always ours. */
static const char *const meta_order[] = {
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
    NULL,
};

static void reorder(cJSON *o, const char *const *order)
{
    cJSON *front = NULL, *tail = NULL;
    for (int i = 0; order[i]; i++) {
        cJSON *c = cJSON_DetachItemFromObjectCaseSensitive(o, order[i]);
        if (c == NULL)
            continue;
        c->prev = tail;
        c->next = NULL;
        if (tail)
            tail->next = c;
        else
            front = c;
        tail = c;
    }
    if (front == NULL)
        return;
    /* Splice the ordered keys in front of whatever is left. */
    cJSON *rest = o->child;
    tail->next = rest;
    if (rest) {
        front->prev = rest->prev; /* cJSON keeps child->prev = last element */
        rest->prev = tail;
    } else {
        front->prev = tail;
    }
    o->child = front;
}

static int key_cmp(const void *a, const void *b)
{
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    return strcmp(x->string, y->string);
}

/* Sort the keys of every object below o (o itself included), as Go's
 * encoding of maps does. The stored bytes are then canonical: two states
 * are equal exactly when their serialisations are, which makes no-op
 * detection a memcmp. Most objects are already sorted after the first
 * write, so sortedness is checked before anything is allocated. */
static void sort_keys(cJSON *o)
{
    if (cJSON_IsArray(o)) {
        for (cJSON *c = o->child; c; c = c->next)
            sort_keys(c);
        return;
    }
    if (!cJSON_IsObject(o) || o->child == NULL)
        return;
    int n = 0, sorted = 1;
    for (cJSON *c = o->child; c; c = c->next) {
        if (c->next && strcmp(c->string, c->next->string) > 0)
            sorted = 0;
        n++;
        sort_keys(c);
    }
    if (sorted)
        return;
    cJSON *stack[64];
    cJSON **v = n <= 64 ? stack : xmalloc(sizeof(*v) * (size_t)n);
    n = 0;
    for (cJSON *c = o->child; c; c = c->next)
        v[n++] = c;
    qsort(v, (size_t)n, sizeof(*v), key_cmp);
    for (int i = 0; i < n; i++) {
        v[i]->prev = i ? v[i - 1] : v[n - 1];
        v[i]->next = i + 1 < n ? v[i + 1] : NULL;
    }
    o->child = v[0];
    if (v != stack)
        free(v);
}

static void canonicalize(const ks_res *r, cJSON *obj)
{
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    if (r->flags & KSR_CUSTOM) {
        /* unstructured: sorted at every level (metadata in ObjectMeta order) */
        if (meta)
            cJSON_DetachItemViaPointer(obj, meta);
        sort_keys(obj);
    } else {
        /* built-ins: kind, apiVersion, metadata, spec, the rest, status last */
        cJSON *status = cJSON_DetachItemFromObjectCaseSensitive(obj, "status");
        static const char *const top[] = {"kind", "apiVersion", "metadata", "spec", NULL};
        reorder(obj, top);
        if (status)
            cJSON_AddItemToObject(obj, "status", status);
        for (cJSON *c = obj->child; c; c = c->next)
            if (c != meta)
                sort_keys(c);
    }
    if (cJSON_IsObject(meta)) {
        reorder(meta, meta_order);
        for (cJSON *c = meta->child; c; c = c->next)
            sort_keys(c);
    }
    if (meta && (r->flags & KSR_CUSTOM)) {
        /* back in its sorted place: apiVersion, kind, metadata, ... */
        cJSON *after = NULL;
        for (cJSON *c = obj->child; c; c = c->next)
            if (strcmp(c->string, "metadata") < 0)
                after = c;
        if (after == NULL) {
            meta->next = obj->child;
            meta->prev = obj->child ? obj->child->prev : meta;
            if (obj->child)
                obj->child->prev = meta;
            obj->child = meta;
        } else {
            meta->next = after->next;
            meta->prev = after;
            if (after->next)
                after->next->prev = meta;
            else
                obj->child->prev = meta;
            after->next = meta;
        }
    }
}

static void pack_str(buf_t *b, const char *s)
{
    if (buf_append(b, s, strlen(s) + 1) != 0)
        abort();
}

static void field_value(const cJSON *obj, const char *path, char *out, size_t n)
{
    const cJSON *v = json_get(obj, path);
    if (cJSON_IsString(v))
        snprintf(out, n, "%s", v->valuestring);
    else if (cJSON_IsBool(v))
        snprintf(out, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsNumber(v))
        snprintf(out, n, "%lld", json_num_ll(v, 0));
    else
        out[0] = '\0';
}

static ks_ver *ver_alloc(const char *json, size_t len, const buf_t *extra)
{
    ks_ver *v = xmalloc(sizeof(*v) + len + 1 + extra->len);
    memset(v, 0, sizeof(*v));
    v->refs = 1;
    v->len = (uint32_t)len;
    memcpy(v->data, json, len);
    v->data[len] = '\0';
    memcpy(v->data + len + 1, extra->data, extra->len);
    return v;
}

static void ver_locate(ks_ver *v)
{
    const char *j = v->data;
    const char *m = strstr(j, ",\"metadata\":");
    v->hdr_len = m ? (uint16_t)(m - j + 1) : 0;
    const char *rvk = strstr(j + v->hdr_len, "\"resourceVersion\":\"");
    if (rvk) {
        const char *d = rvk + strlen("\"resourceVersion\":\"");
        const char *e = strchr(d, '"');
        v->rv_off = (uint32_t)(d - j);
        v->rv_len = (uint16_t)(e - d);
        uint64_t rv = 0;
        char tmp[32];
        size_t n = (size_t)(e - d) < sizeof(tmp) - 1 ? (size_t)(e - d) : sizeof(tmp) - 1;
        memcpy(tmp, d, n);
        tmp[n] = '\0';
        if (parse_u64(tmp, &rv) == 0)
            v->rv = rv;
    }
}

ks_ver *ver_build(const ks_res *r, cJSON *obj)
{
    canonicalize(r, obj);
    char *json = json_dump(obj);
    size_t len = strlen(json);
    buf_t extra;
    buf_init(&extra, BUF_UNLIMITED);
    uint32_t base = (uint32_t)len + 1;
    uint32_t ns_off = base, name_off, labels_off, fields_off;
    pack_str(&extra, json_get_str_or(obj, "metadata.namespace", ""));
    name_off = base + (uint32_t)extra.len;
    pack_str(&extra, json_get_str_or(obj, "metadata.name", ""));
    labels_off = base + (uint32_t)extra.len;
    const cJSON *labels = json_get(obj, "metadata.labels");
    for (const cJSON *l = cJSON_IsObject(labels) ? labels->child : NULL; l; l = l->next) {
        if (!cJSON_IsString(l))
            continue;
        pack_str(&extra, l->string);
        pack_str(&extra, l->valuestring);
    }
    pack_str(&extra, "");
    fields_off = base + (uint32_t)extra.len;
    for (int i = 0; r->fields && r->fields[i]; i++) {
        char val[512];
        field_value(obj, r->fields[i], val, sizeof(val));
        pack_str(&extra, r->fields[i]);
        pack_str(&extra, val);
    }
    pack_str(&extra, "");
    ks_ver *v = ver_alloc(json, len, &extra);
    v->ns_off = ns_off;
    v->name_off = name_off;
    v->labels_off = labels_off;
    v->fields_off = fields_off;
    ver_locate(v);
    buf_free(&extra);
    free(json);
    return v;
}

ks_ver *ver_restamp(const ks_ver *v, uint64_t rv)
{
    char num[24];
    int nl = snprintf(num, sizeof(num), "%llu", (unsigned long long)rv);
    size_t extra_len = 0;
    /* extra area: from len+1 to the end of the packed fields */
    const char *p = v->data + v->fields_off;
    while (*p) {
        p += strlen(p) + 1;
        p += strlen(p) + 1;
    }
    extra_len = (size_t)(p + 1 - (v->data + v->len + 1));
    if (v->rv_off == 0) {
        /* no resourceVersion in the bytes (cannot happen for stored objects) */
        ks_ver *c = xmalloc(sizeof(*c) + v->len + 1 + extra_len);
        memcpy(c, v, sizeof(*c) + v->len + 1 + extra_len);
        c->refs = 1;
        c->rv = rv;
        return c;
    }
    size_t newlen = v->len - v->rv_len + (size_t)nl;
    ks_ver *c = xmalloc(sizeof(*c) + newlen + 1 + extra_len);
    memcpy(c, v, sizeof(*c));
    c->refs = 1;
    c->len = (uint32_t)newlen;
    c->rv = rv;
    memcpy(c->data, v->data, v->rv_off);
    memcpy(c->data + v->rv_off, num, (size_t)nl);
    memcpy(c->data + v->rv_off + nl, v->data + v->rv_off + v->rv_len, v->len - v->rv_off - v->rv_len);
    c->data[newlen] = '\0';
    memcpy(c->data + newlen + 1, v->data + v->len + 1, extra_len);
    long delta = (long)newlen - (long)v->len;
    c->rv_len = (uint16_t)nl;
    c->ns_off = (uint32_t)((long)v->ns_off + delta);
    c->name_off = (uint32_t)((long)v->name_off + delta);
    c->labels_off = (uint32_t)((long)v->labels_off + delta);
    c->fields_off = (uint32_t)((long)v->fields_off + delta);
    return c;
}

/* ---- resources and routes ---------------------------------------------- */

ks_res *res_new(ks *k)
{
    ks_res *r = xcalloc(1, sizeof(*r));
    map_init(&r->objs);
    list_init(&r->watches);
    list_init(&r->link);
    r->hist.max = k->cfg.history ? k->cfg.history : 1;
    list_insert_tail(&k->resources, &r->link);
    return r;
}

static void hist_clear(ks_hist *h, uint64_t compacted)
{
    for (size_t i = 0; i < h->n; i++) {
        ks_event *e = &h->ring[(h->start + i) % h->cap];
        ver_unref(e->obj);
        ver_unref(e->prev);
    }
    h->start = h->n = 0;
    if (compacted > h->compacted)
        h->compacted = compacted;
}

void res_free(ks_res *r)
{
    hist_clear(&r->hist, 0);
    free(r->hist.ring);
    map_free(&r->objs);
    for (int i = 0; i < r->n_views; i++) {
        ks_view *v = &r->views[i];
        free(v->version);
        free(v->api_version);
        free(v->spec_replicas_path);
        free(v->status_replicas_path);
        free(v->label_selector_path);
        cJSON_Delete(v->schema);
        cJSON_Delete(v->columns);
    }
    free(r->views);
    free(r->group);
    free(r->plural);
    free(r->singular);
    free(r->kind);
    free(r->list_kind);
    free(r->short_names);
    free(r->categories);
    free(r->qual);
    free(r->qual_kind);
    free(r->crd_name);
    free(r);
}

void ks_route_free(void *v)
{
    ks_route *rt = v;
    free(rt->key);
    free(rt);
}

const map_type ks_route_type = {.val_free = ks_route_free};

void res_add_route(ks *k, ks_res *r, int view)
{
    ks_route *rt = xcalloc(1, sizeof(*rt));
    rt->key = xasprintf("%s/%s/%s", r->group, r->views[view].version, r->plural);
    rt->res = r;
    rt->view = view;
    ks_route *old = map_put(&k->routes, rt->key, rt);
    if (old)
        ks_route_free(old);
}

void res_unroute(ks *k, ks_res *r)
{
    const char *key;
    void *val;
    size_t it = 0;
    char *dead[64];
    int n = 0;
    while (map_next(&k->routes, &it, &key, &val))
        if (((ks_route *)val)->res == r && n < 64)
            dead[n++] = (char *)key;
    for (int i = 0; i < n; i++)
        map_drop(&k->routes, dead[i]);
}

ks_route *route_find(ks *k, const char *group, const char *version, const char *plural)
{
    char key[512];
    snprintf(key, sizeof(key), "%s/%s/%s", group, version, plural);
    return map_get(&k->routes, key);
}

ks_res *res_find(ks *k, const char *group, const char *plural)
{
    list_node *n;
    list_foreach(n, &k->resources)
    {
        ks_res *r = list_entry(n, ks_res, link);
        if (!r->removed && strcmp(r->group, group) == 0 && strcmp(r->plural, plural) == 0)
            return r;
    }
    return NULL;
}

ks_res *res_by_kind(ks *k, const char *api_version, const char *kind)
{
    list_node *n;
    list_foreach(n, &k->resources)
    {
        ks_res *r = list_entry(n, ks_res, link);
        if (r->removed || strcmp(r->kind, kind) != 0)
            continue;
        for (int i = 0; i < r->n_views; i++)
            if (api_version == NULL || strcmp(r->views[i].api_version, api_version) == 0)
                return r;
    }
    return NULL;
}

/* ---- objects ----------------------------------------------------------- */

void obj_key(char *out, size_t n, const char *ns, const char *name)
{
    if (ns && *ns)
        snprintf(out, n, "%s/%s", ns, name);
    else
        snprintf(out, n, "%s", name);
}

ks_obj *obj_find(ks_res *r, const char *ns, const char *name)
{
    char key[600];
    obj_key(key, sizeof(key), r->namespaced ? ns : NULL, name);
    return map_get(&r->objs, key);
}

uint64_t ks_store_next_rv(ks *k)
{
    return ++k->rv;
}

static void set_rv(cJSON *obj, uint64_t rv)
{
    char num[24];
    snprintf(num, sizeof(num), "%llu", (unsigned long long)rv);
    json_set_str(json_obj_ensure(obj, "metadata"), "resourceVersion", num);
}

void hist_push(ks *k, ks_res *r, int type, ks_ver *obj, ks_ver *prev)
{
    ks_hist *h = &r->hist;
    if (h->n == h->cap && h->cap < h->max) {
        /* grow the ring (unwrapping it) up to the configured size */
        size_t ncap = h->cap ? h->cap * 2 : 64;
        if (ncap > h->max)
            ncap = h->max;
        ks_event *ring = xcalloc(ncap, sizeof(ks_event));
        for (size_t i = 0; i < h->n; i++)
            ring[i] = h->ring[(h->start + i) % h->cap];
        free(h->ring);
        h->ring = ring;
        h->cap = ncap;
        h->start = 0;
    }
    if (h->n == h->cap) {
        ks_event *old = &h->ring[h->start];
        if (old->rv > h->compacted)
            h->compacted = old->rv;
        ver_unref(old->obj);
        ver_unref(old->prev);
        h->start = (h->start + 1) % h->cap;
        h->n--;
    }
    ks_event *e = &h->ring[(h->start + h->n) % h->cap];
    e->rv = obj->rv;
    e->type = type;
    e->obj = obj;
    e->prev = prev;
    ver_ref(obj);
    if (prev)
        ver_ref(prev);
    h->n++;
    watch_dispatch(k, r, e);
}

int ks_store_deletion_done(const cJSON *obj)
{
    if (json_get_str(obj, "metadata.deletionTimestamp") == NULL)
        return 0;
    if (json_get_int(obj, "metadata.deletionGracePeriodSeconds", 0) != 0)
        return 0;
    if (json_len(json_get(obj, "metadata.finalizers")) > 0)
        return 0;
    if (strcmp(json_get_str_or(obj, "kind", ""), "Namespace") == 0 &&
        json_len(json_get(obj, "spec.finalizers")) > 0)
        return 0;
    return 1;
}

ks_obj *ks_store_create(ks *k, ks_res *r, cJSON *obj, int flags, ks_ver **out)
{
    if (flags & WR_DRY_RUN) {
        *out = ver_build(r, obj);
        cJSON_Delete(obj);
        return NULL;
    }
    uint64_t rv = ks_store_next_rv(k);
    set_rv(obj, rv);
    ks_ver *v = ver_build(r, obj);
    ks_obj *o = xcalloc(1, sizeof(*o));
    char key[600];
    obj_key(key, sizeof(key), r->namespaced ? ver_ns(v) : NULL, ver_name(v));
    o->key = xstrdup(key);
    o->res = r;
    o->cur = v;
    list_init(&o->gc_link);
    snprintf(o->uid, sizeof(o->uid), "%s", json_get_str_or(obj, "metadata.uid", ""));
    map_put(&r->objs, o->key, o);
    if (o->uid[0])
        map_put(&k->uids, o->uid, o);
    hist_push(k, r, KS_ADDED, v, NULL);
    ks_store_on_change(k, o, NULL, v, obj);
    if (out) {
        ver_ref(o->cur);
        *out = o->cur;
    }
    cJSON_Delete(obj);
    return o;
}

void ks_store_update(ks *k, ks_obj *o, cJSON *obj, int flags, ks_ver **out, int *gone)
{
    ks_res *r = o->res;
    if (gone)
        *gone = 0;
    /* Serialised with the current RV, an unchanged object gives the same bytes. */
    set_rv(obj, o->cur->rv);
    ks_ver *same = ver_build(r, obj);
    if (same->len == o->cur->len && memcmp(same->data, o->cur->data, same->len) == 0) {
        ver_unref(same);
        cJSON_Delete(obj);
        if (out) {
            ver_ref(o->cur);
            *out = o->cur;
        }
        return;
    }
    if (flags & WR_DRY_RUN) {
        *out = same;
        cJSON_Delete(obj);
        return;
    }
    uint64_t rv = ks_store_next_rv(k);
    set_rv(obj, rv);
    ks_ver *v = ver_restamp(same, rv);
    ver_unref(same);
    if (ks_store_deletion_done(obj)) {
        /* The last finalizer went: the object is deleted instead of
         * updated, as the generic store does (watchers see only DELETED,
         * carrying the state before this write). */
        ks_store_remove_at(k, o, rv);
        if (out)
            *out = v;
        else
            ver_unref(v);
        if (gone)
            *gone = 1;
        cJSON_Delete(obj);
        return;
    }
    ks_ver *prev = o->cur;
    o->cur = v;
    hist_push(k, r, KS_MODIFIED, v, prev);
    ks_store_on_change(k, o, prev, v, obj);
    ver_unref(prev);
    if (out) {
        ver_ref(o->cur);
        *out = o->cur;
    }
    cJSON_Delete(obj);
}

static void remove_impl(ks *k, ks_obj *o, uint64_t rv, ks_ver **out)
{
    ks_res *r = o->res;
    ks_ver *tomb = ver_restamp(o->cur, rv);
    map_del(&r->objs, o->key);
    if (o->uid[0] && map_get(&k->uids, o->uid) == o)
        map_del(&k->uids, o->uid);
    hist_push(k, r, KS_DELETED, tomb, o->cur);
    ks_event_twin(k, o, NULL, rv);
    ks_store_on_change(k, o, o->cur, NULL, NULL);
    ctrl_orefs_clear(k, o);
    if (list_is_linked(&o->gc_link))
        list_remove(&o->gc_link);
    kubelet_obj_gone(k, o);
    if (out)
        *out = tomb;
    else
        ver_unref(tomb);
    ver_unref(o->cur);
    free(o->key);
    free(o);
}

void ks_store_remove(ks *k, ks_obj *o, ks_ver **out)
{
    remove_impl(k, o, ks_store_next_rv(k), out);
}

void ks_store_remove_at(ks *k, ks_obj *o, uint64_t rv)
{
    remove_impl(k, o, rv, NULL);
}

/* ---- sorted views and snapshots ---------------------------------------- */

static int ver_cmp(const void *a, const void *b)
{
    const ks_ver *x = *(ks_ver *const *)a, *y = *(ks_ver *const *)b;
    int c = strcmp(ver_ns(x), ver_ns(y));
    return c ? c : strcmp(ver_name(x), ver_name(y));
}

ks_ver **ks_store_sorted(ks_res *r, const char *ns, size_t *n)
{
    ks_ver **v = xmalloc(sizeof(*v) * (r->objs.count + 1));
    size_t i = 0, it = 0;
    const char *key;
    void *val;
    while (map_next(&r->objs, &it, &key, &val)) {
        ks_obj *o = val;
        if (ns && strcmp(ver_ns(o->cur), ns) != 0)
            continue;
        v[i++] = o->cur;
    }
    qsort(v, i, sizeof(*v), ver_cmp);
    *n = i;
    return v;
}

void snap_free(ks_snap *s)
{
    for (size_t i = 0; i < s->n; i++)
        ver_unref(s->items[i]);
    free(s->items);
    free(s);
}

ks_snap *snap_lookup(ks *k, ks_res *r, uint64_t rv)
{
    list_node *n;
    list_foreach(n, &k->snaps)
    {
        ks_snap *s = list_entry(n, ks_snap, link);
        if (s->res == r && s->rv == rv) {
            /* most recently used first */
            list_remove(&s->link);
            list_insert_head(&k->snaps, &s->link);
            return s;
        }
    }
    return NULL;
}

void snaps_expire(ks *k, int all)
{
    long long now = ks_now_ms();
    list_node *n, *t;
    list_foreach_safe(n, t, &k->snaps)
    {
        ks_snap *s = list_entry(n, ks_snap, link);
        if (all || now - (long long)s->created_ms > (long long)k->cfg.continue_ttl_ms || s->res->removed) {
            list_remove(&s->link);
            snap_free(s);
            k->n_snaps--;
        }
    }
}

static void snap_insert(ks *k, ks_snap *s)
{
    list_insert_head(&k->snaps, &s->link);
    if (++k->n_snaps > 64) {
        ks_snap *last = list_entry(k->snaps.prev, ks_snap, link);
        list_remove(&last->link);
        snap_free(last);
        k->n_snaps--;
    }
}

ks_snap *snap_at(ks *k, ks_res *r, uint64_t rv)
{
    snaps_expire(k, 0);
    ks_snap *s = snap_lookup(k, r, rv);
    if (s)
        return s;
    ks_hist *h = &r->hist;
    if (rv > k->rv)
        return NULL;
    if (rv < h->compacted)
        return NULL;
    /* Start from the current state and undo every event after rv. */
    map_t m;
    map_init(&m);
    size_t it = 0;
    const char *key;
    void *val;
    while (map_next(&r->objs, &it, &key, &val))
        map_put(&m, ((ks_obj *)val)->key, ((ks_obj *)val)->cur);
    char **tmpkeys = NULL;
    size_t ntmp = 0;
    for (size_t i = h->n; i-- > 0;) {
        ks_event *e = &h->ring[(h->start + i) % h->cap];
        if (e->rv <= rv)
            break;
        char kb[600];
        obj_key(kb, sizeof(kb), r->namespaced ? ver_ns(e->obj) : NULL, ver_name(e->obj));
        if (e->type == KS_ADDED) {
            map_del(&m, kb);
        } else {
            char *kc = xstrdup(kb);
            tmpkeys = xrealloc(tmpkeys, sizeof(char *) * (ntmp + 1));
            tmpkeys[ntmp++] = kc;
            map_put(&m, kc, e->prev);
        }
    }
    s = xcalloc(1, sizeof(*s));
    s->res = r;
    s->rv = rv;
    s->created_ms = (uint64_t)ks_now_ms();
    s->items = xmalloc(sizeof(ks_ver *) * (m.count + 1));
    it = 0;
    while (map_next(&m, &it, &key, &val)) {
        s->items[s->n++] = val;
        ver_ref(val);
    }
    qsort(s->items, s->n, sizeof(ks_ver *), ver_cmp);
    map_free(&m);
    for (size_t i = 0; i < ntmp; i++)
        free(tmpkeys[i]);
    free(tmpkeys);
    snap_insert(k, s);
    return s;
}

void hist_compact_all(ks *k)
{
    list_node *n;
    list_foreach(n, &k->resources)
    {
        ks_res *r = list_entry(n, ks_res, link);
        hist_clear(&r->hist, k->rv);
    }
    snaps_expire(k, 1);
}

/* ---- change hooks ------------------------------------------------------ */

void ks_store_on_change(ks *k, ks_obj *o, const ks_ver *old_ver, const ks_ver *new_ver, const cJSON *newobj)
{
    ks_res *r = o->res;
    if (r->group[0] == '\0' && strcmp(r->plural, "pods") == 0)
        kubelet_on_pod(k, o, old_ver, new_ver, newobj);
    else if (r->group[0] == '\0' && strcmp(r->plural, "nodes") == 0)
        kubelet_on_node(k, o, old_ver, new_ver);
    if (strcmp(r->plural, "customresourcedefinitions") == 0 &&
        strcmp(r->group, "apiextensions.k8s.io") == 0) {
        if (new_ver && newobj)
            types_crd_apply(k, newobj);
        else if (!new_ver)
            types_crd_remove(k, ver_name(old_ver));
    }
    ctrl_on_change(k, o, newobj, new_ver == NULL);
    if (new_ver && newobj)
        ks_event_twin(k, o, newobj, new_ver->rv);
    if (old_ver == NULL && new_ver && r->group[0] == '\0' && strcmp(r->plural, "namespaces") == 0)
        ks__namespace_created(k, ver_name(new_ver));
}

void ks_store_load(ks *k, ks_res *r, cJSON *obj)
{
    ks_ver *v = ver_build(r, obj);
    char key[600];
    obj_key(key, sizeof(key), r->namespaced ? ver_ns(v) : NULL, ver_name(v));
    ks_obj *old = map_get(&r->objs, key);
    if (old) {
        /* duplicate in the file: the later one wins */
        ver_unref(old->cur);
        old->cur = v;
        ks_store_on_change(k, old, NULL, v, obj);
        cJSON_Delete(obj);
        return;
    }
    ks_obj *o = xcalloc(1, sizeof(*o));
    o->key = xstrdup(key);
    o->res = r;
    o->cur = v;
    list_init(&o->gc_link);
    snprintf(o->uid, sizeof(o->uid), "%s", json_get_str_or(obj, "metadata.uid", ""));
    map_put(&r->objs, o->key, o);
    if (o->uid[0])
        map_put(&k->uids, o->uid, o);
    ks_store_on_change(k, o, NULL, v, obj);
    cJSON_Delete(obj);
}

/* Free an object without events (shutdown). */
void ks_store_drop(ks *k, ks_obj *o)
{
    ctrl_orefs_clear(k, o);
    if (list_is_linked(&o->gc_link))
        list_remove(&o->gc_link);
    kubelet_obj_gone(k, o);
    ver_unref(o->cur);
    free(o->key);
    free(o);
}
