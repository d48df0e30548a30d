#include "core/json.h"

#include <assert.h>
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/map.h"
#include "core/mem.h"

size_t json_heap_bytes(const cJSON *j)
{
    size_t n = 0;
    for (; j; j = j->next) {
        n += mem_footprint(sizeof(cJSON));
        if (j->valuestring && (j->type & (cJSON_String | cJSON_Raw)))
            n += mem_footprint(strlen(j->valuestring) + 1);
        if (j->string && !(j->type & cJSON_StringIsConst))
            n += mem_footprint(strlen(j->string) + 1);
        n += json_heap_bytes(j->child);
    }
    return n;
}

void json_dedupe_keys(cJSON *o)
{
    for (cJSON *c = o ? o->child : NULL; c; c = c->next)
        if (cJSON_IsObject(c) || cJSON_IsArray(c))
            json_dedupe_keys(c);
    if (o == NULL)
        return;
    if (!cJSON_IsObject(o) || o->child == NULL || o->child->next == NULL)
        return;
    size_t n = 0;
    for (cJSON *c = o->child; c; c = c->next)
        n++;
    if (n <= 32) {
        cJSON *c = o->child;
        while (c) {
            cJSON *next = c->next;
            for (cJSON *d = next; d; d = d->next)
                if (strcmp(c->string, d->string) == 0) {
                    cJSON_Delete(cJSON_DetachItemViaPointer(o, c));
                    break;
                }
            c = next;
        }
        return;
    }
    /* Many keys: one pass from the end with a hash map of keys seen. */
    map_t seen;
    map_init(&seen);
    cJSON *last = o->child;
    while (last->next)
        last = last->next;
    for (cJSON *c = last; c;) {
        cJSON *prev = (c == o->child) ? NULL : c->prev;
        if (map_get(&seen, c->string))
            cJSON_Delete(cJSON_DetachItemViaPointer(o, c));
        else
            map_put(&seen, c->string, c);
        c = prev;
    }
    map_free(&seen);
}

/* ---- arenas ---- */

/* A cJSON tree takes ~4-5 times its text (64-byte items, every key its own
 * string). The first chunk of a parse is sized for that, later ones for the
 * text alone, all within ARENA_CHUNK_MAX: a tree costs what it needs plus at
 * most one partly used chunk, and a big document is never given a multiple
 * of its size up front. A reset keeps one chunk of at most ARENA_KEEP so a watch's events
 * reuse it without malloc. */
#define ARENA_MIN (4 * 1024)
#define ARENA_KEEP (256 * 1024)
#define ARENA_CHUNK_MAX ((size_t)8 << 20)

struct arena_chunk {
    struct arena_chunk *next;
    size_t size; /* usable bytes after the header */
    size_t used;
    max_align_t data[];
};

struct json_arena {
    struct arena_chunk *chunks; /* newest first */
    size_t hint;                /* preferred size of the next chunk */
    size_t step;                /* of the chunks after it */
    size_t bytes;               /* usable bytes of all chunks */
    size_t peak;                /* the most bytes ever held */
    size_t limit;               /* 0 = none */
    int exhausted;              /* an allocation was refused for the limit */
};

/* The arena cJSON allocates from on this thread, while a parse runs. */
static _Thread_local json_arena *cur_arena;

json_arena *json_arena_new(void)
{
    mem_init(); /* arenas need our hooks; create arenas on the loop thread */
    return xcalloc(1, sizeof(json_arena));
}

void json_arena_set_limit(json_arena *a, size_t max_bytes)
{
    a->limit = max_bytes;
}

int json_arena_exhausted(const json_arena *a)
{
    return a && a->exhausted;
}

static void *arena_alloc(json_arena *a, size_t n)
{
    if (n > SIZE_MAX - 15)
        return NULL;
    n = (n + 15) & ~(size_t)15;
    struct arena_chunk *c = a->chunks;
    if (c == NULL || c->size - c->used < n) {
        size_t size = a->hint < ARENA_MIN ? ARENA_MIN : a->hint > ARENA_CHUNK_MAX ? ARENA_CHUNK_MAX : a->hint;
        if (size < n)
            size = n;
        if (a->limit) {
            /* The bound is hard: refuse (cJSON then fails the parse) rather
             * than let a hostile or runaway document take the process. */
            if (a->bytes > a->limit || a->limit - a->bytes < n) {
                a->exhausted = 1;
                return NULL;
            }
            if (a->limit - a->bytes < size)
                size = a->limit - a->bytes;
        }
        assert(size >= n);
        struct arena_chunk *nc = xmalloc(sizeof(*nc) + size);
        nc->size = size;
        nc->used = 0;
        nc->next = c;
        a->chunks = nc;
        a->bytes += size;
        if (a->bytes > a->peak)
            a->peak = a->bytes;
        c = nc;
        a->hint = a->step;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    assert(c->used <= c->size && (a->limit == 0 || a->bytes <= a->limit));
    return p;
}

void json_arena_reset(json_arena *a)
{
    if (a == NULL)
        return;
    /* Not while a parse on this thread allocates from it. */
    assert(a != cur_arena);
    a->exhausted = 0;
    if (a->chunks == NULL)
        return;
    struct arena_chunk *keep = NULL, *c = a->chunks;
    while (c) {
        struct arena_chunk *next = c->next;
        if (c->size <= ARENA_KEEP && (keep == NULL || c->size > keep->size)) {
            free(keep);
            keep = c;
        } else {
            free(c);
        }
        c = next;
    }
    if (keep) {
        keep->used = 0;
        keep->next = NULL;
    }
    a->chunks = keep;
    a->bytes = keep ? keep->size : 0;
}

void json_arena_free(json_arena *a)
{
    if (a == NULL)
        return;
    json_arena_reset(a);
    free(a->chunks);
    free(a);
}

size_t json_arena_bytes(const json_arena *a)
{
    return a ? a->bytes : 0;
}

size_t json_arena_peak(const json_arena *a)
{
    return a ? a->peak : 0;
}

/* cJSON's hooks (installed by mem_init): the thread's arena while one is
 * set, the aborting allocator otherwise. Frees inside an arena parse (of a
 * half-built tree on a syntax error) are no-ops: the arena takes it all. */
void *json__hook_malloc(size_t n);
void json__hook_free(void *p);

void *json__hook_malloc(size_t n)
{
    return cur_arena ? arena_alloc(cur_arena, n) : xmalloc(n);
}

void json__hook_free(void *p)
{
    if (cur_arena == NULL)
        free(p);
}

cJSON *json_arena_parse(json_arena *a, const char *s, size_t len, const char **errpos)
{
    a->hint = len > ARENA_CHUNK_MAX / 4 ? ARENA_CHUNK_MAX : len * 4;
    a->step = len;
    json_arena *prev = cur_arena;
    cur_arena = a;
    cJSON *o = json_parse(s, len, errpos);
    cur_arena = prev;
    return o;
}

cJSON *json_parse(const char *s, size_t len, const char **errpos)
{
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(s, len, &end, 0);
    if (o == NULL) {
        if (errpos)
            *errpos = cJSON_GetErrorPtr();
        return NULL;
    }
    /* cJSON stops after the first value; reject anything but whitespace after it. */
    const char *stop = s + len;
    while (end && end < stop && (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t' || *end == '\0'))
        end++;
    if (end && end < stop) {
        if (errpos)
            *errpos = end;
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *json_parse_untrusted(const char *s, size_t len, const char **errpos)
{
    cJSON *o = json_parse(s, len, errpos);
    json_dedupe_keys(o);
    return o;
}

const cJSON *json_child(const cJSON *o, const char *key)
{
    if (o == NULL || !cJSON_IsObject(o))
        return NULL;
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

const cJSON *json_get(const cJSON *o, const char *path)
{
    char key[256];
    while (o && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        if (n >= sizeof(key))
            return NULL;
        memcpy(key, path, n);
        key[n] = '\0';
        o = json_child(o, key);
        path += n + (dot ? 1 : 0);
    }
    return o;
}

const char *json_get_str(const cJSON *o, const char *path)
{
    const cJSON *v = json_get(o, path);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

const char *json_get_str_or(const cJSON *o, const char *path, const char *dflt)
{
    const char *s = json_get_str(o, path);
    return s ? s : dflt;
}

long long json_get_int(const cJSON *o, const char *path, long long dflt)
{
    const cJSON *v = json_get(o, path);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return dflt;
    double d = v->valuedouble;
    if (d >= 9.2e18 || d <= -9.2e18)
        return dflt;
    return (long long)d;
}

long long json_num_ll(const cJSON *v, long long dflt)
{
    if (!cJSON_IsNumber(v) || isnan(v->valuedouble))
        return dflt;
    double d = v->valuedouble;
    if (d >= 9.2e18)
        return 9200000000000000000LL;
    if (d <= -9.2e18)
        return -9200000000000000000LL;
    return (long long)d;
}

long long json_num_clamp(const cJSON *v, long long dflt, long long lo, long long hi)
{
    long long x = json_num_ll(v, dflt);
    return x < lo ? lo : x > hi ? hi : x;
}

int json_get_bool(const cJSON *o, const char *path, int dflt)
{
    const cJSON *v = json_get(o, path);
    if (cJSON_IsTrue(v))
        return 1;
    if (cJSON_IsFalse(v))
        return 0;
    return dflt;
}

int json_len(const cJSON *o)
{
    if (o == NULL || !(cJSON_IsArray(o) || cJSON_IsObject(o)))
        return 0;
    return cJSON_GetArraySize(o);
}

cJSON *json_obj_ensure(cJSON *o, const char *key)
{
    cJSON *c = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsObject(c))
        return c;
    c = cJSON_CreateObject();
    json_set(o, key, c);
    return c;
}

cJSON *json_obj_path_ensure(cJSON *o, const char *path)
{
    char key[256];
    while (*path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        if (n >= sizeof(key))
            n = sizeof(key) - 1;
        memcpy(key, path, n);
        key[n] = '\0';
        o = json_obj_ensure(o, key);
        path += n + (dot ? 1 : 0);
        if (!dot)
            break;
    }
    return o;
}

void json_set(cJSON *o, const char *key, cJSON *item)
{
    if (cJSON_GetObjectItemCaseSensitive(o, key))
        cJSON_ReplaceItemInObjectCaseSensitive(o, key, item);
    else
        cJSON_AddItemToObject(o, key, item);
}

void json_set_str(cJSON *o, const char *key, const char *s)
{
    json_set(o, key, cJSON_CreateString(s));
}

void json_set_int(cJSON *o, const char *key, long long v)
{
    json_set(o, key, cJSON_CreateNumber((double)v));
}

void json_set_bool(cJSON *o, const char *key, int v)
{
    json_set(o, key, cJSON_CreateBool(v));
}

void json_del(cJSON *o, const char *key)
{
    cJSON_DeleteItemFromObjectCaseSensitive(o, key);
}

char *json_dump(const cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    if (s == NULL)
        abort(); /* only allocation failure; our allocator already aborted */
    return s;
}

int json_dump_buf(const cJSON *o, buf_t *b)
{
    char *s = json_dump(o);
    int rc = buf_puts(b, s);
    free(s);
    return rc;
}

int json_quote_buf(buf_t *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    int rc = buf_putc(b, '"');
    for (; rc == 0 && *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '"': rc = buf_puts(b, "\\\""); break;
        case '\\': rc = buf_puts(b, "\\\\"); break;
        case '\n': rc = buf_puts(b, "\\n"); break;
        case '\r': rc = buf_puts(b, "\\r"); break;
        case '\t': rc = buf_puts(b, "\\t"); break;
        case '\b': rc = buf_puts(b, "\\b"); break;
        case '\f': rc = buf_puts(b, "\\f"); break;
        default:
            if (c < 0x20) {
                char u[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
                rc = buf_puts(b, u);
            } else {
                rc = buf_putc(b, (char)c);
            }
        }
    }
    return rc ? rc : buf_putc(b, '"');
}

int json_equal(const cJSON *a, const cJSON *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return cJSON_Compare(a, b, 1);
}

int json_subset(const cJSON *want, const cJSON *have)
{
    if (want == NULL)
        return 1;
    if (have == NULL)
        return cJSON_IsNull(want);
    if (cJSON_IsObject(want)) {
        if (!cJSON_IsObject(have))
            return 0;
        for (const cJSON *w = want->child; w; w = w->next)
            if (!json_subset(w, json_child(have, w->string)))
                return 0;
        return 1;
    }
    if (cJSON_IsArray(want)) {
        if (!cJSON_IsArray(have) || cJSON_GetArraySize(want) != cJSON_GetArraySize(have))
            return 0;
        for (const cJSON *w = want->child, *h = have->child; w && h; w = w->next, h = h->next)
            if (!json_subset(w, h))
                return 0;
        return 1;
    }
    if (cJSON_IsNumber(want) && cJSON_IsNumber(have))
        return want->valuedouble == have->valuedouble;
    return json_equal(want, have);
}

cJSON *json_merge_patch(cJSON *target, const cJSON *patch)
{
    if (!cJSON_IsObject(patch)) {
        cJSON_Delete(target);
        return cJSON_Duplicate(patch, 1);
    }
    if (!cJSON_IsObject(target)) {
        cJSON_Delete(target);
        target = cJSON_CreateObject();
    }
    for (const cJSON *p = patch->child; p; p = p->next) {
        if (cJSON_IsNull(p)) {
            cJSON_DeleteItemFromObjectCaseSensitive(target, p->string);
            continue;
        }
        cJSON *cur = cJSON_DetachItemFromObjectCaseSensitive(target, p->string);
        cJSON *merged =
            cJSON_IsObject(p) ? json_merge_patch(cur, p) : (cJSON_Delete(cur), cJSON_Duplicate(p, 1));
        cJSON_AddItemToObject(target, p->string, merged);
    }
    return target;
}

cJSON *json_merge_diff(const cJSON *from, const cJSON *to)
{
    if (!cJSON_IsObject(from) || !cJSON_IsObject(to)) {
        if (json_equal(from, to))
            return NULL;
        return to ? cJSON_Duplicate(to, 1) : cJSON_CreateNull();
    }
    cJSON *patch = cJSON_CreateObject();
    for (const cJSON *f = from->child; f; f = f->next)
        if (!json_child(to, f->string))
            cJSON_AddItemToObject(patch, f->string, cJSON_CreateNull());
    for (const cJSON *t = to->child; t; t = t->next) {
        const cJSON *f = json_child(from, t->string);
        if (f == NULL) {
            cJSON_AddItemToObject(patch, t->string, cJSON_Duplicate(t, 1));
        } else if (cJSON_IsObject(f) && cJSON_IsObject(t)) {
            cJSON *sub = json_merge_diff(f, t);
            if (sub)
                cJSON_AddItemToObject(patch, t->string, sub);
        } else if (!json_equal(f, t)) {
            cJSON_AddItemToObject(patch, t->string, cJSON_Duplicate(t, 1));
        }
    }
    if (patch->child == NULL) {
        cJSON_Delete(patch);
        return NULL;
    }
    return patch;
}

/* ---- canonical bytes ---- */

static int canon(const cJSON *v, buf_t *b);

static int cmp_child_key(const void *a, const void *b)
{
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    return strcmp(x->string, y->string);
}

static int canon(const cJSON *v, buf_t *b)
{
    if (cJSON_IsObject(v)) {
        size_t n = 0, i = 0;
        for (const cJSON *c = v->child; c; c = c->next)
            n++;
        const cJSON **kids = xcalloc(n ? n : 1, sizeof(*kids));
        for (const cJSON *c = v->child; c; c = c->next)
            kids[i++] = c;
        qsort(kids, n, sizeof(*kids), cmp_child_key);
        int rc = buf_putc(b, '{');
        for (i = 0; rc == 0 && i < n; i++) {
            if (i)
                rc = buf_putc(b, ',');
            if (rc == 0)
                rc = json_quote_buf(b, kids[i]->string);
            if (rc == 0)
                rc = buf_putc(b, ':');
            if (rc == 0)
                rc = canon(kids[i], b);
        }
        free(kids);
        return rc ? rc : buf_putc(b, '}');
    }
    if (cJSON_IsArray(v)) {
        int rc = buf_putc(b, '[');
        for (const cJSON *c = v->child; rc == 0 && c; c = c->next) {
            if (c != v->child)
                rc = buf_putc(b, ',');
            if (rc == 0)
                rc = canon(c, b);
        }
        return rc ? rc : buf_putc(b, ']');
    }
    if (cJSON_IsString(v))
        return json_quote_buf(b, v->valuestring);
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (!isfinite(d))
            return buf_puts(b, "null");
        if (d == floor(d) && fabs(d) < 9007199254740992.0)
            return buf_printf(b, "%.0f", d);
        return buf_printf(b, "%.17g", d);
    }
    if (cJSON_IsTrue(v))
        return buf_puts(b, "true");
    if (cJSON_IsFalse(v))
        return buf_puts(b, "false");
    return buf_puts(b, "null");
}

char *json_canonical(const cJSON *v)
{
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    (void)canon(v, &b);
    return buf_detach(&b, NULL);
}
