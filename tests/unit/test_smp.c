/* Unit tests for core/smp: strategic merge patch rules and directives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/smp.h"

static void check(const char *target, const char *patch, int flags, const char *want)
{
    cJSON *t = json_parse(target, strlen(target), NULL), *p = json_parse(patch, strlen(patch), NULL);
    assert_non_null(t);
    assert_non_null(p);
    int err = 0;
    t = smp_apply(t, p, flags, &err);
    assert_int_equal(err, 0);
    char *got = json_dump(t);
    assert_string_equal(got, want);
    free(got);
    cJSON_Delete(t);
    cJSON_Delete(p);
}

static void test_merge_by_key(void **state)
{
    /* containers merge by name, keeping order; env by name; unknown lists replace */
    check("{\"containers\":[{\"name\":\"a\",\"image\":\"x\",\"env\":[{\"name\":\"E\",\"value\":\"1\"}]},"
          "{\"name\":\"b\",\"args\":[\"1\",\"2\"]}]}",
          "{\"containers\":[{\"name\":\"b\",\"args\":[\"3\"]},{\"name\":\"a\",\"env\":[{\"name\":\"F\","
          "\"value\":\"2\"}]},{\"name\":\"c\"}]}",
          0,
          "{\"containers\":[{\"name\":\"a\",\"image\":\"x\",\"env\":[{\"name\":\"E\",\"value\":\"1\"},{"
          "\"name\":"
          "\"F\",\"value\":\"2\"}]},{\"name\":\"b\",\"args\":[\"3\"]},{\"name\":\"c\"}]}");
    /* conditions upsert by type */
    check("{\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
          "{\"status\":{\"conditions\":[{\"type\":\"SlurmNodeStateIdle\",\"status\":\"True\"}]}}", 0,
          "{\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},"
          "{\"type\":\"SlurmNodeStateIdle\",\"status\":\"True\"}]}}");
    /* service ports by port, container ports by containerPort */
    check("{\"ports\":[{\"port\":80,\"name\":\"a\"}]}", "{\"ports\":[{\"port\":80,\"name\":\"b\"}]}", 0,
          "{\"ports\":[{\"port\":80,\"name\":\"b\"}]}");
    /* tolerations have no merge key: replaced */
    check("{\"tolerations\":[{\"key\":\"a\"}]}", "{\"tolerations\":[{\"key\":\"b\"}]}", 0,
          "{\"tolerations\":[{\"key\":\"b\"}]}");
    /* finalizers are a set */
    check("{\"finalizers\":[\"a\",\"b\"]}", "{\"finalizers\":[\"b\",\"c\"]}", 0,
          "{\"finalizers\":[\"a\",\"b\",\"c\"]}");
}

static void test_directives(void **state)
{
    check("{\"conditions\":[{\"type\":\"A\"},{\"type\":\"B\"}]}",
          "{\"conditions\":[{\"type\":\"A\",\"$patch\":\"delete\"}]}", 0,
          "{\"conditions\":[{\"type\":\"B\"}]}");
    check("{\"a\":{\"x\":1,\"y\":2},\"b\":1}", "{\"a\":{\"$patch\":\"replace\",\"z\":3}}", 0,
          "{\"a\":{\"z\":3},\"b\":1}");
    check("{\"a\":{\"x\":1},\"b\":1}", "{\"a\":{\"$patch\":\"delete\"}}", 0, "{\"b\":1}");
    check("{\"finalizers\":[\"a\",\"b\"]}", "{\"$deleteFromPrimitiveList/finalizers\":[\"a\"]}", 0,
          "{\"finalizers\":[\"b\"]}");
    check("{\"volumes\":[{\"name\":\"a\"},{\"name\":\"b\"}]}",
          "{\"$setElementOrder/volumes\":[{\"name\":\"b\"},{\"name\":\"a\"}],\"volumes\":[{\"name\":\"a\","
          "\"emptyDir\":{}}]}",
          0, "{\"volumes\":[{\"name\":\"b\"},{\"name\":\"a\",\"emptyDir\":{}}]}");
    check("{\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxSurge\":1}}}",
          "{\"strategy\":{\"$retainKeys\":[\"type\"],\"type\":\"Recreate\"}}", 0,
          "{\"strategy\":{\"type\":\"Recreate\"}}");
    check("{\"a\":1,\"b\":2}", "{\"a\":null}", 0, "{\"b\":2}");
}

static void test_concat_containers(void **state)
{
    check("{\"containers\":[{\"name\":\"slurmd\",\"image\":\"x\"}],\"volumes\":[{\"name\":\"v\"}]}",
          "{\"containers\":[{\"name\":\"slurmd\",\"image\":\"y\"}],\"volumes\":[{\"name\":\"v\",\"emptyDir\":"
          "{}}]}",
          SMP_CONCAT_CONTAINERS,
          "{\"containers\":[{\"name\":\"slurmd\",\"image\":\"x\"},{\"name\":\"slurmd\",\"image\":\"y\"}],"
          "\"volumes\":[{\"name\":\"v\",\"emptyDir\":{}}]}");
}

static void test_bad_directive(void **state)
{
    cJSON *t = json_parse("{}", 2, NULL), *p = json_parse("{\"$bogus\":1}", 12, NULL);
    int err = 0;
    t = smp_apply(t, p, 0, &err);
    assert_int_not_equal(err, 0);
    cJSON_Delete(t);
    cJSON_Delete(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_by_key),
        cmocka_unit_test(test_directives),
        cmocka_unit_test(test_concat_containers),
        cmocka_unit_test(test_bad_directive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
