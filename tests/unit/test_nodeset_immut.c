/* Unit tests for reconcilers/nodeset_immut: the immutable NodeSet fields
 * remembered per NodeSet (one nsim_mem each, as its record keeps it) and
 * uid, compared with nsb_validate's rules. */
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

/* The memories under test, one per NodeSet as the records keep them. */
static nsim_mem A, B;

static nsim_mem *mem(const char *key)
{
    return strcmp(key, "d/a") == 0 ? &A : &B;
}

#define CLAIM                                                                                                \
    "{\"metadata\":{\"name\":\"data\"},\"spec\":{\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}}}"
#define BIGGER                                                                                               \
    "{\"metadata\":{\"name\":\"data\"},\"spec\":{\"resources\":{\"requests\":{\"storage\":\"2Gi\"}}}}"

static size_t check(const char *key, const char *uid, const char *json)
{
    cJSON *o = ns(json);
    nsb_msgs m = {0};
    size_t n = nsim_check(mem(key), uid, o, &m);
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
    nsim_remember(mem(key), uid, o);
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

    nsim_forget(&A);
    assert_int_equal(check("d/a", "u2", a), 0);
    assert_null(A.old);
    nsim_forget(&A); /* idempotent */
    assert_int_equal(check("d/b", "u3", a), 1); /* the other NodeSet's memory is its own */
    nsim_forget(&B);
    assert_int_equal(check("d/b", "u3", a), 0);
}

/* A memory all zero (a record just made) holds nothing; remembering for a
 * new uid replaces the old incarnation's fields. */
static void test_zero_and_new_uid(void **state)
{
    (void)state;
    const char *a = "{\"spec\":{\"controllerRef\":{\"name\":\"s\"}}}";
    const char *b = "{\"spec\":{\"controllerRef\":{\"name\":\"t\"}}}";
    nsim_mem z = {0};
    cJSON *o = ns(b);
    nsb_msgs m = {0};
    assert_int_equal(nsim_check(&z, "u1", o, &m), 0);
    cJSON *oa = ns(a);
    nsim_remember(&z, "u1", oa);
    assert_int_equal(nsim_check(&z, "u1", o, &m), 1);
    nsb_msgs_free(&m);
    nsim_remember(&z, "u2", o);
    assert_string_equal(z.uid, "u2");
    assert_int_equal(nsim_check(&z, "u2", o, &m), 0);
    nsim_forget(&z);
    cJSON_Delete(o);
    cJSON_Delete(oa);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_claims),
        cmocka_unit_test(test_zero_and_new_uid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
