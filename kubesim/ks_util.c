/* ks_util: Status responses, field errors, time, query strings, randomness. */
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

/* ---- responses --------------------------------------------------------- */

void ks_resp_init(ks_resp *r)
{
    memset(r, 0, sizeof(*r));
    buf_init(&r->headers, 64 * 1024);
    buf_init(&r->body, BUF_UNLIMITED);
}

void ks_resp_free(ks_resp *r)
{
    buf_free(&r->headers);
    buf_free(&r->body);
}

static void put(buf_t *b, const char *s)
{
    if (buf_puts(b, s) != 0)
        abort();
}

static void putq(buf_t *b, const char *s)
{
    if (json_quote_buf(b, s) != 0)
        abort();
}

static void status_begin(ks_resp *r, int code, const char *reason, const char *message)
{
    buf_reset(&r->body);
    r->status = code;
    r->content_type = "application/json";
    put(&r->body,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":");
    putq(&r->body, message);
    if (reason && *reason) {
        put(&r->body, ",\"reason\":");
        putq(&r->body, reason);
    }
}

static void status_end(ks_resp *r, int code)
{
    if (buf_printf(&r->body, ",\"code\":%d}\n", code) != 0)
        abort();
}

static void details_begin(ks_resp *r, const char *name, const char *group, const char *kind, const char *uid)
{
    int first = 1;
    put(&r->body, ",\"details\":{");
#define FIELD(k, v)                                                                                          \
    if (v && *v) {                                                                                           \
        if (!first)                                                                                          \
            put(&r->body, ",");                                                                              \
        put(&r->body, "\"" k "\":");                                                                         \
        putq(&r->body, v);                                                                                   \
        first = 0;                                                                                           \
    }
    FIELD("name", name)
    FIELD("group", group)
    FIELD("kind", kind)
    FIELD("uid", uid)
#undef FIELD
    (void)first;
}

void resp_status(ks_resp *r, int code, const char *reason, const char *message, const char *d_name,
                 const char *d_group, const char *d_kind, const char *d_uid)
{
    status_begin(r, code, reason, message);
    if ((d_name && *d_name) || (d_group && *d_group) || (d_kind && *d_kind) || (d_uid && *d_uid)) {
        details_begin(r, d_name, d_group, d_kind, d_uid);
        put(&r->body, "}");
    }
    status_end(r, code);
}

void resp_statusf(ks_resp *r, int code, const char *reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    resp_status(r, code, reason, msg, NULL, NULL, NULL, NULL);
    free(msg);
}

void resp_not_found(ks_resp *r, const ks_res *res, const char *name)
{
    char *msg = xasprintf("%s \"%s\" not found", res->qual, name);
    resp_status(r, 404, "NotFound", msg, name, res->group, res->plural, NULL);
    free(msg);
}

void resp_already_exists(ks_resp *r, const ks_res *res, const char *name)
{
    char *msg = xasprintf("%s \"%s\" already exists", res->qual, name);
    resp_status(r, 409, "AlreadyExists", msg, name, res->group, res->plural, NULL);
    free(msg);
}

void resp_conflict(ks_resp *r, const ks_res *res, const char *name, const char *why)
{
    char *msg = xasprintf("Operation cannot be fulfilled on %s \"%s\": %s", res->qual, name, why);
    resp_status(r, 409, "Conflict", msg, name, res->group, res->plural, NULL);
    free(msg);
}

void resp_conflict_modified(ks_resp *r, const ks_res *res, const char *name)
{
    resp_conflict(
        r, res, name,
        "the object has been modified; please apply your changes to the latest version and try again");
}

void resp_invalid(ks_resp *r, const char *qual_kind, const char *group, const char *kind, const char *name,
                  ks_errs *e)
{
    buf_t msg;
    buf_init(&msg, BUF_UNLIMITED);
    if (buf_printf(&msg, "%s \"%s\" is invalid: ", qual_kind, name ? name : "") != 0)
        abort();
    if (e->n > 1)
        put(&msg, "[");
    for (int i = 0; i < e->n; i++) {
        if (buf_printf(&msg, "%s%s%s%s", i ? ", " : "", e->items[i].field, *e->items[i].field ? ": " : "",
                       e->items[i].message) != 0)
            abort();
    }
    if (e->n > 1)
        put(&msg, "]");
    status_begin(r, 422, "Invalid", buf_cstr(&msg));
    details_begin(r, name, group, kind, NULL);
    put(&r->body, ",\"causes\":[");
    for (int i = 0; i < e->n; i++) {
        put(&r->body, i ? ",{\"reason\":" : "{\"reason\":");
        putq(&r->body, e->items[i].reason);
        put(&r->body, ",\"message\":");
        putq(&r->body, e->items[i].message);
        put(&r->body, ",\"field\":");
        putq(&r->body, e->items[i].field);
        put(&r->body, "}");
    }
    put(&r->body, "]}");
    status_end(r, 422);
    buf_free(&msg);
}

void resp_bad_request(ks_resp *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    resp_status(r, 400, "BadRequest", msg, NULL, NULL, NULL, NULL);
    free(msg);
}

void resp_plain(ks_resp *r, int code, const char *text)
{
    buf_reset(&r->body);
    r->status = code;
    r->content_type = "text/plain; charset=utf-8";
    put(&r->body, text);
    put(&r->headers, "X-Content-Type-Options: nosniff\r\n");
}

void resp_json_take(ks_resp *r, int code, cJSON *o)
{
    buf_reset(&r->body);
    r->status = code;
    r->content_type = "application/json";
    if (json_dump_buf(o, &r->body) != 0)
        abort();
    cJSON_Delete(o);
}

/* ---- field errors ------------------------------------------------------ */

void errs_add(ks_errs *e, const char *reason, const char *field, const char *fmt, ...)
{
    if (e->n >= (int)ARRAY_SIZE(e->items))
        return;
    va_list ap;
    va_start(ap, fmt);
    ks_cause *c = &e->items[e->n++];
    c->reason = reason;
    c->field = xstrdup(field ? field : "");
    c->message = xvasprintf(fmt, ap);
    va_end(ap);
}

void errs_free(ks_errs *e)
{
    for (int i = 0; i < e->n; i++) {
        free(e->items[i].field);
        free(e->items[i].message);
    }
    e->n = 0;
}

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

/* ---- selectors --------------------------------------------------------- */

static const char *ver_label_lookup(void *ctx, const char *key)
{
    return ver_label(ctx, key);
}

int obj_matches(const ks_ver *v, const char *ns, const lsel *ls, const fsel *fs)
{
    if (ns && strcmp(ver_ns(v), ns) != 0)
        return 0;
    if (ls && !lsel_match(ls, ver_label_lookup, (void *)(uintptr_t)v))
        return 0;
    for (int i = 0; fs && i < fs->n; i++) {
        int eq = strcmp(ver_field(v, fs->t[i].field), fs->t[i].value) == 0;
        if (eq == fs->t[i].neq)
            return 0;
    }
    return 1;
}

void fsel_free(fsel *f)
{
    if (f == NULL)
        return;
    for (int i = 0; i < f->n; i++) {
        free(f->t[i].field);
        free(f->t[i].value);
    }
    free(f);
}

const char *fsel_required(const fsel *f, const char *field)
{
    for (int i = 0; f && i < f->n; i++)
        if (!f->t[i].neq && strcmp(f->t[i].field, field) == 0)
            return f->t[i].value;
    return NULL;
}

static int field_supported(const ks_res *r, const char *f)
{
    if (strcmp(f, "metadata.name") == 0 || strcmp(f, "metadata.namespace") == 0)
        return 1;
    for (int i = 0; r->fields && r->fields[i]; i++)
        if (strcmp(r->fields[i], f) == 0)
            return 1;
    return 0;
}

/* Unescape \x sequences of a field selector term part. */
static char *unescape(const char *s, size_t n)
{
    char *out = xmalloc(n + 1), *o = out;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 1 < n)
            i++;
        *o++ = s[i];
    }
    *o = '\0';
    return out;
}

int fsel_parse(const ks_res *r, const char *s, fsel **out, char *err, size_t errlen)
{
    fsel *f = xcalloc(1, sizeof(*f));
    *out = NULL;
    const char *p = s;
    while (p && *p) {
        /* find the end of this term: an unescaped ',' */
        const char *e = p;
        while (*e && *e != ',') {
            if (*e == '\\' && e[1])
                e++;
            e++;
        }
        size_t len = (size_t)(e - p);
        /* operator: first unescaped '!=', '==' or '=' */
        size_t op = len, oplen = 0;
        int neq = 0;
        for (size_t i = 0; i < len; i++) {
            if (p[i] == '\\') {
                i++;
                continue;
            }
            if (p[i] == '!' && i + 1 < len && p[i + 1] == '=') {
                op = i, oplen = 2, neq = 1;
                break;
            }
            if (p[i] == '=') {
                op = i;
                oplen = (i + 1 < len && p[i + 1] == '=') ? 2 : 1;
                break;
            }
        }
        if (len == 0 || oplen == 0) {
            snprintf(err, errlen, "invalid selector: '%s'; can't understand '%.*s'", s, (int)len, p);
            fsel_free(f);
            return OP_EPARSE;
        }
        if (f->n == (int)ARRAY_SIZE(f->t)) {
            snprintf(err, errlen, "invalid selector: '%s'; too many requirements", s);
            fsel_free(f);
            return OP_EPARSE;
        }
        char *field = unescape(p, op);
        char *value = unescape(p + op + oplen, len - op - oplen);
        if (!field_supported(r, field)) {
            /* Kinds without field selectors of their own answer with the
             * default conversion's message; the others (and CRs) the old one. */
            if (r->bi && r->fields == NULL && strcmp(r->plural, "services") != 0)
                snprintf(err, errlen,
                         "\"%s\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
                         field);
            else
                snprintf(err, errlen, "field label not supported: %s", field);
            free(field);
            free(value);
            fsel_free(f);
            return OP_EINVAL;
        }
        f->t[f->n].field = field;
        f->t[f->n].value = value;
        f->t[f->n].neq = neq;
        f->n++;
        p = *e ? e + 1 : e;
    }
    if (f->n == 0) {
        fsel_free(f);
        return 0;
    }
    *out = f;
    return 0;
}
