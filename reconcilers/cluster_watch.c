#include "reconcilers/cluster_watch.h"

#include <stdio.h>
#include <string.h>

#include "core/json.h"
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

int cw_controller_uses_accounting(const cJSON *controller, const char *accounting)
{
    return valid(controller, accounting) && named(controller, "spec.accountingRef.name", accounting);
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

int cw_nodeset_affects(const cJSON *old_ns, const cJSON *new_ns, const char *out[2])
{
    const char *a = cw_controller_ref(old_ns), *b = cw_controller_ref(new_ns);
    int n = 0;
    out[0] = out[1] = NULL;
    if (old_ns == NULL || new_ns == NULL) {
        const char *c = old_ns ? a : b;
        if (c)
            out[n++] = c;
        return n;
    }
    if (!str_eq(a, b)) {
        if (a)
            out[n++] = a;
        if (b)
            out[n++] = b;
        return n;
    }
    if (b == NULL)
        return 0;
    if (!same_json(json_get(old_ns, "spec.partition"), json_get(new_ns, "spec.partition")) ||
        !str_eq(json_get_str(old_ns, "spec.template.spec.hostname"),
                json_get_str(new_ns, "spec.template.spec.hostname")))
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

int cw_token_uses_secret(const cJSON *token, const char *secret)
{
    if (!valid(token, secret))
        return 0;
    tokb_settings s;
    tokb_settings_get(token, &s, NULL);
    if (s.jwt_ref && named(s.jwt_ref, "name", secret))
        return 1;
    return strcmp(s.secret_name, secret) == 0;
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
