/* kubesim engine: create/get/update rules, resourceVersions, request errors. */
#include "test_kubesim_util.h"
#include "unit_assert.h"

#define CM_PATH "/api/v1/namespaces/default/configmaps"

static void test_create_get(void **state)
{
    tk t;
    tk_init(&t);
    uint64_t rv0 = ks_rv(t.k);
    tres r = tk_call(&t, "POST", CM_PATH, NULL, CM_JSON("a"));
    assert_int_equal(r.status, 201);
    assert_string_equal(jstr(&r, "kind"), "ConfigMap");
    assert_string_equal(jstr(&r, "apiVersion"), "v1");
    assert_string_equal(jstr(&r, "metadata.namespace"), "default");
    assert_non_null(jstr(&r, "metadata.uid"));
    assert_int_equal(strlen(jstr(&r, "metadata.uid")), 36);
    assert_non_null(jstr(&r, "metadata.creationTimestamp"));
    char want[32];
    snprintf(want, sizeof(want), "%llu", (unsigned long long)(rv0 + 1));
    assert_string_equal(jstr(&r, "metadata.resourceVersion"), want);
    /* kind and apiVersion lead the serialised object */
    assert_str_prefix(r.raw, "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\"");
    tres g = tk_call(&t, "GET", CM_PATH "/a", NULL, NULL);
    assert_int_equal(g.status, 200);
    assert_string_equal(g.raw, r.raw);
    tres_free(&g);
    tres_free(&r);
    /* a second object gets the next global RV */
    r = tk_call(&t, "POST", "/api/v1/namespaces/kube-system/configmaps", NULL, CM_JSON("b"));
    snprintf(want, sizeof(want), "%llu", (unsigned long long)(rv0 + 2));
    assert_string_equal(jstr(&r, "metadata.resourceVersion"), want);
    tres_free(&r);
    /* not found: Status with plural kind */
    g = tk_call(&t, "GET", CM_PATH "/nope", NULL, NULL);
    assert_int_equal(g.status, 404);
    assert_string_equal(jstr(&g, "reason"), "NotFound");
    assert_string_equal(jstr(&g, "message"), "configmaps \"nope\" not found");
    assert_string_equal(jstr(&g, "details.kind"), "configmaps");
    assert_string_equal(jstr(&g, "details.name"), "nope");
    assert_int_equal(json_get_int(g.body, "code", 0), 404);
    tres_free(&g);
    g = tk_call(&t, "GET", "/apis/apps/v1/namespaces/default/deployments/nope", NULL, NULL);
    assert_string_equal(jstr(&g, "message"), "deployments.apps \"nope\" not found");
    assert_string_equal(jstr(&g, "details.group"), "apps");
    tres_free(&g);
    tk_done(&t);
}

static void test_already_exists_and_generate_name(void **state)
{
    tk t;
    tk_init(&t);
    tk_expect(&t, "POST", CM_PATH, NULL, CM_JSON("a"), 201);
    tres r = tk_call(&t, "POST", CM_PATH, NULL, CM_JSON("a"));
    assert_int_equal(r.status, 409);
    assert_string_equal(jstr(&r, "reason"), "AlreadyExists");
    assert_string_equal(jstr(&r, "message"), "configmaps \"a\" already exists");
    assert_string_equal(jstr(&r, "details.kind"), "configmaps");
    tres_free(&r);
    for (int i = 0; i < 20; i++) {
        r = tk_call(
            &t, "POST", CM_PATH, NULL,
            "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"generateName\":\"web-\"}}");
        assert_int_equal(r.status, 201);
        const char *name = jstr(&r, "metadata.name");
        assert_int_equal(strlen(name), 9);
        assert_str_prefix(name, "web-");
        for (int j = 4; j < 9; j++)
            assert_non_null(strchr("bcdfghjklmnpqrstvwxz2456789", name[j]));
        assert_string_equal(jstr(&r, "metadata.generateName"), "web-");
        tres_free(&r);
    }
    /* a long prefix is cut to 58 characters */
    r = tk_call(&t, "POST", CM_PATH, NULL,
                "{\"metadata\":{\"generateName\":"
                "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}}");
    assert_int_equal(r.status, 201);
    assert_int_equal(strlen(jstr(&r, "metadata.name")), 63);
    tres_free(&r);
    /* neither name nor generateName */
    r = tk_call(&t, "POST", CM_PATH, NULL, "{\"metadata\":{}}");
    assert_int_equal(r.status, 422);
    assert_string_equal(jstr(&r, "reason"), "Invalid");
    assert_string_equal(
        jstr(&r, "message"),
        "ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is required");
    assert_string_equal(jstr(&r, "details.kind"), "ConfigMap");
    tres_free(&r);
    tk_done(&t);
}

static void test_update_conflict_and_noop(void **state)
{
    tk t;
    tk_init(&t);
    tres c = tk_call(&t, "POST", CM_PATH, NULL, CM_JSON("a"));
    char rv[32];
    snprintf(rv, sizeof(rv), "%s", jstr(&c, "metadata.resourceVersion"));
    tres_free(&c);
    tw w;
    char wpath[128];
    snprintf(wpath, sizeof(wpath), CM_PATH "?watch=1&resourceVersion=%llu",
             (unsigned long long)(atoll(rv) - 1));
    assert_int_equal(tw_start(&t, &w, wpath), 200);
    /* identical PUT: same RV, no event */
    char body[512];
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\",\"resourceVersion\":"
             "\"%s\"},"
             "\"data\":{\"a\":\"1\"}}",
             rv);
    uint64_t before = ks_rv(t.k);
    tres u = tk_call(&t, "PUT", CM_PATH "/a", NULL, body);
    assert_int_equal(u.status, 200);
    assert_string_equal(jstr(&u, "metadata.resourceVersion"), rv);
    assert_int_equal(ks_rv(t.k), before);
    tres_free(&u);
    /* a real change */
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\",\"resourceVersion\":"
             "\"%s\"},"
             "\"data\":{\"a\":\"2\"}}",
             rv);
    u = tk_call(&t, "PUT", CM_PATH "/a", NULL, body);
    assert_int_equal(u.status, 200);
    assert_string_not_equal(jstr(&u, "metadata.resourceVersion"), rv);
    tres_free(&u);
    /* the same body again is now stale */
    u = tk_call(&t, "PUT", CM_PATH "/a", NULL, body);
    assert_int_equal(u.status, 409);
    assert_string_equal(jstr(&u, "reason"), "Conflict");
    assert_string_equal(
        jstr(&u, "message"),
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply "
        "your changes to the latest version and try again");
    assert_string_equal(jstr(&u, "details.kind"), "configmaps");
    tres_free(&u);
    /* unconditional update of a ConfigMap is allowed */
    tk_expect(
        &t, "PUT", CM_PATH "/a", NULL,
        "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"},\"data\":{\"a\":\"3\"}}",
        200);
    tk_run(&t, 5);
    char *s = tw_summary(&w);
    assert_string_equal(s, "ADDED:a MODIFIED:a MODIFIED:a");
    free(s);
    tw_stop(&w);
    tk_done(&t);
}

static void test_lease_requires_rv(void **state)
{
    tk t;
    tk_init(&t);
    const char *lease =
        "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"l\"},"
        "\"spec\":{\"holderIdentity\":\"a\"}}";
    /* create on update */
    tk_expect(&t, "PUT", "/apis/coordination.k8s.io/v1/namespaces/default/leases/l", NULL, lease, 201);
    tres r = tk_call(&t, "PUT", "/apis/coordination.k8s.io/v1/namespaces/default/leases/l", NULL, lease);
    assert_int_equal(r.status, 422);
    assert_string_equal(jstr(&r, "message"),
                        "Lease.coordination.k8s.io \"l\" is invalid: metadata.resourceVersion: "
                        "Invalid value: 0x0: must be specified for an update");
    const cJSON *cause = json_get(r.body, "details.causes")->child;
    assert_string_equal(json_get_str(cause, "reason"), "FieldValueInvalid");
    assert_string_equal(json_get_str(cause, "field"), "metadata.resourceVersion");
    tres_free(&r);
    tk_done(&t);
}

static void test_request_errors(void **state)
{
    tk t;
    tk_init(&t);
    /* RV in a create body */
    tres r = tk_call(&t, "POST", CM_PATH, NULL, "{\"metadata\":{\"name\":\"x\",\"resourceVersion\":\"5\"}}");
    assert_int_equal(r.status, 500);
    assert_string_equal(
        jstr(&r, "message"),
        "Internal error occurred: resourceVersion should not be set on objects to be created");
    tres_free(&r);
    /* namespace mismatch */
    r = tk_call(&t, "POST", CM_PATH, NULL, "{\"metadata\":{\"name\":\"x\",\"namespace\":\"other\"}}");
    assert_int_equal(r.status, 400);
    assert_string_equal(jstr(&r, "reason"), "BadRequest");
    assert_string_equal(
        jstr(&r, "message"),
        "the namespace of the object (other) does not match the namespace on the request (default)");
    tres_free(&r);
    tk_expect(&t, "POST", CM_PATH, NULL, CM_JSON("x"), 201);
    r = tk_call(&t, "PUT", CM_PATH "/x", NULL, CM_JSON("y"));
    assert_int_equal(r.status, 400);
    assert_string_equal(jstr(&r, "message"),
                        "the name of the object (y) does not match the name on the URL (x)");
    tres_free(&r);
    /* missing namespace */
    r = tk_call(&t, "POST", "/api/v1/namespaces/nowhere/configmaps", NULL, CM_JSON("x"));
    assert_int_equal(r.status, 404);
    assert_string_equal(jstr(&r, "message"), "namespaces \"nowhere\" not found");
    assert_string_equal(jstr(&r, "details.kind"), "namespaces");
    tres_free(&r);
    /* malformed JSON */
    r = tk_call(&t, "POST", CM_PATH, NULL, "{\"metadata\":");
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(jstr(&r, "message"), "json parse error"));
    tres_free(&r);
    /* unknown content type */
    r = tk_call(&t, "POST", CM_PATH, "text/csv", CM_JSON("z"));
    assert_int_equal(r.status, 415);
    assert_string_equal(jstr(&r, "reason"), "UnsupportedMediaType");
    tres_free(&r);
    /* YAML is accepted */
    tk_expect(&t, "POST", CM_PATH, "application/yaml",
              "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yml\n", 201);
    /* too large */
    size_t big = 3 * 1024 * 1024 + 10;
    char *b = xmalloc(big + 1);
    memset(b, ' ', big);
    b[big] = '\0';
    b[0] = '{';
    b[big - 1] = '}';
    r = tk_call(&t, "POST", CM_PATH, NULL, b);
    assert_int_equal(r.status, 413);
    assert_string_equal(jstr(&r, "reason"), "RequestEntityTooLarge");
    tres_free(&r);
    free(b);
    /* wrong kind for the endpoint */
    r = tk_call(&t, "POST", CM_PATH, NULL,
                "{\"kind\":\"Secret\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"q\"}}");
    assert_int_equal(r.status, 400);
    tres_free(&r);
    /* invalid name and labels */
    r = tk_call(&t, "POST", CM_PATH, NULL,
                "{\"metadata\":{\"name\":\"Bad_Name\",\"labels\":{\"a b\":\"c\"}}}");
    assert_int_equal(r.status, 422);
    assert_non_null(
        strstr(jstr(&r, "message"), "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123"));
    assert_non_null(strstr(jstr(&r, "message"), "metadata.labels: Invalid value: \"a b\""));
    tres_free(&r);
    /* unknown paths are plain-text 404s */
    r = tk_call(&t, "GET", "/api/v1/namespaces/default/widgets", NULL, NULL);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.raw, "404 page not found\n");
    tres_free(&r);
    r = tk_call(&t, "GET", "/apis/example.com/v1/widgets", NULL, NULL);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.raw, "404 page not found\n");
    tres_free(&r);
    /* namespaced object without namespace: no such route */
    tk_expect(&t, "GET", "/api/v1/configmaps/x", NULL, NULL, 404);
    /* methods */
    tk_expect(&t, "POST", "/api/v1/configmaps", NULL, CM_JSON("w"), 405);
    tk_expect(&t, "POST", CM_PATH "/x", NULL, CM_JSON("x"), 405);
    tk_done(&t);
}

static void test_pod_defaults_and_immutability(void **state)
{
    tk t;
    tk_init(&t);
    tres r = tk_call(&t, "POST", "/api/v1/namespaces/default/pods", NULL, POD_JSON("p", "{\"app\":\"x\"}"));
    assert_int_equal(r.status, 201);
    assert_string_equal(jstr(&r, "spec.restartPolicy"), "Always");
    assert_string_equal(jstr(&r, "spec.serviceAccountName"), "default");
    assert_string_equal(jstr(&r, "status.phase"), "Pending");
    assert_string_equal(jstr(&r, "status.qosClass"), "BestEffort");
    assert_int_equal(json_get_int(r.body, "metadata.generation", 0), 1);
    tres_free(&r);
    /* containers are required */
    r = tk_call(&t, "POST", "/api/v1/namespaces/default/pods", NULL,
                "{\"metadata\":{\"name\":\"q\"},\"spec\":{}}");
    assert_int_equal(r.status, 422);
    assert_string_equal(jstr(&r, "message"), "Pod \"q\" is invalid: spec.containers: Required value");
    tres_free(&r);
    /* spec changes other than images are forbidden */
    r = tk_call(&t, "PATCH", "/api/v1/namespaces/default/pods/p", "application/merge-patch+json",
                "{\"spec\":{\"restartPolicy\":\"Never\"}}");
    assert_int_equal(r.status, 422);
    assert_non_null(
        strstr(jstr(&r, "message"), "spec: Forbidden: pod updates may not change fields other than"));
    tres_free(&r);
    r = tk_call(&t, "PATCH", "/api/v1/namespaces/default/pods/p", "application/strategic-merge-patch+json",
                "{\"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"busybox:1.37\"}]}}");
    assert_int_equal(r.status, 200);
    assert_string_equal(json_get_str(json_get(r.body, "spec.containers")->child, "image"), "busybox:1.37");
    tres_free(&r);
    tk_done(&t);
}

static void test_discovery(void **state)
{
    tk t;
    tk_init(&t);
    tres r = tk_call(&t, "GET", "/api", NULL, NULL);
    assert_string_equal(jstr(&r, "kind"), "APIVersions");
    tres_free(&r);
    r = tk_call(&t, "GET", "/apis", NULL, NULL);
    assert_string_equal(jstr(&r, "kind"), "APIGroupList");
    int apps = 0;
    for (const cJSON *g = json_get(r.body, "groups")->child; g; g = g->next)
        if (strcmp(json_get_str_or(g, "name", ""), "apps") == 0)
            apps = strcmp(json_get_str_or(g, "preferredVersion.groupVersion", ""), "apps/v1") == 0;
    assert_true(apps);
    tres_free(&r);
    r = tk_call(&t, "GET", "/apis/apps/v1", NULL, NULL);
    assert_string_equal(jstr(&r, "kind"), "APIResourceList");
    assert_string_equal(jstr(&r, "groupVersion"), "apps/v1");
    assert_non_null(strstr(r.raw, "\"name\":\"deployments/scale\""));
    assert_non_null(strstr(r.raw, "\"shortNames\":[\"deploy\"]"));
    tres_free(&r);
    r = tk_call(&t, "GET", "/version", NULL, NULL);
    assert_string_equal(jstr(&r, "gitVersion"), "v1.31.0");
    tres_free(&r);
    r = tk_call(&t, "GET", "/healthz", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.raw, "ok");
    tres_free(&r);
    /* aggregated discovery with a JSON fallback gets the legacy document */
    ks_req q;
    memset(&q, 0, sizeof(q));
    q.method = "GET";
    q.path = "/apis";
    q.accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    ks_resp rs;
    ks_resp_init(&rs);
    ks_handle(t.k, &q, &rs);
    assert_int_equal(rs.status, 200);
    assert_string_equal(rs.content_type, "application/json");
    ks_resp_free(&rs);
    q.accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    ks_resp_init(&rs);
    ks_handle(t.k, &q, &rs);
    assert_int_equal(rs.status, 406);
    ks_resp_free(&rs);
    tk_done(&t);
}

static void test_misc_types(void **state)
{
    tk t;
    ks_config c;
    ks_config_defaults(&c);
    c.nodes = 1;
    const char *taints[] = {"dedicated=slurm:NoSchedule", "spot:PreferNoSchedule"};
    const char *labels[] = {"pool=gpu"};
    c.node_taints = taints;
    c.n_node_taints = 2;
    c.node_labels = labels;
    c.n_node_labels = 1;
    c.pod_start_delay_ms = 1000;
    c.seed = 9;
    tk_init_cfg(&t, &c);
    /* --node-taint / --node-label */
    tres r = tk_call(&t, "GET", "/api/v1/nodes/node-00001", NULL, NULL);
    const cJSON *taint = json_get(r.body, "spec.taints")->child;
    assert_string_equal(json_get_str(taint, "key"), "dedicated");
    assert_string_equal(json_get_str(taint, "value"), "slurm");
    assert_string_equal(json_get_str(taint, "effect"), "NoSchedule");
    assert_string_equal(json_get_str(taint->next, "key"), "spot");
    assert_null(json_child(taint->next, "value"));
    assert_string_equal(json_child(json_get(r.body, "metadata.labels"), "pool")->valuestring, "gpu");
    tres_free(&r);
    /* a Node created through the API gets a status from its simulated kubelet */
    tk_expect(&t, "POST", "/api/v1/nodes", NULL, "{\"metadata\":{\"name\":\"extra\"}}", 201);
    tk_run(&t, 5);
    r = tk_call(&t, "GET", "/api/v1/nodes/extra", NULL, NULL);
    assert_string_equal(json_get_str(json_get(r.body, "status.conditions")->child->next->next->next, "type"),
                        "Ready");
    tres_free(&r);
    /* pods/binding */
    tk_expect(
        &t, "POST", "/api/v1/namespaces/default/pods", NULL,
        "{\"metadata\":{\"name\":\"b\"},\"spec\":{\"schedulerName\":\"none\",\"tolerations\":[{\"operator\":"
        "\"Exists\"}],\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}",
        201);
    tres b = tk_call(
        &t, "POST", "/api/v1/namespaces/default/pods/b/binding", NULL,
        "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":\"b\"},\"target\":{\"kind\":"
        "\"Node\",\"name\":\"extra\"}}");
    assert_int_equal(b.status, 201); /* another schedulerName: the default scheduler leaves it alone */
    tres_free(&b);
    b = tk_call(&t, "POST", "/api/v1/namespaces/default/pods/b/binding", NULL,
                "{\"target\":{\"kind\":\"Node\",\"name\":\"node-00001\"}}");
    assert_int_equal(b.status, 409);
    tres_free(&b);
    tk_run(&t, 5);
    r = tk_call(&t, "GET", "/api/v1/namespaces/default/pods/b", NULL, NULL);
    assert_string_equal(jstr(&r, "spec.nodeName"), "extra");
    tres_free(&r);
    /* pods/status keeps the spec */
    r = tk_call(&t, "PATCH", "/api/v1/namespaces/default/pods/b/status", "application/merge-patch+json",
                "{\"spec\":{\"activeDeadlineSeconds\":5},\"metadata\":{\"labels\":{\"x\":\"y\"}},\"status\":{"
                "\"message\":\"hi\"}}");
    assert_int_equal(r.status, 200);
    assert_null(json_get(r.body, "spec.activeDeadlineSeconds"));
    assert_string_equal(jstr(&r, "status.message"), "hi");
    assert_string_equal(json_child(json_get(r.body, "metadata.labels"), "x")->valuestring, "y");
    tres_free(&r);
    /* events.k8s.io validation */
    r = tk_call(&t, "POST", "/apis/events.k8s.io/v1/namespaces/default/events", NULL,
                "{\"metadata\":{\"name\":\"e1\"},\"type\":\"Odd\",\"reason\":\"R\"}");
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(jstr(&r, "message"), "eventTime: Required value"));
    assert_non_null(strstr(jstr(&r, "message"), "reportingController: Required value"));
    tres_free(&r);
    tk_expect(
        &t, "POST", "/apis/events.k8s.io/v1/namespaces/default/events", NULL,
        "{\"metadata\":{\"name\":\"e2\"},\"eventTime\":\"2024-05-01T10:00:00.123456Z\",\"type\":\"Normal\","
        "\"reportingController\":\"example.com/op\",\"reportingInstance\":\"op-1\",\"action\":\"Sync\","
        "\"reason\":\"Synced\",\"note\":\"ok\",\"regarding\":{\"kind\":\"Pod\",\"name\":\"b\"}}",
        201);
    /* dry run: nothing stored, no RV change */
    uint64_t rv = ks_rv(t.k);
    r = tk_call(&t, "POST", "/api/v1/namespaces/default/configmaps?dryRun=All", NULL, CM_JSON("dry"));
    assert_int_equal(r.status, 201);
    assert_non_null(jstr(&r, "metadata.uid"));
    tres_free(&r);
    assert_int_equal(ks_rv(t.k), rv);
    tk_expect(&t, "GET", "/api/v1/namespaces/default/configmaps/dry", NULL, NULL, 404);
    /* services get a cluster IP; secrets fold stringData into data */
    r = tk_call(&t, "POST", "/api/v1/namespaces/default/services", NULL,
                "{\"metadata\":{\"name\":\"svc\"},\"spec\":{\"ports\":[{\"port\":80}]}}");
    assert_int_equal(r.status, 201);
    assert_str_prefix(jstr(&r, "spec.clusterIP"), "10.96.");
    assert_int_equal(json_get_int(json_get(r.body, "spec.ports")->child, "targetPort", 0), 80);
    tres_free(&r);
    r = tk_call(&t, "POST", "/api/v1/namespaces/default/secrets", NULL,
                "{\"metadata\":{\"name\":\"s\"},\"stringData\":{\"k\":\"v\"}}");
    assert_string_equal(jstr(&r, "data.k"), "dg==");
    assert_string_equal(jstr(&r, "type"), "Opaque");
    assert_null(json_get(r.body, "stringData"));
    tres_free(&r);
    tk_done(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_get),
        cmocka_unit_test(test_already_exists_and_generate_name),
        cmocka_unit_test(test_update_conflict_and_noop),
        cmocka_unit_test(test_lease_requires_rv),
        cmocka_unit_test(test_request_errors),
        cmocka_unit_test(test_pod_defaults_and_immutability),
        cmocka_unit_test(test_discovery),
        cmocka_unit_test(test_misc_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
