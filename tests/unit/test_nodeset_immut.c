/* Unit tests for reconcilers/nodeset_immut: the immutable NodeSet fields
 * remembered per key and uid, compared with nsb_validate's rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "reconcilers/nodeset_build.h"
#include "reconcilers/nodeset_immut.h"

static cJSON *ns(const char *spec)
{
    cJSON *o = cJSON_Parse(spec);
    assert_non_null(o);
    return o;
}

/* The table under test (the operator owns one; the test makes its own). */
static nsim_table *T;

#define CLAIM                                                                                                \
    "{\"metadata\":{\"name\":\"data\"},\"spec\":{\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}}}"
#define BIGGER                                                                                               \
    "{\"metadata\":{\"name\":\"data\"},\"spec\":{\"resources\":{\"requests\":{\"storage\":\"2Gi\"}}}}"

static size_t check(const char *key, const char *uid, const char *json)
{
    cJSON *o = ns(json);
    nsb_msgs m = {0};
    size_t n = nsim_check(T, key, uid, o, &m);
    assert_int_equal(n, m.n);
    if (n)
        assert_non_null(strstr(m.v[0], "cannot be changed after creation"));
    nsb_msgs_free(&m);
    cJSON_Delete(o);
    return n;
}

static void remember(const char *key, const char *uid, const char *json)
{
    cJSON *o = ns(json);
    nsim_remember(T, key, uid, o);
    cJSON_Delete(o);
}

static void test_claims(void **state)
{
    const char *a = "{\"spec\":{\"controllerRef\":{\"name\":\"s\"},\"volumeClaimTemplates\":[" CLAIM "]}}";
    const char *b = "{\"spec\":{\"controllerRef\":{\"name\":\"s\"},\"volumeClaimTemplates\":[" BIGGER "]}}";
    const char *none = "{\"spec\":{\"controllerRef\":{\"name\":\"s\"}}}";
    const char *empty = "{\"spec\":{\"controllerRef\":{\"name\":\"s\"},\"volumeClaimTemplates\":[]}}";
    const char *null = "{\"spec\":{\"controllerRef\":{\"name\":\"s\"},\"volumeClaimTemplates\":null}}";
    const char *other =
        "{\"spec\":{\"controllerRef\":{\"name\":\"t\"},\"volumeClaimTemplates\":[" CLAIM "]}}";

    /* Nothing remembered: nothing to compare with. */
    assert_int_equal(check("d/a", "u1", b), 0);
    remember("d/a", "u1", a);
    assert_int_equal(check("d/a", "u1", a), 0);
    assert_int_equal(check("d/a", "u1", b), 1);
    assert_int_equal(check("d/a", "u1", none), 1);
    assert_int_equal(check("d/a", "u1", other), 1); /* controllerRef too */
    /* A refused generation is never remembered; the old one stays. */
    assert_int_equal(check("d/a", "u1", b), 1);
    /* Another incarnation (new uid) starts again. */
    assert_int_equal(check("d/a", "u2", b), 0);
    remember("d/a", "u2", b);
    assert_int_equal(check("d/a", "u2", b), 0);
    assert_int_equal(check("d/a", "u2", a), 1);

    /* Absent, null and [] are the same: no claims. */
    remember("d/b", "u3", none);
    assert_int_equal(check("d/b", "u3", empty), 0);
    assert_int_equal(check("d/b", "u3", null), 0);
    assert_int_equal(check("d/b", "u3", a), 1);

    nsim_forget(T, "d/a");
    assert_int_equal(check("d/a", "u2", a), 0);
    nsim_forget(T, "d/a"); /* idempotent */
    nsim_clear(T);
    assert_int_equal(check("d/b", "u3", a), 0);
    nsim_clear(T);
}

/* Two tables (two operators) remember independently. */
static void test_tables_apart(void **state)
{
    const char *a = "{\"spec\":{\"controllerRef\":{\"name\":\"s\"}}}";
    const char *b = "{\"spec\":{\"controllerRef\":{\"name\":\"t\"}}}";
    nsim_table *other = nsim_new();
    remember("d/a", "u1", a);
    assert_int_equal(check("d/a", "u1", b), 1);
    nsim_table *mine = T;
    T = other;
    assert_int_equal(check("d/a", "u1", b), 0); /* nothing remembered there */
    remember("d/a", "u1", b);
    assert_int_equal(check("d/a", "u1", b), 0);
    T = mine;
    assert_int_equal(check("d/a", "u1", b), 1); /* the first table still has a */
    nsim_free(other);
    nsim_clear(T);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_claims),
        cmocka_unit_test(test_tables_apart),
    };
    T = nsim_new();
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    nsim_free(T);
    return rc;
}
