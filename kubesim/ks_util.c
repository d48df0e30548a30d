/* ks_util: time, query strings, randomness, name checks. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "kubesim/ks_int.h"
#include "core/err.h"
#include "core/json.h"
#include "core/mem.h"

/* ---- time -------------------------------------------------------------- */

long long ks_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- query strings ----------------------------------------------------- */

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static char *pct_decode(const char *s, size_t n)
{
    char *out = xmalloc(n + 1), *o = out;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '+') {
            *o++ = ' ';
        } else if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            *o++ = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 2;
        } else {
            *o++ = s[i];
        }
    }
    *o = '\0';
    return out;
}

char *query_get(const char *query, const char *name)
{
    size_t nl = strlen(name);
    const char *p = query;
    while (p && *p) {
        const char *amp = strchr(p, '&');
        size_t len = amp ? (size_t)(amp - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        size_t klen = eq ? (size_t)(eq - p) : len;
        char *key = pct_decode(p, klen);
        int hit = strlen(key) == nl && memcmp(key, name, nl) == 0;
        free(key);
        if (hit)
            return eq ? pct_decode(eq + 1, len - klen - 1) : xstrdup("");
        p = amp ? amp + 1 : NULL;
    }
    return NULL;
}

int query_bool(const char *query, const char *name, int dflt)
{
    char *v = query_get(query, name);
    if (v == NULL)
        return dflt;
    int r = !(strcmp(v, "0") == 0 || strcasecmp(v, "false") == 0);
    free(v);
    return r;
}

int parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (s == NULL || *s == '\0')
        return OP_EINVAL;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return OP_EINVAL;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return OP_EINVAL;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* ---- randomness -------------------------------------------------------- */

uint64_t ks_rand(ks *k)
{
    /* xorshift64*: reproducible with --seed, plenty for fault dice and names. */
    uint64_t x = k->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    k->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

double ks_randf(ks *k)
{
    return (double)(ks_rand(k) >> 11) / (double)(1ULL << 53);
}

/* ---- names ------------------------------------------------------------- */

static int label_ok(const char *s, size_t n)
{
    if (n == 0 || n > 63)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && !(c == '-' && i > 0 && i + 1 < n))
            return 0;
    }
    return 1;
}

int dns_label_ok(const char *s)
{
    return label_ok(s, strlen(s));
}

int dns_subdomain_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return 0;
    const char *p = s;
    while (1) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        /* subdomain parts may be longer than 63 in total names but each part follows the label rule */
        if (len == 0)
            return 0;
        for (size_t i = 0; i < len; i++) {
            char c = p[i];
            int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
            if (!alnum && !(c == '-' && i > 0 && i + 1 < len))
                return 0;
        }
        if (!dot)
            return 1;
        p = dot + 1;
    }
}

const char *dns_subdomain_msg(void)
{
    return "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
           "and "
           "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation "
           "is "
           "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
}

const char *dns_label_msg(void)
{
    return "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
           "start "
           "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation "
           "is "
           "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
}
