/* ks_fsel: label and field selectors on stored versions. */
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
                snprintf(
                    err, errlen,
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
