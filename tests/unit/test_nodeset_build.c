/* Unit tests for reconcilers/nodeset_build: the pure NodeSet engine parts,
 * checked field by field against docs/compat.md#nodeset-spec-and-status,
 * #admission-checks and #nodeset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/crypto.h"
#include "core/err.h"
#include "core/json.h"
#include "core/mem.h"
#include "reconcilers/nodeset_build.h"
#include "unit_assert.h"
#include "sh_script.h"

/* ---- fixtures ---------------------------------------------------------------------------------- */

static cJSON *J(const char *s)
{
    const char *errpos = NULL;
    cJSON *o = json_parse(s, strlen(s), &errpos);
    if (o == NULL)
        fprintf(stderr, "bad test JSON near: %.40s\n", errpos ? errpos : "?");
    assert_non_null(o);
    return o;
}

static void expect_json(const cJSON *got, const char *want)
{
    cJSON *w = J(want);
    if (!json_equal(got, w)) {
        char *g = json_dump(got);
        fprintf(stderr, "got:  %s\nwant: %s\n", g, want);
        free(g);
        fail();
    }
    cJSON_Delete(w);
}

static void expect_str(const cJSON *o, const char *path, const char *want)
{
    const char *got = json_get_str(o, path);
    if (got == NULL || strcmp(got, want) != 0) {
        fprintf(stderr, "%s: got %s, want %s\n", path, got ? got : "(null)", want);
        fail();
    }
}

/* Labels and annotations have dots in their keys: no dotted paths for them. */
static const char *child_str(const cJSON *o, const char *key)
{
    const cJSON *v = json_child(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const char NODESET[] =
    "{\"apiVersion\":\"slinky.slurm.net/v1beta1\",\"kind\":\"NodeSet\","
    "\"metadata\":{\"name\":\"slurm-worker-cpu\",\"namespace\":\"slurm\",\"uid\":\"uid-nss\",\"generation\":"
    "3,"
    "\"labels\":{\"helm.sh/chart\":\"slurm-1.3.0\",\"app.kubernetes.io/name\":\"evil\"},"
    "\"annotations\":{\"team\":\"hpc\",\"kubectl.kubernetes.io/last-applied-configuration\":\"{}\"}},"
    "\"spec\":{\"controllerRef\":{\"name\":\"slurm\"},\"replicas\":2,"
    "\"slurmd\":{\"image\":\"ghcr.io/slinkyproject/slurmd:26.05\",\"args\":[\"-vvv\"],"
    "\"resources\":{\"limits\":{\"cpu\":\"4\",\"memory\":\"8Gi\"}}},"
    "\"logfile\":{\"image\":\"alpine:latest\"},"
    "\"extraConf\":\"Features=gpu,a100 Gres=gpu:1 feature=a100 weight=10\","
    "\"template\":{\"metadata\":{\"labels\":{\"team\":\"hpc\",\"app.kubernetes.io/instance\":\"nope\"},"
    "\"annotations\":{\"note\":\"x\"}},"
    "\"spec\":{\"hostname\":\"cpu-\",\"nodeSelector\":{\"pool\":\"cpu\"},"
    "\"containers\":[{\"name\":\"sidecar\",\"image\":\"busybox\"}],"
    "\"volumes\":[{\"name\":\"scratch\",\"emptyDir\":{}}]}},"
    "\"ordinalPadding\":2}}";

static const char CONTROLLER[] =
    "{\"apiVersion\":\"slinky.slurm.net/v1beta1\",\"kind\":\"Controller\","
    "\"metadata\":{\"name\":\"slurm\",\"namespace\":\"slurm\",\"uid\":\"uid-ctl\"},"
    "\"spec\":{\"slurmKeyRef\":{\"name\":\"slurm-auth-slurm\",\"key\":\"slurm.key\"},"
    "\"jwtKeyRef\":{\"name\":\"slurm-auth-jwt\",\"key\":\"jwt.key\"}}}";

typedef struct fx {
    cJSON *nodeset;
    cJSON *controller;
} fx;

static void fx_init(fx *f, const char *nodeset_json)
{
    cJSON *raw = J(nodeset_json);
    f->nodeset = nsb_with_defaults(raw);
    cJSON_Delete(raw);
    f->controller = J(CONTROLLER);
}

static void fx_free(fx *f)
{
    cJSON_Delete(f->nodeset);
    cJSON_Delete(f->controller);
}

static cJSON *build(fx *f, int ordinal)
{
    nsb_pod_args a = {
        .nodeset = f->nodeset, .controller = f->controller, .revision = "abc123", .ordinal = ordinal};
    char err[256] = "";
    cJSON *pod = nsb_build_pod(&a, err, sizeof(err));
    if (pod == NULL)
        fprintf(stderr, "build: %s\n", err);
    assert_non_null(pod);
    if (getenv("NSB_DUMP")) {
        char *s = json_dump(pod);
        fprintf(stderr, "%s\n", s);
        free(s);
    }
    return pod;
}

static const cJSON *find_named(const cJSON *arr, const char *name)
{
    for (const cJSON *e = arr ? arr->child : NULL; e; e = e->next)
        if (strcmp(json_get_str_or(e, "name", ""), name) == 0)
            return e;
    return NULL;
}

/* ---- defaults ---------------------------------------------------------------------------------- */

static void test_defaults(void **state)
{
    cJSON *raw = J("{\"metadata\":{\"name\":\"a\"},\"spec\":{\"controllerRef\":{\"name\":\"c\"}}}");
    cJSON *d = nsb_with_defaults(raw);
    expect_json(
        json_child(d, "spec"),
        "{\"controllerRef\":{\"name\":\"c\"},\"replicas\":1,\"scalingMode\":\"StatefulSet\","
        "\"updateStrategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxUnavailable\":\"25%\"}},"
        "\"revisionHistoryLimit\":0,\"persistentVolumeClaimRetentionPolicy\":{\"whenDeleted\":\"Retain\","
        "\"whenScaled\":\"Retain\"},\"minReadySeconds\":0,\"ordinalPadding\":0,\"pinToNode\":false,"
        "\"workloadDisruptionProtection\":true,\"pruneSlurmNodeRecords\":\"Never\","
        "\"oversubscribeNode\":false}");
    /* The input is not touched. */
    assert_null(json_get(raw, "spec.replicas"));
    cJSON_Delete(d);
    cJSON_Delete(raw);

    /* Present values win; OnDelete gets no maxUnavailable; sub-objects get theirs. */
    raw = J(
        "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"replicas\":0,\"scalingMode\":\"DaemonSet\","
        "\"updateStrategy\":{\"type\":\"OnDelete\",\"scheduledUpdate\":{}},\"workloadDisruptionProtection\":"
        "false,"
        "\"persistentVolumeClaimRetentionPolicy\":{\"whenScaled\":\"Delete\"},\"ssh\":{},\"partition\":{}}}");
    d = nsb_with_defaults(raw);
    assert_int_equal(json_get_int(d, "spec.replicas", -1), 0);
    assert_int_equal(nsb_replicas(d), 0);
    assert_int_equal(nsb_mode_of(d), NSB_DAEMONSET);
    assert_null(json_get(d, "spec.updateStrategy.rollingUpdate"));
    expect_str(d, "spec.updateStrategy.scheduledUpdate.duration", "30m");
    assert_false(json_get_bool(d, "spec.workloadDisruptionProtection", 1));
    expect_str(d, "spec.persistentVolumeClaimRetentionPolicy.whenScaled", "Delete");
    expect_str(d, "spec.persistentVolumeClaimRetentionPolicy.whenDeleted", "Retain");
    assert_true(cJSON_IsFalse(json_get(d, "spec.ssh.enabled")));
    assert_true(cJSON_IsFalse(json_get(d, "spec.partition.enabled")));
    cJSON_Delete(d);
    cJSON_Delete(raw);
}

/* ---- identity ---------------------------------------------------------------------------------- */

static void test_ordinals(void **state)
{
    char *s = nsb_padded_ordinal(3, 7);
    assert_string_equal(s, "007");
    free(s);
    s = nsb_padded_ordinal(0, 12);
    assert_string_equal(s, "12");
    free(s);
    s = nsb_padded_ordinal(2, 123); /* wider than the padding: not truncated */
    assert_string_equal(s, "123");
    free(s);
    s = nsb_pod_name("cpu", 4, 5);
    assert_string_equal(s, "cpu-0005");
    free(s);

    size_t plen = 0;
    assert_int_equal(nsb_split_pod_name("a-b-12", &plen), 12);
    assert_int_equal(plen, 3);
    assert_int_equal(nsb_split_pod_name("a-b", NULL), -1);
    assert_int_equal(nsb_split_pod_name("abc12", NULL), -1);
    assert_int_equal(nsb_split_pod_name("a-", NULL), -1);
    assert_int_equal(nsb_split_pod_name("a-99999999999", NULL), -1); /* beyond int32 */
    assert_int_equal(nsb_parse_ordinal("cpu-007", "cpu"), 7);
    assert_int_equal(nsb_parse_ordinal("cpu-x-1", "cpu"), -1);
    assert_int_equal(nsb_parse_ordinal("gpu-1", "cpu"), -1);
    assert_int_equal(nsb_parse_ordinal("cpu-1", "cp"), -1);
    assert_int_equal(nsb_parse_ordinal("a-b-3", "a-b"), 3);
    assert_int_equal(nsb_parse_ordinal(NULL, "a"), -1);
}

static void test_hostnames(void **state)
{
    fx f;
    fx_init(&f, NODESET);
    char *s = nsb_statefulset_hostname(f.nodeset, 3);
    assert_string_equal(s, "cpu-03");
    free(s);
    s = nsb_slurm_nodeset_name(f.nodeset);
    assert_string_equal(s, "cpu");
    free(s);
    fx_free(&f);

    cJSON *plain =
        J("{\"metadata\":{\"name\":\"gpu\"},\"spec\":{\"ordinalPadding\":1,\"template\":{\"spec\":{}}}}");
    s = nsb_statefulset_hostname(plain, 4);
    assert_string_equal(s, "gpu-4");
    free(s);
    s = nsb_slurm_nodeset_name(plain);
    assert_string_equal(s, "gpu");
    free(s);
    cJSON_Delete(plain);
    plain =
        J("{\"metadata\":{\"name\":\"x\"},\"spec\":{\"template\":{\"spec\":{\"hostname\":\"--a-b--\"}}}}");
    s = nsb_slurm_nodeset_name(plain);
    assert_string_equal(s, "a-b");
    free(s);
    cJSON_Delete(plain);

    s = nsb_daemonset_hostname("node-1.example.com", NULL);
    assert_string_equal(s, "node-1");
    free(s);
    s = nsb_daemonset_hostname("node-1.example.com", "");
    assert_string_equal(s, "node-1");
    free(s);
    s = nsb_daemonset_hostname("node-1", "gpu-17");
    assert_string_equal(s, "gpu-17");
    free(s);
    cJSON *node =
        J("{\"metadata\":{\"name\":\"n.x\",\"annotations\":{\"nodeset.slinky.slurm.net/hostname-override\":"
          "\"h1\"}}}");
    s = nsb_daemonset_hostname_of_node(node);
    assert_string_equal(s, "h1");
    free(s);
    cJSON_Delete(node);

    assert_string_equal(nsb_slurm_node_name(NSB_STATEFULSET, 0, "k8s-1", "cpu-0", "nss-0"), "cpu-0");
    assert_string_equal(nsb_slurm_node_name(NSB_STATEFULSET, 0, "k8s-1", "", "nss-0"), "nss-0");
    assert_string_equal(nsb_slurm_node_name(NSB_STATEFULSET, 1, "k8s-1", "cpu-0", "nss-0"), "k8s-1");
    /* hostNetwork, both modes: the host's name as slurmd -Z takes it
     * (gethostname() whole), the Node's full name; not spec.hostname. */
    assert_string_equal(nsb_slurm_node_name(NSB_DAEMONSET, 1, "k8s-1", "h", "nss-abcde"), "k8s-1");
    assert_string_equal(nsb_slurm_node_name(NSB_DAEMONSET, 1, "n1.a.example", "n1", NULL), "n1.a.example");
    assert_string_equal(nsb_slurm_node_name(NSB_STATEFULSET, 1, "n1.a.example", "cpu-0", "nss-0"),
                        "n1.a.example");
    assert_string_equal(nsb_slurm_node_name(NSB_DAEMONSET, 1, NULL, "h", NULL), "");
    assert_string_equal(nsb_slurm_node_name(NSB_DAEMONSET, 0, "n1.a.example", "n1", NULL), "n1");

    s = nsb_selector_string("cpu");
    assert_string_equal(s, "app.kubernetes.io/instance=cpu,app.kubernetes.io/name=slurmd");
    free(s);
    cJSON *l = nsb_selector_labels("cpu");
    expect_json(l, "{\"app.kubernetes.io/name\":\"slurmd\",\"app.kubernetes.io/instance\":\"cpu\"}");
    cJSON_Delete(l);
}

/* ---- slurmd configuration ---------------------------------------------------------------------- */

static void test_slurmd_conf(void **state)
{
    fx f;
    fx_init(&f, NODESET);
    char err[128];
    char *conf = nsb_slurmd_conf(f.nodeset, err, sizeof(err));
    assert_non_null(conf);
    assert_string_equal(conf, "Features=a100,cpu,gpu\vGres=gpu:1\vWeight=10");
    free(conf);
    fx_free(&f);

    cJSON *n = J("{\"metadata\":{\"name\":\"cpu\"},\"spec\":{}}");
    conf = nsb_slurmd_conf(n, err, sizeof(err));
    assert_string_equal(conf, "Features=cpu");
    free(conf);
    cJSON_Delete(n);

    /* Repeated keys join with commas; double spaces are tolerated;
     * CamelCase keys are title-cased like Go's cases.Title. */
    n = J("{\"metadata\":{\"name\":\"cpu\"},\"spec\":{\"extraConf\":\"gres=a  GRES=b RealMemory=100 "
          "cpu_spec=2\"}}");
    conf = nsb_slurmd_conf(n, err, sizeof(err));
    assert_string_equal(conf, "Cpu_spec=2\vFeatures=cpu\vGres=a,b\vRealmemory=100");
    free(conf);
    cJSON_Delete(n);

    n = J("{\"metadata\":{\"name\":\"cpu\"},\"spec\":{\"extraConf\":\"Weight=1 oops\"}}");
    err[0] = '\0';
    assert_null(nsb_slurmd_conf(n, err, sizeof(err)));
    assert_non_null(strstr(err, "oops"));
    cJSON_Delete(n);

    /* The features alone (what a dynamic node should carry). */
    n = J("{\"metadata\":{\"name\":\"cpu\"},\"spec\":{\"extraConf\":\"Weight=3 features=z,b\"}}");
    conf = nsb_slurmd_features(n);
    assert_string_equal(conf, "b,cpu,z");
    free(conf);
    cJSON_Delete(n);
    n = J("{\"metadata\":{\"name\":\"cpu\"},\"spec\":{\"extraConf\":\"Weight\"}}");
    assert_null(nsb_slurmd_features(n));
    cJSON_Delete(n);

    /* A user's Topology item is kept as given. */
    n = J("{\"metadata\":{\"name\":\"cpu\"},\"spec\":{\"extraConf\":\"Topology=default:s1\"}}");
    conf = nsb_slurmd_conf(n, err, sizeof(err));
    assert_string_equal(conf, "Features=cpu\vTopology=default:s1");
    free(conf);
    cJSON_Delete(n);

    /* What a shell would not take literally is refused, here and by validation. */
    static const char *const bad[] = {"Weight=$HOME", "Features=a'b", "Gres=\\\"x\\\"",
                                      "Weight=`id`",  "Gres=a;b",     "Features={a,b}",
                                      "Gres=gpu:*",   "Weight=1|2",   "Features=~x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *js = xasprintf("{\"metadata\":{\"name\":\"cpu\"},\"spec\":{\"controllerRef\":{\"name\":\"c\"},"
                             "\"extraConf\":\"Weight=1 %s\"}}",
                             bad[i]);
        n = J(js);
        err[0] = '\0';
        conf = nsb_slurmd_conf(n, err, sizeof(err));
        if (conf)
            fprintf(stderr, "accepted %s as %s\n", bad[i], conf);
        assert_null(conf);
        assert_non_null(strstr(err, "shell"));
        nsb_msgs msgs = {0};
        nsb_validate(n, NULL, &msgs);
        int found = 0;
        for (size_t k = 0; k < msgs.n; k++)
            found |= strstr(msgs.v[k], "shell") != NULL;
        assert_true(found);
        nsb_msgs_free(&msgs);
        cJSON_Delete(n);
        free(js);
    }
}

/* Issue 32: slurmd 24.11 has no /livez or /readyz: TCP probes for it and for
 * images whose tag does not say the version; HTTP from 25.05 on. */
static void test_slurmd_probes_by_version(void **state)
{
    (void)state;
    static const char *const images[] = {"localhost/slurmop/slurmd:24.11", "slurmd:latest",
                                         "ghcr.io/slinkyproject/slurmd:25.11-ubuntu24.04"};
    for (size_t i = 0; i < 3; i++) {
        char *js =
            xasprintf("{\"metadata\":{\"name\":\"cpu\",\"namespace\":\"slurm\",\"uid\":\"u\"},"
                      "\"spec\":{\"controllerRef\":{\"name\":\"slurm\"},\"slurmd\":{\"image\":\"%s\"}}}",
                      images[i]);
        fx f;
        fx_init(&f, js);
        cJSON *pod = build(&f, 0);
        const cJSON *slurmd = json_get(pod, "spec.containers")->child;
        if (i < 2) {
            expect_json(json_child(slurmd, "startupProbe"),
                        "{\"tcpSocket\":{\"port\":6818},\"failureThreshold\":60,\"periodSeconds\":1}");
            expect_json(json_child(slurmd, "livenessProbe"),
                        "{\"tcpSocket\":{\"port\":6818},\"failureThreshold\":6,\"periodSeconds\":10}");
            expect_json(json_child(slurmd, "readinessProbe"), "{\"tcpSocket\":{\"port\":6818}}");
        } else {
            expect_json(json_child(slurmd, "readinessProbe"),
                        "{\"httpGet\":{\"path\":\"/readyz\",\"port\":\"slurmd\"}}");
        }
        cJSON_Delete(pod);
        fx_free(&f);
        free(js);
    }
}

/* Run script with bash; return its stdout (NUL-separated words). */
static char *bash_words(const char *script, size_t *len)
{
    char path[] = "/tmp/slurmop-args-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, script, strlen(script)), (ssize_t)strlen(script));
    close(fd);
    char *cmd = xasprintf("bash %s", path);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char *out = xcalloc(1, 65536);
    *len = fread(out, 1, 65535, f);
    assert_int_equal(pclose(f), 0);
    unlink(path);
    free(cmd);
    return out;
}

/* Split a Slurm node line as slurmctld does (on any white space). */
static size_t slurm_items(const char *conf, char items[][128], size_t max)
{
    size_t n = 0;
    const char *p = conf;
    while (*p && n < max) {
        while (*p && isspace((unsigned char)*p))
            p++;
        size_t k = 0;
        while (*p && !isspace((unsigned char)*p) && k < 127)
            items[n][k++] = *p++;
        items[n][k] = '\0';
        if (k)
            n++;
    }
    return n;
}

/* Issue 32: slurmd's arguments only worked when the image's entrypoint
 * re-evaluated them in a shell ('...' quotes, "$SLINKY_TOPOLOGY"), and an
 * empty topology left "Topology=" behind (Slinky issue 261). Now the args
 * are the same words whether passed literally or through a shell as
 * Slinky's entrypoints do ("exec slurmd $SLURMD_OPTIONS", SLURMD_OPTIONS
 * being the arguments joined by spaces), also after the entrypoint appends
 * an item to --conf; and no item is an empty Topology. */
static void test_slurmd_args_shell(void **state)
{
    (void)state;
    fx f;
    fx_init(&f, NODESET);
    cJSON *pod = build(&f, 1);
    const cJSON *args = json_child(json_get(pod, "spec.containers")->child, "args");
    const char *conf = NULL;
    buf_t joined;
    buf_init(&joined, BUF_UNLIMITED);
    for (const cJSON *a = args->child; a; a = a->next) {
        if (a->prev && a != args->child && strcmp(a->prev->valuestring, "--conf") == 0)
            conf = a->valuestring;
        assert_int_equal(buf_printf(&joined, "%s%s", joined.len ? " " : "", a->valuestring), 0);
    }
    assert_non_null(conf);

    /* Literally: slurmd gets the items, and no Topology. */
    char items[16][128];
    size_t n = slurm_items(conf, items, 16);
    assert_int_equal(n, 3);
    assert_string_equal(items[0], "Features=a100,cpu,gpu");
    assert_string_equal(items[1], "Gres=gpu:1");
    assert_string_equal(items[2], "Weight=10");

    /* Through a shell, with POD_TOPOLOGY / SLINKY_TOPOLOGY empty: the same words. */
    char *script = xasprintf("POD_TOPOLOGY=; SLINKY_TOPOLOGY=; printf '%%s\\0' %s\n", buf_cstr(&joined));
    size_t len = 0;
    char *out = bash_words(script, &len);
    size_t i = 0;
    for (const cJSON *a = args->child; a; a = a->next) {
        assert_true(i < len);
        assert_string_equal(out + i, a->valuestring);
        i += strlen(out + i) + 1;
    }
    assert_int_equal(i, len);
    free(out);
    free(script);

    /* An entrypoint that appends " CoreSpecCount=2" to the --conf value and
     * single-quotes the result (as Slinky's does when the pod's CPU limit is
     * below the machine's), evaluated by a shell: separate items, no empty
     * Topology. */
    script = xasprintf("printf '%%s\\0' '%s CoreSpecCount=2'\n", conf);
    out = bash_words(script, &len);
    n = slurm_items(out, items, 16);
    assert_int_equal(n, 4);
    assert_string_equal(items[3], "CoreSpecCount=2");
    for (size_t k = 0; k < n; k++)
        assert_true(strncmp(items[k], "Topology=", 9) != 0);
    free(out);
    free(script);

    /* The topology reaches the entrypoint in POD_TOPOLOGY. */
    const cJSON *env = json_child(json_get(pod, "spec.containers")->child, "env");
    assert_string_equal(json_get_str_or(env->child, "name", ""), "POD_TOPOLOGY");
    buf_free(&joined);
    cJSON_Delete(pod);
    fx_free(&f);
}

static void test_conf_server(void **state)
{
    cJSON *c = J(CONTROLLER);
    char *s = nsb_conf_server(c, "slurm");
    assert_string_equal(s, "slurm-controller.slurm:6817");
    free(s);
    cJSON_Delete(c);
    c = J("{\"metadata\":{\"name\":\"ext\"},\"spec\":{\"external\":true,\"externalConfig\":{\"host\":\"ctld."
          "example\","
          "\"port\":7817}}}");
    s = nsb_conf_server(c, "slurm");
    assert_string_equal(s, "ctld.example:7817");
    free(s);
    cJSON_Delete(c);
    c = J(
        "{\"metadata\":{\"name\":\"ext\"},\"spec\":{\"external\":true,\"externalConfig\":{\"host\":\"h\"}}}");
    assert_null(nsb_conf_server(c, "slurm"));
    cJSON_Delete(c);
}

static void test_quantity(void **state)
{
    /* quantity_parse itself: unit.core_basics. */
    /* Container limits win over pod-level limits, each only when set. */
    cJSON *n = J(
        "{\"spec\":{\"template\":{\"spec\":{\"resources\":{\"limits\":{\"cpu\":\"8\",\"memory\":\"2Gi\"}}}},"
        "\"slurmd\":{\"resources\":{\"limits\":{\"cpu\":\"2500m\"}}}}}");
    long long cpus, mem;
    nsb_resource_limits(n, &cpus, &mem);
    assert_int_equal(cpus, 3);
    assert_int_equal(mem, 2048);
    cJSON_Delete(n);
    n = J("{\"spec\":{}}");
    nsb_resource_limits(n, &cpus, &mem);
    assert_int_equal(cpus, 0);
    assert_int_equal(mem, 0);
    cJSON_Delete(n);
}

/* ---- the worker pod ---------------------------------------------------------------------------- */

/* The worker pod's logfile sidecar, run as PID 1 of a PID namespace: it
 * copies the log and exits promptly on SIGTERM (issue 32: a shell loop as
 * PID 1 ignored it and every pod delete waited the 30 s grace period). */
static void test_logfile_sigterm(void **state)
{
    (void)state;
    fx f;
    fx_init(&f, NODESET);
    cJSON *pod = build(&f, 0);
    const cJSON *cmd = json_child(json_get(pod, "spec.initContainers")->child, "command");
    const char *why = sh_check_logfile(cJSON_GetArrayItem(cmd, 2)->valuestring);
    cJSON_Delete(pod);
    fx_free(&f);
    if (why == SH_SKIP)
        skip();
    if (why)
        fprintf(stderr, "logfile sidecar: %s\n", why);
    assert_null(why);
}

static void test_pod_statefulset(void **state)
{
    fx f;
    fx_init(&f, NODESET);
    cJSON *pod = build(&f, 3);
    char empty_hash[65];
    sha256_hex("", 0, empty_hash);

    expect_str(pod, "apiVersion", "v1");
    expect_str(pod, "kind", "Pod");
    expect_str(pod, "metadata.name", "slurm-worker-cpu-03");
    expect_str(pod, "metadata.namespace", "slurm");
    assert_null(json_get(pod, "metadata.generateName"));

    /* Labels: operator labels win over the template's and the NodeSet's. */
    char *want_labels = xasprintf(
        "{\"app.kubernetes.io/name\":\"slurmd\",\"app.kubernetes.io/instance\":\"slurm-worker-cpu\","
        "\"app.kubernetes.io/component\":\"worker\",\"slinky.slurm.net/cluster\":\"slurm\","
        "\"nodeset.slinky.slurm.net/pod-index\":\"03\",\"nodeset.slinky.slurm.net/"
        "pod-name\":\"slurm-worker-cpu-03\","
        "\"nodeset.slinky.slurm.net/pod-hostname\":\"cpu-03\",\"nodeset.slinky.slurm.net/scaling-mode\":"
        "\"StatefulSet\",\"controller-revision-hash\":\"abc123\",\"team\":\"hpc\",\"helm.sh/"
        "chart\":\"slurm-1.3.0\"}");
    expect_json(json_get(pod, "metadata.labels"), want_labels);
    free(want_labels);
    char *want_ann =
        xasprintf("{\"kubectl.kubernetes.io/default-container\":\"slurmd\","
                  "\"slinky.slurm.net/sshd-conf-hash\":\"%s\",\"slinky.slurm.net/sssd-conf-hash\":\"%s\","
                  "\"note\":\"x\",\"team\":\"hpc\"}",
                  empty_hash, empty_hash);
    expect_json(json_get(pod, "metadata.annotations"), want_ann);
    free(want_ann);
    expect_json(
        json_get(pod, "metadata.ownerReferences"),
        "[{\"apiVersion\":\"slinky.slurm.net/v1beta1\",\"kind\":\"NodeSet\",\"name\":\"slurm-worker-cpu\","
        "\"uid\":\"uid-nss\",\"controller\":true,\"blockOwnerDeletion\":true}]");

    const cJSON *spec = json_child(pod, "spec");
    expect_str(spec, "hostname", "cpu-03");
    expect_str(spec, "subdomain", "slurm-workers-slurm");
    expect_json(json_child(spec, "dnsConfig"),
                "{\"searches\":[\"slurm-workers-slurm.slurm.svc.cluster.local\"]}");
    assert_true(cJSON_IsFalse(json_child(spec, "automountServiceAccountToken")));
    assert_true(cJSON_IsFalse(json_child(spec, "enableServiceLinks")));
    assert_null(json_child(spec, "nodeName"));
    expect_json(json_child(spec, "nodeSelector"), "{\"pool\":\"cpu\"}");

    /* Containers: slurmd first, the template's extra container after it. */
    const cJSON *containers = json_child(spec, "containers");
    assert_int_equal(json_len(containers), 2);
    const cJSON *slurmd = containers->child;
    expect_str(slurmd, "name", "slurmd");
    expect_str(slurmd, "image", "ghcr.io/slinkyproject/slurmd:26.05");
    expect_str(containers->child->next, "name", "sidecar");
    expect_json(
        json_child(slurmd, "args"),
        "[\"-Z\",\"--conf-server\",\"slurm-controller.slurm:6817\",\"--conf\","
        "\"Features=a100,cpu,gpu\\u000bGres=gpu:1\\u000bWeight=10\",\"-vvv\"]");
    expect_json(json_child(slurmd, "env"),
                "[{\"name\":\"POD_TOPOLOGY\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":"
                "\"metadata.annotations['topology.slinky.slurm.net/spec']\"}}},"
                "{\"name\":\"POD_CPUS\",\"value\":\"4\"},{\"name\":\"POD_MEMORY\",\"value\":\"8192\"}]");
    expect_json(json_child(slurmd, "ports"),
                "[{\"name\":\"slurmd\",\"containerPort\":6818,\"protocol\":\"TCP\"}]");
    expect_json(json_child(slurmd, "startupProbe"),
                "{\"httpGet\":{\"path\":\"/"
                "livez\",\"port\":\"slurmd\"},\"failureThreshold\":60,\"periodSeconds\":1}");
    expect_json(json_child(slurmd, "livenessProbe"),
                "{\"httpGet\":{\"path\":\"/"
                "livez\",\"port\":\"slurmd\"},\"failureThreshold\":6,\"periodSeconds\":10}");
    expect_json(json_child(slurmd, "readinessProbe"),
                "{\"httpGet\":{\"path\":\"/readyz\",\"port\":\"slurmd\"}}");
    expect_json(json_child(slurmd, "securityContext"), "{\"privileged\":true,\"capabilities\":{\"add\":["
                                                       "\"BPF\",\"NET_ADMIN\",\"SYS_ADMIN\",\"SYS_NICE\"]}}");
    expect_json(
        json_child(slurmd, "lifecycle"),
        "{\"preStop\":{\"exec\":{\"command\":[\"/usr/bin/sh\",\"-c\",\"scontrol update nodename=$(hostname) "
        "state=down reason='slurm-operator: Pod is terminating';\"]}}}");
    expect_json(json_child(slurmd, "volumeMounts"),
                "[{\"name\":\"slurm-etc\",\"mountPath\":\"/etc/slurm\",\"readOnly\":true},"
                "{\"name\":\"slurm-logfile\",\"mountPath\":\"/var/log/slurm\"}]");
    expect_json(json_child(slurmd, "resources"), "{\"limits\":{\"cpu\":\"4\",\"memory\":\"8Gi\"}}");

    /* The logfile native sidecar. */
    const cJSON *inits = json_child(spec, "initContainers");
    assert_int_equal(json_len(inits), 1);
    const cJSON *lf = inits->child;
    expect_str(lf, "name", "logfile");
    expect_str(lf, "image", "alpine:latest");
    expect_str(lf, "restartPolicy", "Always");
    expect_json(json_child(lf, "env"), "[{\"name\":\"SOCKET\",\"value\":\"/var/log/slurm/slurmd.log\"}]");
    expect_json(json_child(lf, "volumeMounts"),
                "[{\"name\":\"slurm-logfile\",\"mountPath\":\"/var/log/slurm\"}]");
    const cJSON *cmd = json_child(lf, "command");
    assert_int_equal(json_len(cmd), 3);
    assert_string_equal(cmd->child->valuestring, "sh");
    assert_non_null(strstr(cJSON_GetArrayItem(cmd, 2)->valuestring, "mkfifo"));

    /* Volumes: only the slurm key, the log emptyDir, then the template's. */
    expect_json(
        json_child(spec, "volumes"),
        "[{\"name\":\"slurm-etc\",\"projected\":{\"defaultMode\":384,\"sources\":[{\"secret\":{\"name\":"
        "\"slurm-auth-slurm\",\"items\":[{\"key\":\"slurm.key\",\"path\":\"slurm.key\"}]}}]}},"
        "{\"name\":\"slurm-logfile\",\"emptyDir\":{\"medium\":\"Memory\"}},"
        "{\"name\":\"scratch\",\"emptyDir\":{}}]");
    expect_json(
        json_child(spec, "tolerations"),
        "[{\"key\":\"nodeset.slinky.slurm.net/worker\",\"operator\":\"Equal\",\"effect\":\"NoExecute\"}]");
    expect_json(json_child(spec, "affinity"),
                "{\"podAntiAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":[{\"topologyKey\":"
                "\"kubernetes.io/hostname\",\"labelSelector\":{\"matchExpressions\":[{\"key\":"
                "\"app.kubernetes.io/name\",\"operator\":\"In\",\"values\":[\"slurmd\"]}]}}]}}");
    cJSON_Delete(pod);
    fx_free(&f);
}

static void test_pod_options(void **state)
{
    fx f;
    fx_init(&f, NODESET);
    nsb_pod_args a = {.nodeset = f.nodeset,
                      .controller = f.controller,
                      .ordinal = 0,
                      .cluster_domain = "k8s.example",
                      .sshd_conf_hash = "h-sshd",
                      .sssd_conf_hash = "h-sssd",
                      .pin_node = "node-7"};
    char err[128];
    cJSON *pod = nsb_build_pod(&a, err, sizeof(err));
    assert_non_null(pod);
    expect_str(pod, "metadata.name", "slurm-worker-cpu-00");
    expect_json(json_get(pod, "spec.dnsConfig"),
                "{\"searches\":[\"slurm-workers-slurm.slurm.svc.k8s.example\"]}");
    const cJSON *ann = json_get(pod, "metadata.annotations");
    assert_string_equal(child_str(ann, "slinky.slurm.net/sshd-conf-hash"), "h-sshd");
    assert_string_equal(child_str(ann, "slinky.slurm.net/sssd-conf-hash"), "h-sssd");
    /* No revision given: no label. */
    assert_null(child_str(json_get(pod, "metadata.labels"), "controller-revision-hash"));
    /* pinToNode: a required node affinity naming the node. */
    expect_json(
        json_get(pod, "spec.affinity.nodeAffinity"),
        "{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":[{\"matchFields\":"
        "[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"node-7\"]}]}]}}");
    cJSON_Delete(pod);
    fx_free(&f);
}

static void test_pod_ssh(void **state)
{
    fx f;
    fx_init(
        &f,
        "{\"metadata\":{\"name\":\"login\",\"namespace\":\"ns\",\"uid\":\"u\"},\"spec\":{\"controllerRef\":"
        "{\"name\":\"c1\"},\"ssh\":{\"enabled\":true,\"sssdConfRef\":{\"name\":\"sssd\",\"key\":\"sssd."
        "conf\"}}}}");
    cJSON *pod = build(&f, 0);
    const cJSON *spec = json_child(pod, "spec");
    expect_json(
        find_named(json_child(spec, "volumes"), "ssh-config"),
        "{\"name\":\"ssh-config\",\"projected\":{\"defaultMode\":384,\"sources\":[{\"configMap\":{\"name\":"
        "\"login-ssh-config\",\"items\":[{\"key\":\"sshd_config\",\"path\":\"sshd_config\",\"mode\":384}]}}]}"
        "}");
    expect_json(
        find_named(json_child(spec, "volumes"), "sssd-conf"),
        "{\"name\":\"sssd-conf\",\"projected\":{\"defaultMode\":384,\"sources\":[{\"secret\":{\"name\":"
        "\"sssd\",\"items\":[{\"key\":\"sssd.conf\",\"path\":\"sssd.conf\",\"mode\":384}]}}]}}");
    const cJSON *slurmd = json_child(spec, "containers")->child;
    expect_json(json_child(slurmd, "ports"),
                "[{\"name\":\"slurmd\",\"containerPort\":6818,\"protocol\":\"TCP\"},"
                "{\"name\":\"ssh\",\"containerPort\":22,\"protocol\":\"TCP\"}]");
    const cJSON *mounts = json_child(slurmd, "volumeMounts");
    assert_int_equal(json_len(mounts), 4);
    expect_json(cJSON_GetArrayItem(mounts, 2),
                "{\"name\":\"ssh-config\",\"mountPath\":\"/etc/ssh/sshd_config\","
                "\"subPath\":\"sshd_config\",\"readOnly\":true}");
    expect_json(cJSON_GetArrayItem(mounts, 3),
                "{\"name\":\"sssd-conf\",\"mountPath\":\"/etc/sssd/sssd.conf\","
                "\"subPath\":\"sssd.conf\",\"readOnly\":true}");
    /* No hostname prefix: hostname is the pod name. */
    expect_str(spec, "hostname", "login-0");
    cJSON_Delete(pod);
    fx_free(&f);
}

static void test_pod_template_merge(void **state)
{
    /* The user's tolerations replace the list (no merge key) yet the worker
     * toleration stays; the user's own anti-affinity keeps its terms and
     * gains ours; oversubscribeNode drops ours; a user volume with a base
     * name merges into it; probes from spec.slurmd replace the handler. */
    fx f;
    fx_init(
        &f,
        "{\"metadata\":{\"name\":\"n\",\"namespace\":\"ns\",\"uid\":\"u\"},\"spec\":{\"controllerRef\":{"
        "\"name\":\"c\"},\"slurmd\":{\"readinessProbe\":{\"tcpSocket\":{\"port\":6818}},\"env\":[{\"name\":"
        "\"POD_CPUS\",\"value\":\"64\"}]},\"template\":{\"spec\":{\"tolerations\":[{\"key\":\"gpu\","
        "\"operator\":\"Exists\"}],\"affinity\":{\"podAntiAffinity\":{\"requiredDuringSchedulingIgnoredDuring"
        "Execution\":[{\"topologyKey\":\"zone\",\"labelSelector\":{\"matchLabels\":{\"a\":\"b\"}}}]}},"
        "\"volumes\":[{\"name\":\"slurm-logfile\",\"emptyDir\":{\"sizeLimit\":\"1Gi\"}}],"
        "\"initContainers\":[{\"name\":\"setup\",\"image\":\"busybox\"}]}}}}");
    cJSON *pod = build(&f, 1);
    const cJSON *spec = json_child(pod, "spec");
    expect_json(
        json_child(spec, "tolerations"),
        "[{\"key\":\"nodeset.slinky.slurm.net/worker\",\"operator\":\"Equal\",\"effect\":\"NoExecute\"},"
        "{\"key\":\"gpu\",\"operator\":\"Exists\"}]");
    const cJSON *terms =
        json_get(spec, "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution");
    assert_int_equal(json_len(terms), 2);
    expect_str(terms->child, "topologyKey", "zone");
    expect_str(terms->child->next, "topologyKey", "kubernetes.io/hostname");
    expect_json(find_named(json_child(spec, "volumes"), "slurm-logfile"),
                "{\"name\":\"slurm-logfile\",\"emptyDir\":{\"medium\":\"Memory\",\"sizeLimit\":\"1Gi\"}}");
    const cJSON *inits = json_child(spec, "initContainers");
    assert_int_equal(json_len(inits), 2);
    expect_str(inits->child, "name", "logfile");
    expect_str(inits->child->next, "name", "setup");
    const cJSON *slurmd = json_child(spec, "containers")->child;
    expect_json(json_child(slurmd, "readinessProbe"), "{\"tcpSocket\":{\"port\":6818}}");
    expect_str(find_named(json_child(slurmd, "env"), "POD_CPUS"), "value", "64");
    cJSON_Delete(pod);
    fx_free(&f);

    fx_init(&f,
            "{\"metadata\":{\"name\":\"n\",\"namespace\":\"ns\",\"uid\":\"u\"},\"spec\":{\"controllerRef\":{"
            "\"name\":\"c\"},\"oversubscribeNode\":true}}");
    pod = build(&f, 0);
    assert_null(json_get(pod, "spec.affinity"));
    cJSON_Delete(pod);
    fx_free(&f);
}

static void test_pod_daemonset(void **state)
{
    fx f;
    fx_init(
        &f,
        "{\"metadata\":{\"name\":\"gpu\",\"namespace\":\"ns\",\"uid\":\"u\"},\"spec\":{\"controllerRef\":{"
        "\"name\":\"c\"},\"scalingMode\":\"DaemonSet\",\"ordinalPadding\":3,"
        "\"volumeClaimTemplates\":[{\"metadata\":{\"name\":\"data\"},\"spec\":{}}],"
        "\"template\":{\"spec\":{\"hostname\":\"ignored-\",\"nodeName\":\"forced\",\"affinity\":{"
        "\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":[{"
        "\"matchExpressions\":[{\"key\":\"gpu\",\"operator\":\"Exists\"}]}]},"
        "\"preferredDuringSchedulingIgnoredDuringExecution\":[{\"weight\":1,\"preference\":{}}]}}}}}}");
    nsb_pod_args a = {
        .nodeset = f.nodeset, .controller = f.controller, .revision = "r1", .node_name = "node-9.dc"};
    char err[128];
    cJSON *pod = nsb_build_pod(&a, err, sizeof(err));
    assert_non_null(pod);
    assert_null(json_get(pod, "metadata.name"));
    expect_str(pod, "metadata.generateName", "gpu-");
    const cJSON *labels = json_get(pod, "metadata.labels");
    assert_null(child_str(labels, "nodeset.slinky.slurm.net/pod-index"));
    assert_string_equal(child_str(labels, "nodeset.slinky.slurm.net/pod-name"), "");
    assert_string_equal(child_str(labels, "nodeset.slinky.slurm.net/pod-hostname"), "node-9");
    assert_string_equal(child_str(labels, "nodeset.slinky.slurm.net/scaling-mode"), "DaemonSet");
    expect_str(pod, "spec.hostname", "node-9");
    assert_null(json_get(pod, "spec.nodeName"));
    expect_json(
        json_get(pod, "spec.affinity.nodeAffinity"),
        "{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":[{\"matchFields\":[{"
        "\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":[\"node-9.dc\"]}]}]},"
        "\"preferredDuringSchedulingIgnoredDuringExecution\":[{\"weight\":1,\"preference\":{}}]}");
    const cJSON *tols = json_get(pod, "spec.tolerations");
    assert_int_equal(json_len(tols), 7); /* worker + 6 DaemonSet tolerations (no hostNetwork) */
    static const char *const keys[] = {
        "nodeset.slinky.slurm.net/worker",    "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",     "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/memory-pressure", "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/unschedulable"};
    const cJSON *t = tols->child;
    for (size_t i = 0; i < 7; i++, t = t->next)
        assert_string_equal(child_str(t, "key"), keys[i]);
    expect_json(
        cJSON_GetArrayItem(tols, 1),
        "{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":\"NoExecute\"}");
    /* PVCs in DaemonSet mode are named after the pod's hostname. */
    expect_json(json_get(pod, "spec.volumes")->child,
                "{\"name\":\"data\",\"persistentVolumeClaim\":{\"claimName\":\"data-gpu-node-9\"}}");
    cJSON_Delete(pod);

    /* The override annotation names the host; hostNetwork adds one more toleration. */
    a.node_hostname_override = "gpu-17";
    json_set_bool(json_obj_path_ensure(f.nodeset, "spec.template.spec"), "hostNetwork", 1);
    pod = nsb_build_pod(&a, err, sizeof(err));
    expect_str(pod, "spec.hostname", "gpu-17");
    assert_int_equal(json_len(json_get(pod, "spec.tolerations")), 8);
    cJSON_Delete(pod);

    a.node_name = NULL;
    assert_null(nsb_build_pod(&a, err, sizeof(err)));
    fx_free(&f);
}

static void test_pod_pvcs_and_errors(void **state)
{
    fx f;
    fx_init(
        &f,
        "{\"metadata\":{\"name\":\"db\",\"namespace\":\"ns\",\"uid\":\"u\"},\"spec\":{\"controllerRef\":{"
        "\"name\":\"c\"},\"ordinalPadding\":2,\"volumeClaimTemplates\":[{\"metadata\":{\"name\":\"data\"}},"
        "{\"metadata\":{\"name\":\"logs\"}}],\"template\":{\"spec\":{\"volumes\":[{\"name\":\"data\","
        "\"emptyDir\":{}},{\"name\":\"keep\",\"emptyDir\":{}}]}}}}");
    cJSON *pod = build(&f, 3);
    expect_json(
        json_get(pod, "spec.volumes"),
        "[{\"name\":\"data\",\"persistentVolumeClaim\":{\"claimName\":\"data-db-03\"}},"
        "{\"name\":\"logs\",\"persistentVolumeClaim\":{\"claimName\":\"logs-db-03\"}},"
        "{\"name\":\"slurm-etc\",\"projected\":{\"defaultMode\":384,\"sources\":[{\"secret\":{\"name\":"
        "\"slurm-auth-slurm\",\"items\":[{\"key\":\"slurm.key\",\"path\":\"slurm.key\"}]}}]}},"
        "{\"name\":\"slurm-logfile\",\"emptyDir\":{\"medium\":\"Memory\"}},"
        "{\"name\":\"keep\",\"emptyDir\":{}}]");
    cJSON_Delete(pod);

    /* hostNetwork in StatefulSet mode: the Slurm node name is the k8s node's,
     * unknown until scheduling, so the label starts empty. */
    json_set_bool(json_obj_path_ensure(f.nodeset, "spec.template.spec"), "hostNetwork", 1);
    pod = build(&f, 0);
    assert_string_equal(child_str(json_get(pod, "metadata.labels"), "nodeset.slinky.slurm.net/pod-hostname"),
                        "");
    cJSON_Delete(pod);

    char err[160];
    nsb_pod_args a = {.nodeset = f.nodeset, .controller = f.controller};
    cJSON *ctl = J("{\"metadata\":{\"name\":\"c\"},\"spec\":{}}");
    a.controller = ctl;
    err[0] = '\0';
    assert_null(nsb_build_pod(&a, err, sizeof(err)));
    assert_non_null(strstr(err, "slurmKeyRef"));
    cJSON_Delete(ctl);
    ctl = J("{\"metadata\":{\"name\":\"c\"},\"spec\":{\"external\":true,\"slurmKeyRef\":{\"name\":\"k\","
            "\"key\":\"k\"}}}");
    a.controller = ctl;
    assert_null(nsb_build_pod(&a, err, sizeof(err)));
    assert_non_null(strstr(err, "external"));
    cJSON_Delete(ctl);
    ctl = J("{\"metadata\":{\"name\":\"c\"},\"spec\":{\"external\":true,\"externalConfig\":{\"host\":\"10.0."
            "0.1\","
            "\"port\":6817},\"slurmKeyRef\":{\"name\":\"k\",\"key\":\"kk\"}}}");
    a.controller = ctl;
    pod = nsb_build_pod(&a, err, sizeof(err));
    assert_non_null(pod);
    const cJSON *args = json_get(pod, "spec.containers")->child;
    assert_string_equal(cJSON_GetArrayItem(json_child(args, "args"), 2)->valuestring, "10.0.0.1:6817");
    cJSON_Delete(pod);
    cJSON_Delete(ctl);
    a.controller = f.controller;
    json_set_str(json_obj_ensure(f.nodeset, "spec"), "extraConf", "bad");
    assert_null(nsb_build_pod(&a, err, sizeof(err)));
    fx_free(&f);
}

static void test_stamp_pod(void **state)
{
    /* One template, many pods: identical to building each pod from scratch,
     * and the template is left untouched. */
    fx f;
    fx_init(&f, NODESET);
    nsb_pod_args a = {.nodeset = f.nodeset, .controller = f.controller, .revision = "r"};
    char err[128];
    cJSON *tmpl = nsb_build_template(&a, err, sizeof(err));
    assert_non_null(tmpl);
    cJSON *copy = cJSON_Duplicate(tmpl, 1);
    for (int ord = 0; ord < 5; ord++) {
        a.ordinal = ord;
        cJSON *x = nsb_build_pod(&a, err, sizeof(err)), *y = nsb_stamp_pod(&a, tmpl, err, sizeof(err));
        /* Both built: json_equal(NULL, NULL) is true, which proves nothing. */
        assert_non_null(x);
        assert_non_null(y);
        if (!json_equal(x, y)) {
            char *xs = json_dump(x), *ys = json_dump(y);
            fail_msg("ordinal %d: built %s, stamped %s", ord, xs, ys);
        }
        cJSON_Delete(x);
        cJSON_Delete(y);
    }
    assert_true(json_equal(tmpl, copy));
    cJSON_Delete(copy);
    cJSON_Delete(tmpl);
    fx_free(&f);
}

/* ---- DaemonSet eligibility --------------------------------------------------------------------- */

static void test_daemon_fit(void **state)
{
    fx f;
    fx_init(
        &f,
        "{\"metadata\":{\"name\":\"gpu\",\"namespace\":\"ns\",\"uid\":\"u\"},\"spec\":{\"controllerRef\":{"
        "\"name\":\"c\"},\"scalingMode\":\"DaemonSet\",\"template\":{\"spec\":{\"nodeSelector\":{\"pool\":"
        "\"gpu\"},\"tolerations\":[{\"key\":\"dedicated\",\"operator\":\"Equal\",\"value\":\"slurm\","
        "\"effect\":\"NoSchedule\"}],\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuring"
        "Execution\":{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\","
        "\"values\":[\"a\",\"b\"]}]}]}}}}}}}");
    nsb_pod_args a = {.nodeset = f.nodeset, .controller = f.controller};
    char err[128];
    cJSON *sim = nsb_daemon_sim_spec(&a, err, sizeof(err));
    assert_non_null(sim);
    static const struct {
        const char *node;
        int run, cont;
    } cases[] = {
        /* fits */
        {"{\"metadata\":{\"name\":\"n1\",\"labels\":{\"pool\":\"gpu\",\"zone\":\"a\"}}}", 1, 1},
        /* nodeSelector mismatch */
        {"{\"metadata\":{\"name\":\"n2\",\"labels\":{\"pool\":\"cpu\",\"zone\":\"a\"}}}", 0, 0},
        /* required node affinity mismatch */
        {"{\"metadata\":{\"name\":\"n3\",\"labels\":{\"pool\":\"gpu\",\"zone\":\"c\"}}}", 0, 0},
        /* untolerated NoSchedule: no new pod, an existing one may stay */
        {"{\"metadata\":{\"name\":\"n4\",\"labels\":{\"pool\":\"gpu\",\"zone\":\"b\"}},\"spec\":{\"taints\":["
         "{"
         "\"key\":\"maint\",\"effect\":\"NoSchedule\"}]}}",
         0, 1},
        /* untolerated NoExecute: neither */
        {"{\"metadata\":{\"name\":\"n5\",\"labels\":{\"pool\":\"gpu\",\"zone\":\"b\"}},\"spec\":{\"taints\":["
         "{"
         "\"key\":\"broken\",\"effect\":\"NoExecute\"}]}}",
         0, 0},
        /* tolerated by the user's toleration */
        {"{\"metadata\":{\"name\":\"n6\",\"labels\":{\"pool\":\"gpu\",\"zone\":\"b\"}},\"spec\":{\"taints\":["
         "{"
         "\"key\":\"dedicated\",\"value\":\"slurm\",\"effect\":\"NoSchedule\"}]}}",
         1, 1},
        /* the worker taint and a cordon are tolerated by every worker pod */
        {"{\"metadata\":{\"name\":\"n7\",\"labels\":{\"pool\":\"gpu\",\"zone\":\"b\"}},\"spec\":{"
         "\"unschedulable\":"
         "true,\"taints\":[{\"key\":\"nodeset.slinky.slurm.net/worker\",\"effect\":\"NoExecute\"},{\"key\":"
         "\"node.kubernetes.io/unschedulable\",\"effect\":\"NoSchedule\"}]}}",
         1, 1},
        /* PreferNoSchedule never blocks */
        {"{\"metadata\":{\"name\":\"n8\",\"labels\":{\"pool\":\"gpu\",\"zone\":\"a\"}},\"spec\":{\"taints\":["
         "{"
         "\"key\":\"x\",\"effect\":\"PreferNoSchedule\"}]}}",
         1, 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cJSON *node = J(cases[i].node);
        fit_result r;
        nsb_daemon_fit(sim, node, &r);
        if (r.should_run != cases[i].run || r.should_continue != cases[i].cont)
            fprintf(stderr, "case %zu: run %d cont %d (%s)\n", i, r.should_run, r.should_continue,
                    r.reason ? r.reason : "");
        assert_int_equal(r.should_run, cases[i].run);
        assert_int_equal(r.should_continue, cases[i].cont);
        cJSON_Delete(node);
    }
    cJSON_Delete(sim);
    fx_free(&f);
}

/* ---- revisions --------------------------------------------------------------------------------- */

static char *hash_of(const cJSON *nodeset, int32_t cc)
{
    cJSON *patch = nsb_revision_patch(nodeset);
    char h[NSB_HASH_MAX];
    nsb_revision_hash(patch, cc, h);
    cJSON_Delete(patch);
    return xstrdup(h);
}

static void test_revision_patch(void **state)
{
    fx f;
    fx_init(&f, NODESET);
    cJSON *patch = nsb_revision_patch(f.nodeset);
    char *canon = json_canonical(patch);
    assert_string_equal(
        canon,
        "{\"spec\":{\"extraConf\":\"Features=gpu,a100 Gres=gpu:1 feature=a100 "
        "weight=10\",\"logfile\":{\"$patch\":"
        "\"replace\",\"image\":\"alpine:latest\"},\"ordinalPadding\":2,\"oversubscribeNode\":false,"
        "\"slurmd\":{"
        "\"$patch\":\"replace\",\"args\":[\"-vvv\"],\"image\":\"ghcr.io/slinkyproject/"
        "slurmd:26.05\",\"resources\":{"
        "\"limits\":{\"cpu\":\"4\",\"memory\":\"8Gi\"}}},\"template\":{\"$patch\":\"replace\",\"metadata\":{"
        "\"annotations\":{\"note\":\"x\"},\"labels\":{\"app.kubernetes.io/"
        "instance\":\"nope\",\"team\":\"hpc\"}},"
        "\"spec\":{\"containers\":[{\"image\":\"busybox\",\"name\":\"sidecar\"}],\"hostname\":\"cpu-\","
        "\"nodeSelector\":{\"pool\":\"cpu\"},\"volumes\":[{\"emptyDir\":{},\"name\":\"scratch\"}]}}}}");
    free(canon);
    cJSON_Delete(patch);

    /* Minimal NodeSet: template is always there, the optional parts are not. */
    cJSON *n = J("{\"metadata\":{\"name\":\"a\"},\"spec\":{\"slurmd\":{},\"extraConf\":\"\"}}");
    patch = nsb_revision_patch(n);
    canon = json_canonical(patch);
    assert_string_equal(
        canon, "{\"spec\":{\"ordinalPadding\":0,\"oversubscribeNode\":false,\"template\":{\"$patch\":"
               "\"replace\"}}}");
    free(canon);
    cJSON_Delete(patch);
    cJSON_Delete(n);

    /* Canonical numbers: integers without exponent, others round-trip. */
    n = J("{\"b\":[1,2.5,-3,1e20,0.1],\"a\":null,\"c\":true}");
    canon = json_canonical(n);
    assert_string_equal(canon, "{\"a\":null,\"b\":[1,2.5,-3,1e+20,0.10000000000000001],\"c\":true}");
    free(canon);
    cJSON_Delete(n);
    fx_free(&f);
}

static void test_revision_hash(void **state)
{
    fx f;
    fx_init(&f, NODESET);
    char *base = hash_of(f.nodeset, 0);
    /* Stable across runs and machines: this exact value is part of the
     * contract (changing it rolls every pod of every cluster on upgrade). */
    assert_string_equal(base, "f896995c9");
    assert_true(strlen(base) >= 1 && strlen(base) <= 10);
    for (const char *c = base; *c; c++)
        assert_non_null(strchr("bcdfghjklmnpqrstvwxz2456789", *c));

    /* Same content in another key order: same hash. */
    cJSON *reordered =
        J("{\"spec\":{\"ordinalPadding\":2,\"template\":{\"spec\":{\"volumes\":[{\"emptyDir\":{},"
          "\"name\":\"scratch\"}],\"nodeSelector\":{\"pool\":\"cpu\"},\"hostname\":\"cpu-\","
          "\"containers\":[{\"image\":\"busybox\",\"name\":\"sidecar\"}]},\"metadata\":{\"labels\":{"
          "\"team\":\"hpc\",\"app.kubernetes.io/instance\":\"nope\"},\"annotations\":{\"note\":\"x\"}}},"
          "\"logfile\":{\"image\":\"alpine:latest\"},\"slurmd\":{\"resources\":{\"limits\":{"
          "\"memory\":\"8Gi\",\"cpu\":\"4\"}},\"image\":\"ghcr.io/slinkyproject/slurmd:26.05\",\"args\":"
          "[\"-vvv\"]},\"extraConf\":\"Features=gpu,a100 Gres=gpu:1 feature=a100 weight=10\","
          "\"controllerRef\":{\"name\":\"slurm\"}},\"metadata\":{\"name\":\"slurm-worker-cpu\"}}");
    char *h = hash_of(reordered, 0);
    assert_string_equal(h, base);
    free(h);
    cJSON_Delete(reordered);

    /* Fields outside the patch never change the hash. */
    static const char *const same[][2] = {
        {"replicas", "17"},
        {"minReadySeconds", "30"},
        {"revisionHistoryLimit", "5"},
        {"updateStrategy", "{\"type\":\"OnDelete\"}"},
        {"pinToNode", "true"},
        {"partition", "{\"enabled\":true}"},
        {"persistentVolumeClaimRetentionPolicy", "{\"whenScaled\":\"Delete\"}"}};
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        cJSON *n = cJSON_Duplicate(f.nodeset, 1);
        json_set(json_obj_ensure(n, "spec"), same[i][0], J(same[i][1]));
        h = hash_of(n, 0);
        if (strcmp(h, base) != 0)
            fprintf(stderr, "changing %s changed the hash\n", same[i][0]);
        assert_string_equal(h, base);
        free(h);
        cJSON_Delete(n);
    }
    /* Fields inside it do. */
    static const char *const differ[][2] = {{"extraConf", "\"Weight=2\""},
                                            {"ordinalPadding", "3"},
                                            {"oversubscribeNode", "true"},
                                            {"slurmd", "{\"image\":\"slurmd:27\"}"},
                                            {"logfile", "{\"image\":\"busybox\"}"},
                                            {"ssh", "{\"enabled\":true}"},
                                            {"template", "{\"spec\":{\"hostname\":\"gpu-\"}}"}};
    for (size_t i = 0; i < sizeof(differ) / sizeof(differ[0]); i++) {
        cJSON *n = cJSON_Duplicate(f.nodeset, 1);
        json_set(json_obj_ensure(n, "spec"), differ[i][0], J(differ[i][1]));
        h = hash_of(n, 0);
        if (strcmp(h, base) == 0)
            fprintf(stderr, "changing %s kept the hash\n", differ[i][0]);
        assert_string_not_equal(h, base);
        free(h);
        cJSON_Delete(n);
    }
    /* A template label change also rolls. */
    cJSON *n = cJSON_Duplicate(f.nodeset, 1);
    json_set_str(json_obj_path_ensure(n, "spec.template.metadata.labels"), "team", "ops");
    h = hash_of(n, 0);
    assert_string_not_equal(h, base);
    free(h);
    cJSON_Delete(n);
    /* The collision count takes part. */
    h = hash_of(f.nodeset, 1);
    assert_string_not_equal(h, base);
    free(h);
    free(base);
    fx_free(&f);

    assert_string_equal(nsb_revision_hash_part("cpu-abc", "cpu"), "abc");
    assert_string_equal(nsb_revision_hash_part("abc", "cpu"), "abc");
    assert_string_equal(nsb_revision_hash_part("cpu-", "cpu"), "cpu-");
    assert_true(nsb_revision_same("cpu-abc", "abc", "cpu"));
    assert_true(nsb_revision_same("abc", "abc", "cpu"));
    assert_false(nsb_revision_same("abc", "abd", "cpu"));
    assert_false(nsb_revision_same(NULL, "abc", "cpu"));
    assert_false(nsb_revision_same("", "", "cpu"));
}

static void test_build_revision(void **state)
{
    fx f;
    fx_init(&f, NODESET);
    cJSON *patch = nsb_revision_patch(f.nodeset);
    cJSON *cr = nsb_build_revision(f.nodeset, patch, "f896995c9", 4);
    expect_str(cr, "apiVersion", "apps/v1");
    expect_str(cr, "kind", "ControllerRevision");
    expect_str(cr, "metadata.name", "slurm-worker-cpu-f896995c9");
    expect_str(cr, "metadata.namespace", "slurm");
    expect_json(json_get(cr, "metadata.labels"),
                "{\"app.kubernetes.io/name\":\"slurmd\",\"app.kubernetes.io/instance\":\"slurm-worker-cpu\","
                "\"controller-revision-hash\":\"f896995c9\",\"team\":\"hpc\"}");
    expect_json(json_get(cr, "metadata.annotations"), "{\"team\":\"hpc\"}");
    expect_json(
        json_get(cr, "metadata.ownerReferences"),
        "[{\"apiVersion\":\"slinky.slurm.net/v1beta1\",\"kind\":\"NodeSet\",\"name\":\"slurm-worker-cpu\","
        "\"uid\":\"uid-nss\",\"controller\":true,\"blockOwnerDeletion\":true}]");
    assert_true(json_equal(json_child(cr, "data"), patch));
    assert_int_equal(json_get_int(cr, "revision", 0), 4);
    assert_false(nsb_revision_collides(cr, patch));
    cJSON *other = J("{\"spec\":{}}");
    assert_true(nsb_revision_collides(cr, other));
    cJSON_Delete(other);
    cJSON_Delete(cr);
    cJSON_Delete(patch);
    fx_free(&f);
}

static void test_plan_revisions(void **state)
{
    cJSON *p1 = J("{\"spec\":{\"template\":{\"v\":1}}}"), *p2 = J("{\"spec\":{\"template\":{\"v\":2}}}");
    cJSON *p3 = J("{\"spec\":{\"template\":{\"v\":3}}}");
    char h1[NSB_HASH_MAX], h2[NSB_HASH_MAX], h3[NSB_HASH_MAX];
    nsb_revision_hash(p1, 0, h1);
    nsb_revision_hash(p2, 0, h2);
    nsb_revision_hash(p3, 0, h3);
    char *n1 = nsb_revision_name("cpu", h1), *n2 = nsb_revision_name("cpu", h2);
    nsb_rev_plan plan;

    /* Nothing yet: create revision 1. */
    nsb_plan_revisions(NULL, 0, p1, 0, NULL, "cpu", &plan);
    assert_int_equal(plan.action, NSB_REV_CREATE);
    assert_int_equal(plan.update, -1);
    assert_int_equal(plan.current, -1);
    assert_string_equal(plan.hash, h1);
    assert_int_equal(plan.revision, 1);
    assert_int_equal(plan.collision_count, 0);

    nsb_rev revs[2] = {{n1, h1, 1, p1, 0}, {n2, h2, 2, p2, 0}};
    /* The newest equals the patch: reuse; current from status (name form). */
    nsb_plan_revisions(revs, 2, p2, 0, n1, "cpu", &plan);
    assert_int_equal(plan.action, NSB_REV_REUSE);
    assert_int_equal(plan.update, 1);
    assert_int_equal(plan.current, 0);
    assert_int_equal(plan.revision, 2);
    assert_string_equal(plan.hash, h2);
    /* An older one equals the patch (rollback): bump it to 3; current (bare hash form). */
    nsb_plan_revisions(revs, 2, p1, 0, h2, "cpu", &plan);
    assert_int_equal(plan.action, NSB_REV_BUMP);
    assert_int_equal(plan.update, 0);
    assert_int_equal(plan.current, 1);
    assert_int_equal(plan.revision, 3);
    assert_string_equal(plan.hash, h1);
    /* Nothing equal: create revision 3; unknown status hash: current -1. */
    nsb_plan_revisions(revs, 2, p3, 0, "gone", "cpu", &plan);
    assert_int_equal(plan.action, NSB_REV_CREATE);
    assert_int_equal(plan.revision, 3);
    assert_string_equal(plan.hash, h3);
    assert_int_equal(plan.current, -1);

    /* A listed revision holds the name p3 would get, with other data: the
     * collision count moves on and the name changes. */
    char *n3 = nsb_revision_name("cpu", h3);
    nsb_rev clash[1] = {{n3, h3, 7, p1, 0}};
    nsb_plan_revisions(clash, 1, p3, 0, NULL, "cpu", &plan);
    assert_int_equal(plan.action, NSB_REV_CREATE);
    assert_int_equal(plan.collision_count, 1);
    char h3b[NSB_HASH_MAX];
    nsb_revision_hash(p3, 1, h3b);
    assert_string_equal(plan.hash, h3b);
    assert_string_not_equal(plan.hash, h3);
    assert_int_equal(plan.revision, 8);
    free(n3);

    free(n1);
    free(n2);
    cJSON_Delete(p1);
    cJSON_Delete(p2);
    cJSON_Delete(p3);
}

/* A NodeSet taken over from Slinky: its ControllerRevision holds the same
 * template in Go's serialization (zero values written out). It is reused, so
 * the pods it labelled are at the update revision and nothing rolls; a real
 * change (another image) still makes a new revision, and a revision of ours
 * keeps the strict comparison. */
static void test_plan_revisions_slinky(void **state)
{
    cJSON *ns = J("{\"metadata\":{\"name\":\"cpu\"},\"spec\":{\"replicas\":2,\"extraConf\":\"Features=cpu\","
                  "\"slurmd\":{\"image\":\"slurmd:25.11\"},"
                  "\"template\":{\"spec\":{\"hostname\":\"cpu-\"}}}}");
    cJSON *ours = nsb_revision_patch(ns);
    /* What Slinky 1.2.1 stores for that NodeSet (json.Marshal of its Go types). */
    cJSON *go =
        J("{\"spec\":{\"template\":{\"$patch\":\"replace\",\"metadata\":{},"
          "\"spec\":{\"hostname\":\"cpu-\",\"containers\":null,\"resources\":{}}},"
          "\"ordinalPadding\":0,\"oversubscribeNode\":false,"
          "\"slurmd\":{\"$patch\":\"replace\",\"image\":\"slurmd:25.11\",\"resources\":{},\"args\":[]},"
          "\"extraConf\":\"Features=cpu\"}}");
    assert_false(json_equal(go, ours));
    assert_true(nsb_revision_equivalent(go, ours));
    assert_true(nsb_revision_equivalent(ours, go));
    nsb_rev revs[1] = {{"cpu-7b9d5c8f4", "7b9d5c8f4", 1, go, 1}};
    nsb_rev_plan plan;
    nsb_plan_revisions(revs, 1, ours, 0, "cpu-7b9d5c8f4", "cpu", &plan);
    assert_int_equal(plan.action, NSB_REV_REUSE);
    assert_int_equal(plan.update, 0);
    assert_int_equal(plan.current, 0);
    assert_string_equal(plan.hash, "7b9d5c8f4");
    assert_int_equal(plan.revision, 1);
    /* The same data under our label: only json_equal counts. */
    revs[0].slinky = 0;
    nsb_plan_revisions(revs, 1, ours, 0, NULL, "cpu", &plan);
    assert_int_equal(plan.action, NSB_REV_CREATE);
    assert_int_equal(plan.revision, 2);
    /* Slinky's, but for another image: a new revision (the pods roll). */
    revs[0].slinky = 1;
    cJSON *other = cJSON_Duplicate(go, 1);
    json_set_str(json_obj_path_ensure(other, "spec.slurmd"), "image", "slurmd:26.05");
    revs[0].data = other;
    assert_false(nsb_revision_equivalent(other, ours));
    nsb_plan_revisions(revs, 1, ours, 0, NULL, "cpu", &plan);
    assert_int_equal(plan.action, NSB_REV_CREATE);
    /* Zero list elements are values, not absence. */
    cJSON *l1 = J("{\"a\":[0,\"\",{}]}"), *l2 = J("{\"a\":[0]}"), *l3 = J("{\"a\":[0,\"\",{\"x\":null}]}");
    assert_false(nsb_revision_equivalent(l1, l2));
    assert_true(nsb_revision_equivalent(l1, l3));
    cJSON_Delete(l1);
    cJSON_Delete(l2);
    cJSON_Delete(l3);
    cJSON_Delete(other);
    cJSON_Delete(go);
    cJSON_Delete(ours);
    cJSON_Delete(ns);
}

static void test_truncate_history(void **state)
{
    cJSON *d = J("{}");
    nsb_rev revs[5] = {{"cpu-r1", "r1", 1, d, 0},
                       {"cpu-r4", "r4", 4, d, 0},
                       {"cpu-r2", "r2", 2, d, 0},
                       {"cpu-r5", "r5", 5, d, 0},
                       {"cpu-r3", "r3", 3, d, 0}};
    /* Live: update (name form), current (hash form), a pod's label. */
    const char *live[] = {"cpu-r5", "r2", "cpu-r3"};
    size_t out[5];
    size_t n = nsb_truncate_history(revs, 5, live, 3, 0, "cpu", out);
    assert_int_equal(n, 2);
    assert_int_equal(out[0], 0); /* r1, the oldest */
    assert_int_equal(out[1], 1); /* r4 */
    n = nsb_truncate_history(revs, 5, live, 3, 1, "cpu", out);
    assert_int_equal(n, 1);
    assert_int_equal(out[0], 0);
    assert_int_equal(nsb_truncate_history(revs, 5, live, 3, 2, "cpu", out), 0);
    assert_int_equal(nsb_truncate_history(revs, 5, live, 3, 10, "cpu", out), 0);
    /* Nothing live: keep the newest `limit`. */
    n = nsb_truncate_history(revs, 5, NULL, 0, 2, "cpu", out);
    assert_int_equal(n, 3);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 2);
    assert_int_equal(out[2], 4);
    cJSON_Delete(d);
}

/* ---- PVCs -------------------------------------------------------------------------------------- */

static cJSON *policy_nodeset(const char *deleted, const char *scaled)
{
    char *s =
        xasprintf("{\"metadata\":{\"name\":\"db\",\"namespace\":\"ns\",\"uid\":\"set-uid\"},\"spec\":{"
                  "\"persistentVolumeClaimRetentionPolicy\":{\"whenDeleted\":\"%s\",\"whenScaled\":\"%s\"}}}",
                  deleted, scaled);
    cJSON *n = J(s);
    free(s);
    return n;
}

static int has_ref(const cJSON *pvc, const char *uid)
{
    const cJSON *refs = json_get(pvc, "metadata.ownerReferences");
    for (const cJSON *r = refs ? refs->child : NULL; r; r = r->next)
        if (strcmp(json_get_str_or(r, "uid", ""), uid) == 0)
            return 1;
    return 0;
}

static void test_pvc(void **state)
{
    char *s = nsb_pvc_name("data", "db", "03");
    assert_string_equal(s, "data-db-03");
    free(s);

    cJSON *n = policy_nodeset("Retain", "Retain");
    cJSON *tmpl =
        J("{\"metadata\":{\"name\":\"data\",\"labels\":{\"tier\":\"fast\",\"app.kubernetes.io/name\":"
          "\"x\"},\"annotations\":{\"a\":\"b\"}},\"spec\":{\"accessModes\":[\"ReadWriteOnce\"],"
          "\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}},\"status\":{\"phase\":\"Bound\"}}");
    cJSON *pvc = nsb_build_pvc(n, tmpl, "03");
    expect_json(pvc,
                "{\"apiVersion\":\"v1\",\"kind\":\"PersistentVolumeClaim\",\"metadata\":{\"name\":"
                "\"data-db-03\",\"namespace\":\"ns\",\"labels\":{\"app.kubernetes.io/name\":\"slurmd\","
                "\"app.kubernetes.io/instance\":\"db\",\"tier\":\"fast\"},\"annotations\":{\"a\":\"b\"}},"
                "\"spec\":{\"accessModes\":[\"ReadWriteOnce\"],\"resources\":{\"requests\":{\"storage\":"
                "\"1Gi\"}}}}");
    cJSON_Delete(pvc);
    cJSON_Delete(n);

    static const struct {
        const char *deleted, *scaled;
        int condemned, want_set, want_pod;
    } cases[] = {
        {"Retain", "Retain", 0, 0, 0}, {"Retain", "Retain", 1, 0, 0}, {"Delete", "Retain", 0, 1, 0},
        {"Delete", "Retain", 1, 1, 0}, {"Retain", "Delete", 0, 0, 0}, {"Retain", "Delete", 1, 0, 1},
        {"Delete", "Delete", 0, 1, 0}, {"Delete", "Delete", 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        n = policy_nodeset(cases[i].deleted, cases[i].scaled);
        /* Start with both our references and a foreign one: the foreign
         * owner always survives. */
        pvc = J("{\"metadata\":{\"name\":\"data-db-0\",\"ownerReferences\":[{\"uid\":\"foreign\"},{\"uid\":"
                "\"set-uid\"},{\"uid\":\"pod-uid\"}]}}");
        (void)nsb_pvc_update_owner_refs(pvc, n, "db-0", "pod-uid", cases[i].condemned);
        assert_true(has_ref(pvc, "foreign"));
        assert_int_equal(has_ref(pvc, "set-uid"), cases[i].want_set);
        assert_int_equal(has_ref(pvc, "pod-uid"), cases[i].want_pod);
        /* Applying again changes nothing. */
        assert_int_equal(nsb_pvc_update_owner_refs(pvc, n, "db-0", "pod-uid", cases[i].condemned), 0);
        cJSON_Delete(pvc);
        cJSON_Delete(n);
    }
    /* The references added are plain (non-controller) owner references. */
    n = policy_nodeset("Delete", "Delete");
    pvc = J("{\"metadata\":{\"name\":\"x\"}}");
    assert_int_equal(nsb_pvc_update_owner_refs(pvc, n, "db-0", "pod-uid", 0), 1);
    expect_json(json_get(pvc, "metadata.ownerReferences"),
                "[{\"apiVersion\":\"slinky.slurm.net/v1beta1\",\"kind\":\"NodeSet\",\"name\":\"db\",\"uid\":"
                "\"set-uid\"}]");
    assert_int_equal(nsb_pvc_update_owner_refs(pvc, n, "db-0", "pod-uid", 1), 1);
    expect_json(json_get(pvc, "metadata.ownerReferences"),
                "[{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"db-0\",\"uid\":\"pod-uid\"}]");
    cJSON_Delete(pvc);
    /* Delete-on-delete: a fresh claim is owned by the NodeSet. */
    pvc = nsb_build_pvc(n, tmpl, "00");
    assert_true(has_ref(pvc, "set-uid"));
    cJSON_Delete(pvc);
    cJSON_Delete(n);
    cJSON_Delete(tmpl);

    n = J("{\"metadata\":{\"name\":\"db\"},\"spec\":{\"ordinalPadding\":3}}");
    s = nsb_pvc_suffix(n, 4, "h");
    assert_string_equal(s, "004");
    free(s);
    cJSON_Delete(n);
    n = J("{\"metadata\":{\"name\":\"db\"},\"spec\":{\"scalingMode\":\"DaemonSet\"}}");
    s = nsb_pvc_suffix(n, 4, "host-a");
    assert_string_equal(s, "host-a");
    free(s);
    cJSON_Delete(n);
}

/* ---- shared objects ---------------------------------------------------------------------------- */

static void test_shared_objects(void **state)
{
    nsb_owner owners[] = {{"zeta", "u-z"}, {"alpha", "u-a"}};
    const char *refs =
        "[{\"apiVersion\":\"slinky.slurm.net/v1beta1\",\"kind\":\"NodeSet\",\"name\":\"alpha\","
        "\"uid\":\"u-a\",\"blockOwnerDeletion\":true},{\"apiVersion\":\"slinky.slurm.net/v1beta1\","
        "\"kind\":\"NodeSet\",\"name\":\"zeta\",\"uid\":\"u-z\",\"blockOwnerDeletion\":true}]";
    cJSON *svc = nsb_build_worker_service("slurm", "ns", owners, 2);
    expect_str(svc, "apiVersion", "v1");
    expect_str(svc, "kind", "Service");
    expect_str(svc, "metadata.name", "slurm-workers-slurm");
    expect_str(svc, "metadata.namespace", "ns");
    expect_json(json_get(svc, "metadata.ownerReferences"), refs);
    expect_json(
        json_child(svc, "spec"),
        "{\"clusterIP\":\"None\",\"publishNotReadyAddresses\":true,\"selector\":{\"app.kubernetes.io/name\":"
        "\"slurmd\",\"slinky.slurm.net/cluster\":\"slurm\"},\"ports\":[{\"name\":\"slurmd\",\"protocol\":"
        "\"TCP\",\"port\":6818,\"targetPort\":\"slurmd\"}]}");
    cJSON_Delete(svc);

    cJSON *pdb = nsb_build_worker_pdb("slurm", "ns", owners, 2);
    expect_str(pdb, "apiVersion", "policy/v1");
    expect_str(pdb, "kind", "PodDisruptionBudget");
    expect_str(pdb, "metadata.name", "slurm-workers-pdb-slurm");
    expect_json(json_get(pdb, "metadata.ownerReferences"), refs);
    expect_json(
        json_child(pdb, "spec"),
        "{\"maxUnavailable\":0,\"selector\":{\"matchLabels\":{\"nodeset.slinky.slurm.net/pod-protect\":"
        "\"true\",\"slinky.slurm.net/cluster\":\"slurm\"}}}");
    cJSON_Delete(pdb);
    pdb = nsb_build_worker_pdb("slurm", "ns", NULL, 0);
    expect_json(json_get(pdb, "metadata.ownerReferences"), "[]");
    cJSON_Delete(pdb);

    fx f;
    fx_init(&f, NODESET);
    assert_null(nsb_build_ssh_configmap(f.nodeset));
    fx_free(&f);
    fx_init(
        &f,
        "{\"metadata\":{\"name\":\"cpu\",\"namespace\":\"ns\",\"uid\":\"u\"},\"spec\":{\"controllerRef\":{"
        "\"name\":\"c\"},\"ssh\":{\"enabled\":true,\"extraSshdConfig\":\"MaxSessions 4\"}}}");
    cJSON *cm = nsb_build_ssh_configmap(f.nodeset);
    assert_non_null(cm);
    expect_str(cm, "kind", "ConfigMap");
    expect_str(cm, "metadata.name", "cpu-ssh-config");
    expect_str(cm, "metadata.namespace", "ns");
    expect_str(cm, "data.sshd_config",
               "Include /etc/ssh/sshd_config.d/*.conf\nUsePAM yes\nAuthenticationMethods publickey password\n"
               "Subsystem sftp internal-sftp\nMaxSessions 4\n");
    expect_json(json_get(cm, "metadata.ownerReferences"),
                "[{\"apiVersion\":\"slinky.slurm.net/v1beta1\",\"kind\":\"NodeSet\",\"name\":\"cpu\",\"uid\":"
                "\"u\",\"controller\":true,\"blockOwnerDeletion\":true}]");
    assert_string_equal(child_str(json_get(cm, "metadata.labels"), "slinky.slurm.net/cluster"), "c");
    cJSON_Delete(cm);
    fx_free(&f);
}

/* ---- victims ----------------------------------------------------------------------------------- */

static nsb_pod base_pod(const char *name, int ordinal)
{
    nsb_pod p = {.name = name,
                 .ordinal = ordinal,
                 .phase = NSB_PHASE_RUNNING,
                 .scheduled = 1,
                 .ready = 1,
                 .ready_since = 1000,
                 .created = 500};
    return p;
}

/* a must sort strictly before b, and the comparator must be antisymmetric. */
static void before(const nsb_pod *a, const nsb_pod *b)
{
    assert_true(nsb_victim_cmp(a, b) < 0);
    assert_true(nsb_victim_cmp(b, a) > 0);
}

static void test_victim_rules(void **state)
{
    nsb_pod a = base_pod("a", 1), b = base_pod("b", 1);
    assert_int_equal(nsb_victim_cmp(&a, &b), 0);

    /* 1: unscheduled first, even when it is otherwise "better". */
    a = base_pod("a", 0), b = base_pod("b", 5);
    a.scheduled = 0;
    a.deletion_cost = 100;
    before(&a, &b);
    /* 2: Pending < Unknown < Running; Failed/Succeeded weigh as Pending. */
    a = base_pod("a", 0), b = base_pod("b", 0);
    a.phase = NSB_PHASE_PENDING;
    b.phase = NSB_PHASE_UNKNOWN;
    before(&a, &b);
    a.phase = NSB_PHASE_UNKNOWN;
    b.phase = NSB_PHASE_RUNNING;
    before(&a, &b);
    a.phase = NSB_PHASE_FAILED;
    b.phase = NSB_PHASE_PENDING;
    b.ready = 0;
    a.ready = 0;
    assert_int_equal(nsb_victim_cmp(&a, &b), 0);
    /* 3: not Ready first. */
    a = base_pod("a", 0), b = base_pod("b", 9);
    a.ready = 0;
    before(&a, &b);
    /* 4: lower deletion cost first (negative allowed). */
    a = base_pod("a", 0), b = base_pod("b", 9);
    a.deletion_cost = -5;
    b.deletion_cost = 0;
    before(&a, &b);
    /* 5: earlier deadline first; no deadline counts as earliest. */
    a = base_pod("a", 0), b = base_pod("b", 9);
    a.deadline = 2000;
    b.deadline = 3000;
    before(&a, &b);
    a.deadline = 0;
    before(&a, &b);
    /* 6: cordoned first. */
    a = base_pod("a", 0), b = base_pod("b", 9);
    a.cordoned = 1;
    before(&a, &b);
    /* 7: higher ordinal first. */
    a = base_pod("a", 7), b = base_pod("b", 3);
    a.ready_since = 1; /* rule 8 would say otherwise */
    before(&a, &b);
    /* 8: both Ready: more recently Ready first; unset counts as most recent. */
    a = base_pod("a", 1), b = base_pod("b", 1);
    a.ready_since = 2000;
    b.ready_since = 1000;
    a.created = 1; /* rule 9 would say otherwise */
    before(&a, &b);
    a.ready_since = 0;
    before(&a, &b);
    /* ... and only when both are Ready (then rule 9 decides). */
    a = base_pod("a", 1), b = base_pod("b", 1);
    a.ready = b.ready = 0;
    a.ready_since = 2000;
    a.created = 100;
    b.created = 900;
    before(&b, &a);
    /* 9: newer creation first; unset counts as newest. */
    a = base_pod("a", 1), b = base_pod("b", 1);
    a.created = 900;
    b.created = 100;
    before(&a, &b);
    a.created = 0;
    before(&a, &b);
}

static void test_victim_sort(void **state)
{
    nsb_pod p[6] = {base_pod("c-0", 0), base_pod("c-1", 1), base_pod("c-2", 2),
                    base_pod("c-3", 3), base_pod("c-4", 4), base_pod("c-5", 5)};
    p[4].cordoned = 1;       /* cordoned before uncordoned */
    p[0].deletion_cost = -1; /* cost beats cordon */
    p[2].phase = NSB_PHASE_PENDING;
    p[2].ready = 0;     /* pending before running */
    p[1].scheduled = 0; /* unscheduled before everything */
    p[1].phase = NSB_PHASE_PENDING;
    p[1].ready = 0;
    const nsb_pod *v[6];
    for (int i = 0; i < 6; i++)
        v[i] = &p[5 - i];
    nsb_sort_victims(v, 6);
    const char *want[] = {"c-1", "c-2", "c-0", "c-4", "c-5", "c-3"};
    for (int i = 0; i < 6; i++)
        assert_string_equal(v[i]->name, want[i]);
    /* Full ties fall back to the name, so the order never depends on input order. */
    nsb_pod t[3] = {base_pod("z", -1), base_pod("m", -1), base_pod("a", -1)};
    const nsb_pod *tv[3] = {&t[0], &t[1], &t[2]};
    nsb_sort_victims(tv, 3);
    assert_string_equal(tv[0]->name, "a");
    assert_string_equal(tv[2]->name, "z");
}

static void test_pod_from_json(void **state)
{
    cJSON *pod =
        J("{\"metadata\":{\"name\":\"cpu-04\",\"creationTimestamp\":\"2024-05-06T07:08:09Z\","
          "\"deletionTimestamp\":\"2024-05-06T08:00:00Z\",\"labels\":{\"controller-revision-hash\":\"r7\"},"
          "\"annotations\":{\"nodeset.slinky.slurm.net/pod-cordon\":\"true\","
          "\"nodeset.slinky.slurm.net/pod-deletion-cost\":\"-12\","
          "\"nodeset.slinky.slurm.net/pod-deadline\":\"2024-05-06T09:00:00+01:00\"}},"
          "\"spec\":{\"nodeName\":\"k1\"},\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":"
          "\"Initialized\",\"status\":\"True\"},{\"type\":\"Ready\",\"status\":\"True\","
          "\"lastTransitionTime\":\"2024-05-06T07:09:00Z\"}]}}");
    nsb_pod p;
    nsb_pod_from_json(pod, "cpu", &p);
    assert_string_equal(p.name, "cpu-04");
    assert_string_equal(p.revision, "r7");
    assert_int_equal(p.ordinal, 4);
    assert_int_equal(p.phase, NSB_PHASE_RUNNING);
    assert_true(p.scheduled && p.ready && p.cordoned && p.terminating);
    assert_int_equal(p.deletion_cost, -12);
    assert_int_equal(p.created, 1714979289);
    assert_int_equal(p.ready_since, 1714979340);
    assert_int_equal(p.deadline, 1714982400); /* 08:00Z */
    cJSON_Delete(pod);

    pod =
        J("{\"metadata\":{\"name\":\"x-abc\",\"annotations\":{\"nodeset.slinky.slurm.net/pod-deletion-cost\":"
          "\"lots\",\"nodeset.slinky.slurm.net/pod-cordon\":\"yes\"}},\"status\":{\"conditions\":[{\"type\":"
          "\"Ready\",\"status\":\"False\",\"lastTransitionTime\":\"2024-05-06T07:09:00Z\"}]}}");
    nsb_pod_from_json(pod, "x", &p);
    assert_int_equal(p.ordinal, -1);
    assert_int_equal(p.phase, NSB_PHASE_NONE);
    assert_false(p.scheduled || p.ready || p.cordoned || p.terminating);
    assert_int_equal(p.deletion_cost, 0);
    assert_int_equal(p.ready_since, 0);
    assert_int_equal(p.created, 0);
    cJSON_Delete(pod);

    assert_int_equal(nsb_phase_parse("Succeeded"), NSB_PHASE_SUCCEEDED);
    assert_int_equal(nsb_phase_parse("Failed"), NSB_PHASE_FAILED);
    assert_int_equal(nsb_phase_parse("Weird"), NSB_PHASE_UNKNOWN);
}

/* ---- update strategy --------------------------------------------------------------------------- */

static int mu(const char *json, int total)
{
    cJSON *v = json ? J(json) : NULL;
    int out = -999;
    int rc = nsb_max_unavailable(v, total, &out);
    cJSON_Delete(v);
    return rc ? rc : out;
}

static void test_max_unavailable(void **state)
{
    assert_int_equal(mu("2", 10), 2);
    assert_int_equal(mu("20", 10), 20);     /* an absolute count is not capped by total */
    assert_int_equal(mu("0", 10), 1);       /* minimum 1 (validation rejects 0 itself) */
    assert_int_equal(mu("\"25%\"", 10), 3); /* 2.5 rounded up */
    assert_int_equal(mu("\"25%\"", 4), 1);
    assert_int_equal(mu("\"25%\"", 5), 2); /* 1.25 rounded up */
    assert_int_equal(mu("\"100%\"", 7), 7);
    assert_int_equal(mu("\"1%\"", 1), 1);
    assert_int_equal(mu("\"0%\"", 50), 1);
    assert_int_equal(mu("\"50%\"", 0), 1);
    assert_int_equal(mu(NULL, 8), 2); /* default 25% */
    assert_int_equal(mu("\"10\"", 10), OP_EINVAL);
    assert_int_equal(mu("\"abc%\"", 10), OP_EINVAL);
    assert_int_equal(mu("\"%\"", 10), OP_EINVAL);
    assert_int_equal(mu("-1", 10), OP_EINVAL);
    assert_int_equal(mu("1.5", 10), OP_EINVAL);
    assert_int_equal(mu("true", 10), OP_EINVAL);

    assert_int_equal(nsb_rolling_budget(3, 1), 2);
    assert_int_equal(nsb_rolling_budget(3, 3), 0);
    assert_int_equal(nsb_rolling_budget(3, 5), 0);
    assert_int_equal(nsb_rolling_budget(3, 0), 3);
    assert_int_equal(nsb_rolling_budget(3, -2), 3);
}

static void test_split_update(void **state)
{
    nsb_pod p[6];
    p[0] = base_pod("n-0", 0), p[0].revision = "new";                           /* new, healthy */
    p[1] = base_pod("n-1", 1), p[1].revision = "n-new", p[1].ready_since = 100; /* new (name form) */
    p[2] = base_pod("n-2", 2), p[2].revision = "old";                           /* old healthy */
    p[3] = base_pod("n-3", 3), p[3].revision = "old";                           /* old healthy */
    p[4] = base_pod("n-4", 4), p[4].revision = "old", p[4].ready = 0, p[4].created = 900; /* old unhealthy */
    p[5] = base_pod("n-5", 5), p[5].revision = "new", p[5].terminating = 1,
    p[5].created = 100; /* terminating: old */
    const nsb_pod *out[6];
    nsb_split sp;
    nsb_split_update(p, 6, "new", "n", out, &sp);
    assert_int_equal(sp.old_unhealthy, 2);
    assert_int_equal(sp.old_healthy, 2);
    assert_int_equal(sp.fresh, 2);
    assert_string_equal(out[0]->name, "n-5"); /* oldest creation first */
    assert_string_equal(out[1]->name, "n-4");
    assert_string_equal(out[2]->name, "n-3"); /* victim order: higher ordinal first */
    assert_string_equal(out[3]->name, "n-2");
    assert_string_equal(out[4]->name, "n-1");
    assert_string_equal(out[5]->name, "n-0");

    /* Unavailable: new pods not yet available, plus missing slots. */
    p[0].ready_since = 990; /* ready for 10 s at now=1000 */
    assert_int_equal(nsb_rolling_unavailable(p, 6, "new", "n", 6, 0, 1000), 0);
    assert_int_equal(nsb_rolling_unavailable(p, 6, "new", "n", 6, 30, 1000), 1); /* p[0] not yet for 30 s */
    assert_int_equal(nsb_rolling_unavailable(p, 6, "new", "n", 8, 0, 1000), 2);
    assert_int_equal(nsb_rolling_unavailable(p, 6, "new", "n", -1, 0, 1000), 0);
    p[1].ready = 0;
    assert_int_equal(nsb_rolling_unavailable(p, 6, "new", "n", 4, 0, 1000), 1);
}

/* ---- status ------------------------------------------------------------------------------------ */

static void test_status(void **state)
{
    nsb_pod p[6];
    p[0] = base_pod("s-0", 0), p[0].revision = "u";
    p[1] = base_pod("s-1", 1), p[1].revision = "u", p[1].ready_since = 1995;
    p[2] = base_pod("s-2", 2), p[2].revision = "c";
    p[3] = base_pod("s-3", 3), p[3].revision = "u", p[3].phase = NSB_PHASE_PENDING, p[3].ready = 0;
    p[4] = base_pod("s-4", 4), p[4].revision = "u", p[4].terminating = 1;
    p[5] = base_pod("s-5", 5), p[5].revision = "u", p[5].phase = NSB_PHASE_NONE, p[5].ready = 0;
    nsb_counts c;
    nsb_count(p, 6, "u", "c", "s", NSB_STATEFULSET, 6, 10, 2000, &c);
    assert_int_equal(c.replicas, 5);  /* s-5 has no phase yet */
    assert_int_equal(c.ready, 4);     /* 0, 1, 2, 4 */
    assert_int_equal(c.available, 3); /* s-1 ready for only 5 s */
    assert_int_equal(c.updated, 3);   /* 0, 1 and the pending 3; not the terminating 4 */
    assert_int_equal(c.current, 1);
    assert_int_equal(c.unavailable, 2);
    assert_int_equal(c.desired, 6);
    /* Name and bare-hash forms of a revision are the same revision. */
    p[3].revision = "s-u";
    nsb_count(p, 6, "s-u", "c", "s", NSB_STATEFULSET, 6, 0, 1000, &c);
    assert_int_equal(c.updated, 3);
    assert_int_equal(c.available, 4);
    assert_int_equal(c.unavailable, 1);
    /* DaemonSet: unavailable counts against desired, clamped at 0. */
    nsb_count(p, 6, "u", "c", "s", NSB_DAEMONSET, 9, 0, 1000, &c);
    assert_int_equal(c.unavailable, 5);
    nsb_count(p, 6, "u", "c", "s", NSB_DAEMONSET, 2, 0, 1000, &c);
    assert_int_equal(c.unavailable, 0);

    cJSON *n = J("{\"metadata\":{\"name\":\"s\",\"generation\":7},\"status\":{\"conditions\":[{\"type\":"
                 "\"ReservationCreated\",\"status\":\"True\"}]}}");
    nsb_slurm_counts sc = {.idle = 1, .allocated = 2, .down = 3, .drain = 4};
    cJSON *otn = J("{\"0\":\"node-a\"}");
    c = (nsb_counts){.replicas = 5, .updated = 4, .ready = 3, .available = 2, .unavailable = 3, .desired = 5};
    cJSON *st = nsb_build_status(n, &c, &sc, "u", 2, otn);
    expect_json(
        st, "{\"replicas\":5,\"updatedReplicas\":4,\"readyReplicas\":3,\"availableReplicas\":2,"
            "\"unavailableReplicas\":3,\"desired\":5,\"slurmIdle\":1,\"slurmAllocated\":2,\"slurmDown\":3,"
            "\"slurmDrain\":4,\"observedGeneration\":7,\"nodeSetHash\":\"u\",\"collisionCount\":2,"
            "\"ordinalToNode\":{\"0\":\"node-a\"},\"selector\":\"app.kubernetes.io/instance=s,"
            "app.kubernetes.io/name=slurmd\",\"conditions\":[{\"type\":\"ReservationCreated\",\"status\":"
            "\"True\"}]}");
    cJSON_Delete(st);
    cJSON_Delete(otn);
    cJSON_Delete(n);
}

/* ---- validation -------------------------------------------------------------------------------- */

static size_t validate(const char *spec, const char *old_spec, nsb_msgs *m)
{
    char *s = xasprintf("{\"metadata\":{\"name\":\"v\"},\"spec\":%s}", spec);
    cJSON *n = J(s);
    free(s);
    cJSON *o = NULL;
    if (old_spec) {
        s = xasprintf("{\"metadata\":{\"name\":\"v\"},\"spec\":%s}", old_spec);
        o = J(s);
        free(s);
    }
    size_t k = nsb_validate(n, o, m);
    cJSON_Delete(n);
    cJSON_Delete(o);
    return k;
}

static void expect_one(const char *spec, const char *old_spec, const char *needle)
{
    nsb_msgs m = {0};
    size_t k = validate(spec, old_spec, &m);
    if (k != 1 || strstr(m.v[0], needle) == NULL) {
        fprintf(stderr, "spec %s: %zu messages\n", spec, k);
        for (size_t i = 0; i < m.n; i++)
            fprintf(stderr, "  %s\n", m.v[i]);
    }
    assert_int_equal(k, 1);
    assert_non_null(strstr(m.v[0], needle));
    nsb_msgs_free(&m);
}

#define OK_SPEC "\"controllerRef\":{\"name\":\"slurm\"}"

static void test_validate(void **state)
{
    nsb_msgs m = {0};
    assert_int_equal(
        validate("{" OK_SPEC ",\"updateStrategy\":{\"rollingUpdate\":{\"maxUnavailable\":\"10%\"}},"
                 "\"template\":{\"spec\":{\"hostname\":\"cpu-\"}},\"extraConf\":\"Weight=1  Gres=gpu:2\","
                 "\"ssh\":{\"enabled\":true,\"sssdConfRef\":{\"name\":\"s\",\"key\":\"k\"}}}",
                 NULL, &m),
        0);
    assert_int_equal(m.n, 0);

    expect_one("{}", NULL, "controllerRef.name must not be empty");
    expect_one("{\"controllerRef\":{\"name\":\"\"}}", NULL, "controllerRef.name must not be empty");
    expect_one("{" OK_SPEC ",\"updateStrategy\":{\"rollingUpdate\":{\"maxUnavailable\":0}}}", NULL,
               "must be >= 1");
    expect_one("{" OK_SPEC ",\"updateStrategy\":{\"rollingUpdate\":{\"maxUnavailable\":\"0%\"}}}", NULL,
               "must not be 0%");
    expect_one("{" OK_SPEC ",\"updateStrategy\":{\"rollingUpdate\":{\"maxUnavailable\":\"5\"}}}", NULL,
               "integer or a percentage");
    expect_one("{" OK_SPEC ",\"updateStrategy\":{\"type\":\"Sometimes\"}}", NULL, "updateStrategy.type");
    expect_one("{" OK_SPEC
               ",\"updateStrategy\":{\"type\":\"ScheduledUpdate\",\"scheduledUpdate\":{\"startTime\":"
               "\"2030-01-01T00:00:00Z\",\"duration\":\"30s\"}}}",
               NULL, "at least 1m");
    expect_one("{" OK_SPEC ",\"updateStrategy\":{\"scheduledUpdate\":{\"duration\":\"soon\"}}}", NULL,
               "not a valid duration");
    expect_one("{" OK_SPEC
               ",\"updateStrategy\":{\"type\":\"ScheduledUpdate\",\"scheduledUpdate\":{\"duration\":"
               "\"1h\"}}}",
               NULL, "startTime and duration must be set");
    expect_one("{" OK_SPEC ",\"ssh\":{\"enabled\":true}}", NULL, "ssh.sssdConfRef.name");
    expect_one("{" OK_SPEC ",\"template\":{\"spec\":{\"hostname\":\"CPU_\"}}}", NULL, "hostname prefix");
    expect_one("{" OK_SPEC ",\"template\":{\"spec\":{\"hostname\":\"-cpu\"}}}", NULL, "hostname prefix");
    /* The kubelet would name the host <hostname>.<subdomain>.<ns>.svc.<cluster domain>: not derivable. */
    expect_one("{" OK_SPEC ",\"template\":{\"spec\":{\"setHostnameAsFQDN\":true}}}", NULL,
               "setHostnameAsFQDN");
    expect_one("{" OK_SPEC ",\"extraConf\":\"Weight=1 =x\"}", NULL, "\"=x\" is not Key=Value");
    expect_one("{" OK_SPEC ",\"extraConf\":\"Weight\"}", NULL, "\"Weight\" is not Key=Value");
    expect_one("{" OK_SPEC ",\"scalingMode\":\"ReplicaSet\"}", NULL, "scalingMode");
    expect_one("{" OK_SPEC ",\"partition\":{\"config\":\"a\\nb\"}}", NULL, "partition.config");

    /* Updates: controllerRef and volumeClaimTemplates are immutable. */
    expect_one("{\"controllerRef\":{\"name\":\"other\"}}", "{" OK_SPEC "}",
               "controllerRef cannot be changed");
    expect_one("{" OK_SPEC ",\"volumeClaimTemplates\":[{\"metadata\":{\"name\":\"d\"}}]}", "{" OK_SPEC "}",
               "volumeClaimTemplates cannot be changed");
    assert_int_equal(validate("{" OK_SPEC ",\"volumeClaimTemplates\":[],\"replicas\":9}",
                              "{" OK_SPEC ",\"volumeClaimTemplates\":null}", &m),
                     0);
    /* Several problems give several messages. */
    assert_int_equal(validate("{\"ssh\":{\"enabled\":true},\"extraConf\":\"x\"}", NULL, &m), 3);
    nsb_msgs_free(&m);

    double secs;
    assert_int_equal(nsb_parse_duration("1h30m", &secs), 0);
    assert_dbl_equal(secs, 5400);
    assert_int_equal(nsb_parse_duration("1.5h", &secs), 0);
    assert_dbl_equal(secs, 5400);
    assert_int_equal(nsb_parse_duration("250ms", &secs), 0);
    assert_true(secs > 0.249 && secs < 0.251);
    assert_int_equal(nsb_parse_duration("0", &secs), 0);
    assert_dbl_equal(secs, 0);
    assert_int_equal(nsb_parse_duration("5", &secs), OP_EINVAL);
    assert_int_equal(nsb_parse_duration("m", &secs), OP_EINVAL);
    assert_int_equal(nsb_parse_duration("3d", &secs), OP_EINVAL);
}

int main(void)
{
    mem_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_ordinals),
        cmocka_unit_test(test_hostnames),
        cmocka_unit_test(test_slurmd_conf),
        cmocka_unit_test(test_conf_server),
        cmocka_unit_test(test_quantity),
        cmocka_unit_test(test_pod_statefulset),
        cmocka_unit_test(test_pod_options),
        cmocka_unit_test(test_pod_ssh),
        cmocka_unit_test(test_pod_template_merge),
        cmocka_unit_test(test_pod_daemonset),
        cmocka_unit_test(test_pod_pvcs_and_errors),
        cmocka_unit_test(test_stamp_pod),
        cmocka_unit_test(test_daemon_fit),
        cmocka_unit_test(test_revision_patch),
        cmocka_unit_test(test_revision_hash),
        cmocka_unit_test(test_build_revision),
        cmocka_unit_test(test_plan_revisions),
        cmocka_unit_test(test_plan_revisions_slinky),
        cmocka_unit_test(test_truncate_history),
        cmocka_unit_test(test_pvc),
        cmocka_unit_test(test_shared_objects),
        cmocka_unit_test(test_victim_rules),
        cmocka_unit_test(test_victim_sort),
        cmocka_unit_test(test_pod_from_json),
        cmocka_unit_test(test_max_unavailable),
        cmocka_unit_test(test_split_update),
        cmocka_unit_test(test_status),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_logfile_sigterm),
        cmocka_unit_test(test_slurmd_args_shell),
        cmocka_unit_test(test_slurmd_probes_by_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
