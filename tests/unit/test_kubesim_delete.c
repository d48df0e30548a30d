/* kubesim engine: DELETE preconditions, finalizers, propagation policies,
 * garbage collection and namespace deletion. */
#include "test_kubesim_util.h"

#define CMS "/api/v1/namespaces/default/configmaps"

static char *uid_of(tk *t, const char *path)
{
    tres r = tk_call(t, "GET", path, NULL, NULL);
    assert_int_equal(r.status, 200);
    char *u = xstrdup(jstr(&r, "metadata.uid"));
    tres_free(&r);
    return u;
}

static int exists(tk *t, const char *path)
{
    tres r = tk_call(t, "GET", path, NULL, NULL);
    int st = r.status;
    tres_free(&r);
    return st == 200;
}

static void make_dep(tk *t, const char *name, const char *owner_uid, int block)
{
    char body[512];
    snprintf(
        body, sizeof(body),
        "{\"metadata\":{\"name\":\"%s\",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
        "\"name\":\"owner\",\"uid\":\"%s\",\"controller\":true,\"blockOwnerDeletion\":%s}]}}",
        name, owner_uid, block ? "true" : "false");
    tk_expect(t, "POST", CMS, NULL, body, 201);
}

static void test_preconditions_and_status(void **state)
{
    tk t;
    tk_init(&t);
    tk_expect(&t, "POST", CMS, NULL, CM_JSON("a"), 201);
    char *uid = uid_of(&t, CMS "/a");
    tres r = tk_call(&t, "DELETE", CMS "/a", NULL,
                     "{\"preconditions\":{\"uid\":\"11111111-1111-1111-1111-111111111111\"}}");
    assert_int_equal(r.status, 409);
    assert_string_equal(jstr(&r, "reason"), "Conflict");
    char want[256];
    snprintf(want, sizeof(want),
             "the UID in the precondition (11111111-1111-1111-1111-111111111111) does not match the UID in "
             "record (%s). "
             "The object might have been deleted and then recreated",
             uid);
    assert_string_equal(jstr(&r, "message"), want);
    tres_free(&r);
    r = tk_call(&t, "DELETE", CMS "/a", NULL, "{\"preconditions\":{\"resourceVersion\":\"1\"}}");
    assert_int_equal(r.status, 409);
    assert_non_null(strstr(jstr(&r, "message"),
                           "the ResourceVersion in the precondition (1) does not match the "
                           "ResourceVersion in record ("));
    assert_non_null(strstr(jstr(&r, "message"), "). The object might have been modified"));
    tres_free(&r);
    /* a CR-style Status for plain types */
    r = tk_call(&t, "DELETE", CMS "/a", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(jstr(&r, "kind"), "Status");
    assert_string_equal(jstr(&r, "status"), "Success");
    assert_string_equal(jstr(&r, "details.kind"), "configmaps");
    assert_string_equal(jstr(&r, "details.uid"), uid);
    tres_free(&r);
    tk_expect(&t, "DELETE", CMS "/a", NULL, NULL, 404);
    /* pods answer with the object */
    tk_expect(&t, "POST", "/api/v1/namespaces/default/pods", NULL, POD_JSON("p", "{}"), 201);
    r = tk_call(&t, "DELETE", "/api/v1/namespaces/default/pods/p", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(jstr(&r, "kind"), "Pod");
    tres_free(&r);
    free(uid);
    tk_done(&t);
}

static void test_finalizers(void **state)
{
    tk t;
    tk_init(&t);
    tk_expect(&t, "POST", CMS, NULL, "{\"metadata\":{\"name\":\"f\",\"finalizers\":[\"a/x\",\"b/y\"]}}", 201);
    char p[256];
    snprintf(p, sizeof(p), CMS "?watch=1&resourceVersion=%llu", (unsigned long long)ks_rv(t.k));
    tw w;
    assert_int_equal(tw_start(&t, &w, p), 200);
    tres r = tk_call(&t, "DELETE", CMS "/f", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(jstr(&r, "kind"), "ConfigMap"); /* the object, still there */
    assert_non_null(jstr(&r, "metadata.deletionTimestamp"));
    assert_int_equal(json_get_int(r.body, "metadata.deletionGracePeriodSeconds", -1), 0);
    tres_free(&r);
    assert_true(exists(&t, CMS "/f"));
    /* a second delete changes nothing */
    uint64_t rv = ks_rv(t.k);
    tk_expect(&t, "DELETE", CMS "/f", NULL, NULL, 200);
    assert_int_equal(ks_rv(t.k), rv);
    /* no new finalizers once deleting */
    r = tk_call(&t, "PATCH", CMS "/f", "application/merge-patch+json",
                "{\"metadata\":{\"finalizers\":[\"a/x\",\"b/y\",\"c/z\"]}}");
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(jstr(&r, "message"),
                           "no new finalizers can be added if the object is being deleted, found "
                           "new finalizers []string{\"c/z\"}"));
    tres_free(&r);
    /* removing one keeps it, removing the last removes it */
    tk_expect(&t, "PATCH", CMS "/f", "application/json-patch+json",
              "[{\"op\":\"test\",\"path\":\"/metadata/finalizers/0\",\"value\":\"a/"
              "x\"},{\"op\":\"remove\",\"path\":"
              "\"/metadata/finalizers/0\"}]",
              200);
    assert_true(exists(&t, CMS "/f"));
    tk_expect(&t, "PATCH", CMS "/f", "application/merge-patch+json", "{\"metadata\":{\"finalizers\":null}}",
              200);
    assert_false(exists(&t, CMS "/f"));
    tk_run(&t, 5);
    char *s = tw_summary(&w);
    assert_string_equal(s, "MODIFIED:f MODIFIED:f DELETED:f");
    free(s);
    /* the DELETED object is the last stored state (with the finalizer that was removed) */
    cJSON *ev = tw_events(&w);
    const cJSON *last = cJSON_GetArrayItem(ev, 2);
    assert_string_equal(json_get(last, "object.metadata.finalizers")->child->valuestring, "b/y");
    cJSON_Delete(ev);
    tw_stop(&w);
    tk_done(&t);
}

static void test_gc_background_and_dangling(void **state)
{
    tk t;
    tk_init(&t);
    tk_expect(&t, "POST", CMS, NULL, CM_JSON("owner"), 201);
    char *uid = uid_of(&t, CMS "/owner");
    make_dep(&t, "dep1", uid, 0);
    make_dep(&t, "dep2", uid, 1);
    /* a dependent whose owner uid does not resolve is collected */
    make_dep(&t, "orphaned", "99999999-9999-9999-9999-999999999999", 0);
    tk_run(&t, 20);
    assert_false(exists(&t, CMS "/orphaned"));
    assert_true(exists(&t, CMS "/dep1"));
    /* background: owner goes at once, dependents after */
    tres r = tk_call(&t, "DELETE", CMS "/owner", NULL, NULL);
    assert_int_equal(r.status, 200);
    tres_free(&r);
    assert_false(exists(&t, CMS "/owner"));
    assert_true(exists(&t, CMS "/dep1"));
    tk_run(&t, 20);
    assert_false(exists(&t, CMS "/dep1"));
    assert_false(exists(&t, CMS "/dep2"));
    /* an owner in another namespace does not count */
    tk_expect(&t, "POST", "/api/v1/namespaces/kube-system/configmaps", NULL, CM_JSON("owner"), 201);
    char *uid2 = uid_of(&t, "/api/v1/namespaces/kube-system/configmaps/owner");
    make_dep(&t, "cross", uid2, 0);
    tk_run(&t, 20);
    assert_false(exists(&t, CMS "/cross"));
    free(uid);
    free(uid2);
    tk_done(&t);
}

static void test_gc_foreground_and_orphan(void **state)
{
    tk t;
    tk_init(&t);
    /* pods as blocking dependents: they take their grace period to go */
    tk_expect(&t, "POST", CMS, NULL, CM_JSON("owner"), 201);
    char *uid = uid_of(&t, CMS "/owner");
    make_dep(&t, "dep1", uid, 1);
    make_dep(&t, "dep2", uid, 0);
    tk_expect(&t, "POST", CMS, NULL,
              "{\"metadata\":{\"name\":\"slow\",\"finalizers\":[\"x/"
              "hold\"],\"ownerReferences\":[{\"apiVersion\":\"v1\","
              "\"kind\":\"ConfigMap\",\"name\":\"owner\",\"uid\":\"PLACEHOLDER\"}]}}",
              201);
    /* (the placeholder uid makes "slow" a dangling dependent, collected but held by its finalizer) */
    tres r = tk_call(&t, "DELETE", CMS "/owner", NULL, "{\"propagationPolicy\":\"Foreground\"}");
    assert_int_equal(r.status, 200);
    assert_string_equal(jstr(&r, "kind"), "ConfigMap");
    const cJSON *fin = json_get(r.body, "metadata.finalizers");
    assert_string_equal(fin->child->valuestring, "foregroundDeletion");
    tres_free(&r);
    tk_run(&t, 30);
    /* dependents went first, then the owner */
    assert_false(exists(&t, CMS "/dep1"));
    assert_false(exists(&t, CMS "/dep2"));
    assert_false(exists(&t, CMS "/owner"));
    /* foreground waits for a blocking dependent held by a finalizer */
    tk_expect(&t, "POST", CMS, NULL, CM_JSON("owner2"), 201);
    char *uid2 = uid_of(&t, CMS "/owner2");
    char body[512];
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"name\":\"held\",\"finalizers\":[\"x/"
             "hold\"],\"ownerReferences\":[{\"apiVersion\":\"v1\","
             "\"kind\":\"ConfigMap\",\"name\":\"owner2\",\"uid\":\"%s\",\"blockOwnerDeletion\":true}]}}",
             uid2);
    tk_expect(&t, "POST", CMS, NULL, body, 201);
    tk_expect(&t, "DELETE", CMS "/owner2?propagationPolicy=Foreground", NULL, NULL, 200);
    tk_run(&t, 30);
    assert_true(exists(&t, CMS "/owner2"));
    assert_true(exists(&t, CMS "/held"));
    tk_expect(&t, "PATCH", CMS "/held", "application/merge-patch+json",
              "{\"metadata\":{\"finalizers\":null}}", 200);
    tk_run(&t, 30);
    assert_false(exists(&t, CMS "/held"));
    assert_false(exists(&t, CMS "/owner2"));
    /* orphan: dependents lose the reference and stay */
    tk_expect(&t, "POST", CMS, NULL, CM_JSON("owner3"), 201);
    char *uid3 = uid_of(&t, CMS "/owner3");
    make_dep(&t, "kept", uid3, 1);
    tk_expect(&t, "DELETE", CMS "/owner3", NULL, "{\"propagationPolicy\":\"Orphan\"}", 200);
    tk_run(&t, 30);
    assert_false(exists(&t, CMS "/owner3"));
    r = tk_call(&t, "GET", CMS "/kept", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_null(json_get(r.body, "metadata.ownerReferences"));
    tres_free(&r);
    tk_expect(&t, "PATCH", CMS "/slow", "application/merge-patch+json",
              "{\"metadata\":{\"finalizers\":null}}", 200);
    tk_expect(&t, "DELETE", CMS "/x?propagationPolicy=Sideways", NULL, NULL, 422);
    free(uid);
    free(uid2);
    free(uid3);
    tk_done(&t);
}

static void test_namespace_deletion(void **state)
{
    tk t;
    tk_init(&t);
    tk_expect(&t, "POST", "/api/v1/namespaces", NULL, "{\"metadata\":{\"name\":\"tmp\"}}", 201);
    tres r = tk_call(&t, "GET", "/api/v1/namespaces/tmp/serviceaccounts/default", NULL, NULL);
    assert_int_equal(r.status, 200); /* what the controllers add */
    tres_free(&r);
    tk_expect(&t, "POST", "/api/v1/namespaces/tmp/configmaps", NULL,
              "{\"metadata\":{\"name\":\"c\",\"finalizers\":"
              "[\"x/y\"]}}",
              201);
    r = tk_call(&t, "DELETE", "/api/v1/namespaces/tmp", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(jstr(&r, "status.phase"), "Terminating");
    tres_free(&r);
    tk_run(&t, 20);
    /* creates are refused while terminating */
    r = tk_call(&t, "POST", "/api/v1/namespaces/tmp/configmaps", NULL, CM_JSON("n"));
    assert_int_equal(r.status, 403);
    assert_string_equal(jstr(&r, "reason"), "Forbidden");
    assert_string_equal(json_get_str(json_get(r.body, "details.causes")->child, "reason"),
                        "NamespaceTerminating");
    tres_free(&r);
    assert_true(exists(&t, "/api/v1/namespaces/tmp"));
    assert_false(exists(&t, "/api/v1/namespaces/tmp/serviceaccounts/default"));
    tk_expect(&t, "PATCH", "/api/v1/namespaces/tmp/configmaps/c", "application/merge-patch+json",
              "{\"metadata\":{\"finalizers\":null}}", 200);
    tk_run(&t, 20);
    assert_false(exists(&t, "/api/v1/namespaces/tmp"));
    r = tk_call(&t, "DELETE", "/api/v1/namespaces/default", NULL, NULL);
    assert_int_equal(r.status, 403);
    tres_free(&r);
    tk_done(&t);
}

static void test_deletecollection(void **state)
{
    tk t;
    tk_init(&t);
    tk_expect(&t, "POST", CMS, NULL, "{\"metadata\":{\"name\":\"a\",\"labels\":{\"g\":\"1\"}}}", 201);
    tk_expect(&t, "POST", CMS, NULL, "{\"metadata\":{\"name\":\"b\",\"labels\":{\"g\":\"1\"}}}", 201);
    tk_expect(&t, "POST", CMS, NULL, "{\"metadata\":{\"name\":\"c\"}}", 201);
    tres r = tk_call(&t, "DELETE", CMS "?labelSelector=g%3D1", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_len(json_get(r.body, "items")), 2);
    tres_free(&r);
    assert_true(exists(&t, CMS "/c"));
    assert_false(exists(&t, CMS "/a"));
    tk_done(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_preconditions_and_status),   cmocka_unit_test(test_finalizers),
        cmocka_unit_test(test_gc_background_and_dangling), cmocka_unit_test(test_gc_foreground_and_orphan),
        cmocka_unit_test(test_namespace_deletion),         cmocka_unit_test(test_deletecollection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
