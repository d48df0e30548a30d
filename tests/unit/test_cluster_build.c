/* Unit tests for the Controller, RestApi, Accounting and LoginSet builders
 * and the validation of docs/compat.md#admission-checks: names, labels, annotations, ownerReferences,
 * volumes, probes, args, env, the table of docs/compat.md#persistence, and hash
 * annotations that change exactly when their inputs change. */
#include "unit/cluster_fixtures.h"

#include <sys/stat.h>
#include <unistd.h>

#include "core/crypto.h"
#include "core/err.h"
#include "reconcilers/accounting_build.h"
#include "reconcilers/controller_build.h"
#include "reconcilers/loginset_build.h"
#include "reconcilers/restapi_build.h"
#include "reconcilers/slurmconf.h"
#include "reconcilers/validate_cluster.h"
#include "unit/sh_script.h"

#define UID "11111111-2222-3333-4444-555555555555"
#define CTL_META                                                                                             \
    "'apiVersion':'slinky.slurm.net/"                                                                        \
    "v1beta1','kind':'Controller','metadata':{'name':'slurm','namespace':'ns1',"                             \
    "'uid':'" UID "','labels':{'team':'hpc','app.kubernetes.io/name':'evil'},'annotations':{'owner':'me',"   \
    "'kubectl.kubernetes.io/last-applied-configuration':'{}'}}"
#define CTL_KEYS                                                                                             \
    "'slurmKeyRef':{'name':'slurm-auth-slurm','key':'slurm.key'},"                                           \
    "'jwtKeyRef':{'name':'slurm-auth-jwt','key':'jwt.key'}"

/* ---- helpers ---------------------------------------------------------- */

static const cJSON *named(const cJSON *arr, const char *name)
{
    if (!cJSON_IsArray(arr))
        return NULL;
    for (const cJSON *e = arr->child; e; e = e->next)
        if (strcmp(json_get_str_or(e, "name", ""), name) == 0)
            return e;
    return NULL;
}

static const cJSON *item(const cJSON *arr, int i)
{
    return cJSON_GetArrayItem(arr, i);
}

static const char *ann(const cJSON *tmpl, const char *key)
{
    return clc_str(json_get(tmpl, "metadata.annotations"), key);
}

static const char *label(const cJSON *obj, const char *key)
{
    return clc_str(json_get(obj, "metadata.labels"), key);
}

static void expect_owner(const cJSON *obj, const char *kind, const char *name, const char *uid)
{
    const cJSON *refs = json_get(obj, "metadata.ownerReferences");
    assert_int_equal(json_len(refs), 1);
    const cJSON *r = refs->child;
    assert_string_equal(json_get_str(r, "apiVersion"), "slinky.slurm.net/v1beta1");
    assert_string_equal(json_get_str(r, "kind"), kind);
    assert_string_equal(json_get_str(r, "name"), name);
    assert_string_equal(json_get_str(r, "uid"), uid);
    assert_true(json_get_bool(r, "controller", 0));
    assert_true(json_get_bool(r, "blockOwnerDeletion", 0));
}

static void expect_json(const cJSON *o, const char *jq)
{
    cJSON *want = JQ(jq);
    if (!json_equal(o, want)) {
        char *g = json_dump(o), *w = json_dump(want);
        fprintf(stderr, "got:  %s\nwant: %s\n", g, w);
        free(g);
        free(w);
    }
    assert_true(json_equal(o, want));
    cJSON_Delete(want);
}

static char *b64(const char *s)
{
    return base64_encode(s, strlen(s));
}

/* A Secret {data:{key: base64(value)}} in t. */
static void add_secret(tenv *t, const char *name, const char *key, const char *value)
{
    char *v = b64(value);
    char jq[1024];
    snprintf(jq, sizeof(jq), "{'metadata':{'name':'%s','uid':'%s-uid'},'data':{'%s':'%s'}}", name, name, key,
             v);
    tenv_add(t, "Secret", name, jq);
    free(v);
}

static void setup_env(tenv *t)
{
    tenv_init(t);
    add_secret(t, "slurm-auth-slurm", "slurm.key", "slurm-key-bytes");
    add_secret(t, "slurm-auth-jwt", "jwt.key", "jwt-key-bytes");
}

static cJSON *build_sts(const char *ctl_jq, const cJSON *config, tenv *t, int want_rc, char **why)
{
    cJSON *ctl = JQ(ctl_jq);
    cJSON *out = (cJSON *)1;
    int rc = ctlb_statefulset(ctl, config, &t->env, &out, why);
    if (rc != want_rc)
        fprintf(stderr, "ctlb_statefulset: rc %d (%s)\n", rc, why && *why ? *why : "");
    assert_int_equal(rc, want_rc);
    cJSON_Delete(ctl);
    if (rc)
        assert_null(out);
    return out;
}

static char *write_temp(const char *text);
static const char *script_of(const cJSON *container);

/* ---- Controller ---------------------------------------------------------- */

static void test_controller_defaults_and_names(void **state)
{
    cJSON *c = JQ("{" CTL_META ",'spec':{'ha':{'enabled':true}}}");
    cJSON *d = ctlb_defaults(c);
    assert_true(json_get_bool(d, "spec.persistence.enabled", 0));
    assert_int_equal(json_get_int(d, "spec.ha.backups", 0), 1);
    assert_null(json_get(c, "spec.persistence"));
    cJSON_Delete(d);
    cJSON_Delete(c);
    c = JQ("{" CTL_META ",'spec':{'persistence':{'enabled':false}}}");
    d = ctlb_defaults(c);
    assert_false(json_get_bool(d, "spec.persistence.enabled", 1));
    assert_null(json_get(d, "spec.ha.backups"));
    cJSON_Delete(d);
    cJSON_Delete(c);

    char *n = ctlb_name("slurm");
    assert_string_equal(n, "slurm-controller");
    free(n);
    n = ctlb_internal_service_name("slurm");
    assert_string_equal(n, "slurm-controller-internal");
    free(n);
    n = ctlb_config_name("slurm");
    assert_string_equal(n, "slurm-config");
    free(n);
}

static void test_controller_services(void **state)
{
    cJSON *c = JQ("{" CTL_META ",'spec':{" CTL_KEYS ",'service':{'metadata':{'labels':{'svc':'x'},"
                  "'annotations':{'lb':'y'}},'spec':{'type':'NodePort','externalIPs':['1.2.3.4'],"
                  "'selector':{'extra':'sel','controller.slinky.slurm.net/active':'false'}},'port':7000,"
                  "'nodePort':30017}}}");
    cJSON *svc = NULL;
    assert_int_equal(ctlb_internal_service(c, &svc, NULL), 0);
    expect_json(svc, "{'apiVersion':'v1','kind':'Service','metadata':{'name':'slurm-controller-internal',"
                     "'namespace':'ns1','labels':{'app.kubernetes.io/component':'controller',"
                     "'app.kubernetes.io/instance':'slurm','app.kubernetes.io/name':'slurmctld','svc':'x',"
                     "'team':'hpc'},'annotations':{'lb':'y','owner':'me'},'ownerReferences':[{'apiVersion':"
                     "'slinky.slurm.net/v1beta1','kind':'Controller','name':'slurm','uid':'" UID "',"
                     "'controller':true,'blockOwnerDeletion':true}]},'spec':{'selector':{"
                     "'app.kubernetes.io/instance':'slurm','app.kubernetes.io/name':'slurmctld'},'ports':[{"
                     "'name':'slurmctld','protocol':'TCP','port':6817,'targetPort':'slurmctld'}],"
                     "'clusterIP':'None','publishNotReadyAddresses':true}}");
    cJSON_Delete(svc);

    assert_int_equal(ctlb_service(c, &svc, NULL), 0);
    assert_string_equal(json_get_str(svc, "metadata.name"), "slurm-controller");
    expect_owner(svc, "Controller", "slurm", UID);
    assert_string_equal(label(svc, "svc"), "x");
    /* The operator's label wins over the CR's. */
    assert_string_equal(label(svc, "app.kubernetes.io/name"), "slurmctld");
    const cJSON *spec = json_get(svc, "spec");
    assert_string_equal(json_get_str(spec, "type"), "NodePort");
    assert_null(json_get(spec, "externalIPs"));
    assert_null(json_get(spec, "clusterIP"));
    expect_json(json_get(spec, "selector"),
                "{'app.kubernetes.io/instance':'slurm','app.kubernetes.io/name':'slurmctld',"
                "'controller.slinky.slurm.net/active':'true','extra':'sel'}");
    expect_json(
        json_get(spec, "ports"),
        "[{'name':'slurmctld','protocol':'TCP','port':7000,'targetPort':'slurmctld','nodePort':30017}]");
    cJSON_Delete(svc);
    cJSON_Delete(c);

    /* A user port clashing with ours. */
    c = JQ("{" CTL_META ",'spec':{'service':{'spec':{'ports':[{'name':'metrics','port':6817}]}}}}");
    char *why = NULL;
    svc = (cJSON *)1;
    assert_int_equal(ctlb_service(c, &svc, &why), OP_EINVAL);
    assert_null(svc);
    assert_non_null(strstr(why, "6817"));
    free(why);
    cJSON_Delete(c);
    /* A different user port is kept next to ours. */
    c = JQ("{" CTL_META ",'spec':{'service':{'spec':{'ports':[{'name':'metrics','port':9100}]}}}}");
    assert_int_equal(ctlb_service(c, &svc, NULL), 0);
    assert_int_equal(json_len(json_get(svc, "spec.ports")), 2);
    assert_string_equal(json_get_str(item(json_get(svc, "spec.ports"), 1), "name"), "slurmctld");
    cJSON_Delete(svc);
    cJSON_Delete(c);
}

static void test_controller_config(void **state)
{
    tenv t;
    setup_env(&t);
    cJSON *c = JQ("{" CTL_META ",'spec':{" CTL_KEYS ",'configFileRefs':[{'name':'extra'}]}}");
    tenv_add(&t, "ConfigMap", "extra", "{'data':{'gres.conf':'Name=gpu'}}");
    cJSON *cm = NULL;
    char *why = NULL;
    assert_int_equal(ctlb_config(c, NULL, 0, &t.env, &cm, &why), 0);
    assert_string_equal(json_get_str(cm, "kind"), "ConfigMap");
    assert_string_equal(json_get_str(cm, "metadata.name"), "slurm-config");
    assert_string_equal(json_get_str(cm, "metadata.namespace"), "ns1");
    expect_owner(cm, "Controller", "slurm", UID);
    assert_string_equal(label(cm, "team"), "hpc");
    assert_string_equal(label(cm, "app.kubernetes.io/component"), "controller");
    assert_string_equal(clc_str(json_get(cm, "metadata.annotations"), "owner"), "me");
    const cJSON *data = json_get(cm, "data");
    assert_int_equal(json_len(data), 2);
    char *conf = NULL;
    assert_int_equal(sconf_slurm_conf(c, NULL, 0, &t.env, &conf, NULL), 0);
    assert_string_equal(clc_str(data, "slurm.conf"), conf);
    free(conf);
    assert_string_equal(clc_str(data, "cgroup.conf"), "CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n");
    cJSON_Delete(cm);

    /* A user cgroup.conf replaces ours. */
    tenv_add(&t, "ConfigMap", "extra", "{'data':{'cgroup.conf':'CgroupPlugin=autodetect'}}");
    assert_int_equal(ctlb_config(c, NULL, 0, &t.env, &cm, NULL), 0);
    assert_int_equal(json_len(json_get(cm, "data")), 1);
    assert_null(json_get(cm, "data.cgroup.conf"));
    cJSON_Delete(cm);

    /* A missing configFileRefs ConfigMap is an error. */
    tenv_del(&t, "ConfigMap", "extra");
    cm = (cJSON *)1;
    assert_int_equal(ctlb_config(c, NULL, 0, &t.env, &cm, &why), OP_ENOTFOUND);
    assert_null(cm);
    assert_non_null(strstr(why, "extra"));
    free(why);
    cJSON_Delete(c);

    /* External: the minimal slurm.conf only, labelled from the template. */
    c = JQ("{" CTL_META ",'spec':{'external':true,'externalConfig':{'host':'ctld','port':6817},"
           "'template':{'metadata':{'labels':{'tl':'1'},'annotations':{'ta':'2'}}}}}");
    assert_int_equal(ctlb_config(c, NULL, 0, &t.env, &cm, NULL), 0);
    assert_int_equal(json_len(json_get(cm, "data")), 1);
    char *ext = sconf_slurm_conf_external(c, NULL);
    assert_string_equal(clc_str(json_get(cm, "data"), "slurm.conf"), ext);
    free(ext);
    assert_string_equal(label(cm, "tl"), "1");
    assert_null(label(cm, "team"));
    assert_string_equal(label(cm, "app.kubernetes.io/instance"), "slurm");
    assert_string_equal(clc_str(json_get(cm, "metadata.annotations"), "ta"), "2");
    cJSON_Delete(cm);
    /* ... and nothing else. */
    cJSON *o = (cJSON *)1;
    assert_int_equal(ctlb_service(c, &o, NULL), 0);
    assert_null(o);
    o = (cJSON *)1;
    assert_int_equal(ctlb_internal_service(c, &o, NULL), 0);
    assert_null(o);
    o = (cJSON *)1;
    assert_int_equal(ctlb_statefulset(c, NULL, &t.env, &o, NULL), 0);
    assert_null(o);
    cJSON_Delete(c);
    tenv_free(&t);
}

static void test_controller_statefulset_shape(void **state)
{
    tenv t;
    setup_env(&t);
    cJSON *sts = build_sts(
        "{" CTL_META ",'spec':{" CTL_KEYS ",'clusterName':'hpc1',"
        "'jwksKeyRef':{'name':'jwks-cm','key':'keys.json'},"
        "'configFileRefs':[{'name':'zz-files'}],'prologScriptRefs':[{'name':'aa-prolog'}],"
        "'epilogSlurmctldScriptRefs':[{'name':'mm-ectld'}],"
        "'persistence':{'accessModes':['ReadWriteOnce'],'resources':{'requests':{'storage':'4Gi'}}},"
        "'slurmctld':{'image':'ghcr.io/slinkyproject/slurmctld:26.05','args':['-vvv'],"
        "'env':[{'name':'TZ','value':'UTC'}]},'logfile':{'image':'alpine:latest'},"
        "'template':{'metadata':{'labels':{'tpl':'1'},'annotations':{'tpa':'2'}},"
        "'spec':{'nodeSelector':{'kubernetes.io/"
        "os':'linux'},'containers':[{'name':'extra','image':'busybox'}],"
        "'affinity':{'nodeAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':{'nodeSelectorTerms':"
        "[{'matchExpressions':[{'key':'pool','operator':'In','values':['ctl']}]}]}},"
        "'podAntiAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':[{'labelSelector':"
        "{'matchLabels':{'app':'db'}},'topologyKey':'kubernetes.io/hostname'}]}}}}}}",
        NULL, &t, 0, NULL);

    assert_string_equal(json_get_str(sts, "apiVersion"), "apps/v1");
    assert_string_equal(json_get_str(sts, "kind"), "StatefulSet");
    assert_string_equal(json_get_str(sts, "metadata.name"), "slurm-controller");
    assert_string_equal(json_get_str(sts, "metadata.namespace"), "ns1");
    expect_owner(sts, "Controller", "slurm", UID);
    assert_string_equal(label(sts, "team"), "hpc");
    assert_string_equal(label(sts, "tpl"), "1");
    assert_string_equal(label(sts, "app.kubernetes.io/name"), "slurmctld");
    const cJSON *spec = json_get(sts, "spec");
    assert_int_equal(json_get_int(spec, "replicas", 0), 1);
    assert_int_equal(json_get_int(spec, "revisionHistoryLimit", -1), 0);
    assert_string_equal(json_get_str(spec, "serviceName"), "slurm-controller-internal");
    expect_json(
        json_get(spec, "selector"),
        "{'matchLabels':{'app.kubernetes.io/instance':'slurm','app.kubernetes.io/name':'slurmctld'}}");
    /* Persistence enabled by default, no claim, no HA: a claim template. */
    expect_json(json_get(spec, "volumeClaimTemplates"),
                "[{'metadata':{'name':'statesave','namespace':'ns1'},'spec':{'accessModes':['ReadWriteOnce'],"
                "'resources':{'requests':{'storage':'4Gi'}}}}]");

    const cJSON *tmpl = json_get(spec, "template");
    assert_string_equal(label(tmpl, "app.kubernetes.io/component"), "controller");
    assert_string_equal(label(tmpl, "tpl"), "1");
    assert_string_equal(ann(tmpl, "kubectl.kubernetes.io/default-container"), "slurmctld");
    assert_string_equal(ann(tmpl, "tpa"), "2");
    assert_string_equal(ann(tmpl, "owner"), "me");
    /* kubectl's record of the CR is not copied (it would roll the pods on
     * every kubectl apply). */
    assert_null(ann(tmpl, "kubectl.kubernetes.io/last-applied-configuration"));
    assert_null(ann(sts, "kubectl.kubernetes.io/last-applied-configuration"));
    const cJSON *ps = json_get(tmpl, "spec");
    assert_false(json_get_bool(ps, "automountServiceAccountToken", 1));
    expect_json(json_get(ps, "securityContext"),
                "{'runAsNonRoot':true,'runAsUser':401,'runAsGroup':401,'fsGroup':401}");
    assert_string_equal(clc_str(json_get(ps, "nodeSelector"), "kubernetes.io/os"), "linux");

    /* Containers: ours first, the template's extra one appended. */
    const cJSON *cs = json_get(ps, "containers");
    assert_int_equal(json_len(cs), 2);
    const cJSON *k = item(cs, 0);
    assert_string_equal(json_get_str(k, "name"), "slurmctld");
    assert_string_equal(json_get_str(item(cs, 1), "name"), "extra");
    assert_string_equal(json_get_str(k, "image"), "ghcr.io/slinkyproject/slurmctld:26.05");
    expect_json(json_get(k, "args"), "['-vvv']");
    expect_json(json_get(k, "env"), "[{'name':'TZ','value':'UTC'}]");
    expect_json(json_get(k, "ports"), "[{'name':'slurmctld','containerPort':6817,'protocol':'TCP'}]");
    expect_json(json_get(k, "startupProbe"),
                "{'httpGet':{'path':'/livez','port':'slurmctld'},'failureThreshold':6,'periodSeconds':10}");
    expect_json(json_get(k, "livenessProbe"),
                "{'httpGet':{'path':'/livez','port':'slurmctld'},'failureThreshold':6,'periodSeconds':10}");
    expect_json(json_get(k, "readinessProbe"), "{'httpGet':{'path':'/readyz','port':'slurmctld'}}");
    expect_json(json_get(k, "securityContext"), "{'runAsNonRoot':true,'runAsUser':401,'runAsGroup':401}");
    expect_json(
        json_get(k, "volumeMounts"),
        "[{'name':'slurm-etc','mountPath':'/etc/slurm','readOnly':true},{'name':'run','mountPath':'/run'},"
        "{'name':'statesave','mountPath':'/var/spool/slurmctld/hpc1'},"
        "{'name':'slurm-authsocket','mountPath':'/run/slurmctld'},"
        "{'name':'slurm-logfile','mountPath':'/var/log/slurm'}]");

    /* Native sidecars: reconfigure (what NodeSets add to slurm.conf goes
     * through it), then logfile. */
    const cJSON *ics = json_get(ps, "initContainers");
    assert_int_equal(json_len(ics), 2);
    assert_string_equal(json_get_str(item(ics, 0), "name"), "reconfigure");
    assert_string_equal(json_get_str(item(ics, 0), "restartPolicy"), "Always");
    const cJSON *lf = item(ics, 1);
    assert_string_equal(json_get_str(lf, "name"), "logfile");
    assert_string_equal(json_get_str(lf, "image"), "alpine:latest");
    assert_string_equal(json_get_str(lf, "restartPolicy"), "Always");
    expect_json(json_get(lf, "env"), "[{'name':'SOCKET','value':'/var/log/slurm/slurmctld.log'}]");
    assert_string_equal(item(json_get(lf, "command"), 0)->valuestring, "sh");
    assert_non_null(strstr(item(json_get(lf, "command"), 2)->valuestring, "mkfifo"));
    expect_json(json_get(lf, "volumeMounts"), "[{'name':'slurm-logfile','mountPath':'/var/log/slurm'}]");

    /* Volumes: slurm-etc projected 0610 with every source in order. */
    const cJSON *vols = json_get(ps, "volumes");
    assert_int_equal(json_len(vols), 4);
    expect_json(named(vols, "slurm-etc"),
                "{'name':'slurm-etc','projected':{'defaultMode':392,'sources':["
                "{'configMap':{'name':'slurm-config'}},"
                "{'secret':{'name':'slurm-auth-slurm','items':[{'key':'slurm.key','path':'slurm.key'}]}},"
                "{'secret':{'name':'slurm-auth-jwt','items':[{'key':'jwt.key','path':'jwt.key'}]}},"
                "{'configMap':{'name':'aa-prolog'}},{'configMap':{'name':'mm-ectld'}},"
                "{'configMap':{'name':'zz-files'}},"
                "{'configMap':{'name':'jwks-cm','items':[{'key':'keys.json','path':'jwks.json'}]}}]}}");
    expect_json(named(vols, "slurm-logfile"), "{'name':'slurm-logfile','emptyDir':{'medium':'Memory'}}");
    expect_json(named(vols, "run"), "{'name':'run','emptyDir':{'medium':'Memory'}}");
    expect_json(named(vols, "slurm-authsocket"), "{'name':'slurm-authsocket','emptyDir':{}}");
    assert_null(named(vols, "statesave"));
    assert_null(named(vols, "extra"));

    /* Affinity: the user's terms kept, ours appended. */
    expect_json(json_get(ps, "affinity"),
                "{'nodeAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':{'nodeSelectorTerms':"
                "[{'matchExpressions':[{'key':'pool','operator':'In','values':['ctl']}]}]}},"
                "'podAntiAffinity':{'requiredDuringSchedulingIgnoredDuringExecution':["
                "{'labelSelector':{'matchLabels':{'app':'db'}},'topologyKey':'kubernetes.io/hostname'},"
                "{'labelSelector':{'matchLabels':{'app.kubernetes.io/instance':'slurm',"
                "'app.kubernetes.io/name':'slurmctld'}},'topologyKey':'kubernetes.io/hostname'}]}}");
    cJSON_Delete(sts);

    /* The default StatefulSet as a whole (reviewed golden file). */
    cJSON *ctl = JQ("{" CTL_META ",'spec':{" CTL_KEYS "}}");
    cJSON *cm = NULL;
    assert_int_equal(ctlb_config(ctl, NULL, 0, &t.env, &cm, NULL), 0);
    sts = build_sts("{" CTL_META ",'spec':{" CTL_KEYS "}}", cm, &t, 0, NULL);
    golden_json("controller.statefulset.json", sts);
    cJSON_Delete(sts);
    cJSON_Delete(cm);
    cJSON_Delete(ctl);
    tenv_free(&t);
}

/* Issue 32: Slurm 24.11 has no /livez or /readyz, so HTTP probes never
 * passed. The version comes from the image tag; 25.05 and later get HTTP,
 * 24.11 and unknown versions TCP on the daemon's port. slurmrestd and
 * slurmdbd have TCP probes for every version. */
static void test_probes_by_version(void **state)
{
    static const struct {
        const char *image;
        int version;
    } tags[] = {
        {"ghcr.io/slinkyproject/slurmctld:25.11-ubuntu24.04", 2511},
        {"localhost/slurmop/slurmctld:24.11", 2411},
        {"registry.example:5000/slurmctld:26.05.5@sha256:abcd", 2605},
        {"slurmctld:v25.05", 2505},
        {"registry.example:5000/slurmctld", 0},
        {"slurmctld:latest", 0},
        {"slurmctld@sha256:abcd", 0},
        {"slurmctld:24.115", 0},
        {"slurmctld:24.13", 0},
        {NULL, 0},
    };
    for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++)
        assert_int_equal(clc_image_slurm_version(tags[i].image), tags[i].version);
    assert_true(clc_image_http_probes("slurmctld:25.05"));
    assert_false(clc_image_http_probes("slurmctld:24.11"));
    assert_false(clc_image_http_probes("slurmctld:latest"));

    tenv t;
    setup_env(&t);
    static const char *const old[] = {"'slurmctld':{'image':'localhost/slurmop/slurmctld:24.11'}", ""};
    for (size_t i = 0; i < 2; i++) {
        char *jq = xasprintf("{" CTL_META ",'spec':{" CTL_KEYS "%s%s}}", *old[i] ? "," : "", old[i]);
        cJSON *sts = build_sts(jq, NULL, &t, 0, NULL);
        const cJSON *k = item(json_get(sts, "spec.template.spec.containers"), 0);
        expect_json(json_get(k, "startupProbe"),
                    "{'tcpSocket':{'port':6817},'failureThreshold':6,'periodSeconds':10}");
        expect_json(json_get(k, "livenessProbe"),
                    "{'tcpSocket':{'port':6817},'failureThreshold':6,'periodSeconds':10}");
        expect_json(json_get(k, "readinessProbe"), "{'tcpSocket':{'port':6817}}");
        cJSON_Delete(sts);
        free(jq);
    }
    tenv_free(&t);
}

/* Issue 32: the generated slurm.conf uses auth/slurm, which Slurm 22.05
 * lacks; the Controller's status says which Slurm a deployed cluster needs. */
static void test_version_condition(void **state)
{
    static const struct {
        const char *spec, *status, *reason, *in_message;
    } cases[] = {
        {"'slurmctld':{'image':'ghcr.io/slinkyproject/slurmctld:25.11-ubuntu24.04'}", "True", "Supported",
         "25.11"},
        {"'slurmctld':{'image':'localhost/slurmop/slurmctld:24.11'}", "True", "Supported", "24.11"},
        {"'slurmctld':{'image':'slurmctld:23.11'}", "True", "Supported", "23.11"},
        {"'slurmctld':{'image':'slurmctld:23.02'}", "False", "Unsupported", "auth/slurm"},
        {"'slurmctld':{'image':'debian/slurmctld:22.05'}", "False", "Unsupported", "external Controller"},
        {"'slurmctld':{'image':'slurmctld:latest'}", "Unknown", "VersionUnknown", "23.11 or later"},
        {"'x':1", "Unknown", "VersionUnknown", "(unset)"},
        {"'external':true,'externalConfig':{'host':'h','port':6817}", NULL, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *jq = xasprintf("{" CTL_META ",'spec':{%s}}", cases[i].spec);
        cJSON *c = JQ(jq);
        const char *st, *reason;
        char *msg;
        ctlb_version_condition(c, &st, &reason, &msg);
        if (cases[i].status == NULL) {
            assert_null(st);
            assert_null(msg);
        } else {
            assert_string_equal(st, cases[i].status);
            assert_string_equal(reason, cases[i].reason);
            if (strstr(msg, cases[i].in_message) == NULL)
                fprintf(stderr, "%s: %s\n", cases[i].spec, msg);
            assert_non_null(strstr(msg, cases[i].in_message));
        }
        free(msg);
        cJSON_Delete(c);
        free(jq);
    }
}

static void test_controller_inplace_and_ha(void **state)
{
    tenv t;
    setup_env(&t);
    tenv_add(&t, "PersistentVolumeClaim", "rwx", "{'spec':{'accessModes':['ReadWriteMany']}}");
    cJSON *sts = build_sts("{" CTL_META ",'spec':{" CTL_KEYS ",'inplaceReconfigure':true,"
                           "'ha':{'enabled':true,'backups':2},'persistence':{'existingClaim':'rwx'},"
                           "'slurmctld':{'image':'ctld:26.05'}}}",
                           NULL, &t, 0, NULL);
    const cJSON *spec = json_get(sts, "spec");
    assert_int_equal(json_get_int(spec, "replicas", 0), 3);
    assert_null(json_get(spec, "volumeClaimTemplates"));
    const cJSON *ps = json_get(spec, "template.spec");
    expect_json(named(json_get(ps, "volumes"), "statesave"),
                "{'name':'statesave','persistentVolumeClaim':{'claimName':'rwx'}}");
    /* With standbys, readiness is /livez. */
    expect_json(json_get(item(json_get(ps, "containers"), 0), "readinessProbe"),
                "{'httpGet':{'path':'/livez','port':'slurmctld'}}");
    /* reconfigure first, then logfile; reconfigure runs the slurmctld image. */
    const cJSON *ics = json_get(ps, "initContainers");
    assert_int_equal(json_len(ics), 2);
    const cJSON *rc = item(ics, 0);
    assert_string_equal(json_get_str(rc, "name"), "reconfigure");
    assert_string_equal(json_get_str(rc, "image"), "ctld:26.05");
    assert_string_equal(json_get_str(rc, "restartPolicy"), "Always");
    const cJSON *cmd = json_get(rc, "command");
    assert_string_equal(item(cmd, 0)->valuestring, "tini");
    assert_string_equal(item(cmd, 4)->valuestring, "-c");
    assert_non_null(strstr(item(cmd, 5)->valuestring, "scontrol reconfigure"));
    expect_json(json_get(rc, "volumeMounts"),
                "[{'name':'slurm-etc','mountPath':'/etc/slurm','readOnly':true},"
                "{'name':'slurm-authsocket','mountPath':'/run/slurmctld','readOnly':true}]");
    assert_string_equal(json_get_str(item(ics, 1), "name"), "logfile");
    /* No config hash with inplaceReconfigure; key hashes stay. */
    const cJSON *tmpl = json_get(spec, "template");
    assert_null(ann(tmpl, "slinky.slurm.net/slurm-config-hash"));
    assert_non_null(ann(tmpl, "slinky.slurm.net/slurm-key-hash"));
    assert_non_null(ann(tmpl, "slinky.slurm.net/jwt-key-hash"));
    cJSON_Delete(sts);

    /* A user reconfigure image wins. */
    sts = build_sts("{" CTL_META ",'spec':{" CTL_KEYS
                    ",'inplaceReconfigure':true,'slurmctld':{'image':'ctld:1'},"
                    "'reconfigure':{'image':'tools:2'}}}",
                    NULL, &t, 0, NULL);
    assert_string_equal(json_get_str(item(json_get(sts, "spec.template.spec.initContainers"), 0), "image"),
                        "tools:2");
    cJSON_Delete(sts);
    tenv_free(&t);
}

/* An emptyDir is 0777 (issue 32: slurmctld logged "StateSaveLocation
 * DIRECTORY IS WORLD WRITABLE"). The pod must make StateSaveLocation 0700
 * and SlurmUser's before slurmctld starts: the emptyDir is mounted at the
 * parent and an init container, as uid 401, creates the directory. Its
 * script is run here on a 0777 directory like the kubelet's. */
static void expect_statesave_0700(const cJSON *sts, const char *slurm_conf)
{
    const cJSON *ps = json_get(sts, "spec.template.spec");
    const cJSON *ctld = named(json_get(ps, "containers"), "slurmctld");
    expect_json(named(json_get(ctld, "volumeMounts"), "statesave"),
                "{'name':'statesave','mountPath':'/var/spool/slurmctld'}");
    const cJSON *init = item(json_get(ps, "initContainers"), 0);
    assert_string_equal(json_get_str_or(init, "name", ""), "statesave");
    assert_null(json_get(init, "restartPolicy")); /* runs to completion before slurmctld */
    expect_json(json_get(init, "securityContext"), "{'runAsNonRoot':true,'runAsUser':401,'runAsGroup':401}");
    expect_json(json_get(init, "volumeMounts"), "[{'name':'statesave','mountPath':'/var/spool/slurmctld'}]");
    assert_string_equal(json_get_str_or(init, "image", ""), "slurmctld:26.05");
    /* The directory it makes is slurm.conf's StateSaveLocation. */
    const cJSON *env = json_get(init, "env");
    assert_int_equal(json_len(env), 1);
    assert_string_equal(json_get_str(env->child, "name"), "STATESAVE");
    const char *want = strstr(slurm_conf, "\nStateSaveLocation=");
    assert_non_null(want);
    want += strlen("\nStateSaveLocation=");
    const char *dir_env = json_get_str_or(env->child, "value", "");
    assert_true(strncmp(want, dir_env, strlen(dir_env)) == 0 && want[strlen(dir_env)] == '\n');

    char root[] = "/tmp/slurmop-statesave-XXXXXX";
    assert_non_null(mkdtemp(root));
    assert_int_equal(chmod(root, 0777), 0);
    char *dir = xasprintf("%s/state", root);
    char *path = write_temp(script_of(init));
    char cmd[512];
    /* Twice: a restarted init container finds the directory there. */
    snprintf(cmd, sizeof(cmd), "STATESAVE=%s sh %s && STATESAVE=%s sh %s", dir, path, dir, path);
    assert_int_equal(system(cmd), 0);
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0700);
    assert_int_equal(st.st_uid, geteuid());
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
    unlink(path);
    free(path);
    free(dir);
}

static void test_controller_persistence_table(void **state)
{
    tenv t;
    setup_env(&t);
    tenv_add(&t, "PersistentVolumeClaim", "rwo", "{'spec':{'accessModes':['ReadWriteOnce']}}");
    tenv_add(&t, "PersistentVolumeClaim", "rwx", "{'spec':{'accessModes':['ReadWriteMany']}}");
    char *why = NULL;

    /* enabled, existingClaim, no HA: the claim as a volume (RWO is fine). */
    cJSON *sts = build_sts("{" CTL_META ",'spec':{" CTL_KEYS ",'persistence':{'enabled':true,"
                           "'existingClaim':'rwo'}}}",
                           NULL, &t, 0, NULL);
    expect_json(named(json_get(sts, "spec.template.spec.volumes"), "statesave"),
                "{'name':'statesave','persistentVolumeClaim':{'claimName':'rwo'}}");
    assert_null(json_get(sts, "spec.volumeClaimTemplates"));
    cJSON_Delete(sts);

    /* disabled, no HA: emptyDir. */
#define NO_PERSIST                                                                                           \
    "{" CTL_META ",'spec':{" CTL_KEYS                                                                        \
    ",'persistence':{'enabled':false},'slurmctld':{'image':'slurmctld:26.05'}}}"
    sts = build_sts(NO_PERSIST, NULL, &t, 0, NULL);
    cJSON *np = JQ(NO_PERSIST), *npcm = NULL;
    assert_int_equal(ctlb_config(np, NULL, 0, &t.env, &npcm, NULL), 0);
    expect_json(named(json_get(sts, "spec.template.spec.volumes"), "statesave"),
                "{'name':'statesave','emptyDir':{}}");
    assert_null(json_get(sts, "spec.volumeClaimTemplates"));
    expect_statesave_0700(sts, clc_str(json_get(npcm, "data"), "slurm.conf"));
    cJSON_Delete(npcm);
    cJSON_Delete(np);
    cJSON_Delete(sts);

    /* enabled (default), no claim, HA: refused. */
    build_sts("{" CTL_META ",'spec':{" CTL_KEYS ",'ha':{'enabled':true}}}", NULL, &t, OP_EINVAL, &why);
    assert_string_equal(why, "HA requires persistence.existingClaim");
    free(why);
    why = NULL;

    /* disabled, HA: refused. */
    build_sts("{" CTL_META ",'spec':{" CTL_KEYS ",'ha':{'enabled':true},'persistence':{'enabled':false,"
              "'existingClaim':'rwx'}}}",
              NULL, &t, OP_EINVAL, &why);
    assert_non_null(strstr(why, "persistence is disabled"));
    free(why);
    why = NULL;

    /* HA on a claim without ReadWriteMany: refused. */
    build_sts("{" CTL_META ",'spec':{" CTL_KEYS
              ",'ha':{'enabled':true},'persistence':{'existingClaim':'rwo'}}}",
              NULL, &t, OP_EINVAL, &why);
    assert_non_null(strstr(why, "ReadWriteMany"));
    free(why);
    why = NULL;

    /* HA on a claim not (yet) in the cache: built, the PVC decides later. */
    sts = build_sts("{" CTL_META ",'spec':{" CTL_KEYS
                    ",'ha':{'enabled':true},'persistence':{'existingClaim':'new'}}}",
                    NULL, &t, 0, NULL);
    assert_int_equal(json_get_int(sts, "spec.replicas", 0), 2);
    cJSON_Delete(sts);
    tenv_free(&t);
}

static void test_controller_hashes(void **state)
{
    tenv t;
    setup_env(&t);
    const char *jq = "{" CTL_META ",'spec':{" CTL_KEYS "}}";
    cJSON *ctl = JQ(jq);
    cJSON *cm = NULL;
    assert_int_equal(ctlb_config(ctl, NULL, 0, &t.env, &cm, NULL), 0);

    cJSON *sts = build_sts(jq, cm, &t, 0, NULL);
    const cJSON *tmpl = json_get(sts, "spec.template");
    /* What is hashed: decoded Secret values in key order; ConfigMap values
     * (cgroup.conf sorts before slurm.conf) concatenated. */
    char want[65];
    sha256_hex("slurm-key-bytes", 15, want);
    assert_string_equal(ann(tmpl, "slinky.slurm.net/slurm-key-hash"), want);
    sha256_hex("jwt-key-bytes", 13, want);
    assert_string_equal(ann(tmpl, "slinky.slurm.net/jwt-key-hash"), want);
    const char *cg = clc_str(json_get(cm, "data"), "cgroup.conf");
    const char *sc = clc_str(json_get(cm, "data"), "slurm.conf");
    /* slurm.conf without its MaxNodeCount line (what NodeSets change). */
    const char *mnc = strstr(sc, "MaxNodeCount=1024\n");
    assert_non_null(mnc);
    char *cat = xasprintf("%s%.*s%s", cg, (int)(mnc - sc), sc, mnc + strlen("MaxNodeCount=1024\n"));
    sha256_hex(cat, strlen(cat), want);
    free(cat);
    assert_string_equal(ann(tmpl, "slinky.slurm.net/slurm-config-hash"), want);
    char key1[65], jwt1[65], conf1[65];
    strcpy(key1, ann(tmpl, "slinky.slurm.net/slurm-key-hash"));
    strcpy(jwt1, ann(tmpl, "slinky.slurm.net/jwt-key-hash"));
    strcpy(conf1, ann(tmpl, "slinky.slurm.net/slurm-config-hash"));
    cJSON_Delete(sts);

    /* Nothing changed: identical object. Unrelated changes (another Secret,
     * a label on the Controller) leave the hashes alone. */
    cJSON *a = build_sts(jq, cm, &t, 0, NULL);
    add_secret(&t, "unrelated", "x", "y");
    cJSON *b = build_sts(jq, cm, &t, 0, NULL);
    assert_true(json_equal(a, b));
    cJSON_Delete(b);
    b = build_sts("{" CTL_META ",'spec':{" CTL_KEYS ",'template':{'metadata':{'labels':{'new':'label'}}}}}",
                  cm, &t, 0, NULL);
    assert_string_equal(ann(json_get(b, "spec.template"), "slinky.slurm.net/slurm-key-hash"), key1);
    assert_string_equal(ann(json_get(b, "spec.template"), "slinky.slurm.net/jwt-key-hash"), jwt1);
    assert_string_equal(ann(json_get(b, "spec.template"), "slinky.slurm.net/slurm-config-hash"), conf1);
    cJSON_Delete(b);

    /* A new slurm key: only its hash changes. */
    add_secret(&t, "slurm-auth-slurm", "slurm.key", "rotated");
    b = build_sts(jq, cm, &t, 0, NULL);
    tmpl = json_get(b, "spec.template");
    assert_string_not_equal(ann(tmpl, "slinky.slurm.net/slurm-key-hash"), key1);
    assert_string_equal(ann(tmpl, "slinky.slurm.net/jwt-key-hash"), jwt1);
    assert_string_equal(ann(tmpl, "slinky.slurm.net/slurm-config-hash"), conf1);
    cJSON_Delete(b);

    /* A NodeSet appears, with a partition and replicas that raise
     * MaxNodeCount: slurm.conf changes, the pod template does not (the
     * reconfigure sidecar applies it; a roll would restart slurmctld, which
     * without persistence forgets every dynamic node). */
    add_secret(&t, "slurm-auth-slurm", "slurm.key", "slurm-key-bytes");
    cJSON *ns = JQ("{'metadata':{'name':'cpu'},'spec':{'controllerRef':{'name':'slurm'},'replicas':2000,"
                   "'partition':{'enabled':true}}}");
    const cJSON *list[1] = {ns};
    cJSON *cm2 = NULL;
    assert_int_equal(ctlb_config(ctl, list, 1, &t.env, &cm2, NULL), 0);
    assert_string_not_equal(clc_str(json_get(cm2, "data"), "slurm.conf"), sc);
    cJSON *a2 = build_sts(jq, cm, &t, 0, NULL);
    b = build_sts(jq, cm2, &t, 0, NULL);
    assert_true(json_equal(a2, b));
    cJSON_Delete(a2);
    cJSON_Delete(b);
    /* A change of the user's (extraConf): only the config hash changes. */
    const char *jq2 = "{" CTL_META ",'spec':{" CTL_KEYS ",'extraConf':'SchedulerParameters=bf_continue'}}";
    cJSON *ctl2 = JQ(jq2);
    cJSON *cm3 = NULL;
    assert_int_equal(ctlb_config(ctl2, list, 1, &t.env, &cm3, NULL), 0);
    b = build_sts(jq2, cm3, &t, 0, NULL);
    tmpl = json_get(b, "spec.template");
    assert_string_equal(ann(tmpl, "slinky.slurm.net/slurm-key-hash"), key1);
    assert_string_not_equal(ann(tmpl, "slinky.slurm.net/slurm-config-hash"), conf1);
    cJSON_Delete(b);
    cJSON_Delete(cm3);
    cJSON_Delete(ctl2);

    /* config NULL: the stored ConfigMap from env (and "" when none). */
    b = build_sts(jq, NULL, &t, 0, NULL);
    assert_string_equal(ann(json_get(b, "spec.template"), "slinky.slurm.net/slurm-config-hash"), "");
    cJSON_Delete(b);
    json_set(t.objs, "ConfigMap/slurm-config", cJSON_Duplicate(cm, 1));
    b = build_sts(jq, NULL, &t, 0, NULL);
    assert_string_equal(ann(json_get(b, "spec.template"), "slinky.slurm.net/slurm-config-hash"), conf1);
    cJSON_Delete(b);

    /* Missing key Secrets hash as "". */
    tenv_del(&t, "Secret", "slurm-auth-jwt");
    b = build_sts(jq, cm, &t, 0, NULL);
    assert_string_equal(ann(json_get(b, "spec.template"), "slinky.slurm.net/jwt-key-hash"), "");
    cJSON_Delete(b);

    cJSON_Delete(a);
    cJSON_Delete(ns);
    cJSON_Delete(cm2);
    cJSON_Delete(cm);
    cJSON_Delete(ctl);
    tenv_free(&t);
}

static void test_controller_service_monitor(void **state)
{
    cJSON *c = JQ("{" CTL_META ",'spec':{'metrics':{'enabled':true,'serviceMonitor':{'enabled':false}}}}");
    cJSON *sm = (cJSON *)1;
    assert_int_equal(ctlb_service_monitor(c, &sm, NULL), 0);
    assert_null(sm);
    cJSON_Delete(c);

    c = JQ("{" CTL_META ",'spec':{'metrics':{'enabled':true,'serviceMonitor':{'enabled':true,"
           "'labels':{'release':'prom'},'interval':'30s','scrapeTimeout':'25s'}}}}");
    assert_int_equal(ctlb_service_monitor(c, &sm, NULL), 0);
    assert_string_equal(json_get_str(sm, "apiVersion"), "monitoring.coreos.com/v1");
    assert_string_equal(json_get_str(sm, "kind"), "ServiceMonitor");
    assert_string_equal(json_get_str(sm, "metadata.name"), "slurm-controller");
    assert_string_equal(label(sm, "release"), "prom");
    expect_owner(sm, "Controller", "slurm", UID);
    expect_json(
        json_get(sm, "spec"),
        "{'selector':{'matchLabels':{'app.kubernetes.io/instance':'slurm','app.kubernetes.io/name':"
        "'slurmctld'}},'namespaceSelector':{'matchNames':['ns1']},'endpoints':["
        "{'path':'/metrics/jobs','port':'slurmctld','scheme':'http','interval':'30s','scrapeTimeout':'25s'},"
        "{'path':'/metrics/nodes','port':'slurmctld','scheme':'http','interval':'30s','scrapeTimeout':'25s'},"
        "{'path':'/metrics/partitions','port':'slurmctld','scheme':'http','interval':'30s',"
        "'scrapeTimeout':'25s'},"
        "{'path':'/metrics/scheduler','port':'slurmctld','scheme':'http','interval':'30s',"
        "'scrapeTimeout':'25s'}]}");
    cJSON_Delete(sm);
    cJSON_Delete(c);

    /* User endpoints, each defaulting to the monitor's interval. */
    c = JQ("{" CTL_META ",'spec':{'metrics':{'enabled':true,'serviceMonitor':{'enabled':true,'interval':'1m',"
           "'endpoints':[{'path':'/metrics/jobs','interval':'10s'},{'path':'/metrics/nodes'}]}}}}");
    assert_int_equal(ctlb_service_monitor(c, &sm, NULL), 0);
    expect_json(json_get(sm, "spec.endpoints"),
                "[{'path':'/metrics/jobs','port':'slurmctld','scheme':'http','interval':'10s'},"
                "{'path':'/metrics/nodes','port':'slurmctld','scheme':'http','interval':'1m'}]");
    cJSON_Delete(sm);
    cJSON_Delete(c);

    /* metrics disabled: none. */
    c = JQ("{" CTL_META ",'spec':{'metrics':{'enabled':false,'serviceMonitor':{'enabled':true}}}}");
    sm = (cJSON *)1;
    assert_int_equal(ctlb_service_monitor(c, &sm, NULL), 0);
    assert_null(sm);
    cJSON_Delete(c);
}

/* ---- RestApi -------------------------------------------------------------- */

#define RA_META                                                                                              \
    "'apiVersion':'slinky.slurm.net/v1beta1','kind':'RestApi','metadata':{'name':'rest','namespace':'ns1',"  \
    "'uid':'ra-uid','labels':{'team':'hpc'}}"

static void test_restapi(void **state)
{
    tenv t;
    setup_env(&t);
    tenv_add(&t, "Controller", "slurm", "{" CTL_META ",'spec':{" CTL_KEYS "}}");
    cJSON *r = JQ("{" RA_META ",'spec':{'controllerRef':{'name':'slurm'},'slurmrestd':{'image':'rest:1',"
                  "'args':['-vv']},'template':{'spec':{'priorityClassName':'high'}}}}");
    cJSON *o = NULL;
    assert_int_equal(rab_service(r, &o, NULL), 0);
    assert_string_equal(json_get_str(o, "metadata.name"), "rest-restapi");
    expect_owner(o, "RestApi", "rest", "ra-uid");
    assert_string_equal(label(o, "app.kubernetes.io/component"), "restapi");
    /* Slinky's RestApi Service takes no label of the RestApi itself. */
    assert_null(label(o, "team"));
    expect_json(json_get(o, "spec"),
                "{'selector':{'app.kubernetes.io/instance':'rest','app.kubernetes.io/name':'slurmrestd'},"
                "'ports':[{'name':'slurmrestd','protocol':'TCP','port':6820,'targetPort':'slurmrestd'}]}");
    cJSON_Delete(o);

    assert_int_equal(rab_deployment(r, &t.env, &o, NULL), 0);
    assert_string_equal(json_get_str(o, "kind"), "Deployment");
    assert_string_equal(json_get_str(o, "metadata.name"), "rest-restapi");
    expect_owner(o, "RestApi", "rest", "ra-uid");
    const cJSON *spec = json_get(o, "spec");
    assert_int_equal(json_get_int(spec, "replicas", 0), 1);
    assert_int_equal(json_get_int(spec, "revisionHistoryLimit", -1), 0);
    expect_json(
        json_get(spec, "selector"),
        "{'matchLabels':{'app.kubernetes.io/instance':'rest','app.kubernetes.io/name':'slurmrestd'}}");
    const cJSON *ps = json_get(spec, "template.spec");
    assert_string_equal(ann(json_get(spec, "template"), "kubectl.kubernetes.io/default-container"),
                        "slurmrestd");
    assert_string_equal(json_get_str(ps, "priorityClassName"), "high");
    assert_false(json_get_bool(ps, "automountServiceAccountToken", 1));
    expect_json(json_get(ps, "securityContext"),
                "{'runAsNonRoot':true,'runAsUser':65534,'runAsGroup':65534,'fsGroup':65534}");
    const cJSON *k = item(json_get(ps, "containers"), 0);
    assert_string_equal(json_get_str(k, "name"), "slurmrestd");
    assert_string_equal(json_get_str(k, "image"), "rest:1");
    /* No accountingRef: only the slurmctld plugins; user args, then the
     * listen address last. */
    expect_json(json_get(k, "args"), "['-s','openapi/slurmctld','-vv','0.0.0.0:6820']");
    expect_json(json_get(k, "env"), "[{'name':'SLURM_JWT','value':'daemon'},{'name':'SLURMRESTD_SECURITY',"
                                    "'value':'disable_unshare_files,disable_unshare_sysv'}]");
    expect_json(json_get(k, "startupProbe"),
                "{'tcpSocket':{'port':6820},'failureThreshold':6,'periodSeconds':10}");
    expect_json(json_get(k, "livenessProbe"),
                "{'tcpSocket':{'port':6820},'failureThreshold':6,'periodSeconds':10}");
    expect_json(json_get(k, "readinessProbe"), "{'tcpSocket':{'port':6820}}");
    expect_json(json_get(k, "securityContext"), "{'runAsNonRoot':true,'runAsUser':65534,'runAsGroup':65534}");
    expect_json(json_get(k, "volumeMounts"),
                "[{'name':'slurm-etc','mountPath':'/etc/slurm','readOnly':true}]");
    expect_json(
        json_get(ps, "volumes"),
        "[{'name':'slurm-etc','projected':{'defaultMode':384,'sources':["
        "{'configMap':{'name':'slurm-config','items':[{'key':'slurm.conf','path':'slurm.conf'}]}},"
        "{'secret':{'name':'slurm-auth-slurm','items':[{'key':'slurm.key','path':'slurm.key'}]}}]}}]");
    cJSON_Delete(o);

    /* With accounting: all plugins; replicas honoured. */
    tenv_add(&t, "Controller", "slurm",
             "{" CTL_META ",'spec':{" CTL_KEYS ",'accountingRef':{'name':'acct'}}}");
    cJSON_Delete(r);
    r = JQ("{" RA_META ",'spec':{'controllerRef':{'name':'slurm'},'replicas':3,'service':{'port':8080}}}");
    assert_int_equal(rab_deployment(r, &t.env, &o, NULL), 0);
    assert_int_equal(json_get_int(o, "spec.replicas", 0), 3);
    expect_json(json_get(item(json_get(o, "spec.template.spec.containers"), 0), "args"), "['0.0.0.0:6820']");
    cJSON_Delete(o);
    assert_int_equal(rab_service(r, &o, NULL), 0);
    assert_int_equal(json_get_int(item(json_get(o, "spec.ports"), 0), "port", 0), 8080);
    cJSON_Delete(o);

    /* Missing Controller, or one without a slurm key. */
    char *why = NULL;
    tenv_del(&t, "Controller", "slurm");
    o = (cJSON *)1;
    assert_int_equal(rab_deployment(r, &t.env, &o, &why), OP_ENOTFOUND);
    assert_null(o);
    assert_non_null(strstr(why, "slurm"));
    free(why);
    why = NULL;
    tenv_add(&t, "Controller", "slurm", "{" CTL_META ",'spec':{'external':true}}");
    assert_int_equal(rab_deployment(r, &t.env, &o, &why), OP_EINVAL);
    free(why);
    cJSON_Delete(r);
    tenv_free(&t);
}

/* ---- Accounting ----------------------------------------------------------- */

#define AC_META                                                                                              \
    "'apiVersion':'slinky.slurm.net/"                                                                        \
    "v1beta1','kind':'Accounting','metadata':{'name':'acct','namespace':'ns1',"                              \
    "'uid':'ac-uid'}"
#define AC_SPEC                                                                                              \
    CTL_KEYS ",'storageConfig':{'host':'mariadb','username':'slurm',"                                        \
             "'passwordKeyRef':{'name':'mariadb-password','key':'password'}}"

static void test_accounting(void **state)
{
    tenv t;
    setup_env(&t);
    add_secret(&t, "mariadb-password", "password", "db-pass");
    cJSON *a = JQ("{" AC_META ",'spec':{" AC_SPEC ",'slurmdbd':{'image':'dbd:1'}}}");

    cJSON *d = acb_defaults(a);
    assert_int_equal(json_get_int(d, "spec.storageConfig.port", 0), 3306);
    assert_string_equal(json_get_str(d, "spec.storageConfig.database"), "slurm_acct_db");
    cJSON_Delete(d);

    cJSON *o = NULL;
    assert_int_equal(acb_service(a, &o, NULL), 0);
    assert_string_equal(json_get_str(o, "metadata.name"), "acct-accounting");
    expect_owner(o, "Accounting", "acct", "ac-uid");
    expect_json(json_get(o, "spec"),
                "{'selector':{'app.kubernetes.io/instance':'acct','app.kubernetes.io/name':'slurmdbd'},"
                "'ports':[{'name':'slurmdbd','protocol':'TCP','port':6819,'targetPort':'slurmdbd'}]}");
    cJSON_Delete(o);

    cJSON *sec = NULL;
    assert_int_equal(acb_config_secret(a, &t.env, &sec, NULL), 0);
    assert_string_equal(json_get_str(sec, "kind"), "Secret");
    assert_string_equal(json_get_str(sec, "metadata.name"), "acct-accounting");
    assert_false(json_get_bool(sec, "immutable", 1));
    assert_string_equal(label(sec, "app.kubernetes.io/component"), "accounting");
    expect_owner(sec, "Accounting", "acct", "ac-uid");
    const char *enc = clc_str(json_get(sec, "data"), "slurmdbd.conf");
    size_t n = 0;
    char *conf = (char *)base64_decode(enc, strlen(enc), &n);
    cJSON *ad = acb_defaults(a);
    char *want = sconf_slurmdbd_conf(ad, "db-pass");
    assert_string_equal(conf, want);
    assert_non_null(strstr(conf, "StoragePass=db-pass\n"));
    free(want);
    free(conf);
    cJSON_Delete(ad);

    cJSON *sts = NULL;
    assert_int_equal(acb_statefulset(a, sec, &t.env, &sts, NULL), 0);
    assert_string_equal(json_get_str(sts, "metadata.name"), "acct-accounting");
    expect_owner(sts, "Accounting", "acct", "ac-uid");
    const cJSON *spec = json_get(sts, "spec");
    assert_int_equal(json_get_int(spec, "replicas", 0), 1);
    assert_string_equal(json_get_str(spec, "podManagementPolicy"), "Parallel");
    assert_string_equal(json_get_str(spec, "serviceName"), "acct-accounting");
    assert_int_equal(json_get_int(spec, "revisionHistoryLimit", -1), 0);
    const cJSON *tmpl = json_get(spec, "template");
    char h[65];
    sha256_hex("slurm-key-bytes", 15, h);
    assert_string_equal(ann(tmpl, "slinky.slurm.net/slurm-key-hash"), h);
    sha256_hex("jwt-key-bytes", 13, h);
    assert_string_equal(ann(tmpl, "slinky.slurm.net/jwt-key-hash"), h);
    char *plain = (char *)base64_decode(enc, strlen(enc), &n);
    sha256_hex(plain, n, h);
    free(plain);
    assert_string_equal(ann(tmpl, "slinky.slurm.net/slurmdbd-conf-hash"), h);
    assert_string_equal(ann(tmpl, "kubectl.kubernetes.io/default-container"), "slurmdbd");
    const cJSON *ps = json_get(tmpl, "spec");
    assert_false(json_get_bool(ps, "automountServiceAccountToken", 1));
    const cJSON *k = item(json_get(ps, "containers"), 0);
    assert_string_equal(json_get_str(k, "name"), "slurmdbd");
    assert_string_equal(json_get_str(k, "image"), "dbd:1");
    expect_json(json_get(k, "ports"), "[{'name':'slurmdbd','containerPort':6819,'protocol':'TCP'}]");
    expect_json(json_get(k, "readinessProbe"), "{'tcpSocket':{'port':6819}}");
    expect_json(
        json_get(k, "volumeMounts"),
        "[{'name':'slurm-etc','mountPath':'/etc/slurm','readOnly':true},{'name':'run','mountPath':'/run'}]");
    /* slurmdbd reads its own 0600 copies: an init container of its image
     * copies the projected files (0640 under fsGroup) into a tmpfs. */
    const cJSON *ic = item(json_get(ps, "initContainers"), 0);
    assert_non_null(ic);
    assert_null(item(json_get(ps, "initContainers"), 1));
    assert_string_equal(json_get_str(ic, "name"), "initconf");
    assert_string_equal(json_get_str(ic, "image"), "dbd:1");
    expect_json(json_get(ic, "volumeMounts"),
                "[{'name':'slurm-etc','mountPath':'/mnt/etc/slurm'},"
                "{'name':'slurm-config','mountPath':'/mnt/slurm','readOnly':true}]");
    assert_non_null(strstr(cJSON_GetStringValue(item(json_get(ic, "command"), 2)), "chmod 600"));
    assert_int_equal(json_get_int(ic, "securityContext.runAsUser", 0), 401);
    expect_json(
        json_get(ps, "volumes"),
        "[{'name':'slurm-etc','emptyDir':{'medium':'Memory'}},"
        "{'name':'slurm-config','projected':{'defaultMode':384,'sources':["
        "{'secret':{'name':'acct-accounting','items':[{'key':'slurmdbd.conf','path':'slurmdbd.conf'}]}},"
        "{'secret':{'name':'slurm-auth-slurm','items':[{'key':'slurm.key','path':'slurm.key'}]}},"
        "{'secret':{'name':'slurm-auth-jwt','items':[{'key':'jwt.key','path':'jwt.key'}]}}]}},"
        "{'name':'run','emptyDir':{'medium':'Memory'}}]");
    char conf1[65];
    strcpy(conf1, ann(tmpl, "slinky.slurm.net/slurmdbd-conf-hash"));
    cJSON_Delete(sts);

    /* A new DB password changes the config and so its hash; nothing else. */
    add_secret(&t, "mariadb-password", "password", "new-pass");
    cJSON *sec2 = NULL;
    assert_int_equal(acb_config_secret(a, &t.env, &sec2, NULL), 0);
    assert_int_equal(acb_statefulset(a, sec2, &t.env, &sts, NULL), 0);
    assert_string_not_equal(ann(json_get(sts, "spec.template"), "slinky.slurm.net/slurmdbd-conf-hash"),
                            conf1);
    cJSON_Delete(sts);
    assert_int_equal(acb_statefulset(a, sec, &t.env, &sts, NULL), 0);
    assert_string_equal(ann(json_get(sts, "spec.template"), "slinky.slurm.net/slurmdbd-conf-hash"), conf1);
    cJSON_Delete(sts);
    cJSON_Delete(sec2);
    cJSON_Delete(sec);

    /* jwks: mounted as jwks.json. */
    cJSON_Delete(a);
    a = JQ("{" AC_META ",'spec':{" AC_SPEC ",'jwksKeyRef':{'name':'jwks','key':'k.json'}}}");
    assert_int_equal(acb_statefulset(a, NULL, &t.env, &sts, NULL), 0);
    const cJSON *src =
        json_get(named(json_get(sts, "spec.template.spec.volumes"), "slurm-config"), "projected.sources");
    expect_json(item(src, 3), "{'configMap':{'name':'jwks','items':[{'key':'k.json','path':'jwks.json'}]}}");
    cJSON_Delete(sts);

    /* No password Secret: no config. */
    tenv_del(&t, "Secret", "mariadb-password");
    char *why = NULL;
    sec = (cJSON *)1;
    assert_int_equal(acb_config_secret(a, &t.env, &sec, &why), OP_ENOTFOUND);
    assert_null(sec);
    assert_non_null(strstr(why, "mariadb-password"));
    free(why);
    cJSON_Delete(a);

    /* External: nothing is built. */
    a = JQ("{" AC_META ",'spec':{'external':true,'externalConfig':{'host':'dbd','port':6819}}}");
    o = (cJSON *)1;
    assert_int_equal(acb_service(a, &o, NULL), 0);
    assert_null(o);
    o = (cJSON *)1;
    assert_int_equal(acb_config_secret(a, &t.env, &o, NULL), 0);
    assert_null(o);
    o = (cJSON *)1;
    assert_int_equal(acb_statefulset(a, NULL, &t.env, &o, NULL), 0);
    assert_null(o);
    cJSON_Delete(a);
    tenv_free(&t);
}

/* ---- LoginSet ------------------------------------------------------------- */

#define LS_META                                                                                              \
    "'apiVersion':'slinky.slurm.net/"                                                                        \
    "v1beta1','kind':'LoginSet','metadata':{'name':'login','namespace':'ns1',"                               \
    "'uid':'ls-uid'}"
#define LS_SPEC "'controllerRef':{'name':'slurm'},'sssdConfRef':{'name':'sssd','key':'sssd.conf'}"

static void test_loginset_objects(void **state)
{
    cJSON *l = JQ("{" LS_META ",'spec':{" LS_SPEC ",'extraSshdConfig':'LoginGraceTime 600',"
                  "'rootSshAuthorizedKeys':'ssh-rsa AAAA root@x'}}");
    lsb_host_keys keys = {
        {"RSA-PRIV", "ssh-rsa AAAA\n"}, {"EC-PRIV", "ecdsa-sha2-nistp256 BBBB\n"}, {NULL, NULL}};
    cJSON *s = NULL;
    assert_int_equal(lsb_host_keys_secret(l, &keys, &s, NULL), 0);
    assert_string_equal(json_get_str(s, "metadata.name"), "login-ssh-host-keys");
    expect_owner(s, "LoginSet", "login", "ls-uid");
    assert_true(json_get_bool(s, "immutable", 0));
    const cJSON *data = json_get(s, "data");
    assert_int_equal(json_len(data), 4);
    char *e = b64("RSA-PRIV");
    assert_string_equal(clc_str(data, "ssh_host_rsa_key"), e);
    free(e);
    e = b64("ecdsa-sha2-nistp256 BBBB\n");
    assert_string_equal(clc_str(data, "ssh_host_ecdsa_key.pub"), e);
    free(e);
    assert_null(clc_str(data, "ssh_host_ed25519_key"));
    cJSON_Delete(s);
    /* Ed25519 given from elsewhere: stored too. */
    keys.ed25519.private_key = "ED-PRIV";
    keys.ed25519.public_key = "ssh-ed25519 CCCC\n";
    assert_int_equal(lsb_host_keys_secret(l, &keys, &s, NULL), 0);
    assert_int_equal(json_len(json_get(s, "data")), 6);
    cJSON_Delete(s);
    /* RSA or ECDSA missing: refused. */
    keys.ecdsa.private_key = NULL;
    s = (cJSON *)1;
    char *why = NULL;
    assert_int_equal(lsb_host_keys_secret(l, &keys, &s, &why), OP_EINVAL);
    assert_null(s);
    free(why);

    cJSON *cm = NULL;
    assert_int_equal(lsb_ssh_config(l, &cm, NULL), 0);
    assert_string_equal(json_get_str(cm, "metadata.name"), "login-ssh-config");
    expect_owner(cm, "LoginSet", "login", "ls-uid");
    char *sshd = sconf_login_sshd_config("LoginGraceTime 600");
    assert_string_equal(clc_str(json_get(cm, "data"), "sshd_config"), sshd);
    free(sshd);
    assert_string_equal(clc_str(json_get(cm, "data"), "authorized_keys"),
                        "#\n### SLINKY ###\nssh-rsa AAAA root@x\n");
    cJSON_Delete(cm);

    cJSON *svc = NULL;
    assert_int_equal(lsb_service(l, &svc, NULL), 0);
    assert_string_equal(json_get_str(svc, "metadata.name"), "login");
    expect_owner(svc, "LoginSet", "login", "ls-uid");
    expect_json(json_get(svc, "spec"),
                "{'selector':{'app.kubernetes.io/instance':'login','app.kubernetes.io/name':'login'},"
                "'ports':[{'name':'login','protocol':'TCP','port':22,'targetPort':'login'}]}");
    cJSON_Delete(svc);
    cJSON_Delete(l);
}

static void test_loginset_deployment(void **state)
{
    tenv t;
    setup_env(&t);
    tenv_add(&t, "Controller", "slurm", "{" CTL_META ",'spec':{" CTL_KEYS "}}");
    add_secret(&t, "sssd", "sssd.conf", "[sssd]\n");
    cJSON *l = JQ("{" LS_META ",'spec':{" LS_SPEC ",'replicas':2,'login':{'image':'login:1'},"
                  "'initconf':{'image':'busybox'},'strategy':{'type':'Recreate'}}}");
    cJSON *cm = NULL;
    assert_int_equal(lsb_ssh_config(l, &cm, NULL), 0);
    lsb_host_keys keys = {
        {"RSA-PRIV", "ssh-rsa AAAA\n"}, {"EC-PRIV", "ecdsa-sha2-nistp256 BBBB\n"}, {NULL, NULL}};
    cJSON *hk = NULL;
    assert_int_equal(lsb_host_keys_secret(l, &keys, &hk, NULL), 0);

    cJSON *d = NULL;
    char *why = NULL;
    assert_int_equal(lsb_deployment(l, hk, cm, &t.env, &d, &why), 0);
    assert_string_equal(json_get_str(d, "kind"), "Deployment");
    assert_string_equal(json_get_str(d, "metadata.name"), "login");
    expect_owner(d, "LoginSet", "login", "ls-uid");
    const cJSON *spec = json_get(d, "spec");
    assert_int_equal(json_get_int(spec, "replicas", 0), 2);
    assert_int_equal(json_get_int(spec, "revisionHistoryLimit", -1), 0);
    expect_json(json_get(spec, "strategy"), "{'type':'Recreate'}");
    expect_json(json_get(spec, "selector"),
                "{'matchLabels':{'app.kubernetes.io/instance':'login','app.kubernetes.io/name':'login'}}");
    const cJSON *tmpl = json_get(spec, "template");
    assert_string_equal(label(tmpl, "app.kubernetes.io/component"), "login");
    char h[65];
    clc_hash_data(hk, 1, h);
    assert_int_equal(strlen(h), 64);
    assert_string_equal(ann(tmpl, "slinky.slurm.net/ssh-host-keys-hash"), h);
    const char *sshd = clc_str(json_get(cm, "data"), "sshd_config");
    sha256_hex(sshd, strlen(sshd), h);
    assert_string_equal(ann(tmpl, "slinky.slurm.net/sshd-conf-hash"), h);
    sha256_hex("[sssd]\n", 7, h);
    assert_string_equal(ann(tmpl, "slinky.slurm.net/sssd-conf-hash"), h);
    assert_string_equal(ann(tmpl, "kubectl.kubernetes.io/default-container"), "login");

    const cJSON *ps = json_get(tmpl, "spec");
    assert_false(json_get_bool(ps, "enableServiceLinks", 1));
    assert_false(json_get_bool(ps, "automountServiceAccountToken", 1));
    expect_json(json_get(ps, "dnsConfig"), "{'searches':['slurm-workers-slurm.ns1.svc.cluster.local']}");
    const cJSON *ic = item(json_get(ps, "initContainers"), 0);
    assert_string_equal(json_get_str(ic, "name"), "initconf");
    assert_string_equal(json_get_str(ic, "image"), "busybox");
    expect_json(json_get(ic, "env"), "[{'name':'SLURM_USER','value':'slurm'}]");
    assert_non_null(strstr(item(json_get(ic, "command"), 2)->valuestring, "chown -R 401:401"));
    expect_json(json_get(ic, "volumeMounts"),
                "[{'name':'slurm-etc','mountPath':'/mnt/etc/slurm'},"
                "{'name':'slurm-config','mountPath':'/mnt/slurm','readOnly':true}]");
    const cJSON *k = item(json_get(ps, "containers"), 0);
    assert_string_equal(json_get_str(k, "name"), "login");
    assert_string_equal(json_get_str(k, "image"), "login:1");
    expect_json(json_get(k, "env"),
                "[{'name':'SACKD_OPTIONS','value':'--conf-server slurm-controller.ns1:6817'}]");
    expect_json(json_get(k, "ports"), "[{'name':'login','containerPort':22,'protocol':'TCP'}]");
    expect_json(json_get(k, "readinessProbe"), "{'exec':{'command':['test','-S','/run/slurm/sack.socket']}}");
    expect_json(
        json_get(k, "volumeMounts"),
        "[{'name':'slurm-etc','mountPath':'/etc/slurm','readOnly':true},"
        "{'name':'sackd-dir','mountPath':'/run/slurm'},"
        "{'name':'ssh-host-keys','mountPath':'/etc/ssh/ssh_host_rsa_key','subPath':'ssh_host_rsa_key',"
        "'readOnly':true},"
        "{'name':'ssh-host-keys','mountPath':'/etc/ssh/ssh_host_rsa_key.pub','subPath':"
        "'ssh_host_rsa_key.pub','readOnly':true},"
        "{'name':'ssh-host-keys','mountPath':'/etc/ssh/ssh_host_ecdsa_key','subPath':'ssh_host_ecdsa_key',"
        "'readOnly':true},"
        "{'name':'ssh-host-keys','mountPath':'/etc/ssh/ssh_host_ecdsa_key.pub','subPath':"
        "'ssh_host_ecdsa_key.pub','readOnly':true},"
        "{'name':'ssh-config','mountPath':'/etc/ssh/sshd_config','subPath':'sshd_config','readOnly':true},"
        "{'name':'ssh-config','mountPath':'/root/.ssh/authorized_keys','subPath':'authorized_keys',"
        "'readOnly':true},"
        "{'name':'sssd-conf','mountPath':'/etc/sssd/sssd.conf','subPath':'sssd.conf','readOnly':true}]");
    expect_json(
        json_get(ps, "volumes"),
        "[{'name':'slurm-etc','emptyDir':{'medium':'Memory'}},"
        "{'name':'sackd-dir','emptyDir':{'medium':'Memory'}},"
        "{'name':'slurm-config','projected':{'defaultMode':384,'sources':[{'secret':{'name':"
        "'slurm-auth-slurm','items':[{'key':'slurm.key','path':'slurm.key'}]}}]}},"
        "{'name':'ssh-host-keys','projected':{'defaultMode':384,'sources':[{'secret':{'name':"
        "'login-ssh-host-keys','items':[{'key':'ssh_host_rsa_key','path':'ssh_host_rsa_key','mode':384},"
        "{'key':'ssh_host_rsa_key.pub','path':'ssh_host_rsa_key.pub','mode':420},"
        "{'key':'ssh_host_ecdsa_key','path':'ssh_host_ecdsa_key','mode':384},"
        "{'key':'ssh_host_ecdsa_key.pub','path':'ssh_host_ecdsa_key.pub','mode':420}]}}]}},"
        "{'name':'ssh-config','projected':{'defaultMode':384,'sources':[{'configMap':{'name':"
        "'login-ssh-config','items':[{'key':'sshd_config','path':'sshd_config','mode':384},"
        "{'key':'authorized_keys','path':'authorized_keys','mode':384}]}}]}},"
        "{'name':'sssd-conf','projected':{'defaultMode':384,'sources':[{'secret':{'name':'sssd',"
        "'items':[{'key':'sssd.conf','path':'sssd.conf','mode':384}]}}]}}]");
    char hk1[65], sshd1[65];
    strcpy(hk1, ann(tmpl, "slinky.slurm.net/ssh-host-keys-hash"));
    strcpy(sshd1, ann(tmpl, "slinky.slurm.net/sshd-conf-hash"));
    cJSON_Delete(d);

    /* A Secret that has Ed25519 (e.g. made by Slinky): mounted too; the
     * keys hash changes, the sshd hash does not. */
    keys.ed25519.private_key = "ED";
    keys.ed25519.public_key = "ssh-ed25519 CCCC\n";
    cJSON *hk2 = NULL;
    assert_int_equal(lsb_host_keys_secret(l, &keys, &hk2, NULL), 0);
    assert_int_equal(lsb_deployment(l, hk2, cm, &t.env, &d, NULL), 0);
    tmpl = json_get(d, "spec.template");
    assert_string_not_equal(ann(tmpl, "slinky.slurm.net/ssh-host-keys-hash"), hk1);
    assert_string_equal(ann(tmpl, "slinky.slurm.net/sshd-conf-hash"), sshd1);
    assert_non_null(
        named(json_get(item(json_get(tmpl, "spec.containers"), 0), "volumeMounts"), "ssh-host-keys"));
    int ed = 0;
    for (const cJSON *m = json_get(item(json_get(tmpl, "spec.containers"), 0), "volumeMounts")->child; m;
         m = m->next)
        ed += strstr(json_get_str_or(m, "mountPath", ""), "ed25519") != NULL;
    assert_int_equal(ed, 2);
    cJSON_Delete(d);
    cJSON_Delete(hk2);

    /* External Controller, custom cluster domain, the user's own port. */
    tenv_add(&t, "Controller", "slurm",
             "{" CTL_META ",'spec':{" CTL_KEYS
             ",'external':true,'externalConfig':{'host':'ctld.example','port':6817}}}");
    t.env.cluster_domain = "corp.local";
    cJSON_Delete(l);
    l = JQ("{" LS_META ",'spec':{" LS_SPEC ",'login':{'ports':[{'name':'login','containerPort':2222}]}}}");
    assert_int_equal(lsb_deployment(l, hk, cm, &t.env, &d, NULL), 0);
    ps = json_get(d, "spec.template.spec");
    k = item(json_get(ps, "containers"), 0);
    expect_json(json_get(k, "env"), "[{'name':'SACKD_OPTIONS','value':'--conf-server ctld.example:6817'}]");
    expect_json(json_get(k, "ports"), "[{'name':'login','containerPort':2222}]");
    expect_json(json_get(ps, "dnsConfig"), "{'searches':['slurm-workers-slurm.ns1.svc.corp.local']}");
    assert_int_equal(json_get_int(d, "spec.replicas", 0), 1);
    assert_null(json_get(d, "spec.strategy"));
    cJSON_Delete(d);

    /* No Controller. */
    tenv_del(&t, "Controller", "slurm");
    d = (cJSON *)1;
    assert_int_equal(lsb_deployment(l, hk, cm, &t.env, &d, &why), OP_ENOTFOUND);
    assert_null(d);
    free(why);
    cJSON_Delete(l);
    cJSON_Delete(hk);
    cJSON_Delete(cm);
    tenv_free(&t);
}

/* ---- the shell scripts in the pods --------------------------------------- */

static char *write_temp(const char *text)
{
    char *path = strdup("/tmp/slurmop-script-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
    return path;
}

static void shell_parses(const char *shell, const char *script)
{
    char *path = write_temp(script);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s -n %s", shell, path);
    int st = system(cmd);
    unlink(path);
    free(path);
    assert_int_equal(st, 0);
}

static const char *script_of(const cJSON *container)
{
    const cJSON *cmd = json_get(container, "command");
    const cJSON *last = cJSON_GetArrayItem(cmd, json_len(cmd) - 1);
    assert_true(cJSON_IsString(last));
    return last->valuestring;
}

static void test_pod_scripts(void **state)
{
    tenv t;
    setup_env(&t);
    cJSON *sts =
        build_sts("{" CTL_META ",'spec':{" CTL_KEYS ",'inplaceReconfigure':true}}", NULL, &t, 0, NULL);
    const cJSON *ics = json_get(sts, "spec.template.spec.initContainers");
    shell_parses("bash", script_of(named(ics, "reconfigure")));
    shell_parses("sh", script_of(named(ics, "logfile")));
    cJSON_Delete(sts);

    tenv_add(&t, "Controller", "slurm", "{" CTL_META ",'spec':{" CTL_KEYS "}}");
    cJSON *l = JQ("{" LS_META ",'spec':{" LS_SPEC "}}");
    cJSON *d = NULL;
    assert_int_equal(lsb_deployment(l, NULL, NULL, &t.env, &d, NULL), 0);
    const char *initconf = script_of(named(json_get(d, "spec.template.spec.initContainers"), "initconf"));
    shell_parses("sh", initconf);

    /* Run initconf against a projected-volume layout made like the
     * kubelet's (files behind ..data symlinks), in temporary directories.
     * chown needs root: only then is the whole script exercised. */
    if (geteuid() == 0) {
        char root[] = "/tmp/slurmop-initconf-XXXXXX";
        assert_non_null(mkdtemp(root));
        char cmd[2048];
        snprintf(cmd, sizeof(cmd),
                 "set -e; cd %s; mkdir -p src/..2024_01_01 dst; echo key > src/..2024_01_01/slurm.key; "
                 "echo conf > src/..2024_01_01/extra.conf; echo x > src/..2024_01_01/README; "
                 "ln -s ..2024_01_01 src/..data; ln -s ..data/slurm.key src/slurm.key; "
                 "ln -s ..data/extra.conf src/extra.conf; ln -s ..data/README src/README",
                 root);
        assert_int_equal(system(cmd), 0);
        /* Point the script at the temporary tree. */
        char *src = xasprintf("%s/src", root), *dst = xasprintf("%s/dst", root);
        /* Keep the script from its mkdir on, with our paths in front. */
        const char *body = strstr(initconf, "mkdir -p");
        assert_non_null(body);
        char *fixed = xasprintf("src=%s\ndst=%s\n%s", src, dst, body);
        char *path = write_temp(fixed);
        snprintf(cmd, sizeof(cmd), "sh %s > /dev/null", path);
        assert_int_equal(system(cmd), 0);
        struct stat st;
        char *k = xasprintf("%s/slurm.key", dst), *c = xasprintf("%s/extra.conf", dst),
             *r = xasprintf("%s/README", dst);
        assert_int_equal(lstat(k, &st), 0);
        assert_true(S_ISREG(st.st_mode));
        assert_int_equal(st.st_mode & 0777, 0600);
        assert_int_equal(st.st_uid, 401);
        assert_int_equal(st.st_gid, 401);
        assert_int_equal(lstat(c, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0644);
        assert_int_equal(lstat(r, &st), -1); /* only *.conf and *.key are copied */
        snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
        assert_int_equal(system(cmd), 0);
        unlink(path);
        free(path);
        free(k);
        free(c);
        free(r);
        free(fixed);
        free(src);
        free(dst);
    }
    cJSON_Delete(d);
    cJSON_Delete(l);
    tenv_free(&t);
}

/* The slurmctld pod's logfile sidecar, run as PID 1 of a PID namespace: it
 * copies the log and exits promptly on SIGTERM (issue 32: a shell loop as
 * PID 1 ignored it and every pod delete waited 30 s). */
static void test_controller_logfile_sigterm(void **state)
{
    tenv t;
    setup_env(&t);
    cJSON *sts = build_sts("{" CTL_META ",'spec':{" CTL_KEYS "}}", NULL, &t, 0, NULL);
    const char *why = sh_check_logfile(script_of(named(json_get(sts, "spec.template.spec.initContainers"),
                                                       "logfile")));
    cJSON_Delete(sts);
    tenv_free(&t);
    if (why == SH_SKIP)
        skip();
    if (why)
        fprintf(stderr, "logfile sidecar: %s\n", why);
    assert_null(why);
}

/* ---- validation ----------------------------------------------------------- */

static int has_msg(char *const *msgs, size_t n, const char *needle)
{
    for (size_t i = 0; i < n; i++)
        if (strstr(msgs[i], needle))
            return 1;
    return 0;
}

static void test_validate_controller(void **state)
{
    tenv t;
    setup_env(&t);
    tenv_add(&t, "ConfigMap", "files", "{'data':{'gres.conf':'x','slurm.conf':'no','my.conf':'?'}}");
    tenv_add(&t, "PersistentVolumeClaim", "rwo", "{'spec':{'accessModes':['ReadWriteOnce']}}");
    vclu_result r = {0};

    cJSON *c = JQ("{" CTL_META ",'spec':{" CTL_KEYS "}}");
    assert_int_equal(vclu_controller(c, NULL, &t.env, &r), 0);
    assert_int_equal(r.n_errors + r.n_warnings, 0);
    cJSON_Delete(c);

    /* A ConfigMap ref naming another namespace: Slinky's type has the field, neither reads it
     * (the ConfigMap is the Controller's namespace's): a warning, the same namespace none. */
    c = JQ("{" CTL_META ",'spec':{" CTL_KEYS ",'configFileRefs':[{'name':'files','namespace':'other'}],"
           "'prologScriptRefs':[{'name':'p','namespace':'ns1'}]}}");
    tenv_add(&t, "ConfigMap", "p", "{'data':{'p.sh':'x'}}");
    vclu_controller(c, NULL, &t.env, &r);
    assert_true(
        has_msg(r.warnings, r.n_warnings, "configFileRefs: ConfigMap files: namespace other is ignored"));
    assert_false(has_msg(r.warnings, r.n_warnings, "prologScriptRefs"));
    vclu_result_free(&r);
    cJSON_Delete(c);

    c = JQ("{" CTL_META ",'spec':{'clusterName':'a-cluster-name-that-is-much-too-long-for-slurm',"
           "'configFileRefs':[{'name':'files'},{'name':'gone'}],'ha':{'enabled':true},"
           "'persistence':{'existingClaim':'rwo'},'service':{'spec':{'externalIPs':['1.1.1.1']}}}}");
    assert_int_equal(vclu_controller(c, NULL, &t.env, &r), OP_EINVALID);
    assert_true(has_msg(r.errors, r.n_errors, "slurmKeyRef must be set"));
    assert_true(has_msg(r.errors, r.n_errors, "jwtKeyRef or jwtHs256KeyRef"));
    assert_true(has_msg(r.errors, r.n_errors, "ConfigMap gone not found"));
    assert_true(has_msg(r.errors, r.n_errors, "slurm.conf is reserved"));
    assert_true(has_msg(r.errors, r.n_errors, "ReadWriteMany"));
    assert_true(has_msg(r.errors, r.n_errors, "exceeds 40 characters (46)"));
    assert_int_equal(r.n_errors, 6);
    assert_true(has_msg(r.warnings, r.n_warnings, "my.conf is unknown"));
    assert_true(has_msg(r.warnings, r.n_warnings, "externalIPs"));
    assert_int_equal(r.n_warnings, 2);
    char *j = vclu_join(r.errors, r.n_errors);
    assert_non_null(strstr(j, "; "));
    free(j);
    vclu_result_free(&r);
    assert_int_equal(r.n_errors, 0);
    cJSON_Delete(c);

    /* External without externalConfig. */
    c = JQ("{" CTL_META ",'spec':{'external':true}}");
    assert_int_equal(vclu_controller(c, NULL, &t.env, &r), OP_EINVALID);
    assert_int_equal(r.n_errors, 1);
    assert_true(has_msg(r.errors, r.n_errors, "externalConfig"));
    vclu_result_free(&r);
    cJSON_Delete(c);

    /* HA without a claim. */
    c = JQ("{" CTL_META ",'spec':{" CTL_KEYS ",'ha':{'enabled':true}}}");
    assert_int_equal(vclu_controller(c, NULL, &t.env, &r), OP_EINVALID);
    assert_true(has_msg(r.errors, r.n_errors, "persistence.existingClaim"));
    vclu_result_free(&r);
    cJSON_Delete(c);

    /* Updates: immutable fields. */
    cJSON *old = JQ("{" CTL_META ",'spec':{" CTL_KEYS ",'persistence':{'existingClaim':'a'}}}");
    c = JQ(
        "{" CTL_META ",'spec':{'clusterName':'renamed','slurmKeyRef':{'name':'other','key':'k'},"
        "'jwtHs256KeyRef':{'name':'slurm-auth-jwt','key':'jwt.key'},'persistence':{'existingClaim':'b'}}}");
    assert_int_equal(vclu_controller(c, old, &t.env, &r), OP_EINVALID);
    assert_true(has_msg(r.errors, r.n_errors, "ClusterName cannot change"));
    assert_true(has_msg(r.errors, r.n_errors, "slurmKeyRef cannot change"));
    assert_true(has_msg(r.errors, r.n_errors, "existingClaim cannot change"));
    /* The same effective JWT key through the deprecated field is no change. */
    assert_false(has_msg(r.errors, r.n_errors, "jwtKeyRef (or jwtHs256KeyRef) cannot change"));
    assert_int_equal(r.n_errors, 3);
    vclu_result_free(&r);
    cJSON_Delete(c);
    c = JQ("{" CTL_META ",'spec':{" CTL_KEYS ",'persistence':{'enabled':false}}}");
    assert_int_equal(vclu_controller(c, old, &t.env, &r), OP_EINVALID);
    assert_true(has_msg(r.errors, r.n_errors, "persistence.enabled cannot change"));
    vclu_result_free(&r);
    cJSON_Delete(c);
    /* An unchanged update passes; the create-only length check is skipped. */
    assert_int_equal(vclu_controller(old, old, &t.env, &r), 0);
    vclu_result_free(&r);
    cJSON_Delete(old);
    tenv_free(&t);
}

static void test_validate_others(void **state)
{
    vclu_result r = {0};
    cJSON *l = JQ("{" LS_META ",'spec':{" LS_SPEC "}}");
    assert_int_equal(vclu_loginset(l, NULL, &r), 0);
    cJSON *bad =
        JQ("{" LS_META ",'spec':{'controllerRef':{'name':'x'},'service':{'spec':{'externalIPs':['1']}}}}");
    assert_int_equal(vclu_loginset(bad, l, &r), OP_EINVALID);
    assert_true(has_msg(r.errors, r.n_errors, "sssdConfRef.name"));
    assert_true(has_msg(r.errors, r.n_errors, "controllerRef cannot change"));
    assert_int_equal(r.n_warnings, 1);
    vclu_result_free(&r);
    cJSON_Delete(bad);
    cJSON_Delete(l);

    cJSON *ra = JQ("{" RA_META ",'spec':{}}");
    assert_int_equal(vclu_restapi(ra, NULL, &r), OP_EINVALID);
    assert_true(has_msg(r.errors, r.n_errors, "controllerRef.name"));
    vclu_result_free(&r);
    cJSON_Delete(ra);

    cJSON *a = JQ("{" AC_META ",'spec':{" AC_SPEC "}}");
    assert_int_equal(vclu_accounting(a, NULL, &r), 0);
    cJSON *a2 = JQ("{" AC_META ",'spec':{'slurmKeyRef':{'name':'s','key':'k'},"
                   "'jwtKeyRef':{'name':'other','key':'jwt.key'},'storageConfig':{}}}");
    assert_int_equal(vclu_accounting(a2, a, &r), OP_EINVALID);
    assert_true(has_msg(r.errors, r.n_errors, "storageConfig.host"));
    assert_true(has_msg(r.errors, r.n_errors, "passwordKeyRef"));
    assert_true(has_msg(r.errors, r.n_errors, "cannot change"));
    assert_int_equal(r.n_errors, 3);
    vclu_result_free(&r);
    cJSON_Delete(a2);
    cJSON_Delete(a);

    cJSON *tk = JQ("{'metadata':{'name':'t'},'spec':{'username':'u','jwtKeyRef':{'name':'k','key':'j'}}}");
    assert_int_equal(vclu_token(tk, NULL, &r), 0);
    cJSON *tk2 = JQ("{'metadata':{'name':'t'},'spec':{'lifetime':'forever'}}");
    assert_int_equal(vclu_token(tk2, tk, &r), OP_EINVALID);
    assert_true(has_msg(r.errors, r.n_errors, "jwtKeyRef or jwtHs256KeyRef must be set"));
    assert_true(has_msg(r.errors, r.n_errors, "username"));
    assert_true(has_msg(r.errors, r.n_errors, "forever"));
    assert_true(has_msg(r.errors, r.n_errors, "cannot change"));
    assert_int_equal(r.n_errors, 4);
    vclu_result_free(&r);
    cJSON_Delete(tk2);
    cJSON_Delete(tk);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_controller_defaults_and_names),
        cmocka_unit_test(test_controller_services),
        cmocka_unit_test(test_controller_config),
        cmocka_unit_test(test_controller_statefulset_shape),
        cmocka_unit_test(test_controller_logfile_sigterm),
        cmocka_unit_test(test_probes_by_version),
        cmocka_unit_test(test_version_condition),
        cmocka_unit_test(test_controller_inplace_and_ha),
        cmocka_unit_test(test_controller_persistence_table),
        cmocka_unit_test(test_controller_hashes),
        cmocka_unit_test(test_controller_service_monitor),
        cmocka_unit_test(test_restapi),
        cmocka_unit_test(test_accounting),
        cmocka_unit_test(test_loginset_objects),
        cmocka_unit_test(test_loginset_deployment),
        cmocka_unit_test(test_pod_scripts),
        cmocka_unit_test(test_validate_controller),
        cmocka_unit_test(test_validate_others),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
