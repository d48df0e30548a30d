/* kubesim engine: watch resourceVersion semantics, selectors, bookmarks,
 * timeouts, watch-list, history expiry. */
#include "test_kubesim_util.h"

#define CMS "/api/v1/namespaces/default/configmaps"

static uint64_t create_cm(tk *t, const char *name, const char *labels)
{
    char body[512];
    snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"%s\",\"labels\":%s}}", name,
             labels ? labels : "{}");
    tres r = tk_call(t, "POST", CMS, NULL, body);
    assert_int_equal(r.status, 201);
    uint64_t rv = strtoull(jstr(&r, "metadata.resourceVersion"), NULL, 10);
    tres_free(&r);
    return rv;
}

static void label_cm(tk *t, const char *name, const char *labels)
{
    char body[512];
    snprintf(body, sizeof(body), "{\"metadata\":{\"labels\":%s}}", labels);
    char path[256];
    snprintf(path, sizeof(path), CMS "/%s", name);
    tk_expect(t, "PATCH", path, "application/merge-patch+json", body, 200);
}

static void test_rv_semantics(void **state)
{
    tk t;
    tk_init(&t);
    create_cm(&t, "a", NULL);
    uint64_t rv_b = create_cm(&t, "b", NULL);
    create_cm(&t, "c", NULL);
    /* unset: synthetic ADDED for everything, then changes */
    tw w1;
    assert_int_equal(tw_start(&t, &w1, CMS "?watch=1&fieldSelector=metadata.name!%3Dkube-root-ca.crt"), 200);
    /* exactly the changes after rv_b */
    tw w2;
    char p[256];
    snprintf(p, sizeof(p), CMS "?watch=true&resourceVersion=%llu", (unsigned long long)rv_b);
    assert_int_equal(tw_start(&t, &w2, p), 200);
    /* "0": like unset */
    tw w3;
    assert_int_equal(tw_start(&t, &w3, CMS "?watch&resourceVersion=0&labelSelector=x%3Dy"), 200);
    tk_expect(&t, "DELETE", CMS "/a", NULL, NULL, 200);
    create_cm(&t, "d", "{\"x\":\"y\"}");
    tk_run(&t, 5);
    char *s = tw_summary(&w1);
    /* initial ADDED order is the map's; check membership and the tail */
    assert_non_null(strstr(s, "ADDED:a"));
    assert_non_null(strstr(s, "ADDED:b"));
    assert_non_null(strstr(s, "ADDED:c"));
    assert_non_null(strstr(s, "DELETED:a ADDED:d"));
    free(s);
    s = tw_summary(&w2);
    assert_string_equal(s, "ADDED:c DELETED:a ADDED:d");
    free(s);
    s = tw_summary(&w3);
    assert_string_equal(s, "ADDED:d");
    free(s);
    /* the DELETED event carries the RV of the delete, events carry kind/apiVersion */
    cJSON *ev = tw_events(&w2);
    const cJSON *del = cJSON_GetArrayItem(ev, 1);
    assert_string_equal(json_get_str(del, "object.kind"), "ConfigMap");
    assert_string_equal(json_get_str(del, "object.apiVersion"), "v1");
    uint64_t del_rv = strtoull(json_get_str(del, "object.metadata.resourceVersion"), NULL, 10);
    uint64_t add_c =
        strtoull(json_get_str(cJSON_GetArrayItem(ev, 0), "object.metadata.resourceVersion"), NULL, 10);
    assert_true(del_rv > add_c);
    cJSON_Delete(ev);
    /* a future RV: only events after it */
    tw w4;
    snprintf(p, sizeof(p), CMS "?watch=1&resourceVersion=%llu", (unsigned long long)(ks_rv(t.k) + 2));
    assert_int_equal(tw_start(&t, &w4, p), 200);
    create_cm(&t, "f1", NULL);
    create_cm(&t, "f2", NULL);
    create_cm(&t, "f3", NULL);
    tk_run(&t, 5);
    s = tw_summary(&w4);
    assert_string_equal(s, "ADDED:f3");
    free(s);
    tw_stop(&w4);
    tw_stop(&w1);
    tw_stop(&w2);
    tw_stop(&w3);
    tk_done(&t);
}

static void test_selector_transitions(void **state)
{
    tk t;
    tk_init(&t);
    create_cm(&t, "a", "{\"app\":\"web\"}");
    char p[256];
    snprintf(p, sizeof(p), CMS "?watch=1&resourceVersion=%llu&labelSelector=app%%3Dweb",
             (unsigned long long)ks_rv(t.k));
    tw w;
    assert_int_equal(tw_start(&t, &w, p), 200);
    label_cm(&t, "a", "{\"app\":\"db\"}");              /* stops matching: DELETED */
    label_cm(&t, "a", "{\"app\":\"db\",\"x\":\"1\"}");  /* still not matching: nothing */
    label_cm(&t, "a", "{\"app\":\"web\"}");             /* matches again: ADDED */
    label_cm(&t, "a", "{\"app\":\"web\",\"y\":\"2\"}"); /* MODIFIED */
    tk_run(&t, 5);
    char *s = tw_summary(&w);
    assert_string_equal(s, "DELETED:a ADDED:a MODIFIED:a");
    free(s);
    /* the DELETED of a transition is the previous state stamped with the new RV */
    cJSON *ev = tw_events(&w);
    const cJSON *d = ev->child;
    assert_string_equal(json_get_str(d, "object.metadata.labels.app"), "web");
    const cJSON *a = d->next;
    uint64_t drv = strtoull(json_get_str(d, "object.metadata.resourceVersion"), NULL, 10);
    uint64_t arv = strtoull(json_get_str(a, "object.metadata.resourceVersion"), NULL, 10);
    assert_true(drv < arv);
    cJSON_Delete(ev);
    tw_stop(&w);
    /* the same replayed from history gives the same sequence */
    tw w2;
    assert_int_equal(tw_start(&t, &w2, p), 200);
    tk_run(&t, 2);
    s = tw_summary(&w2);
    assert_string_equal(s, "DELETED:a ADDED:a MODIFIED:a");
    free(s);
    tw_stop(&w2);
    /* field selector on pods */
    tk_expect(&t, "POST", "/api/v1/namespaces/default/pods", NULL, POD_JSON("p", "{}"), 201);
    tres r =
        tk_call(&t, "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3D,status.phase%3DPending", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_len(json_get(r.body, "items")), 1);
    tres_free(&r);
    r = tk_call(&t, "GET", "/api/v1/pods?watch=1&fieldSelector=spec.foo%3Dx", NULL, NULL);
    assert_int_equal(r.status, 400);
    assert_string_equal(jstr(&r, "message"), "field label not supported: spec.foo");
    tres_free(&r);
    tk_done(&t);
}

static void test_bookmarks_and_timeout(void **state)
{
    tk t;
    ks_config c;
    ks_config_defaults(&c);
    c.bookmark_interval_ms = 30;
    c.seed = 1;
    tk_init_cfg(&t, &c);
    tw w;
    assert_int_equal(
        tw_start(&t, &w, CMS "?watch=1&allowWatchBookmarks=true&timeoutSeconds=1&resourceVersion=1"), 200);
    tw nob;
    assert_int_equal(tw_start(&t, &nob, CMS "?watch=1&timeoutSeconds=1&resourceVersion=1"), 200);
    tk_run(&t, 50);
    /* writes elsewhere move the global RV: a bookmark says the watch is caught up */
    tk_expect(&t, "POST", "/api/v1/namespaces/default/secrets", NULL, "{\"metadata\":{\"name\":\"s\"}}", 201);
    tk_run(&t, 100);
    cJSON *ev = tw_events(&w);
    int bookmarks = 0;
    for (const cJSON *e = ev->child; e; e = e->next)
        if (strcmp(json_get_str_or(e, "type", ""), "BOOKMARK") == 0) {
            bookmarks++;
            assert_string_equal(json_get_str(e, "object.kind"), "ConfigMap");
            char want[32];
            snprintf(want, sizeof(want), "%llu", (unsigned long long)ks_rv(t.k));
            assert_string_equal(json_get_str(e, "object.metadata.resourceVersion"), want);
        }
    assert_int_equal(bookmarks, 1); /* none repeated at the same RV */
    cJSON_Delete(ev);
    assert_false(w.ended);
    tk_run(&t, 1000);
    /* timeoutSeconds: a clean end (not an abort) */
    assert_true(w.ended);
    assert_false(w.aborted);
    assert_true(nob.ended);
    char *s = tw_summary(&nob);
    assert_string_equal(s, "ADDED:kube-root-ca.crt");
    free(s);
    tw_stop(&w);
    tw_stop(&nob);
    tk_done(&t);
}

static void test_watch_list(void **state)
{
    tk t;
    tk_init(&t);
    create_cm(&t, "a", NULL);
    tw w;
    assert_int_equal(tw_start(&t, &w,
                              CMS "?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&"
                                  "resourceVersionMatch=NotOlderThan&fieldSelector=metadata.name%3Da"),
                     200);
    create_cm(&t, "b", NULL);
    tk_expect(&t, "PATCH", CMS "/a", "application/merge-patch+json", "{\"data\":{\"k\":\"v\"}}", 200);
    tk_run(&t, 5);
    cJSON *ev = tw_events(&w);
    assert_int_equal(json_len(ev), 3);
    assert_string_equal(json_get_str(cJSON_GetArrayItem(ev, 0), "type"), "ADDED");
    const cJSON *bm = cJSON_GetArrayItem(ev, 1);
    assert_string_equal(json_get_str(bm, "type"), "BOOKMARK");
    const cJSON *ann = json_get(bm, "object.metadata.annotations");
    assert_non_null(json_child(ann, "k8s.io/initial-events-end"));
    assert_string_equal(json_child(ann, "k8s.io/initial-events-end")->valuestring, "true");
    assert_string_equal(json_get_str(cJSON_GetArrayItem(ev, 2), "type"), "MODIFIED");
    cJSON_Delete(ev);
    tw_stop(&w);
    /* validation */
    tres r = tk_call(&t, "GET", CMS "?watch=1&sendInitialEvents=true", NULL, NULL);
    assert_int_equal(r.status, 422);
    assert_string_equal(jstr(&r, "message"),
                        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: "
                        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan");
    assert_string_equal(jstr(&r, "details.kind"), "ListOptions");
    assert_string_equal(jstr(&r, "details.group"), "meta.k8s.io");
    tres_free(&r);
    r = tk_call(&t, "GET", CMS "?watch=1&resourceVersionMatch=NotOlderThan", NULL, NULL);
    assert_int_equal(r.status, 422);
    assert_string_equal(jstr(&r, "message"),
                        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: "
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                        "provided");
    tres_free(&r);
    r = tk_call(&t, "GET", CMS "?sendInitialEvents=true", NULL, NULL);
    assert_int_equal(r.status, 422);
    assert_string_equal(jstr(&r, "message"),
                        "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: "
                        "sendInitialEvents is forbidden for list");
    tres_free(&r);
    r = tk_call(&t, "GET", CMS "?watch=1&resourceVersion=abc", NULL, NULL);
    assert_int_equal(r.status, 422);
    tres_free(&r);
    tk_done(&t);
}

static void test_history_expiry(void **state)
{
    tk t;
    ks_config c;
    ks_config_defaults(&c);
    c.history = 4;
    c.namespace_defaults = 0;
    c.seed = 1;
    tk_init_cfg(&t, &c);
    uint64_t first = create_cm(&t, "a", NULL);
    for (int i = 0; i < 6; i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"data\":{\"i\":\"%d\"}}", i);
        tk_expect(&t, "PATCH", CMS "/a", "application/merge-patch+json", body, 200);
    }
    /* the ring holds 4 events: a watch from the first RV is too old */
    tw w;
    char p[128];
    snprintf(p, sizeof(p), CMS "?watch=1&resourceVersion=%llu", (unsigned long long)first);
    assert_int_equal(tw_start(&t, &w, p), 200);
    tk_run(&t, 5);
    assert_true(w.ended);
    assert_false(w.aborted);
    cJSON *ev = tw_events(&w);
    assert_int_equal(json_len(ev), 1);
    const cJSON *e = ev->child;
    assert_string_equal(json_get_str(e, "type"), "ERROR");
    assert_string_equal(json_get_str(e, "object.kind"), "Status");
    assert_string_equal(json_get_str(e, "object.reason"), "Expired");
    assert_int_equal(json_get_int(e, "object.code", 0), 410);
    char want[96];
    snprintf(want, sizeof(want), "too old resource version: %llu (%llu)", (unsigned long long)first,
             (unsigned long long)(first + 2));
    assert_string_equal(json_get_str(e, "object.message"), want);
    cJSON_Delete(ev);
    tw_stop(&w);
    /* from the last kept window it works, exactly the remaining events */
    snprintf(p, sizeof(p), CMS "?watch=1&resourceVersion=%llu", (unsigned long long)(first + 3));
    assert_int_equal(tw_start(&t, &w, p), 200);
    tk_run(&t, 5);
    char *s = tw_summary(&w);
    assert_string_equal(s, "MODIFIED:a MODIFIED:a MODIFIED:a");
    free(s);
    assert_false(w.ended);
    tw_stop(&w);
    /* the fault: the next watch gets the ERROR event whatever its RV */
    tres r = tk_call(&t, "POST", "/kubesim/faults", NULL, "{\"expireWatches\":1}");
    assert_int_equal(r.status, 200);
    tres_free(&r);
    assert_int_equal(tw_start(&t, &w, CMS "?watch=1"), 200);
    tk_run(&t, 5);
    assert_true(w.ended);
    s = tw_summary(&w);
    assert_string_equal(s, "ERROR:");
    free(s);
    tw_stop(&w);
    assert_int_equal(tw_start(&t, &w, CMS "?watch=1"), 200);
    tk_run(&t, 5);
    assert_false(w.ended);
    tw_stop(&w);
    /* restart: history compacted, every older RV is gone */
    uint64_t now = ks_rv(t.k);
    r = tk_call(&t, "POST", "/kubesim/restart", NULL, "{}");
    assert_int_equal(r.status, 200);
    tres_free(&r);
    snprintf(p, sizeof(p), CMS "?watch=1&resourceVersion=%llu", (unsigned long long)(now - 1));
    assert_int_equal(tw_start(&t, &w, p), 200);
    tk_run(&t, 5);
    s = tw_summary(&w);
    assert_string_equal(s, "ERROR:");
    free(s);
    tw_stop(&w);
    snprintf(p, sizeof(p), CMS "?watch=1&resourceVersion=%llu", (unsigned long long)now);
    assert_int_equal(tw_start(&t, &w, p), 200);
    tk_run(&t, 5);
    assert_false(w.ended);
    tw_stop(&w);
    tk_done(&t);
}

static void test_drop_and_object_watch(void **state)
{
    tk t;
    tk_init(&t);
    create_cm(&t, "a", NULL);
    create_cm(&t, "b", NULL);
    tw w;
    assert_int_equal(tw_start(&t, &w, CMS "/a?watch=1"), 200);
    tk_expect(&t, "PATCH", CMS "/b", "application/merge-patch+json", "{\"data\":{\"k\":\"v\"}}", 200);
    tk_expect(&t, "PATCH", CMS "/a", "application/merge-patch+json", "{\"data\":{\"k\":\"v\"}}", 200);
    tk_run(&t, 5);
    char *s = tw_summary(&w);
    assert_string_equal(s, "ADDED:a MODIFIED:a");
    free(s);
    tres r = tk_call(&t, "GET", CMS "/a?watch=1&fieldSelector=metadata.name%3Db", NULL, NULL);
    assert_int_equal(r.status, 400);
    tres_free(&r);
    r = tk_call(&t, "POST", "/kubesim/drop-watches", NULL, "{}");
    assert_int_equal(json_get_int(r.body, "dropped", 0), 1);
    tres_free(&r);
    tk_run(&t, 5);
    assert_true(w.ended);
    assert_true(w.aborted);
    tw_stop(&w);
    tk_done(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rv_semantics),          cmocka_unit_test(test_selector_transitions),
        cmocka_unit_test(test_bookmarks_and_timeout), cmocka_unit_test(test_watch_list),
        cmocka_unit_test(test_history_expiry),        cmocka_unit_test(test_drop_and_object_watch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
