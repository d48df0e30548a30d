/* Unit tests for nodetaint's pure part: the Node's spec.taints with the
 * NodeSet worker taint added or removed, every other taint kept. */
#include "unit/cluster_fixtures.h"

#include "core/json.h"
#include "reconcilers/nodetaint.h"

static void test_add(void **state)
{
    (void)state;
    /* No taints: one, without a value. */
    cJSON *t = nodetaint_desired(NULL, 1);
    assert_non_null(t);
    assert_int_equal(json_len(t), 1);
    assert_string_equal(json_get_str(t->child, "key"), "nodeset.slinky.slurm.net/worker");
    assert_string_equal(json_get_str(t->child, "effect"), "NoExecute");
    assert_null(json_get(t->child, "value"));
    assert_true(nodetaint_has(t));
    cJSON_Delete(t);

    /* Other taints are kept, in their order, ours appended. */
    cJSON *have = JQ("[{'key':'gpu','value':'a100','effect':'NoSchedule'},"
                     "{'key':'nodeset.slinky.slurm.net/worker','effect':'NoSchedule'}]");
    assert_false(nodetaint_has(have)); /* same key, another effect: not ours */
    t = nodetaint_desired(have, 1);
    assert_int_equal(json_len(t), 3);
    assert_string_equal(json_get_str(cJSON_GetArrayItem(t, 0), "key"), "gpu");
    assert_string_equal(json_get_str(cJSON_GetArrayItem(t, 1), "effect"), "NoSchedule");
    assert_string_equal(json_get_str(cJSON_GetArrayItem(t, 2), "effect"), "NoExecute");
    cJSON_Delete(t);
    /* Not wanted and absent: nothing to write. */
    assert_null(nodetaint_desired(have, 0));
    cJSON_Delete(have);
}

static void test_remove(void **state)
{
    (void)state;
    cJSON *have = JQ("[{'key':'nodeset.slinky.slurm.net/worker','effect':'NoExecute',"
                     "'timeAdded':'2026-01-01T00:00:00Z'},{'key':'x','effect':'NoExecute'}]");
    assert_true(nodetaint_has(have));
    /* Present and wanted: nothing to write (the API server's timeAdded is kept). */
    assert_null(nodetaint_desired(have, 1));
    cJSON *t = nodetaint_desired(have, 0);
    assert_int_equal(json_len(t), 1);
    assert_string_equal(json_get_str(t->child, "key"), "x");
    cJSON_Delete(t);
    cJSON_Delete(have);
    /* The last taint removed: an empty list (a merge patch with [] clears it). */
    have = JQ("[{'key':'nodeset.slinky.slurm.net/worker','effect':'NoExecute'}]");
    t = nodetaint_desired(have, 0);
    assert_true(cJSON_IsArray(t));
    assert_int_equal(json_len(t), 0);
    cJSON_Delete(t);
    cJSON_Delete(have);
}

int main(void)
{
    mem_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_remove),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
