/* kubesim engine: CustomResourceDefinitions and custom resources. */
#include "test_kubesim_util.h"
#include "unit_assert.h"

#define CRDS "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
#define WS "/apis/example.com/v1/namespaces/default/widgets"

static const char *WIDGET_CRD = "apiVersion: apiextensions.k8s.io/v1\n"
                                "kind: CustomResourceDefinition\n"
                                "metadata:\n"
                                "  name: widgets.example.com\n"
                                "spec:\n"
                                "  group: example.com\n"
                                "  scope: Namespaced\n"
                                "  names:\n"
                                "    plural: widgets\n"
                                "    singular: widget\n"
                                "    kind: Widget\n"
                                "    shortNames: [wd, wdg]\n"
                                "    categories: [all]\n"
                                "  versions:\n"
                                "  - name: v1alpha1\n"
                                "    served: true\n"
                                "    storage: false\n"
                                "    schema:\n"
                                "      openAPIV3Schema:\n"
                                "        type: object\n"
                                "        x-kubernetes-preserve-unknown-fields: true\n"
                                "  - name: v1\n"
                                "    served: true\n"
                                "    storage: true\n"
                                "    subresources:\n"
                                "      status: {}\n"
                                "      scale:\n"
                                "        specReplicasPath: .spec.replicas\n"
                                "        statusReplicasPath: .status.replicas\n"
                                "        labelSelectorPath: .status.selector\n"
                                "    schema:\n"
                                "      openAPIV3Schema:\n"
                                "        type: object\n"
                                "        properties:\n"
                                "          spec:\n"
                                "            type: object\n"
                                "            properties:\n"
                                "              replicas:\n"
                                "                type: integer\n"
                                "                default: 1\n"
                                "                minimum: 0\n"
                                "              mode:\n"
                                "                type: string\n"
                                "                enum: [fast, slow]\n"
                                "                default: fast\n"
                                "              template:\n"
                                "                type: object\n"
                                "                properties:\n"
                                "                  image:\n"
                                "                    type: string\n"
                                "                    default: busybox\n"
                                "                  pull:\n"
                                "                    type: string\n"
                                "                    default: IfNotPresent\n"
                                "              items:\n"
                                "                type: array\n"
                                "                items:\n"
                                "                  type: object\n"
                                "                  properties:\n"
                                "                    name: {type: string}\n"
                                "                    weight: {type: integer, default: 5}\n"
                                "              extra:\n"
                                "                type: object\n"
                                "                x-kubernetes-preserve-unknown-fields: true\n"
                                "              limits:\n"
                                "                type: object\n"
                                "                additionalProperties:\n"
                                "                  type: string\n"
                                "            required: [mode]\n"
                                "          status:\n"
                                "            type: object\n"
                                "            properties:\n"
                                "              replicas: {type: integer}\n"
                                "              selector: {type: string}\n"
                                "              phase: {type: string}\n";

static void install(tk *t)
{
    tres r = tk_call(t, "POST", CRDS, "application/yaml", WIDGET_CRD);
    if (r.status != 201)
        fprintf(stderr, "%s\n", r.raw);
    assert_int_equal(r.status, 201);
    const cJSON *conds = json_get(r.body, "status.conditions");
    int established = 0;
    for (const cJSON *c = conds ? conds->child : NULL; c; c = c->next)
        if (strcmp(json_get_str_or(c, "type", ""), "Established") == 0)
            established = strcmp(json_get_str_or(c, "status", ""), "True") == 0;
    assert_true(established);
    assert_string_equal(jstr(&r, "status.acceptedNames.listKind"), "WidgetList");
    tres_free(&r);
}

static void test_crd_serving_and_discovery(void **state)
{
    tk t;
    tk_init(&t);
    tk_expect(&t, "GET", WS, NULL, NULL, 404);
    install(&t);
    tres r = tk_call(&t, "GET", "/apis/example.com", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(jstr(&r, "preferredVersion.version"), "v1");
    tres_free(&r);
    r = tk_call(&t, "GET", "/apis/example.com/v1", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.raw, "\"shortNames\":[\"wd\",\"wdg\"]"));
    assert_non_null(strstr(r.raw, "\"name\":\"widgets/status\""));
    assert_non_null(strstr(r.raw, "\"name\":\"widgets/scale\""));
    tres_free(&r);
    r = tk_call(&t, "GET", "/apis/example.com/v1alpha1", NULL, NULL);
    assert_null(strstr(r.raw, "widgets/status")); /* subresources are per version */
    tres_free(&r);
    r = tk_call(&t, "GET", WS, NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(jstr(&r, "kind"), "WidgetList");
    assert_string_equal(jstr(&r, "apiVersion"), "example.com/v1");
    tres_free(&r);
    tk_done(&t);
}

static void test_defaults_pruning_validation(void **state)
{
    tk t;
    tk_init(&t);
    install(&t);
    tres r = tk_call(
        &t, "POST", WS, NULL,
        "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w1\"},"
        "\"spec\":{\"mode\":\"slow\",\"bogus\":1,\"template\":{\"image\":\"nginx\",\"junk\":true},"
        "\"items\":[{\"name\":\"a\"},{\"name\":\"b\",\"weight\":2,\"x\":1}],\"extra\":{\"any\":{\"deep\":1}},"
        "\"limits\":{\"cpu\":\"1\"}},\"status\":{\"phase\":\"Hacked\"},\"toplevel\":1}");
    assert_int_equal(r.status, 201);
    assert_int_equal(json_get_int(r.body, "spec.replicas", -1), 1); /* default */
    assert_string_equal(jstr(&r, "spec.mode"), "slow");             /* given value kept */
    assert_string_equal(jstr(&r, "spec.template.image"), "nginx");
    assert_string_equal(jstr(&r, "spec.template.pull"), "IfNotPresent"); /* nested default */
    assert_null(json_get(r.body, "spec.template.junk"));                 /* pruned */
    assert_null(json_get(r.body, "spec.bogus"));
    assert_null(json_get(r.body, "toplevel"));
    assert_int_equal(json_get_int(json_get(r.body, "spec.items")->child, "weight", -1),
                     5); /* in array items */
    assert_null(json_get(json_get(r.body, "spec.items")->child->next, "x"));
    assert_int_equal(json_get_int(r.body, "spec.extra.any.deep", 0), 1); /* preserved */
    assert_string_equal(jstr(&r, "spec.limits.cpu"), "1");
    assert_null(json_get(r.body, "status")); /* dropped with the status subresource */
    assert_int_equal(json_get_int(r.body, "metadata.generation", 0), 1);
    assert_non_null(strstr(r.headers, "Warning: 299 - \"unknown field \\\"spec.bogus\\\"\""));
    /* unstructured objects are written with sorted keys */
    assert_str_prefix(r.raw, "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\",\"metadata\":");
    tres_free(&r);
    /* an absent parent object gets no defaults below it */
    r = tk_call(&t, "POST", WS, NULL, "{\"metadata\":{\"name\":\"w2\"},\"spec\":{\"mode\":\"fast\"}}");
    assert_int_equal(r.status, 201);
    assert_null(json_get(r.body, "spec.template"));
    tres_free(&r);
    /* validation */
    r = tk_call(&t, "POST", WS, NULL,
                "{\"metadata\":{\"name\":\"w3\"},\"spec\":{\"mode\":\"medium\",\"replicas\":\"x\"}}");
    assert_int_equal(r.status, 422);
    assert_string_equal(jstr(&r, "details.kind"), "Widget");
    assert_non_null(strstr(jstr(&r, "message"), "Widget.example.com \"w3\" is invalid: ["));
    assert_non_null(strstr(jstr(&r, "message"), "spec.mode: Unsupported value: \"medium\""));
    assert_non_null(strstr(jstr(&r, "message"), "spec.replicas in body must be of type integer"));
    tres_free(&r);
    r = tk_call(&t, "POST", WS, NULL, "{\"metadata\":{\"name\":\"w4\"},\"spec\":{\"replicas\":-1}}");
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(jstr(&r, "message"), "spec.replicas"));
    tres_free(&r);
    /* a default fills a required field */
    tk_expect(&t, "POST", WS, NULL, "{\"metadata\":{\"name\":\"w5\"},\"spec\":{}}", 201);
    /* strict field validation */
    r = tk_call(&t, "POST", WS "?fieldValidation=Strict", NULL,
                "{\"metadata\":{\"name\":\"w6\"},\"spec\":{\"nope\":1}}");
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(jstr(&r, "message"), "unknown field \"spec.nope\""));
    tres_free(&r);
    /* custom objects reject strategic merge patches */
    r = tk_call(&t, "PATCH", WS "/w1", "application/strategic-merge-patch+json",
                "{\"spec\":{\"replicas\":3}}");
    assert_int_equal(r.status, 415);
    assert_string_equal(jstr(&r, "message"),
                        "the body of the request was in an unknown format - accepted media "
                        "types include: application/json-patch+json, "
                        "application/merge-patch+json, application/apply-patch+yaml");
    tres_free(&r);
    /* PUT needs the RV */
    r = tk_call(&t, "PUT", WS "/w1", NULL,
                "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":"
                "\"w1\"},\"spec\":{\"mode\":\"fast\"}}");
    assert_int_equal(r.status, 422);
    assert_string_equal(jstr(&r, "message"),
                        "Widget.example.com \"w1\" is invalid: metadata.resourceVersion: Invalid "
                        "value: 0x0: must be specified for an update");
    tres_free(&r);
    /* list items carry kind */
    r = tk_call(&t, "GET", WS, NULL, NULL);
    assert_string_equal(json_get_str(json_get(r.body, "items")->child, "kind"), "Widget");
    tres_free(&r);
    tk_done(&t);
}

static void test_status_generation_scale(void **state)
{
    tk t;
    tk_init(&t);
    install(&t);
    tk_expect(&t, "POST", WS, NULL,
              "{\"metadata\":{\"name\":\"w\"},\"spec\":{\"mode\":\"fast\",\"replicas\":2}}", 201);
    /* main endpoint: status ignored, spec bumps generation */
    tres r = tk_call(&t, "PATCH", WS "/w", "application/merge-patch+json",
                     "{\"spec\":{\"replicas\":3},\"status\":{\"phase\":\"X\"}}");
    assert_int_equal(r.status, 200);
    assert_null(json_get(r.body, "status"));
    assert_int_equal(json_get_int(r.body, "metadata.generation", 0), 2);
    tres_free(&r);
    /* metadata only: no bump */
    r = tk_call(&t, "PATCH", WS "/w", "application/merge-patch+json",
                "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}");
    assert_int_equal(json_get_int(r.body, "metadata.generation", 0), 2);
    tres_free(&r);
    /* a status-only write through the main endpoint is a no-op */
    uint64_t rv = ks_rv(t.k);
    tk_expect(&t, "PATCH", WS "/w", "application/merge-patch+json", "{\"status\":{\"phase\":\"Y\"}}", 200);
    assert_int_equal(ks_rv(t.k), rv);
    /* /status: only status is taken, generation unchanged */
    r = tk_call(
        &t, "PATCH", WS "/w/status", "application/merge-patch+json",
        "{\"spec\":{\"replicas\":9},\"metadata\":{\"labels\":{\"a\":\"c\"}},\"status\":{\"replicas\":3,"
        "\"selector\":\"app=w\",\"phase\":\"Running\"}}");
    assert_int_equal(r.status, 200);
    assert_int_equal(json_get_int(r.body, "spec.replicas", 0), 3);
    assert_string_equal(jstr(&r, "metadata.labels.a"), "b");
    assert_string_equal(jstr(&r, "status.phase"), "Running");
    assert_int_equal(json_get_int(r.body, "metadata.generation", 0), 2);
    char rvs[32];
    snprintf(rvs, sizeof(rvs), "%s", jstr(&r, "metadata.resourceVersion"));
    tres_free(&r);
    /* /scale */
    r = tk_call(&t, "GET", WS "/w/scale", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(jstr(&r, "kind"), "Scale");
    assert_string_equal(jstr(&r, "apiVersion"), "autoscaling/v1");
    assert_int_equal(json_get_int(r.body, "spec.replicas", 0), 3);
    assert_int_equal(json_get_int(r.body, "status.replicas", 0), 3);
    assert_string_equal(jstr(&r, "status.selector"), "app=w");
    assert_string_equal(jstr(&r, "metadata.resourceVersion"), rvs);
    tres_free(&r);
    r = tk_call(&t, "PUT", WS "/w/scale", NULL,
                "{\"kind\":\"Scale\",\"apiVersion\":\"autoscaling/"
                "v1\",\"metadata\":{\"name\":\"w\"},\"spec\":{\"replicas\":"
                "5}}");
    assert_int_equal(r.status, 200);
    assert_int_equal(json_get_int(r.body, "spec.replicas", 0), 5);
    tres_free(&r);
    r = tk_call(&t, "GET", WS "/w", NULL, NULL);
    assert_int_equal(json_get_int(r.body, "spec.replicas", 0), 5);
    assert_int_equal(json_get_int(r.body, "metadata.generation", 0), 3);
    tres_free(&r);
    /* a stale RV on the Scale is a conflict on the parent */
    char body[256];
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"name\":\"w\",\"resourceVersion\":\"%s\"},\"spec\":{\"replicas\":1}}", rvs);
    r = tk_call(&t, "PUT", WS "/w/scale", NULL, body);
    assert_int_equal(r.status, 409);
    assert_string_equal(jstr(&r, "message"),
                        "Operation cannot be fulfilled on widgets.example.com \"w\": the object "
                        "has been modified; please apply your changes to the latest version and "
                        "try again");
    tres_free(&r);
    r = tk_call(&t, "PATCH", WS "/w/scale", "application/merge-patch+json", "{\"spec\":{\"replicas\":0}}");
    assert_int_equal(r.status, 200);
    assert_null(json_get(r.body, "spec.replicas")); /* omitted when 0 */
    tres_free(&r);
    /* deployments have /scale too */
    tk_expect(
        &t, "POST", "/apis/apps/v1/namespaces/default/deployments", NULL,
        "{\"metadata\":{\"name\":\"d\"},\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":{\"app\":"
        "\"d\"}},"
        "\"template\":{\"metadata\":{\"labels\":{\"app\":\"d\"}},\"spec\":{\"containers\":[{\"name\":\"a\","
        "\"image\":\"x\"}]}}}}",
        201);
    r = tk_call(&t, "GET", "/apis/apps/v1/namespaces/default/deployments/d/scale", NULL, NULL);
    assert_int_equal(json_get_int(r.body, "spec.replicas", 0), 2);
    assert_string_equal(jstr(&r, "status.selector"), "app=d");
    tres_free(&r);
    /* other served versions see the same object under their apiVersion */
    r = tk_call(&t, "GET", "/apis/example.com/v1alpha1/namespaces/default/widgets/w", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(jstr(&r, "apiVersion"), "example.com/v1alpha1");
    assert_int_equal(json_get_int(r.body, "spec.replicas", 0), 0);
    tres_free(&r);
    tk_done(&t);
}

static void test_cluster_scope_and_crd_deletion(void **state)
{
    tk t;
    tk_init(&t);
    install(&t);
    tk_expect(&t, "POST", CRDS, NULL,
              "{\"apiVersion\":\"apiextensions.k8s.io/"
              "v1\",\"kind\":\"CustomResourceDefinition\",\"metadata\":{\"name\":"
              "\"things.example.com\"},\"spec\":{\"group\":\"example.com\",\"scope\":\"Cluster\",\"names\":{"
              "\"plural\":"
              "\"things\",\"kind\":\"Thing\"},\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":"
              "true,\"schema\":"
              "{\"openAPIV3Schema\":{\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":true}}}]}}",
              201);
    tres r = tk_call(&t, "POST", "/apis/example.com/v1/things", NULL,
                     "{\"metadata\":{\"name\":\"t1\"},\"any\":{\"x\":1}}");
    assert_int_equal(r.status, 201);
    assert_int_equal(json_get_int(r.body, "any.x", 0), 1);
    assert_null(json_get(r.body, "metadata.namespace"));
    tres_free(&r);
    tk_expect(&t, "GET", "/apis/example.com/v1/things/t1", NULL, NULL, 200);
    tk_expect(&t, "GET", "/apis/example.com/v1/namespaces/default/things/t1", NULL, NULL, 404);
    /* invalid CRDs */
    r = tk_call(&t, "POST", CRDS, NULL,
                "{\"metadata\":{\"name\":\"bad.example.com\"},\"spec\":{\"group\":\"example.com\","
                "\"scope\":\"Namespaced\",\"names\":{\"plural\":\"others\",\"kind\":\"Other\"},"
                "\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true}]}}");
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(jstr(&r, "message"), "must be spec.names.plural+\".\"+spec.group"));
    assert_non_null(strstr(jstr(&r, "message"), "schemas are required"));
    tres_free(&r);
    /* deleting the CRD deletes its objects, then the API is gone */
    tk_expect(&t, "POST", WS, NULL, "{\"metadata\":{\"name\":\"w\"},\"spec\":{}}", 201);
    r = tk_call(&t, "DELETE", CRDS "/widgets.example.com", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_non_null(jstr(&r, "metadata.deletionTimestamp")); /* held by the cleanup finalizer */
    tres_free(&r);
    tk_run(&t, 30);
    tk_expect(&t, "GET", CRDS "/widgets.example.com", NULL, NULL, 404);
    r = tk_call(&t, "GET", WS, NULL, NULL);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.raw, "404 page not found\n");
    tres_free(&r);
    tk_expect(&t, "GET", "/apis/example.com/v1/things/t1", NULL, NULL, 200);
    /* and it can come back */
    install(&t);
    r = tk_call(&t, "GET", WS, NULL, NULL);
    assert_int_equal(json_len(json_get(r.body, "items")), 0);
    tres_free(&r);
    tk_done(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crd_serving_and_discovery),
        cmocka_unit_test(test_defaults_pruning_validation),
        cmocka_unit_test(test_status_generation_scale),
        cmocka_unit_test(test_cluster_scope_and_crd_deletion),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
