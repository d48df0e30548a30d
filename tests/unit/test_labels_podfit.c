/* Unit tests for core/labels (selector grammar and matching rules) and
 * core/podfit (node selector, affinity, taints, anti-affinity). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/labels.h"
#include "core/podfit.h"

static cJSON *J(const char *s)
{
    cJSON *o = json_parse(s, strlen(s), NULL);
    assert_non_null(o);
    return o;
}

static int sel_matches(const char *sel, const char *labels)
{
    lsel *s = NULL;
    char err[128];
    assert_int_equal(lsel_parse(sel, &s, err, sizeof(err)), 0);
    cJSON *l = J(labels);
    int m = lsel_match_json(s, l);
    cJSON_Delete(l);
    lsel_free(s);
    return m;
}

static void test_selector_grammar(void **state)
{
    const char *L = "{\"app\":\"web\",\"tier\":\"fe\",\"n\":\"5\"}";
    assert_true(sel_matches("", L));
    assert_true(sel_matches("app=web", L));
    assert_true(sel_matches("app==web,tier=fe", L));
    assert_false(sel_matches("app=web,tier=be", L));
    assert_true(sel_matches("app!=db", L));
    assert_true(sel_matches("missing!=x", L)); /* != matches objects lacking the key */
    assert_true(sel_matches("tier in (fe, be)", L));
    assert_false(sel_matches("tier notin (fe,be)", L));
    assert_true(sel_matches("missing notin (a)", L));
    assert_true(sel_matches("app", L));
    assert_false(sel_matches("!app", L));
    assert_true(sel_matches("!missing", L));
    assert_true(sel_matches("n>3,n<6", L));
    assert_false(sel_matches("n>5", L));
    assert_true(sel_matches("app.kubernetes.io/name!=x", L));

    const char *bad[] = {"a=b,", "a in ()", "a in (b", "=b", "a>x", "a ~ b", "a b", "-bad=x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        lsel *s = NULL;
        char err[128] = "";
        assert_int_not_equal(lsel_parse(bad[i], &s, err, sizeof(err)), 0);
        assert_non_null(strstr(err, "unable to parse"));
    }

    lsel *s = NULL;
    assert_int_equal(lsel_parse("a=b,c in (x,y),!d", &s, NULL, 0), 0);
    buf_t b;
    buf_init(&b, 256);
    assert_int_equal(lsel_to_buf(s, &b), 0);
    assert_string_equal(buf_cstr(&b), "a=b,c in (x,y),!d");
    assert_string_equal(lsel_required_value(s, "a"), "b");
    assert_null(lsel_required_value(s, "c"));
    buf_free(&b);
    lsel_free(s);
}

static void test_selector_object(void **state)
{
    cJSON *j = J("{\"matchLabels\":{\"a\":\"1\"},\"matchExpressions\":[{\"key\":\"b\",\"operator\":\"In\","
                 "\"values\":[\"x\",\"y\"]},{\"key\":\"c\",\"operator\":\"DoesNotExist\"}]}");
    lsel *s = NULL;
    assert_int_equal(lsel_from_json(j, &s, NULL, 0), 0);
    cJSON *l1 = J("{\"a\":\"1\",\"b\":\"y\"}"), *l2 = J("{\"a\":\"1\",\"b\":\"y\",\"c\":\"\"}");
    assert_true(lsel_match_json(s, l1));
    assert_false(lsel_match_json(s, l2));
    lsel_free(s);
    cJSON *bad = J("{\"matchExpressions\":[{\"key\":\"b\",\"operator\":\"In\",\"values\":[]}]}");
    char err[128];
    assert_int_not_equal(lsel_from_json(bad, &s, err, sizeof(err)), 0);
    cJSON_Delete(bad);
    cJSON_Delete(j);
    cJSON_Delete(l1);
    cJSON_Delete(l2);
}

/* Label keys hold dots and slashes; a nodeSelector on one must match (it
 * was once looked up as a JSON path and never did). Labels may also come
 * from the caller, as the operator's Node cache keeps them. */
static const char *pairs_label(void *ctx, const char *key)
{
    const char *const *p = ctx;
    for (; p[0]; p += 2)
        if (strcmp(p[0], key) == 0)
            return p[1];
    return NULL;
}

static void test_daemon_fit_dotted_keys(void **state)
{
    cJSON *node = J("{\"metadata\":{\"name\":\"n1\",\"labels\":{\"kubernetes.io/os\":\"linux\","
                    "\"nvidia.com/gpu.present\":\"true\"}}}");
    cJSON *bare = J("{\"metadata\":{\"name\":\"n1\"}}");
    cJSON *pod = J("{\"nodeSelector\":{\"kubernetes.io/os\":\"linux\",\"nvidia.com/gpu.present\":\"true\"}}");
    cJSON *aff = J("{\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
                   "{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"nvidia.com/gpu.present\","
                   "\"operator\":\"In\",\"values\":[\"true\"]}]}]}}}}");
    fit_result r;
    fit_daemon(pod, node, &r);
    assert_true(r.should_run);
    fit_daemon(aff, node, &r);
    assert_true(r.should_run);
    fit_daemon(pod, bare, &r);
    assert_false(r.should_run);

    const char *labels[] = {"kubernetes.io/os", "linux", "nvidia.com/gpu.present", "true", NULL};
    const char *other[] = {"kubernetes.io/os", "linux", "nvidia.com/gpu.present", "false", NULL};
    fit_daemon_labels(pod, bare, pairs_label, (void *)labels, &r);
    assert_true(r.should_run);
    fit_daemon_labels(aff, bare, pairs_label, (void *)labels, &r);
    assert_true(r.should_run);
    fit_daemon_labels(pod, bare, pairs_label, (void *)other, &r);
    assert_false(r.should_run);
    fit_daemon_labels(aff, bare, pairs_label, (void *)other, &r);
    assert_false(r.should_run);
    /* the getter is the only source: labels in the JSON are not read */
    fit_daemon_labels(pod, node, pairs_label, (void *)other, &r);
    assert_false(r.should_run);
    cJSON_Delete(node);
    cJSON_Delete(bare);
    cJSON_Delete(pod);
    cJSON_Delete(aff);
}

static void test_daemon_fit(void **state)
{
    cJSON *node = J("{\"metadata\":{\"name\":\"n1\",\"labels\":{\"gpu\":\"h100\",\"zone\":\"a\"}},"
                    "\"spec\":{\"taints\":[{\"key\":\"nvidia.com/gpu\",\"effect\":\"NoSchedule\"}]}}");
    cJSON *pod = J("{\"nodeSelector\":{\"gpu\":\"h100\"},\"tolerations\":[{\"key\":\"nvidia.com/gpu\","
                   "\"operator\":\"Exists\"}]}");
    fit_result r;
    fit_daemon(pod, node, &r);
    assert_true(r.should_run && r.should_continue);

    cJSON *untol = J("{\"nodeSelector\":{\"gpu\":\"h100\"}}");
    fit_daemon(untol, node, &r);
    assert_false(r.should_run);
    assert_true(r.should_continue); /* NoSchedule does not evict */

    cJSON *noexec = J("{\"metadata\":{\"name\":\"n2\"},\"spec\":{\"taints\":[{\"key\":\"k\",\"value\":\"v\","
                      "\"effect\":\"NoExecute\"}]}}");
    fit_daemon(untol, noexec, &r);
    assert_false(r.should_run);
    cJSON *tol_eq = J("{\"tolerations\":[{\"key\":\"k\",\"operator\":\"Equal\",\"value\":\"v\"}]}");
    fit_daemon(tol_eq, noexec, &r);
    assert_true(r.should_run && r.should_continue);
    cJSON *tol_wrong = J("{\"tolerations\":[{\"key\":\"k\",\"value\":\"w\",\"effect\":\"NoExecute\"}]}");
    fit_daemon(tol_wrong, noexec, &r);
    assert_false(r.should_continue);
    cJSON *tol_all = J("{\"tolerations\":[{\"operator\":\"Exists\"}]}");
    fit_daemon(tol_all, noexec, &r);
    assert_true(r.should_run);

    cJSON *aff = J("{\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
                   "{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\","
                   "\"values\":[\"b\"]}]},{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\","
                   "\"values\":[\"n1\"]}]}]}}},\"tolerations\":[{\"operator\":\"Exists\"}]}");
    fit_daemon(aff, node, &r); /* second term matches by name */
    assert_true(r.should_run);
    fit_daemon(aff, noexec, &r);
    assert_false(r.should_run);

    cJSON *unsched = J("{\"metadata\":{\"name\":\"n3\"},\"spec\":{\"unschedulable\":true}}");
    cJSON *plain = J("{}");
    fit_daemon(plain, unsched, &r);
    assert_true(r.should_run);
    fit_schedule(plain, unsched, &r);
    assert_false(r.should_run);
    cJSON *named = J("{\"nodeName\":\"other\"}");
    fit_schedule(named, node, &r);
    assert_false(r.should_run);

    cJSON *anti =
        J("{\"affinity\":{\"podAntiAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
          "[{\"topologyKey\":\"kubernetes.io/hostname\",\"labelSelector\":{\"matchExpressions\":"
          "[{\"key\":\"app.kubernetes.io/name\",\"operator\":\"In\",\"values\":[\"slurmd\"]}]}}]}}}");
    cJSON *slurmd = J("{\"app.kubernetes.io/name\":\"slurmd\"}"), *other = J("{\"app\":\"x\"}");
    assert_true(fit_anti_affinity_conflict(anti, "ns", slurmd, "ns"));
    assert_false(fit_anti_affinity_conflict(anti, "ns", slurmd, "other-ns"));
    assert_false(fit_anti_affinity_conflict(anti, "ns", other, "ns"));

    cJSON *all[] = {node, pod, untol, noexec, tol_eq, tol_wrong, tol_all, aff, unsched, plain, named, anti,
                    slurmd, other};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        cJSON_Delete(all[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_selector_grammar),
        cmocka_unit_test(test_selector_object),
        cmocka_unit_test(test_daemon_fit),
        cmocka_unit_test(test_daemon_fit_dotted_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
