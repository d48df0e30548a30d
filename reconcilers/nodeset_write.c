#include "reconcilers/nodeset_write.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"
#include "reconcilers/reconcilers.h"
#include "watchers/kinds.h"
#include "watchers/slinky.h"

/* ---- the value gate ---- */

struct nsw_ticket {
    char *key; /* "<uid>\x1f<what>" (map key) */
    uint64_t want;
    uint64_t at_ms;
    int inflight;
};

static void ticket_free(void *v)
{
    nsw_ticket *t = v;
    free(t->key);
    free(t);
}

static const map_type ticket_type = {.val_free = ticket_free};

/* A sweep of the entries long written, every this many new ones: what is
 * kept stays bounded by the writes of one TTL. */
#define SWEEP_EVERY 1024

void nsw_gates_init(nsw_gates *g)
{
    memset(g, 0, sizeof(*g));
    map_init_type(&g->m, &ticket_type);
}

void nsw_gates_free(nsw_gates *g)
{
    map_free(&g->m);
}

size_t nsw_gates_count(const nsw_gates *g)
{
    return g->m.count;
}

static void sweep(nsw_gates *g, uint64_t now)
{
    size_t it = 0, n = 0;
    const char *k;
    void *v;
    nsw_ticket **old = xcalloc(g->m.count + 1, sizeof(*old));
    while (map_next(&g->m, &it, &k, &v)) {
        nsw_ticket *t = v;
        if (!t->inflight && now - t->at_ms >= NSW_VALUE_TTL_MS)
            old[n++] = t;
    }
    for (size_t i = 0; i < n; i++)
        map_drop(&g->m, old[i]->key);
    free(old);
}

nsw_ticket *nsw_gate_take(nsw_gates *g, const char *uid, const char *what, uint64_t want, uint64_t now)
{
    char *k = xasprintf("%s\x1f%s", uid, what);
    nsw_ticket *t = map_get(&g->m, k);
    if (t && t->want == want && (t->inflight || now - t->at_ms < NSW_VALUE_TTL_MS)) {
        free(k);
        return NULL;
    }
    if (t == NULL) {
        t = xcalloc(1, sizeof(*t));
        t->key = k;
        map_put(&g->m, t->key, t);
    } else {
        free(k);
    }
    t->want = want;
    t->at_ms = now;
    t->inflight = 1;
    if (++g->inserts % SWEEP_EVERY == 0)
        sweep(g, now); /* (t is in flight: kept) */
    return t;
}

const char *nsw_ticket_key(const nsw_ticket *t)
{
    return t->key;
}

void nsw_gate_end(nsw_gates *g, const char *key, int err)
{
    nsw_ticket *t = map_get(&g->m, key);
    if (t == NULL)
        return;
    t->inflight = 0;
    if (err)
        map_drop(&g->m, key);
}

/* ---- the status pace ---- */

int64_t nsw_pace_take(nsw_pace *p, uint64_t now)
{
    if (p->inflight) {
        p->again = 1;
        return NSW_PACE_BUSY;
    }
    if (p->sent_ms && now - p->sent_ms < NSW_STATUS_MIN_MS)
        return (int64_t)(NSW_STATUS_MIN_MS - (now - p->sent_ms));
    p->inflight = 1;
    p->sent_ms = now;
    return 0;
}

int64_t nsw_pace_end(nsw_pace *p, uint64_t now)
{
    assert(p->inflight); /* a PATCH ends once */
    int again = p->again;
    p->inflight = 0;
    p->again = 0;
    if (!again)
        return -1;
    uint64_t since = now - p->sent_ms;
    return since >= NSW_STATUS_MIN_MS ? 0 : (int64_t)(NSW_STATUS_MIN_MS - since);
}

/* ---- the writer ---- */

struct nsw_state {
    operator *op;
    nsw_hooks h;
    nsw_gates gates;
    int stopped;
    unsigned inflight;
};

static void *state_new(void)
{
    nsw_state *w = xcalloc(1, sizeof(*w));
    nsw_gates_init(&w->gates);
    return w;
}

static void state_free(void *state)
{
    nsw_state *w = state;
    if (w == NULL)
        return;
    /* Freed after the API client closed, which completed every request. */
    assert(w->inflight == 0);
    nsw_gates_free(&w->gates);
    free(w);
}

const op_reconciler RC_NODESET_WRITE = {
    .name = "nodeset-write",
    .slot = OPR_NODESET_WRITE,
    .new_state = state_new,
    .free_state = state_free,
};

nsw_state *nsw_of(const operator *op)
{
    return op_state(op, OPR_NODESET_WRITE);
}

void nsw_setup(operator *op, const nsw_hooks *h)
{
    nsw_state *w = nsw_of(op);
    assert(h->retry != NULL);
    w->op = op;
    w->h = *h;
}

void nsw_stop(operator *op)
{
    nsw_of(op)->stopped = 1;
}

unsigned nsw_inflight(const operator *op)
{
    return nsw_of(op)->inflight;
}

nsw_ticket *nsw_take(operator *op, const char *uid, const char *what, uint64_t want)
{
    nsw_state *w = nsw_of(op);
    return w->stopped ? NULL : nsw_gate_take(&w->gates, uid, what, want, uv_now(op->loop));
}

/* A write of the reconciler's own: its callback, then the count. */
typedef struct own_ctx {
    nsw_state *w;
    kube_cb cb;
    void *data;
} own_ctx;

static void own_done(int err, const cJSON *obj, const kube_status *st, void *data)
{
    own_ctx *c = data;
    nsw_state *w = c->w;
    c->cb(err, obj, st, c->data);
    free(c);
    assert(w->inflight > 0);
    w->inflight--;
}

static own_ctx *own_ctx_new(nsw_state *w, kube_cb cb, void *data)
{
    own_ctx *c = xmalloc(sizeof(*c));
    c->w = w;
    c->cb = cb;
    c->data = data;
    /* Counted before the call: a request the client refuses completes
     * (once) inside it. */
    w->inflight++;
    return c;
}

/* A gated write: its gate, a failure's log line and retry. */
typedef struct gated_ctx {
    nsw_state *w;
    char *key;  /* the gate's */
    char *set;  /* the owning NodeSet's key */
    char *what; /* for the log */
} gated_ctx;

static void gated_done(int err, const cJSON *obj, const kube_status *st, void *data)
{
    gated_ctx *c = data;
    nsw_state *w = c->w;
    (void)obj;
    if (!w->stopped) {
        nsw_gate_end(&w->gates, c->key, err == OP_ECANCELED ? 0 : err);
        if (err && err != OP_ECANCELED && err != OP_ENOTFOUND) {
            log_warn("nodeset %s: writing the %s failed: %s (%s); retrying", c->set, c->what, err_str(err),
                     st ? st->message : "");
            w->h.retry(w->h.ctx, c->set, 1000);
        }
    }
    free(c->key);
    free(c->set);
    free(c->what);
    free(c);
    assert(w->inflight > 0);
    w->inflight--;
}

static gated_ctx *gated_ctx_new(nsw_state *w, const nsw_ticket *t, const char *set, const char *what)
{
    gated_ctx *c = xmalloc(sizeof(*c));
    c->w = w;
    c->key = xstrdup(t->key);
    c->set = xstrdup(set);
    c->what = xstrdup(what);
    w->inflight++; /* before the call, as own_ctx_new */
    return c;
}

/* The writes below read only the outcome, not the object a success
 * returns (a pod is ~5 KB): no_answer. */

void nsw_patch_pod(operator *op, nsw_ticket *t, const char *set, const sobj *pod, const char *sub,
                   enum kube_patch_type type, cJSON *patch, const char *what)
{
    nsw_state *w = nsw_of(op);
    assert(t != NULL && t->inflight);
    char label[320];
    snprintf(label, sizeof(label), "%s of pod %s", what, pod->name);
    kube_req_opts ro = {.no_answer = 1};
    kube_patch_with(op->client, &ro, &KUBE_PODS, pod->ns, pod->name, sub, type, patch, NULL, 0, gated_done,
                    gated_ctx_new(w, t, set, label));
    cJSON_Delete(patch);
}

void nsw_patch_nodeset(operator *op, nsw_ticket *t, const sobj *nodeset, const char *sub, cJSON *patch)
{
    nsw_state *w = nsw_of(op);
    assert(t != NULL && t->inflight);
    const char *what = sub ? "NodeSet's status" : "NodeSet's metadata or spec";
    kube_req_opts ro = {.no_answer = 1};
    kube_patch_with(op->client, &ro, &SLINKY_NODESETS, nodeset->ns, nodeset->name, sub, KUBE_PATCH_MERGE,
                    patch, NULL, 0, gated_done, gated_ctx_new(w, t, nodeset->key, what));
    cJSON_Delete(patch);
}

void nsw_create_pod(operator *op, const cJSON *pod, int answer, kube_cb cb, void *data)
{
    kube_req_opts ro = {.no_answer = !answer};
    kube_create_with(op->client, &ro, &KUBE_PODS, json_get_str(pod, "metadata.namespace"), pod, own_done,
                     own_ctx_new(nsw_of(op), cb, data));
}

void nsw_delete_pod(operator *op, const sobj *pod, int unchanged, int first, kube_cb cb, void *data)
{
    kube_delete_opts o = {
        .uid = pod->uid, .resource_version = unchanged ? pod->rv : NULL, .grace_seconds = -1};
    kube_req_opts ro = {.no_answer = 1, .prio = 1, .first = first};
    kube_delete_with(op->client, &ro, &KUBE_PODS, pod->ns, pod->name, &o, own_done,
                     own_ctx_new(nsw_of(op), cb, data));
}

void nsw_adopt_pod(operator *op, const sobj *pod, cJSON *ref, kube_cb cb, void *data)
{
    cJSON *patch = cJSON_CreateObject();
    cJSON *refs = cJSON_CreateArray();
    cJSON_AddItemToArray(refs, ref);
    cJSON *meta = json_obj_ensure(patch, "metadata");
    json_set(meta, "ownerReferences", refs);
    json_set_str(meta, "uid", pod->uid); /* a precondition: adopt only this incarnation */
    kube_patch(op->client, &KUBE_PODS, pod->ns, pod->name, NULL, KUBE_PATCH_STRATEGIC, patch, NULL, 0,
               own_done, own_ctx_new(nsw_of(op), cb, data));
    cJSON_Delete(patch);
}

void nsw_patch_status(operator *op, const char *ns, const char *name, const cJSON *patch, kube_cb cb,
                      void *data)
{
    kube_req_opts ro = {.no_answer = 1};
    kube_patch_with(op->client, &ro, &SLINKY_NODESETS, ns, name, "status", KUBE_PATCH_MERGE, patch, NULL, 0,
                    own_done, own_ctx_new(nsw_of(op), cb, data));
}
