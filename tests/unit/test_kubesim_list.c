/* kubesim engine: LIST paging, selectors and the resourceVersion table. */
#include "test_kubesim_util.h"

#define CMS "/api/v1/namespaces/default/configmaps"

static void make(tk *t, const char *ns, const char *name, const char *labels)
{
    char body[512], path[256];
    snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"%s\",\"labels\":%s}}", name, labels);
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/configmaps", ns);
    tk_expect(t, "POST", path, NULL, body, 201);
}

static void setup(tk *t)
{
    ks_config c;
    ks_config_defaults(&c);
    c.namespace_defaults = 0;
    c.seed = 7;
    c.too_large_wait_ms = 0;
    tk_init_cfg(t, &c);
    for (int i = 0; i < 10; i++) {
        char name[16], labels[128];
        snprintf(name, sizeof(name), "cm-%02d", i);
        snprintf(labels, sizeof(labels), "{\"tier\":\"%s\",\"idx\":\"%d\"%s}", i % 2 ? "odd" : "even", i,
                 i < 3 ? ",\"low\":\"yes\"" : "");
        make(t, "default", name, labels);
    }
    make(t, "kube-system", "other", "{\"tier\":\"odd\"}");
}

static int count_items(const tres *r)
{
    return json_len(json_get(r->body, "items"));
}

static void test_selectors(void **state)
{
    tk t;
    setup(&t);
    struct {
        const char *q;
        int n;
    } cases[] = {
        {"", 10},
        {"?labelSelector=tier%3Dodd", 5},
        {"?labelSelector=tier%3D%3Dodd", 5},
        {"?labelSelector=tier!%3Dodd", 5},
        {"?labelSelector=tier+in+(odd,even)", 10},
        {"?labelSelector=idx+notin+(1,2,3)", 7},
        {"?labelSelector=low", 3},
        {"?labelSelector=!low", 7},
        {"?labelSelector=low!%3Dyes", 7}, /* != matches objects without the key */
        {"?labelSelector=tier%3Deven,low", 2},
        {"?fieldSelector=metadata.name%3Dcm-03", 1},
        {"?fieldSelector=metadata.name!%3Dcm-03", 9},
        {"?fieldSelector=metadata.namespace%3Ddefault", 10},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char path[256];
        snprintf(path, sizeof(path), CMS "%s", cases[i].q);
        tres r = tk_call(&t, "GET", path, NULL, NULL);
        assert_int_equal(r.status, 200);
        if (count_items(&r) != cases[i].n)
            fprintf(stderr, "%s: %d items\n", cases[i].q, count_items(&r));
        assert_int_equal(count_items(&r), cases[i].n);
        assert_string_equal(jstr(&r, "kind"), "ConfigMapList");
        /* built-in list items carry no kind/apiVersion */
        if (cases[i].n)
            assert_null(json_child(json_get(r.body, "items")->child, "kind"));
        tres_free(&r);
    }
    /* all namespaces */
    tres r = tk_call(&t, "GET", "/api/v1/configmaps?labelSelector=tier%3Dodd", NULL, NULL);
    assert_int_equal(count_items(&r), 6);
    tres_free(&r);
    /* bad selectors */
    r = tk_call(&t, "GET", CMS "?labelSelector=a+in+(", NULL, NULL);
    assert_int_equal(r.status, 400);
    assert_string_equal(jstr(&r, "reason"), "BadRequest");
    tres_free(&r);
    r = tk_call(&t, "GET", CMS "?fieldSelector=data.a%3D1", NULL, NULL);
    assert_int_equal(r.status, 400);
    assert_string_equal(
        jstr(&r, "message"),
        "\"data.a\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"");
    tres_free(&r);
    /* empty collection in a missing namespace is still a list */
    r = tk_call(&t, "GET", "/api/v1/namespaces/none/configmaps", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_true(cJSON_IsArray(json_get(r.body, "items")));
    assert_int_equal(count_items(&r), 0);
    tres_free(&r);
    tk_done(&t);
}

static void test_paging(void **state)
{
    tk t;
    setup(&t);
    char cont[1024] = "";
    char list_rv[32] = "";
    int total = 0, pages = 0;
    do {
        char path[1400];
        snprintf(path, sizeof(path), CMS "?limit=4%s%s", cont[0] ? "&continue=" : "", cont);
        tres r = tk_call(&t, "GET", path, NULL, NULL);
        assert_int_equal(r.status, 200);
        int n = count_items(&r);
        total += n;
        pages++;
        const char *rv = jstr(&r, "metadata.resourceVersion");
        if (!list_rv[0])
            snprintf(list_rv, sizeof(list_rv), "%s", rv);
        assert_string_equal(rv, list_rv); /* one snapshot for all pages */
        const char *c = jstr(&r, "metadata.continue");
        const cJSON *rem = json_get(r.body, "metadata.remainingItemCount");
        if (pages == 1) {
            assert_non_null(c);
            assert_int_equal((int)rem->valuedouble, 6);
            /* a change after the first page does not show in later pages */
            tk_expect(&t, "DELETE", CMS "/cm-09", NULL, NULL, 200);
            make(&t, "default", "cm-99", "{}");
        }
        if (c) {
            snprintf(cont, sizeof(cont), "%s", c);
        } else {
            cont[0] = '\0';
            assert_null(rem);
        }
        /* the token must survive the query string: percent-encode '+', '/' and '=' */
        if (cont[0]) {
            char enc[1024];
            size_t o = 0;
            for (const char *p = cont; *p && o + 4 < sizeof(enc); p++) {
                if (*p == '+' || *p == '/' || *p == '=')
                    o += (size_t)snprintf(enc + o, sizeof(enc) - o, "%%%02X", (unsigned char)*p);
                else
                    enc[o++] = *p;
            }
            enc[o] = '\0';
            snprintf(cont, sizeof(cont), "%s", enc);
        }
        tres_free(&r);
    } while (cont[0] && pages < 10);
    assert_int_equal(pages, 3);
    assert_int_equal(total, 10); /* cm-09 still listed, cm-99 not */
    /* with a selector: no remainingItemCount, pages may be short */
    tres r = tk_call(&t, "GET", CMS "?limit=2&labelSelector=low", NULL, NULL);
    assert_int_equal(count_items(&r), 2);
    assert_non_null(jstr(&r, "metadata.continue"));
    assert_null(json_get(r.body, "metadata.remainingItemCount"));
    tres_free(&r);
    tk_done(&t);
}

static void test_rv_table(void **state)
{
    tk t;
    setup(&t);
    uint64_t now = ks_rv(t.k);
    char path[1024];
    /* RVM without RV */
    tres r = tk_call(&t, "GET", CMS "?resourceVersionMatch=Exact", NULL, NULL);
    assert_int_equal(r.status, 422);
    assert_string_equal(jstr(&r, "message"),
                        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: "
                        "resourceVersionMatch is forbidden unless resourceVersion is provided");
    tres_free(&r);
    r = tk_call(&t, "GET", CMS "?resourceVersionMatch=Bogus", NULL, NULL);
    assert_int_equal(r.status, 422);
    assert_string_equal(
        jstr(&r, "message"),
        "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch "
        "is forbidden unless resourceVersion is provided, resourceVersionMatch: Unsupported value: "
        "\"Bogus\": supported values: \"Exact\", \"NotOlderThan\", \"\"]");
    tres_free(&r);
    tk_expect(&t, "GET", CMS "?resourceVersion=0&resourceVersionMatch=Exact", NULL, NULL, 422);
    tk_expect(&t, "GET", CMS "?resourceVersion=0&resourceVersionMatch=NotOlderThan", NULL, NULL, 200);
    tk_expect(&t, "GET", CMS "?resourceVersion=abc", NULL, NULL, 400);
    /* continue with an RV */
    r = tk_call(&t, "GET", CMS "?limit=2", NULL, NULL);
    char tok[512];
    size_t o = 0;
    for (const char *p = jstr(&r, "metadata.continue"); *p && o + 4 < sizeof(tok); p++) {
        if (*p == '+' || *p == '/' || *p == '=')
            o += (size_t)snprintf(tok + o, sizeof(tok) - o, "%%%02X", (unsigned char)*p);
        else
            tok[o++] = *p;
    }
    tok[o] = '\0';
    tres_free(&r);
    snprintf(path, sizeof(path), CMS "?limit=2&resourceVersion=5&continue=%s", tok);
    r = tk_call(&t, "GET", path, NULL, NULL);
    assert_int_equal(r.status, 400);
    assert_string_equal(jstr(&r, "message"),
                        "specifying resource version is not allowed when using continue");
    tres_free(&r);
    /* Exact at an older RV: the state then */
    uint64_t before = now;
    tk_expect(&t, "DELETE", CMS "/cm-00", NULL, NULL, 200);
    make(&t, "default", "cm-new", "{}");
    tk_expect(&t, "PATCH", CMS "/cm-01", "application/merge-patch+json", "{\"data\":{\"x\":\"1\"}}", 200);
    snprintf(path, sizeof(path), CMS "?resourceVersion=%llu&resourceVersionMatch=Exact",
             (unsigned long long)before);
    r = tk_call(&t, "GET", path, NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_int_equal(count_items(&r), 10);
    char want[32];
    snprintf(want, sizeof(want), "%llu", (unsigned long long)before);
    assert_string_equal(jstr(&r, "metadata.resourceVersion"), want);
    assert_string_equal(json_get_str(json_get(r.body, "items")->child, "metadata.name"), "cm-00");
    assert_null(json_get(json_get(r.body, "items")->child->next, "data"));
    tres_free(&r);
    /* limit without RVM and an RV means Exact too */
    snprintf(path, sizeof(path), CMS "?resourceVersion=%llu&limit=100", (unsigned long long)before);
    r = tk_call(&t, "GET", path, NULL, NULL);
    assert_string_equal(jstr(&r, "metadata.resourceVersion"), want);
    assert_int_equal(count_items(&r), 10);
    tres_free(&r);
    /* NotOlderThan: the current state */
    snprintf(path, sizeof(path), CMS "?resourceVersion=%llu", (unsigned long long)before);
    r = tk_call(&t, "GET", path, NULL, NULL);
    snprintf(want, sizeof(want), "%llu", (unsigned long long)ks_rv(t.k));
    assert_string_equal(jstr(&r, "metadata.resourceVersion"), want);
    tres_free(&r);
    /* future RV: 504 after a wait */
    snprintf(path, sizeof(path), CMS "?resourceVersion=%llu", (unsigned long long)(ks_rv(t.k) + 100));
    r = tk_call(&t, "GET", path, NULL, NULL);
    assert_int_equal(r.status, 504);
    assert_string_equal(jstr(&r, "reason"), "Timeout");
    assert_non_null(strstr(jstr(&r, "message"), "Too large resource version"));
    assert_string_equal(json_get_str(json_get(r.body, "details.causes")->child, "reason"),
                        "ResourceVersionTooLarge");
    assert_non_null(strstr(r.headers, "Retry-After: 1"));
    tres_free(&r);
    /* after a restart the history is gone: Exact at an old RV is 410, tokens expire */
    r = tk_call(&t, "POST", "/kubesim/restart", NULL, "{}");
    tres_free(&r);
    snprintf(path, sizeof(path), CMS "?resourceVersion=%llu&resourceVersionMatch=Exact",
             (unsigned long long)before);
    r = tk_call(&t, "GET", path, NULL, NULL);
    assert_int_equal(r.status, 410);
    assert_string_equal(jstr(&r, "reason"), "Expired");
    assert_string_equal(jstr(&r, "message"), "The resourceVersion for the provided list is too old.");
    tres_free(&r);
    snprintf(path, sizeof(path), CMS "?limit=2&continue=%s", tok);
    r = tk_call(&t, "GET", path, NULL, NULL);
    assert_int_equal(r.status, 410);
    assert_string_equal(jstr(&r, "reason"), "Expired");
    assert_non_null(strstr(jstr(&r, "message"),
                           "The provided continue parameter is too old to display a consistent "
                           "list result. You can start a new list without the continue "
                           "parameter, or use the continue token in this response"));
    const char *newtok = jstr(&r, "metadata.continue");
    assert_non_null(newtok);
    char enc[512];
    o = 0;
    for (const char *p = newtok; *p && o + 4 < sizeof(enc); p++) {
        if (*p == '+' || *p == '/' || *p == '=')
            o += (size_t)snprintf(enc + o, sizeof(enc) - o, "%%%02X", (unsigned char)*p);
        else
            enc[o++] = *p;
    }
    enc[o] = '\0';
    /* the new token continues (inconsistently) at the latest RV */
    snprintf(path, sizeof(path), CMS "?limit=100&continue=%s", enc);
    tres r2 = tk_call(&t, "GET", path, NULL, NULL);
    assert_int_equal(r2.status, 200);
    assert_int_equal(count_items(&r2), 9); /* after cm-01: cm-02 .. cm-09 and cm-new */
    tres_free(&r2);
    tres_free(&r);
    /* garbage tokens */
    r = tk_call(&t, "GET", CMS "?limit=2&continue=notbase64!!", NULL, NULL);
    assert_int_equal(r.status, 400);
    tres_free(&r);
    tk_done(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_selectors),
        cmocka_unit_test(test_paging),
        cmocka_unit_test(test_rv_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
