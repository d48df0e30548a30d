#include "slurmio/hostlist.h"

#include <assert.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/err.h"
#include "core/mem.h"

/* 18 decimal digits always fit in a uint64_t, so range arithmetic cannot
 * overflow; longer digit runs are refused in brackets and treated as plain
 * text at the end of a name. */
#define MAX_DIGITS 18
/* Bracket groups per entry ("a[1-2]b[1-2]c[1-2]" is three). Real node names
 * use one, rarely two; the cap keeps the odometer below on the stack. */
#define MAX_GROUPS 8

typedef struct range {
    uint64_t lo, hi;
    int width; /* digits of the low bound as written: the zero-padding */
} range;

typedef struct group {
    range *r;
    size_t nr;
    uint64_t count;
    int maxw; /* widest formatted number in the group */
} group;

/* One entry split into literals and groups: lit[0] g[0] lit[1] ... lit[ng]. */
typedef struct entry {
    const char *lit[MAX_GROUPS + 1];
    size_t litlen[MAX_GROUPS + 1];
    group g[MAX_GROUPS];
    int ng;
} entry;

static int ndigits(uint64_t v)
{
    int n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

static void entry_free(entry *e)
{
    for (int i = 0; i < e->ng; i++)
        free(e->g[i].r);
    e->ng = 0;
}

/* Parse a decimal number of 1..MAX_DIGITS digits at [*p, e). */
static int parse_num(const char **p, const char *e, uint64_t *v, int *width)
{
    const char *s = *p;
    uint64_t x = 0;
    int n = 0;
    while (s < e && isdigit((unsigned char)*s)) {
        if (++n > MAX_DIGITS)
            return OP_EPARSE;
        x = x * 10 + (uint64_t)(*s - '0');
        s++;
    }
    if (n == 0)
        return OP_EPARSE;
    *p = s;
    *v = x;
    *width = n;
    return 0;
}

/* Parse the inside of one bracket pair, [s, e). */
static int parse_group(const char *s, const char *e, size_t max, group *g)
{
    size_t cap = 0;
    g->r = NULL;
    g->nr = 0;
    g->count = 0;
    g->maxw = 0;
    const char *p = s;
    for (;;) {
        range r;
        int hw;
        if (parse_num(&p, e, &r.lo, &r.width) < 0)
            return OP_EPARSE;
        r.hi = r.lo;
        if (p < e && *p == '-') {
            p++;
            if (parse_num(&p, e, &r.hi, &hw) < 0 || r.hi < r.lo)
                return OP_EPARSE;
        }
        /* Refuse before adding, so that the count never overflows. */
        uint64_t span = r.hi - r.lo + 1;
        if (span > max || g->count + span > max)
            return OP_ETOOBIG;
        g->count += span;
        int w = ndigits(r.hi) > r.width ? ndigits(r.hi) : r.width;
        if (w > g->maxw)
            g->maxw = w;
        if (g->nr == cap) {
            cap = cap ? cap * 2 : 4;
            g->r = xrealloc(g->r, cap * sizeof(*g->r));
        }
        g->r[g->nr++] = r;
        if (p == e)
            return 0;
        if (*p != ',')
            return OP_EPARSE;
        p++;
    }
}

/* Split one entry [s, e) (no separators at depth 0 inside) into parts and
 * count the names it yields. */
static int parse_entry(const char *s, const char *e, size_t max, entry *en, uint64_t *count)
{
    en->ng = 0;
    const char *lit = s;
    const char *p = s;
    size_t namelen = 0;
    uint64_t total = 1;
    while (p < e) {
        if (*p == ']')
            return OP_EPARSE;
        if (*p != '[') {
            p++;
            continue;
        }
        if (en->ng == MAX_GROUPS)
            return OP_EPARSE;
        const char *close = memchr(p + 1, ']', (size_t)(e - p - 1));
        if (!close)
            return OP_EPARSE;
        en->lit[en->ng] = lit;
        en->litlen[en->ng] = (size_t)(p - lit);
        namelen += (size_t)(p - lit);
        group *g = &en->g[en->ng];
        int rc = parse_group(p + 1, close, max, g);
        en->ng++; /* owned now, also on failure */
        if (rc < 0)
            return rc;
        namelen += (size_t)g->maxw;
        if (g->count > max / total)
            return OP_ETOOBIG;
        total *= g->count;
        p = close + 1;
        lit = p;
    }
    en->lit[en->ng] = lit;
    en->litlen[en->ng] = (size_t)(e - lit);
    namelen += (size_t)(e - lit);
    if (namelen == 0 || namelen > HOSTLIST_NAME_MAX)
        return OP_EPARSE;
    *count = total;
    return 0;
}

static int is_sep(char c)
{
    return c == ',' || isspace((unsigned char)c);
}

/* Find the next entry of expr from *pos: [*s, *e). 0 at the end, 1 when an
 * entry was found, OP_EPARSE for an unbalanced bracket. Empty entries
 * ("a,,b") are skipped, as Slurm does. */
static int next_entry(const char **pos, const char **s, const char **e)
{
    const char *p = *pos;
    while (*p && is_sep(*p))
        p++;
    if (!*p)
        return 0;
    *s = p;
    int depth = 0;
    while (*p && (depth > 0 || !is_sep(*p))) {
        if (*p == '[') {
            if (depth++)
                return OP_EPARSE;
        } else if (*p == ']') {
            if (--depth < 0)
                return OP_EPARSE;
        } else if (depth && isspace((unsigned char)*p)) {
            return OP_EPARSE;
        }
        p++;
    }
    if (depth)
        return OP_EPARSE;
    *e = p;
    *pos = p;
    return 1;
}

/* Walk expr entry by entry; for each, call emit (when non-NULL). */
static int walk(const char *expr, size_t max, size_t *count, hostlist_names *out, size_t *cap)
{
    const char *pos = expr ? expr : "";
    const char *s, *e;
    uint64_t total = 0;
    int rc;
    while ((rc = next_entry(&pos, &s, &e)) > 0) {
        entry en;
        uint64_t n;
        rc = parse_entry(s, e, max, &en, &n);
        if (rc < 0) {
            entry_free(&en);
            return rc;
        }
        if (n > max - total) {
            entry_free(&en);
            return OP_ETOOBIG;
        }
        total += n;
        if (out) {
            /* Odometer over (range index, value) per group; the last group
             * turns fastest, which gives Slurm's order for "a[1-2]b[1-2]". */
            size_t ri[MAX_GROUPS] = {0};
            uint64_t v[MAX_GROUPS];
            for (int i = 0; i < en.ng; i++)
                v[i] = en.g[i].r[0].lo;
            if (out->n + n > *cap) {
                *cap = out->n + n;
                out->names = xrealloc(out->names, *cap * sizeof(char *));
            }
            for (uint64_t k = 0; k < n; k++) {
                char name[HOSTLIST_NAME_MAX + 1];
                size_t len = 0;
                for (int i = 0; i <= en.ng; i++) {
                    memcpy(name + len, en.lit[i], en.litlen[i]);
                    len += en.litlen[i];
                    if (i < en.ng)
                        len += (size_t)snprintf(name + len, sizeof(name) - len, "%0*" PRIu64,
                                                en.g[i].r[ri[i]].width, v[i]);
                    /* parse_entry refused entries whose names could be longer. */
                    assert(len <= HOSTLIST_NAME_MAX);
                }
                name[len] = '\0';
                out->names[out->n++] = xstrndup(name, len);
                for (int i = en.ng - 1; i >= 0; i--) {
                    if (v[i] < en.g[i].r[ri[i]].hi) {
                        v[i]++;
                        break;
                    }
                    if (++ri[i] < en.g[i].nr) {
                        v[i] = en.g[i].r[ri[i]].lo;
                        break;
                    }
                    ri[i] = 0;
                    v[i] = en.g[i].r[0].lo;
                }
            }
            assert(out->n <= *cap);
        }
        entry_free(&en);
    }
    if (rc < 0)
        return rc;
    if (count)
        *count = (size_t)total;
    return 0;
}

int hostlist_count(const char *expr, size_t max, size_t *count)
{
    if (max == 0)
        max = HOSTLIST_DEFAULT_MAX;
    *count = 0;
    return walk(expr, max, count, NULL, NULL);
}

int hostlist_expand(const char *expr, size_t max, hostlist_names *out)
{
    out->names = NULL;
    out->n = 0;
    if (max == 0)
        max = HOSTLIST_DEFAULT_MAX;
    /* Count first: a refused expansion allocates nothing. */
    size_t n;
    int rc = walk(expr, max, &n, NULL, NULL);
    if (rc < 0)
        return rc;
    size_t cap = 0;
    rc = walk(expr, max, NULL, out, &cap);
    if (rc < 0)
        hostlist_names_free(out);
    /* The same walk counted and expanded: the two agree. */
    assert(rc < 0 || out->n == n);
    return rc;
}

void hostlist_names_free(hostlist_names *hn)
{
    for (size_t i = 0; i < hn->n; i++)
        free(hn->names[i]);
    free(hn->names);
    hn->names = NULL;
    hn->n = 0;
}

int hostlist_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > HOSTLIST_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (c == ',' || c == '[' || c == ']' || isspace((unsigned char)c))
            return 0;
    }
    return 1;
}

/* ---- compression ---- */

typedef struct hent {
    const char *name;
    size_t plen;  /* prefix length: the name without its trailing digits */
    uint64_t num; /* the trailing number, when has_num */
    int width;    /* digits of the trailing number as written */
    int has_num;
} hent;

/* Natural order of two prefixes: runs of digits compare as numbers, so that
 * "r2n" sorts before "r10n", as libslurm's hostlist sort does. */
static int natcmp(const char *a, size_t an, const char *b, size_t bn)
{
    size_t i = 0, j = 0;
    while (i < an && j < bn) {
        if (isdigit((unsigned char)a[i]) && isdigit((unsigned char)b[j])) {
            size_t i0 = i, j0 = j;
            while (i0 < an && a[i0] == '0')
                i0++;
            while (j0 < bn && b[j0] == '0')
                j0++;
            size_t i1 = i0, j1 = j0;
            while (i1 < an && isdigit((unsigned char)a[i1]))
                i1++;
            while (j1 < bn && isdigit((unsigned char)b[j1]))
                j1++;
            if (i1 - i0 != j1 - j0)
                return i1 - i0 < j1 - j0 ? -1 : 1;
            int c = memcmp(a + i0, b + j0, i1 - i0);
            if (c)
                return c;
            /* Same value: fewer leading zeros first, then go on. */
            if (i0 - i != j0 - j)
                return i0 - i < j0 - j ? -1 : 1;
            i = i1;
            j = j1;
            continue;
        }
        if (a[i] != b[j])
            return (unsigned char)a[i] < (unsigned char)b[j] ? -1 : 1;
        i++;
        j++;
    }
    if (i < an)
        return 1;
    if (j < bn)
        return -1;
    return 0;
}

static int hent_cmp(const void *pa, const void *pb)
{
    const hent *a = pa, *b = pb;
    int c = natcmp(a->name, a->plen, b->name, b->plen);
    if (c)
        return c;
    if (a->has_num != b->has_num)
        return a->has_num - b->has_num;
    if (a->num != b->num)
        return a->num < b->num ? -1 : 1;
    return a->width - b->width;
}

static int same_prefix(const hent *a, const hent *b)
{
    return a->has_num == b->has_num && a->plen == b->plen && memcmp(a->name, b->name, a->plen) == 0;
}

static int natural(const hent *h)
{
    return ndigits(h->num) == h->width;
}

char *hostlist_compress(const char *const *names, size_t n)
{
    hent *h = xcalloc(n ? n : 1, sizeof(*h));
    for (size_t i = 0; i < n; i++) {
        if (!hostlist_name_valid(names[i])) {
            free(h);
            return NULL;
        }
        size_t len = strlen(names[i]);
        size_t d = 0;
        while (d < len && isdigit((unsigned char)names[i][len - 1 - d]))
            d++;
        h[i].name = names[i];
        if (d > 0 && d <= MAX_DIGITS) {
            h[i].has_num = 1;
            h[i].plen = len - d;
            h[i].width = (int)d;
            h[i].num = strtoull(names[i] + len - d, NULL, 10);
        } else {
            h[i].plen = len;
        }
    }
    qsort(h, n, sizeof(*h), hent_cmp);

    buf_t out;
    buf_init(&out, BUF_UNLIMITED);
    size_t i = 0;
    int rc = 0;
    while (i < n) {
        if (out.len)
            rc |= buf_putc(&out, ',');
        if (!h[i].has_num) {
            rc |= buf_puts(&out, h[i].name);
            size_t j = i + 1;
            while (j < n && same_prefix(&h[i], &h[j]))
                j++; /* duplicates */
            i = j;
            continue;
        }
        /* All names with this prefix: [i, end). */
        size_t end = i + 1;
        while (end < n && same_prefix(&h[i], &h[end]))
            end++;
        rc |= buf_append(&out, h[i].name, h[i].plen);
        int single = end - i == 1 || (h[end - 1].num == h[i].num && h[end - 1].width == h[i].width);
        if (single) {
            rc |= buf_printf(&out, "%0*" PRIu64, h[i].width, h[i].num);
            i = end;
            continue;
        }
        rc |= buf_putc(&out, '[');
        int first = 1;
        size_t k = i;
        while (k < end) {
            /* One range from h[k]: width != 0 means every member is written
             * with that width; width == 0 means every member is written
             * without padding (n[9-10]). */
            uint64_t lo = h[k].num, hi = lo;
            int width = h[k].width, all_nat = natural(&h[k]);
            int lo_width = h[k].width;
            size_t m = k + 1;
            while (m < end) {
                if (h[m].num == hi && h[m].width == h[m - 1].width) {
                    m++; /* duplicate */
                    continue;
                }
                if (h[m].num != hi + 1)
                    break;
                if (width != 0 && h[m].width == width) {
                    all_nat = all_nat && natural(&h[m]);
                } else if (all_nat && natural(&h[m])) {
                    width = 0;
                } else {
                    break;
                }
                hi = h[m].num;
                m++;
            }
            assert(m > k && hi >= lo);
            if (!first)
                rc |= buf_putc(&out, ',');
            first = 0;
            if (width == 0) {
                rc |= buf_printf(&out, "%" PRIu64, lo);
                if (hi != lo)
                    rc |= buf_printf(&out, "-%" PRIu64, hi);
            } else {
                rc |= buf_printf(&out, "%0*" PRIu64, lo_width, lo);
                if (hi != lo)
                    rc |= buf_printf(&out, "-%0*" PRIu64, width, hi);
            }
            k = m;
        }
        rc |= buf_putc(&out, ']');
        i = end;
    }
    free(h);
    if (rc) {
        buf_free(&out);
        return NULL;
    }
    if (!out.data)
        return xstrdup("");
    return buf_detach(&out, NULL);
}
