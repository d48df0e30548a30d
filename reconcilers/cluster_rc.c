#include "reconcilers/cluster_rc.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/rfc3339.h"
#include "reconcilers/cluster_watch.h"
#include "reconcilers/tenancy.h"
#include "reconcilers/objsync.h"

/* While the caches fill, a pass would see owned objects as missing and
 * create them again (409) or, worse, generate keys and tokens twice. */
#define UNSYNCED_RETRY_MS 200
/* Bound on waiting for the watch event of our own write. */
#define GATE_AWAIT_MS 30000
/* Backoff after failed writes: BASE * 2^(failures-1), capped. */
#define BACKOFF_BASE_MS 200
#define BACKOFF_MAX_MS (5 * 60 * 1000)

struct backoff {
    char *key;
    unsigned failures;
    uint64_t not_before_ms;
};

struct accepted {
    char *key;
    char uid[40];
    cJSON *cr;
};

struct crc_gate {
    char *key;
    char *rv_seen; /* resourceVersion of the object the write was computed from */
    int in_flight;
    uint64_t deadline_ms;
};

static uint64_t now_ms(void)
{
    return uv_hrtime() / 1000000u;
}

/* ------------------------------------------------------------------ */
/* write gates */

static void gate_free(crc_gate *g)
{
    free(g->key);
    free(g->rv_seen);
    free(g);
}

int crc_gate_busy(crc_gates *g, const char *key, const char *cur_rv)
{
    crc_gate *t = map_get(&g->m, key);
    if (t == NULL)
        return 0;
    if (t->in_flight || (strcmp(t->rv_seen, cur_rv ? cur_rv : "") == 0 && now_ms() < t->deadline_ms))
        return 1;
    gate_free(map_del(&g->m, key));
    if (g->m.count == 0)
        map_free(&g->m);
    return 0;
}

crc_gate *crc_gate_begin(crc_gates *g, const char *key, const char *cur_rv)
{
    crc_gate *old = map_get(&g->m, key);
    if (old) {
        map_del(&g->m, key);
        if (old->in_flight)
            old->deadline_ms = 0; /* detached: its end frees it */
        else
            gate_free(old);
    }
    crc_gate *t = xcalloc(1, sizeof(*t));
    t->key = xstrdup(key);
    t->rv_seen = xstrdup(cur_rv ? cur_rv : "");
    t->in_flight = 1;
    assert(map_get(&g->m, key) == NULL);
    map_put(&g->m, t->key, t);
    return t;
}

void crc_gate_end(crc_gates *g, crc_gate *t, int err, const char *rv_new)
{
    assert(t->in_flight); /* a gate's write ends once */
    t->in_flight = 0;
    if (map_get(&g->m, t->key) != t) {
        gate_free(t); /* cleared or replaced meanwhile */
        return;
    }
    /* A write that changed nothing has no watch event to wait for. */
    if (err == 0 && rv_new && strcmp(rv_new, t->rv_seen) != 0) {
        t->deadline_ms = now_ms() + GATE_AWAIT_MS;
        return;
    }
    gate_free(map_del(&g->m, t->key));
    if (g->m.count == 0)
        map_free(&g->m);
}

void crc_gates_clear(crc_gates *g)
{
    const char *k;
    void *v;
    size_t it = 0;
    while (map_next(&g->m, &it, &k, &v)) {
        crc_gate *t = v;
        if (!t->in_flight)
            gate_free(t);
    }
    map_free(&g->m);
}

/* ------------------------------------------------------------------ */
/* queue plumbing */

void crc_enqueue_key(crc_module *m, const char *key)
{
    if (m->q && key && *key)
        wq_add(m->q, key);
}

void crc_enqueue(crc_module *m, const char *ns, const char *name)
{
    if (m->q == NULL || name == NULL || *name == '\0')
        return;
    char key[512];
    snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name);
    wq_add(m->q, key);
}

void crc_enqueue_owner(crc_module *m, const sobj *o)
{
    if (o && o->owner_kind && o->owner_name && strcmp(o->owner_kind, m->kind) == 0)
        crc_enqueue(m, o->ns, o->owner_name);
}

void crc_on_owned(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    crc_module *m = data;
    if (old_obj && (new_obj == NULL || old_obj->owner_name != new_obj->owner_name))
        crc_enqueue_owner(m, old_obj);
    if (new_obj)
        crc_enqueue_owner(m, new_obj);
}

static void accepted_free(void *v)
{
    struct accepted *a = v;
    cJSON_Delete(a->cr);
    free(a->key);
    free(a);
}

static void backoff_free(void *v)
{
    struct backoff *b = v;
    free(b->key);
    free(b);
}

static const map_type accepted_type = {.val_free = accepted_free};
static const map_type backoff_type = {.val_free = backoff_free};

/* A write for the CR key failed: hold its passes back for a while. */
void crc_write_failed(crc_module *m, const char *key)
{
    if (m->q == NULL)
        return;
    struct backoff *b = map_get(&m->backoff, key);
    if (b == NULL) {
        b = xcalloc(1, sizeof(*b));
        b->key = xstrdup(key);
        map_put(&m->backoff, b->key, b);
    }
    uint64_t delay = BACKOFF_BASE_MS;
    for (unsigned i = 1; i < b->failures && delay < BACKOFF_MAX_MS; i++)
        delay *= 2;
    if (delay > BACKOFF_MAX_MS)
        delay = BACKOFF_MAX_MS;
    b->failures++;
    b->not_before_ms = now_ms() + delay;
    wq_add_after(m->q, key, delay);
}

static void forget_key(crc_module *m, const char *key)
{
    map_drop(&m->backoff, key);
    map_drop(&m->full_warned, key);
    map_drop(&m->accepted, key);
    if (m->forget)
        m->forget(m, key);
}

static void pass_init(crc_pass *p, crc_module *m, const sobj *o, uint64_t first_add_ns)
{
    memset(p, 0, sizeof(*p));
    p->m = m;
    p->op = m->op;
    p->o = o;
    p->cr = o->json;
    p->first_add_ns = first_add_ns;
    p->env.get = crc_env_get;
    p->env.ud = p;
    p->env.cluster_domain = m->op->cluster_domain;
}

int crc_has_finalizer(const cJSON *obj, const char *name)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, json_get(obj, "metadata.finalizers"))
    {
        if (cJSON_IsString(f) && strcmp(f->valuestring, name) == 0)
            return 1;
    }
    return 0;
}

size_t crc_nodesets_of(operator *op, const char *ns, const char *name)
{
    size_t n = 0, it = 0;
    const sobj *o;
    while ((o = store_next(op_store(op, OPK_NODESETS), &it)))
        n += o->json && cw_ref_is(o->json, "spec.controllerRef", ns, name);
    return n;
}

struct fin_ctx {
    crc_module *m;
    crc_gate *t;
    char *key;
};

static void fin_written(int err, const cJSON *obj, const kube_status *st, void *data)
{
    struct fin_ctx *c = data;
    crc_gate_end(&c->m->fin_gates, c->t, err,
                 err == 0 ? json_get_str(obj, "metadata.resourceVersion") : NULL);
    if (err && err != OP_ECANCELED && err != OP_ENOTFOUND && c->m->q) {
        log_warn("%s %s: finalizer update failed: %s (%s)", c->m->kind, c->key, err_str(err),
                 st ? st->message : "");
        crc_write_failed(c->m, c->key);
    }
    free(c->key);
    free(c);
}

/* CRC_NODESETS_FINALIZER: added while NodeSets of the CR's cluster exist,
 * removed once the CR is being deleted and none is left (NodeSet events
 * queue the CR). It is not removed from a live CR whose NodeSets went: that
 * would be a write for nothing, and one may come back. */
static void hold_for_nodesets(crc_module *m, const sobj *o)
{
    const char *ns = NULL, *name = NULL;
    int has = crc_has_finalizer(o->json, CRC_NODESETS_FINALIZER);
    int busy;
    if (m->nodesets_served) {
        busy = m->nodesets_served(m->op, o) > 0;
    } else {
        m->cluster_of(o, &ns, &name);
        busy = ns && name && crc_nodesets_of(m->op, ns, name) > 0;
    }
    int want;
    if (o->deleting)
        want = has && busy;
    else
        want = has || busy;
    if (want == has || crc_gate_busy(&m->fin_gates, o->key, o->rv))
        return;
    if (o->deleting && ns && name)
        log_info("%s %s: no NodeSet of Controller %s/%s is left: releasing it", m->kind, o->key, ns, name);
    else if (o->deleting)
        log_info("%s %s: no NodeSet it serves is left: releasing it", m->kind, o->key);
    cJSON *list = cJSON_CreateArray();
    const cJSON *f;
    cJSON_ArrayForEach(f, json_get(o->json, "metadata.finalizers"))
    {
        if (cJSON_IsString(f) && strcmp(f->valuestring, CRC_NODESETS_FINALIZER) != 0)
            cJSON_AddItemToArray(list, cJSON_CreateString(f->valuestring));
    }
    if (want)
        cJSON_AddItemToArray(list, cJSON_CreateString(CRC_NODESETS_FINALIZER));
    cJSON *patch = cJSON_CreateObject();
    cJSON *meta = json_obj_ensure(patch, "metadata");
    json_set(meta, "finalizers", list);
    json_set_str(meta, "resourceVersion", o->rv);
    struct fin_ctx *c = xcalloc(1, sizeof(*c));
    c->m = m;
    c->key = xstrdup(o->key);
    c->t = crc_gate_begin(&m->fin_gates, o->key, o->rv);
    kube_patch(m->op->client, m->res, o->ns, o->name, NULL, KUBE_PATCH_MERGE, patch, NULL, 0, fin_written, c);
    cJSON_Delete(patch);
}

static wq_result run(crc_module *m, const char *key, uint64_t first_add_ns)
{
    operator *op = m->op;
    if (!op_caches_synced(op))
        return WQ_RESULT_AFTER(UNSYNCED_RETRY_MS);
    const sobj *o = store_get_key(op_store(op, m->store), key);
    if (o == NULL || o->json == NULL) {
        forget_key(m, key);
        return WQ_RESULT_OK;
    }
    struct accepted *a = map_get(&m->accepted, key);
    if (a && strcmp(a->uid, o->uid) != 0)
        forget_key(m, key); /* deleted and created again: a new object */
    if (m->cluster_of || m->nodesets_served)
        hold_for_nodesets(m, o);
    if (o->deleting)
        return WQ_RESULT_OK; /* owned objects go with the garbage collector */
    struct backoff *b = map_get(&m->backoff, key);
    if (b) {
        uint64_t now = now_ms();
        if (now < b->not_before_ms)
            return WQ_RESULT_AFTER(b->not_before_ms - now);
    }
    crc_pass p;
    pass_init(&p, m, o, first_add_ns);
    m->sync(&p);
    free(p.invalid);
    free(p.conflict);
    if (b && !p.wrote && !p.failed && !p.pending && !p.ref_wait)
        map_drop(&m->backoff, key); /* converged */
    if (p.failed && !p.ref_wait)
        return WQ_RESULT_REQUEUE;
    if (p.requeue_ms)
        return WQ_RESULT_AFTER(p.requeue_ms);
    return WQ_RESULT_OK;
}

static wq_result handle(const char *key, uint64_t first_add_ns, void *data)
{
    crc_module *m = data;
    uint64_t t0 = uv_hrtime();
    wq_result r = run(m, key, first_add_ns);
    op_observe_reconcile(m->op, m->name, r, (double)(uv_hrtime() - t0) / 1e9);
    return r;
}

void *crc_state_new(size_t size, const crc_module *tmpl)
{
    crc_module *m = xcalloc(1, size);
    m->name = tmpl->name;
    m->kind = tmpl->kind;
    m->store = tmpl->store;
    m->res = tmpl->res;
    m->sync = tmpl->sync;
    m->forget = tmpl->forget;
    m->cluster_of = tmpl->cluster_of;
    m->nodesets_served = tmpl->nodesets_served;
    return m;
}

void crc_state_free(void *state)
{
    if (state == NULL)
        return;
    crc_fini(state);
    free(state);
}

/* The CR itself changed (or went): its key is queued. */
static void on_cr(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    const sobj *o = new_obj ? new_obj : old_obj;
    crc_enqueue_key(data, o->key);
}

struct full_warned {
    char *key;
    uint64_t at_ms;
};

static void full_warned_free(void *v)
{
    struct full_warned *w = v;
    free(w->key);
    free(w);
}

static const map_type full_warned_type = {.val_free = full_warned_free};

void crc_setup(crc_module *m, operator *op)
{
    m->op = op;
    store_on_change(op_store(op, m->store), on_cr, m);
    map_init_type(&m->accepted, &accepted_type);
    map_init_type(&m->backoff, &backoff_type);
    map_init_type(&m->full_warned, &full_warned_type);
    map_init(&m->status_gates.m);
    map_init(&m->fin_gates.m);
}

int crc_start(crc_module *m)
{
    int err = 0;
    wq_opts o = {.name = m->name, .handler = handle, .data = m, .metrics = m->op->metrics};
    m->q = wq_new(m->op->loop, &o, &err);
    if (m->q == NULL)
        return err;
    size_t it = 0;
    const sobj *cr;
    while ((cr = store_next(op_store(m->op, m->store), &it)))
        wq_add(m->q, cr->key);
    return 0;
}

void crc_stop(crc_module *m)
{
    if (m->q)
        wq_shutdown(m->q, NULL, NULL);
    m->q = NULL;
    map_free(&m->accepted);
    map_free(&m->backoff);
    map_free(&m->full_warned);
    crc_gates_clear(&m->status_gates);
    crc_gates_clear(&m->fin_gates);
}

void crc_fini(crc_module *m)
{
    crc_stop(m);
}

/* ------------------------------------------------------------------ */
/* lookups */

const cJSON *crc_env_get(void *ud, const char *kind, const char *name)
{
    crc_pass *p = ud;
    enum op_kind k;
    if (strcmp(kind, "Secret") == 0 || strcmp(kind, "ConfigMap") == 0) {
        int pending = 0;
        const sobj *o =
            op_ref_get(p->op, kind[0] == 'S' ? OPK_SECRETS : OPK_CONFIGMAPS, p->o->ns, name, &pending);
        if (pending == OP_REF_FULL)
            crc_ref_full(p, kind, p->o->ns, name);
        else if (pending)
            crc_ref_wait(p);
        return o ? o->json : NULL;
    }
    /* The Controller and the Accounting are where the CR's reference points,
     * which may be another namespace (cw_ref_ns). */
    const char *ns = p->o->ns;
    if (strcmp(kind, "PersistentVolumeClaim") == 0) {
        k = OPK_PVCS;
    } else if (strcmp(kind, "Controller") == 0) {
        k = OPK_CONTROLLERS;
        ns = cw_ref_ns(p->cr, "spec.controllerRef");
    } else if (strcmp(kind, "Accounting") == 0) {
        k = OPK_ACCOUNTINGS;
        ns = cw_ref_ns(p->cr, "spec.accountingRef");
    } else {
        return NULL;
    }
    if (ns == NULL)
        return NULL;
    const sobj *o = store_get(op_store(p->op, k), ns, name);
    return o ? o->json : NULL;
}

void crc_ref_wait(crc_pass *p)
{
    if (!p->ref_wait)
        log_debug("%s %s: waiting for the first read of a referenced object", p->m->kind, p->o->key);
    p->ref_wait = 1;
    crc_requeue_after(p, CRC_REF_WAIT_MS);
}


void crc_ref_full(crc_pass *p, const char *kind, const char *ns, const char *name)
{
    crc_ref_wait(p);
    crc_requeue_after(p, CRC_REF_FULL_RETRY_MS);
    if (p->requeue_ms < CRC_REF_FULL_RETRY_MS)
        p->requeue_ms = CRC_REF_FULL_RETRY_MS; /* not every 200 ms while the table stays full */
    if (p->ref_full)
        return;
    p->ref_full = 1;
    crc_module *m = p->m;
    uint64_t now = now_ms();
    struct full_warned *w = map_get(&m->full_warned, p->o->key);
    if (w && now - w->at_ms < CRC_REF_FULL_WARN_MS)
        return;
    if (now - m->full_window_ms >= 10000) {
        m->full_window_ms = now;
        m->full_window_n = 0;
    }
    if (m->full_window_n >= CRC_REF_FULL_WARN_BURST)
        return;
    m->full_window_n++;
    if (w == NULL) {
        w = xcalloc(1, sizeof(*w));
        w->key = xstrdup(p->o->key);
        map_put(&m->full_warned, w->key, w);
    }
    w->at_ms = now;
    op_warn(p->op, p->o, p->m->kind, CRC_REASON_REF_FULL,
            "%s %s/%s is not read yet: the operator's table of referenced objects has no room for it (the "
            "namespace's share or the whole table is full); this object waits and retries, nothing of it "
            "changes meanwhile",
            kind, ns, name);
}

const cJSON *crc_accepted(const crc_pass *p)
{
    const struct accepted *a = map_get(&p->m->accepted, p->o->key);
    return a && strcmp(a->uid, p->o->uid) == 0 ? a->cr : NULL;
}

/* ------------------------------------------------------------------ */
/* events and steps */

void crc_note_write(crc_pass *p)
{
    if (!p->wrote)
        op_observe_action(p->op, p->m->name, p->first_add_ns);
    p->wrote = 1;
}

void crc_requeue_after(crc_pass *p, uint32_t ms)
{
    if (ms == 0)
        ms = 1;
    if (p->requeue_ms == 0 || ms < p->requeue_ms)
        p->requeue_ms = ms;
}

/* A Controller or Accounting of another namespace only when it admits ours
 * (tenancy.h); "not there" reads the same as "not admitted". */
static void refs_admitted(crc_pass *p, vclu_result *r)
{
    static const struct {
        const char *ref, *kind;
        enum op_kind k;
    } refs[] = {{"spec.controllerRef", "Controller", OPK_CONTROLLERS},
                {"spec.accountingRef", "Accounting", OPK_ACCOUNTINGS}};
    for (size_t i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) {
        char path[64];
        snprintf(path, sizeof(path), "%s.name", refs[i].ref);
        const char *name = json_get_str(p->cr, path), *ns = cw_ref_ns(p->cr, refs[i].ref);
        if (name == NULL || *name == '\0' || ns == NULL || strcmp(ns, p->o->ns) == 0)
            continue;
        const sobj *o = store_get(op_store(p->op, refs[i].k), ns, name);
        if (o == NULL || !tnc_admits(o->json, p->o->ns))
            vclu_add_error(r, tnc_refused(refs[i].ref, refs[i].kind, ns, name, p->o->ns));
    }
}

int crc_validated(crc_pass *p, int rc, vclu_result *r)
{
    /* With --namespace, a reference into a namespace slurmop does not watch
     * could never be followed (no cache, no RBAC there): say so instead of
     * reporting the object "not found" forever. */
    const char *rns = NULL;
    const char *field = cw_ref_outside(p->cr, p->op->opts.namespaces, (size_t)p->op->opts.n_namespaces, &rns);
    if (field) {
        char *m = xasprintf("%s.namespace: %s is not among the namespaces slurmop watches (--namespace)",
                            field, rns);
        vclu_add_error(r, m);
    } else {
        refs_admitted(p, r);
    }
    if (p->ref_wait && (rc != 0 || r->n_errors > 0)) {
        /* Maybe only the object still being read: judge on the next pass. */
        vclu_result_free(r);
        return 1;
    }
    for (size_t i = 0; i < r->n_warnings; i++)
        op_warn(p->op, p->o, p->m->kind, "ValidationWarning", "%s", r->warnings[i]);
    if (rc != 0 || r->n_errors > 0) {
        free(p->invalid);
        p->invalid = r->n_errors ? vclu_join(r->errors, r->n_errors) : xstrdup("the object is not valid");
        op_warn(p->op, p->o, p->m->kind, "ValidationFailed", "%s", p->invalid);
        vclu_result_free(r);
        return 1;
    }
    vclu_result_free(r);
    struct accepted *a = map_get(&p->m->accepted, p->o->key);
    if (a == NULL) {
        a = xcalloc(1, sizeof(*a));
        a->key = xstrdup(p->o->key);
        map_put(&p->m->accepted, a->key, a);
    }
    snprintf(a->uid, sizeof(a->uid), "%s", p->o->uid);
    cJSON_Delete(a->cr);
    a->cr = cJSON_Duplicate(p->cr, 1);
    return 0;
}

void crc_step_failed(crc_pass *p, const char *step, int rc, char *why)
{
    if (p->ref_wait) {
        free(why);
        return;
    }
    op_warn(p->op, p->o, p->m->kind, "SyncFailed", "%s: %s", step, why ? why : err_str(rc));
    free(why);
    p->failed = 1;
}

struct write_ctx {
    crc_module *m;
    char *owner;      /* CR key */
    char *what;       /* "ConfigMap c1-config" */
    const char *verb; /* "create", "patch", "delete" */
};

static void written(int err, const char *key, void *data)
{
    struct write_ctx *w = data;
    crc_module *m = w->m;
    if (err == OP_ECANCELED || m->q == NULL)
        goto out;
    if (err == OP_EEXISTS) {
        /* The name is taken by an object outside our cache that is not
         * ours (objsync.h): the next pass reports the conflict. */
        wq_add(m->q, w->owner);
        goto out;
    }
    const sobj *cr = store_get_key(op_store(m->op, m->store), w->owner);
    if (err == 0) {
        /* The watch event of the object queues the owner; queueing it now
         * would only find the cache one event behind. */
        if (cr && strcmp(w->verb, "create") == 0)
            op_event(m->op, cr, m->kind, "CreateSucceeded", "Create", "Created %s", w->what);
    } else {
        const char *reason = strcmp(w->verb, "create") == 0  ? "CreateFailed"
                             : strcmp(w->verb, "patch") == 0 ? "PatchFailed"
                                                             : "DeleteFailed";
        if (cr)
            op_warn(m->op, cr, m->kind, reason, "Failed to %s %s: %s", w->verb, w->what, err_str(err));
        crc_write_failed(m, w->owner);
    }
out:
    free(w->owner);
    free(w->what);
    free(w);
}

static struct write_ctx *write_ctx(crc_pass *p, const kube_res *res, const char *name, const char *verb)
{
    struct write_ctx *w = xcalloc(1, sizeof(*w));
    w->m = p->m;
    w->owner = xstrdup(p->o->key);
    w->what = xasprintf("%s %s", res->kind, name);
    w->verb = verb;
    return w;
}

static void write_ctx_free(struct write_ctx *w)
{
    free(w->owner);
    free(w->what);
    free(w);
}

void crc_strip_immutable(cJSON *desired)
{
    const char *kind = json_get_str_or(desired, "kind", "");
    cJSON *spec = (cJSON *)json_child(desired, "spec");
    if (spec == NULL)
        return;
    if (strcmp(kind, "StatefulSet") == 0) {
        json_del(spec, "selector");
        json_del(spec, "serviceName");
        json_del(spec, "volumeClaimTemplates");
        json_del(spec, "podManagementPolicy");
    } else if (strcmp(kind, "Deployment") == 0) {
        json_del(spec, "selector");
    }
}

int crc_ensure(crc_pass *p, enum op_kind kind, const kube_res *res, cJSON *desired)
{
    if (desired == NULL)
        return OBJSYNC_IN_SYNC;
    if (p->ref_wait) {
        /* Built without an object still being read: not written. */
        cJSON_Delete(desired);
        p->pending = 1;
        return OBJSYNC_PENDING;
    }
    const char *name = json_get_str_or(desired, "metadata.name", "");
    const sobj *cur = store_get(op_store(p->op, kind), p->o->ns, name);
    if (cur)
        crc_strip_immutable(desired);
    struct write_ctx *w = write_ctx(p, res, name, cur ? "patch" : "create");
    int rc = objsync_ensure(p->op->objsync, op_store(p->op, kind), res, desired, written, w);
    if (rc == OBJSYNC_WRITING) {
        crc_note_write(p);
    } else {
        if (rc == OBJSYNC_PENDING)
            p->pending = 1;
        if (rc == OBJSYNC_NOT_OWNED)
            crc_not_owned(p, res, name);
        write_ctx_free(w);
        if (rc < 0)
            crc_step_failed(p, res->kind, rc, xasprintf("cannot converge %s %s", res->kind, name));
    }
    cJSON_Delete(desired);
    return rc;
}

void crc_apply(crc_pass *p, const char *step, int rc, char *why, enum op_kind kind, const kube_res *res,
               cJSON *desired)
{
    if (rc < 0) {
        cJSON_Delete(desired);
        crc_step_failed(p, step, rc, why);
        return;
    }
    free(why);
    crc_ensure(p, kind, res, desired);
}

void crc_not_owned(crc_pass *p, const kube_res *res, const char *name)
{
    if (p->ref_wait)
        return;
    char *what = xasprintf("%s %s/%s exists and is not owned by %s %s: left alone", res->kind, p->o->ns, name,
                           p->m->kind, p->o->name);
    op_warn(p->op, p->o, p->m->kind, CRC_REASON_NOT_OWNED, "%s", what);
    if (p->conflict == NULL) {
        p->conflict = what;
    } else {
        char *both = xasprintf("%s; %s", p->conflict, what);
        free(p->conflict);
        free(what);
        p->conflict = both;
    }
    crc_requeue_after(p, CRC_CONFLICT_RETRY_MS);
}

int crc_delete(crc_pass *p, enum op_kind kind, const kube_res *res, const char *name)
{
    if (p->ref_wait)
        return OBJSYNC_PENDING;
    const sobj *cur = store_get(op_store(p->op, kind), p->o->ns, name);
    if (cur && cur->json && !objsync_owned_by(cur->json, p->o->uid)) {
        crc_not_owned(p, res, name);
        return OBJSYNC_NOT_OWNED;
    }
    struct write_ctx *w = write_ctx(p, res, name, "delete");
    int rc = objsync_delete(p->op->objsync, op_store(p->op, kind), res, p->o->ns, name, written, w);
    if (rc == OBJSYNC_WRITING)
        crc_note_write(p);
    else
        write_ctx_free(w);
    if (rc == OBJSYNC_PENDING)
        p->pending = 1;
    return rc;
}

/* ------------------------------------------------------------------ */
/* status */

cJSON *crc_conditions_set(const cJSON *conditions, const char *type, const char *status, const char *reason,
                          const char *message, int64_t generation, const char *now)
{
    cJSON *out = cJSON_CreateArray();
    const cJSON *prev = NULL;
    for (const cJSON *c = cJSON_IsArray(conditions) ? conditions->child : NULL; c; c = c->next) {
        if (strcmp(json_get_str_or(c, "type", ""), type) == 0) {
            prev = c;
            continue;
        }
        cJSON_AddItemToArray(out, cJSON_Duplicate(c, 1));
    }
    if (status == NULL)
        return out;
    cJSON *c = cJSON_CreateObject();
    json_set_str(c, "type", type);
    json_set_str(c, "status", status);
    json_set_int(c, "observedGeneration", generation);
    const char *ltt = now;
    if (prev && strcmp(json_get_str_or(prev, "status", ""), status) == 0 &&
        json_get_str(prev, "lastTransitionTime"))
        ltt = json_get_str(prev, "lastTransitionTime");
    json_set_str(c, "lastTransitionTime", ltt);
    json_set_str(c, "reason", reason ? reason : "");
    json_set_str(c, "message", message ? message : "");
    cJSON_AddItemToArray(out, c);
    return out;
}

cJSON *crc_status_patch(const cJSON *status, const cJSON *want)
{
    cJSON *cur = cJSON_CreateObject();
    for (const cJSON *f = want ? want->child : NULL; f; f = f->next) {
        const cJSON *v = json_child(status, f->string);
        if (v)
            json_set(cur, f->string, cJSON_Duplicate(v, 1));
    }
    const cJSON *conds = json_child(status, "conditions");
    if (conds && json_child(cur, "conditions") == NULL)
        json_set(cur, "conditions", cJSON_Duplicate(conds, 1));
    cJSON *diff = json_merge_diff(cur, want ? want : cur);
    cJSON_Delete(cur);
    return diff;
}

struct status_ctx {
    crc_module *m;
    crc_gate *t;
    char *key;
};

static void status_written(int err, const cJSON *obj, const kube_status *st, void *data)
{
    struct status_ctx *c = data;
    crc_module *m = c->m;
    crc_gate_end(&m->status_gates, c->t, err,
                 err == 0 ? json_get_str(obj, "metadata.resourceVersion") : NULL);
    if (err && err != OP_ECANCELED && err != OP_ENOTFOUND && m->q) {
        log_warn("%s %s: status update failed: %s (%s)", m->kind, c->key, err_str(err),
                 st ? st->message : "");
        crc_write_failed(m, c->key);
    }
    free(c->key);
    free(c);
}

void crc_status(crc_pass *p, cJSON *fields)
{
    if (p->ref_wait) {
        cJSON_Delete(fields);
        return;
    }
    crc_module *m = p->m;
    cJSON *want = fields ? fields : cJSON_CreateObject();
    const cJSON *status = json_child(p->cr, "status");
    char now[32];
    rfc3339_now(now, 0);
    /* fields may bring the conditions with the reconciler's own types set
     * (built from the current ones with crc_conditions_set). */
    const cJSON *base = json_child(want, "conditions");
    cJSON *conds = crc_conditions_set(base ? base : json_child(status, "conditions"), CRC_COND_VALID,
                                      p->invalid ? "False" : NULL, "ValidationFailed", p->invalid,
                                      p->o->generation, now);
    cJSON *c2 = crc_conditions_set(conds, CRC_COND_CONFLICT, p->conflict ? "True" : NULL,
                                   CRC_REASON_NOT_OWNED, p->conflict, p->o->generation, now);
    cJSON_Delete(conds);
    conds = c2;
    if (cJSON_GetArraySize(conds) > 0)
        json_set(want, "conditions", conds);
    else
        cJSON_Delete(conds);
    cJSON *diff = crc_status_patch(status, want);
    cJSON_Delete(want);
    if (diff == NULL)
        return;

    if (crc_gate_busy(&m->status_gates, p->o->key, p->o->rv)) {
        cJSON_Delete(diff);
        p->pending = 1;
        return; /* the cache has not shown our last status write yet */
    }
    struct status_ctx *c = xcalloc(1, sizeof(*c));
    c->m = m;
    c->key = xstrdup(p->o->key);
    c->t = crc_gate_begin(&m->status_gates, p->o->key, p->o->rv);
    cJSON *patch = cJSON_CreateObject();
    json_set(patch, "status", diff);
    kube_patch(p->op->client, m->res, p->o->ns, p->o->name, "status", KUBE_PATCH_MERGE, patch, NULL, 0,
               status_written, c);
    cJSON_Delete(patch);
    crc_note_write(p);
}
