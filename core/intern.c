#include "core/intern.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/map.h"
#include "core/mem.h"

/* The header sits in front of the characters, and the table is an
 * open-addressing set of bare pointers to headers: every distinct string of
 * every cache has a slot, and a map slot (key, value, hash) would spend 24
 * bytes on what the pointer already says. The hash is not kept either (it
 * would move many names into the next malloc size): it is computed again
 * when the table grows and when a removal shifts a run back. */
struct istr {
    uint32_t refs;
    uint32_t len;
    char s[];
};

static struct istr **slots; /* cap entries, NULL when free; a free slot ends every probe run */
static size_t cap, count;
static size_t bytes;

static struct istr *hdr(const char *is)
{
    return (struct istr *)(void *)((char *)(uintptr_t)is - offsetof(struct istr, s));
}

static size_t home_of(const struct istr *e, size_t mask)
{
    return map_hash(e->s, e->len) & mask;
}

/* The slot holding s (n bytes, hash h), or the free slot that ends its run. */
static size_t probe(const char *s, size_t n, uint32_t h)
{
    size_t mask = cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const struct istr *e = slots[i];
        if (e == NULL || (e->len == n && memcmp(e->s, s, n) == 0))
            return i;
    }
}

/* Is is in the table (the slot of its header), for the assertions. */
OP_UNUSED static int present(const char *is)
{
    if (cap == 0)
        return 0;
    const struct istr *h = hdr(is);
    return slots[probe(h->s, h->len, map_hash(h->s, h->len))] == h;
}

static void grow(void)
{
    size_t ocap = cap, ncap = cap ? cap * 2 : 64;
    struct istr **old = slots;
    slots = xcalloc(ncap, sizeof(*slots));
    cap = ncap;
    for (size_t i = 0; i < ocap; i++) {
        if (old[i] == NULL)
            continue;
        size_t j = home_of(old[i], ncap - 1);
        while (slots[j])
            j = (j + 1) & (ncap - 1);
        slots[j] = old[i];
    }
    free(old);
}

const char *istr_getn(const char *s, size_t n)
{
    if (s == NULL)
        return NULL;
    assert(n < UINT32_MAX);
    uint32_t hash = map_hash(s, n);
    if (cap) {
        struct istr *e = slots[probe(s, n, hash)];
        if (e) {
            assert(e->refs > 0 && e->refs < UINT32_MAX);
            e->refs++;
            return e->s;
        }
    }
    /* Keep the load factor under 3/4. */
    if ((count + 1) * 4 > cap * 3)
        grow();
    struct istr *h = xmalloc(sizeof(*h) + n + 1);
    h->refs = 1;
    h->len = (uint32_t)n;
    memcpy(h->s, s, n);
    h->s[n] = '\0';
    size_t i = probe(s, n, hash);
    assert(slots[i] == NULL);
    slots[i] = h;
    count++;
    bytes += mem_footprint(sizeof(*h) + n + 1);
    return h->s;
}

const char *istr_get(const char *s)
{
    return s ? istr_getn(s, strlen(s)) : NULL;
}

const char *istr_ref(const char *is)
{
    if (is) {
        /* Only a live interned string, never a plain copy of one. */
        assert(present(is) && hdr(is)->refs > 0);
        hdr(is)->refs++;
    }
    return is;
}

void istr_put(const char *is)
{
    if (is == NULL)
        return;
    struct istr *h = hdr(is);
    /* A reference count never drops below zero: one put per get or ref. */
    assert(present(is) && h->refs > 0);
    if (--h->refs > 0)
        return;
    size_t mask = cap - 1, i = probe(h->s, h->len, map_hash(h->s, h->len));
    assert(slots[i] == h && count > 0);
    /* Backward shift (as map_del): move later members of the probe run into
     * the hole when their home slot is not between the hole and them. */
    for (size_t j = (i + 1) & mask; slots[j]; j = (j + 1) & mask) {
        size_t home = home_of(slots[j], mask);
        int between = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (!between) {
            slots[i] = slots[j];
            i = j;
        }
    }
    slots[i] = NULL;
    count--;
    assert(bytes >= mem_footprint(sizeof(*h) + h->len + 1));
    bytes -= mem_footprint(sizeof(*h) + h->len + 1);
    free(h);
    if (count == 0) {
        free(slots);
        slots = NULL;
        cap = 0;
    }
}

size_t istr_count(void)
{
    return count;
}

size_t istr_bytes(void)
{
    return bytes + (cap ? mem_footprint(cap * sizeof(*slots)) : 0);
}
