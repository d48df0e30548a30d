#include "core/store.h"

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/intern.h"
#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/pset.h"
#include "core/rfc3339.h"

/* The bucket's value, its map key, is the interned string its objects'
 * links hold: a bucket exists only while one of them does, so the bucket
 * needs no reference of its own (and at one pod per bucket, as for the
 * node-name index, each byte of it counts once per pod). */
struct bucket {
    list_node head;
    size_t count;
};

/* A value held by one object maps to that object's link itself, tagged
 * (bit 0 set), and gets a struct bucket only when a second object comes:
 * indexes such as the node name or the Slurm name have one pod per value,
 * and a bucket each would be a malloc per pod per index. A bucket stays a
 * bucket until it is empty, so a cursor walking one never sees it change
 * into a single link under it. */
struct index {
    store_index_fn fn;
    void *data;
    char *label_key;  /* for label indexes (fn data) */
    map_t buckets;    /* value -> struct bucket, or a tagged struct sobj_link */
    size_t n_buckets; /* the values that have a struct bucket */
};

#define SINGLE_TAG ((uintptr_t)1)

static int is_single(const void *v)
{
    return ((uintptr_t)v & SINGLE_TAG) != 0;
}

static struct sobj_link *single_link(const void *v)
{
    return (struct sobj_link *)((uintptr_t)v & ~SINGLE_TAG);
}

static void *tag_single(struct sobj_link *l)
{
    return (void *)((uintptr_t)l | SINGLE_TAG);
}

struct relist {
    char *scope;
    uint64_t gen;
};

static void relist_free(void *v)
{
    struct relist *r = v;
    free(r->scope);
    free(r);
}

static const map_type relist_type = {.val_free = relist_free};

struct handler {
    store_handler fn;
    void *data;
};

static const char *obj_key(const void *o)
{
    return ((const sobj *)o)->key;
}

struct store {
    const store_kind *kind;
    pset by_key; /* the objects (each holds its key) */
    struct index idx[STORE_MAX_INDEXES];
    int n_idx;
    struct handler *handlers;
    int n_handlers;
    uint64_t gen;   /* relist generation counter */
    map_t relists;  /* scope ("" = all, else namespace) -> struct relist, while in progress */
    size_t bytes;
};

store *store_new(const store_kind *kind)
{
    store *s = xcalloc(1, sizeof(*s));
    s->kind = kind;
    pset_init(&s->by_key, obj_key);
    map_init_type(&s->relists, &relist_type);
    return s;
}

const store_kind *store_kind_of(const store *s)
{
    return s->kind;
}

/* The size of o's one allocation (obj_build lays it out). */
static size_t obj_block(const store *s, const sobj *o)
{
    size_t proj = s->kind->project ? (s->kind->proj_size + 7) / 8 * 8 : 0;
    return sizeof(*o) + (size_t)s->n_idx * sizeof(struct sobj_link) + proj +
           (size_t)(o->n_labels + o->n_annotations) * 2 * sizeof(char *) + strlen(o->key) + 1 +
           strlen(o->rv) + 1;
}

/* What o holds on the heap, as the allocator counts it: its block and the
 * JSON it keeps. The interned strings it references are shared with other
 * objects and counted by core/intern (istr_bytes), not here. */
static size_t obj_bytes(const store *s, const sobj *o)
{
    return mem_footprint(obj_block(s, o)) + json_heap_bytes(o->json);
}

static void obj_free(const store *s, sobj *o)
{
    for (int i = 0; i < o->n_labels * 2; i++)
        istr_put(o->labels[i]);
    for (int i = 0; i < o->n_annotations * 2; i++)
        istr_put(o->annotations[i]);
    for (int i = 0; i < s->n_idx; i++) {
        /* Unlinked from every index bucket before it goes. */
        assert(!list_is_linked(&o->links[i].node));
        istr_put(o->links[i].value);
    }
    istr_put(o->ns);
    istr_put(o->owner_kind);
    istr_put(o->owner_name);
    istr_put(o->owner_uid);
    cJSON_Delete(o->json); /* key, rv and the pairs live in o's own block */
    if (o->proj && s->kind->proj_release)
        s->kind->proj_release(o->proj);
    free(o);
}

static int pair_wanted(const cJSON *kv, const char *const *only)
{
    if (!cJSON_IsString(kv))
        return 0;
    if (only == NULL)
        return 1;
    for (const char *const *k = only; *k; k++)
        if (strcmp(*k, kv->string) == 0)
            return 1;
    return 0;
}

static uint16_t count_pairs(const cJSON *map, const char *const *only)
{
    int n = 0;
    for (const cJSON *kv = map ? map->child : NULL; kv; kv = kv->next)
        n += pair_wanted(kv, only);
    return (uint16_t)(n > UINT16_MAX ? UINT16_MAX : n);
}

/* Fill pairs (room for n pairs) with interned keys and values. */
static void intern_pairs(const cJSON *map, const char *const *only, const char **pairs, uint16_t n)
{
    int i = 0;
    for (const cJSON *kv = map ? map->child : NULL; kv && i < 2 * n; kv = kv->next) {
        if (!pair_wanted(kv, only))
            continue;
        pairs[i++] = istr_get(kv->string);
        pairs[i++] = istr_get(kv->valuestring);
    }
    assert(i == 2 * n); /* count_pairs counted the same pairs */
}

/* An object is one allocation: the sobj, its index links, its projection,
 * its label and annotation pairs, its key and its resourceVersion (an update builds a new
 * object, so none of them ever grows). At 8,192 pods and Nodes, four
 * mallocs fewer per object is ~80 bytes each. */
static sobj *obj_build(const store *s, const cJSON *obj)
{
    const cJSON *meta = json_child(obj, "metadata");
    const char *name = json_get_str(meta, "name");
    const char *ns = s->kind->namespaced ? json_get_str_or(meta, "namespace", "") : "";
    if (name == NULL || *name == '\0')
        return NULL;
    const char *rv = json_get_str_or(meta, "resourceVersion", "");
    const cJSON *labels = json_child(meta, "labels");
    const cJSON *anns = s->kind->annotations ? json_child(meta, "annotations") : NULL;
    uint16_t nl = count_pairs(labels, NULL);
    uint16_t na = anns ? count_pairs(anns, s->kind->annotations) : 0;
    size_t ns_len = strlen(ns), name_len = strlen(name), rv_len = strlen(rv);
    size_t head = sizeof(sobj) + (size_t)s->n_idx * sizeof(struct sobj_link);
    size_t pairs = (size_t)(nl + na) * 2 * sizeof(char *);
    size_t key_len = (ns_len ? ns_len + 1 : 0) + name_len;
    size_t proj = s->kind->project ? (s->kind->proj_size + 7) / 8 * 8 : 0;
    sobj *o = xcalloc(1, head + proj + pairs + key_len + 1 + rv_len + 1);
    if (proj)
        o->proj = (char *)o + head;
    head += proj;
    char *p = (char *)o + head;
    o->labels = nl ? (const char **)(void *)p : NULL;
    o->annotations = na ? (const char **)(void *)(p + (size_t)nl * 2 * sizeof(char *)) : NULL;
    o->n_labels = nl;
    o->n_annotations = na;
    intern_pairs(labels, NULL, o->labels, nl);
    if (na)
        intern_pairs(anns, s->kind->annotations, o->annotations, na);
    char *key = p + pairs;
    if (ns_len) {
        memcpy(key, ns, ns_len);
        key[ns_len] = '/';
        memcpy(key + ns_len + 1, name, name_len + 1);
    } else {
        memcpy(key, name, name_len + 1);
    }
    o->key = key;
    o->name = key + (ns_len ? ns_len + 1 : 0);
    o->rv = key + key_len + 1;
    memcpy(o->rv, rv, rv_len + 1);
    assert(o->rv + rv_len + 1 == (char *)o + head + pairs + key_len + 1 + rv_len + 1);
    o->ns = istr_get(ns);
    snprintf(o->uid, sizeof(o->uid), "%s", json_get_str_or(meta, "uid", ""));
    o->generation = json_get_int(meta, "generation", 0);
    o->created = rfc3339_secs(json_get_str(meta, "creationTimestamp"));
    o->deleting = rfc3339_secs(json_get_str(meta, "deletionTimestamp"));
    const cJSON *refs = json_child(meta, "ownerReferences");
    for (const cJSON *r = refs ? refs->child : NULL; r; r = r->next) {
        if (json_get_bool(r, "controller", 0)) {
            o->owner_kind = istr_get(json_get_str(r, "kind"));
            o->owner_name = istr_get(json_get_str(r, "name"));
            const char *uid = json_get_str(r, "uid");
            o->owner_uid = (uid && *uid) ? istr_get(uid) : NULL;
            break;
        }
    }
    if (s->kind->keep_json == STORE_JSON_FULL)
        o->json = cJSON_Duplicate(obj, 1);
    else if (s->kind->keep_json == STORE_JSON_TRIM && s->kind->trim)
        o->json = s->kind->trim(obj);
    if (o->proj)
        s->kind->project(obj, o->proj);
    for (int i = 0; i < s->n_idx; i++)
        list_init(&o->links[i].node);
    return o;
}

static void index_link(store *s, sobj *o)
{
    for (int i = 0; i < s->n_idx; i++) {
        struct index *ix = &s->idx[i];
        const char *v = ix->fn(o, ix->data);
        if (v == NULL || *v == '\0')
            continue;
        struct sobj_link *l = &o->links[i];
        assert(l->value == NULL && !list_is_linked(&l->node));
        void *cur = map_get(&ix->buckets, v);
        if (cur == NULL) {
            l->value = istr_get(v);
            map_put(&ix->buckets, l->value, tag_single(l));
            continue;
        }
        struct bucket *b;
        if (is_single(cur)) {
            struct sobj_link *first = single_link(cur);
            b = xcalloc(1, sizeof(*b));
            list_init(&b->head);
            list_insert_tail(&b->head, &first->node);
            b->count = 1;
            ix->n_buckets++;
            map_put(&ix->buckets, first->value, b);
        } else {
            b = cur;
        }
        const struct sobj_link *first = container_of(b->head.next, struct sobj_link, node);
        l->value = istr_ref(first->value);
        list_insert_tail(&b->head, &l->node);
        b->count++;
    }
}

static void index_unlink(store *s, sobj *o)
{
    for (int i = 0; i < s->n_idx; i++) {
        struct sobj_link *l = &o->links[i];
        if (l->value == NULL)
            continue;
        struct index *ix = &s->idx[i];
        void *cur = map_get(&ix->buckets, l->value);
        /* A linked object is in its bucket, so the bucket exists. */
        assert(cur != NULL);
        if (is_single(cur)) {
            assert(single_link(cur) == l && !list_is_linked(&l->node));
            map_del(&ix->buckets, l->value); /* before the value's last reference goes */
        } else if (cur) {
            struct bucket *b = cur;
            assert(b->count > 0);
            list_remove(&l->node);
            if (--b->count == 0) {
                map_del(&ix->buckets, l->value);
                free(b);
                ix->n_buckets--;
            }
        }
        istr_put(l->value);
        l->value = NULL;
    }
}

static void fire(store *s, const sobj *old_obj, const sobj *new_obj)
{
    for (int i = 0; i < s->n_handlers; i++)
        s->handlers[i].fn(s, old_obj, new_obj, s->handlers[i].data);
}

void store_notify(store *s, const sobj *old_obj, const sobj *new_obj)
{
    fire(s, old_obj, new_obj);
}

static void unlink_obj(store *s, sobj *o)
{
    assert(pset_get(&s->by_key, o->key) == o);
    assert(s->bytes >= obj_bytes(s, o));
    pset_del(&s->by_key, o);
    index_unlink(s, o);
    s->bytes -= obj_bytes(s, o);
}

static void link_obj(store *s, sobj *o)
{
    /* An object replaced under the same key was unlinked first. */
    assert(pset_get(&s->by_key, o->key) == NULL);
    pset_add(&s->by_key, o);
    index_link(s, o);
    s->bytes += obj_bytes(s, o);
}

/* The generation of a relist in progress that covers namespace ns, or 0. */
static uint64_t relist_gen(const store *s, const char *ns)
{
    if (s->relists.count == 0)
        return 0;
    struct relist *r = map_get(&s->relists, ns ? ns : "");
    if (r == NULL)
        r = map_get(&s->relists, "");
    return r ? r->gen : 0;
}

int store_upsert(store *s, const cJSON *obj)
{
    const cJSON *meta = json_child(obj, "metadata");
    const char *name = json_get_str(meta, "name");
    const char *ns = s->kind->namespaced ? json_get_str_or(meta, "namespace", "") : "";
    const char *rv = json_get_str_or(meta, "resourceVersion", "");
    char keybuf[512];
    if (name == NULL || *name == '\0')
        return OP_EINVAL;
    if (*ns)
        snprintf(keybuf, sizeof(keybuf), "%s/%s", ns, name);
    else
        snprintf(keybuf, sizeof(keybuf), "%s", name);

    sobj *old = pset_get(&s->by_key, keybuf);
    uint64_t gen = relist_gen(s, ns);
    if (old && strcmp(old->rv, rv) == 0 && *rv) {
        if (gen)
            old->seen_gen = gen;
        return 0;
    }
    sobj *o = obj_build(s, obj);
    if (o == NULL)
        return OP_EINVAL;
    /* The key the old object was looked up by is the new object's key. */
    assert(strcmp(o->key, keybuf) == 0);
    o->seen_gen = gen ? gen : (old ? old->seen_gen : 0);
    if (old)
        unlink_obj(s, old);
    link_obj(s, o);
    fire(s, old, o);
    if (old)
        obj_free(s, old);
    return 1;
}

static int delete_obj(store *s, sobj *o)
{
    unlink_obj(s, o);
    fire(s, o, NULL);
    obj_free(s, o);
    return 1;
}

int store_delete(store *s, const char *ns, const char *name)
{
    const sobj *o = store_get(s, ns, name);
    return o ? delete_obj(s, (sobj *)(uintptr_t)o) : 0;
}

void store_relist_begin(store *s, const char *ns)
{
    const char *scope = ns ? ns : "";
    struct relist *r = map_get(&s->relists, scope);
    if (r == NULL) {
        r = xcalloc(1, sizeof(*r));
        r->scope = xstrdup(scope);
        map_put(&s->relists, r->scope, r);
    }
    r->gen = ++s->gen;
}

void store_relist_end(store *s, const char *ns)
{
    const char *scope = ns ? ns : "";
    struct relist *r = map_del(&s->relists, scope);
    if (r == NULL)
        return;
    /* Collect first: deleting while iterating the map is not allowed. */
    size_t it = 0, n = 0, cap = 0;
    sobj **gone = NULL;
    sobj *o;
    while ((o = pset_next(&s->by_key, &it))) {
        if (*scope && strcmp(o->ns, scope) != 0)
            continue;
        if (o->seen_gen != r->gen) {
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                gone = xrealloc(gone, cap * sizeof(*gone));
            }
            gone[n++] = o;
        }
    }
    for (size_t i = 0; i < n; i++)
        delete_obj(s, gone[i]);
    free(gone);
    relist_free(r);
}

const sobj *store_get_key(const store *s, const char *key)
{
    return pset_get(&s->by_key, key);
}

const sobj *store_get(const store *s, const char *ns, const char *name)
{
    char keybuf[512];
    if (s->kind->namespaced && ns && *ns)
        snprintf(keybuf, sizeof(keybuf), "%s/%s", ns, name);
    else
        snprintf(keybuf, sizeof(keybuf), "%s", name);
    return pset_get(&s->by_key, keybuf);
}

const sobj *store_get_uid(const store *s, const char *uid)
{
    if (uid == NULL || *uid == '\0')
        return NULL;
    size_t it = 0;
    const sobj *o;
    while ((o = store_next(s, &it)))
        if (strcmp(o->uid, uid) == 0)
            return o;
    return NULL;
}

size_t store_count(const store *s)
{
    return s->by_key.count;
}

const sobj *store_next(const store *s, size_t *it)
{
    return pset_next(&s->by_key, it);
}

int store_add_index(store *s, store_index_fn fn, void *data)
{
    if (s->n_idx == STORE_MAX_INDEXES || store_count(s) != 0)
        return OP_ETOOBIG;
    struct index *ix = &s->idx[s->n_idx];
    ix->fn = fn;
    ix->data = data;
    map_init(&ix->buckets);
    return s->n_idx++;
}

static const char *label_index_fn(const sobj *o, void *data)
{
    return sobj_label(o, data);
}

int store_add_label_index(store *s, const char *label_key)
{
    char *k = xstrdup(label_key);
    int i = store_add_index(s, label_index_fn, k);
    if (i < 0)
        free(k);
    else
        s->idx[i].label_key = k;
    return i;
}

static const char *owner_index_fn(const sobj *o, void *data)
{
    return o->owner_uid;
}

int store_add_owner_index(store *s)
{
    return store_add_index(s, owner_index_fn, NULL);
}

void store_on_change(store *s, store_handler fn, void *data)
{
    s->handlers = xrealloc(s->handlers, (size_t)(s->n_handlers + 1) * sizeof(*s->handlers));
    s->handlers[s->n_handlers].fn = fn;
    s->handlers[s->n_handlers].data = data;
    s->n_handlers++;
}

const sobj *store_index_first(const store *s, int idx, const char *value, store_cursor *c)
{
    c->idx = idx;
    c->head = NULL;
    c->pos = NULL;
    if (idx < 0 || idx >= s->n_idx || value == NULL)
        return NULL;
    void *cur = map_get(&s->idx[idx].buckets, value);
    if (cur == NULL)
        return NULL;
    if (is_single(cur)) /* the one object; the cursor is left at its end */
        return container_of(single_link(cur) - idx, sobj, links);
    struct bucket *b = cur;
    c->head = &b->head;
    c->pos = b->head.next;
    return store_index_next(c);
}

const sobj *store_index_next(store_cursor *c)
{
    if (c->head == NULL || c->pos == c->head)
        return NULL;
    const struct sobj_link *l = container_of(c->pos, struct sobj_link, node);
    c->pos = c->pos->next;
    return container_of(l - c->idx, sobj, links); /* l is links[c->idx] of its object */
}

size_t store_index_count(const store *s, int idx, const char *value)
{
    if (idx < 0 || idx >= s->n_idx || value == NULL)
        return 0;
    void *cur = map_get(&s->idx[idx].buckets, value);
    if (cur == NULL)
        return 0;
    return is_single(cur) ? 1 : ((struct bucket *)cur)->count;
}

const char *sobj_label(const sobj *o, const char *key)
{
    for (int i = 0; i < o->n_labels; i++)
        if (strcmp(o->labels[2 * i], key) == 0)
            return o->labels[2 * i + 1];
    return NULL;
}

int sobj_labels_equal(const sobj *a, const sobj *b)
{
    if (a->n_labels != b->n_labels)
        return 0;
    for (int i = 0; i < a->n_labels; i++)
        if (sobj_label_i(b, a->labels[2 * i]) != a->labels[2 * i + 1])
            return 0;
    return 1;
}

const char *sobj_annotation(const sobj *o, const char *key)
{
    for (int i = 0; i < o->n_annotations; i++)
        if (strcmp(o->annotations[2 * i], key) == 0)
            return o->annotations[2 * i + 1];
    return NULL;
}

static size_t slots_bytes(const map_t *m)
{
    return m->cap ? mem_footprint(m->cap * sizeof(map_slot)) : 0;
}

size_t store_bytes(const store *s)
{
    size_t n = mem_footprint(sizeof(*s)) + s->bytes + pset_bytes(&s->by_key);
    for (int i = 0; i < s->n_idx; i++)
        n += slots_bytes(&s->idx[i].buckets) + s->idx[i].n_buckets * mem_footprint(sizeof(struct bucket));
    return n;
}

void store_free(store *s)
{
    if (s == NULL)
        return;
    size_t it = 0;
    sobj **all = xmalloc((s->by_key.count + 1) * sizeof(*all));
    size_t n = 0;
    sobj *o;
    while ((o = pset_next(&s->by_key, &it)))
        all[n++] = o;
    assert(n == s->by_key.count);
    for (size_t i = 0; i < n; i++) {
        index_unlink(s, all[i]);
        obj_free(s, all[i]);
    }
    free(all);
    for (int i = 0; i < s->n_idx; i++) {
        map_free(&s->idx[i].buckets);
        free(s->idx[i].label_key);
    }
    map_free(&s->relists);
    pset_free(&s->by_key);
    free(s->handlers);
    free(s);
}
