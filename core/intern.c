#include "core/intern.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/pset.h"

/* The header sits in front of the characters; the table is a set of the
 * headers (core/pset.h: every distinct string of every cache has a slot,
 * and a pointer says what a map slot would repeat). */
struct istr {
    uint32_t refs;
    uint32_t len;
    char s[];
};

static const char *istr_key(const void *h)
{
    return ((const struct istr *)h)->s;
}

static pset table = {NULL, 0, 0, istr_key};
static size_t bytes;

static struct istr *hdr(const char *is)
{
    return (struct istr *)(void *)((char *)(uintptr_t)is - offsetof(struct istr, s));
}

const char *istr_getn(const char *s, size_t n)
{
    if (s == NULL)
        return NULL;
    assert(n < UINT32_MAX);
    struct istr *h = pset_getn(&table, s, n);
    if (h) {
        assert(h->refs > 0 && h->refs < UINT32_MAX);
        h->refs++;
        return h->s;
    }
    h = xmalloc(sizeof(*h) + n + 1);
    h->refs = 1;
    h->len = (uint32_t)n;
    memcpy(h->s, s, n);
    h->s[n] = '\0';
    pset_add(&table, h);
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
        assert(pset_get(&table, is) == hdr(is) && hdr(is)->refs > 0);
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
    assert(pset_get(&table, is) == h && h->refs > 0);
    if (--h->refs > 0)
        return;
    pset_del(&table, h);
    assert(bytes >= mem_footprint(sizeof(*h) + h->len + 1));
    bytes -= mem_footprint(sizeof(*h) + h->len + 1);
    free(h);
    if (table.count == 0)
        pset_free(&table);
}

size_t istr_count(void)
{
    return table.count;
}

size_t istr_bytes(void)
{
    return bytes + pset_bytes(&table);
}
