#include "reconcilers/expect.h"

#include <stdlib.h>
#include <string.h>

#include "core/map.h"
#include "core/mem.h"

struct record {
    char *key;
    char *uid;
    int adds;
    map_t dels; /* dependent key -> itself (owned) */
    uint64_t set_at;
};

struct expect_table {
    map_t owners;
};

static void record_free(void *v)
{
    struct record *r = v;
    map_free(&r->dels);
    free(r->key);
    free(r->uid);
    free(r);
}

static const map_type record_type = {.val_free = record_free};

expect_table *exp_new(void)
{
    expect_table *t = xcalloc(1, sizeof(*t));
    map_init_type(&t->owners, &record_type);
    return t;
}

void exp_free(expect_table *t)
{
    if (t == NULL)
        return;
    map_free(&t->owners);
    free(t);
}

void exp_drop(expect_table *t, const char *key)
{
    map_drop(&t->owners, key);
}

static struct record *get(expect_table *t, const char *key, const char *uid, uint64_t now_ms)
{
    struct record *r = map_get(&t->owners, key);
    if (r && strcmp(r->uid, uid) != 0) {
        exp_drop(t, key);
        r = NULL;
    }
    if (r == NULL) {
        r = xcalloc(1, sizeof(*r));
        r->key = xstrdup(key);
        r->uid = xstrdup(uid);
        map_init_type(&r->dels, &map_type_free_val);
        map_put(&t->owners, r->key, r);
    }
    r->set_at = now_ms;
    return r;
}

void exp_expect_creations(expect_table *t, const char *key, const char *uid, int adds, uint64_t now_ms)
{
    get(t, key, uid, now_ms)->adds += adds;
}

void exp_expect_deletion(expect_table *t, const char *key, const char *uid, const char *dep_key,
                         uint64_t now_ms)
{
    struct record *r = get(t, key, uid, now_ms);
    if (map_get(&r->dels, dep_key) == NULL) {
        char *k = xstrdup(dep_key);
        map_put(&r->dels, k, k);
    }
}

void exp_creation_observed(expect_table *t, const char *key)
{
    struct record *r = map_get(&t->owners, key);
    if (r && r->adds > 0)
        r->adds--;
}

void exp_deletion_observed(expect_table *t, const char *key, const char *dep_key)
{
    struct record *r = map_get(&t->owners, key);
    if (r)
        map_drop(&r->dels, dep_key);
}

int exp_deletion_pending(expect_table *t, const char *key, const char *dep_key)
{
    struct record *r = map_get(&t->owners, key);
    return r && map_get(&r->dels, dep_key) != NULL;
}

int exp_satisfied(expect_table *t, const char *key, const char *uid, uint64_t now_ms)
{
    struct record *r = map_get(&t->owners, key);
    if (r == NULL)
        return 1;
    if (strcmp(r->uid, uid) != 0 || now_ms - r->set_at > EXPECT_TTL_MS) {
        exp_drop(t, key);
        return 1;
    }
    if (r->adds <= 0 && r->dels.count == 0) {
        exp_drop(t, key);
        return 1;
    }
    return 0;
}

void exp_pending(expect_table *t, const char *key, int *adds, int *dels)
{
    struct record *r = map_get(&t->owners, key);
    *adds = r ? r->adds : 0;
    *dels = r ? (int)r->dels.count : 0;
}
