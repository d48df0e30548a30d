#include "core/quantity.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "core/err.h"
#include "core/mem.h"

int quantity_parse(const char *s, long long *out)
{
    if (s == NULL || *s == '\0')
        return OP_EINVAL;
    const char *p = s;
    int neg = 0;
    if (*p == '+' || *p == '-')
        neg = (*p++ == '-');
    long double mant = 0;
    int ndig = 0;
    while (isdigit((unsigned char)*p))
        mant = mant * 10 + (*p++ - '0'), ndig++;
    if (*p == '.') {
        long double scale = 1;
        p++;
        while (isdigit((unsigned char)*p)) {
            scale /= 10;
            mant += (*p++ - '0') * scale;
            ndig++;
        }
    }
    if (ndig == 0)
        return OP_EINVAL;
    long double mult = 1;
    static const struct {
        const char *sfx;
        long double mult;
    } sfx[] = {
        {"Ki", 1024.0L},
        {"Mi", 1048576.0L},
        {"Gi", 1073741824.0L},
        {"Ti", 1099511627776.0L},
        {"Pi", 1125899906842624.0L},
        {"Ei", 1152921504606846976.0L},
        {"n", 1e-9L},
        {"u", 1e-6L},
        {"m", 1e-3L},
        {"k", 1e3L},
        {"M", 1e6L},
        {"G", 1e9L},
        {"T", 1e12L},
        {"P", 1e15L},
        {"E", 1e18L},
    };
    if (*p == 'e' || *p == 'E') {
        /* Decimal exponent ("1e3"); a bare "E" is the exa suffix. */
        const char *q = p + 1;
        int eneg = 0;
        if (*q == '+' || *q == '-')
            eneg = (*q++ == '-');
        if (isdigit((unsigned char)*q)) {
            int e = 0;
            while (isdigit((unsigned char)*q) && e < 100)
                e = e * 10 + (*q++ - '0');
            if (*q != '\0')
                return OP_EINVAL;
            mult = powl(10.0L, eneg ? -e : e);
            p = q;
        }
    }
    if (*p != '\0') {
        size_t i;
        for (i = 0; i < ARRAY_SIZE(sfx); i++)
            if (strcmp(p, sfx[i].sfx) == 0)
                break;
        if (i == ARRAY_SIZE(sfx))
            return OP_EINVAL;
        mult = sfx[i].mult;
    }
    long double v = mant * mult;
    /* Value() rounds away from zero; guard against the binary representation
     * of an exact decimal landing a hair above an integer. */
    long double r = ceill(v - 1e-9L);
    if (r > (long double)LLONG_MAX)
        r = (long double)LLONG_MAX;
    *out = neg ? -(long long)r : (long long)r;
    return 0;
}
