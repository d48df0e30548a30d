#include "core/log.h"

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/rfc3339.h"

int log__level = LOGL_INFO;
static int log_format = LOGF_TEXT;

/* The reconcile in progress (log_reconcile_begin); active 0 when none. */
static struct {
    int active;
    char controller[64];
    char ns[254];
    char name[254];
    char id[37];
    uint64_t rng;
} rc;

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

void log_setup(int level, int format)
{
    log__level = level;
    log_format = format;
}

/* xorshift64*: reconcile IDs need to be unique in practice, not secret */
static uint64_t next_random(void)
{
    if (rc.rng == 0) {
        struct timeval tv;
        gettimeofday(&tv, NULL);
        rc.rng = ((uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec) ^ ((uint64_t)getpid() << 32) ^
                 0x9e3779b97f4a7c15ull;
    }
    rc.rng ^= rc.rng >> 12;
    rc.rng ^= rc.rng << 25;
    rc.rng ^= rc.rng >> 27;
    return rc.rng * 0x2545f4914f6cdd1dull;
}

void log_reconcile_begin(const char *controller, const char *key)
{
    assert(!rc.active); /* handlers do not nest (log.h) */
    const char *slash = key ? strchr(key, '/') : NULL;
    snprintf(rc.controller, sizeof(rc.controller), "%s", controller ? controller : "");
    if (slash) {
        snprintf(rc.ns, sizeof(rc.ns), "%.*s", (int)(slash - key), key);
        snprintf(rc.name, sizeof(rc.name), "%s", slash + 1);
    } else {
        rc.ns[0] = '\0';
        snprintf(rc.name, sizeof(rc.name), "%s", key ? key : "");
    }
    uint64_t a = next_random(), b = next_random();
    /* version 4, variant 1, as controller-runtime's uuid.NewUUID */
    a = (a & ~0xf000ull) | 0x4000ull;
    b = (b & ~(3ull << 62)) | (2ull << 62);
    snprintf(rc.id, sizeof(rc.id), "%08x-%04x-%04x-%04x-%012llx", (unsigned)(a >> 32),
             (unsigned)((a >> 16) & 0xffff), (unsigned)(a & 0xffff), (unsigned)(b >> 48),
             (unsigned long long)(b & 0xffffffffffffull));
    rc.active = 1;
}

void log_reconcile_end(void)
{
    assert(rc.active);
    rc.active = 0;
}

const char *log_reconcile_id(void)
{
    return rc.active ? rc.id : "";
}

int log_level_parse(const char *s)
{
    for (int i = 0; i < (int)ARRAY_SIZE(level_names); i++)
        if (strcmp(s, level_names[i]) == 0)
            return i;
    if (strcmp(s, "warning") == 0)
        return LOGL_WARN;
    if (s[0] >= '0' && s[0] <= '4' && s[1] == '\0')
        return s[0] - '0';
    return -1;
}

int log_format_parse(const char *s)
{
    if (strcmp(s, "text") == 0)
        return LOGF_TEXT;
    if (strcmp(s, "json") == 0)
        return LOGF_JSON;
    return -1;
}

/* Append s to out as the inside of a JSON string. */
static size_t json_escape(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    for (; *s && n + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[n++] = '\\';
            out[n++] = (char)c;
        } else if (c == '\n') {
            out[n++] = '\\';
            out[n++] = 'n';
        } else if (c < 0x20) {
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
        } else {
            out[n++] = (char)c;
        }
    }
    assert(n < cap);
    out[n] = '\0';
    return n;
}

void log_msg(int level, const char *file, int line, const char *fmt, ...)
{
    char msg[4096], line_buf[8192];
    struct timeval tv;
    struct tm tm;
    const char *base = strrchr(file, '/');
    va_list ap;

    base = base ? base + 1 : file;
    if (level < 0)
        level = 0;
    if (level > LOGL_TRACE)
        level = LOGL_TRACE;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);

    int n;
    if (log_format == LOGF_JSON) {
        char esc[sizeof(msg) * 2];
        json_escape(esc, sizeof(esc), msg);
        char ts[RFC3339_MICRO_LEN];
        rfc3339_format_micro((int64_t)tv.tv_sec, (long)tv.tv_usec, ts);
        char fields[1400] = "";
        if (rc.active) {
            char c[2 * sizeof(rc.controller)], ns[2 * sizeof(rc.ns)], nm[2 * sizeof(rc.name)];
            json_escape(c, sizeof(c), rc.controller);
            json_escape(ns, sizeof(ns), rc.ns);
            json_escape(nm, sizeof(nm), rc.name);
            snprintf(fields, sizeof(fields),
                     ",\"controller\":\"%s\",\"namespace\":\"%s\",\"name\":\"%s\",\"reconcileID\":\"%s\"", c,
                     ns, nm, rc.id);
        }
        n = snprintf(line_buf, sizeof(line_buf),
                     "{\"ts\":\"%s\",\"level\":\"%s\",\"caller\":\"%s:%d\",\"msg\":\"%s\"%s}\n", ts,
                     level_names[level], base, line, esc, fields);
    } else {
        static const char letters[] = "EWIDT";
        n = snprintf(line_buf, sizeof(line_buf), "%c%02d%02d %02d:%02d:%02d.%06ld %7d %s:%d] %s\n",
                     letters[level], tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (long)tv.tv_usec, (int)getpid(), base, line, msg);
    }
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(line_buf)) {
        n = sizeof(line_buf) - 1;
        line_buf[n - 1] = '\n';
    }
    /* One write per line so that lines from several processes sharing the
     * stream (tests, benchmarks) never interleave mid-line. */
    ssize_t w = write(STDERR_FILENO, line_buf, (size_t)n);
    (void)w;
}
