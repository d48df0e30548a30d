#include "core/map.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"

uint32_t map_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return (uint32_t)(h ^ (h >> 32));
}

static void free_val(void *val)
{
    free(val);
}

const map_type map_type_free_val = {.val_free = free_val};

void map_init_type(map_t *m, const map_type *t)
{
    m->slots = NULL;
    m->cap = 0;
    m->count = 0;
    m->type = t;
}

void map_init(map_t *m)
{
    map_init_type(m, NULL);
}

static void destroy(const map_type *t, map_slot *s)
{
    /* The key is read before the value goes: it is often a field of it. */
    char *key = (char *)s->key;
    if (t->val_free)
        t->val_free(s->val);
    if (t->key_free)
        t->key_free(key);
}

void map_free(map_t *m)
{
    const map_type *t = m->type;
    map_slot *slots = m->slots;
    size_t cap = m->cap;
    /* Emptied first, so that a destructor that looks at the map sees it
     * empty rather than half torn down. */
    map_init_type(m, t);
    for (size_t i = 0; t && i < cap; i++)
        if (slots[i].key)
            destroy(t, &slots[i]);
    free(slots);
}

static int key_eq(const map_slot *s, uint32_t h, const char *key, size_t n)
{
    return s->hash == h && strncmp(s->key, key, n) == 0 && s->key[n] == '\0';
}

static map_slot *find(const map_t *m, const char *key, size_t n, uint32_t h)
{
    if (m->cap == 0)
        return NULL;
    /* A free slot ends every probe run: the load factor stays below 1. */
    assert(m->count < m->cap && (m->cap & (m->cap - 1)) == 0);
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        map_slot *s = &m->slots[i];
        if (s->key == NULL)
            return NULL;
        if (key_eq(s, h, key, n))
            return s;
    }
}

void *map_getn(const map_t *m, const char *key, size_t n)
{
    map_slot *s = find(m, key, n, map_hash(key, n));
    return s ? s->val : NULL;
}

void *map_get(const map_t *m, const char *key)
{
    return map_getn(m, key, strlen(key));
}

static void grow(map_t *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 16;
    map_slot *old = m->slots;
    size_t ocap = m->cap;
    m->slots = xcalloc(ncap, sizeof(map_slot));
    m->cap = ncap;
    for (size_t i = 0; i < ocap; i++) {
        if (old[i].key == NULL)
            continue;
        size_t j = old[i].hash & (ncap - 1);
        while (m->slots[j].key)
            j = (j + 1) & (ncap - 1);
        m->slots[j] = old[i];
    }
    free(old);
    assert((ncap & (ncap - 1)) == 0 && m->count * 4 <= ncap * 3);
}

void *map_put(map_t *m, const char *key, void *val)
{
    assert(key != NULL);
    size_t n = strlen(key);
    uint32_t h = map_hash(key, n);
    map_slot *s = find(m, key, n, h);
    if (s) {
        void *prev = s->val;
        s->val = val;
        s->key = key; /* the new value owns the key now */
        return prev;
    }
    /* Keep the load factor under 3/4. */
    if ((m->count + 1) * 4 > m->cap * 3)
        grow(m);
    size_t mask = m->cap - 1;
    size_t i = h & mask;
    while (m->slots[i].key)
        i = (i + 1) & mask;
    m->slots[i].key = key;
    m->slots[i].val = val;
    m->slots[i].hash = h;
    m->count++;
    assert(m->count * 4 <= m->cap * 3);
    return NULL;
}

void *map_del(map_t *m, const char *key)
{
    size_t n = strlen(key);
    uint32_t h = map_hash(key, n);
    map_slot *s = find(m, key, n, h);
    if (s == NULL)
        return NULL;
    assert(m->count > 0);
    void *val = s->val;
    size_t mask = m->cap - 1;
    size_t i = (size_t)(s - m->slots);
    /* Backward-shift: move later members of the probe run into the hole
     * when their home slot is not between the hole and their position. */
    for (size_t j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
        size_t home = m->slots[j].hash & mask;
        int between = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (!between) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i].key = NULL;
    m->slots[i].val = NULL;
    m->count--;
    return val;
}

int map_drop(map_t *m, const char *key)
{
    size_t n = strlen(key);
    map_slot *s = find(m, key, n, map_hash(key, n));
    if (s == NULL)
        return 0;
    map_slot e = *s;
    map_del(m, key); /* key may be freed by the destructors below: not used after */
    if (m->type)
        destroy(m->type, &e);
    return 1;
}

int map_next(const map_t *m, size_t *it, const char **key, void **val)
{
    assert(*it <= m->cap);
    while (*it < m->cap) {
        map_slot *s = &m->slots[(*it)++];
        if (s->key) {
            if (key)
                *key = s->key;
            if (val)
                *val = s->val;
            return 1;
        }
    }
    return 0;
}
