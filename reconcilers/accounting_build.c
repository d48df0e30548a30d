#include "reconcilers/accounting_build.h"

#include <stdlib.h>
#include <string.h>

#include "core/crypto.h"
#include "core/err.h"
#include "core/json.h"
#include "reconcilers/podtemplate.h"
#include "reconcilers/slurmconf.h"

cJSON *acb_defaults(const cJSON *accounting)
{
    cJSON *a = cJSON_Duplicate(accounting, 1);
    if (a == NULL)
        a = cJSON_CreateObject();
    cJSON *sc = json_obj_ensure(json_obj_ensure(a, "spec"), "storageConfig");
    if (json_get_int(sc, "port", 0) == 0)
        json_set_int(sc, "port", 3306);
    const char *db = json_get_str(sc, "database");
    if (db == NULL || *db == '\0')
        json_set_str(sc, "database", "slurm_acct_db");
    return a;
}

char *acb_name(const char *accounting)
{
    return xasprintf("%s-accounting", accounting);
}

static const char *cr_name(const cJSON *c)
{
    return json_get_str_or(c, "metadata.name", "");
}

int acb_service(const cJSON *accounting, cJSON **out, char **why)
{
    *out = NULL;
    if (clc_is_external(accounting))
        return 0;
    cJSON *a = acb_defaults(accounting);
    const cJSON *svc = json_get(a, "spec.service");
    char *name = acb_name(cr_name(a));
    clc_service_opts o = {
        .name = name,
        .ns = json_get_str_or(a, "metadata.namespace", ""),
        .labels = clc_labels_for(a, json_get(svc, "metadata.labels"), ACB_APP, ACB_COMPONENT),
        .annotations = CLC_MERGE(json_get(a, "metadata.annotations"), json_get(svc, "metadata.annotations")),
        .user = svc,
        .selector = clc_labels(ACB_APP, cr_name(a), NULL),
        .port_name = ACB_APP,
        .default_port = CLC_SLURMDBD_PORT,
    };
    int rc = clc_service(&o, out, why);
    if (rc == 0)
        clc_set_controller_ref(*out, ACB_KIND, a);
    free(name);
    cJSON_Delete(a);
    return rc;
}

int acb_config_secret(const cJSON *accounting, const clc_env *env, cJSON **out, char **why)
{
    *out = NULL;
    if (clc_is_external(accounting))
        return 0;
    const char *sname = json_get_str_or(accounting, "spec.storageConfig.passwordKeyRef.name", "");
    const char *skey = json_get_str_or(accounting, "spec.storageConfig.passwordKeyRef.key", "");
    const cJSON *sec = clc_get(env, "Secret", sname);
    const char *b64 = clc_str(json_child(sec, "data"), skey);
    if (b64 == NULL)
        return clc_fail(why, OP_ENOTFOUND, "storage password: key %s of Secret %s not found", skey, sname);
    size_t plen = 0;
    uint8_t *pass = base64_decode(b64, strlen(b64), &plen);
    if (pass == NULL)
        return clc_fail(why, OP_EPARSE, "storage password: key %s of Secret %s is not valid base64", skey,
                        sname);

    cJSON *a = acb_defaults(accounting);
    char *conf = sconf_slurmdbd_conf(a, (const char *)pass);
    char *enc = base64_encode(conf, strlen(conf));
    memset(conf, 0, strlen(conf));
    memset(pass, 0, plen);
    free(conf);
    free(pass);
    char *name = acb_name(cr_name(a));
    cJSON *s =
        clc_new_object("v1", "Secret", name, a, ACB_KIND, clc_labels_for(a, NULL, ACB_APP, ACB_COMPONENT),
                       CLC_MERGE(json_get(a, "metadata.annotations")));
    free(name);
    json_set_bool(s, "immutable", 0);
    cJSON *data = json_obj_ensure(s, "data");
    json_set_str(data, SCONF_SLURMDBD_CONF, enc);
    free(enc);
    *out = s;
    cJSON_Delete(a);
    return 0;
}

/* slurmdbd refuses a slurmdbd.conf that its group may read (24.11: "should
 * be 600 is 640"), and the pod's fsGroup, which lets uid 401 read the
 * root-owned Secret files at all, makes the kubelet add group read to every
 * file of the projected volume. So the files are copied as uid 401 into an
 * emptyDir where they are its own, with the modes slurmdbd wants. The
 * kubelet's "..data" entries are skipped by the glob; cp -L follows its
 * symlinks. A Secret change reaches the copies with the pod's roll, which
 * the hash annotations on the template cause. */
static const char initconf_script[] = "set -eu\n"
                                      "src=/mnt/slurm\n"
                                      "dst=/mnt/etc/slurm\n"
                                      "for f in \"$src\"/*; do\n"
                                      "  [ -f \"$f\" ] || continue\n"
                                      "  cp -L \"$f\" \"$dst/\"\n"
                                      "  chmod 600 \"$dst/${f##*/}\"\n"
                                      "done\n"
                                      "ls -lA \"$dst\"\n";

/* The init container runs slurmdbd's image (a shell and cp are all it
 * needs), so a user who pins that image pins this one too. */
static cJSON *initconf_container(const cJSON *a)
{
    const cJSON *dbd = json_get(a, "spec.slurmdbd");
    cJSON *k = cJSON_CreateObject();
    json_set_str(k, "name", "initconf");
    const char *image = json_get_str(dbd, "image");
    if (image != NULL)
        json_set_str(k, "image", image);
    const char *pull = json_get_str(dbd, "imagePullPolicy");
    if (pull != NULL)
        json_set_str(k, "imagePullPolicy", pull);
    json_set(k, "command", clc_sh_command(initconf_script));
    json_set(k, "securityContext", clc_security_context(CLC_SLURM_UID, 0));
    cJSON *m = cJSON_CreateArray();
    cJSON_AddItemToArray(m, clc_mount("slurm-etc", "/mnt/etc/slurm", NULL, 0));
    cJSON_AddItemToArray(m, clc_mount("slurm-config", "/mnt/slurm", NULL, 1));
    json_set(k, "volumeMounts", m);
    return k;
}

static cJSON *slurmdbd_container(const cJSON *a)
{
    cJSON *k = cJSON_CreateObject();
    json_set_str(k, "name", ACB_APP);
    cJSON *ports = cJSON_CreateArray();
    cJSON *p = cJSON_CreateObject();
    json_set_str(p, "name", ACB_APP);
    json_set_int(p, "containerPort", CLC_SLURMDBD_PORT);
    json_set_str(p, "protocol", "TCP");
    cJSON_AddItemToArray(ports, p);
    json_set(k, "ports", ports);
    json_set(k, "readinessProbe", clc_probe(clc_tcp_socket(CLC_SLURMDBD_PORT), 0, 0));
    json_set(k, "securityContext", clc_security_context(CLC_SLURM_UID, 0));
    cJSON *mounts = cJSON_CreateArray();
    cJSON_AddItemToArray(mounts, clc_mount("slurm-etc", SCONF_ETC_DIR, NULL, 1));
    cJSON_AddItemToArray(mounts, clc_mount("run", "/run", NULL, 0));
    json_set(k, "volumeMounts", mounts);
    return pt_merge_container(k, json_get(a, "spec.slurmdbd"));
}

int acb_statefulset(const cJSON *accounting, const cJSON *config_secret, const clc_env *env, cJSON **out,
                    char **why)
{
    (void)why;
    *out = NULL;
    if (clc_is_external(accounting))
        return 0;
    cJSON *a = acb_defaults(accounting);
    const cJSON *spec = json_child(a, "spec");
    const cJSON *tmeta = json_get(spec, "template.metadata");
    const char *name = cr_name(a);
    char *oname = acb_name(name);

    char h_slurm[65], h_jwt[65], h_conf[65];
    const cJSON *jwt = clc_jwt_ref(spec);
    clc_hash_data(clc_get(env, "Secret", json_get_str(spec, "slurmKeyRef.name")), 1, h_slurm);
    clc_hash_data(clc_get(env, "Secret", json_get_str(jwt, "name")), 1, h_jwt);
    if (config_secret == NULL)
        config_secret = clc_get(env, "Secret", oname);
    clc_hash_data(config_secret, 1, h_conf);
    cJSON *ann = clc_strmap(CLC_ANN_SLURM_KEY_HASH, h_slurm, CLC_ANN_JWT_KEY_HASH, h_jwt,
                            CLC_ANN_SLURMDBD_CONF_HASH, h_conf, CLC_ANN_DEFAULT_CONTAINER, ACB_APP, NULL);

    cJSON *tmpl = cJSON_CreateObject();
    cJSON *pmeta = json_obj_ensure(tmpl, "metadata");
    json_set(pmeta, "labels", clc_labels_for(a, json_child(tmeta, "labels"), ACB_APP, ACB_COMPONENT));
    json_set(pmeta, "annotations",
             CLC_MERGE(json_get(a, "metadata.annotations"), json_child(tmeta, "annotations"), ann));
    cJSON_Delete(ann);
    cJSON *pspec = json_obj_ensure(tmpl, "spec");
    json_set_bool(pspec, "automountServiceAccountToken", 0);
    cJSON *containers = cJSON_CreateArray();
    cJSON_AddItemToArray(containers, slurmdbd_container(a));
    json_set(pspec, "containers", containers);
    cJSON *inits = cJSON_CreateArray();
    cJSON_AddItemToArray(inits, initconf_container(a));
    json_set(pspec, "initContainers", inits);
    json_set(pspec, "securityContext", clc_security_context(CLC_SLURM_UID, 1));

    cJSON *vols = cJSON_CreateArray();
    cJSON_AddItemToArray(vols, clc_empty_dir("slurm-etc", 1));
    cJSON *etc = cJSON_CreateObject();
    json_set_str(etc, "name", "slurm-config");
    cJSON *proj = json_obj_ensure(etc, "projected");
    json_set_int(proj, "defaultMode", 0600);
    cJSON *src = cJSON_CreateArray();
    cJSON_AddItemToArray(src, clc_secret_projection(oname, SCONF_SLURMDBD_CONF, SCONF_SLURMDBD_CONF));
    cJSON_AddItemToArray(src,
                         clc_secret_projection(json_get_str_or(spec, "slurmKeyRef.name", ""),
                                               json_get_str_or(spec, "slurmKeyRef.key", ""), "slurm.key"));
    cJSON_AddItemToArray(src, clc_secret_projection(json_get_str_or(jwt, "name", ""),
                                                    json_get_str_or(jwt, "key", ""), "jwt.key"));
    const cJSON *jwks = json_child(spec, "jwksKeyRef");
    if (cJSON_IsObject(jwks))
        cJSON_AddItemToArray(src, clc_configmap_projection(json_get_str_or(jwks, "name", ""),
                                                           json_get_str_or(jwks, "key", ""), "jwks.json"));
    json_set(proj, "sources", src);
    cJSON_AddItemToArray(vols, etc);
    cJSON_AddItemToArray(vols, clc_empty_dir("run", 1));
    json_set(pspec, "volumes", vols);
    tmpl = pt_merge_template(tmpl, json_child(spec, "template"));

    cJSON *sts =
        clc_new_object("apps/v1", "StatefulSet", oname, a, ACB_KIND,
                       clc_labels_for(a, json_child(tmeta, "labels"), ACB_APP, ACB_COMPONENT),
                       CLC_MERGE(json_get(a, "metadata.annotations"), json_child(tmeta, "annotations")));
    cJSON *sspec = json_obj_ensure(sts, "spec");
    json_set_str(sspec, "podManagementPolicy", "Parallel");
    json_set_int(sspec, "replicas", 1);
    json_set_int(sspec, "revisionHistoryLimit", 0);
    json_set(json_obj_ensure(sspec, "selector"), "matchLabels", clc_labels(ACB_APP, name, NULL));
    json_set_str(sspec, "serviceName", oname);
    json_set(sspec, "template", tmpl);
    *out = sts;
    free(oname);
    cJSON_Delete(a);
    return 0;
}
