/* Unit tests for the small core modules: err, buf, list, map, json, quantity. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>
#include <errno.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/err.h"
#include "core/json.h"
#include "core/list.h"
#include "core/map.h"
#include "core/mem.h"
#include "core/quantity.h"
#include "core/thread.h"

static void test_err_table(void **state)
{
    assert_string_equal(err_str(OP_ETIMEOUT), "timed out");
    assert_string_equal(err_name(OP_ETOOBIG), "ETOOBIG");
    assert_string_equal(err_name(UV_ECONNREFUSED), "ECONNREFUSED");
    assert_string_equal(err_str(0), "success");
    assert_true((int)OP_ENOMEM < (int)UV_EAI_ADDRFAMILY && (int)OP_EUNKNOWN < -4096);
}

static void test_buf_limit(void **state)
{
    buf_t b;
    buf_init(&b, 8);
    assert_int_equal(buf_puts(&b, "abcd"), 0);
    assert_int_equal(buf_puts(&b, "efgh"), 0);
    assert_int_equal(buf_putc(&b, 'x'), OP_ETOOBIG);
    assert_string_equal(buf_cstr(&b), "abcdefgh");
    buf_consume(&b, 3);
    assert_string_equal(buf_cstr(&b), "defgh");
    assert_int_equal(buf_printf(&b, "%d", 123), 0);
    assert_string_equal(buf_cstr(&b), "defgh123");
    assert_int_equal(buf_printf(&b, "%d", 4), OP_ETOOBIG);
    buf_free(&b);
    assert_string_equal(buf_cstr(&b), "");
}

struct item {
    list_node link;
    int v;
};

static void test_list(void **state)
{
    list_node head, *pos, *tmp;
    struct item it[4];
    list_init(&head);
    for (int i = 0; i < 4; i++) {
        it[i].v = i;
        list_init(&it[i].link);
        assert_false(list_is_linked(&it[i].link));
        list_insert_tail(&head, &it[i].link);
        assert_true(list_is_linked(&it[i].link));
    }
    int sum = 0;
    list_foreach_safe(pos, tmp, &head)
    {
        struct item *x = list_entry(pos, struct item, link);
        if (x->v % 2)
            list_remove(pos);
        sum += x->v;
    }
    assert_int_equal(sum, 6);
    assert_int_equal(list_entry(list_first(&head), struct item, link)->v, 0);
    assert_false(list_is_linked(&it[1].link));
}

static void test_map(void **state)
{
    map_t m;
    char keys[2000][16];
    map_init(&m);
    for (int i = 0; i < 2000; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%d", i);
        assert_null(map_put(&m, keys[i], (void *)(intptr_t)(i + 1)));
    }
    assert_int_equal(m.count, 2000);
    for (int i = 0; i < 2000; i += 2)
        assert_int_equal((intptr_t)map_del(&m, keys[i]), i + 1);
    for (int i = 0; i < 2000; i++)
        assert_int_equal((intptr_t)map_get(&m, keys[i]), i % 2 ? i + 1 : 0);
    assert_int_equal((intptr_t)map_getn(&m, "k19xyz", 3), 20);
    size_t it = 0, n = 0;
    const char *k;
    void *v;
    while (map_next(&m, &it, &k, &v))
        n++;
    assert_int_equal(n, 1000);
    map_free(&m);
}

/* A map that owns its entries: map_free and map_drop run the type's
 * destructors (value, then a separately allocated key), map_del does not. */
struct owned {
    char *key;
    int *freed;
};

static int keys_freed;

static void owned_free(void *v)
{
    struct owned *o = v;
    (*o->freed)++;
    free(o);
}

static void key_free(char *k)
{
    keys_freed++;
    free(k);
}

static const map_type owned_type = {.val_free = owned_free, .key_free = key_free};

static void test_map_type(void **state)
{
    (void)state;
    int freed = 0;
    map_t m;
    map_init_type(&m, &owned_type);
    for (int i = 0; i < 100; i++) {
        struct owned *o = malloc(sizeof(*o));
        o->key = malloc(16);
        snprintf(o->key, 16, "k%d", i);
        o->freed = &freed;
        map_put(&m, o->key, o);
    }
    assert_int_equal(map_drop(&m, "k7"), 1);
    assert_int_equal(freed, 1);
    assert_int_equal(keys_freed, 1);
    assert_int_equal(map_drop(&m, "k7"), 0);
    assert_int_equal(freed, 1);
    struct owned *o = map_del(&m, "k8"); /* handed back: nothing freed */
    assert_non_null(o);
    assert_int_equal(freed, 1);
    assert_int_equal(m.count, 98);
    map_free(&m);
    assert_int_equal(freed, 99);
    assert_int_equal(keys_freed, 99);
    assert_int_equal(m.count, 0);
    assert_ptr_equal(m.type, &owned_type); /* kept: the map can be used again */
    map_put(&m, o->key, o);
    map_free(&m);
    assert_int_equal(freed, 100);
    assert_int_equal(keys_freed, 100);
    /* A static map, and the shared one-block type. */
    static map_t s = MAP_TYPED(&map_type_free_val);
    char *a = malloc(4);
    snprintf(a, 4, "abc");
    map_put(&s, a, a);
    map_free(&s); /* ASan reports a leak if a was not freed */
    assert_int_equal(s.count, 0);
}

/* json_subset: what objsync's "already in sync" and the NodeSet status
 * comparison rest on. */
static void test_json_subset(void **state)
{
    (void)state;
    cJSON *have = cJSON_Parse("{\"a\":1,\"b\":{\"c\":\"x\",\"d\":[1,{\"e\":2,\"f\":3}]},\"g\":null}");
    static const struct {
        const char *want;
        int subset;
    } cases[] = {
        {"{}", 1},
        {"{\"a\":1}", 1},
        {"{\"a\":1.0}", 1},                             /* numbers by value */
        {"{\"a\":2}", 0},
        {"{\"b\":{\"c\":\"x\"}}", 1},                   /* objects: recursively */
        {"{\"b\":{\"d\":[1,{\"e\":2}]}}", 1},           /* arrays: element-wise subset */
        {"{\"b\":{\"d\":[1]}}", 0},                     /* ... of the same length */
        {"{\"b\":{\"d\":[{\"e\":2},1]}}", 0},           /* ... in order */
        {"{\"z\":null}", 1},                            /* a missing field matches null */
        {"{\"z\":0}", 0},
        {"{\"g\":null}", 1},
        {"{\"a\":\"1\"}", 0},                           /* no type coercion */
        {"{\"b\":[]}", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cJSON *want = cJSON_Parse(cases[i].want);
        assert_non_null(want);
        if (json_subset(want, have) != cases[i].subset)
            fail_msg("json_subset(%s) should be %d", cases[i].want, cases[i].subset);
        cJSON_Delete(want);
    }
    assert_true(json_subset(NULL, have));
    assert_false(json_subset(have, NULL));
    cJSON_Delete(have);
}

/* json_canonical: the bytes the NodeSet revision hash is taken over. */
static void test_json_canonical(void **state)
{
    (void)state;
    cJSON *a = cJSON_Parse(
        "{\"b\":[1,2.5,-3,1e20,0.1,{\"y\":1,\"x\":\"q\\\"\"}],\"a\":null,\"c\":true,\"B\":false}");
    cJSON *b = cJSON_Parse(
        "{\"c\":true,\"B\":false,\"a\":null,\"b\":[1,2.5,-3,1e20,0.1,{\"x\":\"q\\\"\",\"y\":1}]}");
    char *ca = json_canonical(a), *cb = json_canonical(b);
    /* Keys by byte value ('B' < 'a'), integers without exponent, the rest round-trip. */
    assert_string_equal(
        ca, "{\"B\":false,\"a\":null,\"b\":[1,2.5,-3,1e+20,0.10000000000000001,{\"x\":\"q\\\"\",\"y\":1}],"
            "\"c\":true}");
    assert_string_equal(ca, cb);
    free(ca);
    free(cb);
    cJSON_Delete(a);
    cJSON_Delete(b);
}

/* quantity_parse: resource.Quantity's Value(), rounded up. */
static void test_quantity(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        long long want;
    } ok[] = {{"4", 4},
              {"500m", 1},
              {"1.5", 2},
              {"8Gi", 8589934592LL},
              {"1G", 1000000000LL},
              {"2e3", 2000},
              {"1.5Gi", 1610612736LL},
              {"0", 0},
              {"-2", -2},
              {"2E", 2000000000000000000LL},
              {"100n", 1},
              {"9Ei", 9223372036854775807LL},
              {"100Mi", 104857600},
              {"1Ki", 1024},
              {"0.1m", 1},
              {"3k", 3000}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        long long v = -12345;
        assert_int_equal(quantity_parse(ok[i].in, &v), 0);
        if (v != ok[i].want)
            fail_msg("%s: got %lld, want %lld", ok[i].in, v, ok[i].want);
    }
    static const char *const bad[] = {"", "x", "1Zi", "1.2.3", "Gi", "1e", "m", "1 Gi", "1gi"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        long long v = 7;
        if (quantity_parse(bad[i], &v) != OP_EINVAL)
            fail_msg("accepted \"%s\"", bad[i]);
        assert_int_equal(v, 7);
    }
    long long v;
    assert_int_equal(quantity_parse(NULL, &v), OP_EINVAL);
}

static void test_json_paths_and_patch(void **state)
{
    const char *doc = "{\"metadata\":{\"name\":\"a\",\"labels\":{\"x\":\"1\"}},\"spec\":{\"replicas\":3,"
                      "\"on\":true}}  \n";
    cJSON *o = json_parse(doc, strlen(doc), NULL);
    assert_non_null(o);
    assert_string_equal(json_get_str(o, "metadata.name"), "a");
    assert_int_equal(json_get_int(o, "spec.replicas", -1), 3);
    assert_int_equal(json_get_int(o, "spec.missing", -1), -1);
    assert_true(json_get_bool(o, "spec.on", 0));
    assert_null(json_parse("{} x", 4, NULL));

    cJSON *to = cJSON_Duplicate(o, 1);
    json_set_int(json_obj_ensure(to, "spec"), "replicas", 5);
    json_del(json_obj_path_ensure(to, "metadata.labels"), "x");
    json_set_str(json_obj_path_ensure(to, "metadata.annotations"), "a.b/c", "v");
    cJSON *patch = json_merge_diff(o, to);
    char *ps = json_dump(patch);
    assert_string_equal(ps, "{\"metadata\":{\"labels\":{\"x\":null},\"annotations\":{\"a.b/c\":\"v\"}},"
                            "\"spec\":{\"replicas\":5}}");
    o = json_merge_patch(o, patch);
    assert_true(json_equal(o, to));
    assert_null(json_merge_diff(o, to));

    buf_t b;
    buf_init(&b, 64);
    assert_int_equal(json_quote_buf(&b, "a\"b\n\x01"), 0);
    assert_string_equal(buf_cstr(&b), "\"a\\\"b\\n\\u0001\"");
    buf_free(&b);
    free(ps);
    cJSON_Delete(patch);
    cJSON_Delete(o);
    cJSON_Delete(to);
}

static void test_json_arena(void **state)
{
    json_arena *a = json_arena_new();
    const char *doc = "{\"metadata\":{\"name\":\"p\",\"labels\":{\"a\":\"b\"}},\"items\":[1,2,3]}";
    for (int round = 0; round < 3; round++) {
        cJSON *o = json_arena_parse(a, doc, strlen(doc), NULL);
        assert_non_null(o);
        assert_string_equal(json_get_str(o, "metadata.labels.a"), "b");
        /* What is kept is duplicated out of the arena with the normal allocator. */
        cJSON *keep = cJSON_Duplicate(json_get(o, "metadata"), 1);
        assert_null(json_arena_parse(a, "{bad", 4, NULL)); /* a failed parse frees nothing by hand */
        json_arena_reset(a);
        assert_string_equal(json_get_str(keep, "name"), "p");
        cJSON_Delete(keep);
    }
    assert_true(json_arena_bytes(a) > 0 && json_arena_bytes(a) <= 256 * 1024);
    /* A big document gets bigger chunks, released by the reset. */
    buf_t b;
    buf_init(&b, 8u << 20);
    assert_int_equal(buf_putc(&b, '['), 0);
    for (int i = 0; i < 50000; i++)
        assert_int_equal(buf_printf(&b, "%s{\"k\":%d}", i ? "," : "", i), 0);
    assert_int_equal(buf_putc(&b, ']'), 0);
    cJSON *big = json_arena_parse(a, b.data, b.len, NULL);
    assert_int_equal(json_len(big), 50000);
    assert_true(json_arena_bytes(a) > 256 * 1024);
    json_arena_reset(a);
    assert_true(json_arena_bytes(a) <= 256 * 1024);
    buf_free(&b);
    json_arena_free(a);
}

/* thread_background: a threadpool thread drops to THREAD_BACKGROUND_NICE
 * for good; the main thread (where a failed uv_queue_work runs the work
 * inline) keeps its priority. */
typedef struct prio_job {
    uv_work_t w;
    int before, after, flagged;
} prio_job;

static int own_nice(void)
{
    errno = 0;
    return getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
}

static void prio_work(uv_work_t *w)
{
    prio_job *j = container_of(w, prio_job, w);
    j->before = own_nice();
    thread_background();
    thread_background(); /* once is enough; again changes nothing */
    j->after = own_nice();
    j->flagged = thread_is_background();
}

static void prio_done(uv_work_t *w, int status)
{
    (void)w;
    assert_int_equal(status, 0);
}

static void test_thread_background(void **state)
{
    (void)state;
    int main_nice = own_nice();
    thread_background();
    assert_int_equal(own_nice(), main_nice);
    assert_false(thread_is_background());
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    prio_job j = {0};
    assert_int_equal(uv_queue_work(&loop, &j.w, prio_work, prio_done), 0);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
    assert_int_equal(j.before, main_nice); /* threads inherit the creator's nice */
    assert_int_equal(j.after, main_nice > THREAD_BACKGROUND_NICE ? main_nice : THREAD_BACKGROUND_NICE);
    assert_true(j.flagged);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_err_table), cmocka_unit_test(test_buf_limit),
        cmocka_unit_test(test_list),      cmocka_unit_test(test_map),
        cmocka_unit_test(test_map_type),
        cmocka_unit_test(test_json_paths_and_patch),
        cmocka_unit_test(test_json_subset),
        cmocka_unit_test(test_json_canonical),
        cmocka_unit_test(test_quantity),
        cmocka_unit_test(test_json_arena),
        cmocka_unit_test(test_thread_background),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
