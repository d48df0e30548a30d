#include "reconcilers/nodetaint.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/json.h"
#include "core/log.h"
#include "core/map.h"
#include "core/mem.h"
#include "core/wq.h"
#include "reconcilers/nodeset_build.h"
#include "reconcilers/reconcilers.h"
#include "watchers/kinds.h"

#define EFFECT "NoExecute"
/* After a successful patch the Node is not looked at again until the cache
 * shows another resourceVersion than the one the patch was computed from,
 * or this long has passed (the watch event was lost; a relist brings it). */
#define SETTLE_MS 30000
#define RETRY_MS 1000

/* A Node with a patch of ours in flight or not yet seen in the cache. */
struct pending {
    char *node;
    char *rv;         /* the resourceVersion the patch was computed from */
    int inflight;     /* the request has not completed */
    uint64_t sent_ms; /* when it was sent */
};

static void pending_free(void *v)
{
    struct pending *p = v;
    free(p->node);
    free(p->rv);
    free(p);
}

static const map_type pending_type = {.val_free = pending_free};

struct nodetaint_state {
    operator *op;
    wq_t *q;
    int ix_pod_node; /* pods by spec.nodeName */
    map_t pending;   /* node name -> struct pending */
    unsigned epoch;  /* bumped at stop: older completions only free */
};

static void *state_new(void)
{
    nodetaint_state *st = xcalloc(1, sizeof(*st));
    map_init_type(&st->pending, &pending_type);
    st->ix_pod_node = -1;
    return st;
}

static void state_free(void *state)
{
    nodetaint_state *st = state;
    if (st == NULL)
        return;
    map_free(&st->pending);
    free(st);
}

nodetaint_state *nodetaint_of(const operator *op)
{
    return op_state(op, OPR_NODETAINT);
}

static uint64_t now_ms(void)
{
    return uv_hrtime() / 1000000u;
}

/* ---- pure ---------------------------------------------------------------- */

static int is_worker_taint(const cJSON *t)
{
    return strcmp(json_get_str_or(t, "key", ""), NSB_WORKER_TAINT) == 0 &&
           strcmp(json_get_str_or(t, "effect", ""), EFFECT) == 0;
}

int nodetaint_has(const cJSON *taints)
{
    for (const cJSON *t = cJSON_IsArray(taints) ? taints->child : NULL; t; t = t->next)
        if (is_worker_taint(t))
            return 1;
    return 0;
}

cJSON *nodetaint_desired(const cJSON *taints, int want)
{
    if (!!nodetaint_has(taints) == !!want)
        return NULL;
    cJSON *out = cJSON_CreateArray();
    for (const cJSON *t = cJSON_IsArray(taints) ? taints->child : NULL; t; t = t->next)
        if (!is_worker_taint(t))
            cJSON_AddItemToArray(out, cJSON_Duplicate(t, 1));
    if (want) {
        cJSON *t = cJSON_CreateObject();
        json_set_str(t, "key", NSB_WORKER_TAINT);
        json_set_str(t, "effect", EFFECT);
        cJSON_AddItemToArray(out, t);
    }
    return out;
}

/* ---- caches -------------------------------------------------------------- */

static const char *pod_node_index(const sobj *o, void *data)
{
    (void)data;
    const pod_proj *p = pod_of(o);
    return p ? p->node_name : NULL;
}

/* The NodeSet that controls pod, when it asks for tainted Nodes. */
static int taints_for(nodetaint_state *S, const sobj *pod)
{
    if (pod->owner_kind == NULL || strcmp(pod->owner_kind, NSB_KIND) != 0 || pod->owner_name == NULL)
        return 0;
    const sobj *ns = store_get(op_store(S->op, OPK_NODESETS), pod->ns, pod->owner_name);
    if (ns == NULL || ns->json == NULL || (pod->owner_uid && strcmp(ns->uid, pod->owner_uid) != 0))
        return 0;
    return json_get_bool(ns->json, "spec.taintKubeNodes", 0);
}

/* Slinky's rule: a Running pod that is not terminating. */
static int pod_counts(nodetaint_state *S, const sobj *pod)
{
    const pod_proj *p = pod_of(pod);
    return p && p->phase == POD_RUNNING && !pod->deleting && p->node_name && taints_for(S, pod);
}

static int node_wants_taint(nodetaint_state *S, const char *node)
{
    store_cursor c;
    for (const sobj *p = store_index_first(op_store(S->op, OPK_PODS), S->ix_pod_node, node, &c); p;
         p = store_index_next(&c))
        if (pod_counts(S, p))
            return 1;
    return 0;
}

static void enqueue(nodetaint_state *S, const char *node)
{
    if (S->q && node && *node)
        wq_add(S->q, node);
}

/* The store handlers get the nodetaint_state as data. */
static void on_pod(store *s, const sobj *old, const sobj *new, void *data)
{
    (void)s;
    nodetaint_state *S = data;
    const sobj *o = new ? new : old;
    if (o->owner_kind == NULL || strcmp(o->owner_kind, NSB_KIND) != 0)
        return;
    const pod_proj *a = old ? pod_of(old) : NULL, *b = new ? pod_of(new) : NULL;
    if (a && b && a->phase == b->phase && a->node_name == b->node_name && !old->deleting == !new->deleting)
        return; /* node names are interned: pointer equality is string equality */
    if (a)
        enqueue(S, a->node_name);
    if (b && (!a || b->node_name != a->node_name))
        enqueue(S, b->node_name);
}

static void on_node(store *s, const sobj *old, const sobj *new, void *data)
{
    (void)s;
    nodetaint_state *S = data;
    if (new == NULL) {
        map_drop(&S->pending, old->name);
        return;
    }
    if (old && old->json && new->json &&
        !!nodetaint_has(json_get(old->json, "spec.taints")) ==
            !!nodetaint_has(json_get(new->json, "spec.taints")) &&
        map_get(&S->pending, new->name) == NULL)
        return;
    enqueue(S, new->name);
}

/* A NodeSet that turns taintKubeNodes on or off, or goes: the Nodes of its pods. */
static void on_nodeset(store *s, const sobj *old, const sobj *new, void *data)
{
    (void)s;
    nodetaint_state *S = data;
    int a = old && old->json ? json_get_bool(old->json, "spec.taintKubeNodes", 0) : 0;
    int b = new && new->json ? json_get_bool(new->json, "spec.taintKubeNodes", 0) : 0;
    if (a == b || S->q == NULL)
        return;
    const sobj *o = new ? new : old;
    size_t it = 0;
    const sobj *p;
    while ((p = store_next(op_store(S->op, OPK_PODS), &it)))
        if (p->owner_name && p->owner_uid && strcmp(p->owner_uid, o->uid) == 0 && pod_of(p))
            enqueue(S, pod_of(p)->node_name);
}

/* ---- a pass -------------------------------------------------------------- */

/* The state outlives every write: the operator frees it once its client has
 * closed, after the last completion. */
struct patch_ctx {
    nodetaint_state *st;
    unsigned epoch;
    char *node;
};

static void patched(int err, const cJSON *obj, const kube_status *st, void *data)
{
    (void)obj;
    (void)st;
    struct patch_ctx *c = data;
    nodetaint_state *S = c->st;
    if (c->epoch == S->epoch && err != OP_ECANCELED) {
        struct pending *p = map_get(&S->pending, c->node);
        if (p)
            p->inflight = 0;
        if (err == OP_ENOTFOUND) {
            map_drop(&S->pending, c->node);
        } else if (err) {
            /* 409: the Node changed under us; anything else: try again later. Either way
             * the next pass starts from the cache. */
            if (err != OP_ECONFLICT)
                log_warn("nodetaint: patching Node %s: %s", c->node, err_str(err));
            map_drop(&S->pending, c->node);
            if (S->q)
                wq_add_rate_limited(S->q, c->node);
        }
    }
    free(c->node);
    free(c);
}

static wq_result handle(const char *node, uint64_t first_add_ns, void *data)
{
    (void)first_add_ns;
    nodetaint_state *S = data;
    if (!op_caches_synced(S->op))
        return WQ_RESULT_AFTER(RETRY_MS);
    const sobj *n = store_get(op_store(S->op, OPK_NODES), "", node);
    if (n == NULL || n->json == NULL) {
        map_drop(&S->pending, node);
        return WQ_RESULT_OK;
    }
    struct pending *p = map_get(&S->pending, node);
    if (p) {
        if (p->inflight)
            return WQ_RESULT_OK; /* its completion or watch event brings the Node back */
        uint64_t age = now_ms() - p->sent_ms;
        if (p->rv && n->rv && strcmp(p->rv, n->rv) == 0 && age < SETTLE_MS)
            return WQ_RESULT_AFTER(SETTLE_MS - age);
        map_drop(&S->pending, node);
    }
    int want = node_wants_taint(S, node);
    cJSON *taints = nodetaint_desired(json_get(n->json, "spec.taints"), want);
    if (taints == NULL) {
        wq_forget(S->q, node);
        return WQ_RESULT_OK;
    }
    /* A merge patch replaces the whole list; the resourceVersion makes it
     * fail (409) rather than drop a taint someone added since our read. */
    cJSON *patch = cJSON_CreateObject();
    json_set_str(json_obj_ensure(patch, "metadata"), "resourceVersion", n->rv ? n->rv : "");
    json_set(json_obj_ensure(patch, "spec"), "taints", taints);
    p = xcalloc(1, sizeof(*p));
    p->node = xstrdup(node);
    p->rv = n->rv ? xstrdup(n->rv) : NULL;
    p->inflight = 1;
    p->sent_ms = now_ms();
    map_put(&S->pending, p->node, p);
    struct patch_ctx *c = xcalloc(1, sizeof(*c));
    c->st = S;
    c->epoch = S->epoch;
    c->node = xstrdup(node);
    log_info("nodetaint: %s taint %s:%s on Node %s", want ? "adding" : "removing", NSB_WORKER_TAINT, EFFECT,
             node);
    kube_patch(S->op->client, &KUBE_NODES, NULL, node, NULL, KUBE_PATCH_MERGE, patch, NULL, 0, patched, c);
    cJSON_Delete(patch);
    return WQ_RESULT_OK;
}

/* ---- module -------------------------------------------------------------- */

static void setup(operator *op)
{
    nodetaint_state *S = nodetaint_of(op);
    S->op = op;
    if (!op->opts.allow_node_taints)
        return; /* nothing watched, nothing written (operator.h) */
    S->ix_pod_node = store_add_index(op_store(op, OPK_PODS), pod_node_index, NULL);
    if (S->ix_pod_node < 0)
        log_error("nodetaint: cannot index pods by node: %s", err_str(S->ix_pod_node));
    store_on_change(op_store(op, OPK_PODS), on_pod, S);
    store_on_change(op_store(op, OPK_NODES), on_node, S);
    store_on_change(op_store(op, OPK_NODESETS), on_nodeset, S);
}

static int start(operator *op)
{
    nodetaint_state *S = nodetaint_of(op);
    int err = 0;
    if (!op->opts.allow_node_taints)
        return 0;
    wq_opts o = {.name = NODETAINT_CONTROLLER, .handler = handle, .data = S, .metrics = op->metrics};
    S->q = wq_new(op->loop, &o, &err);
    if (S->q == NULL)
        return err;
    /* Every Node once: a taint left behind while no operator ran is removed. */
    size_t it = 0;
    const sobj *n;
    while ((n = store_next(op_store(op, OPK_NODES), &it)))
        wq_add(S->q, n->name);
    return 0;
}

static void stop(operator *op)
{
    nodetaint_state *S = nodetaint_of(op);
    if (S->q)
        wq_shutdown(S->q, NULL, NULL);
    S->q = NULL;
    S->epoch++;
    map_free(&S->pending);
}

const op_reconciler RC_NODETAINT = {
    .name = NODETAINT_CONTROLLER,
    .slot = OPR_NODETAINT,
    .new_state = state_new,
    .free_state = state_free,
    .setup = setup,
    .start = start,
    .stop = stop,
};
