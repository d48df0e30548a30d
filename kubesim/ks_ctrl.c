/* ks_ctrl: what kube-controller-manager would do that tests depend on: the
 * garbage collector (ownerReferences, foreground/orphan finalizers,
 * dangling owners), the namespace controller (deleting a namespace's content
 * before the namespace) and the CRD cleanup finalizer.
 *
 * Changes only mark work (owner uids to look at, dependents to check,
 * terminating namespaces); a short timer (cfg.gc_delay_ms) runs the passes,
 * so the GC acts asynchronously, like the real one, and a burst of changes
 * is handled in one pass.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubesim/ks_int.h"
#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"

/* ---- owner reference index --------------------------------------------- */

void ctrl_orefs_clear(ks *k, ks_obj *o)
{
    for (int i = 0; i < o->n_orefs; i++) {
        ks_oref *r = &o->orefs[i];
        list_remove(&r->link);
        if (list_empty(&r->bucket->head))
            map_drop(&k->deps, r->bucket->uid);
    }
    free(o->orefs);
    o->orefs = NULL;
    o->n_orefs = 0;
}

void ctrl_orefs_set(ks *k, ks_obj *o, const cJSON *obj)
{
    const cJSON *refs = json_get(obj, "metadata.ownerReferences");
    int n = json_len(refs);
    /* unchanged owners: keep the index as it is */
    if (n == o->n_orefs) {
        int same = 1, i = 0;
        for (const cJSON *r = refs ? refs->child : NULL; r && same; r = r->next, i++)
            same = strcmp(json_get_str_or(r, "uid", ""), o->orefs[i].uid) == 0 &&
                   json_get_bool(r, "blockOwnerDeletion", 0) == o->orefs[i].block;
        if (same)
            return;
    }
    ctrl_orefs_clear(k, o);
    if (n == 0)
        return;
    o->orefs = xcalloc((size_t)n, sizeof(ks_oref));
    for (const cJSON *r = refs->child; r; r = r->next) {
        const char *uid = json_get_str(r, "uid");
        if (uid == NULL || *uid == '\0')
            continue;
        ks_oref *x = &o->orefs[o->n_orefs++];
        snprintf(x->uid, sizeof(x->uid), "%s", uid);
        x->obj = o;
        x->block = json_get_bool(r, "blockOwnerDeletion", 0);
        ks_deps *b = map_get(&k->deps, x->uid);
        if (b == NULL) {
            b = xcalloc(1, sizeof(*b));
            snprintf(b->uid, sizeof(b->uid), "%s", uid);
            list_init(&b->head);
            map_put(&k->deps, b->uid, b);
        }
        x->bucket = b;
        list_insert_tail(&b->head, &x->link);
    }
}

/* ---- work marking ------------------------------------------------------ */

static void mark_owner(ks *k, const char *uid)
{
    if (map_get(&k->gc_owners, uid))
        return;
    char *c = xstrdup(uid);
    map_put(&k->gc_owners, c, c);
}

static void gc_timer_cb(uv_timer_t *t);

void ctrl_gc_kick(ks *k)
{
    if (k->closing || uv_is_active((uv_handle_t *)&k->gc_timer))
        return;
    uv_timer_start(&k->gc_timer, gc_timer_cb, k->cfg.gc_delay_ms, 0);
}

static int has_finalizer(const cJSON *obj, const char *f)
{
    const cJSON *fin = json_get(obj, "metadata.finalizers");
    for (const cJSON *x = fin ? fin->child : NULL; x; x = x->next)
        if (cJSON_IsString(x) && strcmp(x->valuestring, f) == 0)
            return 1;
    return 0;
}

void ctrl_on_change(ks *k, ks_obj *o, const cJSON *newobj, int removed)
{
    if (removed) {
        /* its dependents may now be orphans; its owners may be waiting for it */
        if (o->uid[0] && map_get(&k->deps, o->uid))
            mark_owner(k, o->uid);
        for (int i = 0; i < o->n_orefs; i++)
            mark_owner(k, o->orefs[i].uid);
        if (o->res->namespaced && k->gc_ns_pending)
            ctrl_gc_kick(k);
        if (k->gc_owners.count)
            ctrl_gc_kick(k);
        return;
    }
    ctrl_orefs_set(k, o, newobj);
    int kick = 0;
    if (o->n_orefs && !list_is_linked(&o->gc_link)) {
        list_insert_tail(&k->gc_queue, &o->gc_link);
        kick = 1;
    }
    if (json_get_str(newobj, "metadata.deletionTimestamp")) {
        if (has_finalizer(newobj, "foregroundDeletion") || has_finalizer(newobj, "orphan")) {
            mark_owner(k, o->uid);
            kick = 1;
        }
        if (o->res->group[0] == '\0' && strcmp(o->res->plural, "namespaces") == 0) {
            k->gc_ns_pending = 1;
            kick = 1;
        }
        if (strcmp(o->res->plural, "customresourcedefinitions") == 0 &&
            has_finalizer(newobj, "customresourcecleanup.apiextensions.k8s.io")) {
            k->gc_ns_pending = 1; /* the same pass handles CRD cleanup */
            kick = 1;
        }
    }
    if (kick)
        ctrl_gc_kick(k);
}

/* ---- passes ------------------------------------------------------------ */

typedef struct objref {
    ks_res *res;
    char *key;
} objref;

static ks_obj *objref_get(const objref *r)
{
    return r->res->removed ? NULL : map_get(&r->res->objs, r->key);
}

static int is_deleting(const ks_obj *o, cJSON **parsed)
{
    cJSON *p = ver_parse(o->cur);
    int d = json_get_str(p, "metadata.deletionTimestamp") != NULL;
    if (parsed)
        *parsed = p;
    else
        cJSON_Delete(p);
    return d;
}

static void remove_finalizer(ks *k, ks_obj *o, const char *f)
{
    cJSON *obj = ver_parse(o->cur);
    cJSON *fin = (cJSON *)json_get(obj, "metadata.finalizers");
    int i = 0;
    for (cJSON *x = fin ? fin->child : NULL; x; x = x->next, i++)
        if (cJSON_IsString(x) && strcmp(x->valuestring, f) == 0) {
            cJSON_DeleteItemFromArray(fin, i);
            break;
        }
    if (fin && json_len(fin) == 0)
        json_del(json_obj_ensure(obj, "metadata"), "finalizers");
    ks_ver *v = NULL;
    ks_store_update(k, o, obj, 0, &v, NULL);
    ver_unref(v);
}

/* Does this owner reference of a dependent resolve to a live owner? */
static int owner_alive(ks *k, const ks_obj *dep, const char *uid)
{
    ks_obj *owner = map_get(&k->uids, uid);
    if (owner == NULL)
        return 0;
    if (owner->res->namespaced) {
        if (!dep->res->namespaced)
            return 0; /* a cluster-scoped dependent cannot have a namespaced owner */
        if (strcmp(ver_ns(owner->cur), ver_ns(dep->cur)) != 0)
            return 0;
    }
    return 1;
}

static objref *collect_deps(ks *k, const char *uid, int *n, int *blocking)
{
    ks_deps *b = map_get(&k->deps, uid);
    *n = 0;
    if (blocking)
        *blocking = 0;
    if (b == NULL)
        return NULL;
    int cap = 0;
    list_node *ln;
    list_foreach(ln, &b->head) cap++;
    objref *v = xcalloc((size_t)cap + 1, sizeof(objref));
    list_foreach(ln, &b->head)
    {
        ks_oref *r = list_entry(ln, ks_oref, link);
        v[*n].res = r->obj->res;
        v[*n].key = xstrdup(r->obj->key);
        (*n)++;
        if (blocking && r->block)
            (*blocking)++;
    }
    return v;
}

static void free_refs(objref *v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i].key);
    free(v);
}

static void process_owner(ks *k, const char *uid)
{
    ks_obj *owner = map_get(&k->uids, uid);
    cJSON *oo = NULL;
    /* An owner that is not being deleted waits for nothing: its dependents
     * are not collected (a pod's deletion marks its NodeSet, and collecting
     * the NodeSet's thousands of pods for every one made each delete cost
     * the fleet). */
    if (owner && !is_deleting(owner, &oo)) {
        cJSON_Delete(oo);
        return;
    }
    int n;
    objref *deps = collect_deps(k, uid, &n, NULL);
    if (owner == NULL) {
        /* gone: every dependent gets checked */
        for (int i = 0; i < n; i++) {
            ks_obj *d = objref_get(&deps[i]);
            if (d && !list_is_linked(&d->gc_link))
                list_insert_tail(&k->gc_queue, &d->gc_link);
        }
        free_refs(deps, n);
        return;
    }
    if (has_finalizer(oo, "orphan")) {
        for (int i = 0; i < n; i++) {
            ks_obj *d = objref_get(&deps[i]);
            if (d == NULL)
                continue;
            cJSON *obj = ver_parse(d->cur);
            cJSON *refs = (cJSON *)json_get(obj, "metadata.ownerReferences");
            int j = 0;
            for (cJSON *r = refs ? refs->child : NULL; r;) {
                cJSON *next = r->next;
                if (strcmp(json_get_str_or(r, "uid", ""), uid) == 0)
                    cJSON_DeleteItemFromArray(refs, j);
                else
                    j++;
                r = next;
            }
            if (refs && json_len(refs) == 0)
                json_del(json_obj_ensure(obj, "metadata"), "ownerReferences");
            ks_ver *v = NULL;
            ks_store_update(k, d, obj, 0, &v, NULL);
            ver_unref(v);
        }
        owner = map_get(&k->uids, uid);
        if (owner)
            remove_finalizer(k, owner, "orphan");
    } else if (has_finalizer(oo, "foregroundDeletion")) {
        for (int i = 0; i < n; i++) {
            ks_obj *d = objref_get(&deps[i]);
            if (d == NULL || is_deleting(d, NULL))
                continue;
            int gone;
            ks_ver *v = api_obj_delete(k, d, "Foreground", -1, &gone);
            ver_unref(v);
        }
        int left, blocking;
        objref *rest = collect_deps(k, uid, &left, &blocking);
        free_refs(rest, left);
        owner = map_get(&k->uids, uid);
        if (owner && blocking == 0)
            remove_finalizer(k, owner, "foregroundDeletion");
    }
    cJSON_Delete(oo);
    free_refs(deps, n);
}

static void check_dependent(ks *k, ks_obj *o)
{
    if (o->n_orefs == 0)
        return;
    for (int i = 0; i < o->n_orefs; i++)
        if (owner_alive(k, o, o->orefs[i].uid))
            return;
    if (is_deleting(o, NULL))
        return;
    int gone;
    ks_ver *v = api_obj_delete(k, o, "Background", -1, &gone);
    ver_unref(v);
}

static int ns_terminating(const ks_obj *o)
{
    return is_deleting(o, NULL);
}

/* Delete everything in terminating namespaces; finish the namespace once empty.
 * Also the CRD cleanup finalizer. Returns 1 while work remains. */
static int namespace_pass(ks *k)
{
    int pending = 0;
    ks_res *nsr = res_find(k, "", "namespaces");
    size_t it = 0;
    const char *key;
    void *val;
    char *names[256];
    int nn = 0;
    while (nsr && map_next(&nsr->objs, &it, &key, &val))
        if (nn < 256 && ns_terminating(val))
            names[nn++] = xstrdup(((ks_obj *)val)->key);
    for (int i = 0; i < nn; i++) {
        size_t left = 0;
        list_node *ln;
        list_foreach(ln, &k->resources)
        {
            ks_res *r = list_entry(ln, ks_res, link);
            if (r->removed || !r->namespaced)
                continue;
            size_t cnt;
            ks_ver **vs = ks_store_sorted(r, names[i], &cnt);
            char **keys = xcalloc(cnt + 1, sizeof(char *));
            for (size_t j = 0; j < cnt; j++)
                keys[j] = xstrdup(ver_name(vs[j]));
            free(vs);
            for (size_t j = 0; j < cnt; j++) {
                ks_obj *o = obj_find(r, names[i], keys[j]);
                if (o && !is_deleting(o, NULL)) {
                    int gone;
                    ks_ver *v = api_obj_delete(k, o, "Background", -1, &gone);
                    ver_unref(v);
                }
                if (obj_find(r, names[i], keys[j]))
                    left++;
                free(keys[j]);
            }
            free(keys);
        }
        ks_obj *ns = obj_find(nsr, NULL, names[i]);
        if (left == 0 && ns) {
            cJSON *obj = ver_parse(ns->cur);
            json_del(json_obj_ensure(obj, "spec"), "finalizers");
            ks_ver *v = NULL;
            ks_store_update(k, ns, obj, 0, &v, NULL);
            ver_unref(v);
        } else if (left) {
            pending = 1;
        }
        free(names[i]);
    }
    /* CRDs being deleted: remove their custom objects, then the finalizer */
    ks_res *crdr = res_find(k, "apiextensions.k8s.io", "customresourcedefinitions");
    nn = 0;
    it = 0;
    while (crdr && map_next(&crdr->objs, &it, &key, &val))
        if (nn < 256 && is_deleting(val, NULL))
            names[nn++] = xstrdup(((ks_obj *)val)->key);
    for (int i = 0; i < nn; i++) {
        ks_res *cr = NULL;
        list_node *ln;
        list_foreach(ln, &k->resources)
        {
            ks_res *r = list_entry(ln, ks_res, link);
            if (!r->removed && r->crd_name && strcmp(r->crd_name, names[i]) == 0)
                cr = r;
        }
        size_t cnt = 0;
        if (cr) {
            ks_ver **vs = ks_store_sorted(cr, NULL, &cnt);
            objref *refs = xcalloc(cnt + 1, sizeof(objref));
            for (size_t j = 0; j < cnt; j++) {
                char kb[600];
                obj_key(kb, sizeof(kb), cr->namespaced ? ver_ns(vs[j]) : NULL, ver_name(vs[j]));
                refs[j].res = cr;
                refs[j].key = xstrdup(kb);
            }
            free(vs);
            for (size_t j = 0; j < cnt; j++) {
                ks_obj *o = objref_get(&refs[j]);
                if (o && !is_deleting(o, NULL)) {
                    int gone;
                    ks_ver *v = api_obj_delete(k, o, "Background", -1, &gone);
                    ver_unref(v);
                }
            }
            free_refs(refs, (int)cnt);
            cnt = cr->objs.count;
        }
        ks_obj *crd = obj_find(crdr, NULL, names[i]);
        if (cnt == 0 && crd) {
            cJSON *obj = ver_parse(crd->cur);
            int had = has_finalizer(obj, "customresourcecleanup.apiextensions.k8s.io");
            cJSON_Delete(obj);
            if (had)
                remove_finalizer(k, crd, "customresourcecleanup.apiextensions.k8s.io");
        } else if (cnt) {
            pending = 1;
        }
        free(names[i]);
    }
    return pending;
}

static void gc_run(ks *k)
{
    for (int round = 0; round < 32; round++) {
        int did = 0;
        while (k->gc_owners.count) {
            size_t it = 0;
            const char *key;
            void *val;
            map_next(&k->gc_owners, &it, &key, &val);
            char *uid = map_del(&k->gc_owners, key);
            process_owner(k, uid);
            free(uid);
            did = 1;
        }
        while (!list_empty(&k->gc_queue)) {
            ks_obj *o = list_entry(k->gc_queue.next, ks_obj, gc_link);
            list_remove(&o->gc_link);
            check_dependent(k, o);
            did = 1;
        }
        if (!did)
            break;
    }
    if (k->gc_ns_pending)
        k->gc_ns_pending = namespace_pass(k);
    if (k->gc_owners.count || !list_empty(&k->gc_queue))
        ctrl_gc_kick(k);
}

static void gc_timer_cb(uv_timer_t *t)
{
    ks *k = t->data;
    gc_run(k);
}

static void gc_closed(uv_handle_t *h)
{
    ks__handle_closed(h->data);
}

void ctrl_init(ks *k)
{
    uv_timer_init(k->loop, &k->gc_timer);
    k->gc_timer.data = k;
    k->pending_closes++;
    list_init(&k->gc_queue);
    map_init_type(&k->gc_owners, &map_type_free_val); /* uid -> itself */
    map_init_type(&k->deps, &map_type_free_val);      /* uid -> ks_deps */
}

void ctrl_close(ks *k)
{
    uv_timer_stop(&k->gc_timer);
    uv_close((uv_handle_t *)&k->gc_timer, gc_closed);
    map_free(&k->gc_owners);
}
