#include "core/podfit.h"

#include <stdint.h>
#include <string.h>

#include "core/json.h"
#include "core/labels.h"

/* Where a Node's labels come from: its JSON, or the caller's own copy (the
 * operator's Node cache keeps them interned, not in the trimmed JSON). */
typedef struct fit_labels {
    lsel_lookup_fn get;
    void *ctx;
} fit_labels;

/* json_child, not a path: label keys hold dots ("kubernetes.io/os"). */
static const char *json_label(void *ctx, const char *key)
{
    const cJSON *v = json_child(json_get((const cJSON *)ctx, "metadata.labels"), key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int selector_ok(const cJSON *podspec, const fit_labels *l)
{
    const cJSON *sel = json_child(podspec, "nodeSelector");
    if (!cJSON_IsObject(sel))
        return 1;
    for (const cJSON *s = sel->child; s; s = s->next) {
        const char *have = l->get(l->ctx, s->string);
        if (!cJSON_IsString(s) || have == NULL || strcmp(have, s->valuestring) != 0)
            return 0;
    }
    return 1;
}

int fit_node_selector(const cJSON *podspec, const cJSON *node)
{
    fit_labels l = {json_label, (void *)(uintptr_t)node};
    return selector_ok(podspec, &l);
}

static int field_lookup_ok(const cJSON *fields, const cJSON *node)
{
    /* matchFields supports only metadata.name, with In / NotIn. */
    const char *name = json_get_str(node, "metadata.name");
    for (const cJSON *f = fields->child; f; f = f->next) {
        const char *key = json_get_str(f, "key"), *op = json_get_str(f, "operator");
        const cJSON *vals = json_child(f, "values");
        int found = 0;
        if (key == NULL || op == NULL || strcmp(key, "metadata.name") != 0)
            return 0;
        for (const cJSON *v = vals ? vals->child : NULL; v; v = v->next)
            if (cJSON_IsString(v) && name && strcmp(v->valuestring, name) == 0)
                found = 1;
        if (strcmp(op, "In") == 0 ? !found : strcmp(op, "NotIn") == 0 ? found : 1)
            return 0;
    }
    return 1;
}

static int term_matches(const cJSON *term, const cJSON *node, const fit_labels *l)
{
    const cJSON *exprs = json_child(term, "matchExpressions");
    const cJSON *fields = json_child(term, "matchFields");
    /* An empty term selects nothing. */
    if (json_len(exprs) == 0 && json_len(fields) == 0)
        return 0;
    if (json_len(exprs) > 0) {
        cJSON *wrap = cJSON_CreateObject();
        lsel *sel = NULL;
        cJSON_AddItemReferenceToObject(wrap, "matchExpressions", (cJSON *)(void *)exprs);
        int rc = lsel_from_json(wrap, &sel, NULL, 0);
        cJSON_Delete(wrap);
        if (rc)
            return 0;
        int ok = lsel_match(sel, l->get, l->ctx);
        lsel_free(sel);
        if (!ok)
            return 0;
    }
    if (json_len(fields) > 0 && !field_lookup_ok(fields, node))
        return 0;
    return 1;
}

static int affinity_ok(const cJSON *podspec, const cJSON *node, const fit_labels *l)
{
    const cJSON *req =
        json_get(podspec, "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution");
    if (req == NULL || cJSON_IsNull(req))
        return 1;
    const cJSON *terms = json_child(req, "nodeSelectorTerms");
    for (const cJSON *t = terms ? terms->child : NULL; t; t = t->next)
        if (term_matches(t, node, l))
            return 1;
    return 0;
}

int fit_node_affinity(const cJSON *podspec, const cJSON *node)
{
    fit_labels l = {json_label, (void *)(uintptr_t)node};
    return affinity_ok(podspec, node, &l);
}

int fit_tolerates(const cJSON *tolerations, const cJSON *taint)
{
    const char *tkey = json_get_str_or(taint, "key", ""), *tval = json_get_str_or(taint, "value", "");
    const char *teff = json_get_str_or(taint, "effect", "");
    for (const cJSON *t = tolerations ? tolerations->child : NULL; t; t = t->next) {
        const char *key = json_get_str_or(t, "key", ""), *op = json_get_str_or(t, "operator", "Equal");
        const char *val = json_get_str_or(t, "value", ""), *eff = json_get_str_or(t, "effect", "");
        if (*eff && strcmp(eff, teff) != 0)
            continue;
        if (*key == '\0') {
            /* An empty key with Exists tolerates every taint. */
            if (strcmp(op, "Exists") == 0)
                return 1;
            continue;
        }
        if (strcmp(key, tkey) != 0)
            continue;
        if (strcmp(op, "Exists") == 0 || (strcmp(op, "Equal") == 0 && strcmp(val, tval) == 0))
            return 1;
    }
    return 0;
}

static void check(const cJSON *podspec, const cJSON *node, const fit_labels *l, int honour_unschedulable,
                  fit_result *out)
{
    const char *want = json_get_str(podspec, "nodeName");
    const char *name = json_get_str(node, "metadata.name");
    const cJSON *tols = json_child(podspec, "tolerations");

    out->should_run = 1;
    out->should_continue = 1;
    out->reason = NULL;
    if (want && *want && (name == NULL || strcmp(want, name) != 0)) {
        out->should_run = out->should_continue = 0;
        out->reason = "node(s) didn't match the requested node name";
        return;
    }
    if (!selector_ok(podspec, l) || !affinity_ok(podspec, node, l)) {
        out->should_run = out->should_continue = 0;
        out->reason = "node(s) didn't match Pod's node affinity/selector";
        return;
    }
    const cJSON *taints = json_get(node, "spec.taints");
    for (const cJSON *t = taints ? taints->child : NULL; t; t = t->next) {
        const char *eff = json_get_str_or(t, "effect", "");
        if (strcmp(eff, "PreferNoSchedule") == 0 || fit_tolerates(tols, t))
            continue;
        if (strcmp(eff, "NoSchedule") == 0 || strcmp(eff, "NoExecute") == 0) {
            out->should_run = 0;
            out->reason = "node(s) had untolerated taint";
        }
        if (strcmp(eff, "NoExecute") == 0)
            out->should_continue = 0;
    }
    if (honour_unschedulable && out->should_run && json_get_bool(node, "spec.unschedulable", 0)) {
        cJSON *taint = cJSON_CreateObject();
        json_set_str(taint, "key", "node.kubernetes.io/unschedulable");
        json_set_str(taint, "effect", "NoSchedule");
        int ok = fit_tolerates(tols, taint);
        cJSON_Delete(taint);
        if (!ok) {
            out->should_run = 0;
            out->reason = "node(s) were unschedulable";
        }
    }
}

void fit_daemon(const cJSON *podspec, const cJSON *node, fit_result *out)
{
    fit_labels l = {json_label, (void *)(uintptr_t)node};
    check(podspec, node, &l, 0, out);
}

void fit_daemon_labels(const cJSON *podspec, const cJSON *node, lsel_lookup_fn labels, void *ctx,
                       fit_result *out)
{
    fit_labels l = {labels, ctx};
    check(podspec, node, &l, 0, out);
}

void fit_schedule(const cJSON *podspec, const cJSON *node, fit_result *out)
{
    fit_labels l = {json_label, (void *)(uintptr_t)node};
    check(podspec, node, &l, 1, out);
}

int fit_anti_affinity_conflict(const cJSON *podspec, const char *pod_ns, const cJSON *other_labels,
                               const char *other_ns)
{
    const cJSON *terms =
        json_get(podspec, "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution");
    for (const cJSON *t = terms ? terms->child : NULL; t; t = t->next) {
        const char *topo = json_get_str(t, "topologyKey");
        const cJSON *nss = json_child(t, "namespaces");
        lsel *sel = NULL;
        if (topo == NULL || strcmp(topo, "kubernetes.io/hostname") != 0)
            continue;
        /* Without explicit namespaces a term selects pods of the pod's own namespace. */
        int ns_ok = 0;
        if (json_len(nss) == 0)
            ns_ok = pod_ns && other_ns && strcmp(pod_ns, other_ns) == 0;
        for (const cJSON *n = nss ? nss->child : NULL; n && !ns_ok; n = n->next)
            ns_ok = cJSON_IsString(n) && other_ns && strcmp(n->valuestring, other_ns) == 0;
        if (!ns_ok)
            continue;
        const cJSON *ls = json_child(t, "labelSelector");
        if (ls == NULL || cJSON_IsNull(ls))
            continue; /* a null selector selects nothing */
        if (lsel_from_json(ls, &sel, NULL, 0) != 0)
            continue;
        int hit = lsel_match_json(sel, other_labels);
        lsel_free(sel);
        if (hit)
            return 1;
    }
    return 0;
}
