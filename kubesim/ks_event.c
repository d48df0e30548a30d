/* ks_event: core/v1 and events.k8s.io/v1 Events as one resource.
 *
 * kube-apiserver stores Events once and serves them in both groups, converting field names on the
 * way (events.k8s.io `regarding`, `note`, `reportingController`, `deprecated*` are core/v1's
 * `involvedObject`, `message`, `reportingComponent`, `source`, `firstTimestamp`, `lastTimestamp`,
 * `count`). slurmop writes events.k8s.io/v1; `kubectl describe` and `kubectl events` read core/v1.
 * kubesim keeps the two as separate resources (each with its own selectable fields, validation and
 * history ring) and makes every change of one a change of the other: the twin is written at the
 * same resourceVersion, with the same uid, and without the hooks a write through the API runs
 * (which would mirror it back). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubesim/ks_int.h"
#include "core/json.h"
#include "core/mem.h"

/* events.k8s.io/v1 field <-> core/v1 field, for the fields whose names differ. */
static const struct {
    const char *v1, *core;
} renamed[] = {
    {"regarding", "involvedObject"},
    {"note", "message"},
    {"reportingController", "reportingComponent"},
    {"deprecatedSource", "source"},
    {"deprecatedFirstTimestamp", "firstTimestamp"},
    {"deprecatedLastTimestamp", "lastTimestamp"},
    {"deprecatedCount", "count"},
};

/* Fields of the same name in both, copied as they are. */
static const char *const same[] = {"metadata", "eventTime", "series", "related", "action", "reason",
                                   "type", "reportingInstance"};

static int is_events(const ks_res *r, const char *group)
{
    return strcmp(r->plural, "events") == 0 && strcmp(r->group, group) == 0;
}

cJSON *ks_event_convert(const cJSON *obj, int to_core)
{
    cJSON *out = cJSON_CreateObject();
    json_set_str(out, "apiVersion", to_core ? "v1" : "events.k8s.io/v1");
    json_set_str(out, "kind", "Event");
    for (size_t i = 0; i < ARRAY_SIZE(same); i++) {
        const cJSON *v = json_child(obj, same[i]);
        if (v)
            json_set(out, same[i], cJSON_Duplicate(v, 1));
    }
    for (size_t i = 0; i < ARRAY_SIZE(renamed); i++) {
        const cJSON *v = json_child(obj, to_core ? renamed[i].v1 : renamed[i].core);
        if (v && !cJSON_IsNull(v))
            json_set(out, to_core ? renamed[i].core : renamed[i].v1, cJSON_Duplicate(v, 1));
    }
    if (to_core) {
        /* What the real server's core/v1 view holds for an Event written through events.k8s.io:
         * an involvedObject and a source even when empty, null first/last timestamps. */
        if (!json_child(out, "involvedObject"))
            json_set(out, "involvedObject", cJSON_CreateObject());
        if (!json_child(out, "source"))
            json_set(out, "source", cJSON_CreateObject());
        if (!json_child(out, "firstTimestamp"))
            json_set(out, "firstTimestamp", cJSON_CreateNull());
        if (!json_child(out, "lastTimestamp"))
            json_set(out, "lastTimestamp", cJSON_CreateNull());
        const cJSON *n = json_child(out, "count");
        if (cJSON_IsNumber(n) && n->valuedouble == 0)
            json_del(out, "count");
    } else {
        if (!json_child(out, "eventTime"))
            json_set(out, "eventTime", cJSON_CreateNull());
        const cJSON *src = json_child(out, "deprecatedSource");
        if (cJSON_IsObject(src) && src->child == NULL)
            json_del(out, "deprecatedSource");
    }
    return out;
}

void ks_event_twin(ks *k, ks_obj *o, const cJSON *newobj, uint64_t rv)
{
    if (k->loading)
        return; /* a state file holds both resources already */
    int from_v1 = is_events(o->res, "events.k8s.io");
    if (!from_v1 && !is_events(o->res, ""))
        return;
    ks_res *twin = res_find(k, from_v1 ? "" : "events.k8s.io", "events");
    if (twin == NULL)
        return;
    char key[600];
    if (newobj == NULL) {
        /* Removed: the twin has the removed object's key. It may be the one written through the
         * API (with its uid indexed and its owner references known), so all of that goes too. */
        ks_obj *t = map_get(&twin->objs, o->key);
        if (t == NULL)
            return;
        ks_ver *tomb = ver_restamp(t->cur, rv);
        map_del(&twin->objs, t->key);
        if (t->uid[0] && map_get(&k->uids, t->uid) == t)
            map_del(&k->uids, t->uid);
        hist_push(k, twin, KS_DELETED, tomb, t->cur);
        ctrl_orefs_clear(k, t);
        if (list_is_linked(&t->gc_link))
            list_remove(&t->gc_link);
        ver_unref(tomb);
        ver_unref(t->cur);
        free(t->key);
        free(t);
        return;
    }
    const char *ns = json_get_str_or(newobj, "metadata.namespace", "");
    cJSON *conv = ks_event_convert(newobj, from_v1);
    ks_ver *v = ver_build(twin, conv);
    cJSON_Delete(conv);
    obj_key(key, sizeof(key), ns, ver_name(v));
    ks_obj *t = map_get(&twin->objs, key);
    if (t) {
        ks_ver *prev = t->cur;
        t->cur = v;
        hist_push(k, twin, KS_MODIFIED, v, prev);
        ver_unref(prev);
        return;
    }
    /* Not in k->uids: the uid names the object written through the API, whose twin this is. */
    t = xcalloc(1, sizeof(*t));
    t->key = xstrdup(key);
    t->res = twin;
    t->cur = v;
    list_init(&t->gc_link);
    snprintf(t->uid, sizeof(t->uid), "%s", json_get_str_or(newobj, "metadata.uid", ""));
    map_put(&twin->objs, t->key, t);
    hist_push(k, twin, KS_ADDED, v, NULL);
}
