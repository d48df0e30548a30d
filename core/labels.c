#include "core/labels.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/json.h"
#include "core/mem.h"

struct lsel_req {
    char *key;
    enum lsel_op op;
    int n_values;
    char **values;
};

struct lsel {
    int n;
    int cap;
    struct lsel_req *reqs;
};

static lsel *lsel_new(void)
{
    return xcalloc(1, sizeof(lsel));
}

static struct lsel_req *add_req(lsel *s, const char *key, size_t klen, enum lsel_op op)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 4;
        s->reqs = xrealloc(s->reqs, (size_t)s->cap * sizeof(*s->reqs));
    }
    struct lsel_req *r = &s->reqs[s->n++];
    r->key = xstrndup(key, klen);
    r->op = op;
    r->n_values = 0;
    r->values = NULL;
    return r;
}

static void add_value(struct lsel_req *r, const char *v, size_t n)
{
    r->values = xrealloc(r->values, (size_t)(r->n_values + 1) * sizeof(char *));
    r->values[r->n_values++] = xstrndup(v, n);
}

void lsel_free(lsel *s)
{
    if (s == NULL)
        return;
    for (int i = 0; i < s->n; i++) {
        for (int j = 0; j < s->reqs[i].n_values; j++)
            free(s->reqs[i].values[j]);
        free(s->reqs[i].values);
        free(s->reqs[i].key);
    }
    free(s->reqs);
    free(s);
}

int lsel_is_empty(const lsel *s)
{
    return s == NULL || s->n == 0;
}

/* Label keys: optional DNS-subdomain prefix and '/', then a name of at most
 * 63 characters of [A-Za-z0-9_.-] beginning and ending alphanumeric. */
static int name_part_valid(const char *s, size_t n)
{
    if (n == 0 || n > 63)
        return 0;
    if (!isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return 0;
    return 1;
}

int label_key_valid(const char *k)
{
    const char *slash = strchr(k, '/');
    if (slash) {
        size_t plen = (size_t)(slash - k);
        if (plen == 0 || plen > 253)
            return 0;
        for (size_t i = 0; i < plen; i++)
            if (!islower((unsigned char)k[i]) && !isdigit((unsigned char)k[i]) && k[i] != '-' && k[i] != '.')
                return 0;
        k = slash + 1;
    }
    return name_part_valid(k, strlen(k));
}

int label_value_valid(const char *v)
{
    size_t n = strlen(v);
    return n == 0 || name_part_valid(v, n);
}

/* ---- string syntax ---- */

struct lexer {
    const char *p;
    char *err;
    size_t errlen;
};

static void skip_ws(struct lexer *lx)
{
    while (*lx->p == ' ' || *lx->p == '\t')
        lx->p++;
}

static int is_ident_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.' || c == '/';
}

static int ident(struct lexer *lx, const char **start, size_t *len)
{
    skip_ws(lx);
    *start = lx->p;
    while (is_ident_char(*lx->p))
        lx->p++;
    *len = (size_t)(lx->p - *start);
    return *len > 0;
}

static int parse_fail(struct lexer *lx, const char *what)
{
    if (lx->err && lx->errlen)
        snprintf(lx->err, lx->errlen, "unable to parse requirement: %s at \"%.40s\"", what, lx->p);
    return OP_EPARSE;
}

static int keyword(struct lexer *lx, const char *kw)
{
    size_t n = strlen(kw);
    if (strncmp(lx->p, kw, n) == 0 && !is_ident_char(lx->p[n])) {
        lx->p += n;
        return 1;
    }
    return 0;
}

static int parse_set(struct lexer *lx, struct lsel_req *r)
{
    skip_ws(lx);
    if (*lx->p != '(')
        return parse_fail(lx, "expected '('");
    lx->p++;
    for (;;) {
        const char *v;
        size_t n;
        skip_ws(lx);
        if (*lx->p == ')' && r->n_values == 0) {
            return parse_fail(lx, "for 'in', 'notin' operators, values set can't be empty");
        }
        ident(lx, &v, &n);
        add_value(r, v, n);
        skip_ws(lx);
        if (*lx->p == ',') {
            lx->p++;
            continue;
        }
        if (*lx->p == ')') {
            lx->p++;
            return 0;
        }
        return parse_fail(lx, "expected ',' or ')'");
    }
}

int lsel_parse(const char *s, lsel **out, char *err, size_t errlen)
{
    struct lexer lx = {s, err, errlen};
    lsel *sel = lsel_new();
    int rc = 0;

    skip_ws(&lx);
    while (*lx.p) {
        const char *k, *v;
        size_t kn, vn;
        int negate = 0;
        skip_ws(&lx);
        if (*lx.p == '!') {
            negate = 1;
            lx.p++;
        }
        if (!ident(&lx, &k, &kn)) {
            rc = parse_fail(&lx, "expected a key");
            break;
        }
        char *key = xstrndup(k, kn);
        int ok = label_key_valid(key);
        free(key);
        if (!ok) {
            rc = parse_fail(&lx, "invalid label key");
            break;
        }
        skip_ws(&lx);
        if (negate) {
            add_req(sel, k, kn, LSEL_NOTEXISTS);
        } else if (*lx.p == ',' || *lx.p == '\0') {
            add_req(sel, k, kn, LSEL_EXISTS);
        } else if (lx.p[0] == '=' && lx.p[1] == '=') {
            lx.p += 2;
            ident(&lx, &v, &vn);
            add_value(add_req(sel, k, kn, LSEL_EQ), v, vn);
        } else if (lx.p[0] == '=') {
            lx.p += 1;
            ident(&lx, &v, &vn);
            add_value(add_req(sel, k, kn, LSEL_EQ), v, vn);
        } else if (lx.p[0] == '!' && lx.p[1] == '=') {
            lx.p += 2;
            ident(&lx, &v, &vn);
            add_value(add_req(sel, k, kn, LSEL_NEQ), v, vn);
        } else if (lx.p[0] == '>' || lx.p[0] == '<') {
            enum lsel_op op = lx.p[0] == '>' ? LSEL_GT : LSEL_LT;
            lx.p++;
            if (!ident(&lx, &v, &vn)) {
                rc = parse_fail(&lx, "expected an integer");
                break;
            }
            char *num = xstrndup(v, vn), *end;
            errno = 0;
            (void)strtoll(num, &end, 10);
            int bad = *end != '\0' || errno != 0;
            free(num);
            if (bad) {
                rc = parse_fail(&lx, "for 'Gt', 'Lt' operators, the value must be an integer");
                break;
            }
            add_value(add_req(sel, k, kn, op), v, vn);
        } else if (keyword(&lx, "in")) {
            if ((rc = parse_set(&lx, add_req(sel, k, kn, LSEL_IN))) != 0)
                break;
        } else if (keyword(&lx, "notin")) {
            if ((rc = parse_set(&lx, add_req(sel, k, kn, LSEL_NOTIN))) != 0)
                break;
        } else {
            rc = parse_fail(&lx, "unknown operator");
            break;
        }
        /* Values must be valid label values. */
        struct lsel_req *r = &sel->reqs[sel->n - 1];
        for (int i = 0; i < r->n_values; i++)
            if (!label_value_valid(r->values[i]) && r->op != LSEL_GT && r->op != LSEL_LT)
                rc = parse_fail(&lx, "invalid label value");
        if (rc)
            break;
        skip_ws(&lx);
        if (*lx.p == ',') {
            lx.p++;
            skip_ws(&lx);
            if (*lx.p == '\0') {
                rc = parse_fail(&lx, "trailing ','");
                break;
            }
        } else if (*lx.p != '\0') {
            rc = parse_fail(&lx, "expected ','");
            break;
        }
    }
    if (rc) {
        lsel_free(sel);
        return rc;
    }
    *out = sel;
    return 0;
}

/* ---- LabelSelector objects ---- */

lsel *lsel_from_map(const cJSON *labels)
{
    lsel *sel = lsel_new();
    if (cJSON_IsObject(labels))
        for (const cJSON *l = labels->child; l; l = l->next)
            if (cJSON_IsString(l))
                add_value(add_req(sel, l->string, strlen(l->string), LSEL_EQ), l->valuestring,
                          strlen(l->valuestring));
    return sel;
}

int lsel_from_json(const cJSON *json, lsel **out, char *err, size_t errlen)
{
    lsel *sel = lsel_new();
    const cJSON *ml = json_child(json, "matchLabels");
    const cJSON *me = json_child(json, "matchExpressions");
    if (cJSON_IsObject(ml))
        for (const cJSON *l = ml->child; l; l = l->next) {
            if (!cJSON_IsString(l)) {
                if (err)
                    snprintf(err, errlen, "matchLabels.%s: must be a string", l->string);
                lsel_free(sel);
                return OP_EPARSE;
            }
            add_value(add_req(sel, l->string, strlen(l->string), LSEL_EQ), l->valuestring,
                      strlen(l->valuestring));
        }
    if (cJSON_IsArray(me))
        for (const cJSON *e = me->child; e; e = e->next) {
            const char *key = json_get_str(e, "key"), *op = json_get_str(e, "operator");
            const cJSON *vals = json_child(e, "values");
            enum lsel_op o;
            if (key == NULL || op == NULL) {
                if (err)
                    snprintf(err, errlen, "matchExpressions: key and operator are required");
                lsel_free(sel);
                return OP_EPARSE;
            }
            if (!strcmp(op, "In"))
                o = LSEL_IN;
            else if (!strcmp(op, "NotIn"))
                o = LSEL_NOTIN;
            else if (!strcmp(op, "Exists"))
                o = LSEL_EXISTS;
            else if (!strcmp(op, "DoesNotExist"))
                o = LSEL_NOTEXISTS;
            else if (!strcmp(op, "Gt"))
                o = LSEL_GT;
            else if (!strcmp(op, "Lt"))
                o = LSEL_LT;
            else {
                if (err)
                    snprintf(err, errlen, "matchExpressions: unknown operator \"%s\"", op);
                lsel_free(sel);
                return OP_EPARSE;
            }
            int nv = json_len(vals);
            int want_values = (o == LSEL_IN || o == LSEL_NOTIN || o == LSEL_GT || o == LSEL_LT);
            if (want_values ? nv == 0 : nv != 0) {
                if (err)
                    snprintf(err, errlen, "matchExpressions: values must be %s for operator %s",
                             want_values ? "non-empty" : "empty", op);
                lsel_free(sel);
                return OP_EPARSE;
            }
            struct lsel_req *r = add_req(sel, key, strlen(key), o);
            for (const cJSON *v = vals ? vals->child : NULL; v; v = v->next)
                if (cJSON_IsString(v))
                    add_value(r, v->valuestring, strlen(v->valuestring));
        }
    *out = sel;
    return 0;
}

/* ---- matching ---- */

static int in_values(const struct lsel_req *r, const char *v)
{
    for (int i = 0; i < r->n_values; i++)
        if (strcmp(r->values[i], v) == 0)
            return 1;
    return 0;
}

static int req_match(const struct lsel_req *r, const char *v)
{
    switch (r->op) {
    case LSEL_EQ:
        return v && strcmp(v, r->values[0]) == 0;
    case LSEL_NEQ:
        return v == NULL || strcmp(v, r->values[0]) != 0;
    case LSEL_IN:
        return v && in_values(r, v);
    case LSEL_NOTIN:
        return v == NULL || !in_values(r, v);
    case LSEL_EXISTS:
        return v != NULL;
    case LSEL_NOTEXISTS:
        return v == NULL;
    case LSEL_GT:
    case LSEL_LT: {
        if (v == NULL)
            return 0;
        char *end;
        errno = 0;
        long long have = strtoll(v, &end, 10);
        if (*end || errno || !*v)
            return 0;
        long long want = strtoll(r->values[0], NULL, 10);
        return r->op == LSEL_GT ? have > want : have < want;
    }
    }
    return 0;
}

int lsel_match(const lsel *s, lsel_lookup_fn get, void *ctx)
{
    if (s == NULL)
        return 1;
    for (int i = 0; i < s->n; i++)
        if (!req_match(&s->reqs[i], get(ctx, s->reqs[i].key)))
            return 0;
    return 1;
}

static const char *json_lookup(void *ctx, const char *key)
{
    const cJSON *v = json_child(ctx, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int lsel_match_json(const lsel *s, const cJSON *labels)
{
    return lsel_match(s, json_lookup, (void *)(uintptr_t)labels);
}

const char *lsel_required_value(const lsel *s, const char *key)
{
    if (s == NULL)
        return NULL;
    for (int i = 0; i < s->n; i++)
        if (s->reqs[i].op == LSEL_EQ && strcmp(s->reqs[i].key, key) == 0)
            return s->reqs[i].values[0];
    return NULL;
}

int lsel_to_buf(const lsel *s, buf_t *b)
{
    int rc = 0;
    for (int i = 0; s && i < s->n && rc == 0; i++) {
        const struct lsel_req *r = &s->reqs[i];
        if (i)
            rc = buf_putc(b, ',');
        switch (r->op) {
        case LSEL_EQ: rc = rc ? rc : buf_printf(b, "%s=%s", r->key, r->values[0]); break;
        case LSEL_NEQ: rc = rc ? rc : buf_printf(b, "%s!=%s", r->key, r->values[0]); break;
        case LSEL_EXISTS: rc = rc ? rc : buf_puts(b, r->key); break;
        case LSEL_NOTEXISTS: rc = rc ? rc : buf_printf(b, "!%s", r->key); break;
        case LSEL_GT: rc = rc ? rc : buf_printf(b, "%s>%s", r->key, r->values[0]); break;
        case LSEL_LT: rc = rc ? rc : buf_printf(b, "%s<%s", r->key, r->values[0]); break;
        case LSEL_IN:
        case LSEL_NOTIN:
            rc = rc ? rc : buf_printf(b, "%s %s (", r->key, r->op == LSEL_IN ? "in" : "notin");
            for (int j = 0; j < r->n_values && rc == 0; j++)
                rc = buf_printf(b, "%s%s", j ? "," : "", r->values[j]);
            rc = rc ? rc : buf_putc(b, ')');
            break;
        }
    }
    return rc;
}
