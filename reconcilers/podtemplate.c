#include "reconcilers/podtemplate.h"

#include <string.h>

#include "core/json.h"
#include "core/smp.h"

static const char *const probes[] = {"startupProbe", "livenessProbe", "readinessProbe"};
static const char *const handlers[] = {"httpGet", "tcpSocket", "exec", "grpc"};

static int has_handler(const cJSON *probe)
{
    for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++)
        if (json_child(probe, handlers[i]))
            return 1;
    return 0;
}

cJSON *pt_merge_container(cJSON *base, const cJSON *user)
{
    if (!cJSON_IsObject(user))
        return base;
    cJSON *patch = cJSON_Duplicate(user, 1);
    /* args: appended, not replaced. */
    const cJSON *uargs = json_child(user, "args");
    if (cJSON_IsArray(uargs)) {
        cJSON *args = cJSON_GetObjectItemCaseSensitive(base, "args");
        if (!cJSON_IsArray(args)) {
            args = cJSON_CreateArray();
            json_set(base, "args", args);
        }
        for (const cJSON *a = uargs->child; a; a = a->next)
            cJSON_AddItemToArray(args, cJSON_Duplicate(a, 1));
        json_del(patch, "args");
    }
    /* A user probe handler replaces the base handler; thresholds merge. */
    for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
        const cJSON *up = json_child(user, probes[i]);
        cJSON *bp = cJSON_GetObjectItemCaseSensitive(base, probes[i]);
        if (cJSON_IsObject(up) && cJSON_IsObject(bp) && has_handler(up))
            for (size_t h = 0; h < sizeof(handlers) / sizeof(handlers[0]); h++)
                json_del(bp, handlers[h]);
    }
    /* The container's name belongs to the operator. */
    json_del(patch, "name");
    base = smp_apply(base, patch, 0, NULL);
    cJSON_Delete(patch);
    return base;
}

static void merge_meta_map(cJSON *base_meta, const cJSON *user_meta, const char *field)
{
    const cJSON *u = json_child(user_meta, field);
    if (!cJSON_IsObject(u))
        return;
    cJSON *b = json_obj_ensure(base_meta, field);
    for (const cJSON *kv = u->child; kv; kv = kv->next)
        if (!json_child(b, kv->string))
            cJSON_AddItemToObject(b, kv->string, cJSON_Duplicate(kv, 1));
}

cJSON *pt_merge_template(cJSON *base, const cJSON *user)
{
    if (!cJSON_IsObject(user))
        return base;
    const cJSON *umeta = json_child(user, "metadata");
    if (cJSON_IsObject(umeta)) {
        cJSON *bmeta = json_obj_ensure(base, "metadata");
        merge_meta_map(bmeta, umeta, "labels");
        merge_meta_map(bmeta, umeta, "annotations");
    }
    const cJSON *uspec = json_child(user, "spec");
    if (cJSON_IsObject(uspec)) {
        cJSON *bspec = cJSON_DetachItemFromObjectCaseSensitive(base, "spec");
        bspec = smp_apply(bspec, uspec, SMP_CONCAT_CONTAINERS, NULL);
        cJSON_AddItemToObject(base, "spec", bspec);
    }
    return base;
}
