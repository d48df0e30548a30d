#include "watchers/kinds.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/intern.h"
#include "core/json.h"
#include "core/mem.h"
#include "core/rfc3339.h"

const char *const pod_slurm_cond_types[PSC_COUNT] = {
    "SlurmNodeStateAllocated", "SlurmNodeStateDown",        "SlurmNodeStateError",
    "SlurmNodeStateFuture",    "SlurmNodeStateIdle",        "SlurmNodeStateMixed",
    "SlurmNodeStateUnknown",   "SlurmNodeStateCompleting",  "SlurmNodeStateDrain",
    "SlurmNodeStateFail",      "SlurmNodeStateInvalid",     "SlurmNodeStateInvalidReg",
    "SlurmNodeStateMaintenance", "SlurmNodeStateNotResponding", "SlurmNodeStateUndrain",
};

uint32_t pod_slurm_cond_hash1(const char *type, const char *message)
{
    /* FNV-1a over "type\0message". */
    uint32_t h = 2166136261u;
    for (const char *p = type; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    h = (h ^ 0u) * 16777619u;
    for (const char *p = message ? message : ""; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    return h;
}

uint32_t pod_slurm_cond_hash(uint32_t bits, const char *message)
{
    uint32_t h = 0;
    for (int i = 0; i < PSC_COUNT; i++)
        if (bits & (1u << i))
            h ^= pod_slurm_cond_hash1(pod_slurm_cond_types[i], message);
    return h;
}

static const char *const pod_annotations[] = {ANN_POD_CORDON,
                                              ANN_POD_DELETION_COST,
                                              ANN_POD_DEADLINE,
                                              ANN_TOPOLOGY,
                                              ANN_CONTROLLER_CONFIG,
                                              ANN_POD_AVOIDED,
                                              NULL};

_Static_assert(PSC_COUNT <= 32, "pod_proj.slurm_conds holds one bit per PSC_ type");

static void pod_project(const cJSON *obj, void *proj)
{
    pod_proj *p = proj;
    /* The store hands over a zeroed projection (store.h): the interned
     * strings below are taken once, and pod_release drops them once. */
    assert(p->node_name == NULL && p->hostname == NULL && p->slurm_conds == 0 && p->restarts == 0);
    const char *phase = json_get_str_or(obj, "status.phase", "");
    if (!*phase)
        p->phase = POD_NONE;
    else if (!strcmp(phase, "Running"))
        p->phase = POD_RUNNING;
    else if (!strcmp(phase, "Succeeded"))
        p->phase = POD_SUCCEEDED;
    else if (!strcmp(phase, "Failed"))
        p->phase = POD_FAILED;
    else if (!strcmp(phase, "Unknown"))
        p->phase = POD_UNKNOWN;
    else
        p->phase = POD_PENDING;
    const char *node = json_get_str(obj, "spec.nodeName");
    if (node && *node) {
        p->node_name = istr_get(node);
        p->scheduled = 1;
    }
    p->host_network = (uint8_t)json_get_bool(obj, "spec.hostNetwork", 0);
    const char *host = json_get_str(obj, "spec.hostname");
    if (host && *host)
        p->hostname = istr_get(host);
    const cJSON *conds = json_get(obj, "status.conditions");
    for (const cJSON *c = conds ? conds->child : NULL; c; c = c->next) {
        const char *type = json_get_str_or(c, "type", "");
        int is_true = strcmp(json_get_str_or(c, "status", ""), "True") == 0;
        if (!strcmp(type, "Ready")) {
            p->ready = (uint8_t)is_true;
            if (is_true)
                p->ready_since = rfc3339_secs(json_get_str(c, "lastTransitionTime"));
        } else if (!strcmp(type, "ContainersReady")) {
            p->containers_ready = (uint8_t)is_true;
        } else if (!strcmp(type, "PodScheduled") && is_true) {
            p->scheduled = 1;
        } else if (is_true && !strncmp(type, "SlurmNodeState", 14)) {
            for (int i = 0; i < PSC_COUNT; i++) {
                if (!strcmp(type, pod_slurm_cond_types[i])) {
                    p->slurm_conds |= 1u << i;
                    p->slurm_msg_hash ^= pod_slurm_cond_hash1(type, json_get_str(c, "message"));
                }
            }
        }
    }
    const cJSON *cs = json_get(obj, "status.containerStatuses");
    for (const cJSON *c = cs ? cs->child : NULL; c; c = c->next)
        p->restarts += (uint32_t)json_get_int(c, "restartCount", 0);
}

static void pod_release(void *v)
{
    pod_proj *p = v;
    istr_put(p->node_name);
    istr_put(p->hostname);
}

const store_kind KIND_PODS = {
    .name = "pods",
    .namespaced = 1,
    .keep_json = STORE_JSON_NONE,
    .annotations = pod_annotations,
    .proj_size = sizeof(pod_proj),
    .project = pod_project,
    .proj_release = pod_release,
};

static const char *const node_annotations[] = {ANN_TOPOLOGY, ANN_FEATURES, ANN_NODE_CORDON_REASON,
                                               ANN_HOSTNAME_OVERRIDE, NULL};

static char *keep_conditions; /* ",Type1,Type2," or NULL */
static char *keep_health;     /* the same for the health condition types */

void kinds_keep_node_conditions(const char *csv)
{
    free(keep_conditions);
    keep_conditions = (csv && *csv) ? xasprintf(",%s,", csv) : NULL;
}

void kinds_keep_node_health(const char *csv)
{
    free(keep_health);
    keep_health = (csv && *csv) ? xasprintf(",%s,", csv) : NULL;
}

static int in_csv(const char *list, const char *type)
{
    char probe[256];
    if (list == NULL || *type == '\0')
        return 0;
    snprintf(probe, sizeof(probe), ",%s,", type);
    return strstr(list, probe) != NULL;
}

static int keep_condition(const char *type)
{
    return in_csv(keep_conditions, type);
}

/* A member of a trimmed Node under a key that is a string constant: cJSON
 * then keeps the pointer instead of a copy (cJSON_StringIsConst), which at
 * one Node per pod saves a malloc per key per Node. */
static cJSON *add_const(cJSON *o, const char *const_key, cJSON *item)
{
    cJSON_AddItemToObjectCS(o, const_key, item);
    return item;
}

/* Nodes: keep what the DaemonSet predicates, cordon sync and topology need.
 * Labels are not copied: the sobj holds them interned, shared by every Node
 * with the same ones (a GPU node with feature discovery has a hundred), where
 * a JSON copy cost some 160 bytes per label per Node. Readers go by path
 * (json_get), so a part with nothing in it (no taints, schedulable: no
 * "spec") is left out. */
static cJSON *node_trim(const cJSON *obj)
{
    cJSON *t = cJSON_CreateObject();
    cJSON *meta = add_const(t, "metadata", cJSON_CreateObject());
    add_const(meta, "name", cJSON_CreateString(json_get_str_or(obj, "metadata.name", "")));
    const cJSON *ann = json_get(obj, "metadata.annotations");
    if (cJSON_IsObject(ann)) {
        cJSON *keep = add_const(meta, "annotations", cJSON_CreateObject());
        for (const char *const *k = node_annotations; *k; k++) {
            const cJSON *v = json_child(ann, *k);
            if (v)
                add_const(keep, *k, cJSON_Duplicate(v, 1));
        }
    }
    const cJSON *taints = json_get(obj, "spec.taints");
    int unschedulable = json_get_bool(obj, "spec.unschedulable", 0);
    if (taints || unschedulable) {
        cJSON *spec = add_const(t, "spec", cJSON_CreateObject());
        if (taints)
            add_const(spec, "taints", cJSON_Duplicate(taints, 1));
        if (unschedulable)
            add_const(spec, "unschedulable", cJSON_CreateTrue());
    }
    const cJSON *conds = json_get(obj, "status.conditions");
    if (cJSON_IsArray(conds) && (keep_conditions || keep_health)) {
        cJSON *out = cJSON_CreateArray();
        for (const cJSON *c = conds->child; c; c = c->next) {
            /* Health conditions (nodehealth.h) are kept whatever their
             * status (a rule may name "Ready=False"), with the time they
             * turned; heartbeats are never kept, so they change nothing. */
            const char *type = json_get_str_or(c, "type", "");
            int health = in_csv(keep_health, type);
            if (!health && (strcmp(json_get_str_or(c, "status", ""), "True") != 0 || !keep_condition(type)))
                continue;
            cJSON *k = cJSON_CreateObject();
            add_const(k, "type", cJSON_CreateString(type));
            add_const(k, "status", cJSON_CreateString(json_get_str_or(c, "status", "")));
            add_const(k, "reason", cJSON_CreateString(json_get_str_or(c, "reason", "")));
            add_const(k, "message", cJSON_CreateString(json_get_str_or(c, "message", "")));
            if (health && json_get_str(c, "lastTransitionTime"))
                add_const(k, "lastTransitionTime", cJSON_CreateString(json_get_str(c, "lastTransitionTime")));
            cJSON_AddItemToArray(out, k);
        }
        add_const(add_const(t, "status", cJSON_CreateObject()), "conditions", out);
    }
    return t;
}

const store_kind KIND_NODES = {
    .name = "nodes",
    .namespaced = 0,
    .keep_json = STORE_JSON_TRIM,
    .trim = node_trim,
    .annotations = node_annotations,
};

/* ControllerRevisions are watched without a label selector: those Slinky's
 * NodeSet controller made carry only the template's labels, and a NodeSet
 * taken over from Slinky must find them (docs/migrate-from-slinky.md). A
 * revision whose controller is no NodeSet (a StatefulSet's, a DaemonSet's)
 * keeps only its name and owners, not the pod template it holds. */
static cJSON *revision_trim(const cJSON *obj)
{
    const cJSON *refs = json_get(obj, "metadata.ownerReferences");
    for (const cJSON *r = cJSON_IsArray(refs) ? refs->child : NULL; r; r = r->next)
        if (json_get_bool(r, "controller", 0) && strcmp(json_get_str_or(r, "kind", ""), "NodeSet") == 0)
            return cJSON_Duplicate(obj, 1);
    cJSON *t = cJSON_CreateObject();
    cJSON *meta = json_obj_ensure(t, "metadata");
    json_set_str(meta, "name", json_get_str_or(obj, "metadata.name", ""));
    json_set_str(meta, "namespace", json_get_str_or(obj, "metadata.namespace", ""));
    if (refs)
        json_set(meta, "ownerReferences", cJSON_Duplicate(refs, 1));
    return t;
}

const store_kind KIND_REVISIONS = {
    .name = "controllerrevisions",
    .namespaced = 1,
    .keep_json = STORE_JSON_TRIM,
    .trim = revision_trim,
};

const store_kind KIND_FULL_NAMESPACED = {
    .name = "namespaced",
    .namespaced = 1,
    .keep_json = STORE_JSON_FULL,
};

const store_kind KIND_FULL_CLUSTER = {
    .name = "cluster",
    .namespaced = 0,
    .keep_json = STORE_JSON_FULL,
};
