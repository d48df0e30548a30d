/* kubesim engine: merge, JSON, strategic merge and apply patches. */
#include "test_kubesim_util.h"

#define CMS "/api/v1/namespaces/default/configmaps"
#define DEPS "/apis/apps/v1/namespaces/default/deployments"

static const char *DEPLOY =
    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"d\"},"
    "\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":{\"app\":\"d\"}},"
    "\"template\":{\"metadata\":{\"labels\":{\"app\":\"d\"}},\"spec\":{\"containers\":[{\"name\":"
    "\"a\",\"image\":\"x:1\"},{\"name\":\"b\",\"image\":\"y:1\"}]}}}}";

static void test_merge_and_json_patch(void **state)
{
    tk t;
    tk_init(&t);
    tk_expect(&t, "POST", CMS, NULL,
              "{\"metadata\":{\"name\":\"a\",\"labels\":{\"x\":\"1\",\"y\":\"2\"}},"
              "\"data\":{\"k\":\"v\",\"l\":\"w\"}}",
              201);
    tres r = tk_call(&t, "PATCH", CMS "/a", "application/merge-patch+json",
                     "{\"metadata\":{\"labels\":{\"x\":null,\"z\":\"3\"}},\"data\":{\"k\":\"v2\"}}");
    assert_int_equal(r.status, 200);
    assert_null(json_get(r.body, "metadata.labels.x"));
    assert_string_equal(jstr(&r, "metadata.labels.z"), "3");
    assert_string_equal(jstr(&r, "data.k"), "v2");
    assert_string_equal(jstr(&r, "data.l"), "w");
    char rv[32];
    snprintf(rv, sizeof(rv), "%s", jstr(&r, "metadata.resourceVersion"));
    tres_free(&r);
    /* JSON patch with a passing and a failing test */
    r = tk_call(
        &t, "PATCH", CMS "/a", "application/json-patch+json",
        "[{\"op\":\"test\",\"path\":\"/data/k\",\"value\":\"v2\"},{\"op\":\"add\",\"path\":\"/data/m\","
        "\"value\":\"n\"},{\"op\":\"remove\",\"path\":\"/data/l\"},{\"op\":\"copy\",\"from\":\"/data/k\","
        "\"path\":\"/data/k2\"},{\"op\":\"move\",\"from\":\"/data/k2\",\"path\":\"/data/k3\"},{\"op\":"
        "\"replace\",\"path\":\"/metadata/labels/z\",\"value\":\"4\"}]");
    assert_int_equal(r.status, 200);
    assert_string_equal(jstr(&r, "data.m"), "n");
    assert_null(json_get(r.body, "data.l"));
    assert_null(json_get(r.body, "data.k2"));
    assert_string_equal(jstr(&r, "data.k3"), "v2");
    assert_string_equal(jstr(&r, "metadata.labels.z"), "4");
    tres_free(&r);
    r = tk_call(
        &t, "PATCH", CMS "/a", "application/json-patch+json",
        "[{\"op\":\"test\",\"path\":\"/data/k\",\"value\":\"old\"},{\"op\":\"add\",\"path\":\"/data/q\","
        "\"value\":\"r\"}]");
    assert_int_equal(r.status, 422);
    assert_string_equal(jstr(&r, "reason"), "Invalid");
    assert_string_equal(jstr(&r, "message"),
                        "the server rejected our request due to an error in our request");
    tres_free(&r);
    r = tk_call(&t, "GET", CMS "/a", NULL, NULL);
    assert_null(json_get(r.body, "data.q")); /* nothing of a failed patch is kept */
    tres_free(&r);
    tk_expect(&t, "PATCH", CMS "/a", "application/json-patch+json",
              "[{\"op\":\"remove\",\"path\":\"/data/nope\"}]", 422);
    tk_expect(&t, "PATCH", CMS "/a", "application/json-patch+json", "{\"op\":\"remove\"}", 400);
    tk_expect(&t, "PATCH", CMS "/a", "application/json-patch+json", "[{\"path\":\"/data\"}]", 400);
    /* array ops */
    r = tk_call(
        &t, "PATCH", CMS "/a", "application/json-patch+json",
        "[{\"op\":\"add\",\"path\":\"/metadata/finalizers\",\"value\":[\"a\"]},{\"op\":\"add\",\"path\":"
        "\"/metadata/finalizers/-\",\"value\":\"c\"},{\"op\":\"add\",\"path\":\"/metadata/finalizers/1\","
        "\"value\":\"b\"}]");
    assert_int_equal(r.status, 200);
    char *f = json_dump(json_get(r.body, "metadata.finalizers"));
    assert_string_equal(f, "[\"a\",\"b\",\"c\"]");
    free(f);
    tres_free(&r);
    /* a stale RV inside a patch is a precondition */
    char body[128];
    snprintf(body, sizeof(body), "{\"metadata\":{\"resourceVersion\":\"%s\"},\"data\":{\"k\":\"x\"}}", rv);
    r = tk_call(&t, "PATCH", CMS "/a", "application/merge-patch+json", body);
    assert_int_equal(r.status, 409);
    assert_string_equal(jstr(&r, "reason"), "Conflict");
    tres_free(&r);
    /* patches of missing objects, unknown types, force */
    tk_expect(&t, "PATCH", CMS "/none", "application/merge-patch+json", "{}", 404);
    tk_expect(&t, "PATCH", CMS "/a", "application/json", "{}", 415);
    r = tk_call(&t, "PATCH", CMS "/a?force=true", "application/merge-patch+json", "{}");
    assert_int_equal(r.status, 422);
    assert_string_equal(
        jstr(&r, "message"),
        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply "
        "patch");
    tres_free(&r);
    tk_done(&t);
}

static void test_strategic(void **state)
{
    tk t;
    tk_init(&t);
    tk_expect(&t, "POST", DEPS, NULL, DEPLOY, 201);
    tres r =
        tk_call(&t, "PATCH", DEPS "/d", "application/strategic-merge-patch+json",
                "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"b\",\"image\":\"y:2\"}]}}}}");
    assert_int_equal(r.status, 200);
    const cJSON *cs = json_get(r.body, "spec.template.spec.containers");
    assert_int_equal(json_len(cs), 2);
    assert_string_equal(json_get_str(cs->child, "image"), "x:1");
    assert_string_equal(json_get_str(cs->child->next, "image"), "y:2");
    assert_int_equal(json_get_int(r.body, "metadata.generation", 0), 2);
    tres_free(&r);
    /* merge patch on the same list replaces it */
    r = tk_call(&t, "PATCH", DEPS "/d", "application/merge-patch+json",
                "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"b\",\"image\":\"y:3\"}]}}}}");
    assert_int_equal(json_len(json_get(r.body, "spec.template.spec.containers")), 1);
    tres_free(&r);
    /* metadata-only change: no generation bump */
    r = tk_call(&t, "PATCH", DEPS "/d", "application/merge-patch+json",
                "{\"metadata\":{\"labels\":{\"q\":\"1\"}}}");
    assert_int_equal(json_get_int(r.body, "metadata.generation", 0), 3);
    tres_free(&r);
    /* selector is immutable */
    r = tk_call(
        &t, "PATCH", DEPS "/d", "application/merge-patch+json",
        "{\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"e\"}},\"template\":{\"metadata\":{\"labels\":{"
        "\"app\":\"e\"}}}}}");
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(jstr(&r, "message"), "field is immutable"));
    tres_free(&r);
    /* strategic merge on pod status conditions keeps the other conditions */
    tk_expect(&t, "POST", "/api/v1/namespaces/default/pods", NULL, POD_JSON("p", "{}"), 201);
    tk_expect(&t, "PATCH", "/api/v1/namespaces/default/pods/p/status",
              "application/strategic-merge-patch+json",
              "{\"status\":{\"conditions\":[{\"type\":\"A\",\"status\":\"True\"},{\"type\":\"B\",\"status\":"
              "\"True\"}]}}",
              200);
    r = tk_call(&t, "PATCH", "/api/v1/namespaces/default/pods/p/status",
                "application/strategic-merge-patch+json",
                "{\"status\":{\"conditions\":[{\"type\":\"B\",\"status\":\"False\"}]}}");
    assert_int_equal(r.status, 200);
    const cJSON *conds = json_get(r.body, "status.conditions");
    int a_true = 0, b_false = 0;
    for (const cJSON *c = conds ? conds->child : NULL; c; c = c->next) {
        if (strcmp(json_get_str_or(c, "type", ""), "A") == 0)
            a_true = strcmp(json_get_str_or(c, "status", ""), "True") == 0;
        if (strcmp(json_get_str_or(c, "type", ""), "B") == 0)
            b_false = strcmp(json_get_str_or(c, "status", ""), "False") == 0;
    }
    assert_true(a_true && b_false);
    tres_free(&r);
    tk_done(&t);
}

static void test_apply(void **state)
{
    tk t;
    tk_init(&t);
    const char *cfg =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ap\n  labels:\n    a: \"1\"\ndata:\n  x: \"1\"\n"
        "  y: \"2\"\n";
    /* fieldManager is required */
    tres r = tk_call(&t, "PATCH", CMS "/ap", "application/apply-patch+yaml", cfg);
    assert_int_equal(r.status, 422);
    assert_string_equal(
        jstr(&r, "message"),
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply "
        "patch");
    tres_free(&r);
    /* creates when absent */
    r = tk_call(&t, "PATCH", CMS "/ap?fieldManager=mgr1", "application/apply-patch+yaml", cfg);
    assert_int_equal(r.status, 201);
    assert_string_equal(jstr(&r, "data.x"), "1");
    const cJSON *mf = json_get(r.body, "metadata.managedFields");
    assert_int_equal(json_len(mf), 1);
    assert_string_equal(json_get_str(mf->child, "manager"), "mgr1");
    assert_string_equal(json_get_str(mf->child, "operation"), "Apply");
    assert_non_null(json_child(json_get(mf->child, "fieldsV1.f:data"), "f:x"));
    char rv1[32];
    snprintf(rv1, sizeof(rv1), "%s", jstr(&r, "metadata.resourceVersion"));
    tres_free(&r);
    /* the same apply again is a no-op */
    r = tk_call(&t, "PATCH", CMS "/ap?fieldManager=mgr1", "application/apply-patch+yaml", cfg);
    assert_int_equal(r.status, 200);
    assert_string_equal(jstr(&r, "metadata.resourceVersion"), rv1);
    tres_free(&r);
    /* another manager changing an owned field: conflict */
    const cJSON *c1;
    r = tk_call(&t, "PATCH", CMS "/ap?fieldManager=mgr2", "application/apply-patch+yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ap\ndata:\n  x: \"9\"\n  z: \"3\"\n");
    assert_int_equal(r.status, 409);
    assert_string_equal(jstr(&r, "reason"), "Conflict");
    assert_string_equal(jstr(&r, "message"), "Apply failed with 1 conflict: conflict with \"mgr1\": .data.x");
    c1 = json_get(r.body, "details.causes")->child;
    assert_string_equal(json_get_str(c1, "reason"), "FieldManagerConflict");
    assert_string_equal(json_get_str(c1, "field"), ".data.x");
    tres_free(&r);
    /* the same value is shared ownership, not a conflict */
    tk_expect(&t, "PATCH", CMS "/ap?fieldManager=mgr2", "application/apply-patch+yaml",
              "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ap\ndata:\n  x: \"1\"\n  z: \"3\"\n", 200);
    /* force takes ownership */
    r = tk_call(&t, "PATCH", CMS "/ap?fieldManager=mgr2&force=true", "application/apply-patch+yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ap\ndata:\n  y: \"7\"\n  z: \"3\"\n");
    assert_int_equal(r.status, 200);
    assert_string_equal(jstr(&r, "data.y"), "7");
    /* mgr2 dropped x, but mgr1 still owns it: kept */
    assert_string_equal(jstr(&r, "data.x"), "1");
    tres_free(&r);
    /* mgr1 stops applying x: now nobody owns it, it goes */
    r = tk_call(&t, "PATCH", CMS "/ap?fieldManager=mgr1", "application/apply-patch+yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ap\n  labels:\n    a: \"1\"\n");
    assert_int_equal(r.status, 200);
    assert_null(json_get(r.body, "data.x"));
    assert_string_equal(jstr(&r, "data.y"), "7"); /* owned by mgr2 since force */
    assert_string_equal(jstr(&r, "data.z"), "3");
    tres_free(&r);
    /* an Update by another manager takes the field; apply conflicts with it */
    r = tk_call(&t, "PATCH", CMS "/ap?fieldManager=editor", "application/merge-patch+json",
                "{\"data\":{\"z\":\"8\"}}");
    assert_int_equal(r.status, 200);
    int has_editor = 0;
    for (const cJSON *e = json_get(r.body, "metadata.managedFields")->child; e; e = e->next)
        if (strcmp(json_get_str_or(e, "manager", ""), "editor") == 0)
            has_editor = strcmp(json_get_str_or(e, "operation", ""), "Update") == 0;
    assert_true(has_editor);
    tres_free(&r);
    r = tk_call(&t, "PATCH", CMS "/ap?fieldManager=mgr2", "application/apply-patch+yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ap\ndata:\n  y: \"7\"\n  z: \"3\"\n");
    assert_int_equal(r.status, 409);
    assert_string_equal(jstr(&r, "message"),
                        "Apply failed with 1 conflict: conflict with \"editor\": .data.z");
    tres_free(&r);
    /* apply with a keyed list merges by key */
    tk_expect(&t, "PATCH", DEPS "/d?fieldManager=op", "application/apply-patch+yaml", DEPLOY, 201);
    r = tk_call(&t, "PATCH", DEPS "/d?fieldManager=other", "application/apply-patch+yaml",
                "{\"apiVersion\":\"apps/"
                "v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"d\"},\"spec\":{\"template\":"
                "{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"z:1\"}]}}}}");
    assert_int_equal(r.status, 200);
    assert_int_equal(json_len(json_get(r.body, "spec.template.spec.containers")), 3);
    tres_free(&r);
    /* wrong kind in an apply body */
    tk_expect(&t, "PATCH", CMS "/ap?fieldManager=m", "application/apply-patch+yaml",
              "apiVersion: v1\nkind: Secret\nmetadata:\n  name: ap\n", 400);
    tk_expect(&t, "PATCH", CMS "/ap?fieldManager=m", "application/apply-patch+yaml",
              "metadata:\n  name: ap\n", 422);
    tk_done(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_and_json_patch),
        cmocka_unit_test(test_strategic),
        cmocka_unit_test(test_apply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
