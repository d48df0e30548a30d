/* pset: a hash set of pointers to objects that hold their own string key.
 *
 * For the tables with one entry per cached object (the stores' objects by
 * key, the interned strings, the Slurm nodes): a map slot (core/map.h)
 * holds key, value and hash, 24 bytes, where the object already holds its
 * key and a pointer to it says the rest; here a slot is that pointer, 8
 * bytes. Open addressing with linear probing, the load kept under 3/4,
 * backward-shift removal (no tombstones) as map_del does; the hash is not
 * kept, it is computed from the key again when the table grows and when a
 * removal shifts a run back. The set owns nothing but its table: elements
 * are the caller's. Iteration order is unspecified; adding or removing
 * while iterating is not allowed (collect first).
 */
#ifndef OP_PSET_H
#define OP_PSET_H

#include <stddef.h>

/** The key an element holds (NUL-terminated; it must not change while the
 *  element is in the set). */
typedef const char *(*pset_key_fn)(const void *elem);

typedef struct pset {
    void **slots;   /* private: cap entries, NULL when free */
    size_t cap;     /* private: a power of two, 0 when empty */
    size_t count;   /* read-only */
    pset_key_fn key; /* read-only */
} pset;

/** An empty set whose elements' keys key() gives. */
void pset_init(pset *t, pset_key_fn key);
/** Free the table (not the elements); the set is left empty and usable. */
void pset_free(pset *t);
/** The element with key (n bytes, need not be terminated), or NULL. */
void *pset_getn(const pset *t, const char *key, size_t n);
void *pset_get(const pset *t, const char *key);
/** Add elem, whose key must not be in the set yet. */
void pset_add(pset *t, void *elem);
/** Remove elem, which must be in the set. */
void pset_del(pset *t, const void *elem);
/** Iterate: size_t it = 0; void *e; while ((e = pset_next(t, &it))) ... */
void *pset_next(const pset *t, size_t *it);
/** The heap bytes of the table (mem_footprint, core/mem.h). */
size_t pset_bytes(const pset *t);

#endif
