#include "reconcilers/controller_build.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/json.h"
#include "reconcilers/podtemplate.h"
#include "reconcilers/slurmconf.h"

/* The logfile sidecar: slurmctld writes its log into a FIFO on a shared
 * emptyDir and this container copies it to its stdout, so `kubectl logs`
 * shows it (clc_logfile_script). */

/* The reconfigure sidecar (always there: with inplaceReconfigure it takes
 * every change, without it what the NodeSets add, see config_hash): every
 * 5 s, hash the files of the projected /etc/slurm (following the kubelet's
 * symlinks, skipping its "..data" bookkeeping entries); when the hash
 * changes, run `scontrol reconfigure` until it succeeds, retrying every 2 s.
 * It reaches slurmctld through the auth socket in the shared /run/slurmctld. */
static const char reconfigure_script[] = "set -euo pipefail\n"
                                         "dir=/etc/slurm\n"
                                         "interval=5\n"
                                         "confhash() {\n"
                                         "  find -L \"$dir\" -path \"$dir/..*\" -prune -o -type f -print0 | "
                                         "sort -z | xargs -0r sha256sum | sha256sum\n"
                                         "}\n"
                                         "reconfigure() {\n"
                                         "  echo \"[$(date -Is)] $dir changed: scontrol reconfigure\"\n"
                                         "  until scontrol reconfigure; do\n"
                                         "    echo \"[$(date -Is)] scontrol reconfigure failed, retrying\"\n"
                                         "    sleep 2\n"
                                         "  done\n"
                                         "}\n"
                                         "last=\"$(confhash)\"\n"
                                         "echo \"[$(date -Is)] watching $dir every ${interval}s\"\n"
                                         "while :; do\n"
                                         "  sleep \"$interval\"\n"
                                         "  now=\"$(confhash)\"\n"
                                         "  if [ \"$now\" != \"$last\" ]; then\n"
                                         "    reconfigure\n"
                                         "    last=\"$now\"\n"
                                         "  fi\n"
                                         "done\n";

cJSON *ctlb_defaults(const cJSON *controller)
{
    cJSON *c = cJSON_Duplicate(controller, 1);
    if (c == NULL)
        c = cJSON_CreateObject();
    cJSON *spec = json_obj_ensure(c, "spec");
    cJSON *pers = json_obj_ensure(spec, "persistence");
    if (!cJSON_IsBool(json_child(pers, "enabled")))
        json_set_bool(pers, "enabled", 1);
    const cJSON *ha = json_child(spec, "ha");
    if (json_get_bool(ha, "enabled", 0) && !cJSON_IsNumber(json_child(ha, "backups")))
        json_set_int(json_obj_ensure(spec, "ha"), "backups", 1);
    return c;
}

char *ctlb_name(const char *ctl)
{
    return xasprintf("%s-controller", ctl);
}

char *ctlb_internal_service_name(const char *ctl)
{
    return xasprintf("%s-controller-internal", ctl);
}

char *ctlb_config_name(const char *ctl)
{
    return xasprintf("%s-config", ctl);
}

static const char *cr_name(const cJSON *c)
{
    return json_get_str_or(c, "metadata.name", "");
}

static const char *cr_ns(const cJSON *c)
{
    return json_get_str_or(c, "metadata.namespace", "");
}

static cJSON *labels_for(const cJSON *c, const cJSON *extra)
{
    return clc_labels_for(c, extra, CTLB_APP, CTLB_COMPONENT);
}

static cJSON *new_object(const char *api_version, const char *kind, const char *name, const cJSON *c,
                         cJSON *labels, cJSON *annotations)
{
    return clc_new_object(api_version, kind, name, c, CTLB_KIND, labels, annotations);
}

static int service_common(const cJSON *controller, int internal, cJSON **out, char **why)
{
    *out = NULL;
    if (clc_is_external(controller))
        return 0;
    cJSON *c = ctlb_defaults(controller);
    const cJSON *svc = json_get(c, "spec.service");
    char *name = internal ? ctlb_internal_service_name(cr_name(c)) : ctlb_name(cr_name(c));
    clc_service_opts o = {
        .name = name,
        .ns = cr_ns(c),
        .labels = labels_for(c, json_get(svc, "metadata.labels")),
        .annotations = CLC_MERGE(json_get(c, "metadata.annotations"), json_get(svc, "metadata.annotations")),
        .user = svc,
        .selector = clc_labels(CTLB_APP, cr_name(c), NULL),
        .port_name = CTLB_APP,
        .default_port = CLC_SLURMCTLD_PORT,
        .use_node_port = !internal,
        .headless = internal,
        .ignore_user_spec = internal,
        .clear_external_ips = 1,
    };
    if (!internal)
        json_set_str(o.selector, CLC_LABEL_CONTROLLER_ACTIVE, "true");
    if (internal) {
        /* The headless Service always uses the slurmctld port itself. */
        o.user = NULL;
    }
    int rc = clc_service(&o, out, why);
    if (rc == 0)
        clc_set_controller_ref(*out, CTLB_KIND, c);
    free(name);
    cJSON_Delete(c);
    return rc;
}

int ctlb_internal_service(const cJSON *controller, cJSON **out, char **why)
{
    return service_common(controller, 1, out, why);
}

int ctlb_service(const cJSON *controller, cJSON **out, char **why)
{
    return service_common(controller, 0, out, why);
}

int ctlb_config(const cJSON *controller, const cJSON *const *nodesets, size_t n_nodesets, const clc_env *env,
                cJSON **out, char **why)
{
    *out = NULL;
    cJSON *c = ctlb_defaults(controller);
    char *name = ctlb_config_name(cr_name(c));
    cJSON *data = cJSON_CreateObject();
    cJSON *labels, *annotations;
    int rc = 0;

    if (clc_is_external(c)) {
        const char *acct = json_get_str(c, "spec.accountingRef.name");
        char *text = sconf_slurm_conf_external(c, acct ? clc_get(env, "Accounting", acct) : NULL);
        json_set_str(data, SCONF_SLURM_CONF, text);
        free(text);
        /* Slinky labels the external ConfigMap from the pod template's
         * metadata rather than the CR's. */
        cJSON *ours = clc_labels(CTLB_APP, cr_name(c), CTLB_COMPONENT);
        labels = CLC_MERGE(json_get(c, "spec.template.metadata.labels"), ours);
        cJSON_Delete(ours);
        annotations = CLC_MERGE(json_get(c, "spec.template.metadata.annotations"));
    } else {
        const cJSON *refs = json_get(c, "spec.configFileRefs");
        if (cJSON_IsArray(refs))
            for (const cJSON *r = refs->child; r; r = r->next) {
                const char *cm = json_get_str_or(r, "name", "");
                if (clc_get(env, "ConfigMap", cm) == NULL) {
                    rc = clc_fail(why, OP_ENOTFOUND, "ConfigMap %s (configFileRefs) not found", cm);
                    break;
                }
            }
        char *text = NULL;
        if (rc == 0)
            rc = sconf_slurm_conf(c, nodesets, n_nodesets, env, &text, why);
        if (rc) {
            cJSON_Delete(data);
            free(name);
            cJSON_Delete(c);
            return rc;
        }
        json_set_str(data, SCONF_SLURM_CONF, text);
        free(text);
        if (!sconf_config_files_have(c, env, SCONF_CGROUP_CONF)) {
            char *cg = sconf_cgroup_conf();
            json_set_str(data, SCONF_CGROUP_CONF, cg);
            free(cg);
        }
        labels = labels_for(c, NULL);
        annotations = CLC_MERGE(json_get(c, "metadata.annotations"));
    }
    clc_sort_keys(data);
    cJSON *cm = new_object("v1", "ConfigMap", name, c, labels, annotations);
    json_set(cm, "data", data);
    *out = cm;
    free(name);
    cJSON_Delete(c);
    return rc;
}

/* ---- the StatefulSet ------------------------------------------------------ */

/* Without persistence the state lives in an emptyDir, which the kubelet
 * makes 0777 and root's: slurmctld then logs "StateSaveLocation DIRECTORY IS
 * WORLD WRITABLE", and any process of the pod could rewrite the job state.
 * The emptyDir is therefore mounted one level up, and this init container,
 * running as SlurmUser, creates the state directory inside it 0700. */
static const char statesave_script[] = "set -eu\n"
                                       "mkdir -p \"$STATESAVE\"\n"
                                       "chmod 0700 \"$STATESAVE\"\n";

static cJSON *statesave_container(const cJSON *slurmctld, const char *state_dir)
{
    cJSON *k = cJSON_CreateObject();
    json_set_str(k, "name", "statesave");
    const char *img = json_get_str(slurmctld, "image");
    if (img)
        json_set_str(k, "image", img);
    json_set(k, "command", clc_sh_command(statesave_script));
    cJSON *env = cJSON_CreateArray();
    cJSON *e = cJSON_CreateObject();
    json_set_str(e, "name", "STATESAVE");
    json_set_str(e, "value", state_dir);
    cJSON_AddItemToArray(env, e);
    json_set(k, "env", env);
    json_set(k, "securityContext", clc_security_context(CLC_SLURM_UID, 0));
    cJSON *mounts = cJSON_CreateArray();
    cJSON_AddItemToArray(mounts, clc_mount("statesave", SCONF_SPOOL_DIR, NULL, 0));
    json_set(k, "volumeMounts", mounts);
    return k;
}

/* state_parent: the state volume is an emptyDir mounted at SCONF_SPOOL_DIR
 * (statesave_container), not at the state directory itself. */
static cJSON *slurmctld_container(const cJSON *c, const char *cluster, int replicas, int state_parent)
{
    cJSON *k = cJSON_CreateObject();
    json_set_str(k, "name", CTLB_APP);
    cJSON *ports = cJSON_CreateArray();
    cJSON *p = cJSON_CreateObject();
    json_set_str(p, "name", CTLB_APP);
    json_set_int(p, "containerPort", CLC_SLURMCTLD_PORT);
    json_set_str(p, "protocol", "TCP");
    cJSON_AddItemToArray(ports, p);
    json_set(k, "ports", ports);
    if (clc_image_http_probes(json_get_str(c, "spec.slurmctld.image"))) {
        json_set(k, "startupProbe", clc_probe(clc_http_get("/livez", CTLB_APP), 6, 10));
        /* Only the active slurmctld answers /readyz; with backups that would keep
         * the standbys NotReady forever and wedge rolling updates, so HA gates
         * readiness on /livez (the Service picks the active pod by label). */
        json_set(k, "readinessProbe",
                 clc_probe(clc_http_get(replicas > 1 ? "/livez" : "/readyz", CTLB_APP), 0, 0));
        json_set(k, "livenessProbe", clc_probe(clc_http_get("/livez", CTLB_APP), 6, 10));
    } else {
        /* Slurm 24.11 (or a version the tag does not say) has no /livez: its
         * HTTP probes would never pass. A listening port is what all have. */
        json_set(k, "startupProbe", clc_probe(clc_tcp_socket(CLC_SLURMCTLD_PORT), 6, 10));
        json_set(k, "readinessProbe", clc_probe(clc_tcp_socket(CLC_SLURMCTLD_PORT), 0, 0));
        json_set(k, "livenessProbe", clc_probe(clc_tcp_socket(CLC_SLURMCTLD_PORT), 6, 10));
    }
    json_set(k, "securityContext", clc_security_context(CLC_SLURM_UID, 0));
    cJSON *mounts = cJSON_CreateArray();
    char *spool = xasprintf("%s/%s", SCONF_SPOOL_DIR, cluster);
    cJSON_AddItemToArray(mounts, clc_mount("slurm-etc", SCONF_ETC_DIR, NULL, 1));
    cJSON_AddItemToArray(mounts, clc_mount("run", "/run", NULL, 0));
    cJSON_AddItemToArray(mounts, clc_mount("statesave", state_parent ? SCONF_SPOOL_DIR : spool, NULL, 0));
    cJSON_AddItemToArray(mounts, clc_mount("slurm-authsocket", "/run/slurmctld", NULL, 0));
    cJSON_AddItemToArray(mounts, clc_mount("slurm-logfile", "/var/log/slurm", NULL, 0));
    free(spool);
    json_set(k, "volumeMounts", mounts);
    return pt_merge_container(k, json_get(c, "spec.slurmctld"));
}

static cJSON *logfile_container(const cJSON *user, const char *fifo)
{
    cJSON *k = cJSON_CreateObject();
    json_set_str(k, "name", "logfile");
    cJSON *env = cJSON_CreateArray();
    cJSON *e = cJSON_CreateObject();
    json_set_str(e, "name", "SOCKET");
    json_set_str(e, "value", fifo);
    cJSON_AddItemToArray(env, e);
    json_set(k, "env", env);
    json_set(k, "command", clc_sh_command(clc_logfile_script()));
    json_set_str(k, "restartPolicy", "Always");
    cJSON *mounts = cJSON_CreateArray();
    cJSON_AddItemToArray(mounts, clc_mount("slurm-logfile", "/var/log/slurm", NULL, 0));
    json_set(k, "volumeMounts", mounts);
    return pt_merge_container(k, user);
}

static cJSON *reconfigure_container(const cJSON *c, const cJSON *slurmctld)
{
    cJSON *k = cJSON_CreateObject();
    json_set_str(k, "name", "reconfigure");
    cJSON *cmd = cJSON_CreateArray();
    const char *argv[] = {"tini", "-g", "--", "bash", "-c"};
    for (size_t i = 0; i < ARRAY_SIZE(argv); i++)
        cJSON_AddItemToArray(cmd, cJSON_CreateString(argv[i]));
    cJSON_AddItemToArray(cmd, cJSON_CreateString(reconfigure_script));
    json_set(k, "command", cmd);
    json_set_str(k, "restartPolicy", "Always");
    cJSON *mounts = cJSON_CreateArray();
    cJSON_AddItemToArray(mounts, clc_mount("slurm-etc", SCONF_ETC_DIR, NULL, 1));
    cJSON_AddItemToArray(mounts, clc_mount("slurm-authsocket", "/run/slurmctld", NULL, 1));
    json_set(k, "volumeMounts", mounts);
    k = pt_merge_container(k, json_get(c, "spec.reconfigure"));
    /* The sidecar needs scontrol and tini, which the slurmctld image has:
     * without an image of its own it runs the slurmctld image. */
    const char *img = json_get_str(slurmctld, "image");
    if (json_get_str(k, "image") == NULL && img)
        json_set_str(k, "image", img);
    return k;
}

static void add_ref_names(const cJSON *spec, const char *field, const char ***names, size_t *n)
{
    const cJSON *refs = json_child(spec, field);
    if (!cJSON_IsArray(refs))
        return;
    for (const cJSON *r = refs->child; r; r = r->next) {
        *names = xrealloc(*names, (*n + 1) * sizeof(**names));
        (*names)[(*n)++] = json_get_str_or(r, "name", "");
    }
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static cJSON *volumes(const cJSON *c)
{
    const cJSON *spec = json_child(c, "spec");
    cJSON *vols = cJSON_CreateArray();
    cJSON *etc = cJSON_CreateObject();
    json_set_str(etc, "name", "slurm-etc");
    cJSON *proj = json_obj_ensure(etc, "projected");
    json_set_int(proj, "defaultMode", 0610);
    cJSON *src = cJSON_CreateArray();
    char *cfg = ctlb_config_name(cr_name(c));
    cJSON_AddItemToArray(src, clc_configmap_projection(cfg, NULL, NULL));
    free(cfg);
    cJSON_AddItemToArray(src,
                         clc_secret_projection(json_get_str_or(spec, "slurmKeyRef.name", ""),
                                               json_get_str_or(spec, "slurmKeyRef.key", ""), "slurm.key"));
    const cJSON *jwt = clc_jwt_ref(spec);
    cJSON_AddItemToArray(src, clc_secret_projection(json_get_str_or(jwt, "name", ""),
                                                    json_get_str_or(jwt, "key", ""), "jwt.key"));
    /* Every user ConfigMap, sorted by name as Slinky does (it does not
     * de-duplicate a ConfigMap listed twice either). */
    const char **names = NULL;
    size_t n = 0;
    static const char *const fields[] = {"configFileRefs", "prologScriptRefs", "epilogScriptRefs",
                                         "prologSlurmctldScriptRefs", "epilogSlurmctldScriptRefs"};
    for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
        add_ref_names(spec, fields[i], &names, &n);
    if (n)
        qsort(names, n, sizeof(*names), cmp_cstr);
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(src, clc_configmap_projection(names[i], NULL, NULL));
    free(names);
    const cJSON *jwks = json_child(spec, "jwksKeyRef");
    if (cJSON_IsObject(jwks))
        cJSON_AddItemToArray(src, clc_configmap_projection(json_get_str_or(jwks, "name", ""),
                                                           json_get_str_or(jwks, "key", ""), "jwks.json"));
    json_set(proj, "sources", src);
    cJSON_AddItemToArray(vols, etc);
    cJSON_AddItemToArray(vols, clc_empty_dir("slurm-logfile", 1));
    cJSON_AddItemToArray(vols, clc_empty_dir("run", 1));
    cJSON_AddItemToArray(vols, clc_empty_dir("slurm-authsocket", 0));
    return vols;
}

/* The user's affinity with our required anti-affinity term appended: no two
 * slurmctld pods of this Controller on one node. Applied after the template
 * merge, because a strategic merge replaces the user's term list (it has no
 * merge key) and would drop ours. */
static cJSON *affinity(const cJSON *c)
{
    const cJSON *user = json_get(c, "spec.template.spec.affinity");
    cJSON *a = cJSON_IsObject(user) ? cJSON_Duplicate(user, 1) : cJSON_CreateObject();
    cJSON *anti = json_obj_ensure(a, "podAntiAffinity");
    cJSON *req = cJSON_GetObjectItemCaseSensitive(anti, "requiredDuringSchedulingIgnoredDuringExecution");
    if (!cJSON_IsArray(req)) {
        req = cJSON_CreateArray();
        json_set(anti, "requiredDuringSchedulingIgnoredDuringExecution", req);
    }
    cJSON *term = cJSON_CreateObject();
    cJSON *sel = json_obj_ensure(term, "labelSelector");
    json_set(sel, "matchLabels", clc_labels(CTLB_APP, cr_name(c), NULL));
    json_set_str(term, "topologyKey", "kubernetes.io/hostname");
    cJSON_AddItemToArray(req, term);
    return a;
}

static int has_rwx(const cJSON *pvc)
{
    const cJSON *modes = json_get(pvc, "spec.accessModes");
    if (cJSON_IsArray(modes))
        for (const cJSON *m = modes->child; m; m = m->next)
            if (cJSON_IsString(m) && strcmp(m->valuestring, "ReadWriteMany") == 0)
                return 1;
    return 0;
}

/* The slurm-config-hash of a ConfigMap: its data with slurm.conf read
 * through sconf_without_nodesets(). What the NodeSets contribute (their
 * NodeSet and partition lines, MaxNodeCount) is taken by `scontrol
 * reconfigure` (the reconfigure sidecar): a NodeSet created, scaled or
 * deleted must not restart slurmctld, which, without persistence, comes back
 * with no state and loses every dynamic node that had registered (24.11's
 * slurmds do not register again by themselves). Everything else still rolls
 * the pod, as it does in Slinky without inplaceReconfigure. */
static void config_hash(const cJSON *config, char out[65])
{
    const cJSON *text = json_child(json_child(config, "data"), SCONF_SLURM_CONF);
    if (!cJSON_IsString(text)) {
        clc_hash_data(config, 0, out);
        return;
    }
    cJSON *view = cJSON_Duplicate(config, 1);
    char *stripped = sconf_without_nodesets(text->valuestring);
    json_set_str(cJSON_GetObjectItemCaseSensitive(view, "data"), SCONF_SLURM_CONF, stripped);
    free(stripped);
    clc_hash_data(view, 0, out);
    cJSON_Delete(view);
}

int ctlb_statefulset(const cJSON *controller, const cJSON *config, const clc_env *env, cJSON **out,
                     char **why)
{
    *out = NULL;
    if (clc_is_external(controller))
        return 0;
    cJSON *c = ctlb_defaults(controller);
    const cJSON *spec = json_child(c, "spec");
    const char *name = cr_name(c);
    int replicas = clc_controller_replicas(c);
    int ha = json_get_bool(spec, "ha.enabled", 0);
    int persist = json_get_bool(spec, "persistence.enabled", 1);
    const char *claim = json_get_str_or(spec, "persistence.existingClaim", "");

    /* docs/compat.md#persistence: the combinations that cannot work are refused up front. */
    if (ha && !persist) {
        cJSON_Delete(c);
        return clc_fail(why, OP_EINVAL, "invalid configuration: HA is enabled but persistence is disabled");
    }
    if (ha && !*claim) {
        cJSON_Delete(c);
        return clc_fail(why, OP_EINVAL, "HA requires persistence.existingClaim");
    }
    if (ha) {
        const cJSON *pvc = clc_get(env, "PersistentVolumeClaim", claim);
        if (pvc && !has_rwx(pvc)) {
            int rc = clc_fail(why, OP_EINVAL,
                              "slurm high availability (HA) mode requires PVC %s/%s to have access mode "
                              "ReadWriteMany",
                              cr_ns(c), claim);
            cJSON_Delete(c);
            return rc;
        }
    }

    char *cluster = clc_cluster_name(c);
    int inplace = json_get_bool(spec, "inplaceReconfigure", 0);

    /* Hash annotations. */
    char h_slurm[65], h_jwt[65], h_conf[65];
    const cJSON *jwt = clc_jwt_ref(spec);
    clc_hash_data(clc_get(env, "Secret", json_get_str(spec, "slurmKeyRef.name")), 1, h_slurm);
    clc_hash_data(clc_get(env, "Secret", json_get_str(jwt, "name")), 1, h_jwt);
    if (!inplace) {
        if (config == NULL) {
            char *cfg = ctlb_config_name(name);
            config = clc_get(env, "ConfigMap", cfg);
            free(cfg);
        }
        config_hash(config, h_conf);
    }
    cJSON *hashes = inplace ? clc_strmap(CLC_ANN_SLURM_KEY_HASH, h_slurm, CLC_ANN_JWT_KEY_HASH, h_jwt, NULL)
                            : clc_strmap(CLC_ANN_SLURM_KEY_HASH, h_slurm, CLC_ANN_JWT_KEY_HASH, h_jwt,
                                         CLC_ANN_SLURM_CONFIG_HASH, h_conf, NULL);
    cJSON *defc = clc_strmap(CLC_ANN_DEFAULT_CONTAINER, CTLB_APP, NULL);

    /* Pod template. */
    const cJSON *tmeta = json_get(spec, "template.metadata");
    cJSON *tmpl = cJSON_CreateObject();
    cJSON *pmeta = json_obj_ensure(tmpl, "metadata");
    json_set(pmeta, "labels", labels_for(c, json_child(tmeta, "labels")));
    json_set(pmeta, "annotations",
             CLC_MERGE(json_get(c, "metadata.annotations"), json_child(tmeta, "annotations"), hashes, defc));
    cJSON_Delete(hashes);
    cJSON_Delete(defc);
    cJSON *pspec = json_obj_ensure(tmpl, "spec");
    json_set_bool(pspec, "automountServiceAccountToken", 0);
    cJSON *ctld = slurmctld_container(c, cluster, replicas, !persist);
    cJSON *containers = cJSON_CreateArray();
    cJSON_AddItemToArray(containers, ctld);
    json_set(pspec, "containers", containers);
    cJSON *inits = cJSON_CreateArray();
    if (!persist) {
        char *dir = xasprintf("%s/%s", SCONF_SPOOL_DIR, cluster);
        cJSON_AddItemToArray(inits, statesave_container(ctld, dir));
        free(dir);
    }
    /* Always there: without inplaceReconfigure it is how what the NodeSets
     * add to slurm.conf reaches slurmctld (config_hash leaves it out). */
    cJSON_AddItemToArray(inits, reconfigure_container(c, ctld));
    cJSON_AddItemToArray(inits, logfile_container(json_get(spec, "logfile"), "/var/log/slurm/slurmctld.log"));
    json_set(pspec, "initContainers", inits);
    json_set(pspec, "securityContext", clc_security_context(CLC_SLURM_UID, 1));
    cJSON *vols = volumes(c);
    json_set(pspec, "volumes", vols);

    char *stsname = ctlb_name(name);
    cJSON *sts = new_object("apps/v1", "StatefulSet", stsname, c, labels_for(c, json_child(tmeta, "labels")),
                            CLC_MERGE(json_get(c, "metadata.annotations"), json_child(tmeta, "annotations")));
    cJSON *sspec = json_obj_ensure(sts, "spec");
    json_set_int(sspec, "replicas", replicas);
    json_set_int(sspec, "revisionHistoryLimit", 0);
    json_set(json_obj_ensure(sspec, "selector"), "matchLabels", clc_labels(CTLB_APP, name, NULL));
    char *svcname = ctlb_internal_service_name(name);
    json_set_str(sspec, "serviceName", svcname);
    free(svcname);

    /* statesave, per the table of docs/compat.md#persistence (the refused cases are handled). */
    cJSON *vct = NULL;
    if (persist && *claim) {
        cJSON *v = cJSON_CreateObject();
        json_set_str(v, "name", "statesave");
        json_set_str(json_obj_ensure(v, "persistentVolumeClaim"), "claimName", claim);
        cJSON_AddItemToArray(vols, v);
    } else if (persist) {
        cJSON *pvc = cJSON_CreateObject();
        json_set(pvc, "metadata", clc_metadata("statesave", cr_ns(c)));
        cJSON *pspec_pvc = cJSON_Duplicate(json_child(spec, "persistence"), 1);
        json_del(pspec_pvc, "enabled");
        json_del(pspec_pvc, "existingClaim");
        json_set(pvc, "spec", pspec_pvc);
        vct = cJSON_CreateArray();
        cJSON_AddItemToArray(vct, pvc);
    } else {
        cJSON_AddItemToArray(vols, clc_empty_dir("statesave", 0));
    }

    tmpl = pt_merge_template(tmpl, json_child(spec, "template"));
    json_set(json_obj_ensure(tmpl, "spec"), "affinity", affinity(c));
    json_set(sspec, "template", tmpl);
    if (vct)
        json_set(sspec, "volumeClaimTemplates", vct);

    *out = sts;
    free(stsname);
    free(cluster);
    cJSON_Delete(c);
    return 0;
}

/* ---- ServiceMonitor ----------------------------------------------------- */

static cJSON *endpoint(const char *path, const cJSON *interval, const cJSON *timeout)
{
    cJSON *e = cJSON_CreateObject();
    json_set_str(e, "path", path);
    json_set_str(e, "port", CTLB_APP);
    json_set_str(e, "scheme", "http");
    if (cJSON_IsString(interval) && *interval->valuestring)
        json_set_str(e, "interval", interval->valuestring);
    if (cJSON_IsString(timeout) && *timeout->valuestring)
        json_set_str(e, "scrapeTimeout", timeout->valuestring);
    return e;
}

static const cJSON *nonempty_or(const cJSON *v, const cJSON *dflt)
{
    return (cJSON_IsString(v) && *v->valuestring) ? v : dflt;
}

int ctlb_service_monitor(const cJSON *controller, cJSON **out, char **why)
{
    (void)why;
    *out = NULL;
    if (clc_is_external(controller) || !json_get_bool(controller, "spec.metrics.enabled", 0) ||
        !json_get_bool(controller, "spec.metrics.serviceMonitor.enabled", 0))
        return 0;
    cJSON *c = ctlb_defaults(controller);
    const cJSON *sm = json_get(c, "spec.metrics.serviceMonitor");
    char *name = ctlb_name(cr_name(c));
    cJSON *o = new_object("monitoring.coreos.com/v1", "ServiceMonitor", name, c,
                          labels_for(c, json_child(sm, "labels")),
                          CLC_MERGE(json_get(c, "metadata.annotations"), json_child(sm, "annotations")));
    cJSON *spec = json_obj_ensure(o, "spec");
    json_set(json_obj_ensure(spec, "selector"), "matchLabels", clc_labels(CTLB_APP, cr_name(c), NULL));
    cJSON *names = cJSON_CreateArray();
    cJSON_AddItemToArray(names, cJSON_CreateString(cr_ns(c)));
    json_set(json_obj_ensure(spec, "namespaceSelector"), "matchNames", names);
    const cJSON *interval = json_child(sm, "interval"), *timeout = json_child(sm, "scrapeTimeout");
    cJSON *eps = cJSON_CreateArray();
    const cJSON *user = json_child(sm, "endpoints");
    if (json_len(user) > 0) {
        for (const cJSON *u = user->child; u; u = u->next)
            cJSON_AddItemToArray(eps, endpoint(json_get_str_or(u, "path", ""),
                                               nonempty_or(json_child(u, "interval"), interval),
                                               nonempty_or(json_child(u, "scrapeTimeout"), timeout)));
    } else {
        static const char *const paths[] = {"/metrics/jobs", "/metrics/nodes", "/metrics/partitions",
                                            "/metrics/scheduler"};
        for (size_t i = 0; i < ARRAY_SIZE(paths); i++)
            cJSON_AddItemToArray(eps, endpoint(paths[i], interval, timeout));
    }
    json_set(spec, "endpoints", eps);
    *out = o;
    free(name);
    cJSON_Delete(c);
    return 0;
}

/* ---- Slurm versions ------------------------------------------------------ */

void ctlb_version_condition(const cJSON *controller, const char **status, const char **reason, char **message)
{
    *status = *reason = NULL;
    *message = NULL;
    if (clc_is_external(controller))
        return;
    const char *image = json_get_str_or(controller, "spec.slurmctld.image", "");
    int v = clc_image_slurm_version(image);
    if (v == 0) {
        *status = "Unknown";
        *reason = "VersionUnknown";
        *message = xasprintf("the tag of spec.slurmctld.image (%s) names no Slurm version; a cluster slurmop "
                             "deploys needs Slurm 23.11 or later (24.11 and 26.05 are tested)",
                             *image ? image : "unset");
    } else if (v < CTLB_MIN_DEPLOYED_VERSION) {
        *status = "False";
        *reason = "Unsupported";
        *message =
            xasprintf("Slurm %02d.%02d (the tag of spec.slurmctld.image) has no auth/slurm, which the "
                      "generated slurm.conf uses: a cluster slurmop deploys needs Slurm 23.11 or later; "
                      "an older Slurm works only as an external Controller (slurmop as its client)",
                      v / 100, v % 100);
    } else {
        *status = "True";
        *reason = "Supported";
        *message =
            xasprintf("Slurm %02d.%02d (the tag of spec.slurmctld.image); a cluster slurmop deploys needs "
                      "Slurm 23.11 or later (24.11 and 26.05 are tested)",
                      v / 100, v % 100);
    }
}
