#include "reconcilers/nodeset_names.h"

#include <stdio.h>
#include <string.h>

/* Beyond any ordinal: arithmetic saturates here instead of overflowing. */
#define SAT 4000000000000000000LL

static long long p10(int d)
{
    long long v = 1;
    for (int i = 0; i < d; i++) {
        if (v > SAT / 10)
            return SAT;
        v *= 10;
    }
    return v;
}

static long long add_sat(long long a, long long b)
{
    return a > SAT - b ? SAT : a + b;
}

static long long mul_sat(long long a, long long b)
{
    if (a == 0 || b == 0)
        return 0;
    return a > SAT / b ? SAT : a * b;
}

static int digits(long long v)
{
    int d = 1;
    while (v >= 10 && d < 19) {
        v /= 10;
        d++;
    }
    return d;
}

static const char *pfx(const nsn_scheme *s)
{
    return s->prefix ? s->prefix : "";
}

int nsn_overlap(const nsn_scheme *a, const nsn_scheme *b, char *ex, size_t exlen)
{
    if (a->count <= 0 || b->count <= 0)
        return 0;
    /* s: the scheme with the shorter prefix, g: the other. A name of g is
     * s's prefix + tail + g's padded ordinal; it is one of s's when that
     * rest is s's padded rendering of an ordinal below s's count. */
    const nsn_scheme *s = a, *g = b;
    if (strlen(pfx(a)) > strlen(pfx(b))) {
        s = b;
        g = a;
    }
    size_t sl = strlen(pfx(s));
    if (strncmp(pfx(g), pfx(s), sl) != 0)
        return 0;
    const char *tail = pfx(g) + sl;
    int L = (int)strlen(tail);
    long long tv = 0;
    for (int i = 0; i < L; i++) {
        if (tail[i] < '0' || tail[i] > '9')
            return 0; /* s's names continue with digits only */
        tv = add_sat(mul_sat(tv, 10), tail[i] - '0');
    }
    int spad = s->pad < 0 ? 0 : s->pad, gpad = g->pad < 0 ? 0 : g->pad;
    /* d: the length of g's rendering of its ordinal j ("%0*d"): gpad (at
     * least 1) for the small ordinals, one more per power of ten. */
    int dmin = gpad > 1 ? gpad : 1;
    int dmax = digits(g->count - 1) > dmin ? digits(g->count - 1) : dmin;
    for (int d = dmin; d <= dmax; d++) {
        long long lo = d == dmin ? 0 : p10(d - 1);
        long long hi = p10(d) - 1;
        if (hi > g->count - 1)
            hi = g->count - 1;
        if (lo > hi)
            continue;
        int T = L + d; /* the length of the rest */
        if (T < spad)
            continue; /* s renders at least spad digits */
        long long jm = lo;
        if (T > spad && T > 1) {
            /* longer than s's padding: s renders no leading zero */
            if (L > 0 && tail[0] == '0')
                continue;
            if (L == 0 && d == gpad) {
                long long first = p10(d - 1); /* g's first ordinal without a padding zero */
                if (first > jm)
                    jm = first;
            }
        }
        if (jm > hi)
            continue;
        long long i = add_sat(mul_sat(tv, p10(d)), jm);
        if (i < s->count) {
            if (ex && exlen)
                snprintf(ex, exlen, "%s%0*lld", pfx(s), spad, i);
            return 1;
        }
    }
    return 0;
}

int nsn_in_scheme(const char *name, const nsn_scheme *s)
{
    size_t pl = strlen(pfx(s));
    if (!name || strncmp(name, pfx(s), pl) != 0)
        return 0;
    const char *rest = name + pl;
    size_t n = strlen(rest);
    if (n == 0 || n > 20)
        return 0;
    long long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (rest[i] < '0' || rest[i] > '9')
            return 0;
        v = add_sat(mul_sat(v, 10), rest[i] - '0');
    }
    if (v >= s->count)
        return 0;
    char buf[96];
    snprintf(buf, sizeof(buf), "%0*lld", s->pad < 0 ? 0 : s->pad > 64 ? 64 : s->pad, v);
    return strcmp(buf, rest) == 0;
}
