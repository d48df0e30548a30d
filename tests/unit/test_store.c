/* Unit tests for core/store: projections, indexes, change handlers and the
 * relist diff (only real changes fire handlers). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/intern.h"
#include "core/json.h"
#include "core/store.h"
#include "watchers/kinds.h"

struct events {
    int adds, updates, deletes;
    char last[128];
};

static void on_change(store *s, const sobj *o, const sobj *n, void *data)
{
    struct events *e = data;
    if (o && n)
        e->updates++;
    else if (n)
        e->adds++;
    else
        e->deletes++;
    snprintf(e->last, sizeof(e->last), "%s", n ? n->key : o->key);
}

static cJSON *pod(const char *ns, const char *name, const char *rv, const char *inst, const char *owner)
{
    char buf[1024];
    snprintf(
        buf, sizeof(buf),
        "{\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\",\"uid\":\"uid-%s\",\"resourceVersion\":\"%s\","
        "\"creationTimestamp\":\"2026-01-02T03:04:05Z\",\"labels\":{\"app.kubernetes.io/instance\":\"%s\","
        "\"app.kubernetes.io/name\":\"slurmd\"},\"annotations\":{\"keep\":\"1\",\"drop\":\"2\"},"
        "\"ownerReferences\":[{\"kind\":\"NodeSet\",\"name\":\"%s\",\"uid\":\"own-%s\",\"controller\":true}]}"
        "}",
        ns, name, name, rv, inst, owner, owner);
    cJSON *o = json_parse(buf, strlen(buf), NULL);
    assert_non_null(o);
    return o;
}

static const char *const keep_ann[] = {"keep", NULL};
static const store_kind pods_kind = {.name = "pods", .namespaced = 1, .annotations = keep_ann};

static void upsert(store *s, cJSON *o, int want)
{
    assert_int_equal(store_upsert(s, o), want);
    cJSON_Delete(o);
}

static void test_basic_and_indexes(void **state)
{
    struct events ev = {0};
    store *s = store_new(&pods_kind);
    int by_inst = store_add_label_index(s, "app.kubernetes.io/instance");
    int by_owner = store_add_owner_index(s);
    store_on_change(s, on_change, &ev);

    upsert(s, pod("ns", "a-0", "1", "a", "a"), 1);
    upsert(s, pod("ns", "a-1", "2", "a", "a"), 1);
    upsert(s, pod("ns", "b-0", "3", "b", "b"), 1);
    upsert(s, pod("ns", "a-0", "1", "a", "a"), 0); /* same RV: no event */
    assert_int_equal(ev.adds, 3);
    assert_int_equal(ev.updates, 0);

    const sobj *o = store_get(s, "ns", "a-1");
    assert_non_null(o);
    assert_string_equal(o->name, "a-1");
    assert_string_equal(o->key, "ns/a-1");
    assert_string_equal(sobj_label(o, "app.kubernetes.io/name"), "slurmd");
    assert_string_equal(sobj_annotation(o, "keep"), "1");
    assert_null(sobj_annotation(o, "drop"));
    assert_string_equal(o->owner_kind, "NodeSet");
    assert_string_equal(o->owner_uid, "own-a");
    assert_int_equal(o->created, 1767323045);
    assert_ptr_equal(store_get_uid(s, "uid-a-1"), o);

    assert_int_equal(store_index_count(s, by_inst, "a"), 2);
    assert_int_equal(store_index_count(s, by_owner, "own-b"), 1);
    store_cursor c;
    int n = 0;
    for (const sobj *p = store_index_first(s, by_inst, "a", &c); p; p = store_index_next(&c))
        n++;
    assert_int_equal(n, 2);
    /* A value only one object has is found as well (no bucket of its own). */
    const sobj *only = store_index_first(s, by_owner, "own-b", &c);
    assert_non_null(only);
    assert_string_equal(only->key, "ns/b-0");
    assert_null(store_index_next(&c));

    /* A label change moves the object between buckets. */
    upsert(s, pod("ns", "a-1", "4", "b", "a"), 1);
    assert_int_equal(ev.updates, 1);
    assert_int_equal(store_index_count(s, by_inst, "a"), 1);
    assert_int_equal(store_index_count(s, by_inst, "b"), 2);

    assert_int_equal(store_delete(s, "ns", "b-0"), 1);
    assert_int_equal(store_delete(s, "ns", "b-0"), 0);
    assert_int_equal(ev.deletes, 1);
    assert_int_equal(store_index_count(s, by_inst, "b"), 1);
    n = 0;
    for (const sobj *p = store_index_first(s, by_inst, "b", &c); p; p = store_index_next(&c)) {
        assert_string_equal(p->key, "ns/a-1");
        n++;
    }
    assert_int_equal(n, 1);
    /* a single object's value taken by a second one, and back */
    upsert(s, pod("ns", "c-0", "5", "c", "c"), 1);
    upsert(s, pod("ns", "c-1", "6", "c", "c"), 1);
    assert_int_equal(store_index_count(s, by_owner, "own-c"), 2);
    n = 0;
    for (const sobj *p = store_index_first(s, by_owner, "own-c", &c); p; p = store_index_next(&c))
        n++;
    assert_int_equal(n, 2);
    assert_int_equal(store_delete(s, "ns", "c-0"), 1);
    assert_string_equal(store_index_first(s, by_owner, "own-c", &c)->key, "ns/c-1");
    assert_null(store_index_next(&c));
    assert_int_equal(store_delete(s, "ns", "c-1"), 1);
    assert_int_equal(store_index_count(s, by_owner, "own-c"), 0);
    assert_null(store_index_first(s, by_owner, "own-c", &c));
    store_free(s);
    assert_int_equal(istr_count(), 0); /* every interned string released */
}

/* store_bytes counts what an object holds, kept JSON included, and gives
 * all of it back when the object goes; the strings are intern's. */
static void test_bytes(void **state)
{
    static const store_kind full = {.name = "full", .namespaced = 1, .keep_json = STORE_JSON_FULL};
    store *s = store_new(&pods_kind), *f = store_new(&full);
    int by_owner = store_add_owner_index(s);
    size_t empty = store_bytes(s), empty_f = store_bytes(f);
    assert_true(by_owner >= 0);
    upsert(s, pod("ns", "a-0", "1", "a", "a"), 1);
    upsert(f, pod("ns", "a-0", "1", "a", "a"), 1);
    size_t one = store_bytes(s), one_f = store_bytes(f);
    /* the sobj with its index link, label and annotation pairs and key */
    assert_true(one - empty >= sizeof(sobj) + sizeof(struct sobj_link) + 3 * 2 * sizeof(char *));
    /* the same object keeping its JSON: every item and string of it more */
    cJSON *j = pod("ns", "a-0", "1", "a", "a");
    size_t jb = json_heap_bytes(j);
    assert_true(jb > 20 * sizeof(cJSON));
    assert_true(one_f - empty_f >= jb + sizeof(sobj));
    assert_true(istr_bytes() > 0);
    assert_int_equal(store_delete(s, "ns", "a-0"), 1);
    assert_int_equal(store_delete(f, "ns", "a-0"), 1);
    /* the objects are gone (the maps may keep their slots) */
    assert_true(store_bytes(s) < one);
    assert_true(store_bytes(f) + jb < one_f);
    cJSON_Delete(j);
    store_free(s);
    store_free(f);
    assert_int_equal(istr_bytes(), 0);
}

/* Thousands of objects: the key set grows many times, removals in a
 * scattered order shift its runs back, and every object left is found by
 * key and walked exactly once. */
static void test_many(void **state)
{
    enum { N = 5000 };
    store *s = store_new(&pods_kind);
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "p-%d", i);
        upsert(s, pod("ns", name, "1", "a", "a"), 1);
    }
    assert_int_equal(store_count(s), N);
    int gone = 0;
    for (int k = 0; k < N; k++) {
        int i = (int)(((long long)k * 2477) % N); /* every index once: 2477 is prime to N */
        if (i % 3 == 0) {
            snprintf(name, sizeof(name), "p-%d", i);
            assert_int_equal(store_delete(s, "ns", name), 1);
            gone++;
        }
    }
    assert_int_equal(store_count(s), N - gone);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "p-%d", i);
        const sobj *o = store_get(s, "ns", name);
        if (i % 3 == 0) {
            assert_null(o);
        } else {
            assert_non_null(o);
            assert_string_equal(o->name, name);
        }
    }
    size_t it = 0, walked = 0;
    while (store_next(s, &it))
        walked++;
    assert_int_equal(walked, N - gone);
    store_free(s);
    assert_int_equal(istr_count(), 0);
}

static void test_relist_diff(void **state)
{
    struct events ev = {0};
    store *s = store_new(&pods_kind);
    store_on_change(s, on_change, &ev);
    for (int i = 0; i < 100; i++) {
        char name[16], rv[16];
        snprintf(name, sizeof(name), "p-%d", i);
        snprintf(rv, sizeof(rv), "%d", i + 1);
        upsert(s, pod("ns", name, rv, "a", "a"), 1);
    }
    memset(&ev, 0, sizeof(ev));
    /* Relist: 98 unchanged, p-5 changed, p-7 and p-9 gone, p-100 new. */
    store_relist_begin(s, NULL);
    for (int i = 0; i < 100; i++) {
        char name[16], rv[16];
        if (i == 7 || i == 9)
            continue;
        snprintf(name, sizeof(name), "p-%d", i);
        snprintf(rv, sizeof(rv), "%d", i == 5 ? 500 : i + 1);
        upsert(s, pod("ns", name, rv, "a", "a"), i == 5 ? 1 : 0);
    }
    upsert(s, pod("ns", "p-100", "501", "a", "a"), 1);
    store_relist_end(s, NULL);
    assert_int_equal(ev.adds, 1);
    assert_int_equal(ev.updates, 1);
    assert_int_equal(ev.deletes, 2);
    assert_int_equal(store_count(s), 99);
    store_free(s);
}

static void test_relist_per_namespace(void **state)
{
    struct events ev = {0};
    store *s = store_new(&pods_kind);
    store_on_change(s, on_change, &ev);
    upsert(s, pod("a", "p1", "1", "x", "x"), 1);
    upsert(s, pod("a", "p2", "2", "x", "x"), 1);
    upsert(s, pod("b", "p1", "3", "x", "x"), 1);
    /* Two namespaces relist at the same time; each removes only its own. */
    store_relist_begin(s, "a");
    store_relist_begin(s, "b");
    upsert(s, pod("a", "p1", "1", "x", "x"), 0);
    upsert(s, pod("b", "p9", "4", "x", "x"), 1);
    store_relist_end(s, "a");
    assert_null(store_get(s, "a", "p2"));
    assert_non_null(store_get(s, "b", "p1"));
    store_relist_end(s, "b");
    assert_null(store_get(s, "b", "p1"));
    assert_non_null(store_get(s, "b", "p9"));
    assert_non_null(store_get(s, "a", "p1"));
    assert_int_equal(ev.deletes, 2);
    store_free(s);
}

/* ControllerRevisions are watched without a selector (Slinky's carry none of
 * our labels): a NodeSet's keeps its data (the template the NodeSet compares),
 * any other owner's only its name and owners, still found by owner uid. */
static void test_revision_kind(void **state)
{
    store *s = store_new(&KIND_REVISIONS);
    int ix = store_add_owner_index(s);
    cJSON *mine =
        cJSON_Parse("{\"metadata\":{\"name\":\"cpu-7b9d\",\"namespace\":\"ns\",\"uid\":\"r1\","
                    "\"resourceVersion\":\"1\",\"labels\":{\"controller.kubernetes.io/hash\":\"7b9d\"},"
                    "\"ownerReferences\":[{\"kind\":\"NodeSet\",\"name\":\"cpu\",\"uid\":\"n1\","
                    "\"controller\":true}]},\"revision\":1,\"data\":{\"spec\":{\"template\":{}}}}");
    cJSON *other =
        cJSON_Parse("{\"metadata\":{\"name\":\"web-5f6\",\"namespace\":\"ns\",\"uid\":\"r2\","
                    "\"resourceVersion\":\"2\",\"ownerReferences\":[{\"kind\":\"StatefulSet\","
                    "\"name\":\"web\",\"uid\":\"s1\",\"controller\":true}]},\"revision\":3,"
                    "\"data\":{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"big\"}]}}}}}");
    assert_true(store_upsert(s, mine) >= 0);
    assert_true(store_upsert(s, other) >= 0);
    const sobj *a = store_get(s, "ns", "cpu-7b9d");
    const sobj *b = store_get(s, "ns", "web-5f6");
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(json_get(a->json, "data.spec.template"));
    assert_int_equal(json_get_int(a->json, "revision", 0), 1);
    assert_string_equal(sobj_label(a, "controller.kubernetes.io/hash"), "7b9d");
    assert_null(json_get(b->json, "data"));
    assert_string_equal(b->uid, "r2");
    assert_int_equal(store_index_count(s, ix, "s1"), 1);
    assert_int_equal(store_index_count(s, ix, "n1"), 1);
    cJSON_Delete(mine);
    cJSON_Delete(other);
    store_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_and_indexes),
        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_many),
        cmocka_unit_test(test_relist_diff),
        cmocka_unit_test(test_relist_per_namespace),
        cmocka_unit_test(test_revision_kind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
