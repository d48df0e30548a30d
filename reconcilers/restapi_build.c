#include "reconcilers/restapi_build.h"

#include <stdlib.h>

#include "core/err.h"
#include "core/json.h"
#include "reconcilers/controller_build.h"
#include "reconcilers/podtemplate.h"
#include "reconcilers/slurmconf.h"

#define NOBODY_UID 65534

cJSON *rab_defaults(const cJSON *restapi)
{
    cJSON *r = cJSON_Duplicate(restapi, 1);
    if (r == NULL)
        r = cJSON_CreateObject();
    cJSON *spec = json_obj_ensure(r, "spec");
    if (!cJSON_IsNumber(json_child(spec, "replicas")))
        json_set_int(spec, "replicas", 1);
    return r;
}

char *rab_name(const char *restapi)
{
    return xasprintf("%s-restapi", restapi);
}

static const char *cr_name(const cJSON *c)
{
    return json_get_str_or(c, "metadata.name", "");
}

int rab_service(const cJSON *restapi, cJSON **out, char **why)
{
    *out = NULL;
    cJSON *r = rab_defaults(restapi);
    const cJSON *svc = json_get(r, "spec.service");
    char *name = rab_name(cr_name(r));
    /* Unlike the Controller's and the Accounting's, Slinky's RestApi Service
     * does not inherit the RestApi's own labels and annotations: only
     * spec.service.metadata's, and the app labels. */
    cJSON *ours = clc_labels(RAB_APP, cr_name(r), RAB_COMPONENT);
    clc_service_opts o = {
        .name = name,
        .ns = json_get_str_or(r, "metadata.namespace", ""),
        .labels = CLC_MERGE(json_get(svc, "metadata.labels"), ours),
        .annotations = CLC_MERGE(json_get(svc, "metadata.annotations")),
        .user = svc,
        .selector = clc_labels(RAB_APP, cr_name(r), NULL),
        .port_name = RAB_APP,
        .default_port = CLC_SLURMRESTD_PORT,
    };
    int rc = clc_service(&o, out, why);
    if (rc == 0)
        clc_set_controller_ref(*out, RAB_KIND, r);
    cJSON_Delete(ours);
    free(name);
    cJSON_Delete(r);
    return rc;
}

static cJSON *strarr(const char *const *v, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
    return a;
}

static cJSON *env_var(const char *name, const char *value)
{
    cJSON *e = cJSON_CreateObject();
    json_set_str(e, "name", name);
    json_set_str(e, "value", value);
    return e;
}

static cJSON *slurmrestd_container(const cJSON *r, int has_accounting)
{
    cJSON *k = cJSON_CreateObject();
    json_set_str(k, "name", RAB_APP);
    cJSON *env = cJSON_CreateArray();
    cJSON_AddItemToArray(env, env_var("SLURM_JWT", "daemon"));
    cJSON_AddItemToArray(env, env_var("SLURMRESTD_SECURITY", "disable_unshare_files,disable_unshare_sysv"));
    json_set(k, "env", env);
    /* Without accounting, load only the slurmctld OpenAPI plugin: the
     * slurmdbd ones would fail to reach a slurmdbd that does not exist. */
    static const char *const no_acct[] = {"-s", "openapi/slurmctld"};
    json_set(k, "args", has_accounting ? cJSON_CreateArray() : strarr(no_acct, 2));
    cJSON *ports = cJSON_CreateArray();
    cJSON *p = cJSON_CreateObject();
    json_set_str(p, "name", RAB_APP);
    json_set_int(p, "containerPort", CLC_SLURMRESTD_PORT);
    json_set_str(p, "protocol", "TCP");
    cJSON_AddItemToArray(ports, p);
    json_set(k, "ports", ports);
    json_set(k, "startupProbe", clc_probe(clc_tcp_socket(CLC_SLURMRESTD_PORT), 6, 10));
    json_set(k, "livenessProbe", clc_probe(clc_tcp_socket(CLC_SLURMRESTD_PORT), 6, 10));
    json_set(k, "readinessProbe", clc_probe(clc_tcp_socket(CLC_SLURMRESTD_PORT), 0, 0));
    json_set(k, "securityContext", clc_security_context(NOBODY_UID, 0));
    cJSON *mounts = cJSON_CreateArray();
    cJSON_AddItemToArray(mounts, clc_mount("slurm-etc", SCONF_ETC_DIR, NULL, 1));
    json_set(k, "volumeMounts", mounts);
    k = pt_merge_container(k, json_get(r, "spec.slurmrestd"));
    /* slurmrestd [OPTIONS] [host:port]: the listen address goes last, after
     * the user's args. */
    cJSON *args = cJSON_GetObjectItemCaseSensitive(k, "args");
    if (!cJSON_IsArray(args)) {
        args = cJSON_CreateArray();
        json_set(k, "args", args);
    }
    cJSON_AddItemToArray(args, cJSON_CreateString("0.0.0.0:6820"));
    return k;
}

int rab_deployment(const cJSON *restapi, const clc_env *env, cJSON **out, char **why)
{
    *out = NULL;
    const char *ctlname = json_get_str_or(restapi, "spec.controllerRef.name", "");
    const cJSON *ctl = clc_get(env, "Controller", ctlname);
    if (ctl == NULL)
        return clc_fail(why, OP_ENOTFOUND, "Controller %s (controllerRef) not found", ctlname);
    const char *keyname = json_get_str(ctl, "spec.slurmKeyRef.name");
    if (keyname == NULL || *keyname == '\0')
        return clc_fail(why, OP_EINVAL, "Controller %s has no slurmKeyRef, slurmrestd cannot authenticate",
                        ctlname);

    cJSON *r = rab_defaults(restapi);
    const cJSON *spec = json_child(r, "spec");
    const cJSON *tmeta = json_get(spec, "template.metadata");
    const char *name = cr_name(r);
    int has_accounting = cJSON_IsObject(json_get(ctl, "spec.accountingRef"));

    cJSON *tmpl = cJSON_CreateObject();
    cJSON *pmeta = json_obj_ensure(tmpl, "metadata");
    json_set(pmeta, "labels", clc_labels_for(r, json_child(tmeta, "labels"), RAB_APP, RAB_COMPONENT));
    cJSON *defc = clc_strmap(CLC_ANN_DEFAULT_CONTAINER, RAB_APP, NULL);
    json_set(pmeta, "annotations",
             CLC_MERGE(json_get(r, "metadata.annotations"), json_child(tmeta, "annotations"), defc));
    cJSON_Delete(defc);
    cJSON *pspec = json_obj_ensure(tmpl, "spec");
    json_set_bool(pspec, "automountServiceAccountToken", 0);
    cJSON *containers = cJSON_CreateArray();
    cJSON_AddItemToArray(containers, slurmrestd_container(r, has_accounting));
    json_set(pspec, "containers", containers);
    json_set(pspec, "securityContext", clc_security_context(NOBODY_UID, 1));

    cJSON *vols = cJSON_CreateArray();
    cJSON *etc = cJSON_CreateObject();
    json_set_str(etc, "name", "slurm-etc");
    cJSON *proj = json_obj_ensure(etc, "projected");
    json_set_int(proj, "defaultMode", 0600);
    cJSON *src = cJSON_CreateArray();
    char *cfg = ctlb_config_name(ctlname);
    cJSON_AddItemToArray(src, clc_configmap_projection(cfg, SCONF_SLURM_CONF, SCONF_SLURM_CONF));
    free(cfg);
    cJSON_AddItemToArray(
        src, clc_secret_projection(keyname, json_get_str_or(ctl, "spec.slurmKeyRef.key", ""), "slurm.key"));
    json_set(proj, "sources", src);
    cJSON_AddItemToArray(vols, etc);
    json_set(pspec, "volumes", vols);
    tmpl = pt_merge_template(tmpl, json_child(spec, "template"));

    char *dname = rab_name(name);
    cJSON *d =
        clc_new_object("apps/v1", "Deployment", dname, r, RAB_KIND,
                       clc_labels_for(r, json_child(tmeta, "labels"), RAB_APP, RAB_COMPONENT),
                       CLC_MERGE(json_get(r, "metadata.annotations"), json_child(tmeta, "annotations")));
    free(dname);
    cJSON *dspec = json_obj_ensure(d, "spec");
    json_set_int(dspec, "replicas", json_get_int(spec, "replicas", 1));
    json_set_int(dspec, "revisionHistoryLimit", 0);
    json_set(json_obj_ensure(dspec, "selector"), "matchLabels", clc_labels(RAB_APP, name, NULL));
    json_set(dspec, "template", tmpl);
    *out = d;
    cJSON_Delete(r);
    return 0;
}
