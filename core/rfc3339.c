/* RFC 3339 timestamps: see rfc3339.h. */
#include "core/rfc3339.h"

#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>

static int digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)(*p)[i]))
            return -1;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *out = v;
    return 0;
}

int rfc3339_parse(const char *s, int64_t *out, int *zulu)
{
    if (s == NULL)
        return -1;
    int Y, M, D, h, m, sec;
    const char *p = s;
    if (digits(&p, 4, &Y) || *p++ != '-' || digits(&p, 2, &M) || *p++ != '-' || digits(&p, 2, &D) ||
        (*p != 'T' && *p != 't' && *p != ' '))
        return -1;
    p++;
    if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &m) || *p++ != ':' || digits(&p, 2, &sec))
        return -1;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return -1;
        while (isdigit((unsigned char)*p))
            p++;
    }
    long off = 0;
    int z = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
        z = 1;
    } else if (*p == '+' || *p == '-') {
        int sign = *p++ == '-' ? -1 : 1, oh, om;
        if (digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om))
            return -1;
        off = sign * (oh * 3600L + om * 60L);
    } else {
        return -1;
    }
    if (*p != '\0' || M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60)
        return -1;
    struct tm tm = {0};
    tm.tm_year = Y - 1900;
    tm.tm_mon = M - 1;
    tm.tm_mday = D;
    tm.tm_hour = h;
    tm.tm_min = m;
    tm.tm_sec = sec;
    *out = (int64_t)timegm(&tm) - off;
    if (zulu)
        *zulu = z;
    return 0;
}

int64_t rfc3339_secs(const char *s)
{
    int64_t v = 0;
    return rfc3339_parse(s, &v, NULL) == 0 ? v : 0;
}

/* The civil UTC fields of t, each bounded so that the fixed-width forms fit:
 * years outside 0..9999 are clamped (RFC 3339 has four year digits). */
struct civil {
    unsigned y, mo, d, h, mi, s;
};

static struct civil civil(int64_t t)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (gmtime_r(&tt, &tm) == NULL)
        tm = (struct tm){.tm_year = t < 0 ? -1900 : 9999 - 1900, .tm_mday = 1};
    int y = tm.tm_year + 1900;
    struct civil c = {y < 0 ? 0 : y > 9999 ? 9999 : (unsigned)y, (unsigned)(tm.tm_mon + 1) % 100u,
                      (unsigned)tm.tm_mday % 100u, (unsigned)tm.tm_hour % 100u,
                      (unsigned)tm.tm_min % 100u, (unsigned)tm.tm_sec % 100u};
    return c;
}

void rfc3339_format(int64_t t, char out[RFC3339_LEN])
{
    struct civil c = civil(t);
    int n = snprintf(out, RFC3339_LEN, "%04u-%02u-%02uT%02u:%02u:%02uZ", c.y, c.mo, c.d, c.h, c.mi, c.s);
    /* civil() keeps every field to its width: the text is never cut. */
    assert(n == RFC3339_LEN - 1);
    (void)n;
}

void rfc3339_format_micro(int64_t t, long usec, char out[RFC3339_MICRO_LEN])
{
    struct civil c = civil(t);
    int n = snprintf(out, RFC3339_MICRO_LEN, "%04u-%02u-%02uT%02u:%02u:%02u.%06luZ", c.y, c.mo, c.d, c.h,
                     c.mi, c.s, (unsigned long)usec % 1000000ul);
    assert(n == RFC3339_MICRO_LEN - 1);
    (void)n;
}

void rfc3339_now(char out[RFC3339_LEN], int64_t offset_s)
{
    rfc3339_format((int64_t)time(NULL) + offset_s, out);
}

void rfc3339_now_micro(char out[RFC3339_MICRO_LEN])
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    rfc3339_format_micro((int64_t)tv.tv_sec, (long)tv.tv_usec, out);
}
