/* map: an open-addressing hash map from C strings to pointers.
 *
 * Keys are not copied: the caller keeps each key alive for as long as it is
 * in the map (usually the key is a field of the value). Linear probing with
 * backward-shift deletion keeps lookups short without tombstones. Iteration
 * order is unspecified; removing entries while iterating is not allowed
 * (collect the keys first).
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

typedef struct map {
    map_slot *slots; /* private */
    size_t cap;      /* private: power of two, 0 when empty */
    size_t count;    /* read-only */
} map_t;

/** 64-bit string hash used by the map (FNV-1a folded). */
uint32_t map_hash(const char *s, size_t n);

void map_init(map_t *m);
void map_free(map_t *m);
void *map_get(const map_t *m, const char *key);
/** Same as map_get, for a key given by pointer and length. */
void *map_getn(const map_t *m, const char *key, size_t n);
/** Insert or replace; returns the previous value (or NULL). */
void *map_put(map_t *m, const char *key, void *val);
/** Remove; returns the removed value (or NULL). */
void *map_del(map_t *m, const char *key);

/** Iterate: size_t it = 0; while (map_next(m, &it, &k, &v)) ... */
int map_next(const map_t *m, size_t *it, const char **key, void **val);

#endif
