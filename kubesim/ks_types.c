/* ks_types: the built-in resources, their defaults and validation, and
 * resources defined by CustomResourceDefinitions (structural pruning,
 * defaulting and a subset of OpenAPI validation).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubesim/ks_int.h"
#include "core/crypto.h"
#include "core/json.h"
#include "core/labels.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/rfc3339.h"

/* ---- shared helpers ---------------------------------------------------- */

static void set_default_str(cJSON *o, const char *key, const char *v)
{
    if (!cJSON_IsString(json_child(o, key)))
        json_set_str(o, key, v);
}

static void set_default_int(cJSON *o, const char *key, long long v)
{
    if (!cJSON_IsNumber(json_child(o, key)))
        json_set_int(o, key, v);
}

static void set_default_obj(cJSON *o, const char *key)
{
    if (!cJSON_IsObject(json_child(o, key)))
        json_set(o, key, cJSON_CreateObject());
}

static void probe_defaults(cJSON *c, const char *key)
{
    cJSON *p = (cJSON *)json_child(c, key);
    if (!cJSON_IsObject(p))
        return;
    set_default_int(p, "timeoutSeconds", 1);
    set_default_int(p, "periodSeconds", 10);
    set_default_int(p, "successThreshold", 1);
    set_default_int(p, "failureThreshold", 3);
}

static void container_defaults(cJSON *list)
{
    for (cJSON *c = cJSON_IsArray(list) ? list->child : NULL; c; c = c->next) {
        if (!cJSON_IsObject(c))
            continue;
        set_default_str(c, "terminationMessagePath", "/dev/termination-log");
        set_default_str(c, "terminationMessagePolicy", "File");
        const char *image = json_get_str_or(c, "image", "");
        const char *slash = strrchr(image, '/');
        const char *tagpos = strrchr(slash ? slash : image, ':');
        int latest = strchr(image, '@') == NULL && (tagpos == NULL || strcmp(tagpos, ":latest") == 0);
        set_default_str(c, "imagePullPolicy", latest ? "Always" : "IfNotPresent");
        if (!cJSON_IsObject(json_child(c, "resources")))
            json_set(c, "resources", cJSON_CreateObject());
        cJSON *ports = (cJSON *)json_child(c, "ports");
        for (cJSON *p = cJSON_IsArray(ports) ? ports->child : NULL; p; p = p->next)
            if (cJSON_IsObject(p))
                set_default_str(p, "protocol", "TCP");
        probe_defaults(c, "livenessProbe");
        probe_defaults(c, "readinessProbe");
        probe_defaults(c, "startupProbe");
        cJSON *env = (cJSON *)json_child(c, "env");
        for (cJSON *e = cJSON_IsArray(env) ? env->child : NULL; e; e = e->next) {
            cJSON *fr = (cJSON *)json_get(e, "valueFrom.fieldRef");
            if (cJSON_IsObject(fr))
                set_default_str(fr, "apiVersion", "v1");
        }
    }
}

/* SetDefaults_PodSpec and friends: what the API server fills in on every
 * pod spec, including those inside workload templates. */
static void podspec_defaults(cJSON *spec)
{
    if (!cJSON_IsObject(spec))
        return;
    set_default_str(spec, "restartPolicy", "Always");
    set_default_int(spec, "terminationGracePeriodSeconds", 30);
    set_default_str(spec, "dnsPolicy", "ClusterFirst");
    set_default_obj(spec, "securityContext");
    set_default_str(spec, "schedulerName", "default-scheduler");
    container_defaults((cJSON *)json_child(spec, "containers"));
    container_defaults((cJSON *)json_child(spec, "initContainers"));
    cJSON *vols = (cJSON *)json_child(spec, "volumes");
    for (cJSON *v = cJSON_IsArray(vols) ? vols->child : NULL; v; v = v->next) {
        cJSON *cm = (cJSON *)json_child(v, "configMap");
        if (cJSON_IsObject(cm))
            set_default_int(cm, "defaultMode", 420);
        cJSON *sec = (cJSON *)json_child(v, "secret");
        if (cJSON_IsObject(sec))
            set_default_int(sec, "defaultMode", 420);
    }
}

static void validate_containers(const cJSON *list, const char *field, int required, ks_errs *e)
{
    if (!cJSON_IsArray(list) || json_len(list) == 0) {
        if (required)
            ERR_REQUIRED(e, field);
        return;
    }
    int i = 0;
    for (const cJSON *c = list->child; c; c = c->next, i++) {
        char f[128];
        const char *name = json_get_str(c, "name");
        snprintf(f, sizeof(f), "%s[%d].name", field, i);
        if (name == NULL || !*name)
            ERR_REQUIRED(e, f);
        else if (!dns_label_ok(name))
            errs_add(e, "FieldValueInvalid", f, "Invalid value: \"%s\": %s", name, dns_label_msg());
        for (const cJSON *d = list->child; d != c && name; d = d->next)
            if (strcmp(json_get_str_or(d, "name", ""), name) == 0)
                errs_add(e, "FieldValueDuplicate", f, "Duplicate value: \"%s\"", name);
        snprintf(f, sizeof(f), "%s[%d].image", field, i);
        const char *img = json_get_str(c, "image");
        if (img == NULL || !*img)
            ERR_REQUIRED(e, f);
    }
}

static void validate_podspec(const cJSON *spec, const char *prefix, ks_errs *e)
{
    char f[128];
    snprintf(f, sizeof(f), "%s.containers", prefix);
    validate_containers(json_child(spec, "containers"), f, 1, e);
    snprintf(f, sizeof(f), "%s.initContainers", prefix);
    validate_containers(json_child(spec, "initContainers"), f, 0, e);
    const char *rp = json_get_str(spec, "restartPolicy");
    if (rp && strcmp(rp, "Always") && strcmp(rp, "OnFailure") && strcmp(rp, "Never")) {
        snprintf(f, sizeof(f), "%s.restartPolicy", prefix);
        errs_add(e, "FieldValueNotSupported", f,
                 "Unsupported value: \"%s\": supported values: \"Always\", \"OnFailure\", \"Never\"", rp);
    }
}

static const char *qos_class(const cJSON *spec)
{
    int any = 0, guaranteed = 1;
    const cJSON *cs = json_child(spec, "containers");
    for (const cJSON *c = cs ? cs->child : NULL; c; c = c->next) {
        const cJSON *req = json_get(c, "resources.requests"), *lim = json_get(c, "resources.limits");
        if (json_len(req) || json_len(lim))
            any = 1;
        const char *names[] = {"cpu", "memory"};
        for (int i = 0; i < 2; i++) {
            const char *l = json_get_str(lim, names[i]);
            const char *r = json_get_str(req, names[i]);
            if (l == NULL || (r && strcmp(r, l) != 0))
                guaranteed = 0;
        }
    }
    if (!any)
        return "BestEffort";
    return guaranteed ? "Guaranteed" : "Burstable";
}

static void pod_create(ks *k, ks_res *r, cJSON *obj, ks_errs *e)
{
    cJSON *spec = json_obj_ensure(obj, "spec");
    validate_podspec(spec, "spec", e);
    if (e->n)
        return;
    podspec_defaults(spec);
    /* Admission plugins: ServiceAccount, Priority, DefaultTolerationSeconds. */
    if (!cJSON_IsString(json_child(spec, "serviceAccountName")))
        json_set_str(spec, "serviceAccountName", json_get_str_or(spec, "serviceAccount", "default"));
    json_set_str(spec, "serviceAccount", json_get_str(spec, "serviceAccountName"));
    set_default_int(spec, "priority", 0);
    set_default_str(spec, "preemptionPolicy", "PreemptLowerPriority");
    if (!cJSON_IsBool(json_child(spec, "enableServiceLinks")))
        json_set_bool(spec, "enableServiceLinks", 1);
    cJSON *tols = (cJSON *)json_child(spec, "tolerations");
    if (!cJSON_IsArray(tols)) {
        tols = cJSON_CreateArray();
        json_set(spec, "tolerations", tols);
    }
    static const char *const tk[] = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"};
    for (int i = 0; i < 2; i++) {
        int have = 0;
        for (const cJSON *t = tols->child; t; t = t->next)
            if (strcmp(json_get_str_or(t, "key", ""), tk[i]) == 0)
                have = 1;
        if (have)
            continue;
        cJSON *t = cJSON_CreateObject();
        json_set_str(t, "key", tk[i]);
        json_set_str(t, "operator", "Exists");
        json_set_str(t, "effect", "NoExecute");
        json_set_int(t, "tolerationSeconds", 300);
        cJSON_AddItemToArray(tols, t);
    }
    /* A new pod has no status but what the API server sets. */
    cJSON *st = cJSON_CreateObject();
    json_set_str(st, "phase", "Pending");
    json_set_str(st, "qosClass", qos_class(spec));
    json_set(obj, "status", st);
    (void)k;
    (void)r;
}

/* Strip what a pod update may change and compare the rest. */
static cJSON *pod_spec_frozen(const cJSON *spec)
{
    cJSON *c = cJSON_Duplicate(spec, 1);
    if (c == NULL)
        return cJSON_CreateObject();
    static const char *const lists[] = {"containers", "initContainers"};
    for (int i = 0; i < 2; i++) {
        cJSON *l = (cJSON *)json_child(c, lists[i]);
        for (cJSON *x = cJSON_IsArray(l) ? l->child : NULL; x; x = x->next)
            json_del(x, "image");
    }
    json_del(c, "activeDeadlineSeconds");
    json_del(c, "tolerations");
    json_del(c, "terminationGracePeriodSeconds");
    json_del(c, "schedulingGates");
    return c;
}

static void pod_update(ks *k, ks_res *r, cJSON *obj, const cJSON *old, ks_errs *e)
{
    const cJSON *ns = json_child(obj, "spec"), *os = json_child(old, "spec");
    cJSON *a = pod_spec_frozen(ns), *b = pod_spec_frozen(os);
    if (!json_equal(a, b))
        ERR_FORBIDDEN(
            e, "spec",
            "pod updates may not change fields other than `spec.containers[*].image`,"
            "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
            "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set "
            "to 1 if it was previously negative)");
    cJSON_Delete(a);
    cJSON_Delete(b);
    (void)k;
    (void)r;
}

static void namespace_create(ks *k, ks_res *r, cJSON *obj, ks_errs *e)
{
    const char *name = json_get_str_or(obj, "metadata.name", "");
    if (!dns_label_ok(name)) {
        errs_add(e, "FieldValueInvalid", "metadata.name", "Invalid value: \"%s\": %s", name, dns_label_msg());
        return;
    }
    cJSON *spec = json_obj_ensure(obj, "spec");
    cJSON *fin = cJSON_CreateArray();
    cJSON_AddItemToArray(fin, cJSON_CreateString("kubernetes"));
    json_set(spec, "finalizers", fin);
    cJSON *st = cJSON_CreateObject();
    json_set_str(st, "phase", "Active");
    json_set(obj, "status", st);
    json_set_str(json_obj_path_ensure(obj, "metadata.labels"), "kubernetes.io/metadata.name", name);
    (void)k;
    (void)r;
}

static void node_create(ks *k, ks_res *r, cJSON *obj, ks_errs *e)
{
    json_obj_ensure(obj, "spec");
    if (!cJSON_IsObject(json_child(obj, "status")))
        json_set(obj, "status", cJSON_CreateObject());
    (void)k;
    (void)r;
    (void)e;
}

static void service_create(ks *k, ks_res *r, cJSON *obj, ks_errs *e)
{
    const char *name = json_get_str_or(obj, "metadata.name", "");
    /* DNS-1035: a label that starts with a letter */
    if (!dns_label_ok(name) || !(name[0] >= 'a' && name[0] <= 'z')) {
        errs_add(
            e, "FieldValueInvalid", "metadata.name",
            "Invalid value: \"%s\": a DNS-1035 label must consist of lower case alphanumeric characters or "
            "'-', start with an alphabetic character, and end with an alphanumeric character (e.g. "
            "'my-name',  "
            "or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            name);
        return;
    }
    cJSON *spec = json_obj_ensure(obj, "spec");
    /* More than one port: each needs a name (ValidateService). */
    const cJSON *sports = json_child(spec, "ports");
    if (json_len(sports) > 1) {
        int i = 0;
        for (const cJSON *p = sports->child; p; p = p->next, i++) {
            const char *pn = json_get_str(p, "name");
            if (pn == NULL || *pn == '\0') {
                char f[64];
                snprintf(f, sizeof(f), "spec.ports[%d].name", i);
                ERR_REQUIRED(e, f);
            }
        }
        if (e->n)
            return;
    }
    set_default_str(spec, "type", "ClusterIP");
    set_default_str(spec, "sessionAffinity", "None");
    const char *cip = json_get_str(spec, "clusterIP");
    if (cip == NULL || !*cip) {
        uint64_t n = ks_rand(k) % (254 * 254);
        char ip[32];
        snprintf(ip, sizeof(ip), "10.96.%d.%d", (int)(n / 254) + 1, (int)(n % 254) + 1);
        json_set_str(spec, "clusterIP", ip);
        cip = json_get_str(spec, "clusterIP");
    }
    if (!cJSON_IsArray(json_child(spec, "clusterIPs"))) {
        cJSON *a = cJSON_CreateArray();
        cJSON_AddItemToArray(a, cJSON_CreateString(cip));
        json_set(spec, "clusterIPs", a);
    }
    if (strcmp(cip, "None") != 0) {
        if (!cJSON_IsArray(json_child(spec, "ipFamilies"))) {
            cJSON *a = cJSON_CreateArray();
            cJSON_AddItemToArray(a, cJSON_CreateString("IPv4"));
            json_set(spec, "ipFamilies", a);
        }
        set_default_str(spec, "ipFamilyPolicy", "SingleStack");
    }
    set_default_str(spec, "internalTrafficPolicy", "Cluster");
    cJSON *ports = (cJSON *)json_child(spec, "ports");
    for (cJSON *p = cJSON_IsArray(ports) ? ports->child : NULL; p; p = p->next) {
        set_default_str(p, "protocol", "TCP");
        if (!json_child(p, "targetPort") && cJSON_IsNumber(json_child(p, "port")))
            json_set_int(p, "targetPort", json_get_int(p, "port", 0));
    }
    cJSON *st = cJSON_CreateObject();
    json_set(st, "loadBalancer", cJSON_CreateObject());
    json_set(obj, "status", st);
    (void)r;
}

static void secret_create(ks *k, ks_res *r, cJSON *obj, ks_errs *e)
{
    set_default_str(obj, "type", "Opaque");
    /* stringData is write-only: merged into data as base64. */
    const cJSON *sd = json_child(obj, "stringData");
    if (cJSON_IsObject(sd)) {
        cJSON *data = json_obj_ensure(obj, "data");
        for (const cJSON *c = sd->child; c; c = c->next) {
            if (!cJSON_IsString(c))
                continue;
            char *b64 = base64_encode(c->valuestring, strlen(c->valuestring));
            json_set_str(data, c->string, b64);
            free(b64);
        }
        json_del(obj, "stringData");
    }
    (void)k;
    (void)r;
    (void)e;
}

static void secret_update(ks *k, ks_res *r, cJSON *obj, const cJSON *old, ks_errs *e)
{
    secret_create(k, r, obj, e);
    if (json_get_bool(old, "immutable", 0) && !json_equal(json_child(obj, "data"), json_child(old, "data")))
        ERR_FORBIDDEN(e, "data", "field is immutable when `immutable` is set");
}

static void configmap_update(ks *k, ks_res *r, cJSON *obj, const cJSON *old, ks_errs *e)
{
    if (json_get_bool(old, "immutable", 0) &&
        (!json_equal(json_child(obj, "data"), json_child(old, "data")) ||
         !json_equal(json_child(obj, "binaryData"), json_child(old, "binaryData"))))
        ERR_FORBIDDEN(e, "data", "field is immutable when `immutable` is set");
    (void)k;
    (void)r;
}

static void pvc_create(ks *k, ks_res *r, cJSON *obj, ks_errs *e)
{
    cJSON *spec = json_obj_ensure(obj, "spec");
    if (!cJSON_IsArray(json_child(spec, "accessModes")) || json_len(json_child(spec, "accessModes")) == 0)
        ERR_REQUIRED_D(e, "spec.accessModes", "at least 1 access mode is required");
    if (json_get_str(spec, "resources.requests.storage") == NULL)
        ERR_REQUIRED(e, "spec.resources[storage]");
    set_default_str(spec, "volumeMode", "Filesystem");
    cJSON *st = cJSON_CreateObject();
    json_set_str(st, "phase", "Pending");
    json_set(obj, "status", st);
    (void)k;
    (void)r;
}

/* JSON text of v, "null" when absent (for error messages). */
static char *dump_or_null(const cJSON *v)
{
    return v ? json_dump(v) : xstrdup("null");
}

static void selector_matches_template(const cJSON *obj, ks_errs *e)
{
    const cJSON *sel = json_get(obj, "spec.selector");
    if (!cJSON_IsObject(sel)) {
        ERR_REQUIRED(e, "spec.selector");
        return;
    }
    lsel *s = NULL;
    char err[256];
    if (lsel_from_json(sel, &s, err, sizeof(err)) != 0) {
        errs_add(e, "FieldValueInvalid", "spec.selector", "Invalid value: %s", err);
        return;
    }
    if (lsel_is_empty(s)) {
        errs_add(e, "FieldValueInvalid", "spec.selector",
                 "Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1."
                 "LabelSelectorRequirement(nil)}: empty selector is invalid for deployment");
    } else if (!lsel_match_json(s, json_get(obj, "spec.template.metadata.labels"))) {
        char *l = dump_or_null(json_get(obj, "spec.template.metadata.labels"));
        errs_add(e, "FieldValueInvalid", "spec.template.metadata.labels",
                 "Invalid value: %s: `selector` does not match template `labels`", l);
        free(l);
    }
    lsel_free(s);
}

static void workload_template(cJSON *obj, ks_errs *e)
{
    cJSON *tspec = (cJSON *)json_get(obj, "spec.template.spec");
    if (!cJSON_IsObject(tspec)) {
        ERR_REQUIRED(e, "spec.template.spec.containers");
        return;
    }
    validate_podspec(tspec, "spec.template.spec", e);
    podspec_defaults(tspec);
}

static void sts_create(ks *k, ks_res *r, cJSON *obj, ks_errs *e)
{
    cJSON *spec = json_obj_ensure(obj, "spec");
    selector_matches_template(obj, e);
    workload_template(obj, e);
    set_default_int(spec, "replicas", 1);
    set_default_str(spec, "podManagementPolicy", "OrderedReady");
    set_default_int(spec, "revisionHistoryLimit", 10);
    cJSON *us = json_obj_ensure(spec, "updateStrategy");
    set_default_str(us, "type", "RollingUpdate");
    if (strcmp(json_get_str_or(us, "type", ""), "RollingUpdate") == 0)
        set_default_int(json_obj_ensure(us, "rollingUpdate"), "partition", 0);
    cJSON *pr = json_obj_ensure(spec, "persistentVolumeClaimRetentionPolicy");
    set_default_str(pr, "whenDeleted", "Retain");
    set_default_str(pr, "whenScaled", "Retain");
    cJSON *st = cJSON_CreateObject();
    json_set_int(st, "replicas", 0);
    json_set_int(st, "availableReplicas", 0);
    json_set(obj, "status", st);
    (void)k;
    (void)r;
}

static void sts_update(ks *k, ks_res *r, cJSON *obj, const cJSON *old, ks_errs *e)
{
    selector_matches_template(obj, e);
    workload_template(obj, e);
    cJSON *a = cJSON_Duplicate(json_child(obj, "spec"), 1), *b = cJSON_Duplicate(json_child(old, "spec"), 1);
    static const char *const mutable_fields[] = {
        "replicas",       "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
        "minReadySeconds"};
    for (size_t i = 0; i < ARRAY_SIZE(mutable_fields); i++) {
        json_del(a, mutable_fields[i]);
        json_del(b, mutable_fields[i]);
    }
    if (!json_equal(a, b))
        ERR_FORBIDDEN(
            e, "spec",
            "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
            "'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden");
    cJSON_Delete(a);
    cJSON_Delete(b);
    (void)k;
    (void)r;
}

static void deploy_create(ks *k, ks_res *r, cJSON *obj, ks_errs *e)
{
    cJSON *spec = json_obj_ensure(obj, "spec");
    selector_matches_template(obj, e);
    workload_template(obj, e);
    set_default_int(spec, "replicas", 1);
    set_default_int(spec, "revisionHistoryLimit", 10);
    set_default_int(spec, "progressDeadlineSeconds", 600);
    cJSON *st = json_obj_ensure(spec, "strategy");
    set_default_str(st, "type", "RollingUpdate");
    if (strcmp(json_get_str_or(st, "type", ""), "RollingUpdate") == 0) {
        cJSON *ru = json_obj_ensure(st, "rollingUpdate");
        set_default_str(ru, "maxUnavailable", "25%");
        set_default_str(ru, "maxSurge", "25%");
    }
    json_set(obj, "status", cJSON_CreateObject());
    (void)k;
    (void)r;
}

static void deploy_update(ks *k, ks_res *r, cJSON *obj, const cJSON *old, ks_errs *e)
{
    workload_template(obj, e);
    if (!json_equal(json_get(obj, "spec.selector"), json_get(old, "spec.selector"))) {
        char *s =
            dump_or_null(json_get(obj, "spec.selector"));
        errs_add(e, "FieldValueInvalid", "spec.selector", "Invalid value: %s: field is immutable", s);
        free(s);
    } else {
        selector_matches_template(obj, e);
    }
    (void)k;
    (void)r;
}

static void pdb_create(ks *k, ks_res *r, cJSON *obj, ks_errs *e)
{
    cJSON *spec = json_obj_ensure(obj, "spec");
    if (json_child(spec, "minAvailable") && json_child(spec, "maxUnavailable"))
        ERR_FORBIDDEN(e, "spec", "minAvailable and maxUnavailable cannot be both set");
    cJSON *st = cJSON_CreateObject();
    json_set_int(st, "disruptionsAllowed", 0);
    json_set_int(st, "currentHealthy", 0);
    json_set_int(st, "desiredHealthy", 0);
    json_set_int(st, "expectedPods", 0);
    json_set(obj, "status", st);
    (void)k;
    (void)r;
}

static int qualified_name_ok(const char *s)
{
    const char *slash = strchr(s, '/');
    if (slash) {
        char *prefix = xstrndup(s, (size_t)(slash - s));
        int ok = dns_subdomain_ok(prefix);
        free(prefix);
        if (!ok)
            return 0;
        s = slash + 1;
    }
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && !((c == '-' || c == '_' || c == '.') && i > 0 && i + 1 < n))
            return 0;
    }
    return 1;
}

static void check_len(ks_errs *e, const cJSON *obj, const char *field, size_t max, int required)
{
    const char *v = json_get_str(obj, field);
    if (v == NULL || !*v) {
        if (required)
            ERR_REQUIRED(e, field);
        return;
    }
    if (strlen(v) > max)
        errs_add(e, "FieldValueTooLong", field, "Too long: may not be more than %zu bytes", max);
}

/* events.k8s.io/v1 validation on create (docs/internals/KUBE-API.md#events). */
static void event_v1_create(ks *k, ks_res *r, cJSON *obj, ks_errs *e)
{
    if (json_get_str(obj, "eventTime") == NULL)
        ERR_REQUIRED(e, "eventTime");
    const char *type = json_get_str(obj, "type");
    if (type == NULL || (strcmp(type, "Normal") && strcmp(type, "Warning")))
        errs_add(e, "FieldValueInvalid", "type", "Invalid value: \"%s\": has invalid value: %s",
                 type ? type : "", type ? type : "");
    const char *rc = json_get_str(obj, "reportingController");
    if (rc == NULL || !*rc)
        ERR_REQUIRED(e, "reportingController");
    else if (!qualified_name_ok(rc))
        errs_add(
            e, "FieldValueInvalid", "reportingController",
            "Invalid value: \"%s\": name part must consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character",
            rc);
    check_len(e, obj, "reportingInstance", 128, 1);
    check_len(e, obj, "action", 128, 1);
    check_len(e, obj, "reason", 128, 1);
    check_len(e, obj, "note", 1024, 0);
    static const char *const legacy[] = {"deprecatedFirstTimestamp", "deprecatedLastTimestamp",
                                         "deprecatedCount", "deprecatedSource"};
    for (size_t i = 0; i < ARRAY_SIZE(legacy); i++) {
        const cJSON *v = json_child(obj, legacy[i]);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsNumber(v) && v->valuedouble == 0) &&
            !(cJSON_IsObject(v) && v->child == NULL))
            ERR_FORBIDDEN(e, legacy[i], "needs to be unset");
    }
    (void)k;
    (void)r;
}

static void event_v1_update(ks *k, ks_res *r, cJSON *obj, const cJSON *old, ks_errs *e)
{
    cJSON *a = cJSON_Duplicate(obj, 1), *b = cJSON_Duplicate(old, 1);
    json_del(a, "metadata");
    json_del(b, "metadata");
    json_del(a, "series");
    json_del(b, "series");
    if (!json_equal(a, b))
        ERR_FORBIDDEN(e, "", "updates may only change series");
    cJSON_Delete(a);
    cJSON_Delete(b);
    (void)k;
    (void)r;
}

static void crd_create(ks *k, ks_res *r, cJSON *obj, ks_errs *e)
{
    types_crd_validate(k, obj, e);
    if (e->n)
        return;
    cJSON *fin = (cJSON *)json_get(obj, "metadata.finalizers");
    if (!cJSON_IsArray(fin)) {
        fin = cJSON_CreateArray();
        json_set(json_obj_ensure(obj, "metadata"), "finalizers", fin);
    }
    int have = 0;
    for (cJSON *f = fin->child; f; f = f->next)
        if (cJSON_IsString(f) && strcmp(f->valuestring, "customresourcecleanup.apiextensions.k8s.io") == 0)
            have = 1;
    if (!have)
        cJSON_AddItemToArray(fin, cJSON_CreateString("customresourcecleanup.apiextensions.k8s.io"));
    types_crd_set_status(obj);
    (void)r;
}

static void crd_update(ks *k, ks_res *r, cJSON *obj, const cJSON *old, ks_errs *e)
{
    types_crd_validate(k, obj, e);
    if (!json_equal(json_get(obj, "spec.scope"), json_get(old, "spec.scope")))
        ERR_FORBIDDEN(e, "spec.scope", "field is immutable");
    if (!json_equal(json_get(obj, "spec.group"), json_get(old, "spec.group")))
        ERR_FORBIDDEN(e, "spec.group", "field is immutable");
    if (e->n == 0)
        types_crd_set_status(obj);
    (void)r;
}

/* ---- the built-in table ------------------------------------------------ */

static const char *const pod_fields[] = {
    "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",       "spec.serviceAccountName",
    "status.phase",  "status.podIP",       "status.nominatedNodeName", NULL};
static const char *const node_fields[] = {"spec.unschedulable", NULL};
static const char *const ns_fields[] = {"status.phase", NULL};
static const char *const secret_fields[] = {"type", NULL};
static const char *const event_fields[] = {"involvedObject.kind",
                                           "involvedObject.namespace",
                                           "involvedObject.name",
                                           "involvedObject.uid",
                                           "involvedObject.apiVersion",
                                           "involvedObject.resourceVersion",
                                           "involvedObject.fieldPath",
                                           "reason",
                                           "reportingComponent",
                                           "source",
                                           "type",
                                           NULL};

static const ks_builtin builtins[] = {
    {"", "v1", "namespaces", "namespace", "Namespace", "ns", NULL, 0, KSR_DELETE_RETURNS_OBJ, 1, 0, ns_fields,
     namespace_create, NULL},
    {"", "v1", "pods", "pod", "Pod", "po", "all", 1, KSR_GENERATION | KSR_DELETE_RETURNS_OBJ, 1, 0,
     pod_fields, pod_create, pod_update},
    {"", "v1", "nodes", "node", "Node", "no", NULL, 0, 0, 1, 0, node_fields, node_create, NULL},
    {"", "v1", "services", "service", "Service", "svc", "all", 1, KSR_DELETE_RETURNS_OBJ, 1, 0, NULL,
     service_create, NULL},
    {"", "v1", "configmaps", "configmap", "ConfigMap", "cm", NULL, 1, 0, 0, 0, NULL, NULL, configmap_update},
    {"", "v1", "secrets", "secret", "Secret", NULL, NULL, 1, 0, 0, 0, secret_fields, secret_create,
     secret_update},
    {"", "v1", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim", "pvc", NULL, 1, 0,
     1, 0, NULL, pvc_create, NULL},
    {"", "v1", "events", "event", "Event", "ev", NULL, 1, KSR_CREATE_ON_UPDATE, 0, 0, event_fields, NULL,
     NULL},
    {"", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", "sa", NULL, 1, KSR_DELETE_RETURNS_OBJ,
     0, 0, NULL, NULL, NULL},
    {"events.k8s.io", "v1", "events", "event", "Event", "ev", NULL, 1, KSR_CREATE_ON_UPDATE, 0, 0, NULL,
     event_v1_create, event_v1_update},
    {"apps", "v1", "statefulsets", "statefulset", "StatefulSet", "sts", "all", 1, KSR_GENERATION, 1, 1, NULL,
     sts_create, sts_update},
    {"apps", "v1", "deployments", "deployment", "Deployment", "deploy", "all", 1, KSR_GENERATION, 1, 1, NULL,
     deploy_create, deploy_update},
    {"apps", "v1", "controllerrevisions", "controllerrevision", "ControllerRevision", NULL, NULL, 1, 0, 0, 0,
     NULL, NULL, NULL},
    {"policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", "pdb", NULL, 1,
     KSR_GENERATION, 1, 0, NULL, pdb_create, NULL},
    {"coordination.k8s.io", "v1", "leases", "lease", "Lease", NULL, NULL, 1,
     KSR_RV_REQUIRED | KSR_CREATE_ON_UPDATE, 0, 0, NULL, NULL, NULL},
    {"apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition",
     "CustomResourceDefinition", "crd,crds", "api-extensions", 0, KSR_GENERATION | KSR_RV_REQUIRED, 1, 0,
     NULL, crd_create, crd_update},
};

static char *qualify(const char *name, const char *group)
{
    return *group ? xasprintf("%s.%s", name, group) : xstrdup(name);
}

void types_register_builtins(ks *k)
{
    for (size_t i = 0; i < ARRAY_SIZE(builtins); i++) {
        const ks_builtin *b = &builtins[i];
        ks_res *r = res_new(k);
        r->group = xstrdup(b->group);
        r->plural = xstrdup(b->plural);
        r->singular = xstrdup(b->singular);
        r->kind = xstrdup(b->kind);
        r->list_kind = xasprintf("%sList", b->kind);
        r->short_names = b->short_names ? xstrdup(b->short_names) : NULL;
        r->categories = b->categories ? xstrdup(b->categories) : NULL;
        r->qual = qualify(b->plural, b->group);
        r->qual_kind = qualify(b->kind, b->group);
        r->namespaced = b->namespaced;
        r->flags = b->flags;
        r->fields = b->fields;
        r->bi = b;
        r->n_views = 1;
        r->views = xcalloc(1, sizeof(ks_view));
        r->views[0].version = xstrdup(b->version);
        r->views[0].api_version = *b->group ? xasprintf("%s/%s", b->group, b->version) : xstrdup(b->version);
        r->views[0].has_status = b->status;
        r->views[0].has_scale = b->scale;
        if (b->scale) {
            r->views[0].spec_replicas_path = xstrdup(".spec.replicas");
            r->views[0].status_replicas_path = xstrdup(".status.replicas");
        }
        res_add_route(k, r, 0);
    }
}

/* ---- CustomResourceDefinitions ----------------------------------------- */

static int is_storage_count(const cJSON *versions)
{
    int n = 0;
    for (const cJSON *v = versions ? versions->child : NULL; v; v = v->next)
        if (json_get_bool(v, "storage", 0))
            n++;
    return n;
}

void types_crd_validate(ks *k, cJSON *crd, ks_errs *e)
{
    const char *group = json_get_str(crd, "spec.group");
    const char *plural = json_get_str(crd, "spec.names.plural");
    const char *kind = json_get_str(crd, "spec.names.kind");
    const char *scope = json_get_str(crd, "spec.scope");
    const char *name = json_get_str_or(crd, "metadata.name", "");
    if (group == NULL || !*group)
        ERR_REQUIRED(e, "spec.group");
    else if (strchr(group, '.') == NULL)
        errs_add(e, "FieldValueInvalid", "spec.group",
                 "Invalid value: \"%s\": should be a domain with at least one dot", group);
    if (plural == NULL || !*plural)
        ERR_REQUIRED(e, "spec.names.plural");
    else if (!dns_label_ok(plural))
        errs_add(e, "FieldValueInvalid", "spec.names.plural", "Invalid value: \"%s\": %s", plural,
                 dns_label_msg());
    if (kind == NULL || !*kind)
        ERR_REQUIRED(e, "spec.names.kind");
    if (scope == NULL || (strcmp(scope, "Namespaced") && strcmp(scope, "Cluster")))
        errs_add(e, "FieldValueNotSupported", "spec.scope",
                 "Unsupported value: \"%s\": supported values: \"Cluster\", \"Namespaced\"",
                 scope ? scope : "");
    if (group && plural) {
        char *want = xasprintf("%s.%s", plural, group);
        if (strcmp(want, name) != 0)
            errs_add(e, "FieldValueInvalid", "metadata.name",
                     "Invalid value: \"%s\": must be spec.names.plural+\".\"+spec.group", name);
        free(want);
    }
    const cJSON *versions = json_get(crd, "spec.versions");
    if (json_len(versions) == 0) {
        ERR_REQUIRED_D(e, "spec.versions", "must have exactly one version marked as storage version");
    } else if (is_storage_count(versions) != 1) {
        errs_add(e, "FieldValueInvalid", "spec.versions",
                 "Invalid value: []apiextensions.CustomResourceDefinitionVersion{...}: must have exactly one "
                 "version "
                 "marked as storage version");
    }
    int i = 0;
    for (const cJSON *v = versions ? versions->child : NULL; v; v = v->next, i++) {
        char f[128];
        if (json_get_str(v, "name") == NULL) {
            snprintf(f, sizeof(f), "spec.versions[%d].name", i);
            ERR_REQUIRED(e, f);
        }
        if (!cJSON_IsObject(json_get(v, "schema.openAPIV3Schema"))) {
            snprintf(f, sizeof(f), "spec.versions[%d].schema.openAPIV3Schema", i);
            ERR_REQUIRED_D(e, f, "schemas are required");
        }
        const cJSON *sc = json_get(v, "subresources.scale");
        if (cJSON_IsObject(sc)) {
            const char *p = json_get_str(sc, "specReplicasPath");
            snprintf(f, sizeof(f), "spec.versions[%d].subresources.scale.specReplicasPath", i);
            if (p == NULL)
                ERR_REQUIRED(e, f);
            else if (p[0] != '.' || strncmp(p, ".spec.", 6) != 0)
                errs_add(e, "FieldValueInvalid", f,
                         "Invalid value: \"%s\": should be a json path under .spec", p);
            p = json_get_str(sc, "statusReplicasPath");
            snprintf(f, sizeof(f), "spec.versions[%d].subresources.scale.statusReplicasPath", i);
            if (p == NULL)
                ERR_REQUIRED(e, f);
            else if (strncmp(p, ".status.", 8) != 0)
                errs_add(e, "FieldValueInvalid", f,
                         "Invalid value: \"%s\": should be a json path under .status", p);
        }
    }
    (void)k;
}

void types_crd_set_status(cJSON *crd)
{
    cJSON *old = (cJSON *)json_child(crd, "status");
    char now[32];
    rfc3339_now(now, 0);
    cJSON *st = cJSON_CreateObject();
    cJSON *names = cJSON_Duplicate(json_get(crd, "spec.names"), 1);
    if (names == NULL)
        names = cJSON_CreateObject();
    const char *kind = json_get_str_or(names, "kind", "");
    if (!json_get_str(names, "singular")) {
        char *lower = xstrdup(kind);
        for (char *p = lower; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p = (char)(*p - 'A' + 'a');
        json_set_str(names, "singular", lower);
        free(lower);
    }
    if (!json_get_str(names, "listKind")) {
        char *lk = xasprintf("%sList", kind);
        json_set_str(names, "listKind", lk);
        free(lk);
    }
    /* Keep transition times of the conditions that already exist. */
    const char *t1 = NULL;
    const cJSON *oc = json_child(old, "conditions");
    for (const cJSON *c = oc ? oc->child : NULL; c; c = c->next)
        if (strcmp(json_get_str_or(c, "type", ""), "Established") == 0)
            t1 = json_get_str(c, "lastTransitionTime");
    cJSON *conds = cJSON_CreateArray();
    const char *types[][3] = {
        {"NamesAccepted", "NoConflicts", "no conflicts found"},
        {"Established", "InitialNamesAccepted", "the initial names have been accepted"}};
    for (int i = 0; i < 2; i++) {
        cJSON *c = cJSON_CreateObject();
        json_set_str(c, "type", types[i][0]);
        json_set_str(c, "status", "True");
        json_set_str(c, "lastTransitionTime", t1 ? t1 : now);
        json_set_str(c, "reason", types[i][1]);
        json_set_str(c, "message", types[i][2]);
        cJSON_AddItemToArray(conds, c);
    }
    json_set(st, "conditions", conds);
    json_set(st, "acceptedNames", names);
    cJSON *stored = cJSON_CreateArray();
    const cJSON *oldstored = json_child(old, "storedVersions");
    for (const cJSON *s = oldstored ? oldstored->child : NULL; s; s = s->next)
        cJSON_AddItemToArray(stored, cJSON_Duplicate(s, 1));
    const cJSON *versions = json_get(crd, "spec.versions");
    for (const cJSON *v = versions ? versions->child : NULL; v; v = v->next) {
        if (!json_get_bool(v, "storage", 0))
            continue;
        const char *vn = json_get_str_or(v, "name", "");
        int have = 0;
        for (const cJSON *s = stored->child; s; s = s->next)
            if (cJSON_IsString(s) && strcmp(s->valuestring, vn) == 0)
                have = 1;
        if (!have)
            cJSON_AddItemToArray(stored, cJSON_CreateString(vn));
    }
    json_set(st, "storedVersions", stored);
    json_set(crd, "status", st);
}

static char *join_array(const cJSON *a)
{
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    for (const cJSON *s = a ? a->child : NULL; s; s = s->next)
        if (cJSON_IsString(s) && buf_printf(&b, "%s%s", b.len ? "," : "", s->valuestring) != 0)
            abort();
    if (b.len == 0) {
        buf_free(&b);
        return NULL;
    }
    return buf_detach(&b, NULL);
}

void types_crd_apply(ks *k, const cJSON *crd)
{
    const char *name = json_get_str_or(crd, "metadata.name", "");
    ks_res *r = NULL;
    list_node *n;
    list_foreach(n, &k->resources)
    {
        ks_res *x = list_entry(n, ks_res, link);
        if (!x->removed && x->crd_name && strcmp(x->crd_name, name) == 0)
            r = x;
    }
    const char *group = json_get_str_or(crd, "spec.group", "");
    const char *plural = json_get_str_or(crd, "spec.names.plural", "");
    const cJSON *acc = json_get(crd, "status.acceptedNames");
    const cJSON *names = acc ? acc : json_get(crd, "spec.names");
    if (r == NULL) {
        r = res_new(k);
        r->crd_name = xstrdup(name);
        r->group = xstrdup(group);
        r->plural = xstrdup(plural);
        r->flags = KSR_CUSTOM | KSR_GENERATION | KSR_RV_REQUIRED;
    } else {
        /* Served versions changed: watches hold a version index, and the
         * real server ends watches when a CRD's versions change. */
        const cJSON *vs = json_get(crd, "spec.versions");
        int same = json_len(vs) == r->n_views, vi = 0;
        for (const cJSON *v = vs ? vs->child : NULL; v && same; v = v->next, vi++)
            same = strcmp(json_get_str_or(v, "name", ""), r->views[vi].version) == 0 &&
                   json_get_bool(v, "storage", 0) == (vi == r->storage_view);
        if (!same)
            watch_end_res(k, r);
        res_unroute(k, r);
        for (int i = 0; i < r->n_views; i++) {
            ks_view *v = &r->views[i];
            free(v->version);
            free(v->api_version);
            free(v->spec_replicas_path);
            free(v->status_replicas_path);
            free(v->label_selector_path);
            cJSON_Delete(v->schema);
            cJSON_Delete(v->columns);
        }
        free(r->views);
        free(r->singular);
        free(r->kind);
        free(r->list_kind);
        free(r->short_names);
        free(r->categories);
        free(r->qual);
        free(r->qual_kind);
    }
    const char *kind = json_get_str_or(names, "kind", json_get_str_or(crd, "spec.names.kind", ""));
    r->kind = xstrdup(kind);
    const char *lk = json_get_str(names, "listKind");
    r->list_kind = lk ? xstrdup(lk) : xasprintf("%sList", kind);
    const char *sg = json_get_str(names, "singular");
    if (sg) {
        r->singular = xstrdup(sg);
    } else {
        r->singular = xstrdup(kind);
        for (char *p = r->singular; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p = (char)(*p - 'A' + 'a');
    }
    r->short_names = join_array(json_child(names, "shortNames"));
    r->categories = join_array(json_child(names, "categories"));
    r->qual = qualify(r->plural, r->group);
    r->qual_kind = qualify(r->kind, r->group);
    r->namespaced = strcmp(json_get_str_or(crd, "spec.scope", "Namespaced"), "Namespaced") == 0;
    const cJSON *versions = json_get(crd, "spec.versions");
    r->n_views = json_len(versions);
    r->views = xcalloc((size_t)(r->n_views ? r->n_views : 1), sizeof(ks_view));
    int i = 0;
    for (const cJSON *v = versions ? versions->child : NULL; v; v = v->next, i++) {
        ks_view *vw = &r->views[i];
        vw->version = xstrdup(json_get_str_or(v, "name", "v1"));
        vw->api_version = xasprintf("%s/%s", group, vw->version);
        vw->has_status = cJSON_IsObject(json_get(v, "subresources.status"));
        const cJSON *sc = json_get(v, "subresources.scale");
        if (cJSON_IsObject(sc)) {
            vw->has_scale = 1;
            vw->spec_replicas_path = xstrdup(json_get_str_or(sc, "specReplicasPath", ".spec.replicas"));
            vw->status_replicas_path = xstrdup(json_get_str_or(sc, "statusReplicasPath", ".status.replicas"));
            const char *lp = json_get_str(sc, "labelSelectorPath");
            vw->label_selector_path = lp ? xstrdup(lp) : NULL;
        }
        const cJSON *schema = json_get(v, "schema.openAPIV3Schema");
        vw->schema = schema ? cJSON_Duplicate(schema, 1) : NULL;
        vw->preserve_unknown = json_get_bool(schema, "x-kubernetes-preserve-unknown-fields", 0);
        const cJSON *cols = json_get(v, "additionalPrinterColumns");
        vw->columns = json_len(cols) > 0 ? cJSON_Duplicate(cols, 1) : NULL;
        if (json_get_bool(v, "storage", 0))
            r->storage_view = i;
    }
    if (r->n_views == 0) {
        r->n_views = 1;
        r->views[0].version = xstrdup("v1");
        r->views[0].api_version = xasprintf("%s/v1", group);
    }
    i = 0;
    for (const cJSON *v = versions ? versions->child : NULL; v; v = v->next, i++)
        if (json_get_bool(v, "served", 1))
            res_add_route(k, r, i);
    /* A terminating CRD keeps serving reads; creates are refused in ks_api.c. */
}

void types_crd_remove(ks *k, const char *crd_name)
{
    list_node *n;
    list_foreach(n, &k->resources)
    {
        ks_res *r = list_entry(n, ks_res, link);
        if (r->removed || r->crd_name == NULL || strcmp(r->crd_name, crd_name) != 0)
            continue;
        watch_end_res(k, r);
        res_unroute(k, r);
        /* Whatever is left (custom objects whose finalizers were forced away) goes silently. */
        while (r->objs.count) {
            size_t it = 0;
            const char *key;
            void *val;
            map_next(&r->objs, &it, &key, &val);
            ks_store_remove(k, val, NULL);
        }
        r->removed = 1;
        snaps_expire(k, 0);
        return;
    }
}

/* ---- structural schemas: pruning, defaulting, validation --------------- */

static const cJSON *props_of(const cJSON *schema)
{
    return json_child(schema, "properties");
}

static void path_push(buf_t *p, const char *key, size_t *mark)
{
    *mark = p->len;
    if (buf_printf(p, "%s%s", p->len ? "." : "", key) != 0)
        abort();
}

static void path_pop(buf_t *p, size_t mark)
{
    p->len = mark;
    if (p->data)
        p->data[mark] = '\0';
}

static void prune(const cJSON *schema, cJSON *obj, int top, buf_t *path, buf_t *warn)
{
    if (schema == NULL || json_get_bool(schema, "x-kubernetes-int-or-string", 0))
        return;
    if (cJSON_IsArray(obj)) {
        const cJSON *items = json_child(schema, "items");
        for (cJSON *c = obj->child; c; c = c->next)
            prune(items, c, 0, path, warn);
        return;
    }
    if (!cJSON_IsObject(obj))
        return;
    int preserve = json_get_bool(schema, "x-kubernetes-preserve-unknown-fields", 0);
    int embedded = json_get_bool(schema, "x-kubernetes-embedded-resource", 0);
    const cJSON *props = props_of(schema);
    const cJSON *addl = json_child(schema, "additionalProperties");
    cJSON *c = obj->child;
    while (c) {
        cJSON *next = c->next;
        const cJSON *ps = json_child(props, c->string);
        size_t mark;
        path_push(path, c->string, &mark);
        if ((top || embedded) && (strcmp(c->string, "apiVersion") == 0 || strcmp(c->string, "kind") == 0 ||
                                  strcmp(c->string, "metadata") == 0)) {
            /* kept; metadata is ObjectMeta, not subject to the schema */
        } else if (ps) {
            prune(ps, c, 0, path, warn);
        } else if (cJSON_IsObject(addl)) {
            prune(addl, c, 0, path, warn);
        } else if (cJSON_IsTrue(addl) || preserve) {
            /* unknown but preserved */
        } else {
            if (warn &&
                buf_printf(warn, "%sunknown field \"%s\"", warn->len ? "\n" : "", buf_cstr(path)) != 0)
                abort();
            cJSON_DetachItemViaPointer(obj, c);
            cJSON_Delete(c);
        }
        path_pop(path, mark);
        c = next;
    }
}

static int nullable(const cJSON *schema)
{
    return json_get_bool(schema, "nullable", 0);
}

static void apply_defaults(const cJSON *schema, cJSON *obj)
{
    if (schema == NULL)
        return;
    if (cJSON_IsObject(obj)) {
        const cJSON *props = props_of(schema);
        for (const cJSON *p = props ? props->child : NULL; p; p = p->next) {
            const cJSON *d = json_child(p, "default");
            if (d == NULL)
                continue;
            const cJSON *cur = json_child(obj, p->string);
            if (cur == NULL || (cJSON_IsNull(cur) && !nullable(p)))
                json_set(obj, p->string, cJSON_Duplicate(d, 1));
        }
        const cJSON *addl = json_child(schema, "additionalProperties");
        for (cJSON *c = obj->child; c; c = c->next) {
            const cJSON *ps = json_child(props, c->string);
            if (ps)
                apply_defaults(ps, c);
            else if (cJSON_IsObject(addl))
                apply_defaults(addl, c);
        }
    } else if (cJSON_IsArray(obj)) {
        const cJSON *items = json_child(schema, "items");
        for (cJSON *c = obj->child; c; c = c->next)
            apply_defaults(items, c);
    }
}

void types_cr_prune_default(const ks_view *v, cJSON *obj, buf_t *warn)
{
    if (v->schema == NULL)
        return;
    buf_t path;
    buf_init(&path, BUF_UNLIMITED);
    prune(v->schema, obj, 1, &path, warn);
    buf_free(&path);
    /* metadata is never defaulted from the schema */
    cJSON *meta = cJSON_DetachItemFromObjectCaseSensitive(obj, "metadata");
    apply_defaults(v->schema, obj);
    if (meta)
        cJSON_AddItemToObject(obj, "metadata", meta);
}

static const char *json_type(const cJSON *v)
{
    if (cJSON_IsString(v))
        return "string";
    if (cJSON_IsBool(v))
        return "boolean";
    if (cJSON_IsNumber(v))
        return (isfinite(v->valuedouble) && floor(v->valuedouble) == v->valuedouble) ? "integer" : "number";
    if (cJSON_IsArray(v))
        return "array";
    if (cJSON_IsObject(v))
        return "object";
    return "null";
}

static char *value_str(const cJSON *v)
{
    if (cJSON_IsString(v))
        return xasprintf("\"%s\"", v->valuestring);
    return json_dump(v);
}

static void validate(const cJSON *schema, const cJSON *obj, int top, buf_t *path, ks_errs *e)
{
    if (schema == NULL || e->n >= 8)
        return;
    const char *field = buf_cstr(path);
    const char *type = json_get_str(schema, "type");
    if (cJSON_IsNull(obj)) {
        if (type && !nullable(schema) && !json_get_bool(schema, "x-kubernetes-preserve-unknown-fields", 0))
            errs_add(e, "FieldValueInvalid", field,
                     "Invalid value: \"null\": %s in body must be of type %s: \"null\"", field, type);
        return;
    }
    if (json_get_bool(schema, "x-kubernetes-int-or-string", 0)) {
        if (!cJSON_IsString(obj) && strcmp(json_type(obj), "integer") != 0) {
            char *vs = value_str(obj);
            errs_add(e, "FieldValueInvalid", field,
                     "Invalid value: %s: %s in body must be of type integer,string: %s", vs, field, vs);
            free(vs);
        }
        return;
    }
    if (type) {
        const char *got = json_type(obj);
        int ok = strcmp(type, got) == 0 || (strcmp(type, "number") == 0 && strcmp(got, "integer") == 0);
        if (!ok) {
            char *vs = value_str(obj);
            errs_add(e, "FieldValueTypeInvalid", field,
                     "Invalid value: \"%s\": %s in body must be of type %s: \"%s\"", got, field, type, got);
            free(vs);
            return;
        }
    }
    const cJSON *en = json_child(schema, "enum");
    if (cJSON_IsArray(en)) {
        int hit = 0;
        for (const cJSON *x = en->child; x; x = x->next)
            if (json_equal(x, obj))
                hit = 1;
        if (!hit) {
            buf_t vals;
            buf_init(&vals, BUF_UNLIMITED);
            for (const cJSON *x = en->child; x; x = x->next) {
                char *s = value_str(x);
                if (buf_printf(&vals, "%s%s", vals.len ? ", " : "", s) != 0)
                    abort();
                free(s);
            }
            char *vs = value_str(obj);
            errs_add(e, "FieldValueNotSupported", field, "Unsupported value: %s: supported values: %s", vs,
                     buf_cstr(&vals));
            free(vs);
            buf_free(&vals);
        }
    }
    if (cJSON_IsNumber(obj)) {
        const cJSON *mn = json_child(schema, "minimum"), *mx = json_child(schema, "maximum");
        if (cJSON_IsNumber(mn) && obj->valuedouble < mn->valuedouble)
            errs_add(e, "FieldValueInvalid", field,
                     "Invalid value: %g: %s in body should be greater than or equal to %g", obj->valuedouble,
                     field, mn->valuedouble);
        if (cJSON_IsNumber(mx) && obj->valuedouble > mx->valuedouble)
            errs_add(e, "FieldValueInvalid", field,
                     "Invalid value: %g: %s in body should be less than or equal to %g", obj->valuedouble,
                     field, mx->valuedouble);
    }
    if (cJSON_IsString(obj)) {
        long long mn = json_get_int(schema, "minLength", -1), mx = json_get_int(schema, "maxLength", -1);
        size_t len = strlen(obj->valuestring);
        if (mx >= 0 && (long long)len > mx)
            errs_add(e, "FieldValueTooLong", field, "Too long: may not be more than %lld bytes", mx);
        if (mn >= 0 && (long long)len < mn)
            errs_add(e, "FieldValueInvalid", field,
                     "Invalid value: \"%s\": %s in body should be at least %lld chars long", obj->valuestring,
                     field, mn);
    }
    if (cJSON_IsArray(obj)) {
        long long mn = json_get_int(schema, "minItems", -1), mx = json_get_int(schema, "maxItems", -1);
        int n = json_len(obj);
        if (mx >= 0 && n > mx)
            errs_add(e, "FieldValueTooMany", field, "Too many: %d: must have at most %lld items", n, mx);
        if (mn >= 0 && n < mn)
            errs_add(e, "FieldValueInvalid", field,
                     "Invalid value: %d: %s in body should have at least %lld items", n, field, mn);
        const cJSON *items = json_child(schema, "items");
        int i = 0;
        for (const cJSON *c = obj->child; c; c = c->next, i++) {
            size_t mark = path->len;
            if (buf_printf(path, "[%d]", i) != 0)
                abort();
            validate(items, c, 0, path, e);
            path_pop(path, mark);
        }
    }
    if (cJSON_IsObject(obj)) {
        const cJSON *req = json_child(schema, "required");
        for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
            if (!cJSON_IsString(r) || json_child(obj, r->valuestring))
                continue;
            size_t mark;
            path_push(path, r->valuestring, &mark);
            ERR_REQUIRED(e, buf_cstr(path));
            path_pop(path, mark);
        }
        const cJSON *props = props_of(schema);
        const cJSON *addl = json_child(schema, "additionalProperties");
        for (const cJSON *c = obj->child; c; c = c->next) {
            if (top && (strcmp(c->string, "metadata") == 0 || strcmp(c->string, "apiVersion") == 0 ||
                        strcmp(c->string, "kind") == 0))
                continue;
            const cJSON *ps = json_child(props, c->string);
            size_t mark;
            path_push(path, c->string, &mark);
            if (ps)
                validate(ps, c, 0, path, e);
            else if (cJSON_IsObject(addl))
                validate(addl, c, 0, path, e);
            path_pop(path, mark);
        }
    }
}

void types_cr_validate(const ks_view *v, const cJSON *obj, ks_errs *e)
{
    if (v->schema == NULL)
        return;
    buf_t path;
    buf_init(&path, BUF_UNLIMITED);
    validate(v->schema, obj, 1, &path, e);
    buf_free(&path);
}

const cJSON *types_schema_at(const cJSON *schema, const char *const *path, int depth)
{
    for (int i = 0; i < depth && schema; i++) {
        if (strcmp(path[i], "[]") == 0)
            schema = json_child(schema, "items");
        else {
            const cJSON *p = json_child(props_of(schema), path[i]);
            schema = p ? p
                       : (cJSON_IsObject(json_child(schema, "additionalProperties"))
                              ? json_child(schema, "additionalProperties")
                              : NULL);
        }
    }
    return schema;
}
