/* Unit tests for reconcilers/expect: counting, per-key deletes, expiry and
 * the drop on owner recreation (Slinky issue #74). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "reconcilers/expect.h"

static void test_counts(void **state)
{
    expect_table *t = exp_new();
    int a, d;
    assert_true(exp_satisfied(t, "ns/a", "u1", 0));
    exp_expect_creations(t, "ns/a", "u1", 3, 1000);
    exp_expect_deletion(t, "ns/a", "u1", "ns/a-5", 1000);
    exp_expect_deletion(t, "ns/a", "u1", "ns/a-5", 1000); /* same pod twice counts once */
    exp_pending(t, "ns/a", &a, &d);
    assert_int_equal(a, 3);
    assert_int_equal(d, 1);
    assert_false(exp_satisfied(t, "ns/a", "u1", 2000));
    for (int i = 0; i < 3; i++)
        exp_creation_observed(t, "ns/a");
    exp_creation_observed(t, "ns/a"); /* one more than expected: never below zero */
    exp_pending(t, "ns/a", &a, &d);
    assert_int_equal(a, 0);
    assert_int_equal(d, 1);
    /* Had the count gone to -1, this expectation would leave it at 0: the
     * next pass would not wait for the pod it creates. */
    exp_expect_creations(t, "ns/a", "u1", 1, 2000);
    exp_pending(t, "ns/a", &a, &d);
    assert_int_equal(a, 1);
    exp_creation_observed(t, "ns/a");
    assert_false(exp_satisfied(t, "ns/a", "u1", 2000));
    assert_true(exp_deletion_pending(t, "ns/a", "ns/a-5"));
    assert_false(exp_deletion_pending(t, "ns/a", "ns/a-4"));
    assert_false(exp_deletion_pending(t, "ns/b", "ns/a-5"));
    exp_deletion_observed(t, "ns/a", "ns/a-4"); /* not expected: ignored */
    assert_false(exp_satisfied(t, "ns/a", "u1", 2000));
    exp_deletion_observed(t, "ns/a", "ns/a-5");
    assert_false(exp_deletion_pending(t, "ns/a", "ns/a-5"));
    assert_true(exp_satisfied(t, "ns/a", "u1", 2000));
    exp_free(t);
}

static void test_expiry_and_recreate(void **state)
{
    expect_table *t = exp_new();
    exp_expect_creations(t, "ns/a", "u1", 2, 1000);
    assert_false(exp_satisfied(t, "ns/a", "u1", 1000 + EXPECT_TTL_MS));
    assert_true(exp_satisfied(t, "ns/a", "u1", 1001 + EXPECT_TTL_MS));
    exp_expect_creations(t, "ns/a", "u1", 2, 5000);
    /* The NodeSet was deleted and created again under the same name. */
    assert_true(exp_satisfied(t, "ns/a", "u2", 5000));
    exp_expect_creations(t, "ns/a", "u2", 1, 6000);
    int a, d;
    exp_pending(t, "ns/a", &a, &d);
    assert_int_equal(a, 1);
    exp_drop(t, "ns/a");
    assert_true(exp_satisfied(t, "ns/a", "u2", 6000));
    exp_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_expiry_and_recreate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
