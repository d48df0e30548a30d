/* ks_patch: RFC 6902 JSON patches and server-side apply.
 *
 * Server-side apply keeps per-manager field sets in metadata.managedFields
 * in the FieldsV1 format ("f:<field>", "k:{<merge keys>}" for list elements
 * with merge keys, "v:<value>" for set lists). What is implemented:
 *  - an apply merges the applied configuration into the live object (maps
 *    recursively, lists with merge keys element by element, set lists as
 *    sets, everything else replaced) and removes the fields the manager
 *    applied before but no longer applies, unless another manager owns them;
 *  - a field owned by another manager whose live value differs from the
 *    applied value is a conflict (409, causes FieldManagerConflict) unless
 *    force=true, which moves ownership to the applier;
 *  - non-apply writes (PUT, merge/JSON/strategic patches, /scale) record an
 *    Update entry for the fields they change, taking them from other managers,
 *    but only on objects that already carry managedFields (objects never
 *    applied have none, so plain writes stay cheap);
 *  - list merge keys: built-ins use core/smp's table, custom resources their
 *    schema's x-kubernetes-list-type/x-kubernetes-list-map-keys.
 * Not implemented: version conversion of field sets, the "." ownership of
 * whole elements for removal, and managedFields for plain creates.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubesim/ks_int.h"
#include "core/err.h"
#include "core/json.h"
#include "core/mem.h"
#include "core/rfc3339.h"
#include "core/smp.h"

/* ---- RFC 6902 ---------------------------------------------------------- */

/* Decode one reference token (~1 -> /, ~0 -> ~). */
static char *ptr_token(const char *s, size_t n)
{
    char *out = xmalloc(n + 1), *o = out;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '~' && i + 1 < n && (s[i + 1] == '0' || s[i + 1] == '1')) {
            *o++ = s[i + 1] == '0' ? '~' : '/';
            i++;
        } else {
            *o++ = s[i];
        }
    }
    *o = '\0';
    return out;
}

static int array_index(const char *tok, int len, int allow_end, int *out)
{
    if (strcmp(tok, "-") == 0) {
        if (!allow_end)
            return -1;
        *out = len;
        return 0;
    }
    if (*tok == '\0' || (tok[0] == '0' && tok[1]))
        return -1;
    long v = 0;
    for (const char *p = tok; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
        if (v > 1000000)
            return -1;
    }
    if (v > len || (!allow_end && v == len))
        return -1;
    *out = (int)v;
    return 0;
}

/* Resolve the parent of the last token of path; *last gets the decoded
 * last token (caller frees). NULL parent for the root path "". */
static int resolve_parent(cJSON *doc, const char *path, cJSON **parent, char **last)
{
    *parent = NULL;
    *last = NULL;
    if (*path == '\0')
        return 0;
    if (*path != '/')
        return -1;
    cJSON *cur = doc;
    const char *p = path + 1;
    while (1) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        char *tok = ptr_token(p, n);
        if (slash == NULL) {
            *parent = cur;
            *last = tok;
            return 0;
        }
        cJSON *next = NULL;
        if (cJSON_IsObject(cur)) {
            next = cJSON_GetObjectItemCaseSensitive(cur, tok);
        } else if (cJSON_IsArray(cur)) {
            int idx;
            if (array_index(tok, cJSON_GetArraySize(cur), 0, &idx) == 0)
                next = cJSON_GetArrayItem(cur, idx);
        }
        free(tok);
        if (next == NULL)
            return -1;
        cur = next;
        p = slash + 1;
    }
}

static cJSON *get_at(cJSON *doc, const char *path)
{
    cJSON *parent;
    char *last;
    if (resolve_parent(doc, path, &parent, &last) != 0)
        return NULL;
    if (parent == NULL)
        return doc;
    cJSON *r = NULL;
    if (cJSON_IsObject(parent)) {
        r = cJSON_GetObjectItemCaseSensitive(parent, last);
    } else if (cJSON_IsArray(parent)) {
        int idx;
        if (array_index(last, cJSON_GetArraySize(parent), 0, &idx) == 0)
            r = cJSON_GetArrayItem(parent, idx);
    }
    free(last);
    return r;
}

/* Insert before position idx (< size). cJSON_InsertItemInArray of the
 * cJSON 1.7.15 in Debian loses the item, so the list is relinked here. */
static void array_insert(cJSON *arr, int idx, cJSON *item)
{
    cJSON *after = arr->child;
    for (int i = 0; i < idx && after; i++)
        after = after->next;
    if (after == NULL) {
        cJSON_AddItemToArray(arr, item);
        return;
    }
    item->next = after;
    if (after == arr->child) {
        item->prev = after->prev; /* the head's prev is the tail */
        arr->child = item;
    } else {
        item->prev = after->prev;
        after->prev->next = item;
    }
    after->prev = item;
}

/* Add value at path (takes value). */
static int add_at(cJSON **doc, const char *path, cJSON *value)
{
    cJSON *parent;
    char *last;
    if (resolve_parent(*doc, path, &parent, &last) != 0) {
        cJSON_Delete(value);
        return -1;
    }
    if (parent == NULL) {
        cJSON_Delete(*doc);
        *doc = value;
        return 0;
    }
    int rc = 0;
    if (cJSON_IsObject(parent)) {
        json_set(parent, last, value);
    } else if (cJSON_IsArray(parent)) {
        int idx;
        if (array_index(last, cJSON_GetArraySize(parent), 1, &idx) != 0) {
            cJSON_Delete(value);
            rc = -1;
        } else if (idx == cJSON_GetArraySize(parent)) {
            cJSON_AddItemToArray(parent, value);
        } else {
            array_insert(parent, idx, value);
        }
    } else {
        cJSON_Delete(value);
        rc = -1;
    }
    free(last);
    return rc;
}

/* Detach the value at path; NULL when missing. */
static cJSON *detach_at(cJSON *doc, const char *path)
{
    cJSON *parent;
    char *last;
    if (resolve_parent(doc, path, &parent, &last) != 0 || parent == NULL) {
        free(last);
        return NULL;
    }
    cJSON *r = NULL;
    if (cJSON_IsObject(parent)) {
        r = cJSON_DetachItemFromObjectCaseSensitive(parent, last);
    } else if (cJSON_IsArray(parent)) {
        int idx;
        if (array_index(last, cJSON_GetArraySize(parent), 0, &idx) == 0)
            r = cJSON_DetachItemFromArray(parent, idx);
    }
    free(last);
    return r;
}

int patch_json_apply(cJSON **doc, const char *patch, size_t len, char *msg, size_t msglen)
{
    cJSON *ops = json_parse_untrusted(patch, len, NULL);
    if (ops == NULL || !cJSON_IsArray(ops)) {
        snprintf(msg, msglen, "json: cannot unmarshal %s into Go value of type jsonpatch.Patch",
                 ops ? "object" : "invalid JSON");
        cJSON_Delete(ops);
        return OP_EPARSE;
    }
    for (const cJSON *op = ops->child; op; op = op->next) {
        const char *name = json_get_str(op, "op");
        const char *path = json_get_str(op, "path");
        const char *from = json_get_str(op, "from");
        const cJSON *value = json_child(op, "value");
        if (!cJSON_IsObject(op) || name == NULL || path == NULL) {
            snprintf(msg, msglen, "Unable to decode patch operation: missing %s", name ? "path" : "op");
            cJSON_Delete(ops);
            return OP_EPARSE;
        }
        int fail = 0;
        if (strcmp(name, "add") == 0) {
            if (value == NULL) {
                snprintf(msg, msglen, "add operation does not apply: missing value");
                fail = 1;
            } else if (add_at(doc, path, cJSON_Duplicate(value, 1)) != 0) {
                snprintf(msg, msglen,
                         "add operation does not apply: doc is missing path: \"%s\": missing value", path);
                fail = 1;
            }
        } else if (strcmp(name, "remove") == 0) {
            cJSON *v = detach_at(*doc, path);
            if (v == NULL) {
                snprintf(msg, msglen,
                         "remove operation does not apply: doc is missing path: \"%s\": missing value", path);
                fail = 1;
            }
            cJSON_Delete(v);
        } else if (strcmp(name, "replace") == 0) {
            if (value == NULL) {
                snprintf(msg, msglen, "replace operation does not apply: missing value");
                fail = 1;
            } else if (*path == '\0') {
                cJSON_Delete(*doc);
                *doc = cJSON_Duplicate(value, 1);
            } else {
                cJSON *v = detach_at(*doc, path);
                if (v == NULL) {
                    snprintf(msg, msglen,
                             "replace operation does not apply: doc is missing key: %s: missing value", path);
                    fail = 1;
                } else {
                    cJSON_Delete(v);
                    if (add_at(doc, path, cJSON_Duplicate(value, 1)) != 0) {
                        snprintf(msg, msglen, "replace operation does not apply: doc is missing key: %s",
                                 path);
                        fail = 1;
                    }
                }
            }
        } else if (strcmp(name, "move") == 0 || strcmp(name, "copy") == 0) {
            int move = name[0] == 'm';
            if (from == NULL) {
                snprintf(msg, msglen, "Unable to decode patch operation: missing from");
                cJSON_Delete(ops);
                return OP_EPARSE;
            }
            size_t fl = strlen(from);
            if (move && strncmp(path, from, fl) == 0 && path[fl] == '/') {
                snprintf(msg, msglen, "move operation does not apply: from path is a prefix of path");
                fail = 1;
            } else {
                cJSON *v = move ? detach_at(*doc, from) : cJSON_Duplicate(get_at(*doc, from), 1);
                if (v == NULL) {
                    snprintf(msg, msglen,
                             "%s operation does not apply: doc is missing from path: %s: missing value", name,
                             from);
                    fail = 1;
                } else if (add_at(doc, path, v) != 0) {
                    snprintf(msg, msglen, "%s operation does not apply: doc is missing destination path: %s",
                             name, path);
                    fail = 1;
                }
            }
        } else if (strcmp(name, "test") == 0) {
            cJSON *cur = get_at(*doc, path);
            if (cur == NULL && value && cJSON_IsNull(value)) {
                /* a missing value tests equal to null */
            } else if (cur == NULL || value == NULL || !json_equal(cur, value)) {
                snprintf(msg, msglen, "testing value %s failed: test failed", path);
                fail = 1;
            }
        } else {
            snprintf(msg, msglen, "Unexpected kind: %s", name);
            cJSON_Delete(ops);
            return OP_EPARSE;
        }
        if (fail) {
            cJSON_Delete(ops);
            return OP_EINVALID;
        }
    }
    cJSON_Delete(ops);
    return 0;
}

/* ---- field sets -------------------------------------------------------- */

/* How a list field merges: returns 'm' (map with keys in keys[]), 's' (set) or 'a' (atomic). */
static char list_kind(const ks_res *r, const cJSON *schema, const char *field, const cJSON *sample,
                      const char **keys, int *nkeys)
{
    *nkeys = 0;
    if (r->flags & KSR_CUSTOM) {
        const char *lt = json_get_str(schema, "x-kubernetes-list-type");
        if (lt && strcmp(lt, "map") == 0) {
            const cJSON *mk = json_child(schema, "x-kubernetes-list-map-keys");
            for (const cJSON *k = mk ? mk->child : NULL; k && *nkeys < 4; k = k->next)
                if (cJSON_IsString(k))
                    keys[(*nkeys)++] = k->valuestring;
            return *nkeys ? 'm' : 'a';
        }
        if (lt && strcmp(lt, "set") == 0)
            return 's';
        return 'a';
    }
    if (field && strcmp(field, "finalizers") == 0)
        return 's';
    const char *k = smp_merge_key(field, sample);
    if (k && cJSON_IsObject(sample)) {
        keys[0] = k;
        *nkeys = 1;
        return 'm';
    }
    return 'a';
}

static char *elem_key(const cJSON *elem, const char **keys, int nkeys)
{
    cJSON *o = cJSON_CreateObject();
    /* keys sorted, as the FieldsV1 encoder writes them */
    const char *sorted[4];
    for (int i = 0; i < nkeys; i++)
        sorted[i] = keys[i];
    for (int i = 1; i < nkeys; i++)
        for (int j = i; j > 0 && strcmp(sorted[j], sorted[j - 1]) < 0; j--) {
            const char *t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    for (int i = 0; i < nkeys; i++) {
        const cJSON *v = json_child(elem, sorted[i]);
        if (v)
            cJSON_AddItemToObject(o, sorted[i], cJSON_Duplicate(v, 1));
    }
    char *s = json_dump(o);
    cJSON_Delete(o);
    char *k = xasprintf("k:%s", s);
    free(s);
    return k;
}

static char *value_key(const cJSON *v)
{
    char *s = json_dump(v);
    char *k = xasprintf("v:%s", s);
    free(s);
    return k;
}

static const cJSON *sub_schema(const cJSON *schema, const char *key)
{
    if (schema == NULL)
        return NULL;
    const cJSON *p = json_child(json_child(schema, "properties"), key);
    if (p)
        return p;
    const cJSON *a = json_child(schema, "additionalProperties");
    return cJSON_IsObject(a) ? a : NULL;
}

static cJSON *fset_value(const ks_res *r, const cJSON *schema, const char *field, const cJSON *v);

static cJSON *fset_object(const ks_res *r, const cJSON *schema, const cJSON *o)
{
    cJSON *set = cJSON_CreateObject();
    for (const cJSON *c = o->child; c; c = c->next) {
        char *k = xasprintf("f:%s", c->string);
        cJSON_AddItemToObject(set, k, fset_value(r, sub_schema(schema, c->string), c->string, c));
        free(k);
    }
    return set;
}

static cJSON *fset_value(const ks_res *r, const cJSON *schema, const char *field, const cJSON *v)
{
    if (cJSON_IsObject(v) && v->child)
        return fset_object(r, schema, v);
    if (cJSON_IsArray(v) && v->child) {
        const char *keys[4];
        int nk;
        char kind = list_kind(r, schema, field, v->child, keys, &nk);
        if (kind == 'a')
            return cJSON_CreateObject();
        cJSON *set = cJSON_CreateObject();
        const cJSON *items = schema ? json_child(schema, "items") : NULL;
        for (const cJSON *e = v->child; e; e = e->next) {
            char *k = kind == 'm' ? elem_key(e, keys, nk) : value_key(e);
            cJSON *sub;
            if (kind == 'm' && cJSON_IsObject(e)) {
                sub = fset_object(r, items, e);
                cJSON_AddItemToObject(sub, ".", cJSON_CreateObject());
            } else {
                sub = cJSON_CreateObject();
            }
            if (!json_child(set, k))
                cJSON_AddItemToObject(set, k, sub);
            else
                cJSON_Delete(sub);
            free(k);
        }
        return set;
    }
    return cJSON_CreateObject();
}

/* The field set of an applied configuration (top level). */
static cJSON *fset_of_config(const ks_res *r, const cJSON *schema, const cJSON *cfg)
{
    cJSON *set = cJSON_CreateObject();
    for (const cJSON *c = cfg->child; c; c = c->next) {
        if (strcmp(c->string, "apiVersion") == 0 || strcmp(c->string, "kind") == 0)
            continue;
        if (strcmp(c->string, "metadata") == 0) {
            cJSON *ms = cJSON_CreateObject();
            static const char *const tracked[] = {"labels", "annotations", "finalizers", "ownerReferences"};
            for (size_t i = 0; i < ARRAY_SIZE(tracked); i++) {
                const cJSON *v = json_child(c, tracked[i]);
                if (v == NULL)
                    continue;
                char *k = xasprintf("f:%s", tracked[i]);
                cJSON_AddItemToObject(ms, k, fset_value(r, NULL, tracked[i], v));
                free(k);
            }
            if (ms->child)
                cJSON_AddItemToObject(set, "f:metadata", ms);
            else
                cJSON_Delete(ms);
            continue;
        }
        char *k = xasprintf("f:%s", c->string);
        cJSON_AddItemToObject(set, k, fset_value(r, sub_schema(schema, c->string), c->string, c));
        free(k);
    }
    return set;
}

/* Find the child of value v named by a set key (f:/k:/v:). */
static cJSON *child_by_setkey(cJSON *v, const char *key)
{
    if (v == NULL)
        return NULL;
    if (strncmp(key, "f:", 2) == 0)
        return cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, key + 2) : NULL;
    if (!cJSON_IsArray(v))
        return NULL;
    if (strncmp(key, "k:", 2) == 0) {
        cJSON *want = json_parse(key + 2, strlen(key + 2), NULL);
        cJSON *hit = NULL;
        for (cJSON *e = v->child; e && want && !hit; e = e->next) {
            int ok = 1;
            for (const cJSON *kv = want->child; kv && ok; kv = kv->next)
                ok = json_equal(json_child(e, kv->string), kv);
            if (ok)
                hit = e;
        }
        cJSON_Delete(want);
        return hit;
    }
    if (strncmp(key, "v:", 2) == 0) {
        cJSON *want = json_parse(key + 2, strlen(key + 2), NULL);
        cJSON *hit = NULL;
        for (cJSON *e = v->child; e && want && !hit; e = e->next)
            if (json_equal(e, want))
                hit = e;
        cJSON_Delete(want);
        return hit;
    }
    return NULL;
}

static void path_append(buf_t *p, const char *key)
{
    int rc;
    if (strncmp(key, "f:", 2) == 0)
        rc = buf_printf(p, ".%s", key + 2);
    else if (strncmp(key, "k:", 2) == 0) {
        cJSON *k = json_parse(key + 2, strlen(key + 2), NULL);
        rc = buf_putc(p, '[');
        int first = 1;
        for (const cJSON *kv = k ? k->child : NULL; kv && rc == 0; kv = kv->next) {
            char *v = json_dump(kv);
            rc = buf_printf(p, "%s%s=%s", first ? "" : ",", kv->string, v);
            free(v);
            first = 0;
        }
        rc = rc ? rc : buf_putc(p, ']');
        cJSON_Delete(k);
    } else {
        rc = buf_printf(p, "[=%s]", key + 2);
    }
    if (rc != 0)
        abort();
}

typedef struct mgr_entry {
    cJSON *entry; /* managedFields element (owned by the mf array) */
    cJSON *set;   /* its fieldsV1 (inside entry) */
} mgr_entry;

typedef struct conflicts {
    cJSON *causes;
    buf_t text;
    int n;
    const char *last_mgr;
} conflicts;

static void add_conflict(conflicts *cf, const char *mgr, const char *path)
{
    cJSON *c = cJSON_CreateObject();
    json_set_str(c, "reason", "FieldManagerConflict");
    char *m = xasprintf("conflict with \"%s\": %s", mgr, path);
    /* the cause names the manager only; the path is its field */
    char *cm = xasprintf("conflict with \"%s\"", mgr);
    json_set_str(c, "message", cm);
    free(cm);
    json_set_str(c, "field", path);
    cJSON_AddItemToArray(cf->causes, c);
    if (buf_printf(&cf->text, "%s%s", cf->n ? "\n" : "", m) != 0)
        abort();
    free(m);
    cf->n++;
}

/* Walk the applied set; for leaves owned by others with a different live value, record conflicts (or, with
 * force, take them away from the others). */
static void find_conflicts(cJSON *aset, cJSON *cfg, cJSON *live, mgr_entry *others, cJSON **osets,
                           int nothers, buf_t *path, int force, conflicts *cf)
{
    for (cJSON *k = aset->child; k; k = k->next) {
        if (strcmp(k->string, ".") == 0)
            continue;
        cJSON *cv = child_by_setkey(cfg, k->string);
        cJSON *lv = child_by_setkey(live, k->string);
        size_t mark = path->len;
        path_append(path, k->string);
        cJSON **sub = xcalloc((size_t)nothers + 1, sizeof(cJSON *));
        int leaf =
            k->child == NULL || (k->child && strcmp(k->child->string, ".") == 0 && k->child->next == NULL);
        for (int i = 0; i < nothers; i++) {
            sub[i] = osets[i] ? cJSON_GetObjectItemCaseSensitive(osets[i], k->string) : NULL;
            if (sub[i] == NULL)
                continue;
            int other_leaf = sub[i]->child == NULL;
            if ((leaf || other_leaf) && !json_equal(cv, lv)) {
                if (force) {
                    cJSON_DeleteItemFromObjectCaseSensitive(osets[i], k->string);
                    sub[i] = NULL;
                } else {
                    add_conflict(cf, json_get_str_or(others[i].entry, "manager", ""), buf_cstr(path));
                }
            }
        }
        if (!leaf)
            find_conflicts(k, cv, lv, others, sub, nothers, path, force, cf);
        free(sub);
        path->len = mark;
        if (path->data)
            path->data[mark] = '\0';
    }
}

static int owned_by_any(cJSON **sets, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (sets[i] && cJSON_GetObjectItemCaseSensitive(sets[i], key))
            return 1;
    return 0;
}

/* Remove from live what the manager owned before (old) and no longer applies (new), unless others own it. */
static void remove_dropped(cJSON *old, cJSON *new_, cJSON *live, cJSON **osets, int n)
{
    for (cJSON *k = old ? old->child : NULL; k; k = k->next) {
        if (strcmp(k->string, ".") == 0)
            continue;
        cJSON *nk = new_ ? cJSON_GetObjectItemCaseSensitive(new_, k->string) : NULL;
        cJSON *lv = child_by_setkey(live, k->string);
        if (lv == NULL)
            continue;
        cJSON **sub = xcalloc((size_t)n + 1, sizeof(cJSON *));
        for (int i = 0; i < n; i++)
            sub[i] = osets[i] ? cJSON_GetObjectItemCaseSensitive(osets[i], k->string) : NULL;
        if (nk == NULL) {
            int shared = owned_by_any(osets, n, k->string);
            if (!shared) {
                cJSON_DetachItemViaPointer(live, lv);
                cJSON_Delete(lv);
            } else if (k->child) {
                remove_dropped(k, NULL, lv, sub, n);
            }
        } else if (k->child) {
            remove_dropped(k, nk, lv, sub, n);
        }
        free(sub);
    }
}

/* Merge applied cfg into dst following list semantics. */
static void apply_merge(const ks_res *r, const cJSON *schema, cJSON *dst, const cJSON *src)
{
    for (const cJSON *s = src->child; s; s = s->next) {
        cJSON *d = cJSON_GetObjectItemCaseSensitive(dst, s->string);
        const cJSON *ss = sub_schema(schema, s->string);
        if (d && cJSON_IsObject(d) && cJSON_IsObject(s)) {
            apply_merge(r, ss, d, s);
            continue;
        }
        if (d && cJSON_IsArray(d) && cJSON_IsArray(s) && s->child) {
            const char *keys[4];
            int nk;
            char kind = list_kind(r, ss, s->string, s->child, keys, &nk);
            if (kind == 'm') {
                const cJSON *items = ss ? json_child(ss, "items") : NULL;
                for (const cJSON *e = s->child; e; e = e->next) {
                    char *ek = elem_key(e, keys, nk);
                    cJSON *hit = child_by_setkey(d, ek);
                    free(ek);
                    if (hit && cJSON_IsObject(hit) && cJSON_IsObject(e))
                        apply_merge(r, items, hit, e);
                    else
                        cJSON_AddItemToArray(d, cJSON_Duplicate(e, 1));
                }
                continue;
            }
            if (kind == 's') {
                for (const cJSON *e = s->child; e; e = e->next) {
                    int have = 0;
                    for (const cJSON *x = d->child; x && !have; x = x->next)
                        have = json_equal(x, e);
                    if (!have)
                        cJSON_AddItemToArray(d, cJSON_Duplicate(e, 1));
                }
                continue;
            }
        }
        json_set(dst, s->string, cJSON_Duplicate(s, 1));
    }
}

static const cJSON *view_schema(const ks_res *r, int view)
{
    return (r->flags & KSR_CUSTOM) ? r->views[view].schema : NULL;
}

static cJSON *new_entry(const char *manager, const char *op, const char *api, const char *sub, cJSON *set)
{
    cJSON *e = cJSON_CreateObject();
    char ts[32];
    rfc3339_now(ts, 0);
    json_set_str(e, "manager", manager);
    json_set_str(e, "operation", op);
    json_set_str(e, "apiVersion", api);
    json_set_str(e, "time", ts);
    json_set_str(e, "fieldsType", "FieldsV1");
    json_set(e, "fieldsV1", set);
    if (sub)
        json_set_str(e, "subresource", sub);
    return e;
}

/* Drop entries whose set became empty. */
static void prune_entries(cJSON *mf)
{
    cJSON *e = mf ? mf->child : NULL;
    while (e) {
        cJSON *next = e->next;
        const cJSON *set = json_child(e, "fieldsV1");
        if (set == NULL || set->child == NULL) {
            cJSON_DetachItemViaPointer(mf, e);
            cJSON_Delete(e);
        }
        e = next;
    }
}

cJSON *patch_ssa_apply(const ks_res *r, int view, const cJSON *live_in, const cJSON *cfg, const char *manager,
                 int force, char **conflict_msg, cJSON **conflict_causes)
{
    const cJSON *schema = view_schema(r, view);
    cJSON *live = live_in ? cJSON_Duplicate(live_in, 1) : cJSON_CreateObject();
    cJSON *aset = fset_of_config(r, schema, cfg);
    cJSON *meta = json_obj_ensure(live, "metadata");
    cJSON *mf = (cJSON *)json_child(meta, "managedFields");
    if (!cJSON_IsArray(mf)) {
        mf = cJSON_CreateArray();
        json_set(meta, "managedFields", mf);
    }
    /* others = every entry but (manager, Apply) */
    int n = json_len(mf);
    mgr_entry *others = xcalloc((size_t)n + 1, sizeof(mgr_entry));
    cJSON **osets = xcalloc((size_t)n + 1, sizeof(cJSON *));
    int no = 0;
    cJSON *mine = NULL;
    for (cJSON *e = mf->child; e; e = e->next) {
        int me = strcmp(json_get_str_or(e, "manager", ""), manager) == 0 &&
                 strcmp(json_get_str_or(e, "operation", ""), "Apply") == 0 &&
                 json_get_str(e, "subresource") == NULL;
        if (me) {
            mine = e;
            continue;
        }
        others[no].entry = e;
        others[no].set = (cJSON *)json_child(e, "fieldsV1");
        osets[no] = others[no].set;
        no++;
    }
    conflicts cf = {cJSON_CreateArray(), {0}, 0, NULL};
    buf_init(&cf.text, BUF_UNLIMITED);
    buf_t path;
    buf_init(&path, BUF_UNLIMITED);
    find_conflicts(aset, (cJSON *)cfg, live, others, osets, no, &path, force, &cf);
    buf_free(&path);
    if (cf.n) {
        *conflict_msg =
            xasprintf("Apply failed with %d conflict%s: %s", cf.n, cf.n > 1 ? "s" : "", cf.text.data);
        *conflict_causes = cf.causes;
        buf_free(&cf.text);
        free(others);
        free(osets);
        cJSON_Delete(aset);
        cJSON_Delete(live);
        return NULL;
    }
    cJSON_Delete(cf.causes);
    buf_free(&cf.text);
    /* fields this manager stopped applying */
    cJSON *oldset = mine ? (cJSON *)json_child(mine, "fieldsV1") : NULL;
    if (oldset)
        remove_dropped(oldset, aset, live, osets, no);
    /* merge the configuration */
    cJSON *body = cJSON_Duplicate(cfg, 1);
    cJSON *cmeta = cJSON_DetachItemFromObjectCaseSensitive(body, "metadata");
    apply_merge(r, schema, live, body);
    cJSON_Delete(body);
    if (cmeta) {
        meta = json_obj_ensure(live, "metadata");
        static const char *const copy[] = {"name", "namespace", "generateName"};
        for (size_t i = 0; i < ARRAY_SIZE(copy); i++) {
            const cJSON *v = json_child(cmeta, copy[i]);
            if (v && !json_child(meta, copy[i]))
                json_set(meta, copy[i], cJSON_Duplicate(v, 1));
        }
        cJSON *tracked = cJSON_CreateObject();
        static const char *const fields[] = {"labels", "annotations", "finalizers", "ownerReferences"};
        for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
            const cJSON *v = json_child(cmeta, fields[i]);
            if (v)
                cJSON_AddItemToObject(tracked, fields[i], cJSON_Duplicate(v, 1));
        }
        apply_merge(r, NULL, meta, tracked);
        cJSON_Delete(tracked);
        const cJSON *rv = json_child(cmeta, "resourceVersion");
        if (rv)
            json_set(meta, "resourceVersion", cJSON_Duplicate(rv, 1));
        cJSON_Delete(cmeta);
    }
    /* record ownership; keep the old timestamp when nothing changed */
    const char *api = r->views[view].api_version;
    if (mine && json_equal(json_child(mine, "fieldsV1"), aset)) {
        cJSON_Delete(aset);
    } else if (mine) {
        cJSON *e = new_entry(manager, "Apply", api, NULL, aset);
        cJSON_ReplaceItemViaPointer(mf, mine, e);
    } else {
        cJSON_AddItemToArray(mf, new_entry(manager, "Apply", api, NULL, aset));
    }
    prune_entries(mf);
    free(others);
    free(osets);
    return live;
}

/* ---- Update operations ------------------------------------------------- */

/* Changed leaves between a and b as a field set; removed keys are deleted
 * from every set in rm (the removal applies to all managers). */
static cJSON *diff_set(const ks_res *r, const cJSON *schema, const char *field, const cJSON *a,
                       const cJSON *b)
{
    if (cJSON_IsObject(a) && cJSON_IsObject(b)) {
        cJSON *set = cJSON_CreateObject();
        for (const cJSON *c = b->child; c; c = c->next) {
            const cJSON *o = json_child(a, c->string);
            if (o && json_equal(o, c))
                continue;
            char *k = xasprintf("f:%s", c->string);
            const cJSON *ss = sub_schema(schema, c->string);
            cJSON *sub = o ? diff_set(r, ss, c->string, o, c) : fset_value(r, ss, c->string, c);
            cJSON_AddItemToObject(set, k, sub);
            free(k);
        }
        return set;
    }
    if (cJSON_IsArray(a) && cJSON_IsArray(b) && b->child) {
        const char *keys[4];
        int nk;
        char kind = list_kind(r, schema, field, b->child, keys, &nk);
        if (kind == 'm') {
            cJSON *set = cJSON_CreateObject();
            const cJSON *items = schema ? json_child(schema, "items") : NULL;
            for (const cJSON *e = b->child; e; e = e->next) {
                char *ek = elem_key(e, keys, nk);
                const cJSON *o = child_by_setkey((cJSON *)a, ek);
                if (!(o && json_equal(o, e))) {
                    cJSON *sub = o ? diff_set(r, items, NULL, o, e) : fset_value(r, items, NULL, e);
                    if (!o && cJSON_IsObject(e))
                        cJSON_AddItemToObject(sub, ".", cJSON_CreateObject());
                    cJSON_AddItemToObject(set, ek, sub);
                }
                free(ek);
            }
            return set;
        }
    }
    return cJSON_CreateObject();
}

static void set_subtract(cJSON *from, const cJSON *what)
{
    for (const cJSON *k = what ? what->child : NULL; k; k = k->next) {
        cJSON *f = cJSON_GetObjectItemCaseSensitive(from, k->string);
        if (f == NULL)
            continue;
        if (k->child == NULL || f->child == NULL)
            cJSON_DeleteItemFromObjectCaseSensitive(from, k->string);
        else {
            set_subtract(f, k);
            if (f->child == NULL)
                cJSON_DeleteItemFromObjectCaseSensitive(from, k->string);
        }
    }
}

static void set_union(cJSON *into, const cJSON *what)
{
    for (const cJSON *k = what ? what->child : NULL; k; k = k->next) {
        cJSON *f = cJSON_GetObjectItemCaseSensitive(into, k->string);
        if (f == NULL)
            cJSON_AddItemToObject(into, k->string, cJSON_Duplicate(k, 1));
        else
            set_union(f, k);
    }
}

/* Fields present in set but absent from value v are dropped from the set. */
static void set_retain_present(cJSON *set, cJSON *v)
{
    cJSON *k = set ? set->child : NULL;
    while (k) {
        cJSON *next = k->next;
        if (strcmp(k->string, ".") != 0) {
            cJSON *c = child_by_setkey(v, k->string);
            if (c == NULL)
                cJSON_DeleteItemFromObjectCaseSensitive(set, k->string);
            else if (k->child)
                set_retain_present(k, c);
        }
        k = next;
    }
}

void patch_ssa_record_update(const ks_res *r, int view, const cJSON *old, cJSON *obj, const char *manager,
                       const char *subresource)
{
    const cJSON *schema = view_schema(r, view);
    cJSON *meta = json_obj_ensure(obj, "metadata");
    cJSON *mf = (cJSON *)json_child(meta, "managedFields");
    if (!cJSON_IsArray(mf))
        return;
    cJSON *a = cJSON_Duplicate(old, 1), *b = cJSON_Duplicate(obj, 1);
    static const char *const skip[] = {"apiVersion", "kind"};
    for (size_t i = 0; i < 2; i++) {
        json_del(a, skip[i]);
        json_del(b, skip[i]);
    }
    /* only labels/annotations/finalizers/ownerReferences of metadata are tracked */
    static const char *const mkeep[] = {"labels", "annotations", "finalizers", "ownerReferences"};
    cJSON *ma = cJSON_CreateObject(), *mb = cJSON_CreateObject();
    for (size_t i = 0; i < ARRAY_SIZE(mkeep); i++) {
        const cJSON *x = json_get(a, "metadata") ? json_child(json_child(a, "metadata"), mkeep[i]) : NULL;
        const cJSON *y = json_child(meta, mkeep[i]);
        if (x)
            cJSON_AddItemToObject(ma, mkeep[i], cJSON_Duplicate(x, 1));
        if (y)
            cJSON_AddItemToObject(mb, mkeep[i], cJSON_Duplicate(y, 1));
    }
    json_set(a, "metadata", ma);
    json_set(b, "metadata", mb);
    cJSON *changed = diff_set(r, schema, NULL, a, b);
    /* take the changed fields from everyone else; forget fields that no longer exist */
    cJSON *mine = NULL;
    for (cJSON *e = mf->child; e; e = e->next) {
        cJSON *set = (cJSON *)json_child(e, "fieldsV1");
        int me = strcmp(json_get_str_or(e, "manager", ""), manager) == 0 &&
                 strcmp(json_get_str_or(e, "operation", ""), "Update") == 0 &&
                 ((subresource == NULL && json_get_str(e, "subresource") == NULL) ||
                  (subresource && strcmp(json_get_str_or(e, "subresource", ""), subresource) == 0));
        if (me) {
            mine = e;
            continue;
        }
        set_subtract(set, changed);
        set_retain_present(set, b);
    }
    if (changed->child) {
        if (mine) {
            cJSON *set = (cJSON *)json_child(mine, "fieldsV1");
            set_union(set, changed);
            set_retain_present(set, b);
            char ts[32];
            rfc3339_now(ts, 0);
            json_set_str(mine, "time", ts);
            cJSON_Delete(changed);
        } else {
            cJSON_AddItemToArray(
                mf, new_entry(manager, "Update", r->views[view].api_version, subresource, changed));
        }
    } else {
        cJSON_Delete(changed);
    }
    prune_entries(mf);
    if (json_len(mf) == 0)
        json_del(meta, "managedFields");
    cJSON_Delete(a);
    cJSON_Delete(b);
}
