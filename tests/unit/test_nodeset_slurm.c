/* Unit tests for the pure parts of reconcilers/nodeset_slurm: the Slurm
 * state -> SlurmNodeState* condition mapping (docs/compat.md#nodeset-conditions) on the recorded node
 * tables of every version, the condition hash that lets a pass skip writes
 * (must equal what the pod projection computes from the written
 * conditions), cordon reason sanitising, the pod info JSON of the node
 * comment (docs/compat.md#nodeset-pod-info), the "k8s/" feature merge, and nss_pod_slurm_name (the
 * one pod -> Slurm node name mapping) in every mode, on pods built by
 * nsb_build_pod and cached by the pods store as the reconciler sees them,
 * and the delete-without-drain opt-out read from a cached NodeSet. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/mem.h"
#include "core/store.h"
#include "reconcilers/nodeset_build.h"
#include "reconcilers/nodeset_slurm.h"
#include "slurmio/model.h"
#include "watchers/kinds.h"

static char *fixture(const char *name)
{
    const char *src = getenv("OP_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof(path), "%s/tests/data/slurmrestd/%s", src ? src : ".", name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = xmalloc((size_t)n + 1);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

static const sm_node *find(const sm_response *r, const char *name)
{
    for (size_t i = 0; i < r->n_nodes; i++)
        if (strcmp(r->nodes[i].name, name) == 0)
            return &r->nodes[i];
    fail_msg("no node %s", name);
    return NULL;
}

static void test_condition_bits_v44(void **state)
{
    char *body = fixture("v44_nodes_states_200.json");
    sm_response r;
    assert_int_equal(sm_parse(SM_V44, SM_KIND_NODES, 200, body, strlen(body), &r), 0);
    assert_int_equal(nss_condition_bits(find(&r, "slinky-0")), PSC_IDLE);
    assert_int_equal(nss_condition_bits(find(&r, "slinky-1")), PSC_IDLE | PSC_DRAIN);
    assert_int_equal(nss_condition_bits(find(&r, "slinky-2")), PSC_MIXED | PSC_DRAIN);
    assert_int_equal(nss_condition_bits(find(&r, "slinky-3")), PSC_ALLOCATED);
    assert_int_equal(nss_condition_bits(find(&r, "slinky-4")), PSC_DOWN | PSC_NOT_RESPONDING);
    assert_int_equal(nss_condition_bits(find(&r, "slinky-5")), PSC_IDLE | PSC_NOT_RESPONDING);
    /* Exactly one base state each. */
    for (size_t i = 0; i < r.n_nodes; i++) {
        uint32_t base = nss_condition_bits(&r.nodes[i]) & (PSC_ALLOCATED | PSC_DOWN | PSC_ERROR | PSC_FUTURE |
                                                           PSC_IDLE | PSC_MIXED | PSC_UNKNOWN);
        assert_true(base && !(base & (base - 1)));
    }
    sm_response_free(&r);
    free(body);
}

static void test_condition_bits_v38(void **state)
{
    char *body = fixture("v38_nodes_mixed_states_200.json");
    sm_response r;
    assert_int_equal(sm_parse(SM_V38, SM_KIND_NODES, 200, body, strlen(body), &r), 0);
    assert_int_equal(nss_condition_bits(find(&r, "n1")), PSC_DOWN);
    assert_int_equal(nss_condition_bits(find(&r, "n2")), PSC_IDLE | PSC_DRAIN);
    assert_int_equal(nss_condition_bits(find(&r, "n3")), PSC_IDLE | PSC_NOT_RESPONDING);
    assert_int_equal(nss_condition_bits(find(&r, "dyn1")), PSC_IDLE); /* DYNAMIC_NORM is no condition */
    sm_response_free(&r);
    free(body);
    /* v0.0.36 reports no flags: only the base state, never a drain. */
    sm_node n = {.base = SM_NODE_IDLE, .flags = SM_NF(DRAIN), .flags_known = 0};
    assert_int_equal(nss_condition_bits(&n), PSC_IDLE);
    sm_node m = {.base = SM_NODE_MIXED,
                 .flags = SM_NF(COMPLETING) | SM_NF(DRAIN) | SM_NF(UNDRAIN) | SM_NF(MAINTENANCE) |
                          SM_NF(FAIL) | SM_NF(INVALID) | SM_NF(INVALID_REG) | SM_NF(DYNAMIC_NORM),
                 .flags_known = 1};
    assert_int_equal(nss_condition_bits(&m), PSC_MIXED | PSC_COMPLETING | PSC_DRAIN | PSC_UNDRAIN |
                                                 PSC_MAINTENANCE | PSC_FAIL | PSC_INVALID | PSC_INVALID_REG);
}

/* The hash of the conditions a pass wants equals the projection's hash of a
 * pod carrying them, and differs when a message or a bit differs. */
static void test_condition_hash_matches_projection(void **state)
{
    uint32_t bits = PSC_MIXED | PSC_DRAIN;
    const char *msg = "slurm-operator: Pod (ns/p) is pending termination for scale-in";
    static const char doc[] = "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\"},\"status\":{\"phase\":"
                              "\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}";
    cJSON *pod = json_parse(doc, sizeof(doc) - 1, NULL);
    cJSON *conds = (cJSON *)json_get(pod, "status.conditions");
    for (int i = 0; i < PSC_COUNT; i++) {
        if (!(bits & (1u << i)))
            continue;
        cJSON *c = cJSON_CreateObject();
        json_set_str(c, "type", pod_slurm_cond_types[i]);
        json_set_str(c, "status", "True");
        json_set_str(c, "message", msg);
        cJSON_AddItemToArray(conds, c);
    }
    /* A False one is not counted. */
    cJSON *f = cJSON_CreateObject();
    json_set_str(f, "type", "SlurmNodeStateIdle");
    json_set_str(f, "status", "False");
    cJSON_AddItemToArray(conds, f);
    pod_proj proj = {0}, *pp = &proj;
    KIND_PODS.project(pod, pp);
    assert_int_equal(pp->slurm_conds, bits);
    assert_int_equal(pp->slurm_msg_hash, pod_slurm_cond_hash(bits, msg));
    assert_int_not_equal(pp->slurm_msg_hash, pod_slurm_cond_hash(bits, "another reason"));
    assert_int_not_equal(pp->slurm_msg_hash, pod_slurm_cond_hash(PSC_MIXED, msg));
    assert_int_equal(pod_slurm_cond_hash(0, msg), 0);
    KIND_PODS.proj_release(pp);
    cJSON_Delete(pod);
}

static void test_sanitize_reason(void **state)
{
    char *s = nss_sanitize_reason("  \tGPU 3\tfailed\nrun\x01\x7f diagnostics  \n");
    assert_string_equal(s, "GPU 3 failed run diagnostics");
    free(s);
    s = nss_sanitize_reason(NULL);
    assert_string_equal(s, "");
    free(s);
    /* At most 256 characters, counted as runes, never a split sequence. */
    char in[1200] = "";
    for (int i = 0; i < 300; i++)
        strcat(in, "\xc3\xa9"); /* é */
    s = nss_sanitize_reason(in);
    assert_int_equal(strlen(s), 512);
    assert_int_equal((unsigned char)s[510], 0xc3);
    free(s);
}

static void test_pod_info(void **state)
{
    char *s = nss_pod_info("slurm", "cpu-3", "node-7", "cpu", "0b7c-uid");
    assert_string_equal(s,
                        "{\"namespace\":\"slurm\",\"podName\":\"cpu-3\",\"node\":\"node-7\",\"nodeSetName\":"
                        "\"cpu\",\"nodeSetUID\":\"0b7c-uid\"}");
    free(s);
    s = nss_pod_info("a", "b", NULL, "c", "d");
    assert_non_null(strstr(s, "\"node\":\"\""));
    free(s);
}

static void test_merge_features(void **state)
{
    char *s;
    /* k8s/ features replaced, others kept, sorted. */
    s = nss_merge_features("gpu,k8s/old,cpu", "a100, nvlink");
    assert_string_equal(s, "cpu,gpu,k8s/a100,k8s/nvlink");
    free(s);
    /* Nothing to change: NULL (order does not matter). */
    assert_null(nss_merge_features("k8s/nvlink,cpu,k8s/a100", "nvlink,a100"));
    assert_null(nss_merge_features("", NULL));
    assert_null(nss_merge_features("cpu", ""));
    /* The annotation went: its features go, the rest stays. */
    s = nss_merge_features("cpu,k8s/a100", NULL);
    assert_string_equal(s, "cpu");
    free(s);
    s = nss_merge_features(NULL, "x,x");
    assert_string_equal(s, "k8s/x");
    free(s);

    /* With the --conf features (issue 32: a dynamic node registering again
     * keeps its first features): they replace the other features. */
    s = nss_merge_features_base("dyn,old,k8s/a100", "dyn,fresh", "a100");
    assert_string_equal(s, "dyn,fresh,k8s/a100");
    free(s);
    assert_null(nss_merge_features_base("fresh,k8s/a100,dyn", "dyn,fresh", "a100"));
    s = nss_merge_features_base("dyn,fresh", "dyn", NULL);
    assert_string_equal(s, "dyn");
    free(s);
    s = nss_merge_features_base("", "dyn,fresh", NULL);
    assert_string_equal(s, "dyn,fresh");
    free(s);
}

/* The resources a --conf gives: keys in any case (nsb_slurmd_conf title-
 * cases them: "Cpus", "Realmemory"), only plain counts. */
static void test_conf_resources(void **state)
{
    (void)state;
    int cpus;
    int64_t mem;
    nss_conf_resources("Features=dyn\vCpus=8\vRealmemory=64000\vWeight=7", &cpus, &mem);
    assert_int_equal(cpus, 8);
    assert_int_equal(mem, 64000);
    nss_conf_resources("Features=dyn\vWeight=7", &cpus, &mem);
    assert_int_equal(cpus, -1);
    assert_int_equal(mem, -1);
    nss_conf_resources("CPUs=4x\vREALMEMORY=\vRealMemoryX=5", &cpus, &mem);
    assert_int_equal(cpus, -1);
    assert_int_equal(mem, -1);
    nss_conf_resources("cpus=99999999999999999999\vrealmemory=12", &cpus, &mem);
    assert_int_equal(cpus, -1);
    assert_int_equal(mem, 12);
    nss_conf_resources(NULL, &cpus, &mem);
    assert_int_equal(cpus, -1);
    assert_int_equal(mem, -1);
}

/* ---- nss_pod_slurm_name, per mode ---- */

static const char NS_CONTROLLER[] =
    "{\"apiVersion\":\"slinky.slurm.net/v1beta1\",\"kind\":\"Controller\","
    "\"metadata\":{\"name\":\"slurm\",\"namespace\":\"slurm\",\"uid\":\"uid-ctl\"},"
    "\"spec\":{\"slurmKeyRef\":{\"name\":\"slurm-auth-slurm\",\"key\":\"slurm.key\"},"
    "\"jwtKeyRef\":{\"name\":\"slurm-auth-jwt\",\"key\":\"jwt.key\"}}}";

/* A NodeSet "cpu" of the given mode, with spec.template.spec.hostname
 * (NULL: none) and spec.hostNetwork. */
static cJSON *ns_of(const char *mode, const char *hostname, int host_network)
{
    cJSON *raw = cJSON_CreateObject();
    json_set_str(raw, "apiVersion", "slinky.slurm.net/v1beta1");
    json_set_str(raw, "kind", "NodeSet");
    cJSON *meta = json_obj_ensure(raw, "metadata");
    json_set_str(meta, "name", "cpu");
    json_set_str(meta, "namespace", "slurm");
    json_set_str(meta, "uid", "uid-nss");
    cJSON *spec = json_obj_ensure(raw, "spec");
    json_set_str(json_obj_ensure(spec, "controllerRef"), "name", "slurm");
    json_set_str(spec, "scalingMode", mode);
    json_set_str(json_obj_ensure(spec, "slurmd"), "image", "ghcr.io/slinkyproject/slurmd:test");
    json_set_str(json_obj_ensure(spec, "logfile"), "image", "alpine:test");
    cJSON *tspec = json_obj_ensure(json_obj_ensure(spec, "template"), "spec");
    if (hostname)
        json_set_str(tspec, "hostname", hostname);
    if (host_network)
        cJSON_AddBoolToObject(tspec, "hostNetwork", 1);
    cJSON *d = nsb_with_defaults(raw);
    cJSON_Delete(raw);
    return d;
}

/* The pod the reconciler would create (StatefulSet: ordinal; DaemonSet:
 * for Node target with its hostname override), as the API server stores
 * it: named (DaemonSet pods get a name from generateName), and bound to
 * bound_node (NULL: not scheduled yet). */
static cJSON *pod_for(const cJSON *nodeset, int ordinal, const char *target, const char *override,
                      const char *bound_node)
{
    cJSON *ctl = json_parse(NS_CONTROLLER, sizeof(NS_CONTROLLER) - 1, NULL);
    assert_non_null(ctl);
    nsb_pod_args a = {.nodeset = nodeset, .controller = ctl, .revision = "abc123", .ordinal = ordinal,
                      .node_name = target, .node_hostname_override = override};
    char err[256] = "";
    cJSON *pod = nsb_build_pod(&a, err, sizeof(err));
    if (pod == NULL)
        fail_msg("nsb_build_pod: %s", err);
    cJSON_Delete(ctl);
    cJSON *meta = json_obj_ensure(pod, "metadata");
    if (json_get_str(pod, "metadata.name") == NULL)
        json_set_str(meta, "name", "cpu-x7k2p");
    json_set_str(meta, "resourceVersion", "1");
    if (bound_node)
        json_set_str(json_obj_ensure(pod, "spec"), "nodeName", bound_node);
    return pod;
}

/* The Slurm node name of a pod once cached by a pods store. */
static char *slurm_name_of(const cJSON *pod)
{
    store *s = store_new(&KIND_PODS);
    assert_int_equal(store_upsert(s, pod), 1);
    const sobj *o = store_get(s, json_get_str(pod, "metadata.namespace"), json_get_str(pod, "metadata.name"));
    assert_non_null(o);
    char *name = xstrdup(nss_pod_slurm_name(o));
    store_free(s);
    return name;
}

static void expect_name(const cJSON *pod, const char *want)
{
    char *got = slurm_name_of(pod);
    assert_string_equal(got, want);
    free(got);
}

/* nss_pod_slurm_name_exact of a pod once cached by a pods store. */
static int name_exact(const cJSON *pod)
{
    store *s = store_new(&KIND_PODS);
    assert_int_equal(store_upsert(s, pod), 1);
    const sobj *o = store_get(s, json_get_str(pod, "metadata.namespace"), json_get_str(pod, "metadata.name"));
    assert_non_null(o);
    int v = nss_pod_slurm_name_exact(o);
    store_free(s);
    return v;
}

static void test_slurm_name_statefulset(void **state)
{
    /* A hostname prefix other than the NodeSet's name: the ordinal hostname,
     * bound or not, never the pod name nor the Node's name. */
    cJSON *ns = ns_of("StatefulSet", "node-", 0);
    cJSON *pod = pod_for(ns, 3, NULL, NULL, NULL);
    assert_string_equal(json_get_str(pod, "metadata.name"), "cpu-3");
    assert_string_equal(json_get_str(pod, "spec.hostname"), "node-3");
    expect_name(pod, "node-3");
    assert_int_equal(name_exact(pod), 1); /* the kubelet sets the kernel hostname to it */
    cJSON_Delete(pod);
    pod = pod_for(ns, 3, NULL, NULL, "kn-1.example.com");
    expect_name(pod, "node-3");
    assert_int_equal(name_exact(pod), 1);
    cJSON_Delete(pod);
    cJSON_Delete(ns);

    /* No hostname in the template: the ordinal name is the hostname. */
    ns = ns_of("StatefulSet", NULL, 0);
    pod = pod_for(ns, 5, NULL, NULL, "kn-1");
    assert_string_equal(json_get_str(pod, "metadata.name"), "cpu-5");
    expect_name(pod, "cpu-5");
    /* A pod whose spec has no hostname (an adopted orphan): its name. */
    cJSON_DeleteItemFromObject(json_obj_ensure(pod, "spec"), "hostname");
    expect_name(pod, "cpu-5");
    cJSON_Delete(pod);
    cJSON_Delete(ns);
}

static void test_slurm_name_host_network(void **state)
{
    /* slurmd on the host's network takes the host's name: the Node's name
     * (whole, not cut at the first dot), never spec.hostname. */
    cJSON *ns = ns_of("StatefulSet", "node-", 1);
    cJSON *pod = pod_for(ns, 2, NULL, NULL, "kn-4.example.com");
    assert_true(json_get_bool(pod, "spec.hostNetwork", 0));
    expect_name(pod, "kn-4.example.com");
    /* ... which is only the Node's: the host may be "KN-4" or "kn-4" */
    assert_int_equal(name_exact(pod), 0);
    cJSON_Delete(pod);
    /* Not bound yet: no Slurm node can exist, so no name (not the
     * hostname, which would let another node's record pass for it). */
    pod = pod_for(ns, 2, NULL, NULL, NULL);
    expect_name(pod, "");
    cJSON_Delete(pod);
    cJSON_Delete(ns);
}

static void test_slurm_name_daemonset(void **state)
{
    /* DaemonSet: the hostname the pod was built with, from its Node's
     * hostname-override annotation when the Node has one ... */
    cJSON *ns = ns_of("DaemonSet", NULL, 0);
    cJSON *pod = pod_for(ns, 0, "kn-7.example.com", "gpu-a", "kn-7.example.com");
    const cJSON *mode =
        cJSON_GetObjectItemCaseSensitive(json_get(pod, "metadata.labels"), NSB_LABEL_SCALING_MODE);
    assert_string_equal(cJSON_GetStringValue(mode), "DaemonSet");
    assert_string_equal(json_get_str(pod, "spec.hostname"), "gpu-a");
    expect_name(pod, "gpu-a");
    assert_int_equal(name_exact(pod), 1);
    cJSON_Delete(pod);
    /* ... else the Node's short name (spec.hostname is one DNS label, and
     * the kernel hostname is it); the pod's generated name never. */
    pod = pod_for(ns, 0, "kn-7.example.com", NULL, "kn-7.example.com");
    assert_string_equal(json_get_str(pod, "spec.hostname"), "kn-7");
    expect_name(pod, "kn-7");
    assert_int_equal(name_exact(pod), 1);
    cJSON_Delete(pod);
    cJSON_Delete(ns);
    /* hostNetwork in DaemonSet mode: the pod shares the host's UTS
     * namespace, the kubelet ignores spec.hostname, and slurmd -Z takes
     * gethostname() whole: the Node's full name, dots and all, with or
     * without an override (which only names the pod's own hostname). It
     * used to be the built hostname, "kn-8" or "gpu-b": Slurm answered "no
     * such node" for it while kn-8.example.com ran jobs (issue 39). */
    ns = ns_of("DaemonSet", NULL, 1);
    pod = pod_for(ns, 0, "kn-8.example.com", "gpu-b", "kn-8.example.com");
    expect_name(pod, "kn-8.example.com");
    assert_int_equal(name_exact(pod), 0);
    cJSON_Delete(pod);
    pod = pod_for(ns, 0, "kn-8.example.com", NULL, "kn-8.example.com");
    assert_string_equal(json_get_str(pod, "spec.hostname"), "kn-8");
    expect_name(pod, "kn-8.example.com");
    assert_int_equal(name_exact(pod), 0);
    cJSON_Delete(pod);
    /* Not bound yet: no name, as in StatefulSet mode. */
    pod = pod_for(ns, 0, "kn-8.example.com", NULL, NULL);
    expect_name(pod, "");
    cJSON_Delete(pod);
    cJSON_Delete(ns);
}

/* The opt-out annotation, read from a NodeSet as the NodeSets store keeps
 * it (full JSON, no annotation pairs). */
static void test_delete_without_drain(void **state)
{
    static const char *const docs[] = {
        "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"resourceVersion\":\"1\",\"annotations\":"
        "{\"nodeset.slinky.slurm.net/delete-without-drain\":\"true\"}}}",
        "{\"metadata\":{\"name\":\"b\",\"namespace\":\"ns\",\"resourceVersion\":\"1\",\"annotations\":"
        "{\"nodeset.slinky.slurm.net/delete-without-drain\":\"false\"}}}",
        "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"resourceVersion\":\"1\",\"annotations\":"
        "{\"other\":\"true\"}}}",
        "{\"metadata\":{\"name\":\"d\",\"namespace\":\"ns\",\"resourceVersion\":\"1\"}}",
    };
    static const int want[] = {1, 0, 0, 0};
    store *s = store_new(&KIND_FULL_NAMESPACED);
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        cJSON *o = json_parse(docs[i], strlen(docs[i]), NULL);
        assert_non_null(o);
        assert_int_equal(store_upsert(s, o), 1);
        const sobj *n = store_get(s, "ns", json_get_str(o, "metadata.name"));
        assert_non_null(n);
        assert_int_equal(nss_delete_without_drain(n), want[i]);
        cJSON_Delete(o);
    }
    /* Added later (kubectl annotate): seen on the new version. */
    cJSON *o = json_parse(docs[3], strlen(docs[3]), NULL);
    json_set_str(json_obj_ensure(json_obj_ensure(o, "metadata"), "annotations"), NSS_ANN_NO_DRAIN, "true");
    json_set_str(json_obj_ensure(o, "metadata"), "resourceVersion", "2");
    assert_int_equal(store_upsert(s, o), 1);
    assert_int_equal(nss_delete_without_drain(store_get(s, "ns", "d")), 1);
    cJSON_Delete(o);
    store_free(s);
}

int main(void)
{
    mem_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_condition_bits_v44),
        cmocka_unit_test(test_condition_bits_v38),
        cmocka_unit_test(test_condition_hash_matches_projection),
        cmocka_unit_test(test_sanitize_reason),
        cmocka_unit_test(test_pod_info),
        cmocka_unit_test(test_merge_features),
        cmocka_unit_test(test_conf_resources),
        cmocka_unit_test(test_slurm_name_statefulset),
        cmocka_unit_test(test_slurm_name_host_network),
        cmocka_unit_test(test_slurm_name_daemonset),
        cmocka_unit_test(test_delete_without_drain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
