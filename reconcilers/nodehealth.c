/* nodehealth: see nodehealth.h. */
#include "reconcilers/nodehealth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/mem.h"
#include "core/rfc3339.h"
#include "reconcilers/nodeset_slurm.h"
#include "watchers/kinds.h"

void nh_config_init(nh_config *c)
{
    memset(c, 0, sizeof(*c));
    c->max_share_pct = NH_DEFAULT_SHARE_PCT;
}

void nh_config_free(nh_config *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n_conds; i++) {
        free(c->conds[i].key);
        free(c->conds[i].status);
    }
    for (size_t i = 0; i < c->n_taints; i++)
        free(c->taints[i].key);
    nh_config_init(c);
}

/* A condition type or taint key: what Kubernetes admits there, loosely (a
 * qualified name, '/' and '.' included); no ',' or '=' so that the Nodes
 * store's list of types stays unambiguous. */
static int valid_key(const char *s, size_t n)
{
    if (n == 0 || n > 253)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
              ch == '_' || ch == '.' || ch == '/'))
            return 0;
    }
    return 1;
}

int nh_add_condition(nh_config *c, const char *arg, char *err, size_t errlen)
{
    const char *eq = strchr(arg ? arg : "", '=');
    size_t klen = eq ? (size_t)(eq - arg) : strlen(arg ? arg : "");
    if (!arg || !valid_key(arg, klen) || (eq && !valid_key(eq + 1, strlen(eq + 1)))) {
        snprintf(err, errlen, "want TYPE or TYPE=STATUS (letters, digits, '-', '_', '.', '/'), got \"%s\"",
                 arg ? arg : "");
        return OP_EINVAL;
    }
    if (c->n_conds == NH_MAX_RULES) {
        snprintf(err, errlen, "at most %d conditions", NH_MAX_RULES);
        return OP_ETOOBIG;
    }
    c->conds[c->n_conds].key = xstrndup(arg, klen);
    c->conds[c->n_conds].status = xstrdup(eq ? eq + 1 : "True");
    c->n_conds++;
    return 0;
}

int nh_add_taint(nh_config *c, const char *arg, char *err, size_t errlen)
{
    if (!arg || !valid_key(arg, strlen(arg))) {
        snprintf(err, errlen, "want a taint key (letters, digits, '-', '_', '.', '/'), got \"%s\"",
                 arg ? arg : "");
        return OP_EINVAL;
    }
    if (c->n_taints == NH_MAX_RULES) {
        snprintf(err, errlen, "at most %d taints", NH_MAX_RULES);
        return OP_ETOOBIG;
    }
    c->taints[c->n_taints].key = xstrdup(arg);
    c->n_taints++;
    return 0;
}

int nh_set_share(nh_config *c, const char *arg, char *err, size_t errlen)
{
    char *end = NULL;
    unsigned long v = strtoul(arg ? arg : "", &end, 10);
    if (!arg || end == arg || (*end && strcmp(end, "%") != 0) || v < 1 || v > 100) {
        snprintf(err, errlen, "want a percentage between 1 and 100, got \"%s\"", arg ? arg : "");
        return OP_EINVAL;
    }
    c->max_share_pct = (unsigned)v;
    return 0;
}

int nh_enabled(const nh_config *c)
{
    return c && (c->n_conds || c->n_taints);
}

char *nh_condition_types(const nh_config *c)
{
    if (c == NULL || c->n_conds == 0)
        return NULL;
    size_t len = 1;
    for (size_t i = 0; i < c->n_conds; i++)
        len += strlen(c->conds[i].key) + 1;
    char *out = xmalloc(len), *p = out;
    for (size_t i = 0; i < c->n_conds; i++)
        p += sprintf(p, "%s%s", i ? "," : "", c->conds[i].key);
    *p = '\0';
    return out;
}

static int64_t time_of(const char *s)
{
    int64_t t = 0;
    if (s && rfc3339_parse(s, &t, NULL) == 0)
        return t;
    return 0;
}

int nh_node_unhealthy(const nh_config *c, const cJSON *node, char *why, size_t len, int64_t *since_s)
{
    if (!nh_enabled(c) || node == NULL)
        return 0;
    const cJSON *conds = json_get(node, "status.conditions");
    for (size_t r = 0; r < c->n_conds; r++) {
        const cJSON *k;
        cJSON_ArrayForEach(k, conds)
        {
            if (strcmp(json_get_str_or(k, "type", ""), c->conds[r].key) != 0 ||
                strcmp(json_get_str_or(k, "status", ""), c->conds[r].status) != 0)
                continue;
            const char *msg = json_get_str_or(k, "message", "");
            if (!*msg)
                msg = json_get_str_or(k, "reason", "");
            if (!*msg)
                msg = c->conds[r].status;
            snprintf(why, len, "%s: %s", c->conds[r].key, msg);
            if (since_s)
                *since_s = time_of(json_get_str(k, "lastTransitionTime"));
            return 1;
        }
    }
    const cJSON *taints = json_get(node, "spec.taints");
    for (size_t r = 0; r < c->n_taints; r++) {
        const cJSON *t;
        cJSON_ArrayForEach(t, taints)
        {
            if (strcmp(json_get_str_or(t, "key", ""), c->taints[r].key) != 0)
                continue;
            const char *v = json_get_str_or(t, "value", "");
            snprintf(why, len, "%s: %s", c->taints[r].key, *v ? v : json_get_str_or(t, "effect", "tainted"));
            if (since_s)
                *since_s = time_of(json_get_str(t, "timeAdded"));
            return 1;
        }
    }
    return 0;
}

size_t nh_cap(const nh_config *c, size_t fleet)
{
    if (fleet == 0)
        return 0;
    unsigned pct = c && c->max_share_pct ? c->max_share_pct : NH_DEFAULT_SHARE_PCT;
    size_t n = fleet * pct / 100u;
    return n ? n : 1;
}

static int cand_cmp(const void *a, const void *b)
{
    const nh_cand *x = *(nh_cand *const *)a, *y = *(nh_cand *const *)b;
    /* an unknown time sorts last: it may be the newest */
    int64_t tx = x->since_s ? x->since_s : INT64_MAX, ty = y->since_s ? y->since_s : INT64_MAX;
    if (tx != ty)
        return tx < ty ? -1 : 1;
    return strcmp(x->name, y->name);
}

size_t nh_admit(nh_cand *c, size_t n, size_t held, size_t cap)
{
    for (size_t i = 0; i < n; i++)
        c[i].admit = 0;
    if (held >= cap || n == 0)
        return 0;
    nh_cand **order = xcalloc(n, sizeof(*order));
    for (size_t i = 0; i < n; i++)
        order[i] = &c[i];
    qsort(order, n, sizeof(*order), cand_cmp);
    size_t room = cap - held, k = 0;
    for (; k < n && k < room; k++)
        order[k]->admit = 1;
    free(order);
    return k;
}

char *nh_reason(const char *why)
{
    /* The same cleaning as every other reason slurmop writes. */
    char *clean = nss_sanitize_reason(why);
    char *out = xasprintf("slurm-operator: %s", clean);
    free(clean);
    return out;
}

int nh_avoid_nodes(cJSON *pod, const char *const *nodes, size_t n)
{
    if (!cJSON_IsObject(pod))
        return OP_EINVAL;
    if (n == 0)
        return 0;
    cJSON *req = json_obj_path_ensure(
        pod, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution");
    cJSON *terms = cJSON_GetObjectItemCaseSensitive(req, "nodeSelectorTerms");
    if (!cJSON_IsArray(terms)) {
        terms = cJSON_CreateArray();
        json_set(req, "nodeSelectorTerms", terms);
    }
    if (cJSON_GetArraySize(terms) == 0)
        cJSON_AddItemToArray(terms, cJSON_CreateObject());
    cJSON *t;
    cJSON_ArrayForEach(t, terms)
    {
        if (!cJSON_IsObject(t))
            continue;
        cJSON *fields = cJSON_GetObjectItemCaseSensitive(t, "matchFields");
        if (!cJSON_IsArray(fields)) {
            fields = cJSON_CreateArray();
            json_set(t, "matchFields", fields);
        }
        cJSON *r = cJSON_CreateObject();
        json_set_str(r, "key", "metadata.name");
        json_set_str(r, "operator", "NotIn");
        cJSON *vals = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++)
            cJSON_AddItemToArray(vals, cJSON_CreateString(nodes[i]));
        json_set(r, "values", vals);
        cJSON_AddItemToArray(fields, r);
    }
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(nodes[i]) + 1;
    char *names = xmalloc(len), *w = names;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(nodes[i]);
        if (i)
            *w++ = ',';
        memcpy(w, nodes[i], l);
        w += l;
    }
    *w = '\0';
    json_set_str(json_obj_path_ensure(pod, "metadata.annotations"), ANN_POD_AVOIDED, names);
    free(names);
    return 0;
}

int nh_avoids_usable(const char *avoided, int (*usable)(const char *node, void *data), void *data)
{
    /* Node names are DNS subdomains (at most 253 characters, no ','): a
     * longer item is not one of ours and is passed over. */
    char name[254];
    for (const char *p = avoided; p && *p;) {
        const char *end = strchr(p, ',');
        size_t l = end ? (size_t)(end - p) : strlen(p);
        if (l > 0 && l < sizeof(name)) {
            memcpy(name, p, l);
            name[l] = '\0';
            if (usable(name, data))
                return 1;
        }
        p += l;
        if (*p == ',')
            p++;
    }
    return 0;
}
