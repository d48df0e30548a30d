/* Unit tests for core/intern: one copy per distinct string, references
 * counted, and the table intact through growth and removals in any order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/intern.h"
#include "core/mem.h"

static void test_same_pointer_and_refs(void **state)
{
    const char *a = istr_get("app.kubernetes.io/name");
    const char *b = istr_getn("app.kubernetes.io/name=slurmd", 22);
    assert_ptr_equal(a, b);
    assert_string_equal(a, "app.kubernetes.io/name");
    assert_ptr_equal(istr_ref(a), a);
    assert_int_equal(istr_count(), 1);
    assert_true(istr_bytes() >= mem_footprint(8 + 23));
    const char *e = istr_get("");
    assert_string_equal(e, "");
    assert_ptr_not_equal(e, a);
    assert_null(istr_get(NULL));
    istr_put(a);
    istr_put(b);
    assert_int_equal(istr_count(), 2);
    assert_string_equal(a, "app.kubernetes.io/name"); /* one reference left */
    istr_put(a);
    istr_put(e);
    istr_put(NULL);
    assert_int_equal(istr_count(), 0);
    assert_int_equal(istr_bytes(), 0);
}

/* Thousands of strings (the table grows many times), dropped in a scattered
 * order (removals shift probe runs back): each is found again as the same
 * pointer until its last reference goes, and nothing is left after. */
static void test_many(void **state)
{
    enum { N = 20000 };
    const char **p = calloc(N, sizeof(*p));
    char buf[32];
    for (int i = 0; i < N; i++) {
        snprintf(buf, sizeof(buf), "slurm-gpu-%d", i);
        p[i] = istr_get(buf);
    }
    assert_int_equal(istr_count(), N);
    for (int k = 0; k < N; k++) {
        int i = (int)(((long long)k * 7919) % N); /* every index once: 7919 is prime to N */
        snprintf(buf, sizeof(buf), "slurm-gpu-%d", i);
        const char *again = istr_get(buf);
        assert_ptr_equal(again, p[i]);
        istr_put(again);
        istr_put(p[i]);
        p[i] = NULL;
        if (k % 997 == 0) { /* the survivors are all still there */
            for (int j = 0; j < N; j += 101) {
                if (p[j] == NULL)
                    continue;
                snprintf(buf, sizeof(buf), "slurm-gpu-%d", j);
                const char *q = istr_get(buf);
                assert_ptr_equal(q, p[j]);
                istr_put(q);
            }
        }
    }
    assert_int_equal(istr_count(), 0);
    assert_int_equal(istr_bytes(), 0);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_pointer_and_refs),
        cmocka_unit_test(test_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
