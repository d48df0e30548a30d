#include "core/yaml.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/err.h"
#include "core/file.h"
#include "core/mem.h"

#define YAML_MAX_DEPTH 200

struct yctx {
    yaml_parser_t parser;
    char *err;
    size_t errlen;
    int failed;
};

static void fail(struct yctx *c, const yaml_mark_t *m, const char *what)
{
    if (!c->failed && c->err && c->errlen)
        snprintf(c->err, c->errlen, "line %zu column %zu: %s", m->line + 1, m->column + 1, what);
    c->failed = 1;
}

static int is_int(const char *s)
{
    if (*s == '-' || *s == '+')
        s++;
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

static int is_float(const char *s)
{
    char *end;
    if (!*s || strchr("0123456789+-.", *s) == NULL)
        return 0;
    errno = 0;
    (void)strtod(s, &end);
    return *end == '\0' && errno == 0 && strpbrk(s, ".eE") != NULL;
}

static cJSON *scalar(const yaml_event_t *ev)
{
    const char *v = (const char *)ev->data.scalar.value;
    if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return cJSON_CreateString(v);
    if (ev->data.scalar.tag && strcmp((const char *)ev->data.scalar.tag, YAML_STR_TAG) == 0)
        return cJSON_CreateString(v);
    if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE"))
        return cJSON_CreateTrue();
    if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "FALSE"))
        return cJSON_CreateFalse();
    if (!*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL"))
        return cJSON_CreateNull();
    if (is_int(v) && strlen(v) < 16)
        return cJSON_CreateNumber((double)strtoll(v, NULL, 10));
    if (is_float(v))
        return cJSON_CreateNumber(strtod(v, NULL));
    return cJSON_CreateString(v);
}

static int next(struct yctx *c, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&c->parser, ev)) {
        fail(c, &c->parser.problem_mark, c->parser.problem ? c->parser.problem : "syntax error");
        return -1;
    }
    return 0;
}

/* Build the node that starts with ev (already consumed). */
static cJSON *node(struct yctx *c, yaml_event_t *ev, int depth)
{
    if (depth > YAML_MAX_DEPTH) {
        fail(c, &ev->start_mark, "nesting too deep");
        return NULL;
    }
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        if (ev->data.scalar.anchor) {
            fail(c, &ev->start_mark, "anchors are not supported");
            return NULL;
        }
        return scalar(ev);
    case YAML_ALIAS_EVENT:
        fail(c, &ev->start_mark, "aliases are not supported");
        return NULL;
    case YAML_SEQUENCE_START_EVENT: {
        if (ev->data.sequence_start.anchor) {
            fail(c, &ev->start_mark, "anchors are not supported");
            return NULL;
        }
        cJSON *arr = cJSON_CreateArray();
        for (;;) {
            yaml_event_t e;
            if (next(c, &e) < 0)
                break;
            if (e.type == YAML_SEQUENCE_END_EVENT) {
                yaml_event_delete(&e);
                return arr;
            }
            cJSON *item = node(c, &e, depth + 1);
            yaml_event_delete(&e);
            if (item == NULL)
                break;
            cJSON_AddItemToArray(arr, item);
        }
        cJSON_Delete(arr);
        return NULL;
    }
    case YAML_MAPPING_START_EVENT: {
        if (ev->data.mapping_start.anchor) {
            fail(c, &ev->start_mark, "anchors are not supported");
            return NULL;
        }
        cJSON *obj = cJSON_CreateObject();
        for (;;) {
            yaml_event_t k;
            if (next(c, &k) < 0)
                break;
            if (k.type == YAML_MAPPING_END_EVENT) {
                yaml_event_delete(&k);
                return obj;
            }
            if (k.type != YAML_SCALAR_EVENT) {
                fail(c, &k.start_mark, "mapping keys must be scalars");
                yaml_event_delete(&k);
                break;
            }
            char *key = xstrdup((const char *)k.data.scalar.value);
            yaml_event_delete(&k);
            yaml_event_t v;
            if (next(c, &v) < 0) {
                free(key);
                break;
            }
            cJSON *val = node(c, &v, depth + 1);
            yaml_event_delete(&v);
            if (val == NULL) {
                free(key);
                break;
            }
            /* A repeated key: the last one wins, as in Go's decoder. */
            cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
            cJSON_AddItemToObject(obj, key, val);
            free(key);
        }
        cJSON_Delete(obj);
        return NULL;
    }
    default:
        fail(c, &ev->start_mark, "unexpected YAML event");
        return NULL;
    }
}

cJSON *yaml_parse_all(const char *s, size_t len, char *err, size_t errlen)
{
    struct yctx c = {.err = err, .errlen = errlen};
    cJSON *docs = cJSON_CreateArray();
    if (err && errlen)
        err[0] = '\0';
    yaml_parser_initialize(&c.parser);
    yaml_parser_set_input_string(&c.parser, (const unsigned char *)s, len);
    for (;;) {
        yaml_event_t ev;
        if (next(&c, &ev) < 0)
            break;
        if (ev.type == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (ev.type == YAML_DOCUMENT_START_EVENT || ev.type == YAML_DOCUMENT_END_EVENT ||
            ev.type == YAML_STREAM_START_EVENT) {
            yaml_event_delete(&ev);
            continue;
        }
        cJSON *doc = node(&c, &ev, 0);
        yaml_event_delete(&ev);
        if (doc == NULL)
            break;
        if (cJSON_IsNull(doc))
            cJSON_Delete(doc); /* an empty document ("---" alone) */
        else
            cJSON_AddItemToArray(docs, doc);
    }
    yaml_parser_delete(&c.parser);
    if (c.failed) {
        cJSON_Delete(docs);
        return NULL;
    }
    return docs;
}

cJSON *yaml_parse(const char *s, size_t len, char *err, size_t errlen)
{
    cJSON *docs = yaml_parse_all(s, len, err, errlen);
    if (docs == NULL)
        return NULL;
    cJSON *first = cJSON_DetachItemFromArray(docs, 0);
    cJSON_Delete(docs);
    if (first == NULL && err && errlen)
        snprintf(err, errlen, "empty document");
    return first;
}

cJSON *yaml_parse_file(const char *path, size_t max, char *err, size_t errlen)
{
    char *s;
    size_t n;
    int rc = file_read_all(path, max, &s, &n);
    if (rc) {
        if (err && errlen)
            snprintf(err, errlen, "%s: %s", path, err_str(rc));
        return NULL;
    }
    cJSON *doc = yaml_parse(s, n, err, errlen);
    free(s);
    return doc;
}
