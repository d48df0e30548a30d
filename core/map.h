/* map: an open-addressing hash map from C strings to pointers.
 *
 * Keys are not copied: the caller keeps each key alive for as long as it is
 * in the map (usually the key is a field of the value). Linear probing with
 * backward-shift deletion keeps lookups short without tombstones. Iteration
 * order is unspecified; removing entries while iterating is not allowed
 * (collect the keys first).
 *
 * A map may own its entries: give it a map_type (as Redis's dictType) and
 * map_free and map_drop run the type's destructors, so the owner frees the
 * whole map with one call. map_del never runs them: it hands the value back.
 */
#ifndef OP_MAP_H
#define OP_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct map_slot {
    const char *key;
    void *val;
    uint32_t hash;
} map_slot;

/* What a map owns. Either destructor may be NULL. When the key is a field of
 * the value (the usual case), val_free frees both and key_free is NULL. */
typedef struct map_type {
    void (*val_free)(void *val); /* each value, on map_free and map_drop */
    void (*key_free)(char *key); /* each key, for maps whose keys are separate allocations */
} map_type;

typedef struct map {
    map_slot *slots;       /* private */
    size_t cap;            /* private: power of two, 0 when empty */
    size_t count;          /* read-only */
    const map_type *type;  /* read-only: NULL when the map owns nothing */
} map_t;

/** A static initializer for a map that owns its entries through type t. */
#define MAP_TYPED(t) {NULL, 0, 0, (t)}

/** Destructors for the common case of values that are one malloc'd block. */
extern const map_type map_type_free_val;

/** 64-bit string hash used by the map (FNV-1a folded). */
uint32_t map_hash(const char *s, size_t n);

/** An empty map that owns nothing. */
void map_init(map_t *m);
/** An empty map that owns its entries through t (NULL: nothing). */
void map_init_type(map_t *m, const map_type *t);
/** Run the type's destructors on every entry (key after value), then free
 *  the table. The map is left empty, keeps its type and may be used again. */
void map_free(map_t *m);
void *map_get(const map_t *m, const char *key);
/** Same as map_get, for a key given by pointer and length. */
void *map_getn(const map_t *m, const char *key, size_t n);
/** Insert or replace; returns the previous value (or NULL). */
void *map_put(map_t *m, const char *key, void *val);
/** Remove; returns the removed value (or NULL). No destructor runs. */
void *map_del(map_t *m, const char *key);
/** Remove and run the type's destructors on the entry; 1 when there was
 *  one, else 0. */
int map_drop(map_t *m, const char *key);

/** Iterate: size_t it = 0; while (map_next(m, &it, &k, &v)) ... */
int map_next(const map_t *m, size_t *it, const char **key, void **val);

#endif
