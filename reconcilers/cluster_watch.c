#include "reconcilers/cluster_watch.h"

#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "reconcilers/cluster_common.h"
#include "reconcilers/slurmconf.h"
#include "reconcilers/token_build.h"

static int named(const cJSON *o, const char *path, const char *name)
{
    const char *v = json_get_str(o, path);
    return v && *v && strcmp(v, name) == 0;
}

static int valid(const cJSON *o, const char *name)
{
    return o != NULL && name != NULL && *name != '\0';
}

const char *cw_controller_ref(const cJSON *cr)
{
    const char *v = json_get_str(cr, "spec.controllerRef.name");
    return v && *v ? v : NULL;
}

const char *cw_ref_ns(const cJSON *cr, const char *ref)
{
    char path[64];
    if (cr == NULL || ref == NULL || snprintf(path, sizeof(path), "%s.namespace", ref) >= (int)sizeof(path))
        return NULL;
    const char *v = json_get_str(cr, path);
    if (v && *v)
        return v;
    v = json_get_str(cr, "metadata.namespace");
    return v && *v ? v : NULL;
}

int cw_ref_is(const cJSON *cr, const char *ref, const char *ns, const char *name)
{
    char path[64];
    if (cr == NULL || ref == NULL || ns == NULL || name == NULL || *name == '\0' ||
        snprintf(path, sizeof(path), "%s.name", ref) >= (int)sizeof(path))
        return 0;
    const char *rns = cw_ref_ns(cr, ref);
    return named(cr, path, name) && rns && strcmp(rns, ns) == 0;
}

static int among(const char *ns, const char *const *namespaces, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (namespaces[i] && strcmp(namespaces[i], ns) == 0)
            return 1;
    return 0;
}

const char *cw_ref_outside(const cJSON *cr, const char *const *namespaces, size_t n, const char **ns)
{
    static const char *const refs[] = {"spec.controllerRef", "spec.accountingRef"};
    *ns = NULL;
    if (cr == NULL || n == 0)
        return NULL;
    for (size_t i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) {
        char path[64];
        snprintf(path, sizeof(path), "%s.name", refs[i]);
        const char *name = json_get_str(cr, path), *rns = cw_ref_ns(cr, refs[i]);
        if (name && *name && rns && !among(rns, namespaces, n)) {
            *ns = rns;
            return refs[i];
        }
    }
    const cJSON *spec = json_child(cr, "spec");
    const cJSON *jwt =
        json_child(spec, "jwtKeyRef") ? json_child(spec, "jwtKeyRef") : json_child(spec, "jwtHs256KeyRef");
    if (jwt && strcmp(json_get_str_or(cr, "kind", ""), "Token") == 0) {
        const char *kns = cw_token_key_ns(cr);
        if (kns && !among(kns, namespaces, n)) {
            *ns = kns;
            return json_child(spec, "jwtKeyRef") ? "spec.jwtKeyRef" : "spec.jwtHs256KeyRef";
        }
    }
    return NULL;
}

static int uses_key_secrets(const cJSON *cr, const char *secret)
{
    return named(cr, "spec.slurmKeyRef.name", secret) || named(cr, "spec.jwtKeyRef.name", secret) ||
           named(cr, "spec.jwtHs256KeyRef.name", secret);
}

int cw_controller_uses_secret(const cJSON *controller, const char *secret)
{
    return valid(controller, secret) && uses_key_secrets(controller, secret);
}

static int in_refs(const cJSON *list, const char *name)
{
    if (!cJSON_IsArray(list))
        return 0;
    for (const cJSON *r = list->child; r; r = r->next)
        if (named(r, "name", name))
            return 1;
    return 0;
}

int cw_controller_uses_configmap(const cJSON *controller, const char *configmap)
{
    static const char *const lists[] = {"configFileRefs", "prologScriptRefs", "epilogScriptRefs",
                                        "prologSlurmctldScriptRefs", "epilogSlurmctldScriptRefs"};
    if (!valid(controller, configmap))
        return 0;
    const cJSON *spec = json_child(controller, "spec");
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
        if (in_refs(json_child(spec, lists[i]), configmap))
            return 1;
    return named(spec, "jwksKeyRef.name", configmap);
}

int cw_controller_uses_pvc(const cJSON *controller, const char *pvc)
{
    return valid(controller, pvc) && named(controller, "spec.persistence.existingClaim", pvc);
}

int cw_controller_uses_accounting(const cJSON *controller, const char *ns, const char *accounting)
{
    return valid(controller, accounting) && cw_ref_is(controller, "spec.accountingRef", ns, accounting);
}

static int str_eq(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

static int same_json(const cJSON *a, const cJSON *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return json_equal(a, b);
}

static cw_ref ctl_of(const cJSON *nodeset)
{
    cw_ref r = {NULL, cw_controller_ref(nodeset)};
    if (r.name)
        r.ns = cw_ref_ns(nodeset, "spec.controllerRef");
    if (r.ns == NULL)
        r.name = NULL;
    return r;
}

int cw_nodeset_affects(const cJSON *old_ns, const cJSON *new_ns, cw_ref out[2])
{
    cw_ref a = ctl_of(old_ns), b = ctl_of(new_ns);
    int n = 0;
    out[0] = out[1] = (cw_ref){NULL, NULL};
    if (old_ns == NULL || new_ns == NULL) {
        cw_ref c = old_ns ? a : b;
        if (c.name)
            out[n++] = c;
        return n;
    }
    if (!str_eq(a.name, b.name) || !str_eq(a.ns, b.ns)) {
        if (a.name)
            out[n++] = a;
        if (b.name)
            out[n++] = b;
        return n;
    }
    if (b.name == NULL)
        return 0;
    if (!same_json(json_get(old_ns, "spec.partition"), json_get(new_ns, "spec.partition")) ||
        !str_eq(json_get_str(old_ns, "spec.template.spec.hostname"),
                json_get_str(new_ns, "spec.template.spec.hostname")) ||
        sconf_nodeset_fleet(old_ns) != sconf_nodeset_fleet(new_ns))
        out[n++] = b;
    return n;
}

int cw_accounting_uses_secret(const cJSON *accounting, const char *secret)
{
    return valid(accounting, secret) && (uses_key_secrets(accounting, secret) ||
                                         named(accounting, "spec.storageConfig.passwordKeyRef.name", secret));
}

int cw_accounting_uses_configmap(const cJSON *accounting, const char *configmap)
{
    return valid(accounting, configmap) && named(accounting, "spec.jwksKeyRef.name", configmap);
}

int cw_loginset_uses_secret(const cJSON *loginset, const cJSON *controller, const char *secret)
{
    if (!valid(loginset, secret))
        return 0;
    if (named(loginset, "spec.sssdConfRef.name", secret))
        return 1;
    return controller != NULL && uses_key_secrets(controller, secret);
}

int cw_restapi_uses_secret(const cJSON *restapi, const cJSON *controller, const char *secret)
{
    return valid(restapi, secret) && controller != NULL && uses_key_secrets(controller, secret);
}

const char *cw_token_key_ns(const cJSON *token)
{
    const char *v = json_get_str(clc_jwt_ref(json_child(token, "spec")), "namespace");
    if (v && *v)
        return v;
    v = json_get_str(token, "metadata.namespace");
    return v && *v ? v : NULL;
}

int cw_token_uses_secret(const cJSON *token, const char *ns, const char *secret)
{
    if (!valid(token, secret) || ns == NULL)
        return 0;
    tokb_settings s;
    tokb_settings_get(token, &s, NULL);
    const char *kns = cw_token_key_ns(token);
    if (s.jwt_ref && named(s.jwt_ref, "name", secret) && kns && strcmp(kns, ns) == 0)
        return 1;
    return strcmp(s.secret_name, secret) == 0 &&
           strcmp(json_get_str_or(token, "metadata.namespace", ""), ns) == 0;
}

int cw_pod_ordinal(const char *pod, const char *sts)
{
    if (pod == NULL || sts == NULL)
        return -1;
    size_t n = strlen(sts);
    if (strncmp(pod, sts, n) != 0 || pod[n] != '-')
        return -1;
    const char *d = pod + n + 1;
    if (*d == '\0' || (d[0] == '0' && d[1] != '\0'))
        return -1;
    long v = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9' || v > 100000000L)
            return -1;
        v = v * 10 + (*d - '0');
    }
    return (int)v;
}
