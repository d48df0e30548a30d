/* Unit tests for nodehealth: the flags' parsing, which Nodes are unhealthy
 * and why, the cap on a NodeSet's share out for health, which candidates it
 * admits, the drain reason, and the node affinity that keeps a replacement
 * off unhealthy Nodes. */
#include "unit/cluster_fixtures.h"

#include "core/err.h"
#include "core/json.h"
#include "core/mem.h"
#include "reconcilers/nodehealth.h"
#include "watchers/kinds.h"

static void test_parse(void **state)
{
    (void)state;
    nh_config c;
    char err[256];
    nh_config_init(&c);
    assert_false(nh_enabled(&c));
    assert_false(nh_enabled(NULL));
    assert_null(nh_condition_types(&c));
    assert_int_equal(c.max_share_pct, 10);
    assert_int_equal(nh_add_condition(&c, "GpuUnhealthy", err, sizeof(err)), 0);
    assert_int_equal(nh_add_condition(&c, "Ready=False", err, sizeof(err)), 0);
    assert_int_equal(nh_add_condition(&c, "example.com/Xid=Unknown", err, sizeof(err)), 0);
    assert_string_equal(c.conds[0].status, "True");
    assert_string_equal(c.conds[1].key, "Ready");
    assert_string_equal(c.conds[1].status, "False");
    assert_true(nh_enabled(&c));
    char *types = nh_condition_types(&c);
    assert_string_equal(types, "GpuUnhealthy,Ready,example.com/Xid");
    free(types);
    /* Refused: empty, empty status, a list, a second '='. */
    const char *bad[] = {"", "=True", "Gpu=", "a,b", "a=b=c", "a b"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_int_equal(nh_add_condition(&c, bad[i], err, sizeof(err)), OP_EINVAL);
        assert_non_null(strstr(err, "TYPE"));
    }
    assert_int_equal(nh_add_taint(&c, "nvidia.com/gpu-unhealthy", err, sizeof(err)), 0);
    assert_int_equal(nh_add_taint(&c, "a=b", err, sizeof(err)), OP_EINVAL);
    assert_int_equal(nh_add_taint(&c, "", err, sizeof(err)), OP_EINVAL);
    assert_int_equal(nh_set_share(&c, "25%", err, sizeof(err)), 0);
    assert_int_equal(c.max_share_pct, 25);
    assert_int_equal(nh_set_share(&c, "100", err, sizeof(err)), 0);
    const char *shares[] = {"0", "101", "", "x", "10%%", "-5", "5.5"};
    for (size_t i = 0; i < sizeof(shares) / sizeof(shares[0]); i++)
        assert_int_equal(nh_set_share(&c, shares[i], err, sizeof(err)), OP_EINVAL);
    assert_int_equal(c.max_share_pct, 100);
    /* Bounded. */
    nh_config_free(&c);
    for (int i = 0; i < NH_MAX_RULES; i++)
        assert_int_equal(nh_add_taint(&c, "k", err, sizeof(err)), 0);
    assert_int_equal(nh_add_taint(&c, "k", err, sizeof(err)), OP_ETOOBIG);
    nh_config_free(&c);
    assert_false(nh_enabled(&c));
}

static void test_unhealthy(void **state)
{
    (void)state;
    nh_config c;
    char err[256], why[512];
    int64_t since = -1;
    nh_config_init(&c);
    cJSON *node =
        JQ("{'metadata':{'name':'n1'},'spec':{'taints':[{'key':'other','effect':'NoSchedule'},"
           "{'key':'gpu-bad','value':'xid-79','effect':'NoSchedule','timeAdded':'2026-01-02T00:00:00Z'}]},"
           "'status':{'conditions':[{'type':'Ready','status':'True'},"
           "{'type':'GpuUnhealthy','status':'True','reason':'Xid','message':'XID 79 on GPU 3',"
           "'lastTransitionTime':'2026-01-01T00:00:00Z'},"
           "{'type':'DiskBad','status':'False','reason':'Fine'}]}}");
    /* Off: nothing is unhealthy. */
    assert_false(nh_node_unhealthy(&c, node, why, sizeof(why), &since));
    assert_int_equal(nh_add_condition(&c, "DiskBad", err, sizeof(err)), 0);
    assert_false(nh_node_unhealthy(&c, node, why, sizeof(why), &since)); /* status False */
    assert_int_equal(nh_add_taint(&c, "gpu-bad", err, sizeof(err)), 0);
    assert_true(nh_node_unhealthy(&c, node, why, sizeof(why), &since));
    assert_string_equal(why, "gpu-bad: xid-79");
    assert_int_equal(since, 1767312000);
    /* Conditions come before taints; the message is the reason's detail. */
    assert_int_equal(nh_add_condition(&c, "GpuUnhealthy", err, sizeof(err)), 0);
    assert_true(nh_node_unhealthy(&c, node, why, sizeof(why), &since));
    assert_string_equal(why, "GpuUnhealthy: XID 79 on GPU 3");
    assert_int_equal(since, 1767225600);
    nh_config_free(&c);
    /* TYPE=STATUS: Ready=False; without a message the reason, else the status. */
    assert_int_equal(nh_add_condition(&c, "Ready=False", err, sizeof(err)), 0);
    assert_false(nh_node_unhealthy(&c, node, why, sizeof(why), NULL));
    cJSON *n2 = JQ("{'status':{'conditions':[{'type':'Ready','status':'False','reason':'KubeletDown'}]}}");
    assert_true(nh_node_unhealthy(&c, n2, why, sizeof(why), &since));
    assert_string_equal(why, "Ready: KubeletDown");
    assert_int_equal(since, 0);
    cJSON_Delete(n2);
    n2 = JQ("{'status':{'conditions':[{'type':'Ready','status':'False'}]}}");
    assert_true(nh_node_unhealthy(&c, n2, why, sizeof(why), NULL));
    assert_string_equal(why, "Ready: False");
    cJSON_Delete(n2);
    /* A taint without a value gives its effect; the why is bounded. */
    nh_config_free(&c);
    assert_int_equal(nh_add_taint(&c, "other", err, sizeof(err)), 0);
    char small[8];
    assert_true(nh_node_unhealthy(&c, node, small, sizeof(small), NULL));
    assert_string_equal(small, "other: ");
    assert_true(nh_node_unhealthy(&c, node, why, sizeof(why), NULL));
    assert_string_equal(why, "other: NoSchedule");
    assert_false(nh_node_unhealthy(&c, NULL, why, sizeof(why), NULL));
    cJSON_Delete(node);
    nh_config_free(&c);
}

static void test_cap(void **state)
{
    (void)state;
    nh_config c;
    char err[64];
    nh_config_init(&c);
    assert_int_equal(nh_cap(&c, 0), 0);
    assert_int_equal(nh_cap(&c, 1), 1);
    assert_int_equal(nh_cap(&c, 9), 1);
    assert_int_equal(nh_cap(&c, 20), 2);
    assert_int_equal(nh_cap(&c, 8192), 819);
    assert_int_equal(nh_set_share(&c, "50", err, sizeof(err)), 0);
    assert_int_equal(nh_cap(&c, 3), 1);
    assert_int_equal(nh_cap(&c, 4), 2);
    assert_int_equal(nh_set_share(&c, "100", err, sizeof(err)), 0);
    assert_int_equal(nh_cap(&c, 4), 4);
    assert_int_equal(nh_cap(NULL, 30), 3);
}

static void test_admit(void **state)
{
    (void)state;
    nh_cand c[5] = {
        {.name = "gpu-4", .since_s = 0},   {.name = "gpu-1", .since_s = 200},
        {.name = "gpu-3", .since_s = 100}, {.name = "gpu-0", .since_s = 200},
        {.name = "gpu-2", .since_s = 0},
    };
    /* Room for two: the longest unhealthy (since 100, then 200 by name). */
    assert_int_equal(nh_admit(c, 5, 1, 3), 2);
    assert_false(c[0].admit);
    assert_false(c[1].admit);
    assert_true(c[2].admit);
    assert_true(c[3].admit);
    assert_false(c[4].admit);
    /* Unknown times last, by name. */
    assert_int_equal(nh_admit(c, 5, 0, 4), 4);
    assert_true(c[0].admit == 0 && c[4].admit == 1);
    /* Full: none, whatever was set before. */
    assert_int_equal(nh_admit(c, 5, 3, 3), 0);
    for (int i = 0; i < 5; i++)
        assert_false(c[i].admit);
    assert_int_equal(nh_admit(c, 5, 4, 3), 0);
    assert_int_equal(nh_admit(c, 0, 0, 3), 0);
    assert_int_equal(nh_admit(c, 5, 0, 100), 5);
}

/* A storm: every one of a fleet's Nodes unhealthy at once, passes admitting
 * what the cap allows; out never passes the cap. */
static void test_storm(void **state)
{
    (void)state;
    nh_config c;
    nh_config_init(&c);
    enum { FLEET = 64 };
    nh_cand cand[FLEET];
    char names[FLEET][16];
    int out[FLEET] = {0};
    size_t held = 0, cap = nh_cap(&c, FLEET);
    assert_int_equal(cap, 6);
    for (int pass = 0; pass < 20; pass++) {
        size_t n = 0;
        int map[FLEET];
        for (int i = 0; i < FLEET; i++) {
            if (out[i])
                continue;
            snprintf(names[i], sizeof(names[i]), "gpu-%d", i);
            cand[n].name = names[i];
            cand[n].since_s = 1000 + (i % 7);
            map[n++] = i;
        }
        held += nh_admit(cand, n, held, cap);
        for (size_t k = 0; k < n; k++)
            out[map[k]] |= cand[k].admit;
        assert_true(held <= cap);
        /* every third pass one node comes back (replaced and healthy) */
        if (pass % 3 == 2 && held) {
            for (int i = 0; i < FLEET; i++)
                if (out[i] == 1) {
                    out[i] = 2; /* done: not a candidate again */
                    held--;
                    break;
                }
        }
    }
    nh_config_free(&c);
}

static void test_reason(void **state)
{
    (void)state;
    char *r = nh_reason("GpuUnhealthy: XID 79\non GPU\t3\x01 ");
    assert_string_equal(r, "slurm-operator: GpuUnhealthy: XID 79 on GPU 3");
    free(r);
    char big[2000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    r = nh_reason(big);
    assert_int_equal(strlen(r), strlen("slurm-operator: ") + 256);
    free(r);
    /* UTF-8 is not split: 300 two-byte runes give 256 of them. */
    char u[700] = "";
    for (int i = 0; i < 300; i++)
        strcat(u, "\xc3\xa9");
    r = nh_reason(u);
    assert_int_equal(strlen(r), strlen("slurm-operator: ") + 512);
    free(r);
    r = nh_reason(NULL);
    assert_string_equal(r, "slurm-operator: ");
    free(r);
}

static void test_avoid(void **state)
{
    (void)state;
    const char *nodes[] = {"n1", "n2"};
    cJSON *pod = JQ("{'spec':{}}");
    assert_int_equal(nh_avoid_nodes(pod, nodes, 2), 0);
    const cJSON *terms = json_get(
        pod, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms");
    assert_int_equal(json_len(terms), 1);
    const cJSON *f = json_get(terms->child, "matchFields");
    assert_int_equal(json_len(f), 1);
    assert_string_equal(json_get_str(f->child, "key"), "metadata.name");
    assert_string_equal(json_get_str(f->child, "operator"), "NotIn");
    assert_int_equal(json_len(json_child(f->child, "values")), 2);
    /* The annotation names them, for a user and for nh_avoids_usable. */
    const cJSON *ann =
        cJSON_GetObjectItemCaseSensitive(json_get(pod, "metadata.annotations"), ANN_POD_AVOIDED);
    assert_non_null(ann);
    assert_string_equal(ann->valuestring, "n1,n2");
    cJSON_Delete(pod);
    /* Every term of the template's own affinity gets it (terms are ORed). */
    pod = JQ("{'spec':{'affinity':{'nodeAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':"
             "{'nodeSelectorTerms':[{'matchExpressions':[{'key':'gpu','operator':'Exists'}]},"
             "{'matchFields':[{'key':'metadata.name','operator':'In','values':['n1','n3']}]}]}}}}}");
    assert_int_equal(nh_avoid_nodes(pod, nodes, 1), 0);
    terms = json_get(
        pod, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms");
    assert_int_equal(json_len(terms), 2);
    assert_int_equal(json_len(json_get(terms->child, "matchExpressions")), 1);
    assert_int_equal(json_len(json_get(terms->child, "matchFields")), 1);
    assert_int_equal(json_len(json_get(terms->child->next, "matchFields")), 2);
    cJSON_Delete(pod);
    /* Nothing to avoid: the pod is unchanged. */
    pod = JQ("{'spec':{}}");
    assert_int_equal(nh_avoid_nodes(pod, nodes, 0), 0);
    assert_null(json_get(pod, "spec.affinity"));
    cJSON_Delete(pod);
    assert_int_equal(nh_avoid_nodes(NULL, nodes, 1), OP_EINVAL);
}

static int usable_in(const char *node, void *data)
{
    for (const char *const *n = data; *n; n++)
        if (strcmp(*n, node) == 0)
            return 1;
    return 0;
}

static void test_avoids_usable(void **state)
{
    (void)state;
    const char *none[] = {NULL}, *n2[] = {"n2", NULL}, *n1[] = {"n1", NULL}, *n3[] = {"n3", NULL};
    assert_int_equal(nh_avoids_usable("n1,n2", usable_in, (void *)none), 0);
    assert_int_equal(nh_avoids_usable("n1,n2", usable_in, (void *)n2), 1);
    assert_int_equal(nh_avoids_usable("n1,n2", usable_in, (void *)n1), 1);
    assert_int_equal(nh_avoids_usable("n1,n2", usable_in, (void *)n3), 0);
    /* No prefix matches: "n1" is not "n10". */
    const char *n10[] = {"n10", NULL};
    assert_int_equal(nh_avoids_usable("n1,n2", usable_in, (void *)n10), 0);
    assert_int_equal(nh_avoids_usable("n10", usable_in, (void *)n1), 0);
    /* Empty items, a missing annotation and an overlong item are passed over. */
    assert_int_equal(nh_avoids_usable(",,n2,", usable_in, (void *)n2), 1);
    assert_int_equal(nh_avoids_usable(NULL, usable_in, (void *)n2), 0);
    assert_int_equal(nh_avoids_usable("", usable_in, (void *)n2), 0);
    char longname[400];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    const char *lng[] = {longname, NULL};
    assert_int_equal(nh_avoids_usable(longname, usable_in, (void *)lng), 0);
}

int main(void)
{
    mem_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),         cmocka_unit_test(test_unhealthy), cmocka_unit_test(test_cap),
        cmocka_unit_test(test_admit),         cmocka_unit_test(test_storm),     cmocka_unit_test(test_reason),
        cmocka_unit_test(test_avoids_usable), cmocka_unit_test(test_avoid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
