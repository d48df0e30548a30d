/* nodeset_names: whether two StatefulSet-mode name schemes share a Slurm
 * node name, checked against enumerating both, and the cases of issue 39
 * (the same prefix twice, "gpu-1" ordinal 0 against "gpu-" ordinal 10,
 * paddings). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reconcilers/nodeset_names.h"

static int brute(const nsn_scheme *a, const nsn_scheme *b, char *ex, size_t exlen)
{
    char n[128];
    for (long long i = 0; i < a->count; i++) {
        snprintf(n, sizeof(n), "%s%0*lld", a->prefix ? a->prefix : "", a->pad, i);
        if (nsn_in_scheme(n, b)) {
            snprintf(ex, exlen, "%s", n);
            return 1;
        }
    }
    return 0;
}

static void expect(const char *pa, int pada, long long ca, const char *pb, int padb, long long cb,
                   const char *want)
{
    nsn_scheme a = {pa, pada, ca}, b = {pb, padb, cb};
    char ex[128] = "", ex2[128] = "";
    int got = nsn_overlap(&a, &b, ex, sizeof(ex));
    if (want == NULL) {
        if (got)
            fail_msg("%s/%d/%lld vs %s/%d/%lld: overlap %s, want none", pa, pada, ca, pb, padb, cb, ex);
        assert_int_equal(nsn_overlap(&b, &a, ex2, sizeof(ex2)), 0);
        return;
    }
    if (!got)
        fail_msg("%s/%d/%lld vs %s/%d/%lld: no overlap, want %s", pa, pada, ca, pb, padb, cb, want);
    assert_string_equal(ex, want);
    assert_int_equal(nsn_overlap(&b, &a, ex2, sizeof(ex2)), 1);
    assert_string_equal(ex2, want);
}

static void test_cases(void **state)
{
    (void)state;
    expect("gpu-", 0, 4, "gpu-", 0, 4, "gpu-0");      /* the same prefix in two NodeSets */
    expect("gpu-", 0, 11, "gpu-1", 0, 1, "gpu-10");   /* gpu-1 + 0 is gpu- + 10 */
    expect("gpu-", 0, 10, "gpu-1", 0, 1, NULL);       /* ... only once gpu- has an ordinal 10 */
    expect("gpu-", 0, 16, "gpu-1", 0, 6, "gpu-10");
    expect("gpu-", 0, 100, "gpu-1", 0, 100, "gpu-10");
    expect("gpu-", 0, 1000, "gpu-0", 0, 5, NULL);     /* gpu- never renders a leading zero */
    expect("gpu-", 2, 5, "gpu-0", 0, 5, "gpu-00");    /* ... but padded it does */
    expect("gpu-", 2, 5, "gpu-", 0, 5, NULL);         /* "00" vs "0" */
    expect("gpu-", 2, 11, "gpu-", 0, 11, "gpu-10");
    expect("gpu-", 0, 4, "cpu-", 0, 4, NULL);
    expect("gpu-", 0, 4, "gpu-a", 0, 4, NULL);        /* a letter after the prefix: never an ordinal */
    expect("gpu-", 0, 0, "gpu-", 0, 4, NULL);         /* no replicas, no names */
    expect("gpu-", 0, 65536, "gpu-6553", 0, 6, "gpu-65530");
    expect("gpu-", 0, 65531, "gpu-6553", 0, 7, "gpu-65530");
    expect("gpu-", 0, 65530, "gpu-6553", 0, 7, NULL);
    expect("n", 64, 3, "n", 64, 3, "n0000000000000000000000000000000000000000000000000000000000000000");
    expect("gpu-1234567890123456789012345", 0, 4, "gpu-", 0, 65536, NULL); /* the tail's value saturates */
}

/* Random schemes with small counts and prefixes sharing a root, compared
 * with enumerating one and testing each name against the other. */
static void test_against_enumeration(void **state)
{
    (void)state;
    static const char *const prefixes[] = {"g", "g0", "g1", "g10", "g01", "g12", "g-", "g00", "g9", "g99"};
    srand(39);
    for (int round = 0; round < 20000; round++) {
        nsn_scheme a = {prefixes[rand() % 10], rand() % 4, rand() % 130};
        nsn_scheme b = {prefixes[rand() % 10], rand() % 4, rand() % 130};
        char ex[128] = "", want[128] = "";
        int got = nsn_overlap(&a, &b, ex, sizeof(ex));
        int w = brute(&a, &b, want, sizeof(want)) || brute(&b, &a, want, sizeof(want));
        if (got != w)
            fail_msg("%s/%d/%lld vs %s/%d/%lld: overlap %d (%s), enumeration %d (%s)", a.prefix, a.pad,
                     a.count, b.prefix, b.pad, b.count, got, ex, w, want);
        if (got && !(nsn_in_scheme(ex, &a) && nsn_in_scheme(ex, &b)))
            fail_msg("example %s is not in both schemes", ex);
    }
}

static void test_in_scheme(void **state)
{
    (void)state;
    nsn_scheme s = {"gpu-", 2, 12};
    assert_true(nsn_in_scheme("gpu-00", &s));
    assert_true(nsn_in_scheme("gpu-11", &s));
    assert_false(nsn_in_scheme("gpu-0", &s));
    assert_false(nsn_in_scheme("gpu-12", &s));
    assert_false(nsn_in_scheme("gpu-", &s));
    assert_false(nsn_in_scheme("cpu-01", &s));
    assert_false(nsn_in_scheme("gpu-0x", &s));
    nsn_scheme u = {"gpu-", 0, 100};
    assert_true(nsn_in_scheme("gpu-0", &u));
    assert_false(nsn_in_scheme("gpu-00", &u));
    assert_false(nsn_in_scheme("gpu-099999999999999999999999", &u));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_against_enumeration),
        cmocka_unit_test(test_in_scheme),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
