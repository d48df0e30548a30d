/* ks_resp: Status responses and field errors. */
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

static void status_begin(ks_resp *r, int code, const char *reason, const char *message)
{
    buf_reset(&r->body);
    r->status = code;
    r->content_type = "application/json";
    ks_put(&r->body,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":");
    ks_putq(&r->body, message);
    if (reason && *reason) {
        ks_put(&r->body, ",\"reason\":");
        ks_putq(&r->body, reason);
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
    ks_put(&r->body, ",\"details\":{");
#define FIELD(k, v)                                                                                          \
    if (v && *v) {                                                                                           \
        if (!first)                                                                                          \
            ks_put(&r->body, ",");                                                                           \
        ks_put(&r->body, "\"" k "\":");                                                                      \
        ks_putq(&r->body, v);                                                                                \
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
        ks_put(&r->body, "}");
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
        ks_put(&msg, "[");
    for (int i = 0; i < e->n; i++) {
        if (buf_printf(&msg, "%s%s%s%s", i ? ", " : "", e->items[i].field, *e->items[i].field ? ": " : "",
                       e->items[i].message) != 0)
            abort();
    }
    if (e->n > 1)
        ks_put(&msg, "]");
    status_begin(r, 422, "Invalid", buf_cstr(&msg));
    details_begin(r, name, group, kind, NULL);
    ks_put(&r->body, ",\"causes\":[");
    for (int i = 0; i < e->n; i++) {
        ks_put(&r->body, i ? ",{\"reason\":" : "{\"reason\":");
        ks_putq(&r->body, e->items[i].reason);
        ks_put(&r->body, ",\"message\":");
        ks_putq(&r->body, e->items[i].message);
        ks_put(&r->body, ",\"field\":");
        ks_putq(&r->body, e->items[i].field);
        ks_put(&r->body, "}");
    }
    ks_put(&r->body, "]}");
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
    ks_put(&r->body, text);
    ks_put(&r->headers, "X-Content-Type-Options: nosniff\r\n");
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
