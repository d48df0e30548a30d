#include "reconcilers/loginset_build.h"

#include <stdlib.h>
#include <string.h>

#include "core/crypto.h"
#include "core/err.h"
#include "core/json.h"
#include "reconcilers/podtemplate.h"
#include "reconcilers/slurmconf.h"

/* initconf: copy the projected Slurm files into an emptyDir with the
 * ownership and modes sackd wants; projected and emptyDir volumes cannot
 * be given an owner (kubernetes#81089). The top-level glob skips the
 * kubelet's "..data" entries and cp -L follows its symlinks. */
static const char initconf_script[] = "set -eu\n"
                                      "src=/mnt/slurm\n"
                                      "dst=/mnt/etc/slurm\n"
                                      "mkdir -p \"$dst\"\n"
                                      "for f in \"$src\"/*.conf \"$src\"/*.key; do\n"
                                      "  [ -e \"$f\" ] || continue\n"
                                      "  cp -vL \"$f\" \"$dst/\"\n"
                                      "done\n"
                                      "chown -R 401:401 \"$dst\"\n"
                                      "for f in \"$dst\"/*; do\n"
                                      "  [ -e \"$f\" ] || continue\n"
                                      "  case \"$f\" in\n"
                                      "  *.key|*/slurmdbd.conf) chmod 600 \"$f\" ;;\n"
                                      "  *) chmod 644 \"$f\" ;;\n"
                                      "  esac\n"
                                      "done\n"
                                      "ls -lA \"$dst\"\n";

cJSON *lsb_defaults(const cJSON *loginset)
{
    cJSON *l = cJSON_Duplicate(loginset, 1);
    if (l == NULL)
        l = cJSON_CreateObject();
    cJSON *spec = json_obj_ensure(l, "spec");
    if (!cJSON_IsNumber(json_child(spec, "replicas")))
        json_set_int(spec, "replicas", 1);
    return l;
}

char *lsb_host_keys_name(const char *loginset)
{
    return xasprintf("%s-ssh-host-keys", loginset);
}

char *lsb_ssh_config_name(const char *loginset)
{
    return xasprintf("%s-ssh-config", loginset);
}

static const char *cr_name(const cJSON *c)
{
    return json_get_str_or(c, "metadata.name", "");
}

static cJSON *labels_of(const cJSON *l, const cJSON *extra)
{
    return clc_labels_for(l, extra, LSB_APP, LSB_COMPONENT);
}

static void put_b64(cJSON *data, const char *key, const char *value)
{
    char *enc = base64_encode(value, strlen(value));
    json_set_str(data, key, enc);
    free(enc);
}

int lsb_host_keys_secret(const cJSON *loginset, const lsb_host_keys *keys, cJSON **out, char **why)
{
    *out = NULL;
    if (keys == NULL || !keys->rsa.private_key || !keys->rsa.public_key || !keys->ecdsa.private_key ||
        !keys->ecdsa.public_key)
        return clc_fail(why, OP_EINVAL, "SSH host keys: the RSA and ECDSA key pairs are required");
    cJSON *l = lsb_defaults(loginset);
    char *name = lsb_host_keys_name(cr_name(l));
    cJSON *s = clc_new_object("v1", "Secret", name, l, LSB_KIND, labels_of(l, NULL),
                              CLC_MERGE(json_get(l, "metadata.annotations")));
    free(name);
    json_set_bool(s, "immutable", 1);
    cJSON *data = json_obj_ensure(s, "data");
    put_b64(data, LSB_ECDSA_KEY, keys->ecdsa.private_key);
    put_b64(data, LSB_ECDSA_KEY ".pub", keys->ecdsa.public_key);
    if (keys->ed25519.private_key && keys->ed25519.public_key) {
        put_b64(data, LSB_ED25519_KEY, keys->ed25519.private_key);
        put_b64(data, LSB_ED25519_KEY ".pub", keys->ed25519.public_key);
    }
    put_b64(data, LSB_RSA_KEY, keys->rsa.private_key);
    put_b64(data, LSB_RSA_KEY ".pub", keys->rsa.public_key);
    clc_sort_keys(data);
    *out = s;
    cJSON_Delete(l);
    return 0;
}

int lsb_ssh_config(const cJSON *loginset, cJSON **out, char **why)
{
    (void)why;
    cJSON *l = lsb_defaults(loginset);
    char *name = lsb_ssh_config_name(cr_name(l));
    cJSON *cm = clc_new_object("v1", "ConfigMap", name, l, LSB_KIND, labels_of(l, NULL),
                               CLC_MERGE(json_get(l, "metadata.annotations")));
    free(name);
    cJSON *data = json_obj_ensure(cm, "data");
    char *keys = sconf_authorized_keys(json_get_str_or(l, "spec.rootSshAuthorizedKeys", ""));
    char *sshd = sconf_login_sshd_config(json_get_str_or(l, "spec.extraSshdConfig", ""));
    json_set_str(data, "authorized_keys", keys);
    json_set_str(data, "sshd_config", sshd);
    free(keys);
    free(sshd);
    *out = cm;
    cJSON_Delete(l);
    return 0;
}

int lsb_service(const cJSON *loginset, cJSON **out, char **why)
{
    *out = NULL;
    cJSON *l = lsb_defaults(loginset);
    const cJSON *svc = json_get(l, "spec.service");
    clc_service_opts o = {
        .name = cr_name(l),
        .ns = json_get_str_or(l, "metadata.namespace", ""),
        .labels = labels_of(l, json_get(svc, "metadata.labels")),
        .annotations = CLC_MERGE(json_get(l, "metadata.annotations"), json_get(svc, "metadata.annotations")),
        .user = svc,
        .selector = clc_labels(LSB_APP, cr_name(l), NULL),
        .port_name = LSB_APP,
        .default_port = CLC_LOGIN_PORT,
        .use_node_port = 1,
    };
    int rc = clc_service(&o, out, why);
    if (rc == 0)
        clc_set_controller_ref(*out, LSB_KIND, l);
    cJSON_Delete(l);
    return rc;
}

static cJSON *projected(const char *name, cJSON *source)
{
    cJSON *v = cJSON_CreateObject();
    json_set_str(v, "name", name);
    cJSON *p = json_obj_ensure(v, "projected");
    json_set_int(p, "defaultMode", 0600);
    cJSON *src = cJSON_CreateArray();
    cJSON_AddItemToArray(src, source);
    json_set(p, "sources", src);
    return v;
}

static const char *const host_key_files[] = {LSB_RSA_KEY, LSB_ED25519_KEY, LSB_ECDSA_KEY};

static int has_key(const cJSON *secret, const char *key)
{
    return json_child(json_child(secret, "data"), key) != NULL;
}

static cJSON *volumes(const cJSON *l, const cJSON *ctl, const cJSON *host_keys)
{
    cJSON *vols = cJSON_CreateArray();
    cJSON_AddItemToArray(vols, clc_empty_dir("slurm-etc", 1));
    cJSON_AddItemToArray(vols, clc_empty_dir("sackd-dir", 1));
    cJSON_AddItemToArray(
        vols, projected("slurm-config", clc_secret_projection(
                                            json_get_str_or(ctl, "spec.slurmKeyRef.name", ""),
                                            json_get_str_or(ctl, "spec.slurmKeyRef.key", ""), "slurm.key")));
    /* Host keys: private 0600, public 0644. */
    char *hk = lsb_host_keys_name(cr_name(l));
    cJSON *ps = cJSON_CreateObject();
    cJSON *sec = json_obj_ensure(ps, "secret");
    json_set_str(sec, "name", hk);
    cJSON *items = cJSON_CreateArray();
    for (size_t i = 0; i < ARRAY_SIZE(host_key_files); i++) {
        const char *f = host_key_files[i];
        if (strcmp(f, LSB_ED25519_KEY) == 0 && !has_key(host_keys, f))
            continue;
        char *pub = xasprintf("%s.pub", f);
        cJSON_AddItemToArray(items, clc_key_to_path(f, f, 0600));
        cJSON_AddItemToArray(items, clc_key_to_path(pub, pub, 0644));
        free(pub);
    }
    json_set(sec, "items", items);
    cJSON_AddItemToArray(vols, projected("ssh-host-keys", ps));
    free(hk);

    char *sc = lsb_ssh_config_name(cr_name(l));
    cJSON *pc = cJSON_CreateObject();
    cJSON *cmp = json_obj_ensure(pc, "configMap");
    json_set_str(cmp, "name", sc);
    items = cJSON_CreateArray();
    cJSON_AddItemToArray(items, clc_key_to_path("sshd_config", "sshd_config", 0600));
    cJSON_AddItemToArray(items, clc_key_to_path("authorized_keys", "authorized_keys", 0600));
    json_set(cmp, "items", items);
    cJSON_AddItemToArray(vols, projected("ssh-config", pc));
    free(sc);

    cJSON *pq = cJSON_CreateObject();
    cJSON *ss = json_obj_ensure(pq, "secret");
    json_set_str(ss, "name", json_get_str_or(l, "spec.sssdConfRef.name", ""));
    items = cJSON_CreateArray();
    cJSON_AddItemToArray(items,
                         clc_key_to_path(json_get_str_or(l, "spec.sssdConfRef.key", ""), "sssd.conf", 0600));
    json_set(ss, "items", items);
    cJSON_AddItemToArray(vols, projected("sssd-conf", pq));
    return vols;
}

static int user_declares_login_port(const cJSON *user)
{
    const cJSON *ports = json_child(user, "ports");
    if (cJSON_IsArray(ports))
        for (const cJSON *p = ports->child; p; p = p->next)
            if (strcmp(json_get_str_or(p, "name", ""), LSB_APP) == 0)
                return 1;
    return 0;
}

static cJSON *login_container(const cJSON *l, const char *sackd_options, const cJSON *host_keys)
{
    const cJSON *user = json_get(l, "spec.login");
    cJSON *k = cJSON_CreateObject();
    json_set_str(k, "name", LSB_APP);
    cJSON *env = cJSON_CreateArray();
    cJSON *e = cJSON_CreateObject();
    json_set_str(e, "name", "SACKD_OPTIONS");
    json_set_str(e, "value", sackd_options);
    cJSON_AddItemToArray(env, e);
    json_set(k, "env", env);
    /* A port named "login" given by the user replaces ours rather than
     * being merged next to it under the same name. */
    if (!user_declares_login_port(user)) {
        cJSON *ports = cJSON_CreateArray();
        cJSON *p = cJSON_CreateObject();
        json_set_str(p, "name", LSB_APP);
        json_set_int(p, "containerPort", CLC_LOGIN_PORT);
        json_set_str(p, "protocol", "TCP");
        cJSON_AddItemToArray(ports, p);
        json_set(k, "ports", ports);
    }
    cJSON *exec = cJSON_CreateObject();
    cJSON *cmd = cJSON_CreateArray();
    cJSON_AddItemToArray(cmd, cJSON_CreateString("test"));
    cJSON_AddItemToArray(cmd, cJSON_CreateString("-S"));
    cJSON_AddItemToArray(cmd, cJSON_CreateString("/run/slurm/sack.socket"));
    json_set(exec, "command", cmd);
    exec->string = xstrdup("exec");
    json_set(k, "readinessProbe", clc_probe(exec, 0, 0));
    cJSON *m = cJSON_CreateArray();
    cJSON_AddItemToArray(m, clc_mount("slurm-etc", SCONF_ETC_DIR, NULL, 1));
    cJSON_AddItemToArray(m, clc_mount("sackd-dir", "/run/slurm", NULL, 0));
    for (size_t i = 0; i < ARRAY_SIZE(host_key_files); i++) {
        const char *f = host_key_files[i];
        if (strcmp(f, LSB_ED25519_KEY) == 0 && !has_key(host_keys, f))
            continue;
        char *pub = xasprintf("%s.pub", f);
        char *path = xasprintf("/etc/ssh/%s", f);
        char *pubpath = xasprintf("/etc/ssh/%s", pub);
        cJSON_AddItemToArray(m, clc_mount("ssh-host-keys", path, f, 1));
        cJSON_AddItemToArray(m, clc_mount("ssh-host-keys", pubpath, pub, 1));
        free(pub);
        free(path);
        free(pubpath);
    }
    cJSON_AddItemToArray(m, clc_mount("ssh-config", "/etc/ssh/sshd_config", "sshd_config", 1));
    cJSON_AddItemToArray(m, clc_mount("ssh-config", "/root/.ssh/authorized_keys", "authorized_keys", 1));
    cJSON_AddItemToArray(m, clc_mount("sssd-conf", "/etc/sssd/sssd.conf", "sssd.conf", 1));
    json_set(k, "volumeMounts", m);
    return pt_merge_container(k, user);
}

static cJSON *initconf_container(const cJSON *l)
{
    cJSON *k = cJSON_CreateObject();
    json_set_str(k, "name", "initconf");
    cJSON *env = cJSON_CreateArray();
    cJSON *e = cJSON_CreateObject();
    json_set_str(e, "name", "SLURM_USER");
    json_set_str(e, "value", CLC_SLURM_USER);
    cJSON_AddItemToArray(env, e);
    json_set(k, "env", env);
    json_set(k, "command", clc_sh_command(initconf_script));
    cJSON *m = cJSON_CreateArray();
    cJSON_AddItemToArray(m, clc_mount("slurm-etc", "/mnt/etc/slurm", NULL, 0));
    cJSON_AddItemToArray(m, clc_mount("slurm-config", "/mnt/slurm", NULL, 1));
    json_set(k, "volumeMounts", m);
    return pt_merge_container(k, json_get(l, "spec.initconf"));
}

int lsb_deployment(const cJSON *loginset, const cJSON *host_keys, const cJSON *ssh_config, const clc_env *env,
                   cJSON **out, char **why)
{
    *out = NULL;
    const char *ctlname = json_get_str_or(loginset, "spec.controllerRef.name", "");
    const cJSON *ctl = clc_get(env, "Controller", ctlname);
    if (ctl == NULL)
        return clc_fail(why, OP_ENOTFOUND, "Controller %s (controllerRef) not found", ctlname);
    if (*json_get_str_or(ctl, "spec.slurmKeyRef.name", "") == '\0')
        return clc_fail(why, OP_EINVAL, "Controller %s has no slurmKeyRef, sackd cannot authenticate",
                        ctlname);

    cJSON *l = lsb_defaults(loginset);
    const cJSON *spec = json_child(l, "spec");
    const cJSON *tmeta = json_get(spec, "template.metadata");
    const char *name = cr_name(l);
    const char *ns = json_get_str_or(l, "metadata.namespace", "");

    if (host_keys == NULL) {
        char *hk = lsb_host_keys_name(name);
        host_keys = clc_get(env, "Secret", hk);
        free(hk);
    }
    if (ssh_config == NULL) {
        char *sc = lsb_ssh_config_name(name);
        ssh_config = clc_get(env, "ConfigMap", sc);
        free(sc);
    }
    char h_keys[65], h_sshd[65], h_sssd[65];
    clc_hash_data(host_keys, 1, h_keys);
    clc_hash_str(clc_str(json_child(ssh_config, "data"), "sshd_config"), h_sshd);
    clc_hash_secret_key(clc_get(env, "Secret", json_get_str(spec, "sssdConfRef.name")),
                        json_get_str(spec, "sssdConfRef.key"), h_sssd);
    cJSON *ann = clc_strmap(CLC_ANN_SSH_HOST_KEYS_HASH, h_keys, CLC_ANN_SSHD_CONF_HASH, h_sshd,
                            CLC_ANN_SSSD_CONF_HASH, h_sssd, CLC_ANN_DEFAULT_CONTAINER, LSB_APP, NULL);

    char *sackd;
    if (clc_is_external(ctl))
        sackd = xasprintf("--conf-server %s:%lld", json_get_str_or(ctl, "spec.externalConfig.host", ""),
                          json_get_int(ctl, "spec.externalConfig.port", 0));
    else
        sackd = xasprintf("--conf-server %s-controller.%s:%d", ctlname,
                          json_get_str_or(ctl, "metadata.namespace", ns),
                          CLC_SLURMCTLD_PORT); /* the Controller's */

    cJSON *tmpl = cJSON_CreateObject();
    cJSON *pmeta = json_obj_ensure(tmpl, "metadata");
    json_set(pmeta, "labels", labels_of(l, json_child(tmeta, "labels")));
    json_set(pmeta, "annotations",
             CLC_MERGE(json_get(l, "metadata.annotations"), json_child(tmeta, "annotations"), ann));
    cJSON_Delete(ann);
    cJSON *pspec = json_obj_ensure(tmpl, "spec");
    json_set_bool(pspec, "automountServiceAccountToken", 0);
    json_set_bool(pspec, "enableServiceLinks", 0);
    cJSON *containers = cJSON_CreateArray();
    cJSON_AddItemToArray(containers, login_container(l, sackd, host_keys));
    json_set(pspec, "containers", containers);
    cJSON *inits = cJSON_CreateArray();
    cJSON_AddItemToArray(inits, initconf_container(l));
    json_set(pspec, "initContainers", inits);
    cJSON *dns = json_obj_ensure(pspec, "dnsConfig");
    cJSON *searches = cJSON_CreateArray();
    char *search = xasprintf("slurm-workers-%s.%s.svc.%s", ctlname, ns, clc_cluster_domain(env));
    cJSON_AddItemToArray(searches, cJSON_CreateString(search));
    free(search);
    json_set(dns, "searches", searches);
    json_set(pspec, "volumes", volumes(l, ctl, host_keys));
    tmpl = pt_merge_template(tmpl, json_child(spec, "template"));
    free(sackd);

    cJSON *d =
        clc_new_object("apps/v1", "Deployment", name, l, LSB_KIND, labels_of(l, json_child(tmeta, "labels")),
                       CLC_MERGE(json_get(l, "metadata.annotations"), json_child(tmeta, "annotations")));
    cJSON *dspec = json_obj_ensure(d, "spec");
    json_set_int(dspec, "replicas", json_get_int(spec, "replicas", 1));
    json_set_int(dspec, "revisionHistoryLimit", 0);
    const cJSON *strategy = json_child(spec, "strategy");
    if (cJSON_IsObject(strategy))
        json_set(dspec, "strategy", cJSON_Duplicate(strategy, 1));
    json_set(json_obj_ensure(dspec, "selector"), "matchLabels", clc_labels(LSB_APP, name, NULL));
    json_set(dspec, "template", tmpl);
    *out = d;
    cJSON_Delete(l);
    return 0;
}
