#include "reconcilers/controller.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/rfc3339.h"
#include "reconcilers/cluster_rc.h"
#include "reconcilers/cluster_watch.h"
#include "reconcilers/controller_build.h"
#include "reconcilers/objsync.h"
#include "reconcilers/reconcilers.h"
#include "reconcilers/tenancy.h"
#include "watchers/kinds.h"
#include "watchers/slinky.h"

#define SMON_CRD_NAME "servicemonitors.monitoring.coreos.com"
/* How long the answer "is the ServiceMonitor CRD installed" is trusted. */
#define CRD_TTL_MS (5 * 60 * 1000)
/* ServiceMonitors are not watched: one we converged is checked again after
 * this long (someone may have deleted or edited it). */
#define SMON_TTL_MS (10 * 60 * 1000)

static void reconcile(crc_pass *p);
static void forget(crc_module *m, const char *key);

enum crd_state { CRD_UNKNOWN = 0, CRD_PRESENT, CRD_ABSENT };

/* What we last did about one Controller's ServiceMonitor. */
struct smon_state {
    char *key;
    int busy;            /* a GET/create/patch/delete chain is running */
    int want;            /* 1: present with `hash`, 0: absent */
    char hash[65];       /* SHA-256 of the desired object's JSON */
    uint64_t checked_ms; /* when that was last confirmed */
};

static void smon_state_free(void *v)
{
    struct smon_state *st = v;
    free(st->key);
    free(st);
}

static const map_type smon_state_type = {.val_free = smon_state_free};

struct controller_state {
    crc_module m; /* first: crc_state_new */
    controller_ping_fn ping;
    void *ping_data;
    enum crd_state crd;
    int crd_checking;
    uint64_t crd_checked_ms;
    map_t smon;       /* key -> struct smon_state */
    crc_gates labels; /* pod key -> active-label patch */
    unsigned epoch;   /* bumped at stop: completions of an older epoch only clean up */
};

static controller_state *of(crc_module *m)
{
    return container_of(m, controller_state, m);
}

/* A Controller's cluster is itself: it outlives its NodeSets. */
static void cluster_of(const sobj *o, const char **ns, const char **name)
{
    *ns = o->ns;
    *name = o->name;
}

static const crc_module module = {
    .name = CONTROLLER_CONTROLLER,
    .kind = CTLB_KIND,
    .store = OPK_CONTROLLERS,
    .res = &SLINKY_CONTROLLERS,
    .sync = reconcile,
    .forget = forget,
    .cluster_of = cluster_of,
};

static void *state_new(void)
{
    controller_state *cs = crc_state_new(sizeof(*cs), &module);
    map_init_type(&cs->smon, &smon_state_type);
    return cs;
}

static void state_free(void *state)
{
    controller_state *cs = state;
    if (cs == NULL)
        return;
    map_free(&cs->smon);
    crc_gates_clear(&cs->labels);
    crc_state_free(cs);
}

controller_state *controller_of(const operator *op)
{
    return op_state(op, OPR_CONTROLLER);
}

void controller_enqueue(operator *op, const char *key)
{
    crc_enqueue_key(&controller_of(op)->m, key);
}

void controller_set_ping_hook(operator *op, controller_ping_fn fn, void *data)
{
    controller_state *cs = controller_of(op);
    cs->ping = fn;
    cs->ping_data = data;
}

static uint64_t now_ms(void)
{
    return uv_hrtime() / 1000000u;
}

/* ------------------------------------------------------------------ */
/* watches */

typedef int (*uses_fn)(const cJSON *controller, const char *name);

/* Queue the Controllers of ns that `uses` the object called name. */
static void enqueue_users(crc_module *m, const char *ns, const char *name, uses_fn uses)
{
    size_t it = 0;
    const sobj *c;
    while ((c = store_next(op_store(m->op, OPK_CONTROLLERS), &it)))
        if (strcmp(c->ns, ns) == 0 && uses(c->json, name))
            crc_enqueue(m, c->ns, c->name);
}

/* The store handlers below get the crc_module as data. */

/* Every Controller whose accountingRef names it, in any namespace
 * (accountingRef.namespace). */
static void on_accounting(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    const sobj *o = new_obj ? new_obj : old_obj;
    crc_module *m = data;
    size_t it = 0;
    const sobj *c;
    while ((c = store_next(op_store(m->op, OPK_CONTROLLERS), &it)))
        if (cw_controller_uses_accounting(c->json, o->ns, o->name))
            crc_enqueue(m, c->ns, c->name);
}

static void on_nodeset(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    cw_ref ctl[2];
    int n = cw_nodeset_affects(old_obj ? old_obj->json : NULL, new_obj ? new_obj->json : NULL, ctl);
    for (int i = 0; i < n; i++)
        crc_enqueue(data, ctl[i].ns, ctl[i].name);
}

static void on_secret(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    crc_on_owned(s, old_obj, new_obj, data);
    const sobj *o = new_obj ? new_obj : old_obj;
    enqueue_users(data, o->ns, o->name, cw_controller_uses_secret);
}

static void on_configmap(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    crc_on_owned(s, old_obj, new_obj, data);
    const sobj *o = new_obj ? new_obj : old_obj;
    enqueue_users(data, o->ns, o->name, cw_controller_uses_configmap);
}

static void on_pvc(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    const sobj *o = new_obj ? new_obj : old_obj;
    enqueue_users(data, o->ns, o->name, cw_controller_uses_pvc);
}

/* slurmctld pods: a new or vanished pod may need the active label moved
 * and its config hash set; so does someone else changing either. Readiness
 * flaps do not matter. */
static void on_pod(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    const sobj *o = new_obj ? new_obj : old_obj;
    const char *app = sobj_label(o, CLC_LABEL_NAME);
    if (app == NULL || strcmp(app, CTLB_APP) != 0)
        return;
    if (old_obj && new_obj) {
        const char *a = sobj_label(old_obj, CLC_LABEL_CONTROLLER_ACTIVE);
        const char *b = sobj_label(new_obj, CLC_LABEL_CONTROLLER_ACTIVE);
        const char *ca = sobj_annotation(old_obj, ANN_CONTROLLER_CONFIG);
        const char *cb = sobj_annotation(new_obj, ANN_CONTROLLER_CONFIG);
        if (strcmp(a ? a : "", b ? b : "") == 0 && strcmp(ca ? ca : "", cb ? cb : "") == 0 &&
            (old_obj->deleting != 0) == (new_obj->deleting != 0))
            return;
    }
    crc_enqueue(data, o->ns, sobj_label(o, CLC_LABEL_INSTANCE));
}

static void setup(operator *op)
{
    crc_module *m = &controller_of(op)->m;
    crc_setup(m, op);
    store_on_change(op_store(op, OPK_STATEFULSETS), crc_on_owned, m);
    store_on_change(op_store(op, OPK_SERVICES), crc_on_owned, m);
    store_on_change(op_store(op, OPK_CONFIGMAPS), on_configmap, m);
    store_on_change(op_store(op, OPK_SECRETS), on_secret, m);
    store_on_change(op_store(op, OPK_ACCOUNTINGS), on_accounting, m);
    store_on_change(op_store(op, OPK_NODESETS), on_nodeset, m);
    store_on_change(op_store(op, OPK_PVCS), on_pvc, m);
    store_on_change(op_store(op, OPK_PODS), on_pod, m);
}

/* ------------------------------------------------------------------ */
/* ServiceMonitor */

static void forget(crc_module *m, const char *key)
{
    map_drop(&of(m)->smon, key);
}

static void enqueue_all(crc_module *m)
{
    size_t it = 0;
    const sobj *c;
    while ((c = store_next(op_store(m->op, OPK_CONTROLLERS), &it)))
        crc_enqueue_key(m, c->key);
}

/* The completions below hold the state: it outlives every request (the
 * operator frees it once its client has closed), and the epoch tells a
 * completion from before a stop. */
struct crd_ctx {
    controller_state *cs;
    unsigned epoch;
};

static void crd_got(int err, const cJSON *obj, const kube_status *st, void *data)
{
    struct crd_ctx *c = data;
    controller_state *cs = c->cs;
    int current = c->epoch == cs->epoch;
    free(c);
    if (!current || err == OP_ECANCELED)
        return;
    cs->crd_checking = 0;
    enum crd_state was = cs->crd;
    if (err == 0) {
        cs->crd = CRD_PRESENT;
    } else {
        if (err != OP_ENOTFOUND)
            log_warn("controller: cannot read CRD %s (%s); ServiceMonitors are skipped", SMON_CRD_NAME,
                     err_str(err));
        cs->crd = CRD_ABSENT;
    }
    cs->crd_checked_ms = now_ms();
    if (cs->crd != was)
        enqueue_all(&cs->m);
}

/* The CRD state, starting a check when it is unknown or stale. */
static enum crd_state crd_state(controller_state *cs)
{
    uint64_t now = now_ms();
    if (!cs->crd_checking && (cs->crd == CRD_UNKNOWN || now - cs->crd_checked_ms > CRD_TTL_MS)) {
        struct crd_ctx *c = xcalloc(1, sizeof(*c));
        c->cs = cs;
        c->epoch = cs->epoch;
        cs->crd_checking = 1;
        kube_get(cs->m.op->client, &KUBE_CRDS, NULL, SMON_CRD_NAME, NULL, crd_got, c);
    }
    return cs->crd;
}

struct smon_ctx {
    controller_state *cs;
    unsigned epoch;
    char *key; /* Controller key */
    char *ns, *name;
    char *uid;      /* the Controller's uid (ours to delete) */
    cJSON *desired; /* NULL: want it gone */
    const char *verb;
};

static void smon_ctx_free(struct smon_ctx *c)
{
    free(c->key);
    free(c->ns);
    free(c->name);
    free(c->uid);
    cJSON_Delete(c->desired);
    free(c);
}

static void smon_done(struct smon_ctx *c, int err)
{
    controller_state *cs = c->cs;
    operator *op = cs->m.op;
    if (c->epoch != cs->epoch || err == OP_ECANCELED) {
        smon_ctx_free(c);
        return;
    }
    struct smon_state *st = map_get(&cs->smon, c->key);
    if (st)
        st->busy = 0;
    if (err) {
        /* Forget what we knew so the next pass starts over. */
        forget(&cs->m, c->key);
        const sobj *cr = store_get_key(op_store(op, OPK_CONTROLLERS), c->key);
        const char *reason = strcmp(c->verb, "create") == 0   ? "CreateFailed"
                             : strcmp(c->verb, "delete") == 0 ? "DeleteFailed"
                             : strcmp(c->verb, "patch") == 0  ? "PatchFailed"
                                                              : "SyncFailed";
        if (cr)
            op_warn(op, cr, CTLB_KIND, reason, "Failed to %s ServiceMonitor %s: %s", c->verb, c->name,
                    err_str(err));
        crc_write_failed(&cs->m, c->key);
    } else {
        if (st)
            st->checked_ms = now_ms();
        if (strcmp(c->verb, "create") == 0) {
            const sobj *cr = store_get_key(op_store(op, OPK_CONTROLLERS), c->key);
            if (cr)
                op_event(op, cr, CTLB_KIND, "CreateSucceeded", "Create", "Created ServiceMonitor %s",
                         c->name);
        }
    }
    smon_ctx_free(c);
}

static void smon_written(int err, const cJSON *obj, const kube_status *st, void *data)
{
    struct smon_ctx *c = data;
    if (err == OP_ENOTFOUND && strcmp(c->verb, "delete") == 0)
        err = 0;
    smon_done(c, err);
}

static int owned_by(const cJSON *obj, const char *uid)
{
    const cJSON *refs = json_get(obj, "metadata.ownerReferences");
    for (const cJSON *r = cJSON_IsArray(refs) ? refs->child : NULL; r; r = r->next)
        if (strcmp(json_get_str_or(r, "uid", ""), uid) == 0)
            return 1;
    return 0;
}

static void smon_got(int err, const cJSON *obj, const kube_status *st, void *data)
{
    struct smon_ctx *c = data;
    if (c->epoch != c->cs->epoch || err == OP_ECANCELED || (err && err != OP_ENOTFOUND)) {
        smon_done(c, err);
        return;
    }
    operator *op = c->cs->m.op;
    kube_client *kc = op->client;
    if (c->desired) {
        if (err == OP_ENOTFOUND) {
            c->verb = "create";
            kube_create(kc, &KUBE_SERVICEMONITORS, c->ns, c->desired, smon_written, c);
            return;
        }
        if (!objsync_owned(c->desired, obj)) {
            /* Somebody else's ServiceMonitor has the name: left alone. */
            const sobj *cr = store_get_key(op_store(op, OPK_CONTROLLERS), c->key);
            if (cr)
                op_warn(op, cr, CTLB_KIND, CRC_REASON_NOT_OWNED,
                        "ServiceMonitor %s/%s exists and is not owned by Controller %s: left alone", c->ns,
                        c->name, cr->name);
            smon_done(c, 0);
            return;
        }
        cJSON *patch = objsync_diff(c->desired, obj);
        if (patch) {
            c->verb = "patch";
            kube_patch(kc, &KUBE_SERVICEMONITORS, c->ns, c->name, NULL, KUBE_PATCH_MERGE, patch, NULL, 0,
                       smon_written, c);
            cJSON_Delete(patch);
            return;
        }
    } else if (err == 0 && owned_by(obj, c->uid)) {
        c->verb = "delete";
        kube_delete_opts o = {
            .uid = json_get_str(obj, "metadata.uid"), .grace_seconds = -1, .propagation = "Background"};
        kube_delete(kc, &KUBE_SERVICEMONITORS, c->ns, c->name, &o, smon_written, c);
        return;
    }
    smon_done(c, 0);
}

static void sync_service_monitor(crc_pass *p)
{
    controller_state *cs = of(p->m);
    cJSON *sm = NULL;
    char *why = NULL;
    int rc = ctlb_service_monitor(p->cr, &sm, &why);
    if (rc < 0) {
        crc_step_failed(p, "ServiceMonitor", rc, why);
        return;
    }
    free(why);
    int want = sm != NULL;
    enum crd_state crd = crd_state(cs);
    if (crd != CRD_PRESENT) {
        /* Unknown: the answer queues every Controller. Absent: nothing to
         * create, and nothing of ours can exist. */
        if (want && crd == CRD_ABSENT)
            log_debug("controller %s: ServiceMonitor skipped, CRD %s not installed", p->o->key,
                      SMON_CRD_NAME);
        forget(p->m, p->o->key);
        cJSON_Delete(sm);
        return;
    }
    char hash[65] = "";
    if (want) {
        char *text = json_dump(sm);
        clc_hash_str(text, hash);
        free(text);
    }
    struct smon_state *st = map_get(&cs->smon, p->o->key);
    uint64_t now = now_ms();
    if (st && (st->busy || (st->want == want && strcmp(st->hash, hash) == 0 &&
                            (!want || now - st->checked_ms < SMON_TTL_MS)))) {
        if (want)
            crc_requeue_after(p, SMON_TTL_MS);
        cJSON_Delete(sm);
        return;
    }
    if (st == NULL) {
        st = xcalloc(1, sizeof(*st));
        st->key = xstrdup(p->o->key);
        map_put(&cs->smon, st->key, st);
    }
    st->busy = 1;
    st->want = want;
    snprintf(st->hash, sizeof(st->hash), "%s", hash);
    struct smon_ctx *c = xcalloc(1, sizeof(*c));
    c->cs = cs;
    c->epoch = cs->epoch;
    c->key = xstrdup(p->o->key);
    c->ns = xstrdup(p->o->ns);
    c->name = ctlb_name(p->o->name);
    c->uid = xstrdup(p->o->uid);
    c->desired = sm;
    c->verb = "read";
    kube_get(p->op->client, &KUBE_SERVICEMONITORS, c->ns, c->name, NULL, smon_got, c);
    if (want)
        crc_requeue_after(p, SMON_TTL_MS);
}

/* ------------------------------------------------------------------ */
/* the active slurmctld */

/* The default Slurm ping: no Slurm client here, the answer is unknown. The
 * slurmio client plugs the real one in with controller_set_ping_hook(). */
static int controller_ping_unknown(operator *op, const char *ns, const char *name, int replicas, void *data)
{
    return -1;
}

struct label_ctx {
    controller_state *cs;
    crc_gate *t;
    char *owner;
};

static void label_patched(int err, const cJSON *obj, const kube_status *st, void *data)
{
    struct label_ctx *c = data;
    crc_gate_end(&c->cs->labels, c->t, err, err == 0 ? json_get_str(obj, "metadata.resourceVersion") : NULL);
    if (err && err != OP_ECANCELED && err != OP_ENOTFOUND && c->cs->m.q) {
        log_warn("controller %s: patching a slurmctld pod failed: %s", c->owner, err_str(err));
        crc_write_failed(&c->cs->m, c->owner);
    }
    free(c->owner);
    free(c);
}

/* The ordinal of the live slurmctld pod that has the active label, or -1. */
static int labelled_ordinal(store *pods, const char *ns, const char *ctl, const char *sts, int replicas)
{
    for (int i = 0; i < replicas; i++) {
        char name[512];
        snprintf(name, sizeof(name), "%s-%d", sts, i);
        const sobj *pod = store_get(pods, ns, name);
        if (pod == NULL || pod->deleting)
            continue;
        const char *inst = sobj_label(pod, CLC_LABEL_INSTANCE);
        const char *cur = sobj_label(pod, CLC_LABEL_CONTROLLER_ACTIVE);
        if (inst && strcmp(inst, ctl) == 0 && cur && strcmp(cur, "true") == 0)
            return i;
    }
    return -1;
}

/* The hash the slurmctld pods' ANN_CONTROLLER_CONFIG should carry: that of
 * the `<ctl>-config` ConfigMap built in this pass, once the API server has it
 * (the cached copy is the same), so that the kubelet, syncing the pod for
 * the new annotation, projects the new files; "" while it is not there yet
 * (the ConfigMap's watch event queues the next pass). */
static void config_seen_hash(crc_pass *p, const cJSON *config, char out[65])
{
    out[0] = '\0';
    if (config == NULL)
        return;
    char *name = ctlb_config_name(p->o->name);
    const cJSON *stored = clc_get(&p->env, "ConfigMap", name);
    free(name);
    char want[65], have[65];
    clc_hash_data(config, 0, want);
    clc_hash_data(stored, 0, have);
    if (*want && strcmp(want, have) == 0)
        memcpy(out, want, sizeof(want));
}

/* The active label on the slurmctld pod Slurm says is in control, and on
 * every live slurmctld pod the hash of its current ConfigMap
 * (ANN_CONTROLLER_CONFIG, config_seen_hash; conf "" leaves it alone). The
 * annotation is what lets a NodeSet change, which never rolls slurmctld
 * (controller_build.h), reach it in seconds: the kubelet refreshes a
 * projected ConfigMap about once a minute, but at once when the pod
 * changes, and the reconfigure sidecar then runs `scontrol reconfigure`. */
static void sync_active(crc_pass *p, const char *conf)
{
    if (clc_is_external(p->cr))
        return;
    controller_state *cs = of(p->m);
    int replicas = clc_controller_replicas(p->cr);
    controller_ping_fn ping = cs->ping ? cs->ping : controller_ping_unknown;
    int active = ping(p->op, p->o->ns, p->o->name, replicas, cs->ping_data);
    store *pods = op_store(p->op, OPK_PODS);
    char *sts = ctlb_name(p->o->name);
    if (active == CONTROLLER_PING_UNKNOWN)
        active = labelled_ordinal(pods, p->o->ns, p->o->name, sts, replicas);
    if (active < 0 || active >= replicas)
        active = 0;
    /* Pods of the StatefulSet are named <sts>-<ordinal>; look at every
     * ordinal up to the replica count and past it while pods remain (a
     * scale-down in progress). */
    for (int i = 0; i < replicas + 1024; i++) {
        char name[512];
        snprintf(name, sizeof(name), "%s-%d", sts, i);
        const sobj *pod = store_get(pods, p->o->ns, name);
        if (pod == NULL) {
            if (i >= replicas)
                break;
            continue;
        }
        const char *inst = sobj_label(pod, CLC_LABEL_INSTANCE);
        if (inst == NULL || strcmp(inst, p->o->name) != 0)
            continue;
        const char *cur = sobj_label(pod, CLC_LABEL_CONTROLLER_ACTIVE);
        int want = i == active && !pod->deleting;
        int has = cur != NULL && strcmp(cur, "true") == 0;
        int label_ok = want == has && (want || cur == NULL);
        const char *seen = sobj_annotation(pod, ANN_CONTROLLER_CONFIG);
        int conf_ok = !*conf || pod->deleting || (seen && strcmp(seen, conf) == 0);
        if (label_ok && conf_ok)
            continue;
        if (crc_gate_busy(&cs->labels, pod->key, pod->rv))
            continue;
        cJSON *patch = cJSON_CreateObject();
        if (!label_ok) {
            cJSON *labels = json_obj_path_ensure(patch, "metadata.labels");
            if (want)
                json_set_str(labels, CLC_LABEL_CONTROLLER_ACTIVE, "true");
            else
                json_set(labels, CLC_LABEL_CONTROLLER_ACTIVE, cJSON_CreateNull());
            log_info("controller %s: %s is %s", p->o->key, pod->name, want ? "active" : "no longer active");
        }
        if (!conf_ok) {
            json_set_str(json_obj_path_ensure(patch, "metadata.annotations"), ANN_CONTROLLER_CONFIG, conf);
            log_info("controller %s: %s gets slurm.conf %.12s (its kubelet refreshes /etc/slurm)", p->o->key,
                     pod->name, conf);
        }
        struct label_ctx *c = xcalloc(1, sizeof(*c));
        c->cs = cs;
        c->t = crc_gate_begin(&cs->labels, pod->key, pod->rv);
        c->owner = xstrdup(p->o->key);
        kube_patch(p->op->client, &KUBE_PODS, pod->ns, pod->name, NULL, KUBE_PATCH_MERGE, patch, NULL, 0,
                   label_patched, c);
        cJSON_Delete(patch);
        crc_note_write(p);
    }
    free(sts);
}

/* ------------------------------------------------------------------ */
/* one pass */

/* The NodeSets that reference this Controller, from its namespace and the
 * namespaces it admits (controllerRef.namespace, tenancy.h). What a NodeSet
 * adds to slurm.conf is checked first (partconf.h): a bad Slurm name leaves
 * the NodeSet out, a bad partition config is left out of its partition line
 * (copies without it are kept in *copies, to be deleted after use), so no
 * NodeSet's text can make the file unparsable. */
static const cJSON **collect_nodesets(crc_pass *p, size_t *n, cJSON *copies)
{
    store *s = op_store(p->op, OPK_NODESETS);
    const cJSON **v = xcalloc(store_count(s) + 1, sizeof(*v));
    size_t it = 0, k = 0;
    const sobj *o;
    char why[512];
    int version = tnc_controller_slurm_version(p->cr);
    while ((o = store_next(s, &it))) {
        if (!cw_ref_is(o->json, "spec.controllerRef", p->o->ns, p->o->name) || !tnc_admits(p->cr, o->ns))
            continue;
        if (tnc_nodeset_conf_check(o->json, version, why, sizeof(why)) == 0) {
            v[k++] = o->json;
            continue;
        }
        cJSON *c = cJSON_Duplicate(o->json, 1);
        cJSON *part =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "spec"), "partition");
        if (cJSON_IsObject(part))
            cJSON_DeleteItemFromObjectCaseSensitive(part, "config");
        if (tnc_nodeset_conf_check(c, version, why, sizeof(why)) == 0) {
            cJSON_AddItemToArray(copies, c);
            v[k++] = c;
        } else {
            cJSON_Delete(c);
        }
    }
    *n = k;
    return v;
}

static void sync_statefulset(crc_pass *p, int rc, char *why, cJSON *sts)
{
    if (rc < 0 || sts == NULL) {
        crc_apply(p, "StatefulSet", rc, why, OPK_STATEFULSETS, &KUBE_STATEFULSETS, sts);
        return;
    }
    free(why);
    /* serviceName cannot change: a StatefulSet governed by another Service
     * is replaced (Slinky deletes it first). Not one adopted from Slinky
     * while what slurmop wants of it is unchanged (objsync.h): that one
     * keeps its slurmctld running with Slinky's Service. */
    const char *name = json_get_str_or(sts, "metadata.name", "");
    const sobj *cur = store_get(op_store(p->op, OPK_STATEFULSETS), p->o->ns, name);
    const char *have = cur ? json_get_str(cur->json, "spec.serviceName") : NULL;
    const char *want = json_get_str(sts, "spec.serviceName");
    int keep = 0;
    if (cur && have && want && strcmp(have, want) != 0) {
        /* As crc_ensure will hand it to objsync: without the fields an
         * update may not change. */
        cJSON *as_sent = cJSON_Duplicate(sts, 1);
        crc_strip_immutable(as_sent);
        keep = objsync_adopted_keeps(as_sent, cur->json);
        cJSON_Delete(as_sent);
    }
    if (cur && have && want && strcmp(have, want) != 0 && !keep) {
        log_info("controller %s: StatefulSet %s has serviceName %s, want %s: replacing it", p->o->key, name,
                 have, want);
        crc_delete(p, OPK_STATEFULSETS, &KUBE_STATEFULSETS, name);
        cJSON_Delete(sts);
        return;
    }
    crc_ensure(p, OPK_STATEFULSETS, &KUBE_STATEFULSETS, sts);
}

/* The status fields of a valid Controller: its conditions with
 * SlurmVersionSupported set (or removed for an external one). */
static cJSON *version_status(crc_pass *p)
{
    const char *st, *reason;
    char *msg;
    ctlb_version_condition(p->cr, &st, &reason, &msg);
    char now[32];
    rfc3339_now(now, 0);
    cJSON *conds = crc_conditions_set(json_get(p->cr, "status.conditions"), CTLB_COND_SLURM_VERSION, st,
                                      reason, msg, p->o->generation, now);
    free(msg);
    cJSON *fields = cJSON_CreateObject();
    /* No conditions at all stay absent (an empty list would be one more write). */
    if (cJSON_GetArraySize(conds) > 0 || json_len(json_get(p->cr, "status.conditions")) > 0)
        json_set(fields, "conditions", conds);
    else
        cJSON_Delete(conds);
    return fields;
}

static void reconcile(crc_pass *p)
{
    vclu_result r;
    memset(&r, 0, sizeof(r));
    int rc = vclu_controller(p->cr, crc_accepted(p), &p->env, &r);
    if (crc_validated(p, rc, &r)) {
        crc_status(p, NULL);
        return;
    }

    cJSON *obj = NULL;
    char *why = NULL;
    rc = ctlb_internal_service(p->cr, &obj, &why);
    crc_apply(p, "Internal Service", rc, why, OPK_SERVICES, &KUBE_SERVICES, obj);

    obj = NULL;
    why = NULL;
    rc = ctlb_service(p->cr, &obj, &why);
    crc_apply(p, "Service", rc, why, OPK_SERVICES, &KUBE_SERVICES, obj);

    size_t n = 0;
    cJSON *copies = cJSON_CreateArray();
    const cJSON **nodesets = collect_nodesets(p, &n, copies);
    cJSON *config = NULL;
    why = NULL;
    rc = ctlb_config(p->cr, nodesets, n, &p->env, &config, &why);
    free(nodesets);
    cJSON_Delete(copies);
    if (rc < 0) {
        crc_step_failed(p, "Config", rc, why);
        config = NULL;
    } else {
        free(why);
    }

    /* The StatefulSet hashes the ConfigMap built now, not the cached one, so
     * a config change rolls the pods in this very pass. */
    cJSON *sts = NULL;
    char *sts_why = NULL;
    int sts_rc = ctlb_statefulset(p->cr, config, &p->env, &sts, &sts_why);
    char conf[65];
    config_seen_hash(p, config, conf);
    crc_ensure(p, OPK_CONFIGMAPS, &KUBE_CONFIGMAPS, config);
    sync_statefulset(p, sts_rc, sts_why, sts);

    if (!clc_is_external(p->cr))
        sync_service_monitor(p);
    sync_active(p, conf);
    crc_status(p, version_status(p));
}

static int start(operator *op)
{
    return crc_start(&controller_of(op)->m);
}

static void stop(operator *op)
{
    controller_state *cs = controller_of(op);
    crc_stop(&cs->m);
    cs->epoch++;
    cs->crd = CRD_UNKNOWN;
    cs->crd_checking = 0;
    map_free(&cs->smon);
    crc_gates_clear(&cs->labels);
}

const op_reconciler RC_CONTROLLER = {
    .name = CONTROLLER_CONTROLLER,
    .slot = OPR_CONTROLLER,
    .new_state = state_new,
    .free_state = state_free,
    .setup = setup,
    .start = start,
    .stop = stop,
};
