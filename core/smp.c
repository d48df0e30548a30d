#include "core/smp.h"

#include <string.h>

#include "core/err.h"
#include "core/json.h"

/* Merge keys of list fields in core/v1, apps/v1 and policy/v1 (from the
 * patchMergeKey struct tags of the Kubernetes Go types). */
static const struct {
    const char *field;
    const char *key;
} merge_keys[] = {
    {"containers", "name"},
    {"initContainers", "name"},
    {"ephemeralContainers", "name"},
    {"volumes", "name"},
    {"env", "name"},
    {"imagePullSecrets", "name"},
    {"volumeMounts", "mountPath"},
    {"volumeDevices", "devicePath"},
    {"conditions", "type"},
    {"ownerReferences", "uid"},
    {"hostAliases", "ip"},
    {"topologySpreadConstraints", "topologyKey"},
    {"resourceClaims", "name"},
    {"schedulingGates", "name"},
    {"containerStatuses", "name"},
    {"initContainerStatuses", "name"},
    {"addresses", "type"},
    {"readinessGates", "conditionType"},
};

/* Primitive lists with patchStrategy "merge": union instead of replace. */
static const char *const primitive_merge[] = {"finalizers"};

const char *smp_merge_key(const char *field, const cJSON *elem)
{
    if (field == NULL)
        return NULL;
    if (strcmp(field, "ports") == 0) {
        /* Container ports merge by containerPort, Service ports by port. */
        if (json_child(elem, "containerPort"))
            return "containerPort";
        return "port";
    }
    for (size_t i = 0; i < sizeof(merge_keys) / sizeof(merge_keys[0]); i++)
        if (strcmp(merge_keys[i].field, field) == 0)
            return merge_keys[i].key;
    return NULL;
}

static int is_primitive_merge(const char *field)
{
    for (size_t i = 0; i < sizeof(primitive_merge) / sizeof(primitive_merge[0]); i++)
        if (strcmp(primitive_merge[i], field) == 0)
            return 1;
    return 0;
}

static cJSON *merge_value(cJSON *target, const cJSON *patch, const char *field, int flags, int *err);

static const cJSON *find_by_key(const cJSON *list, const char *key, const cJSON *val)
{
    for (const cJSON *e = list ? list->child : NULL; e; e = e->next)
        if (json_equal(json_child(e, key), val))
            return e;
    return NULL;
}

static int directive_is(const cJSON *o, const char *what)
{
    const char *p = json_get_str(o, "$patch");
    return p && strcmp(p, what) == 0;
}

/* Strip directives from a copy of a patch value that is being inserted. */
static cJSON *clean_copy(const cJSON *p)
{
    cJSON *c = cJSON_Duplicate(p, 1);
    if (cJSON_IsObject(c)) {
        cJSON *k = c->child;
        while (k) {
            cJSON *next = k->next;
            if (k->string && k->string[0] == '$')
                cJSON_Delete(cJSON_DetachItemViaPointer(c, k));
            else if (cJSON_IsObject(k) || cJSON_IsArray(k))
                cJSON_ReplaceItemInObjectCaseSensitive(c, k->string, clean_copy(k));
            k = next;
        }
    } else if (cJSON_IsArray(c)) {
        cJSON *k = c->child;
        while (k) {
            cJSON *next = k->next;
            if (cJSON_IsObject(k))
                cJSON_ReplaceItemViaPointer(c, k, clean_copy(k));
            k = next;
        }
    }
    return c;
}

static cJSON *merge_list(cJSON *target, const cJSON *patch, const char *field, int flags, int *err)
{
    const cJSON *sample = patch->child ? patch->child : (target ? target->child : NULL);
    int concat = (flags & SMP_CONCAT_CONTAINERS) && field &&
                 (strcmp(field, "containers") == 0 || strcmp(field, "initContainers") == 0);
    const char *key = cJSON_IsObject(sample) ? smp_merge_key(field, sample) : NULL;

    if (!cJSON_IsArray(target)) {
        cJSON_Delete(target);
        target = cJSON_CreateArray();
    }
    if (concat) {
        for (const cJSON *p = patch->child; p; p = p->next)
            if (!directive_is(p, "delete"))
                cJSON_AddItemToArray(target, clean_copy(p));
        return target;
    }
    if (key == NULL) {
        if (field && is_primitive_merge(field)) {
            for (const cJSON *p = patch->child; p; p = p->next) {
                int have = 0;
                for (const cJSON *t = target->child; t; t = t->next)
                    have |= json_equal(t, p);
                if (!have)
                    cJSON_AddItemToArray(target, cJSON_Duplicate(p, 1));
            }
            return target;
        }
        /* No merge key: the patch list replaces the target list. */
        cJSON_Delete(target);
        return clean_copy(patch);
    }
    /* A `$patch: replace` element replaces the whole list with the others. */
    for (const cJSON *p = patch->child; p; p = p->next)
        if (directive_is(p, "replace")) {
            cJSON *out = cJSON_CreateArray();
            for (const cJSON *q = patch->child; q; q = q->next)
                if (!directive_is(q, "replace"))
                    cJSON_AddItemToArray(out, clean_copy(q));
            cJSON_Delete(target);
            return out;
        }
    for (const cJSON *p = patch->child; p; p = p->next) {
        const cJSON *kv = json_child(p, key);
        if (!cJSON_IsObject(p) || kv == NULL) {
            if (err)
                *err = OP_EINVAL;
            continue;
        }
        cJSON *t = (cJSON *)(void *)find_by_key(target, key, kv);
        if (directive_is(p, "delete")) {
            if (t)
                cJSON_Delete(cJSON_DetachItemViaPointer(target, t));
            continue;
        }
        if (t == NULL) {
            cJSON_AddItemToArray(target, clean_copy(p));
            continue;
        }
        /* Merge into a copy and swap it in place so the list keeps its order. */
        cJSON *merged = merge_value(cJSON_Duplicate(t, 1), p, NULL, flags, err);
        cJSON_ReplaceItemViaPointer(target, t, merged);
    }
    return target;
}

/* Reorder a merged list by `$setElementOrder/<field>`: listed keys first in
 * the given order, the rest after in their current order. */
static void apply_order(cJSON *list, const cJSON *order, const char *field)
{
    if (!cJSON_IsArray(list) || !cJSON_IsArray(order))
        return;
    cJSON *out = cJSON_CreateArray();
    for (const cJSON *o = order->child; o; o = o->next) {
        const char *key = cJSON_IsObject(o) ? smp_merge_key(field, o) : NULL;
        for (cJSON *e = list->child; e; e = e->next) {
            int hit = key ? json_equal(json_child(e, key), json_child(o, key)) : json_equal(e, o);
            if (hit) {
                cJSON_AddItemToArray(out, cJSON_DetachItemViaPointer(list, e));
                break;
            }
        }
    }
    while (list->child)
        cJSON_AddItemToArray(out, cJSON_DetachItemViaPointer(list, list->child));
    /* Move everything back into list so that callers' pointer stays valid. */
    while (out->child)
        cJSON_AddItemToArray(list, cJSON_DetachItemViaPointer(out, out->child));
    cJSON_Delete(out);
}

static cJSON *merge_object(cJSON *target, const cJSON *patch, int flags, int *err)
{
    if (directive_is(patch, "replace")) {
        cJSON_Delete(target);
        return clean_copy(patch);
    }
    if (!cJSON_IsObject(target)) {
        cJSON_Delete(target);
        target = cJSON_CreateObject();
    }
    for (const cJSON *p = patch->child; p; p = p->next) {
        const char *k = p->string;
        if (k[0] == '$') {
            if (strncmp(k, "$deleteFromPrimitiveList/", 25) == 0) {
                cJSON *list = cJSON_GetObjectItemCaseSensitive(target, k + 25);
                for (const cJSON *v = p->child; v && cJSON_IsArray(list); v = v->next) {
                    cJSON *e = list->child;
                    while (e) {
                        cJSON *next = e->next;
                        if (json_equal(e, v))
                            cJSON_Delete(cJSON_DetachItemViaPointer(list, e));
                        e = next;
                    }
                }
            } else if (strcmp(k, "$patch") != 0 && strcmp(k, "$retainKeys") != 0 &&
                       strncmp(k, "$setElementOrder/", 17) != 0) {
                if (err)
                    *err = OP_EINVAL;
            }
            continue;
        }
        if (cJSON_IsNull(p)) {
            cJSON_DeleteItemFromObjectCaseSensitive(target, k);
            continue;
        }
        if (cJSON_IsObject(p) && directive_is(p, "delete")) {
            cJSON_DeleteItemFromObjectCaseSensitive(target, k);
            continue;
        }
        cJSON *cur = cJSON_GetObjectItemCaseSensitive(target, k);
        if (cur == NULL) {
            cJSON_AddItemToObject(target, k, merge_value(NULL, p, k, flags, err));
        } else {
            /* Merge into a copy and swap it in place to keep the key order. */
            cJSON *merged = merge_value(cJSON_Duplicate(cur, 1), p, k, flags, err);
            cJSON_ReplaceItemInObjectCaseSensitive(target, k, merged);
        }
    }
    for (const cJSON *p = patch->child; p; p = p->next)
        if (strncmp(p->string, "$setElementOrder/", 17) == 0) {
            const char *field = p->string + 17;
            apply_order(cJSON_GetObjectItemCaseSensitive(target, field), p, field);
        }
    const cJSON *retain = json_child(patch, "$retainKeys");
    if (cJSON_IsArray(retain)) {
        cJSON *k = target->child;
        while (k) {
            cJSON *next = k->next;
            int keep = 0;
            for (const cJSON *r = retain->child; r; r = r->next)
                keep |= cJSON_IsString(r) && strcmp(r->valuestring, k->string) == 0;
            if (!keep)
                cJSON_Delete(cJSON_DetachItemViaPointer(target, k));
            k = next;
        }
    }
    return target;
}

static cJSON *merge_value(cJSON *target, const cJSON *patch, const char *field, int flags, int *err)
{
    if (cJSON_IsObject(patch))
        return merge_object(target, patch, flags, err);
    if (cJSON_IsArray(patch))
        return merge_list(target, patch, field, flags, err);
    cJSON_Delete(target);
    return cJSON_Duplicate(patch, 1);
}

cJSON *smp_apply(cJSON *target, const cJSON *patch, int flags, int *err)
{
    if (err)
        *err = 0;
    return merge_value(target, patch, NULL, flags, err);
}
