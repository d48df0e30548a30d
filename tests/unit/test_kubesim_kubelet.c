/* kubesim engine: Nodes, the scheduler's predicates and the kubelet. */
#include "test_kubesim_util.h"
#include "unit_assert.h"

#define PODS "/api/v1/namespaces/default/pods"

static void setup(tk *t, int nodes, int gpus)
{
    ks_config c;
    ks_config_defaults(&c);
    c.nodes = nodes;
    c.node_gpus = gpus;
    c.pod_start_delay_ms = 5;
    c.pod_ready_delay_ms = 5;
    c.max_grace_ms = 30;
    c.schedule_retry_ms = 10;
    c.gc_delay_ms = 1;
    c.seed = 3;
    tk_init_cfg(t, &c);
}

static tres get_pod(tk *t, const char *name)
{
    char p[256];
    snprintf(p, sizeof(p), PODS "/%s", name);
    return tk_call(t, "GET", p, NULL, NULL);
}

static char *node_of(tk *t, const char *name)
{
    tres r = get_pod(t, name);
    const char *n = jstr(&r, "spec.nodeName");
    char *out = xstrdup(n ? n : "");
    tres_free(&r);
    return out;
}

static const cJSON *cond(const tres *r, const char *type)
{
    for (const cJSON *c =
             json_get(r->body, "status.conditions") ? json_get(r->body, "status.conditions")->child : NULL;
         c; c = c->next)
        if (strcmp(json_get_str_or(c, "type", ""), type) == 0)
            return c;
    return NULL;
}

/* spec_extra: ",\"field\":..." appended to the pod spec; "GPU" asks for 2 GPUs. */
static void pod(tk *t, const char *name, const char *spec_extra, const char *labels)
{
    int gpu = spec_extra && strcmp(spec_extra, "GPU") == 0;
    char body[2048];
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"name\":\"%s\",\"labels\":%s},\"spec\":{\"containers\":[{\"name\":\"main\","
             "\"image\":"
             "\"x:1\"%s}]%s}}",
             name, labels ? labels : "{}",
             gpu ? ",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}" : "",
             spec_extra && !gpu ? spec_extra : "");
    tk_expect(t, "POST", PODS, NULL, body, 201);
}

static void test_nodes_and_lifecycle(void **state)
{
    tk t;
    setup(&t, 3, 4);
    tres r = tk_call(&t, "GET", "/api/v1/nodes/node-00002", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(
        json_child(json_get(r.body, "metadata.labels"), "kubernetes.io/hostname")->valuestring, "node-00002");
    assert_string_equal(json_child(json_get(r.body, "status.capacity"), "nvidia.com/gpu")->valuestring, "4");
    tres_free(&r);
    r = tk_call(&t, "GET", "/api/v1/nodes", NULL, NULL);
    assert_int_equal(json_len(json_get(r.body, "items")), 3);
    tres_free(&r);
    pod(&t, "p", NULL, NULL);
    tk_run(&t, 60);
    r = get_pod(&t, "p");
    assert_string_equal(jstr(&r, "status.phase"), "Running");
    assert_non_null(jstr(&r, "spec.nodeName"));
    assert_non_null(jstr(&r, "status.podIP"));
    assert_non_null(jstr(&r, "status.hostIP"));
    assert_string_equal(json_get_str(cond(&r, "Ready"), "status"), "True");
    assert_string_equal(json_get_str(cond(&r, "PodScheduled"), "status"), "True");
    const cJSON *cs = json_get(r.body, "status.containerStatuses")->child;
    assert_true(json_get_bool(cs, "ready", 0));
    assert_non_null(json_get(cs, "state.running.startedAt"));
    tres_free(&r);
    /* graceful deletion: deletionTimestamp now, gone after the (capped) grace period */
    r = tk_call(&t, "DELETE", PODS "/p", NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_non_null(jstr(&r, "metadata.deletionTimestamp"));
    assert_int_equal(json_get_int(r.body, "metadata.deletionGracePeriodSeconds", 0), 30);
    tres_free(&r);
    r = get_pod(&t, "p");
    assert_int_equal(r.status, 200);
    tres_free(&r);
    tk_run(&t, 80);
    r = get_pod(&t, "p");
    assert_int_equal(r.status, 404);
    tres_free(&r);
    /* a pod that was never scheduled goes at once */
    tk_expect(&t, "POST", "/kubesim/nodes/cordon", NULL,
              "{\"names\":[\"node-00001\",\"node-00002\",\"node-00003\"]}", 200);
    pod(&t, "q", NULL, NULL);
    tk_run(&t, 20);
    r = get_pod(&t, "q");
    assert_string_equal(json_get_str(cond(&r, "PodScheduled"), "reason"), "Unschedulable");
    assert_non_null(strstr(json_get_str(cond(&r, "PodScheduled"), "message"), "0/3 nodes are available"));
    tres_free(&r);
    tk_expect(&t, "DELETE", PODS "/q", NULL, NULL, 200);
    r = get_pod(&t, "q");
    assert_int_equal(r.status, 404);
    tres_free(&r);
    /* uncordon: pending pods get scheduled */
    pod(&t, "s", NULL, NULL);
    tk_expect(&t, "POST", "/kubesim/nodes/cordon", NULL,
              "{\"names\":[\"node-00003\"],\"unschedulable\":false}", 200);
    tk_run(&t, 60);
    char *n = node_of(&t, "s");
    assert_string_equal(n, "node-00003");
    free(n);
    /* admin: fail a pod */
    tres f = tk_call(&t, "POST", "/kubesim/pods/fail", NULL, "{\"namespace\":\"default\",\"name\":\"s\"}");
    assert_int_equal(f.status, 200);
    assert_int_equal(json_get_int(f.body, "updated", 0), 1);
    tres_free(&f);
    r = get_pod(&t, "s");
    assert_string_equal(jstr(&r, "status.phase"), "Failed");
    assert_int_equal(
        json_get_int(json_get(r.body, "status.containerStatuses")->child, "state.terminated.exitCode", 0), 1);
    tres_free(&r);
    /* a terminal pod is removed at once on delete */
    tk_expect(&t, "DELETE", PODS "/s", NULL, NULL, 200);
    r = get_pod(&t, "s");
    assert_int_equal(r.status, 404);
    tres_free(&r);
    tk_done(&t);
}

static void test_predicates(void **state)
{
    tk t;
    setup(&t, 3, 0);
    tk_expect(&t, "PATCH", "/api/v1/nodes/node-00002", "application/merge-patch+json",
              "{\"metadata\":{\"labels\":{\"disk\":\"ssd\"}}}", 200);
    pod(&t, "sel", ",\"nodeSelector\":{\"disk\":\"ssd\"}", NULL);
    pod(&t, "aff",
        ",\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
        "\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"kubernetes.io/hostname\",\"operator\":"
        "\"In\",\"values\":[\"node-00003\"]}]}]}}}",
        NULL);
    pod(&t, "direct", ",\"nodeName\":\"node-00001\"", NULL);
    pod(&t, "nomatch", ",\"nodeSelector\":{\"disk\":\"nvme\"}", NULL);
    tk_run(&t, 40);
    char *n = node_of(&t, "sel");
    assert_string_equal(n, "node-00002");
    free(n);
    n = node_of(&t, "aff");
    assert_string_equal(n, "node-00003");
    free(n);
    n = node_of(&t, "direct");
    assert_string_equal(n, "node-00001");
    free(n);
    tres r = get_pod(&t, "direct");
    assert_string_equal(jstr(&r, "status.phase"), "Running");
    tres_free(&r);
    n = node_of(&t, "nomatch");
    assert_string_equal(n, "");
    free(n);
    r = get_pod(&t, "nomatch");
    assert_non_null(strstr(json_get_str(cond(&r, "PodScheduled"), "message"),
                           "didn't match Pod's node affinity/selector"));
    tres_free(&r);
    /* taints: only the toleration lets a pod on */
    tk_expect(&t, "POST", "/kubesim/nodes/taint", NULL,
              "{\"names\":[\"node-00001\",\"node-00002\",\"node-00003\"],\"taint\":{\"key\":\"gpu\","
              "\"value\":\"yes\","
              "\"effect\":\"NoSchedule\"}}",
              200);
    pod(&t, "plain", NULL, NULL);
    pod(&t, "tol",
        ",\"tolerations\":[{\"key\":\"gpu\",\"operator\":\"Equal\",\"value\":\"yes\",\"effect\":"
        "\"NoSchedule\"}]",
        NULL);
    tk_run(&t, 30);
    n = node_of(&t, "plain");
    assert_string_equal(n, "");
    free(n);
    n = node_of(&t, "tol");
    assert_str_prefix(n, "node-");
    free(n);
    /* removing the taint lets the waiting pod in (after the retry delay) */
    tk_expect(
        &t, "POST", "/kubesim/nodes/taint", NULL,
        "{\"names\":[\"node-00001\",\"node-00002\",\"node-00003\"],\"taint\":{\"key\":\"gpu\",\"effect\":"
        "\"NoSchedule\"},\"remove\":true}",
        200);
    tk_run(&t, 60);
    n = node_of(&t, "plain");
    assert_str_prefix(n, "node-");
    free(n);
    /* NoExecute evicts pods that do not tolerate it */
    tk_expect(&t, "POST", "/kubesim/nodes/taint", NULL,
              "{\"names\":[\"node-00001\"],\"taint\":{\"key\":\"evict\",\"effect\":\"NoExecute\"}}", 200);
    tk_run(&t, 80);
    r = get_pod(&t, "direct");
    assert_int_equal(r.status, 404);
    tres_free(&r);
    tk_done(&t);
}

static void test_anti_affinity_and_gpus(void **state)
{
    tk t;
    setup(&t, 3, 2);
    const char *anti =
        ",\"affinity\":{\"podAntiAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":[{"
        "\"labelSelector\":{\"matchLabels\":{\"app\":\"x\"}},\"topologyKey\":\"kubernetes.io/hostname\"}]}}";
    pod(&t, "a1", anti, "{\"app\":\"x\"}");
    pod(&t, "a2", anti, "{\"app\":\"x\"}");
    pod(&t, "a3", anti, "{\"app\":\"x\"}");
    pod(&t, "a4", anti, "{\"app\":\"x\"}");
    tk_run(&t, 40);
    char *n1 = node_of(&t, "a1"), *n2 = node_of(&t, "a2"), *n3 = node_of(&t, "a3"), *n4 = node_of(&t, "a4");
    assert_true(*n1 && *n2 && *n3);
    assert_string_not_equal(n1, n2);
    assert_string_not_equal(n2, n3);
    assert_string_not_equal(n1, n3);
    assert_string_equal(n4, "");
    tres r = get_pod(&t, "a4");
    assert_non_null(strstr(json_get_str(cond(&r, "PodScheduled"), "message"), "anti-affinity"));
    tres_free(&r);
    free(n1);
    free(n2);
    free(n3);
    free(n4);
    /* the other direction: an existing pod's anti-affinity keeps a matching pod off its node */
    for (int i = 1; i <= 4; i++) {
        char p[64];
        snprintf(p, sizeof(p), PODS "/a%d", i);
        tk_expect(&t, "DELETE", p, "application/json", "{\"gracePeriodSeconds\":0}", 200);
    }
    tk_run(&t, 20);
    /* GPUs: 2 per node, pods ask for 2 */
    pod(&t, "g1", "GPU", NULL);
    pod(&t, "g2", "GPU", NULL);
    pod(&t, "g3", "GPU", NULL);
    pod(&t, "g4", "GPU", NULL);
    tk_run(&t, 40);
    int placed = 0;
    for (int i = 1; i <= 4; i++) {
        char nm[8];
        snprintf(nm, sizeof(nm), "g%d", i);
        char *n = node_of(&t, nm);
        placed += *n != 0;
        free(n);
    }
    assert_int_equal(placed, 3);
    tk_expect(&t, "DELETE", PODS "/g1", "application/json", "{\"gracePeriodSeconds\":0}", 200);
    tk_run(&t, 60);
    char *n = node_of(&t, "g4");
    assert_true(*n);
    free(n);
    /* pods on a deleted node are deleted */
    n = node_of(&t, "g4");
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/nodes/%s", n);
    tk_expect(&t, "DELETE", path, NULL, NULL, 200);
    free(n);
    tk_run(&t, 20);
    r = get_pod(&t, "g4");
    assert_int_equal(r.status, 404);
    tres_free(&r);
    /* admin: add nodes */
    tres a = tk_call(&t, "POST", "/kubesim/nodes/add", NULL, "{\"count\":2}");
    assert_int_equal(a.status, 200);
    assert_string_equal(json_get(a.body, "added")->child->valuestring, "node-00004");
    tres_free(&a);
    tk_expect(&t, "GET", "/api/v1/nodes/node-00005", NULL, NULL, 200);
    tk_done(&t);
}

static void test_readiness_gates(void **state)
{
    tk t;
    setup(&t, 1, 0);
    pod(&t, "g", ",\"readinessGates\":[{\"conditionType\":\"example.com/lb-ready\"}]", NULL);
    tk_run(&t, 40);
    tres r = get_pod(&t, "g");
    assert_string_equal(jstr(&r, "status.phase"), "Running");
    assert_string_equal(json_get_str(cond(&r, "ContainersReady"), "status"), "True");
    const cJSON *ready = cond(&r, "Ready");
    assert_string_equal(json_get_str(ready, "status"), "False");
    assert_string_equal(json_get_str(ready, "reason"), "ReadinessGatesNotReady");
    assert_string_equal(
        json_get_str(ready, "message"),
        "corresponding condition of pod readiness gate \"example.com/lb-ready\" does not exist.");
    tres_free(&r);
    tk_expect(&t, "PATCH", PODS "/g/status", "application/strategic-merge-patch+json",
              "{\"status\":{\"conditions\":[{\"type\":\"example.com/lb-ready\",\"status\":\"False\"}]}}",
              200);
    tk_run(&t, 10);
    r = get_pod(&t, "g");
    assert_string_equal(
        json_get_str(cond(&r, "Ready"), "message"),
        "the status of pod readiness gate \"example.com/lb-ready\" is not \"True\", but False");
    tres_free(&r);
    tk_expect(&t, "PATCH", PODS "/g/status", "application/strategic-merge-patch+json",
              "{\"status\":{\"conditions\":[{\"type\":\"example.com/lb-ready\",\"status\":\"True\"}]}}", 200);
    tk_run(&t, 10);
    r = get_pod(&t, "g");
    assert_string_equal(json_get_str(cond(&r, "Ready"), "status"), "True");
    /* the kubelet kept the custom condition */
    assert_string_equal(json_get_str(cond(&r, "example.com/lb-ready"), "status"), "True");
    tres_free(&r);
    tk_done(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nodes_and_lifecycle),
        cmocka_unit_test(test_predicates),
        cmocka_unit_test(test_anti_affinity_and_gpus),
        cmocka_unit_test(test_readiness_gates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
