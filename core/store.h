/* store: the informer cache, one store per watched resource type.
 *
 * Objects are not kept as JSON trees: each is a compact sobj holding what
 * the reconcilers select and sort on (identity, resourceVersion, interned
 * labels and a few chosen annotations, the controller owner reference,
 * timestamps) plus an optional kind-specific projection produced by a
 * callback (pods keep phase, readiness, node name, ...). Kinds with few
 * objects that reconcilers must read in full (the CRs, ConfigMaps, Secrets)
 * keep their JSON; a kind may also keep a trimmed JSON (Nodes keep taints for
 * the DaemonSet predicates; their labels are the interned pairs).
 *
 * Lookups: by "namespace/name" (or "name" for cluster-scoped kinds), and by
 * up to STORE_MAX_INDEXES secondary indexes, each a function from an object
 * to one string value (a label value, the owner uid, spec.nodeName ...).
 *
 * Change handlers run synchronously inside store_upsert / store_delete /
 * store_relist_end, with the old and new objects (NULL for add / delete).
 * A relist is diffed against the current contents by resourceVersion, so it
 * fires handlers only for objects that really changed, appeared or vanished.
 * Pointers returned by the store stay valid until that object is replaced or
 * removed, i.e. until the next upsert/delete of the same key; never keep them
 * across loop iterations (keep the key instead).
 */
#ifndef OP_STORE_H
#define OP_STORE_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "core/list.h"
#include "core/map.h"

#define STORE_MAX_INDEXES 6

typedef struct store store;
typedef struct sobj sobj;

/* links[i] of an object is its membership of index i; the object is found
 * from the link and i, so the link does not point back. */
struct sobj_link {
    list_node node;    /* private: bucket membership */
    const char *value; /* interned index value, NULL when not indexed */
};

struct sobj {
    /* read-only for users */
    const char *ns;    /* interned; "" for cluster-scoped kinds */
    const char *name;  /* points into key */
    const char *key;   /* "ns/name" or "name" */
    char uid[40];
    char *rv;          /* resourceVersion */
    int64_t generation;
    int64_t created;   /* creationTimestamp, unix seconds (0 unknown) */
    int64_t deleting;  /* deletionTimestamp, unix seconds (0 when not being deleted) */
    uint16_t n_labels;
    uint16_t n_annotations;
    const char **labels;      /* interned pairs: k0, v0, k1, v1, ... */
    const char **annotations; /* interned pairs of the annotation keys the store keeps */
    const char *owner_kind;   /* controller ownerReference, interned; NULL when none */
    const char *owner_name;   /* interned */
    const char *owner_uid;    /* interned (shared by every pod of an owner); NULL when none */
    cJSON *json;              /* full or trimmed JSON when the store keeps it, else NULL */
    void *proj;               /* kind-specific projection, NULL when the kind has none */
    /* private */
    uint64_t seen_gen;
    struct sobj_link links[]; /* one per index of the store */
};

typedef struct store_kind {
    const char *name;        /* for logs and metrics: "pods" */
    int namespaced;
    /* Which JSON to keep: STORE_JSON_NONE, STORE_JSON_FULL, or STORE_JSON_TRIM
     * (then trim() builds what to keep from the full object). */
    int keep_json;
    cJSON *(*trim)(const cJSON *obj);
    /* Annotation keys to keep as interned pairs (NULL-terminated), or NULL. */
    const char *const *annotations;
    /* Kind-specific projection, or NULL: proj_size bytes inside the
     * object's own allocation, zeroed, filled by project(); proj_release
     * drops what it references (interned strings), never frees proj. */
    size_t proj_size;
    void (*project)(const cJSON *obj, void *proj);
    void (*proj_release)(void *proj);
} store_kind;

enum { STORE_JSON_NONE = 0, STORE_JSON_FULL, STORE_JSON_TRIM };

typedef const char *(*store_index_fn)(const sobj *o, void *data);
typedef void (*store_handler)(store *s, const sobj *old_obj, const sobj *new_obj, void *data);

store *store_new(const store_kind *kind);
void store_free(store *s);
const store_kind *store_kind_of(const store *s);

/** Add a secondary index; returns its number (0..STORE_MAX_INDEXES-1) or
 *  OP_ETOOBIG. Must be called while the store is empty. fn returns the
 *  object's value for this index, or NULL when it should not be indexed. */
int store_add_index(store *s, store_index_fn fn, void *data);
/** Convenience: an index on the value of one label. */
int store_add_label_index(store *s, const char *label_key);
/** Convenience: an index on the controller owner's uid. */
int store_add_owner_index(store *s);

/** Register a change handler (called in registration order). */
void store_on_change(store *s, store_handler fn, void *data);

/** Call s's handlers with (old_obj, new_obj) as if s had changed: for a
 *  second store whose changes the handlers registered on s must also see,
 *  and to have them look at an unchanged object again (old_obj == new_obj). */
void store_notify(store *s, const sobj *old_obj, const sobj *new_obj);

/** Insert or replace from a full object. Nothing happens (and 0 is
 *  returned) when the stored object has the same resourceVersion. Returns 1
 *  when a handler fired, 0 when unchanged, OP_EINVAL when obj lacks a name. */
int store_upsert(store *s, const cJSON *obj);
/** Remove by namespace/name (ns NULL or "" for cluster-scoped); handlers get
 *  the last known object. Returns 1 when something was removed. */
int store_delete(store *s, const char *ns, const char *name);

/** Relist protocol: begin, upsert every listed object (pages allowed), end;
 *  objects of the relisted scope not upserted since begin are deleted at
 *  end. The scope is one namespace, or every object when ns is NULL/"" —
 *  several reflectors (one per namespace) may feed one store, each relisting
 *  only its own namespace, even at the same time. */
void store_relist_begin(store *s, const char *ns);
void store_relist_end(store *s, const char *ns);

const sobj *store_get(const store *s, const char *ns, const char *name);
const sobj *store_get_key(const store *s, const char *key);
/** By metadata.uid: a walk over every object. No reconciler looks objects
 *  up by uid, and a map of uids would hold up to two slots per object in
 *  every store. */
const sobj *store_get_uid(const store *s, const char *uid);
size_t store_count(const store *s);

/** Iterate all objects: size_t it = 0; const sobj *o; while ((o = store_next(s, &it))) ... */
const sobj *store_next(const store *s, size_t *it);

/** Iterate one bucket of an index: for (o = store_index_first(s, idx, v, &c); o; o = store_index_next(&c)).
 */
typedef struct store_cursor {
    const list_node *head;
    const list_node *pos;
    int idx;
} store_cursor;
const sobj *store_index_first(const store *s, int idx, const char *value, store_cursor *c);
const sobj *store_index_next(store_cursor *c);
size_t store_index_count(const store *s, int idx, const char *value);

/** Label and kept-annotation lookups on an object (NULL when absent). */
const char *sobj_label(const sobj *o, const char *key);
const char *sobj_annotation(const sobj *o, const char *key);
/** The same for a key obtained from istr_get (core/intern.h): keys in the
 *  store are interned, so this compares pointers only — the hot loops over
 *  thousands of pods use it. */
static inline const char *sobj_label_i(const sobj *o, const char *ikey)
{
    for (int i = 0; i < o->n_labels; i++)
        if (o->labels[2 * i] == ikey)
            return o->labels[2 * i + 1];
    return NULL;
}
static inline const char *sobj_annotation_i(const sobj *o, const char *ikey)
{
    for (int i = 0; i < o->n_annotations; i++)
        if (o->annotations[2 * i] == ikey)
            return o->annotations[2 * i + 1];
    return NULL;
}

/** Same label set (keys and values interned: pointers compared), in any order. */
int sobj_labels_equal(const sobj *a, const sobj *b);

/** The heap bytes the store holds, as the allocator counts them
 *  (mem_footprint, core/mem.h): its objects with their projections, pairs,
 *  keys and kept JSON, its maps and its index buckets. The interned strings
 *  the objects reference are shared between stores and counted by
 *  istr_bytes (core/intern.h) instead. */
size_t store_bytes(const store *s);

#endif
