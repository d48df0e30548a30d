/* Unit tests for core/pset: elements found by the key they hold, through
 * growth and removals in a scattered order (backward shift), walked once
 * each, and the table's bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/pset.h"

struct elem {
    int n;
    char key[24];
};

static const char *elem_key(const void *e)
{
    return ((const struct elem *)e)->key;
}

static void test_basic(void **state)
{
    pset t;
    pset_init(&t, elem_key);
    assert_null(pset_get(&t, "a"));
    assert_int_equal(pset_bytes(&t), 0);
    struct elem a = {1, "a"}, ab = {2, "ab"};
    pset_add(&t, &a);
    pset_add(&t, &ab);
    assert_ptr_equal(pset_get(&t, "a"), &a);
    assert_ptr_equal(pset_getn(&t, "abc", 2), &ab);
    assert_ptr_equal(pset_getn(&t, "abc", 1), &a);
    assert_null(pset_get(&t, "abc"));
    assert_int_equal(t.count, 2);
    assert_true(pset_bytes(&t) >= 16 * sizeof(void *));
    pset_del(&t, &a);
    assert_null(pset_get(&t, "a"));
    assert_ptr_equal(pset_get(&t, "ab"), &ab);
    pset_free(&t);
    assert_int_equal(t.count, 0);
    assert_null(pset_get(&t, "ab"));
}

static void test_many(void **state)
{
    enum { N = 6000 };
    struct elem *e = calloc(N, sizeof(*e));
    pset t;
    pset_init(&t, elem_key);
    for (int i = 0; i < N; i++) {
        e[i].n = i;
        snprintf(e[i].key, sizeof(e[i].key), "node-%d", i);
        pset_add(&t, &e[i]);
    }
    assert_int_equal(t.count, N);
    int left = N;
    for (int k = 0; k < N; k++) {
        int i = (int)(((long long)k * 4099) % N); /* every index once: 4099 is prime to N */
        if (i % 2) {
            pset_del(&t, &e[i]);
            left--;
        }
    }
    assert_int_equal(t.count, left);
    for (int i = 0; i < N; i++) {
        char key[24];
        snprintf(key, sizeof(key), "node-%d", i);
        assert_ptr_equal(pset_get(&t, key), i % 2 ? NULL : &e[i]);
    }
    size_t it = 0;
    int walked = 0;
    struct elem *p;
    while ((p = pset_next(&t, &it))) {
        assert_int_equal(p->n % 2, 0);
        walked++;
    }
    assert_int_equal(walked, left);
    pset_free(&t);
    free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
