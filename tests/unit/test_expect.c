/* Unit tests for reconcilers/expect: counting, per-key deletes, expiry and
 * the drop on owner recreation (Slinky issue #74), on one owner's
 * expectations as its record keeps them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "reconcilers/expect.h"

static void test_counts(void **state)
{
    (void)state;
    exp_owner e = {0}, other = {0};
    int a, d;
    assert_true(exp_satisfied(&e, "u1", 0));
    exp_expect_creations(&e, "u1", 3, 1000);
    exp_expect_deletion(&e, "u1", "ns/a-5", 1000);
    exp_expect_deletion(&e, "u1", "ns/a-5", 1000); /* same pod twice counts once */
    exp_pending(&e, &a, &d);
    assert_int_equal(a, 3);
    assert_int_equal(d, 1);
    assert_false(exp_satisfied(&e, "u1", 2000));
    for (int i = 0; i < 3; i++)
        exp_creation_observed(&e);
    exp_creation_observed(&e); /* one more than expected: never below zero */
    exp_pending(&e, &a, &d);
    assert_int_equal(a, 0);
    assert_int_equal(d, 1);
    /* Had the count gone to -1, this expectation would leave it at 0: the
     * next pass would not wait for the pod it creates. */
    exp_expect_creations(&e, "u1", 1, 2000);
    exp_pending(&e, &a, &d);
    assert_int_equal(a, 1);
    exp_creation_observed(&e);
    assert_false(exp_satisfied(&e, "u1", 2000));
    assert_true(exp_deletion_pending(&e, "ns/a-5"));
    assert_false(exp_deletion_pending(&e, "ns/a-4"));
    assert_false(exp_deletion_pending(&other, "ns/a-5")); /* another owner's are its own */
    exp_deletion_observed(&e, "ns/a-4");                  /* not expected: ignored */
    exp_deletion_observed(&other, "ns/a-5");              /* nothing expected there: ignored */
    exp_creation_observed(&other);
    assert_false(exp_satisfied(&e, "u1", 2000));
    exp_deletion_observed(&e, "ns/a-5");
    assert_false(exp_deletion_pending(&e, "ns/a-5"));
    assert_true(exp_satisfied(&e, "u1", 2000));
    assert_null(e.uid); /* satisfied: dropped, nothing held */
    exp_drop(&e);
    exp_drop(&other);
}

static void test_expiry_and_recreate(void **state)
{
    (void)state;
    exp_owner e = {0};
    exp_expect_creations(&e, "u1", 2, 1000);
    assert_false(exp_satisfied(&e, "u1", 1000 + EXPECT_TTL_MS));
    assert_true(exp_satisfied(&e, "u1", 1001 + EXPECT_TTL_MS));
    exp_expect_creations(&e, "u1", 2, 5000);
    /* The NodeSet was deleted and created again under the same name. */
    assert_true(exp_satisfied(&e, "u2", 5000));
    exp_expect_creations(&e, "u2", 1, 6000);
    int a, d;
    exp_pending(&e, &a, &d);
    assert_int_equal(a, 1);
    /* An expectation for a new uid replaces the old incarnation's. */
    exp_expect_deletion(&e, "u3", "ns/a-0", 7000);
    exp_pending(&e, &a, &d);
    assert_int_equal(a, 0);
    assert_int_equal(d, 1);
    exp_drop(&e);
    assert_true(exp_satisfied(&e, "u3", 7000));
    exp_drop(&e); /* idempotent */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_expiry_and_recreate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
