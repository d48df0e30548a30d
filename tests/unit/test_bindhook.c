/* Unit tests for reconcilers/bindhook's pure part: reading a pods/binding
 * AdmissionReview, the answer and its JSON patch, the NodeSet owner
 * check and the namespaceSelector of the scope. (The server itself is tested against a real kube-apiserver in
 * tests/integration/test_k8s_topology_webhook.py.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "core/crypto.h"
#include "core/err.h"
#include <stdio.h>
#include "core/json.h"
#include "reconcilers/bindhook.h"

/* What kube-apiserver sends for kube-scheduler's binding of default/gpu-0. */
#define REVIEW(op, sub, annotations)                                                                         \
    "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"                     \
    "\"uid\":\"705ab4f5-6393-11e8-b7cc-42010a800002\",\"kind\":{\"group\":\"\",\"version\":\"v1\","          \
    "\"kind\":\"Binding\"},\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},"          \
    "\"subResource\":\"" sub "\",\"name\":\"gpu-0\",\"namespace\":\"default\",\"operation\":\"" op "\","     \
    "\"object\":{\"kind\":\"Binding\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"gpu-0\","               \
    "\"namespace\":\"default\",\"uid\":\"u1\"" annotations "},\"target\":{\"kind\":\"Node\","                \
    "\"name\":\"kwok-gpu-0003\"}}}}"

static int parse(const char *text, bh_review *rv, int *binding)
{
    cJSON *o = cJSON_Parse(text);
    int rc = bh_parse_review(o, rv, binding);
    cJSON_Delete(o);
    return rc;
}

static void test_parse(void **state)
{
    (void)state;
    bh_review rv;
    int binding;
    assert_int_equal(parse(REVIEW("CREATE", "binding", ""), &rv, &binding), 0);
    assert_int_equal(binding, 1);
    assert_string_equal(rv.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_string_equal(rv.ns, "default");
    assert_string_equal(rv.pod, "gpu-0");
    assert_string_equal(rv.node, "kwok-gpu-0003");
    assert_int_equal(rv.has_annotations, 0);
    assert_int_equal(parse(REVIEW("CREATE", "binding", ",\"annotations\":{\"a\":\"b\"}"), &rv, &binding), 0);
    assert_int_equal(rv.has_annotations, 1);
    /* Not a binding: answered, unchanged. */
    assert_int_equal(parse(REVIEW("CREATE", "status", ""), &rv, &binding), 0);
    assert_int_equal(binding, 0);
    assert_int_equal(parse(REVIEW("UPDATE", "binding", ""), &rv, &binding), 0);
    assert_int_equal(binding, 0);
    /* Not a review: refused. */
    assert_int_equal(parse("{\"kind\":\"AdmissionReview\",\"request\":{}}", &rv, &binding), OP_EINVAL);
    assert_int_equal(parse("[]", &rv, &binding), OP_EINVAL);
    assert_int_equal(parse("{\"kind\":\"Pod\",\"request\":{\"uid\":\"x\"}}", &rv, &binding), OP_EINVAL);
    assert_int_equal(bh_parse_review(NULL, &rv, &binding), OP_EINVAL);
}

/* The answer, and the Binding once its patch is applied by hand. */
static cJSON *answer(const bh_review *rv, const char *topology, char **patch)
{
    buf_t b;
    buf_init(&b, 1u << 20);
    assert_int_equal(bh_build_response(rv, topology, &b), 0);
    cJSON *o = cJSON_Parse(buf_cstr(&b));
    buf_free(&b);
    assert_non_null(o);
    assert_string_equal(json_get_str(o, "kind"), "AdmissionReview");
    assert_string_equal(json_get_str(o, "apiVersion"), "admission.k8s.io/v1");
    assert_string_equal(json_get_str(o, "response.uid"), rv->uid);
    assert_int_equal(json_get_bool(o, "response.allowed", 0), 1);
    *patch = NULL;
    const char *p64 = json_get_str(o, "response.patch");
    if (p64) {
        assert_string_equal(json_get_str(o, "response.patchType"), "JSONPatch");
        size_t n;
        uint8_t *raw = base64_decode(p64, strlen(p64), &n);
        assert_non_null(raw);
        *patch = calloc(1, n + 1);
        memcpy(*patch, raw, n);
        free(raw);
    }
    return o;
}

static void test_response(void **state)
{
    (void)state;
    bh_review rv = {.uid = "u-1", .ns = "default", .pod = "gpu-0", .node = "n"};
    char *patch;
    cJSON *o = answer(&rv, NULL, &patch);
    assert_null(patch);
    assert_null(json_get(o, "response.patchType"));
    cJSON_Delete(o);
    o = answer(&rv, "", &patch);
    assert_null(patch);
    cJSON_Delete(o);

    /* No annotations on the Binding: the whole map is added. */
    o = answer(&rv, "topo-switch:s2,topo-block:b1", &patch);
    assert_string_equal(patch, "[{\"op\":\"add\",\"path\":\"/metadata/annotations\",\"value\":"
                               "{\"topology.slinky.slurm.net/spec\":\"topo-switch:s2,topo-block:b1\"}}]");
    free(patch);
    cJSON_Delete(o);
    /* Some already: one key, its "/" escaped as "~1". */
    rv.has_annotations = 1;
    o = answer(&rv, "a\"b", &patch);
    assert_string_equal(patch,
                        "[{\"op\":\"add\",\"path\":\"/metadata/annotations/topology.slinky.slurm.net~1spec\","
                        "\"value\":\"a\\\"b\"}]");
    free(patch);
    cJSON_Delete(o);
}

static void test_pod_owner(void **state)
{
    (void)state;
    static const struct {
        const char *refs;
        int want;
    } cases[] = {
        {"[{\"apiVersion\":\"slinky.slurm.net/"
         "v1beta1\",\"kind\":\"NodeSet\",\"name\":\"gpu\",\"controller\":true}]",
         1},
        {"[{\"apiVersion\":\"slinky.slurm.net/v1beta1\",\"kind\":\"NodeSet\",\"name\":\"gpu\"}]", 0},
        {"[{\"apiVersion\":\"example.com/v1\",\"kind\":\"NodeSet\",\"name\":\"gpu\",\"controller\":true}]",
         0},
        {"[{\"apiVersion\":\"apps/v1\",\"kind\":\"StatefulSet\",\"name\":\"x\",\"controller\":true},"
         "{\"apiVersion\":\"slinky.slurm.net/"
         "v1beta1\",\"kind\":\"NodeSet\",\"name\":\"gpu\",\"controller\":true}]",
         1},
        {"[]", 0},
        {"null", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[512];
        snprintf(text, sizeof(text), "{\"metadata\":{\"name\":\"p\",\"ownerReferences\":%s}}", cases[i].refs);
        cJSON *pod = cJSON_Parse(text);
        assert_non_null(pod);
        assert_int_equal(bh_pod_is_nodeset(pod), cases[i].want);
        cJSON_Delete(pod);
    }
}

static void expect_selector(const char *cur, const char *const *nss, size_t n, const char *want)
{
    cJSON *c = cur ? cJSON_Parse(cur) : NULL;
    cJSON *w = cJSON_Parse(want);
    assert_non_null(w);
    cJSON *got = bh_scope_selector(c, nss, n);
    if (!cJSON_Compare(got, w, 1)) {
        char *t = cJSON_PrintUnformatted(got);
        fail_msg("selector %s, want %s", t, want);
    }
    cJSON_Delete(got);
    cJSON_Delete(w);
    cJSON_Delete(c);
}

static void test_scope_selector(void **state)
{
    (void)state;
    static const char *const two[] = {"hpc", "team-a"};
    /* The chart's registration: the exclusions stay, ours goes first. */
    const char *chart =
        "{\"matchExpressions\":[{\"key\":\"kubernetes.io/metadata.name\",\"operator\":\"NotIn\","
        "\"values\":[\"kube-system\",\"slurmop\"]}]}";
    expect_selector(chart, two, 2,
                    "{\"matchExpressions\":[{\"key\":\"kubernetes.io/metadata.name\",\"operator\":\"In\","
                    "\"values\":[\"hpc\",\"team-a\"]},{\"key\":\"kubernetes.io/metadata.name\","
                    "\"operator\":\"NotIn\",\"values\":[\"kube-system\",\"slurmop\"]}]}");
    /* No NodeSet: a value no namespace has; an earlier In of ours (or the
     * chart's `namespaces`) is replaced; matchLabels and other keys stay. */
    expect_selector(
        "{\"matchLabels\":{\"a\":\"b\"},\"matchExpressions\":[{\"key\":\"kubernetes.io/metadata.name\","
        "\"operator\":\"In\",\"values\":[\"old\"]},{\"key\":\"tier\",\"operator\":\"In\","
        "\"values\":[\"x\"]}]}",
        NULL, 0,
        "{\"matchLabels\":{\"a\":\"b\"},\"matchExpressions\":[{\"key\":\"kubernetes.io/metadata.name\","
        "\"operator\":\"In\",\"values\":[\"" BH_NO_NAMESPACE "\"]},{\"key\":\"tier\","
        "\"operator\":\"In\",\"values\":[\"x\"]}]}");
    /* A registration without any selector. */
    expect_selector(NULL, two, 1,
                    "{\"matchExpressions\":[{\"key\":\"kubernetes.io/metadata.name\",\"operator\":\"In\","
                    "\"values\":[\"hpc\"]}]}");

    /* What the selector admits, by namespace name. */
    cJSON *c = cJSON_Parse(chart);
    cJSON *sel = bh_scope_selector(c, two, 2);
    assert_true(bh_selector_admits(sel, "hpc"));
    assert_false(bh_selector_admits(sel, "default"));
    cJSON_Delete(sel);
    assert_true(bh_selector_admits(c, "default")); /* as registered: every namespace but the excluded */
    assert_false(bh_selector_admits(c, "kube-system"));
    assert_true(bh_selector_admits(NULL, "default"));
    cJSON_Delete(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_response),
        cmocka_unit_test(test_pod_owner),
        cmocka_unit_test(test_scope_selector),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
