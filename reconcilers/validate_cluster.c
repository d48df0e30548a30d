#include "reconcilers/validate_cluster.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/err.h"
#include "core/json.h"

static void push(char ***v, size_t *n, char *msg)
{
    *v = xrealloc(*v, (*n + 1) * sizeof(**v));
    (*v)[(*n)++] = msg;
}

static void err(vclu_result *r, const char *fmt, ...) OP_PRINTF(2, 3);
static void err(vclu_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    push(&r->errors, &r->n_errors, xvasprintf(fmt, ap));
    va_end(ap);
}

static void warn(vclu_result *r, const char *fmt, ...) OP_PRINTF(2, 3);
static void warn(vclu_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    push(&r->warnings, &r->n_warnings, xvasprintf(fmt, ap));
    va_end(ap);
}

void vclu_add_error(vclu_result *r, char *msg)
{
    push(&r->errors, &r->n_errors, msg);
}

/* A ConfigMap list entry naming another namespace: Slinky's type has the
 * field, and Slinky as slurmop reads (and mounts) the ConfigMap from the
 * Controller's namespace, as a pod can mount nothing else. */
static void foreign_cm_refs(const cJSON *cr, vclu_result *r)
{
    static const char *const lists[] = {"configFileRefs", "prologScriptRefs", "epilogScriptRefs",
                                        "prologSlurmctldScriptRefs", "epilogSlurmctldScriptRefs"};
    const char *own = json_get_str_or(cr, "metadata.namespace", "");
    const cJSON *spec = json_child(cr, "spec");
    for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
        const cJSON *refs = json_child(spec, lists[i]);
        for (const cJSON *ref = cJSON_IsArray(refs) ? refs->child : NULL; ref; ref = ref->next) {
            const char *ns = json_get_str_or(ref, "namespace", "");
            if (*ns && strcmp(ns, own) != 0)
                warn(r,
                     "%s: ConfigMap %s: namespace %s is ignored; it is read from the Controller's namespace "
                     "%s",
                     lists[i], json_get_str_or(ref, "name", ""), ns, own);
        }
    }
}

void vclu_result_free(vclu_result *r)
{
    for (size_t i = 0; i < r->n_errors; i++)
        free(r->errors[i]);
    for (size_t i = 0; i < r->n_warnings; i++)
        free(r->warnings[i]);
    free(r->errors);
    free(r->warnings);
    memset(r, 0, sizeof(*r));
}

char *vclu_join(char *const *msgs, size_t n)
{
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    for (size_t i = 0; i < n; i++)
        if ((i && buf_puts(&b, "; ") != 0) || buf_puts(&b, msgs[i]) != 0)
            abort();
    char *s = buf_detach(&b, NULL);
    return s ? s : xstrdup("");
}

static int verdict(const vclu_result *r, size_t errors_before)
{
    return r->n_errors > errors_before ? OP_EINVALID : 0;
}

static int present(const cJSON *spec, const char *field)
{
    return cJSON_IsObject(json_child(spec, field));
}

static int same(const cJSON *a, const cJSON *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return json_equal(a, b);
}

static int str_eq(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

static void external_ips(const cJSON *cr, const char *kind, vclu_result *r)
{
    if (json_get(cr, "spec.service.spec.externalIPs") != NULL)
        warn(r, "spec.service.spec.externalIPs is ignored: external IPs may not be set for the %s service",
             kind);
}

/* The three CEL rules shared by Controller and Accounting. */
static void key_rules(const cJSON *cr, vclu_result *r)
{
    const cJSON *spec = json_child(cr, "spec");
    if (!clc_is_external(cr)) {
        if (!present(spec, "slurmKeyRef"))
            err(r, "slurmKeyRef must be set when external is false");
        if (clc_jwt_ref(spec) == NULL)
            err(r, "jwtKeyRef or jwtHs256KeyRef must be set when external is false");
    } else {
        const char *host = json_get_str(spec, "externalConfig.host");
        if (!present(spec, "externalConfig") || host == NULL || *host == '\0' ||
            json_get_int(spec, "externalConfig.port", 0) <= 0)
            err(r, "externalConfig (host and port) must be set when external is true");
    }
}

static const char *const reserved_files[] = {"slurm.conf", "slurmdbd.conf"};
static const char *const known_files[] = {
    "acct_gather.conf", "burst_buffer.conf",  "cgroup.conf",    "cli_filter.lua", "gres.conf",
    "helpers.conf",     "job_container.conf", "job_submit.lua", "mpi.conf",       "namespace.yaml",
    "oci.conf",         "plugstack.conf",     "topology.conf",  "topology.yaml",
};

static int in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0)
            return 1;
    return 0;
}

int vclu_controller(const cJSON *cr, const cJSON *old, const clc_env *env, vclu_result *r)
{
    size_t before = r->n_errors;
    const cJSON *spec = json_child(cr, "spec");
    key_rules(cr, r);

    int ha = json_get_bool(spec, "ha.enabled", 0);
    int persist = json_get_bool(spec, "persistence.enabled", 1);
    const char *claim = json_get_str_or(spec, "persistence.existingClaim", "");
    if (ha && (!persist || *claim == '\0'))
        err(r, "ha.enabled requires persistence.enabled and persistence.existingClaim (a ReadWriteMany PVC)");

    foreign_cm_refs(cr, r);
    const cJSON *refs = json_child(spec, "configFileRefs");
    if (cJSON_IsArray(refs))
        for (const cJSON *ref = refs->child; ref; ref = ref->next) {
            const char *name = json_get_str_or(ref, "name", "");
            const cJSON *cm = clc_get(env, "ConfigMap", name);
            if (cm == NULL) {
                err(r, "configFileRefs: ConfigMap %s not found", name);
                continue;
            }
            const cJSON *data = json_child(cm, "data");
            if (!cJSON_IsObject(data))
                continue;
            for (const cJSON *kv = data->child; kv; kv = kv->next) {
                if (in_list(kv->string, reserved_files, ARRAY_SIZE(reserved_files)))
                    err(r, "configFileRefs: ConfigMap %s: the config file %s is reserved for the operator",
                        name, kv->string);
                else if (!in_list(kv->string, known_files, ARRAY_SIZE(known_files)))
                    warn(r,
                         "configFileRefs: ConfigMap %s: the config file %s is unknown to Slurm; include it "
                         "from "
                         "another config file or it is ignored",
                         name, kv->string);
            }
        }
    external_ips(cr, "controller", r);

    if (ha && *claim) {
        const cJSON *pvc = clc_get(env, "PersistentVolumeClaim", claim);
        int rwx = 0;
        const cJSON *modes = json_get(pvc, "spec.accessModes");
        if (cJSON_IsArray(modes))
            for (const cJSON *m = modes->child; m; m = m->next)
                rwx |= cJSON_IsString(m) && strcmp(m->valuestring, "ReadWriteMany") == 0;
        if (pvc && !rwx)
            err(r, "slurm high availability (HA) mode requires the PVC %s to have access mode ReadWriteMany",
                claim);
    }

    char *cluster = clc_cluster_name(cr);
    if (old == NULL) {
        /* slurm.conf limits ClusterName to 40 characters. */
        if (strlen(cluster) > 40)
            err(r, "ClusterName exceeds 40 characters (%zu): %s", strlen(cluster), cluster);
    } else {
        const cJSON *ospec = json_child(old, "spec");
        char *ocluster = clc_cluster_name(old);
        if (strcmp(cluster, ocluster) != 0)
            err(r, "the ClusterName cannot change after deployment (was %s, now %s)", ocluster, cluster);
        free(ocluster);
        if (!str_eq(json_get_str(spec, "slurmKeyRef.name"), json_get_str(ospec, "slurmKeyRef.name")))
            err(r, "slurmKeyRef cannot change after deployment");
        if (!same(clc_jwt_ref(spec), clc_jwt_ref(ospec)))
            err(r, "jwtKeyRef (or jwtHs256KeyRef) cannot change after deployment");
        int opersist = json_get_bool(ospec, "persistence.enabled", 1);
        if (persist != opersist)
            err(r, "persistence.enabled cannot change after deployment");
        else if (persist && !str_eq(claim, json_get_str_or(ospec, "persistence.existingClaim", "")))
            err(r, "persistence.existingClaim cannot change after deployment");
    }
    free(cluster);
    return verdict(r, before);
}

static void controller_ref_rules(const cJSON *cr, const cJSON *old, vclu_result *r)
{
    const char *ref = json_get_str_or(cr, "spec.controllerRef.name", "");
    if (*ref == '\0')
        err(r, "controllerRef.name must not be empty");
    if (old && !str_eq(ref, json_get_str(old, "spec.controllerRef.name")))
        err(r, "controllerRef cannot change after creation");
}

int vclu_loginset(const cJSON *cr, const cJSON *old, vclu_result *r)
{
    size_t before = r->n_errors;
    controller_ref_rules(cr, old, r);
    if (*json_get_str_or(cr, "spec.sssdConfRef.name", "") == '\0')
        err(r, "sssdConfRef.name must not be empty");
    external_ips(cr, "login", r);
    return verdict(r, before);
}

int vclu_restapi(const cJSON *cr, const cJSON *old, vclu_result *r)
{
    size_t before = r->n_errors;
    const char *ref = json_get_str_or(cr, "spec.controllerRef.name", "");
    if (*ref == '\0')
        err(r, "controllerRef.name must not be empty");
    (void)old;
    external_ips(cr, "restapi", r);
    return verdict(r, before);
}

int vclu_accounting(const cJSON *cr, const cJSON *old, vclu_result *r)
{
    size_t before = r->n_errors;
    const cJSON *spec = json_child(cr, "spec");
    key_rules(cr, r);
    if (!clc_is_external(cr)) {
        if (*json_get_str_or(spec, "storageConfig.host", "") == '\0')
            err(r, "storageConfig.host must be set");
        if (*json_get_str_or(spec, "storageConfig.passwordKeyRef.name", "") == '\0' ||
            *json_get_str_or(spec, "storageConfig.passwordKeyRef.key", "") == '\0')
            err(r, "storageConfig.passwordKeyRef (name and key) must be set");
    }
    if (old && !same(clc_jwt_ref(spec), clc_jwt_ref(json_child(old, "spec"))))
        err(r, "jwtKeyRef (or jwtHs256KeyRef) cannot change after deployment");
    external_ips(cr, "accounting", r);
    return verdict(r, before);
}

int vclu_token(const cJSON *cr, const cJSON *old, vclu_result *r)
{
    size_t before = r->n_errors;
    const cJSON *spec = json_child(cr, "spec");
    if (clc_jwt_ref(spec) == NULL)
        err(r, "jwtKeyRef or jwtHs256KeyRef must be set");
    if (*json_get_str_or(spec, "username", "") == '\0')
        err(r, "username must be set");
    const char *lt = json_get_str(spec, "lifetime");
    int64_t ns;
    if (lt && clc_parse_duration(lt, &ns) == OP_EPARSE)
        err(r, "lifetime \"%s\" is not a duration (e.g. 15m, 1h30m)", lt);
    if (old && !same(clc_jwt_ref(spec), clc_jwt_ref(json_child(old, "spec"))))
        err(r, "jwtKeyRef (or jwtHs256KeyRef) cannot change after creation");
    return verdict(r, before);
}
