#include "reconcilers/tenancy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/mem.h"
#include "reconcilers/cluster_common.h"
#include "reconcilers/cluster_watch.h"
#include "reconcilers/partconf.h"

static int listed(const char *list, const char *ns)
{
    size_t n = strlen(ns);
    const char *p = list;
    while (*p) {
        while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n')
            p++;
        const char *start = p;
        while (*p && *p != ',' && *p != ' ' && *p != '\t' && *p != '\n')
            p++;
        size_t len = (size_t)(p - start);
        if ((len == 1 && *start == '*') || (len == n && len > 0 && memcmp(start, ns, n) == 0))
            return 1;
    }
    return 0;
}

int tnc_admits(const cJSON *obj, const char *ns)
{
    if (obj == NULL || ns == NULL || *ns == '\0')
        return 0;
    const char *own = json_get_str(obj, "metadata.namespace");
    if (own && strcmp(own, ns) == 0)
        return 1;
    const char *list = clc_str(json_get(obj, "metadata.annotations"), TNC_ANN_ALLOWED_NAMESPACES);
    return list != NULL && listed(list, ns);
}

char *tnc_refused(const char *field, const char *kind, const char *ns, const char *name, const char *from_ns)
{
    return xasprintf("%s: %s %s/%s cannot be used from namespace %s: it is not there or does not admit this "
                     "namespace (its owner lets namespaces join with the annotation %s: \"%s\" on the %s)",
                     field, kind, ns, name, from_ns, TNC_ANN_ALLOWED_NAMESPACES, from_ns, kind);
}

static int owned_by(const cJSON *obj, const char *uid)
{
    const cJSON *refs = json_get(obj, "metadata.ownerReferences");
    if (!cJSON_IsArray(refs) || uid == NULL || *uid == '\0')
        return 0;
    for (const cJSON *r = refs->child; r; r = r->next)
        if (json_get_bool(r, "controller", 0) && strcmp(json_get_str_or(r, "kind", ""), "Controller") == 0 &&
            strcmp(json_get_str_or(r, "uid", ""), uid) == 0)
            return 1;
    return 0;
}

int tnc_vouches(const cJSON *controller, const char *token_ns, const char *secret, const char *key,
                const cJSON *key_secret)
{
    if (controller == NULL || secret == NULL || *secret == '\0' || key == NULL ||
        !tnc_admits(controller, token_ns))
        return 0;
    const cJSON *ref = clc_jwt_ref(json_child(controller, "spec"));
    if (ref && strcmp(json_get_str_or(ref, "name", ""), secret) == 0 &&
        strcmp(json_get_str_or(ref, "key", ""), key) == 0)
        return 1;
    if (key_secret == NULL)
        return 0;
    const char *cns = json_get_str_or(controller, "metadata.namespace", "");
    return strcmp(json_get_str_or(key_secret, "metadata.namespace", cns), cns) == 0 &&
           owned_by(key_secret, json_get_str(controller, "metadata.uid"));
}

char *tnc_key_refused(const char *token_ns, const char *key_ns, const char *secret, const char *key,
                      const char *why_same)
{
    if (token_ns && key_ns && strcmp(token_ns, key_ns) == 0)
        return xasprintf(
            "spec.jwtKeyRef: Secret %s (key %s) is not a JWT key slurmop signs with: %s (a Token "
            "signs only with the JWT key of a Controller of its namespace, jwtKeyRef or "
            "jwtHs256KeyRef, at least %d bytes long)",
            secret, key, why_same ? why_same : "refused", TNC_JWT_KEY_MIN_BYTES);
    return xasprintf(
        "spec.jwtKeyRef: Secret %s/%s (key %s) cannot be used from namespace %s: slurmop signs "
        "only with the JWT key (at least %d bytes) of a Controller of %s that admits this namespace "
        "(its owner lets namespaces join with the annotation %s: \"%s\" on the Controller)",
        key_ns ? key_ns : "", secret, key, token_ns ? token_ns : "", TNC_JWT_KEY_MIN_BYTES,
        key_ns ? key_ns : "", TNC_ANN_ALLOWED_NAMESPACES, token_ns ? token_ns : "");
}

int tnc_nodeset_admitted(const cJSON *nodeset, const cJSON *controller)
{
    const char *own = json_get_str(nodeset, "metadata.namespace");
    const char *ctlns = cw_ref_ns(nodeset, "spec.controllerRef");
    if (own && ctlns && strcmp(own, ctlns) == 0)
        return 1;
    return tnc_admits(controller, own);
}

int tnc_controller_slurm_version(const cJSON *controller)
{
    const char *image = json_get_str(controller, "spec.slurmctld.image");
    return image ? clc_image_slurm_version(image) : 0;
}

int tnc_nodeset_conf_check(const cJSON *nodeset, int slurm_version, char *why, size_t size)
{
    char nb[256], w[384];
    if (pcf_check_name(clc_nodeset_name(nodeset, nb, sizeof(nb)), w, sizeof(w)) != 0) {
        snprintf(why, size, "spec.template.spec.hostname: %s", w);
        return -1;
    }
    if (json_get_bool(nodeset, "spec.partition.enabled", 0) &&
        pcf_check(json_get_str(nodeset, "spec.partition.config"), slurm_version, w, sizeof(w)) != 0) {
        snprintf(why, size,
                 "spec.partition.config: %s; the partition is written without it until it is fixed", w);
        return -1;
    }
    return 0;
}

static void append(char **out, const char *m)
{
    char *both = *out ? xasprintf("%s; %s", *out, m) : xstrdup(m);
    free(*out);
    *out = both;
}

char *tnc_nodeset_refusal(const cJSON *nodeset, const cJSON *controller, int allow_taints)
{
    char *out = NULL;
    const char *own = json_get_str_or(nodeset, "metadata.namespace", "");
    const char *name = json_get_str_or(nodeset, "spec.controllerRef.name", "");
    const char *ctlns = cw_ref_ns(nodeset, "spec.controllerRef");
    if (*name && ctlns && !tnc_nodeset_admitted(nodeset, controller))
        out = tnc_refused("spec.controllerRef", "Controller", ctlns, name, own);
    char why[512];
    if (tnc_nodeset_conf_check(nodeset, tnc_controller_slurm_version(controller), why, sizeof(why)) != 0)
        append(&out, why);
    if (!allow_taints && json_get_bool(nodeset, "spec.taintKubeNodes", 0))
        append(&out, "spec.taintKubeNodes: tainting Kubernetes Nodes (cluster-scoped objects) is off in this "
                     "installation; an administrator turns it on with the operator flag --allow-node-taints "
                     "(chart value allowNodeTaints), or remove the field");
    return out;
}
