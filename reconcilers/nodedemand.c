#include "reconcilers/nodedemand.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/err.h"

/* One "key=value" word of the annotation: its key and value as spans. */
typedef struct word {
    const char *k, *v;
    size_t klen, vlen;
} word;

static const char *skip_blank(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

static size_t trim_len(const char *s, size_t n)
{
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    return n;
}

/* A count 0..limit written in decimal; -1 when it is not one. */
static int64_t count_of(const char *s, size_t n, int64_t limit)
{
    if (n == 0 || n > 10)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v <= limit ? v : -1;
}

/* Seconds, with an optional s, m or h suffix, at most a day. */
static int64_t seconds_of(const char *s, size_t n)
{
    int64_t mul = 1;
    if (n && (s[n - 1] == 's' || s[n - 1] == 'm' || s[n - 1] == 'h')) {
        mul = s[n - 1] == 'h' ? 3600 : s[n - 1] == 'm' ? 60 : 1;
        n--;
    }
    int64_t v = count_of(s, n, 86400);
    return v < 0 || v * mul > 86400 ? -1 : v * mul;
}

int nd_parse(const char *text, nd_policy *p, char *err, size_t errlen)
{
    p->min = 0;
    p->max = -1;
    p->cooldown_s = ND_DEFAULT_COOLDOWN_S;
    int seen_min = 0, seen_cool = 0;
    for (const char *s = text ? text : ""; *s;) {
        s = skip_blank(s);
        const char *end = strchr(s, ',');
        size_t len = trim_len(s, end ? (size_t)(end - s) : strlen(s));
        const char *eq = memchr(s, '=', len);
        if (len == 0 && !end)
            break;
        if (eq == NULL) {
            snprintf(err, errlen, "\"%.*s\" is not KEY=VALUE (keys: min, max, cooldown)",
                     (int)(len > 64 ? 64 : len), s);
            return OP_EINVAL;
        }
        word w = {s, eq + 1, trim_len(s, (size_t)(eq - s)), 0};
        w.v = skip_blank(w.v);
        w.vlen = trim_len(w.v, (size_t)(s + len - w.v));
        int64_t v;
        if (w.klen == 3 && strncasecmp(w.k, "min", 3) == 0) {
            if (seen_min++ || (v = count_of(w.v, w.vlen, ND_MAX_REPLICAS)) < 0)
                goto bad;
            p->min = (int32_t)v;
        } else if (w.klen == 3 && strncasecmp(w.k, "max", 3) == 0) {
            if (p->max >= 0 || (v = count_of(w.v, w.vlen, ND_MAX_REPLICAS)) < 0)
                goto bad;
            p->max = (int32_t)v;
        } else if (w.klen == 8 && strncasecmp(w.k, "cooldown", 8) == 0) {
            if (seen_cool++ || (v = seconds_of(w.v, w.vlen)) < 0)
                goto bad;
            p->cooldown_s = (uint32_t)v;
        } else {
            snprintf(err, errlen, "unknown key \"%.*s\" (keys: min, max, cooldown)",
                     (int)(w.klen > 64 ? 64 : w.klen), w.k);
            return OP_EINVAL;
        }
        if (!end)
            break;
        s = end + 1;
        continue;
    bad:
        snprintf(
            err, errlen,
            "\"%.*s\": given twice, or not a count (min and max: 0-%d; cooldown: seconds, or with s, m or h, "
            "at most a day)",
            (int)(len > 64 ? 64 : len), s, ND_MAX_REPLICAS);
        return OP_EINVAL;
    }
    if (p->max < 0) {
        snprintf(err, errlen, "max is required (e.g. \"min=0,max=64,cooldown=300\")");
        return OP_EINVAL;
    }
    if (p->min > p->max) {
        snprintf(err, errlen, "min %d is above max %d", (int)p->min, (int)p->max);
        return OP_EINVAL;
    }
    return 0;
}

int nd_waits(const char *reason)
{
    static const char *const exact[] = {"None", "Resources", "Priority", "NodeDown"};
    static const char *const prefix[] = {"ReqNodeNotAvail", "Nodes required for job are DOWN"};
    if (reason == NULL || !*reason)
        return 1; /* no reason given yet: a job just queued */
    for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
        if (strcmp(reason, exact[i]) == 0)
            return 1;
    for (size_t i = 0; i < sizeof(prefix) / sizeof(prefix[0]); i++)
        if (strncmp(reason, prefix[i], strlen(prefix[i])) == 0)
            return 1;
    return 0;
}

/* Whether item (len bytes) is an item of the comma-separated list. */
static int list_has(const char *list, const char *item, size_t len)
{
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == len && len && memcmp(p, item, len) == 0)
            return 1;
        p = e ? e + 1 : p + n;
    }
    return 0;
}

int nd_lists_meet(const char *a, const char *b)
{
    for (const char *p = a; p && *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (list_has(b, p, n))
            return 1;
        p = e ? e + 1 : p + n;
    }
    return 0;
}

int nd_route(const char *job_partitions, int32_t nodes, const nd_set *sets, size_t n)
{
    int meets = 0;
    for (size_t i = 0; i < n; i++) {
        if (!nd_lists_meet(job_partitions, sets[i].partitions))
            continue;
        meets = 1;
        if (nodes <= sets[i].max)
            return (int)i;
    }
    return meets ? ND_NEVER_FITS : ND_NO_SET;
}

int32_t nd_want(const nd_policy *p, int32_t replicas, int32_t busy, int32_t demand, int32_t idle_cooled)
{
    int64_t need = (int64_t)busy + demand, want = replicas;
    if (need > replicas) {
        want = need;
    } else {
        int64_t spare = replicas - need;
        want = replicas - (idle_cooled < spare ? idle_cooled : spare);
    }
    if (want > p->max)
        want = p->max;
    if (want < p->min)
        want = p->min;
    return (int32_t)want;
}
