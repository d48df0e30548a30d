#include "core/pset.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/map.h"
#include "core/mem.h"

void pset_init(pset *t, pset_key_fn key)
{
    t->slots = NULL;
    t->cap = t->count = 0;
    t->key = key;
}

void pset_free(pset *t)
{
    free(t->slots);
    t->slots = NULL;
    t->cap = t->count = 0;
}

static size_t home_of(const pset *t, const void *e, size_t mask)
{
    const char *k = t->key(e);
    return map_hash(k, strlen(k)) & mask;
}

/* The slot of the element with key (n bytes), or the free slot that ends
 * its run: the load stays under 3/4, so there is one. */
static size_t probe(const pset *t, const char *key, size_t n)
{
    size_t mask = t->cap - 1;
    for (size_t i = map_hash(key, n) & mask;; i = (i + 1) & mask) {
        if (t->slots[i] == NULL)
            return i;
        const char *k = t->key(t->slots[i]);
        if (strncmp(k, key, n) == 0 && k[n] == '\0')
            return i;
    }
}

void *pset_getn(const pset *t, const char *key, size_t n)
{
    return t->cap ? t->slots[probe(t, key, n)] : NULL;
}

void *pset_get(const pset *t, const char *key)
{
    return pset_getn(t, key, strlen(key));
}

void pset_add(pset *t, void *elem)
{
    assert(elem != NULL);
    if ((t->count + 1) * 4 > t->cap * 3) {
        size_t ocap = t->cap, ncap = t->cap ? t->cap * 2 : 16;
        void **old = t->slots;
        t->slots = xcalloc(ncap, sizeof(*t->slots));
        t->cap = ncap;
        for (size_t i = 0; i < ocap; i++) {
            if (old[i] == NULL)
                continue;
            size_t j = home_of(t, old[i], ncap - 1);
            while (t->slots[j])
                j = (j + 1) & (ncap - 1);
            t->slots[j] = old[i];
        }
        free(old);
    }
    const char *k = t->key(elem);
    size_t i = probe(t, k, strlen(k));
    assert(t->slots[i] == NULL); /* not in the set yet */
    t->slots[i] = elem;
    t->count++;
}

void pset_del(pset *t, const void *elem)
{
    assert(t->cap > 0);
    const char *k = t->key(elem);
    size_t mask = t->cap - 1, i = probe(t, k, strlen(k));
    assert(t->slots[i] == elem && t->count > 0);
    /* Backward shift: move later members of the run into the hole when
     * their home slot is not between the hole and their position. */
    for (size_t j = (i + 1) & mask; t->slots[j]; j = (j + 1) & mask) {
        size_t home = home_of(t, t->slots[j], mask);
        int between = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (!between) {
            t->slots[i] = t->slots[j];
            i = j;
        }
    }
    t->slots[i] = NULL;
    t->count--;
}

void *pset_next(const pset *t, size_t *it)
{
    while (*it < t->cap) {
        void *e = t->slots[(*it)++];
        if (e)
            return e;
    }
    return NULL;
}

size_t pset_bytes(const pset *t)
{
    return t->cap ? mem_footprint(t->cap * sizeof(*t->slots)) : 0;
}
