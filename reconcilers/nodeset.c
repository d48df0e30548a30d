#include "reconcilers/nodeset.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/json.h"
#include "core/log.h"
#include "core/intern.h"
#include "core/map.h"
#include "core/mem.h"
#include "core/ratelimit.h"
#include "core/rfc3339.h"
#include "reconcilers/batch.h"
#include "reconcilers/cluster_rc.h"
#include "reconcilers/cluster_watch.h"
#include "reconcilers/expect.h"
#include "reconcilers/nodeset_build.h"
#include "reconcilers/nodeset_choose.h"
#include "reconcilers/nodeset_incr.h"
#include "reconcilers/nodeset_immut.h"
#include "reconcilers/nodeset_names.h"
#include "reconcilers/nodeset_slurm.h"
#include "reconcilers/nodeset_spec.h"
#include "reconcilers/nodeset_write.h"
#include "reconcilers/objsync.h"
#include "reconcilers/reconcilers.h"
#include "reconcilers/tenancy.h"
#include "watchers/kinds.h"
#include "watchers/slinky.h"

/* A periodic safety net: even without events, look at every NodeSet this
 * often (Slinky requeues every 30 s because it polls Slurm; we are told of
 * Slurm changes by the node cache, so this only covers lost events). */
#define RESYNC_MS (10 * 60 * 1000)
/* How often a deleted NodeSet whose pods still drain is looked at again
 * when no event comes. */
#define DELETE_RECHECK_MS 2000
/* The longest backoff of a NodeSet whose writes fail (seconds). */
#define NODESET_BACKOFF_MAX_S 60ull
/* Caches still filling at start: look again soon. */
#define NS_UNSYNCED_RETRY_MS 100
#define NS_SCOPE_RETRY_MS 100 /* waiting for the topology webhook to admit a namespace */

/* The reconciler's state: one per operator (nodeset_of), made through the
 * registry before setup and freed after the client closed, so that write
 * completions that arrive after stop still find it. Every function reaches
 * it through the operator or the context of a write. */
struct nodeset_state {
    operator *op;
    wq_t *q;
    int ix_pod_owner;    /* pods by controller owner uid */
    int ix_pod_instance; /* pods by app.kubernetes.io/instance (orphan adoption) */
    int ix_pod_node;     /* pods by spec.nodeName */
    int ix_ns_ctl;       /* nodesets by "<Controller's ns>/<controllerRef.name>" (cw_ref_ns) */
    int ix_rev_owner;    /* controllerrevisions by owner uid */
    mx_family *mx_passes; /* slurmop_nodeset_passes_total{kind} */
    mx_family *mx_full_why; /* slurmop_nodeset_full_passes_total{reason} */
    map_t recs;           /* NodeSet key -> struct ns_rec (below) */
    /* Interned keys for the per-pod lookups of every pass (pointer
     * compares): references taken at setup, dropped at stop. */
    struct {
        const char *revision, *revision_slinky, *cordon, *cost, *deadline, *hostname, *instance, *mode;
    } ik;
    char ctl_index_key[512]; /* nodeset_ctl_index's answer (the store copies it) */
};

/* While a NodeSet's creates or deletes are in flight, a pass can only
 * update status, yet every pod event of a scale-out queues one: 8,192 pods
 * bring ~30,000 events. Such passes run at most every WAIT_PASS_MS per
 * NodeSet; the pass that sees the last expected event runs at once. */
#define WAIT_PASS_MS 250
struct wait_pass {
    int on;           /* writes in flight since a pass ran at last_ms */
    uint64_t last_ms;
    /* The first queueing of the passes held back whose events nothing looked
     * at (no incremental step; 0: none): the next pass whose action is a
     * pod's create or delete counts its event -> action latency from it
     * (note_write), so a replacement that waited for the throttle shows
     * that wait in slurmop_event_to_action_seconds instead of losing it
     * with the held pass's queueing time. */
    uint64_t held_ns;
};

struct incr;

/* ---- one record per NodeSet ----
 *
 * Everything the engine keeps about a NodeSet from one pass to the next,
 * under its store key: made on first need (rec_ensure), found with
 * rec_get (NULL: nothing kept), and freed in one call when the NodeSet is
 * gone (rec_forget), the parts other modules keep in it included (the
 * expectations, the immutable fields, the Slurm side's). Completions of
 * writes find the record by key, never by pointer, so a record forgotten
 * meanwhile is simply not found; the one
 * exception is a status PATCH on its way, whose gate must outlive a
 * NodeSet deleted and created again under the same key: such a record
 * keeps only the gate until the answer (status_written) drops it. */
struct ns_rec {
    char *key; /* map key */
    struct incr *incr;  /* the incremental passes' state (NULL: none until a full pass builds it) */
    nsw_pace status; /* its status PATCHes (nodeset_write.h) */
    struct wait_pass wait;
    int failed;         /* an asynchronous write failed since the last pass (mark_failed) */
    char *rival_msg;    /* a collision of Slurm names found for it (rival_note), until rival_until */
    uint64_t rival_until;
    /* Retries that double (struct backoff), keyed by NodeSet uid so that a
     * NodeSet created again under the key starts afresh:
     * "<uid>/<node>" for DaemonSet-mode replacements (ds_may_replace),
     * "<uid>/#<ordinal>" for names a create found taken (held_key). */
    map_t ds_backoffs;
    map_t held_names;
    nsim_mem immut; /* its immutable fields as last valid (nodeset_immut.h) */
    exp_owner exp;  /* creates and deletes in flight, until observed (expect.h) */
    nss_set *slurm; /* the Slurm side's part (nodeset_slurm.h), made there on first need */
};

static void incr_free(void *v);

static void rec_free(void *v)
{
    struct ns_rec *r = v;
    if (r->incr)
        incr_free(r->incr);
    map_free(&r->ds_backoffs);
    map_free(&r->held_names);
    nsim_forget(&r->immut);
    exp_drop(&r->exp);
    nss_set_free(r->slurm);
    free(r->rival_msg);
    free(r->key);
    free(r);
}

static const map_type rec_type = {.val_free = rec_free};

static struct ns_rec *rec_get(const nodeset_state *c, const char *key)
{
    return c->recs.count ? map_get(&c->recs, key) : NULL;
}

static const map_type backoff_type;

static struct ns_rec *rec_ensure(nodeset_state *c, const char *key)
{
    assert(key != NULL && *key);
    struct ns_rec *r = rec_get(c, key);
    if (r == NULL) {
        r = xcalloc(1, sizeof(*r));
        r->key = xstrdup(key);
        map_init_type(&r->ds_backoffs, &backoff_type);
        map_init_type(&r->held_names, &backoff_type);
        map_put(&c->recs, r->key, r);
    }
    return r;
}

/* The NodeSet is gone: its record goes, but for the gate of a status PATCH
 * still on its way (see above). */
static void rec_forget(nodeset_state *c, const char *key)
{
    struct ns_rec *r = rec_get(c, key);
    if (r == NULL)
        return;
    nss_forget(c->op, key); /* its part, and the gauges that name the NodeSet */
    assert(r->slurm == NULL);
    if (!r->status.inflight) {
        map_drop(&c->recs, key);
        return;
    }
    if (r->incr)
        incr_free(r->incr);
    r->incr = NULL;
    memset(&r->wait, 0, sizeof(r->wait));
    r->failed = 0;
    free(r->rival_msg);
    r->rival_msg = NULL;
    map_free(&r->ds_backoffs);
    map_free(&r->held_names);
    nsim_forget(&r->immut);
    exp_drop(&r->exp);
}

/* The expectations of NodeSet key, NULL when nothing is kept for it (then
 * nothing is expected: an expectation makes the record). */
static exp_owner *exp_of(const nodeset_state *c, const char *key)
{
    struct ns_rec *r = rec_get(c, key);
    return r ? &r->exp : NULL;
}

static int exp_done(const nodeset_state *c, const char *key, const char *uid, uint64_t now_ms)
{
    exp_owner *e = exp_of(c, key);
    return e == NULL || exp_satisfied(e, uid, now_ms);
}

static void exp_counts(const nodeset_state *c, const char *key, int *adds, int *dels)
{
    exp_owner *e = exp_of(c, key);
    *adds = *dels = 0;
    if (e)
        exp_pending(e, adds, dels);
}

static int exp_del_pending(const nodeset_state *c, const char *key, const char *dep_key)
{
    const exp_owner *e = exp_of(c, key);
    return e && exp_deletion_pending(e, dep_key);
}

/* The held queueing time of key, forgotten (0: none). */
static uint64_t wait_pass_take(nodeset_state *c, const char *key)
{
    struct ns_rec *r = rec_get(c, key);
    if (r == NULL || !r->wait.on)
        return 0;
    uint64_t held = r->wait.held_ns;
    r->wait.held_ns = 0;
    return held;
}

static void wait_pass_hold(nodeset_state *c, const char *key, uint64_t first_add_ns)
{
    struct ns_rec *r = rec_get(c, key);
    struct wait_pass *w = r && r->wait.on ? &r->wait : NULL;
    if (w && first_add_ns && (w->held_ns == 0 || first_add_ns < w->held_ns))
        w->held_ns = first_add_ns;
}

static void wait_pass_drop(nodeset_state *c, const char *key)
{
    struct ns_rec *r = rec_get(c, key);
    if (r)
        memset(&r->wait, 0, sizeof(r->wait));
}

/* Returns how long to wait before the next waiting pass (0: run now). */
static uint64_t wait_pass_delay(nodeset_state *c, const char *key, uint64_t now)
{
    struct wait_pass *w = &rec_ensure(c, key)->wait;
    if (w->on && now - w->last_ms < WAIT_PASS_MS)
        return WAIT_PASS_MS - (now - w->last_ms);
    w->on = 1;
    w->last_ms = now;
    return 0;
}

/* Keys whose asynchronous writes failed since their last pass. A pass
 * returns WQ_RESULT_ERROR for them, so the queue's per-key backoff keeps
 * growing (5 ms doubling up to 1000 s) while writes keep failing; a pass
 * that returned success would make the queue forget the failures and retry
 * a bad pod template every few milliseconds. (ns_rec.failed) */

static void incr_mark_full(nodeset_state *c, const char *key, const char *why);

static void mark_failed(nodeset_state *c, const char *key)
{
    incr_mark_full(c, key, "failed-write");
    rec_ensure(c, key)->failed = 1;
    if (c->q)
        wq_add_rate_limited(c->q, key);
}

static int take_failed(nodeset_state *c, const char *key)
{
    struct ns_rec *r = rec_get(c, key);
    int had = r && r->failed;
    if (r)
        r->failed = 0;
    return had;
}

/* ------------------------------------------------------------------ */
/* incremental passes
 *
 * A pass over all pods costs milliseconds at 8,192 pods, and every pod or
 * Node event queues one. Each NodeSet keeps the state a full pass derives
 * from its pods (nodeset_incr.h: counters, ordinals, ended pods, keyed by
 * pod uid), and the events that queue it say which pods changed. A pass
 * that only has such pods to look at updates the state for them, plans
 * what it implies (nsi_plan: replace ended pods, create missing ordinals,
 * nothing) and writes the status from the counters: O(changed pods).
 *
 * The full pass is the reference and runs instead whenever the state
 * cannot be trusted or the decision needs every pod:
 *   - no state yet (first pass), or the last full pass did not build one
 *     (invalid spec, no Controller, a NodeSet being deleted);
 *   - anything but a pod event queued the NodeSet since its last pass
 *     (`full`): a spec, label, annotation, finalizer or status hash change
 *     of the NodeSet, its Controller or key Secret, a ControllerRevision,
 *     a Slurm node or client event (nodeset_enqueue*), the result of one
 *     of our own object writes, a failed write (mark_failed); but a failed
 *     Slurm write comes back as its pod alone once its backoff ends
 *     (queue_pod_after, incr_take_due);
 *   - the resync or safety-net requeue of the last full pass is due
 *     (full_due_ms): timers cannot say why they fired;
 *   - writes of the NodeSet are in flight (expectations not satisfied):
 *     then only the incremental step of incr_pending runs at once (the
 *     pods that changed, ended pods deleted, missing ordinals created when
 *     every create in flight is tracked), and the throttled pass refreshes
 *     the status;
 *   - a spec the state does not model: DaemonSet mode, volumeClaimTemplates,
 *     pinToNode, minReadySeconds (availability depends on the clock);
 *   - with a RestApi, the Slurm side is not calm (nss_calm: condemned
 *     pods, drains, a blocked condition, registration drift, a held node
 *     table, a reservation write or a ScheduledUpdate strategy pending,
 *     the client not ready, or the last full pass did not run nss_sync):
 *     those rules are defined over every pod. When it is calm, each pod
 *     that changed, or whose Slurm node did (the node cache's events come
 *     as pod events, nss_queue.pod), gets its share of nss_sync and
 *     nss_status (nss_pod_step: cordon sync, deadline, topology, features,
 *     conditions, the protect label, pod info), or, while writes of the
 *     NodeSet are in flight, of nss_status only (a full pass runs nss_sync
 *     only once they landed), and the Slurm counts come from the state
 *     (each pod's NSI_SLURM_* bits);
 *     a changed pod that is Ready while the table lacks its node
 *     (registration drift) sends the pass to a full one;
 *   - the last full pass found a conflict (an object not ours under our
 *     names: its condition is kept by full passes only);
 *   - the plan needs every pod (nsi_plan returns NSI_FULL: scale-in victims,
 *     a rolling update, pods of another scaling mode), a pod to act on is
 *     not where the state says, or more than INCR_MAX_DIRTY pods changed.
 * No delete decision is taken from the state but the replacement of pods
 * that ended (Failed or Succeeded), which a full pass deletes without a
 * drain too (DRAIN-SAFETY.md, rule 4); every condemnation happens in a
 * full pass, through nss_condemn. Debug builds compare the state
 * with one rebuilt from all pods after every incremental pass. */
#define INCR_MAX_DIRTY 1024

struct incr {
    char *key;
    nsi_state st;
    int valid;   /* built by a full pass for a spec it models */
    int full;    /* something else than a pod queued the NodeSet */
    const char
        *full_why; /* ... what first (static text; the reason label of slurmop_nodeset_full_passes_total) */
    int rolling; /* updateStrategy RollingUpdate */
    map_t dirty; /* pod uid (malloc'd key) -> pod store key (malloc'd) */
    /* Pods to look at again later (their Slurm write failed and backs
     * off): pod uid (malloc'd key) -> struct retry. Kept across passes,
     * full ones included (a full pass during the backoff skips the write);
     * an entry becomes dirty once due (incr_take_due). */
    map_t retry;
    char update_hash[NSB_HASH_MAX];
    char current_hash[NSB_HASH_MAX];
    int32_t collision;
    uint64_t full_due_ms; /* uv_now() when the last full pass's requeue fires */
    uint64_t
        wait_since_ms; /* uv_now() of the first pass of the current wait for terminating pods (wait_net) */
    /* Ordinals whose create was submitted and neither observed (ADDED) nor
     * failed: the creates in flight, which the cache does not show yet.
     * Kept across full passes (they do not see them either); with
     * expectations, whose count of creations in flight must equal
     * n_creating before an incremental step may create (incr_pending). */
    uint8_t *creating;
    size_t creating_cap;
    int32_t n_creating;
    /* While the Slurm side is not calm (see "Slurm busy" below). */
    int slurm_owed;        /* a Kubernetes-share step skipped the Slurm share of changed pods */
    uint64_t full_end_ns;  /* uv_hrtime() at the end of the last full pass */
    uint64_t full_cost_ns; /* ... and what that pass cost */
    uint64_t busy_held_ns; /* first queueing of events left to the owed full pass (see struct wait_pass) */
};
static void free_key(char *k)
{
    free(k);
}

static const map_type dirty_type = {.val_free = free, .key_free = free_key}; /* both malloc'd */

struct retry {
    uint64_t due_ms; /* the work queue's clock (uv_hrtime) in ms */
    char pod_key[];  /* the pod's store key */
};
static const map_type retry_type = {.val_free = free, .key_free = free_key};

static void incr_free(void *v)
{
    struct incr *r = v;
    map_free(&r->dirty);
    map_free(&r->retry);
    nsi_free(&r->st);
    free(r->creating);
    free(r->key);
    free(r);
}

/* The incremental state of key (NULL: none). */
static struct incr *incr_of(const nodeset_state *c, const char *key)
{
    struct ns_rec *rec = rec_get(c, key);
    return rec ? rec->incr : NULL;
}

static struct incr *incr_get_or_new(nodeset_state *c, const char *key)
{
    struct ns_rec *rec = rec_ensure(c, key);
    struct incr *r = rec->incr;
    if (r == NULL) {
        r = xcalloc(1, sizeof(*r));
        r->key = xstrdup(key);
        nsi_init(&r->st);
        map_init_type(&r->dirty, &dirty_type);
        map_init_type(&r->retry, &retry_type);
        rec->incr = r;
    }
    return r;
}

static void incr_creating_set(struct incr *r, int ordinal, int on)
{
    if (ordinal < 0 || ordinal >= NSB_REPLICAS_MAX)
        return;
    if (on && (size_t)ordinal >= r->creating_cap) {
        size_t cap = r->creating_cap ? r->creating_cap : 64;
        while (cap <= (size_t)ordinal)
            cap *= 2;
        r->creating = xrealloc(r->creating, cap);
        memset(r->creating + r->creating_cap, 0, cap - r->creating_cap);
        r->creating_cap = cap;
    }
    if ((size_t)ordinal >= r->creating_cap || r->creating[ordinal] == (on ? 1 : 0))
        return;
    r->creating[ordinal] = on ? 1 : 0;
    r->n_creating += on ? 1 : -1;
}

/* A create of key's pod at ordinal was observed or failed. */
static void incr_created(nodeset_state *c, const char *key, int ordinal)
{
    struct incr *r = incr_of(c, key);
    if (r)
        incr_creating_set(r, ordinal, 0);
}

static void incr_drop(nodeset_state *c, const char *key)
{
    struct ns_rec *rec = rec_get(c, key);
    if (rec && rec->incr) {
        incr_free(rec->incr);
        rec->incr = NULL;
    }
}

/* The next pass of key must be a full one. */
static void incr_mark_full(nodeset_state *c, const char *key, const char *why)
{
    struct incr *r = incr_of(c, key);
    if (r && !r->full) {
        r->full = 1;
        r->full_why = why;
        map_free(&r->dirty);
    }
}

/* A pod event queued key: remember which pod (its uid and store key). */
static void incr_mark_uid(nodeset_state *c, const char *key, const char *uid, const char *pod_key)
{
    struct incr *r = incr_of(c, key);
    if (r == NULL || r->full || map_get(&r->dirty, uid))
        return;
    if (r->dirty.count >= INCR_MAX_DIRTY) {
        incr_mark_full(c, key, "many-pods");
        return;
    }
    map_put(&r->dirty, xstrdup(uid), xstrdup(pod_key));
}

static void incr_mark_pod(nodeset_state *c, const char *key, const sobj *pod)
{
    incr_mark_uid(c, key, pod->uid, pod->key);
}

/* The retries of key that are due become dirty pods of its next pass. The
 * queue's timer for them cannot say why it fired: whichever pass runs then
 * (a full one covers them too) takes what is due. */
static void incr_take_due(nodeset_state *c, const char *key)
{
    struct incr *r = incr_of(c, key);
    if (r == NULL || r->retry.count == 0)
        return;
    uint64_t now = uv_hrtime() / 1000000u, next = UINT64_MAX;
    size_t it = 0, n = 0;
    const char *uid;
    void *v;
    const char **due = xcalloc(r->retry.count, sizeof(*due));
    while (map_next(&r->retry, &it, &uid, &v)) {
        const struct retry *e = v;
        if (e->due_ms <= now)
            due[n++] = uid;
        else if (e->due_ms < next)
            next = e->due_ms;
    }
    for (size_t i = 0; i < n; i++) {
        const struct retry *e = map_get(&r->retry, due[i]);
        incr_mark_uid(c, key, due[i], e->pod_key);
    }
    /* Dropped only now: the keys above are the map's own. */
    for (size_t i = 0; i < n; i++)
        map_drop(&r->retry, due[i]);
    free(due);
    /* Those still waiting keep a wake-up of their own (the queue keeps the
     * earlier of two), whatever brought this pass. */
    if (next != UINT64_MAX && c->q)
        wq_add_after(c->q, key, next - now);
}

static void enqueue_full(nodeset_state *c, const char *key, const char *why)
{
    incr_mark_full(c, key, why);
    if (c->q)
        wq_add(c->q, key);
}

/* ---- Slurm names unique per Controller (DRAIN-SAFETY.md#names) ----
 *
 * Two pods whose slurmds take one Slurm name share one Slurm node: a drain
 * read of it can license deleting either, and the one kept undoes by its
 * cordon sync the drain the other's delete needs. So a name belongs to one
 * NodeSet of a Controller (any namespace): of two that would share one, the
 * later (creation time, then namespace, then name) is invalid (Valid=False,
 * nothing acted on, its pods kept), and no pod is created under a name a
 * live pod of the Controller's NodeSets holds. A collision is found by the
 * spec (StatefulSet-mode schemes, nodeset_names.h), by a create (the pods
 * index by Slurm name), or by a full pass over the NodeSet's own pods; the
 * last two are remembered for the later NodeSet for RIVAL_TTL_MS, and found
 * again by the earlier's passes while the collision lasts. */
#define RIVAL_TTL_MS 90000u

/* a was created before b (ties: namespace, then name). */
static int ns_earlier(const sobj *a, const sobj *b)
{
    if (a->created != b->created)
        return a->created < b->created;
    int c = strcmp(a->ns, b->ns);
    return c ? c < 0 : strcmp(a->name, b->name) < 0;
}

/* NodeSet later_key shares a Slurm name with an earlier one: remember it
 * (msg is taken) and queue it, so that its next pass is invalid. */
static void rival_note(nodeset_state *c, const char *later_key, char *msg)
{
    uint64_t now = uv_now(c->op->loop);
    struct ns_rec *r = rec_ensure(c, later_key);
    int news = r->rival_msg == NULL || r->rival_until <= now || strcmp(r->rival_msg, msg) != 0;
    free(r->rival_msg);
    r->rival_msg = msg;
    r->rival_until = now + RIVAL_TTL_MS;
    if (news)
        enqueue_full(c, later_key, "nodeset");
}

/* The remembered collision of NodeSet key, while fresh; NULL when none. */
static const char *rival_get(nodeset_state *c, const char *key)
{
    struct ns_rec *r = rec_get(c, key);
    if (r == NULL || r->rival_msg == NULL)
        return NULL;
    if (r->rival_until <= uv_now(c->op->loop)) {
        free(r->rival_msg);
        r->rival_msg = NULL;
        return NULL;
    }
    return r->rival_msg;
}

/* The StatefulSet-mode name scheme of a NodeSet (prefix into buf); 0 when
 * its names are not a scheme (DaemonSet mode: the Nodes'; hostNetwork:
 * the hosts'). */
static int scheme_of(const nsp_spec *sp, const char *name, nsn_scheme *out, char *buf, size_t len)
{
    if (sp->mode != NSB_STATEFULSET || sp->host_network)
        return 0;
    if (sp->hostname)
        snprintf(buf, len, "%s", sp->hostname);
    else
        snprintf(buf, len, "%s-", name);
    *out = (nsn_scheme){.prefix = buf, .pad = sp->ordinal_pad, .count = sp->replicas};
    return 1;
}

/* The Controller key ("ns/name") a NodeSet uses. */
static void ctl_key_of(const nsp_spec *sp, const char *own_ns, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", sp->ctl_ns ? sp->ctl_ns : own_ns, sp->ctl_name);
}

/* Why NodeSet o may not use its Slurm names (malloc'd), NULL when it may:
 * an earlier NodeSet of its Controller whose StatefulSet-mode scheme shares
 * one (O(NodeSets of the Controller), through the index, each check
 * arithmetic), or a collision a create or a pass found (rival_note). */
static char *names_rival(nodeset_state *c, const sobj *o, const nsp_spec *sp)
{
    char v[512], pa[128], pb[128], ex[160];
    nsn_scheme mine, theirs;
    ctl_key_of(sp, o->ns, v, sizeof(v));
    int has = scheme_of(sp, o->name, &mine, pa, sizeof(pa));
    store_cursor cur;
    for (const sobj *t = has ? store_index_first(op_store(c->op, OPK_NODESETS), c->ix_ns_ctl, v, &cur) : NULL;
         t; t = store_index_next(&cur)) {
        nsp_spec tsp;
        if (t == o || !t->json || !ns_earlier(t, o))
            continue;
        nsp_read(t->json, &tsp);
        if (!scheme_of(&tsp, t->name, &theirs, pb, sizeof(pb)))
            continue;
        if (nsn_overlap(&theirs, &mine, ex, sizeof(ex)))
            return xasprintf(
                "NodeSet %s/%s of the same Controller, created first, also names a pod's Slurm node "
                "%s: two pods would share one Slurm node, and one's rules could undo the drain the "
                "other's delete needs (change this NodeSet's template hostname, ordinalPadding or "
                "replicas)",
                t->ns, t->name, ex);
    }
    const char *r = rival_get(c, o->key);
    return r ? xstrdup(r) : NULL;
}

/* Pod holder (of NodeSet owner) holds Slurm name `name` that NodeSet o has
 * or wants: the later of the two NodeSets is told. Returns 1 when that is
 * o (the message then also goes into *why when why is not NULL). */
static int names_collide(nodeset_state *c, const sobj *o, const sobj *holder, const char *name, char **why)
{
    const sobj *owner =
        holder->owner_name ? store_get(op_store(c->op, OPK_NODESETS), holder->ns, holder->owner_name) : NULL;
    if (owner == NULL || owner == o)
        return 0;
    const sobj *earlier = ns_earlier(owner, o) ? owner : o, *later = earlier == o ? owner : o;
    char *msg = xasprintf(
        "Slurm node %s is the name of pod %s/%s of NodeSet %s/%s and of a pod of NodeSet %s/%s, "
        "which use the same Controller: the later NodeSet, %s/%s, is invalid until they no longer "
        "share names (its pods are kept; no pod is created under a shared name)",
        name, holder->ns, holder->name, owner->ns, owner->name, o->ns, o->name, later->ns, later->name);
    if (later == o && why)
        *why = xstrdup(msg);
    rival_note(c, later->key, msg);
    return later == o;
}

void nodeset_enqueue(operator *op, const char *key)
{
    enqueue_full(nodeset_of(op), key, "slurm");
}

void nodeset_enqueue_after(operator *op, const char *key, uint64_t ms)
{
    nodeset_state *c = nodeset_of(op);
    /* Whenever the next pass runs, it is a full one. */
    incr_mark_full(c, key, "requeue");
    if (c->q)
        wq_add_after(c->q, key, ms);
}

/* The queue handed to nodeset_slurm (nodeset_slurm.h, nss_queue); ctx is
 * the state. */
static void queue_now(void *ctx, const char *key)
{
    enqueue_full(ctx, key, "slurm");
}

/* A Slurm node event about one pod of key: an incremental pass may look
 * at that pod only. */
static void queue_pod(void *ctx, const char *key, const sobj *pod)
{
    nodeset_state *c = ctx;
    incr_mark_pod(c, key, pod);
    if (c->q)
        wq_add(c->q, key);
}

static void queue_after(void *ctx, const char *key, uint64_t ms)
{
    nodeset_state *c = ctx;
    nodeset_enqueue_after(c->op, key, ms);
}

/* The Slurm side's part of key's record (nss_queue.part, next_part). */
static nss_set **slurm_part(void *ctx, const char *key, int make)
{
    nodeset_state *c = ctx;
    struct ns_rec *r = make ? rec_ensure(c, key) : rec_get(c, key);
    return r ? &r->slurm : NULL;
}

static nss_set *slurm_next_part(void *ctx, size_t *it)
{
    nodeset_state *c = ctx;
    const char *k;
    void *v;
    while (map_next(&c->recs, it, &k, &v)) {
        const struct ns_rec *r = v;
        if (r->slurm)
            return r->slurm;
    }
    return NULL;
}

/* A Slurm write for one pod of key failed and backs off for ms: that pod
 * alone is looked at again then. The entry is kept whatever the state is
 * now: this may run inside a full pass (slurm_update backing off), whose
 * end (incr_rebuild) clears a full mark, and the pass that comes when it
 * is due may be incremental. One entry per pod at most; more than
 * INCR_MAX_DIRTY due at once make that pass a full one. Without a state
 * (no full pass yet) every pass is a full one: a delayed one, as before. */
static void queue_pod_after(void *ctx, const char *key, const sobj *pod, uint64_t ms)
{
    nodeset_state *c = ctx;
    struct incr *r = incr_of(c, key);
    if (r == NULL || c->q == NULL) {
        nodeset_enqueue_after(c->op, key, ms);
        return;
    }
    uint64_t due = uv_hrtime() / 1000000u + ms;
    struct retry *e = map_get(&r->retry, pod->uid);
    if (e == NULL) {
        size_t n = strlen(pod->key) + 1;
        e = xmalloc(sizeof(*e) + n);
        memcpy(e->pod_key, pod->key, n);
        e->due_ms = due;
        map_put(&r->retry, xstrdup(pod->uid), e);
    } else if (due > e->due_ms) {
        /* The later one: taken at the earlier, the pod would still be
         * backing off, and nothing would bring it back. */
        e->due_ms = due;
    }
    wq_add_after(c->q, key, ms);
}

/* A NodeSet key with the state, for the callbacks of writes. */
struct keyref {
    nodeset_state *c;
    char key[];
};

static struct keyref *keyref_new(nodeset_state *c, const char *key)
{
    size_t n = strlen(key) + 1;
    struct keyref *k = xmalloc(sizeof(*k) + n);
    k->c = c;
    memcpy(k->key, key, n);
    return k;
}

/* ------------------------------------------------------------------ */
/* indexes and event handlers */

/* Unbound pods that nh_avoid_nodes kept off unhealthy Nodes are indexed
 * under a value no Node is named: a Node's change (healthy again) reaches
 * their NodeSets too, whose pass sweeps them (nss_sync). */
#define POD_NODE_AVOIDING "\x01avoiding"

static const char *pod_node_index(const sobj *o, void *data)
{
    (void)data;
    const pod_proj *p = pod_of(o);
    if (p && !p->node_name && sobj_annotation(o, ANN_POD_AVOIDED))
        return POD_NODE_AVOIDING;
    return p ? p->node_name : NULL;
}

static const char *nodeset_ctl_index(const sobj *o, void *data)
{
    nodeset_state *c = data;
    char *buf = c->ctl_index_key;
    size_t len = sizeof(c->ctl_index_key);
    const char *ctl = json_get_str(o->json, "spec.controllerRef.name");
    const char *ns = cw_ref_ns(o->json, "spec.controllerRef");
    if (ctl == NULL || *ctl == '\0' || ns == NULL)
        return NULL;
    snprintf(buf, len, "%s/%s", ns, ctl);
    return buf;
}

static void enqueue_owner(nodeset_state *c, const sobj *pod)
{
    char key[512];
    if (pod->owner_kind && strcmp(pod->owner_kind, NSB_KIND) == 0 && pod->owner_name) {
        snprintf(key, sizeof(key), "%s/%s", pod->ns, pod->owner_name);
        incr_mark_pod(c, key, pod);
        if (c->q)
            wq_add(c->q, key);
    } else if (pod->owner_kind == NULL) {
        /* An orphan that carries our labels may be adopted by its NodeSet
         * (a full pass looks for orphans). */
        const char *inst = sobj_label(pod, NSB_LABEL_INSTANCE);
        const char *app = sobj_label(pod, NSB_LABEL_APP);
        if (inst && app && strcmp(app, "slurmd") == 0) {
            snprintf(key, sizeof(key), "%s/%s", pod->ns, inst);
            enqueue_full(c, key, "orphan-pod");
        }
    }
}

static void on_pod(store *s, const sobj *old, const sobj *new, void *data)
{
    nodeset_state *c = data;
    const sobj *o = new ? new : old;
    if (o->owner_kind && strcmp(o->owner_kind, NSB_KIND) == 0 && o->owner_name) {
        char key[512];
        snprintf(key, sizeof(key), "%s/%s", o->ns, o->owner_name);
        exp_owner *e = exp_of(c, key);
        if (!old && new) {
            if (e)
                exp_creation_observed(e);
            incr_created(c, key, nsb_parse_ordinal(o->name, o->owner_name));
        }
        /* A pod with a deletion timestamp counts as deleted, as in
         * Kubernetes' own controllers: a pod on a Node that is gone stays
         * Terminating until the pod garbage collector removes it (no
         * kubelet confirms), and the NodeSet must not wait for that. The
         * passes still see it (terminating) and do not replace it early. */
        if (e && ((old && !new) || (new && new->deleting && !(old && old->deleting))))
            exp_deletion_observed(e, o->key);
    }
    if (old && new && old->owner_uid && old->owner_uid != new->owner_uid)
        enqueue_owner(c, old);
    enqueue_owner(c, o);
}

/* Whether a NodeSet change may change what a full pass decides: anything
 * but the status it writes itself (the counters and conditions). */
static int nodeset_changed(const sobj *old, const sobj *new)
{
    static const char *const parts[] = {"spec",
                                        "metadata.labels",
                                        "metadata.annotations",
                                        "metadata.finalizers",
                                        "metadata.deletionTimestamp",
                                        "metadata.ownerReferences",
                                        "status.nodeSetHash",
                                        "status.collisionCount",
                                        "status.ordinalToNode"};
    if (!old || !new || !old->json || !new->json || strcmp(old->uid, new->uid) != 0 ||
        old->generation != new->generation || old->deleting != new->deleting)
        return 1;
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        if (!json_equal(json_get(old->json, parts[i]), json_get(new->json, parts[i])))
            return 1;
    return 0;
}

static void on_nodeset(store *s, const sobj *old, const sobj *new, void *data)
{
    nodeset_state *c = data;
    const sobj *o = new ? new : old;
    exp_owner *e = exp_of(c, o->key);
    if (e && (new == NULL || (old && strcmp(old->uid, new->uid) != 0)))
        exp_drop(e);
    if (nodeset_changed(old, new)) {
        incr_mark_full(c, o->key, "nodeset");
        /* Its Controller's other NodeSets: one made invalid by sharing Slurm
         * names with this one may be valid now (names_rival), or the
         * reverse. Not for status writes (nodeset_changed): no cascade. */
        char v[512];
        store_cursor cur;
        nsp_spec sp;
        nsp_read(o->json, &sp);
        ctl_key_of(&sp, o->ns, v, sizeof(v));
        for (const sobj *t = o->json ? store_index_first(s, c->ix_ns_ctl, v, &cur) : NULL; t;
             t = store_index_next(&cur))
            if (t != o && strcmp(t->key, o->key) != 0)
                enqueue_full(c, t->key, "nodeset");
    }
    if (c->q)
        wq_add(c->q, o->key);
}

static void enqueue_nodesets_of_controller(nodeset_state *c, const char *ns, const char *ctl)
{
    char v[512];
    store_cursor cur;
    snprintf(v, sizeof(v), "%s/%s", ns, ctl);
    for (const sobj *o = store_index_first(op_store(c->op, OPK_NODESETS), c->ix_ns_ctl, v, &cur); o;
         o = store_index_next(&cur))
        enqueue_full(c, o->key, "controller");
}

static void on_controller(store *s, const sobj *old, const sobj *new, void *data)
{
    const sobj *o = new ? new : old;
    enqueue_nodesets_of_controller(data, o->ns, o->name);
}

/* A Secret holding a Controller's keys changed: its NodeSets re-roll. */
static void on_secret(store *s, const sobj *old, const sobj *new, void *data)
{
    nodeset_state *c = data;
    const sobj *o = new ? new : old;
    size_t it = 0;
    const sobj *ctl;
    store *ctls = op_store(c->op, OPK_CONTROLLERS);
    while ((ctl = store_next(ctls, &it))) {
        if (strcmp(ctl->ns, o->ns) != 0)
            continue;
        const char *k = json_get_str(ctl->json, "spec.slurmKeyRef.name");
        if (k && strcmp(k, o->name) == 0)
            enqueue_nodesets_of_controller(c, ctl->ns, ctl->name);
    }
}

static void on_revision(store *s, const sobj *old, const sobj *new, void *data)
{
    const sobj *o = new ? new : old;
    if (o->owner_kind && strcmp(o->owner_kind, NSB_KIND) == 0 && o->owner_name) {
        char key[512];
        snprintf(key, sizeof(key), "%s/%s", o->ns, o->owner_name);
        enqueue_full(data, key, "revision");
    }
}

/* Node changes matter when they change where pods may run or how they are
 * cordoned: labels, annotations, taints, unschedulable, and the conditions
 * the trimmed Node keeps (propagated and health ones, never heartbeats). */
static int node_changed(const sobj *old, const sobj *new)
{
    if (!old || !new)
        return 1;
    return !sobj_labels_equal(old, new) ||
           !json_equal(json_child(old->json, "metadata"), json_child(new->json, "metadata")) ||
           !json_equal(json_child(old->json, "spec"), json_child(new->json, "spec")) ||
           !json_equal(json_child(old->json, "status"), json_child(new->json, "status"));
}

static void on_node(store *s, const sobj *old, const sobj *new, void *data)
{
    nodeset_state *c = data;
    const sobj *o = new ? new : old;
    if (!node_changed(old, new))
        return;
    /* NodeSets with pods on this Node (cordon sync, DaemonSet predicates) ... */
    store_cursor cur;
    for (const sobj *p = store_index_first(op_store(c->op, OPK_PODS), c->ix_pod_node, o->name, &cur); p;
         p = store_index_next(&cur))
        enqueue_owner(c, p);
    /* ... NodeSets whose unbound pods avoid unhealthy Nodes (this one may
     * be healthy again) ... */
    for (const sobj *p =
             store_index_first(op_store(c->op, OPK_PODS), c->ix_pod_node, POD_NODE_AVOIDING, &cur);
         p; p = store_index_next(&cur))
        enqueue_owner(c, p);
    /* ... and every DaemonSet-mode NodeSet (the Node may become eligible). */
    size_t it = 0;
    const sobj *n;
    while ((n = store_next(op_store(c->op, OPK_NODESETS), &it)))
        if (nsb_mode_of(n->json) == NSB_DAEMONSET)
            enqueue_full(c, n->key, "node");
}

static void setup(operator *op)
{
    nodeset_state *c = nodeset_of(op);
    c->op = op;
    store *pods = op_store(op, OPK_PODS);
    c->ix_pod_owner = store_add_owner_index(pods);
    c->ix_pod_instance = store_add_label_index(pods, NSB_LABEL_INSTANCE);
    c->ix_pod_node = store_add_index(pods, pod_node_index, NULL);
    c->ix_ns_ctl = store_add_index(op_store(op, OPK_NODESETS), nodeset_ctl_index, c);
    c->ix_rev_owner = store_add_owner_index(op_store(op, OPK_REVISIONS));
    c->ik.revision = istr_get(NSB_LABEL_REVISION);
    c->ik.revision_slinky = istr_get(NSB_LABEL_REVISION_SLINKY);
    c->ik.cordon = istr_get(NSB_ANN_POD_CORDON);
    c->ik.cost = istr_get(NSB_ANN_DELETION_COST);
    c->ik.deadline = istr_get(NSB_ANN_DEADLINE);
    c->ik.hostname = istr_get(NSB_LABEL_POD_HOSTNAME);
    c->ik.instance = istr_get(NSB_LABEL_INSTANCE);
    c->ik.mode = istr_get(NSB_LABEL_SCALING_MODE);
    store_on_change(pods, on_pod, c);
    store_on_change(op_store(op, OPK_NODESETS), on_nodeset, c);
    store_on_change(op_store(op, OPK_CONTROLLERS), on_controller, c);
    store_on_change(op_store(op, OPK_SECRETS), on_secret, c);
    store_on_change(op_store(op, OPK_REVISIONS), on_revision, c);
    store_on_change(op_store(op, OPK_NODES), on_node, c);
    nsw_setup(op, &(nsw_hooks){.retry = queue_after, .ctx = c});
    nss_setup(op, &(nss_queue){.now = queue_now,
                               .after = queue_after,
                               .pod = queue_pod,
                               .pod_after = queue_pod_after,
                               .part = slurm_part,
                               .next_part = slurm_next_part,
                               .ctx = c});
}

/* ------------------------------------------------------------------ */
/* one pass */

struct pass {
    const char *full_why; /* why the pass could not be an incremental one (static text) */
    int slurm_busy;       /* ... and that was the Slurm side not being calm (incr_usable) */
    int k8s_share;        /* the incremental step skipped the Slurm share (incr_usable) */
    operator *op;
    nodeset_state *c; /* nodeset_of(op) */
    const sobj *o;
    cJSON *ns;       /* the NodeSet with defaults */
    nsp_spec spec;   /* ... its fields (borrowed from ns) */
    const char *key; /* ns/name */
    const char *name;
    const char *nsname;
    const cJSON *ctl;
    enum nsb_mode mode;
    char update_hash[NSB_HASH_MAX];
    char current_hash[NSB_HASH_MAX];
    int32_t collision;
    nsb_pod *pods; /* owned, claimed pods */
    size_t n_pods;
    int64_t now;
    uint64_t first_add_ns;
    uint64_t held_ns; /* see struct wait_pass */
    uint64_t busy_held_ns; /* ... of events whose Slurm share a gap deferred (busy_defer) */
    int wrote, wrote_pod;
    int delete_first; /* delete_pod goes ahead of the deletes queued before it (slurm_release_pod) */
    uint32_t requeue_ms; /* smallest requested delay, 0 = none */
    uint32_t soft_ms;    /* ... of a wake whose pass may be incremental (wait_net), 0 = none */
    int wait_state;      /* WAIT_*: whether the pass found replicas short while pods terminate */
    char *conflict;      /* objects not ours with our names, NULL when none (cluster_rc.h) */
};

/* A write of the pass: the first one is its action. A pod's create or
 * delete (pod) also counts from the queueing of passes held back before it
 * (held_ns); a status or object write only from the pass's own queueing. */
static void note_write(struct pass *p, int pod)
{
    uint64_t t = p->first_add_ns;
    if (pod && p->held_ns && (t == 0 || p->held_ns < t))
        t = p->held_ns;
    if (!p->wrote)
        op_observe_action(p->op, NODESET_CONTROLLER, t);
    if (pod && !p->wrote_pod)
        op_observe_pod_write(p->op, NODESET_CONTROLLER, t);
    p->wrote = 1;
    p->wrote_pod |= pod;
}

static void want_requeue(struct pass *p, uint32_t ms)
{
    if (p->requeue_ms == 0 || ms < p->requeue_ms)
        p->requeue_ms = ms;
}

/* Short of replicas while pods terminate, a pass waits: their DELETED
 * events queue the NodeSet, and a wake after WAIT_NET_MS is the safety net
 * for one that never comes. The wake may be incremental: under churn a pod
 * is often terminating for the millisecond between the deletionTimestamp
 * kube-apiserver writes on a grace-0 delete and its removal, so nearly every
 * window has such a wait, and a full pass for each (up to 25 ms of the loop
 * at fleet size) would be most of the loop's work. Only a wait that has
 * lasted WAIT_NET_MS (the same passes still waiting) gets the full pass. A
 * pass that did not judge the wait leaves it as it was. */
#define WAIT_NET_MS 5000
enum { WAIT_UNJUDGED, WAIT_NONE, WAIT_SHORT };

static void wait_net(struct pass *p, struct incr *r, uint64_t now)
{
    if (p->wait_state == WAIT_UNJUDGED)
        return;
    if (p->wait_state == WAIT_NONE) {
        if (r)
            r->wait_since_ms = 0;
        return;
    }
    if (r == NULL || !r->valid) {
        want_requeue(p, WAIT_NET_MS); /* no state: every pass is a full one anyway */
        return;
    }
    if (r->wait_since_ms == 0)
        r->wait_since_ms = now;
    if (now - r->wait_since_ms >= WAIT_NET_MS)
        want_requeue(p, WAIT_NET_MS);
    else if (p->soft_ms == 0 || WAIT_NET_MS < p->soft_ms)
        p->soft_ms = WAIT_NET_MS;
}

static const sobj *pod_sobj(const nsb_pod *p)
{
    return p->ud;
}

/* The watchers' pod projection keeps the phase as enum pod_phase, the
 * builders read enum nsb_phase: the cast below is a conversion only while
 * the two enumerations name the same phases with the same numbers. */
_Static_assert(POD_NONE == (int)NSB_PHASE_NONE && POD_PENDING == (int)NSB_PHASE_PENDING &&
                   POD_RUNNING == (int)NSB_PHASE_RUNNING && POD_SUCCEEDED == (int)NSB_PHASE_SUCCEEDED &&
                   POD_FAILED == (int)NSB_PHASE_FAILED && POD_UNKNOWN == (int)NSB_PHASE_UNKNOWN,
               "enum pod_phase (watchers/kinds.h) and enum nsb_phase (reconcilers/nodeset_build.h) differ");

static enum nsb_phase phase_of(const pod_proj *pp)
{
    return (enum nsb_phase)pp->phase;
}

static void fill_pod(const nodeset_state *c, const sobj *o, const char *nss, nsb_pod *p)
{
    const pod_proj *pp = pod_of(o);
    const char *cordon = sobj_annotation_i(o, c->ik.cordon);
    const char *cost = sobj_annotation_i(o, c->ik.cost);
    const char *deadline = sobj_annotation_i(o, c->ik.deadline);
    memset(p, 0, sizeof(*p));
    p->name = o->name;
    p->revision = sobj_label_i(o, c->ik.revision);
    if (p->revision == NULL)
        p->revision = sobj_label_i(o, c->ik.revision_slinky);
    p->ordinal = nsb_parse_ordinal(o->name, nss);
    p->phase = phase_of(pp);
    p->scheduled = pp->scheduled;
    p->ready = pp->ready;
    p->cordoned = cordon && strcmp(cordon, "true") == 0;
    p->terminating = o->deleting != 0;
    p->deletion_cost = cost ? (int32_t)strtol(cost, NULL, 10) : 0;
    p->ready_since = pp->ready ? pp->ready_since : 0;
    p->deadline = deadline ? rfc3339_secs(deadline) : 0;
    p->created = o->created;
    p->ud = (void *)(uintptr_t)o;
}

/* ---- writes ---- */

/* A retry that doubles: 1 s, then twice the last delay up to a cap, and 1 s
 * again once a whole cap has passed since the last try (as client-go's
 * flowcontrol.Backoff: a pod that ran that long was not failing at once).
 * Two maps of the NodeSet's record hold them (ns_rec): DaemonSet mode
 * replaces failed pods with a per-node backoff (to 15 min), as Kubernetes'
 * DaemonSet controller does, so that a pod failing at once on one bad node
 * does not spin ("<nodeset uid>/<node>"); held_names is below. */
struct backoff {
    char *key;
    rl_backoff bo;
    uint64_t next_ms;
};
static void backoff_free(void *v)
{
    struct backoff *b = v;
    free(b->key);
    free(b);
}

static const map_type backoff_type = {.val_free = backoff_free};

/* Entries whose backoff would start over anyway (a whole cap since their
 * last try) say nothing: without this sweep a NodeSet's or Node's entries
 * outlived it, one per Node and NodeSet uid ever replaced. */
static void backoff_sweep(map_t *m, unsigned max_ms, uint64_t now)
{
    size_t it = 0;
    const char *k;
    void *v;
    size_t n = 0;
    char **stale = NULL;
    while (map_next(m, &it, &k, &v)) {
        const struct backoff *b = v;
        if (b->next_ms + max_ms < now) {
            stale = xrealloc(stale, (n + 1) * sizeof(*stale));
            stale[n++] = b->key;
        }
    }
    for (size_t i = 0; i < n; i++)
        map_drop(m, stale[i]); /* frees the entry, whose key stale[i] was */
    free(stale);
}

/* Record one more try under key: the next may come after the doubled delay. */
static void backoff_bump(map_t *m, const char *key, unsigned max_ms, uint64_t now)
{
    struct backoff *b = map_get(m, key);
    if (b == NULL && m->count >= 64 && (m->count & (m->count - 1)) == 0) {
        /* A sweep each time a new entry finds the map at a power of two:
         * linear in the entries added since the last one. */
        backoff_sweep(m, max_ms, now);
    }
    if (b == NULL) {
        b = xcalloc(1, sizeof(*b));
        b->key = xstrdup(key);
        uint64_t cap = (uint64_t)max_ms * RL_NS_PER_MS;
        rl_backoff_init(&b->bo, 1000 * RL_NS_PER_MS, cap, 2.0, 0.0, cap);
        map_put(m, b->key, b);
    }
    b->next_ms = now + rl_backoff_next(&b->bo, now * RL_NS_PER_MS) / RL_NS_PER_MS;
}

/* A StatefulSet-mode create answered 409 for a name the pod cache does not
 * hold (a pod without our labels, which the cache leaves out, or ours not
 * seen yet): the ordinal waits, 1 s doubling to 60 s, so that the events of
 * a large fleet do not try the create again each time. Keyed
 * "<nodeset uid>/#<ordinal>" in the record's held_names; a successful
 * create of the ordinal removes the entry. */
#define HELD_MAX_MS 60000
static void held_key(char *key, size_t len, const char *uid, int ordinal)
{
    snprintf(key, len, "%s/#%d", uid, ordinal);
}

/* One scale-up. Pods are stamped from the job's template when their turn
 * in the batch comes, so 8,192 creates hold 8,192 small items and at most
 * a window of pod bodies, not 8,192 pod trees at once. */
struct create_job {
    nodeset_state *c;
    int refs; /* one per item */
    char *owner_key;
    char *owner_uid;
    cJSON *ns;   /* the NodeSet with defaults (copy) */
    cJSON *ctl;  /* the Controller (copy) */
    cJSON *tmpl; /* nsb_build_template of the pass */
    char revision[NSB_HASH_MAX];
    char *cluster_domain;
};

struct create_item {
    struct create_job *job;
    int ordinal;         /* StatefulSet mode, else -1 */
    char *node;          /* DaemonSet mode: the target Node */
    char *node_override; /* its hostname-override annotation */
    char *pin_node;      /* pinToNode */
};

struct create_ctx {
    nodeset_state *c;
    wbatch *b;
    size_t index;
    char *owner_key;
    char *name; /* the pod's, when the create names it */
};

static void job_unref(struct create_job *j)
{
    if (--j->refs > 0)
        return;
    free(j->owner_key);
    free(j->owner_uid);
    cJSON_Delete(j->ns);
    cJSON_Delete(j->ctl);
    cJSON_Delete(j->tmpl);
    free(j->cluster_domain);
    free(j);
}

static void create_done(int err, const cJSON *obj, const kube_status *st, void *data);

static void create_start(wbatch *b, size_t index, void *item, void *data)
{
    struct create_item *ci = item;
    struct create_job *j = ci->job;
    char err[256];
    nsb_pod_args a;
    memset(&a, 0, sizeof(a));
    a.nodeset = j->ns;
    a.controller = j->ctl;
    a.revision = j->revision;
    a.cluster_domain = j->cluster_domain;
    a.ordinal = ci->ordinal;
    a.node_name = ci->node;
    a.node_hostname_override = ci->node_override;
    a.pin_node = ci->pin_node;
    cJSON *pod = nsb_stamp_pod(&a, j->tmpl, err, sizeof(err));
    if (pod == NULL) {
        log_warn("nodeset %s: cannot build a pod: %s", j->owner_key, err);
        wbatch_item_done(b, index, OP_EINVAL);
        return;
    }
    /* A StatefulSet-mode pod (not pinned) stays off unhealthy Nodes: it may
     * replace one drained for health there. */
    if (ci->ordinal >= 0 && ci->pin_node == NULL)
        nss_health_avoid(j->c->op, pod);
    struct create_ctx *ctx = xmalloc(sizeof(*ctx));
    ctx->c = j->c;
    ctx->b = b;
    ctx->index = index;
    ctx->owner_key = xstrdup(j->owner_key);
    /* A named pod (StatefulSet mode) needs nothing from the answer; a
     * generated name (DaemonSet mode) is read from it for the Event. */
    const char *name = json_get_str(pod, "metadata.name");
    ctx->name = name ? xstrdup(name) : NULL;
    nsw_create_pod(j->c->op, pod, name == NULL, create_done, ctx);
    cJSON_Delete(pod);
}

static void create_done(int err, const cJSON *obj, const kube_status *st, void *data)
{
    struct create_ctx *ctx = data;
    nodeset_state *c = ctx->c;
    wbatch *b = ctx->b;
    size_t index = ctx->index;
    if (err && err != OP_ECANCELED)
        log_warn("nodeset %s: creating a pod failed: %s (%s)", ctx->owner_key, err_str(err),
                 st ? st->message : "");
    if (err == 0 && c->op) {
        const sobj *o = store_get_key(op_store(c->op, OPK_NODESETS), ctx->owner_key);
        if (o)
            op_event(c->op, o, NSB_KIND, "SuccessfulCreate", "Create", "Created pod %s",
                     ctx->name ? ctx->name : json_get_str_or(obj, "metadata.name", "?"));
    }
    free(ctx->name);
    free(ctx->owner_key);
    free(ctx);
    wbatch_item_done(b, index, err);
}

static void create_item_done(void *item, int err, void *data)
{
    struct create_item *ci = item;
    struct create_job *j = ci->job;
    nodeset_state *c = j->c;
    if (!ci->node && ci->ordinal >= 0 && c->q) { /* (not after stop: the map is gone) */
        char key[512];
        held_key(key, sizeof(key), j->owner_uid, ci->ordinal);
        struct ns_rec *rec = rec_get(c, j->owner_key);
        if (err == OP_EEXISTS) {
            if (!rec && store_get_key(op_store(c->op, OPK_NODESETS), j->owner_key))
                rec = rec_ensure(c, j->owner_key); /* not for a NodeSet gone meanwhile */
            if (rec)
                backoff_bump(&rec->held_names, key, HELD_MAX_MS, uv_now(c->op->loop));
        } else if (err == 0 && rec) {
            struct backoff *h = map_del(&rec->held_names, key);
            if (h)
                backoff_free(h);
        }
    }
    if (err) {
        /* The create will never be observed: lower the expectation now. */
        exp_owner *e = exp_of(c, j->owner_key);
        if (e)
            exp_creation_observed(e);
        incr_created(c, j->owner_key, ci->ordinal);
        if (err != OP_ECANCELED && err != OP_EEXISTS && c->op) {
            const sobj *o = store_get_key(op_store(c->op, OPK_NODESETS), j->owner_key);
            if (o)
                op_warn(c->op, o, NSB_KIND, "FailedCreate", "Failed to create a pod (%s%s%d): %s",
                        ci->node ? "node " : "ordinal ", ci->node ? ci->node : "", ci->node ? 0 : ci->ordinal,
                        err_str(err));
        }
    }
    free(ci->node);
    free(ci->node_override);
    free(ci->pin_node);
    free(ci);
    job_unref(j);
}

static void create_end(size_t sent, size_t failed, size_t skipped, void *data)
{
    struct keyref *k = data;
    if (failed && k->c->q)
        mark_failed(k->c, k->key);
    free(k);
}

static struct create_job *job_new(struct pass *p, cJSON *tmpl)
{
    struct create_job *j = xcalloc(1, sizeof(*j));
    j->c = p->c;
    j->owner_key = xstrdup(p->key);
    j->owner_uid = xstrdup(p->o->uid);
    j->ns = cJSON_Duplicate(p->ns, 1);
    j->ctl = cJSON_Duplicate(p->ctl, 1);
    j->tmpl = tmpl;
    snprintf(j->revision, sizeof(j->revision), "%s", p->update_hash);
    j->cluster_domain = xstrdup(p->op->cluster_domain);
    return j;
}

static struct create_item *item_new(struct create_job *j, int ordinal, const char *node, const char *override,
                                    const char *pin)
{
    struct create_item *ci = xcalloc(1, sizeof(*ci));
    ci->job = j;
    j->refs++;
    ci->ordinal = ordinal;
    ci->node = node ? xstrdup(node) : NULL;
    ci->node_override = override ? xstrdup(override) : NULL;
    ci->pin_node = pin ? xstrdup(pin) : NULL;
    return ci;
}

/* Submit a job's items (the job is freed with its last item). */
static void submit_creates(struct pass *p, struct create_job *j, struct create_item **items, size_t n)
{
    if (n == 0) {
        j->refs++;
        job_unref(j);
        return;
    }
    exp_expect_creations(&rec_ensure(p->c, p->key)->exp, p->o->uid, (int)n, uv_now(p->op->loop));
    note_write(p, 1);
    wbatch_run((void *const *)items, n, create_start, create_item_done, create_end, keyref_new(p->c, p->key));
}

struct delete_ctx {
    nodeset_state *c;
    char *owner_key;
    char *pod_key;
};

static void delete_done(int err, const cJSON *obj, const kube_status *st, void *data)
{
    struct delete_ctx *d = data;
    nodeset_state *c = d->c;
    if (err && err != OP_ENOTFOUND) {
        /* Not deleted: the deletion will not be observed. */
        exp_owner *e = exp_of(c, d->owner_key);
        if (e)
            exp_deletion_observed(e, d->pod_key);
        if (err == OP_ECONFLICT) {
            /* A precondition: the pod changed since the pass saw it (bound to
             * a Node, say); the next pass judges it as it is now. */
            log_info("nodeset %s: pod %s not deleted: it changed since it was judged (%s)", d->owner_key,
                     d->pod_key, st ? st->message : "");
            if (c->q)
                wq_add(c->q, d->owner_key);
        } else if (err != OP_ECANCELED) {
            log_warn("nodeset %s: deleting pod %s failed: %s (%s)", d->owner_key, d->pod_key, err_str(err),
                     st ? st->message : "");
            if (c->q)
                mark_failed(c, d->owner_key);
        }
    } else if (err == OP_ENOTFOUND && exp_of(c, d->owner_key)) {
        exp_deletion_observed(exp_of(c, d->owner_key), d->pod_key);
    } else if (err == 0 && c->op) {
        const sobj *o = store_get_key(op_store(c->op, OPK_NODESETS), d->owner_key);
        const char *slash = strchr(d->pod_key, '/');
        if (o)
            op_event(c->op, o, NSB_KIND, "SuccessfulDelete", "Delete", "Deleted pod %s",
                     slash ? slash + 1 : d->pod_key);
    }
    free(d->owner_key);
    free(d->pod_key);
    free(d);
}

/* Delete one pod now (its Slurm node is drained, or it never joined).
 * unchanged: only as our cache has it (its resourceVersion a precondition),
 * for a pod deleted because of what the cache shows of it. */
static void delete_pod_as(struct pass *p, const sobj *pod, const char *why, int unchanged)
{
    struct delete_ctx *d = xcalloc(1, sizeof(*d));
    d->c = p->c;
    d->owner_key = xstrdup(p->key);
    d->pod_key = xstrdup(pod->key);
    exp_expect_deletion(&rec_ensure(p->c, p->key)->exp, p->o->uid, pod->key, uv_now(p->op->loop));
    log_info("nodeset %s: deleting pod %s (%s)", p->key, pod->name, why);
    note_write(p, 1);
    /* Ahead of queued status and metadata writes (in a scale-in of
     * thousands it would wait seconds behind them). */
    nsw_delete_pod(p->op, pod, unchanged, p->delete_first, delete_done, d);
}

static void delete_pod(struct pass *p, const sobj *pod, const char *why)
{
    delete_pod_as(p, pod, why, 0);
}

/* Somebody else's object holds one of our names: a Warning event, and the
 * pass's conflict (the OwnershipConflict condition) names it. Takes what. */
static void set_conflict(struct pass *p, char *what)
{
    op_warn(p->op, p->o, NSB_KIND, CRC_REASON_NOT_OWNED, "%s", what);
    if (p->conflict) {
        char *both = xasprintf("%s; %s", p->conflict, what);
        free(what);
        what = both;
        free(p->conflict);
    }
    p->conflict = what;
}

static void ensure(struct pass *p, enum op_kind kind, const kube_res *res, cJSON *desired);

/* volumeClaimTemplates: make sure a pod's claims exist before the pod (and
 * carry the owner references the retention policy asks for), and move a
 * claim's owner to its pod once the pod is condemned for scale-in when
 * whenScaled is Delete (the garbage collector then removes the claim with
 * the pod). */
static void sync_claims(struct pass *p, int ordinal, const char *hostname, const sobj *pod, int condemned)
{
    const cJSON *claims = p->spec.claims;
    if (claims == NULL)
        return;
    char *suffix = nsb_pvc_suffix(p->ns, ordinal, hostname);
    if (suffix == NULL)
        return;
    for (const cJSON *t = claims->child; t; t = t->next) {
        const char *claim = json_get_str(t, "metadata.name");
        if (claim == NULL)
            continue;
        char *name = nsb_pvc_name(claim, p->name, suffix);
        const sobj *live = store_get(op_store(p->op, OPK_PVCS), p->nsname, name);
        cJSON *want;
        if (live == NULL || live->json == NULL) {
            want = nsb_build_pvc(p->ns, t, suffix);
            if (want && pod)
                nsb_pvc_update_owner_refs(want, p->ns, pod->name, pod->uid, condemned);
        } else {
            cJSON *copy = cJSON_Duplicate(live->json, 1);
            if (!nsb_pvc_update_owner_refs(copy, p->ns, pod ? pod->name : NULL, pod ? pod->uid : NULL,
                                           condemned)) {
                cJSON_Delete(copy);
                free(name);
                continue;
            }
            /* Only the references are ours to change on a live claim. */
            want = cJSON_CreateObject();
            json_set_str(want, "apiVersion", "v1");
            json_set_str(want, "kind", "PersistentVolumeClaim");
            cJSON *meta = json_obj_ensure(want, "metadata");
            json_set_str(meta, "name", name);
            json_set_str(meta, "namespace", p->nsname);
            const cJSON *refs = json_get(copy, "metadata.ownerReferences");
            json_set(meta, "ownerReferences", refs ? cJSON_Duplicate(refs, 1) : cJSON_CreateArray());
            cJSON_Delete(copy);
        }
        ensure(p, OPK_PVCS, &KUBE_PVCS, want);
        free(name);
    }
    free(suffix);
}

/* Condemn a pod: drain first, delete once Slurm says it is drained. */
static void condemn(struct pass *p, const sobj *pod, const char *why)
{
    if (pod->deleting)
        return;
    if (strcmp(why, "scale-in") == 0)
        sync_claims(p, nsb_parse_ordinal(pod->name, p->name), sobj_label(pod, NSB_LABEL_POD_HOSTNAME), pod,
                    1);
    int v = nss_condemn(p->op, p->o, p->ctl, pod, why);
    if (v == NSS_DELETE)
        delete_pod(p, pod, why);
    else
        want_requeue(p, 30000); /* a safety net: the node cache enqueues us when the drain completes */
}

static void on_object_written(int err, const char *key, void *data)
{
    struct keyref *k = data;
    if (k->c->q) {
        if (err && err != OP_ECANCELED)
            mark_failed(k->c, k->key);
        else
            enqueue_full(k->c, k->key, "own-write");
    }
    free(k);
}

static void ensure(struct pass *p, enum op_kind kind, const kube_res *res, cJSON *desired)
{
    if (desired == NULL)
        return;
    struct keyref *key = keyref_new(p->c, p->key);
    int rc = objsync_ensure(p->op->objsync, op_store(p->op, kind), res, desired, on_object_written, key);
    /* The callback owns the key copy only when a write was submitted. */
    if (rc == OBJSYNC_WRITING)
        note_write(p, 0);
    else
        free(key);
    if (rc == OBJSYNC_NOT_OWNED) {
        /* Somebody else's object has the name: never written; the Event
         * and the condition say so, and a later pass looks again (its
         * removal does not queue us). */
        set_conflict(p, xasprintf("%s %s/%s exists and is not owned by NodeSet %s: left alone", res->kind,
                                  p->nsname, json_get_str_or(desired, "metadata.name", ""), p->name));
        want_requeue(p, CRC_CONFLICT_RETRY_MS);
    }
    cJSON_Delete(desired);
}

/* ---- steps ---- */

/* The ControllerRevisions: pick or create the update revision. */
static int sync_revisions(struct pass *p)
{
    store *revs_store = op_store(p->op, OPK_REVISIONS);
    size_t n = store_index_count(revs_store, p->c->ix_rev_owner, p->o->uid), i = 0;
    nsb_rev *revs = xcalloc(n ? n : 1, sizeof(*revs));
    store_cursor c;
    for (const sobj *r = store_index_first(revs_store, p->c->ix_rev_owner, p->o->uid, &c); r && i < n;
         r = store_index_next(&c), i++) {
        revs[i].name = r->name;
        revs[i].hash = sobj_label(r, NSB_LABEL_REVISION);
        if (revs[i].hash == NULL) {
            revs[i].hash = sobj_label(r, NSB_LABEL_REVISION_SLINKY);
            revs[i].slinky = revs[i].hash != NULL;
        }
        revs[i].revision = json_get_int(r->json, "revision", 0);
        revs[i].data = json_child(r->json, "data");
    }
    cJSON *patch = nsb_revision_patch(p->ns);
    nsb_rev_plan plan;
    int32_t collisions = (int32_t)json_get_int(p->ns, "status.collisionCount", 0);
    nsb_plan_revisions(revs, n, patch, collisions, json_get_str(p->ns, "status.nodeSetHash"), p->name, &plan);
    snprintf(p->update_hash, sizeof(p->update_hash), "%s", plan.hash);
    if (plan.current >= 0 && revs[plan.current].hash)
        snprintf(p->current_hash, sizeof(p->current_hash), "%s", revs[plan.current].hash);
    else
        snprintf(p->current_hash, sizeof(p->current_hash), "%s", plan.hash);
    p->collision = plan.collision_count;
    if (plan.action == NSB_REV_CREATE) {
        cJSON *rev = nsb_build_revision(p->ns, patch, plan.hash, plan.revision);
        ensure(p, OPK_REVISIONS, &KUBE_CONTROLLERREVISIONS, rev);
    } else if (plan.action == NSB_REV_BUMP && plan.update >= 0) {
        const sobj *r = store_get(revs_store, p->nsname, revs[plan.update].name);
        if (r && r->json) {
            cJSON *want = cJSON_Duplicate(r->json, 1);
            json_set_int(want, "revision", plan.revision);
            ensure(p, OPK_REVISIONS, &KUBE_CONTROLLERREVISIONS, want);
        }
    }
    /* Truncate history beyond revisionHistoryLimit (live ones are kept). */
    const char **live = xcalloc(p->n_pods + 2, sizeof(char *));
    size_t nlive = 0;
    live[nlive++] = p->update_hash;
    live[nlive++] = p->current_hash;
    for (size_t k = 0; k < p->n_pods; k++)
        if (p->pods[k].revision)
            live[nlive++] = p->pods[k].revision;
    size_t *gone = xcalloc(n ? n : 1, sizeof(size_t));
    size_t ng = nsb_truncate_history(
        revs, n, live, nlive, p->spec.history_limit, p->name, gone);
    for (size_t k = 0; k < ng; k++) {
        struct keyref *key = keyref_new(p->c, p->key);
        int rc = objsync_delete(p->op->objsync, op_store(p->op, OPK_REVISIONS), &KUBE_CONTROLLERREVISIONS,
                                p->nsname, revs[gone[k]].name, on_object_written, key);
        if (rc == OBJSYNC_WRITING)
            note_write(p, 0);
        else
            free(key);
    }
    free(gone);
    free(live);
    cJSON_Delete(patch);
    free(revs);
    return 0;
}

static void adopted(int err, const cJSON *obj, const kube_status *st, void *data)
{
    struct keyref *k = data;
    if (err && err != OP_ECANCELED)
        log_warn("nodeset %s: adopting a pod failed: %s (%s)", k->key, err_str(err), st ? st->message : "");
    if (k->c->q && err != OP_ECANCELED)
        enqueue_full(k->c, k->key, "adopted");
    free(k);
}

/* Claim pods: owned ones, and orphans that match (adopted by a patch). */
static void collect_pods(struct pass *p)
{
    store *pods = op_store(p->op, OPK_PODS);
    size_t n = store_index_count(pods, p->c->ix_pod_owner, p->o->uid);
    p->pods = xcalloc(n + 1, sizeof(nsb_pod));
    store_cursor c;
    size_t labelled = 0; /* ours that carry our instance label */
    for (const sobj *o = store_index_first(pods, p->c->ix_pod_owner, p->o->uid, &c); o;
         o = store_index_next(&c)) {
        fill_pod(p->c, o, p->name, &p->pods[p->n_pods++]);
        const char *inst = sobj_label_i(o, p->c->ik.instance);
        labelled += inst && strcmp(inst, p->name) == 0;
    }
    /* Orphans with our selector labels (and, in StatefulSet mode, a name of
     * ours) are adopted; the adoption shows up as an update event. Only
     * looked for when the label's index holds more pods than ours. */
    if (store_index_count(pods, p->c->ix_pod_instance, p->name) <= labelled)
        return;
    for (const sobj *o = store_index_first(pods, p->c->ix_pod_instance, p->name, &c); o;
         o = store_index_next(&c)) {
        if (o->owner_kind || strcmp(o->ns, p->nsname) != 0 || o->deleting)
            continue;
        const char *app = sobj_label(o, NSB_LABEL_APP);
        if (app == NULL || strcmp(app, "slurmd") != 0)
            continue;
        if (p->mode == NSB_STATEFULSET && nsb_parse_ordinal(o->name, p->name) < 0)
            continue;
        log_info("nodeset %s: adopting orphan pod %s", p->key, o->name);
        nsw_adopt_pod(p->op, o, nsb_controller_ref(p->ns), adopted, keyref_new(p->c, p->key));
        note_write(p, 0);
    }
}

static void sync_shared_objects(struct pass *p)
{
    char v[512];
    store_cursor c;
    store *nss = op_store(p->op, OPK_NODESETS);
    const char *ctl = p->spec.ctl_name;
    snprintf(v, sizeof(v), "%s/%s", p->spec.ctl_ns ? p->spec.ctl_ns : "", ctl);
    size_t n = store_index_count(nss, p->c->ix_ns_ctl, v), i = 0;
    nsb_owner *owners = xcalloc(n + 1, sizeof(*owners));
    for (const sobj *o = store_index_first(nss, p->c->ix_ns_ctl, v, &c); o && i < n;
         o = store_index_next(&c)) {
        if (o->deleting || strcmp(o->ns, p->nsname) != 0) /* the Service is per namespace */
            continue;
        owners[i].name = o->name;
        owners[i].uid = o->uid;
        i++;
    }
    ensure(p, OPK_SERVICES, &KUBE_SERVICES, nsb_build_worker_service(ctl, p->nsname, owners, i));
    ensure(p, OPK_PDBS, &KUBE_PDBS, nsb_build_worker_pdb(ctl, p->nsname, owners, i));
    free(owners);
    ensure(p, OPK_CONFIGMAPS, &KUBE_CONFIGMAPS, nsb_build_ssh_configmap(p->ns));
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void fill_args(struct pass *p, nsb_pod_args *a)
{
    memset(a, 0, sizeof(*a));
    a->nodeset = p->ns;
    a->controller = p->ctl;
    a->revision = p->update_hash;
    a->cluster_domain = p->op->cluster_domain;
}

static int is_mode_pod(struct pass *p, const sobj *o)
{
    const char *m = sobj_label_i(o, p->c->ik.mode);
    const char *want = p->mode == NSB_DAEMONSET ? "DaemonSet" : "StatefulSet";
    return m == NULL || strcmp(m, want) == 0;
}

/* StatefulSet mode: create pods at these ordinals (ascending); their
 * claims are already there. Returns 0 when the template cannot be built. */
static int slurm_name_held(struct pass *p, int ordinal);
static char *pods_rival(struct pass *p);

/* The Slurm node records of the ordinals' pods, made before the pods (nss_precreate): their names are the
 * StatefulSet-mode hostnames, known before the pods exist unless the pods take their Node's name. */
static void precreate(struct pass *p, const int *ords, int n)
{
    if (p->spec.mode != NSB_STATEFULSET || p->spec.host_network)
        return;
    char **names = xcalloc((size_t)n + 1, sizeof(*names));
    for (int i = 0; i < n; i++)
        names[i] = nsb_statefulset_hostname(p->ns, ords[i]);
    nss_precreate(p->op, p->o, &p->spec, (const char *const *)names, ords, (size_t)n);
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static int create_ordinals(struct pass *p, const int *ords_in, int n_in, int replicas)
{
    char err[256];
    nsb_pod_args a;
    /* No pod under a Slurm name that a pod of another NodeSet of the
     * Controller holds (names_collide): the ordinal waits. */
    int *ords = xcalloc((size_t)n_in + 1, sizeof(int)), n = 0;
    for (int i = 0; i < n_in; i++)
        if (!slurm_name_held(p, ords_in[i]))
            ords[n++] = ords_in[i];
    if (n == 0) {
        free(ords);
        return 0;
    }
    fill_args(p, &a);
    cJSON *tmpl = nsb_build_template(&a, err, sizeof(err));
    if (tmpl == NULL) {
        op_warn(p->op, p->o, NSB_KIND, "ControllerRefFailed", "Cannot build the worker pod: %s", err);
        free(ords);
        return 0;
    }
    struct create_job *job = job_new(p, tmpl);
    struct create_item **items = xcalloc((size_t)n + 1, sizeof(*items));
    int pin = p->spec.pin_to_node;
    for (int i = 0; i < n; i++) {
        const char *node = NULL;
        if (pin) {
            char k[16];
            snprintf(k, sizeof(k), "%d", ords[i]);
            node = json_get_str(json_get(p->ns, "status.ordinalToNode"), k);
        }
        items[i] = item_new(job, ords[i], NULL, NULL, node);
    }
    op_event(p->op, p->o, NSB_KIND, "ScalingUp", "Scale", "Scaling up: creating %d pod(s) for %d replicas", n,
             replicas);
    precreate(p, ords, n);
    struct incr *r = incr_get_or_new(p->c, p->key);
    for (int i = 0; i < n; i++)
        incr_creating_set(r, ords[i], 1);
    submit_creates(p, job, items, (size_t)n);
    free(items);
    free(ords);
    return 1;
}

/* The ordinal's Slurm name is held by a pod of another NodeSet of the
 * Controller: said (Conflict, and the later NodeSet told), and waited for.
 * hostNetwork: the name is the Node's, not known before the pod is bound
 * (a full pass finds a collision then). */
static int slurm_name_held(struct pass *p, int ordinal)
{
    if (p->spec.host_network)
        return 0;
    char ctl[512];
    ctl_key_of(&p->spec, p->nsname, ctl, sizeof(ctl));
    char *name = nsb_statefulset_hostname(p->ns, ordinal);
    const sobj *h = nss_name_holder(p->op, ctl, name, NULL, p->o->uid);
    if (h) {
        names_collide(p->c, p->o, h, name, NULL);
        set_conflict(p,
                     xasprintf("Slurm node %s is the name of pod %s/%s of another NodeSet of the Controller: "
                               "ordinal %d waits",
                               name, h->ns, h->name, ordinal));
        want_requeue(p, CRC_CONFLICT_RETRY_MS);
    }
    free(name);
    return h != NULL;
}

/* Is the ordinal's pod name held by a pod that is not ours (an earlier
 * NodeSet's of the same name still being deleted, or somebody else's)? A
 * create could only answer 409, and every event of the fleet would try it
 * again: on a real API server a 9,216-pod run logged creates of one such
 * name several times a second for minutes. A terminating holder is waited
 * for (its DELETED event queues us; the requeue is a safety net); a live
 * one is a conflict, said in an Event and the condition. */
static int name_held(struct pass *p, int ordinal)
{
    char *name = nsb_statefulset_pod_name(p->ns, ordinal);
    char *key = xasprintf("%s/%s", p->nsname, name);
    const sobj *o = store_get_key(op_store(p->op, OPK_PODS), key);
    free(key);
    if (o == NULL) {
        char hk[512];
        held_key(hk, sizeof(hk), p->o->uid, ordinal);
        struct ns_rec *rec = rec_get(p->c, p->key);
        const struct backoff *h = rec ? map_get(&rec->held_names, hk) : NULL;
        uint64_t now = uv_now(p->op->loop);
        if (h == NULL || now >= h->next_ms) {
            free(name);
            return 0;
        }
        set_conflict(p,
                     xasprintf("Pod %s/%s already exists (the create answered 409) and is not one of NodeSet "
                               "%s's pods: its ordinal waits %.0f s",
                               p->nsname, name, p->name, (double)(h->next_ms - now) / 1000.0));
        want_requeue(p, (uint32_t)(h->next_ms - now));
        free(name);
        return 1;
    }
    const char *inst = sobj_label_i(o, p->c->ik.instance);
    if (o->deleting || (o->owner_kind == NULL && inst && strcmp(inst, p->name) == 0)) {
        want_requeue(p, 5000); /* going, or an orphan of ours being adopted */
    } else {
        set_conflict(p, xasprintf("Pod %s/%s exists and is not owned by NodeSet %s: its ordinal waits",
                                  p->nsname, name, p->name));
        want_requeue(p, CRC_CONFLICT_RETRY_MS);
    }
    free(name);
    return 1;
}

/* StatefulSet mode: keep `replicas` pods at the lowest free ordinals. */
static int scale_statefulset(struct pass *p)
{
    int replicas = p->spec.replicas;
    size_t n_active = 0;
    const nsb_pod **active = xcalloc(p->n_pods + 1, sizeof(*active));
    int *used = xcalloc(p->n_pods + 1, sizeof(int));
    size_t n_used = 0;
    int scaled = 0;

    for (size_t i = 0; i < p->n_pods; i++) {
        const sobj *o = pod_sobj(&p->pods[i]);
        if (p->pods[i].ordinal >= 0)
            used[n_used++] = p->pods[i].ordinal;
        if (!is_mode_pod(p, o)) {
            condemn(p, o, "its scaling mode no longer matches the NodeSet");
            continue;
        }
        if (!p->pods[i].terminating)
            active[n_active++] = &p->pods[i];
    }
    /* A terminating pod of this mode is coming back: once it is gone, its
     * ordinal is the lowest free one and is created again (as a
     * StatefulSet does), so the Slurm node keeps its name. Creating another
     * ordinal now would rename a node. */
    int terminating = 0;
    for (size_t i = 0; i < p->n_pods; i++)
        if (p->pods[i].terminating && is_mode_pod(p, pod_sobj(&p->pods[i])))
            terminating++;
    int diff = (int)n_active - replicas;
    p->wait_state = diff < 0 && diff + terminating >= 0 ? WAIT_SHORT : WAIT_NONE;
    if (p->wait_state == WAIT_SHORT) {
        /* the DELETED events queue us; wait_net sets the safety net */
    } else if (diff < 0) {
        int want = -diff - terminating;
        int claims = p->spec.claims != NULL;
        qsort(used, n_used, sizeof(int), cmp_int);
        int *ords = xcalloc((size_t)want, sizeof(int));
        int made = 0, picked = 0;
        size_t u = 0;
        for (int ord = 0; picked < want; ord++) {
            while (u < n_used && used[u] < ord)
                u++;
            if (u < n_used && used[u] == ord)
                continue;
            picked++;
            if (name_held(p, ord))
                continue; /* waited for, not replaced by a higher ordinal (that would rename a node) */
            ords[made++] = ord;
        }
        /* Claims before their pods (the template is built first, as
         * before: a template that cannot be built writes no claim). */
        char err[256];
        nsb_pod_args a;
        fill_args(p, &a);
        cJSON *probe = claims ? nsb_build_template(&a, err, sizeof(err)) : NULL;
        /* The claims of the pods that stay are kept too (a conflict on one
         * is reported while others are missing, not only at full size). */
        for (size_t i = 0; probe && i < n_active; i++)
            sync_claims(p, active[i]->ordinal, sobj_label_i(pod_sobj(active[i]), p->c->ik.hostname),
                        pod_sobj(active[i]), active[i]->cordoned);
        for (int i = 0; probe && i < made; i++) {
            char *host = nsb_statefulset_hostname(p->ns, ords[i]);
            sync_claims(p, ords[i], host, NULL, 0);
            free(host);
        }
        cJSON_Delete(probe);
        scaled = made ? create_ordinals(p, ords, made, replicas) : 0;
        free(ords);
        if (!scaled)
            goto out;
    } else if (diff > 0) {
        nsb_sort_victims(active, n_active);
        op_event(p->op, p->o, NSB_KIND, "ScalingDown", "Scale",
                 "Scaling down: condemning %d pod(s) for %d replicas", diff, replicas);
        for (int i = 0; i < diff; i++)
            condemn(p, pod_sobj(active[i]), "scale-in");
        scaled = 1;
    } else {
        /* (Looked up once: a pass over 8,192 pods without claims spent a
         * sixth of its time finding hostnames for sync_claims to ignore.) */
        if (p->spec.claims)
            for (size_t i = 0; i < n_active; i++)
                sync_claims(p, active[i]->ordinal, sobj_label_i(pod_sobj(active[i]), p->c->ik.hostname),
                            pod_sobj(active[i]), active[i]->cordoned);
        /* Right size: replace pods that ended. */
        for (size_t i = 0; i < n_active; i++) {
            if (active[i]->phase == NSB_PHASE_FAILED || active[i]->phase == NSB_PHASE_SUCCEEDED) {
                delete_pod(p, pod_sobj(active[i]), "it has terminated and will be replaced");
                scaled = 1;
            }
        }
    }
out:
    free(active);
    free(used);
    return scaled;
}


/* The Node cache keeps labels interned on the sobj, not in its JSON. */
static const char *node_label(void *ctx, const char *key)
{
    return sobj_label(ctx, key);
}

static void node_fit(const cJSON *sim, const sobj *node, fit_result *out)
{
    nsb_daemon_fit_labels(sim, node->json, node_label, (void *)(uintptr_t)node, out);
}

static int ds_may_replace(struct pass *p, const char *node)
{
    char key[512];
    uint64_t now = uv_now(p->op->loop);
    snprintf(key, sizeof(key), "%s/%s", p->o->uid, node);
    struct ns_rec *rec = rec_ensure(p->c, p->key);
    const struct backoff *b = map_get(&rec->ds_backoffs, key);
    if (b && now < b->next_ms) {
        want_requeue(p, (uint32_t)(b->next_ms - now));
        return 0;
    }
    backoff_bump(&rec->ds_backoffs, key, 15 * 60 * 1000, now);
    return 1;
}

/* A Node to get a pod, by the Slurm name the pod would take. */
struct ds_want {
    char *name; /* map key */
    const sobj *node;
};

static void ds_want_free(void *v)
{
    struct ds_want *w = v;
    free(w->name);
    free(w);
}

static const map_type ds_want_type = {.val_free = ds_want_free};

/* DaemonSet mode: one pod on every Node where it should run. */
static int scale_daemonset(struct pass *p)
{
    char err[256];
    nsb_pod_args a;
    fill_args(p, &a);
    cJSON *sim = nsb_daemon_sim_spec(&a, err, sizeof(err));
    if (sim == NULL) {
        op_warn(p->op, p->o, NSB_KIND, "ControllerRefFailed", "Cannot build the worker pod: %s", err);
        return 0;
    }
    cJSON *tmpl = nsb_build_template(&a, err, sizeof(err));
    store *nodes = op_store(p->op, OPK_NODES);
    map_t by_node;
    map_init(&by_node);
    int changed = 0;
    /* Pods per node: the first healthy one is kept, extras go. */
    for (size_t i = 0; i < p->n_pods; i++) {
        const sobj *o = pod_sobj(&p->pods[i]);
        const pod_proj *pp = pod_of(o);
        if (p->pods[i].terminating)
            continue;
        if (!is_mode_pod(p, o)) {
            condemn(p, o, "its scaling mode no longer matches the NodeSet");
            continue;
        }
        if (p->pods[i].phase == NSB_PHASE_FAILED || p->pods[i].phase == NSB_PHASE_SUCCEEDED) {
            const char *node = pp->node_name ? pp->node_name : "";
            if (p->pods[i].phase == NSB_PHASE_SUCCEEDED || ds_may_replace(p, node)) {
                op_warn(p->op, p->o, NSB_KIND,
                        p->pods[i].phase == NSB_PHASE_FAILED ? "FailedDaemonPod" : "SucceededDaemonPod",
                        "Found pod %s on node %s with phase %s, will delete it", o->name, node,
                        p->pods[i].phase == NSB_PHASE_FAILED ? "Failed" : "Succeeded");
                delete_pod(p, o, "it has terminated and will be replaced");
                changed = 1;
            }
            /* Either way, the node is taken until the pod is gone. */
            if (pp->node_name && !map_get(&by_node, pp->node_name))
                map_put(&by_node, pp->node_name, (void *)(uintptr_t)o);
            continue;
        }
        /* The target node is in the required node affinity; unscheduled
         * pods are matched by the hostname label the builder set. */
        const char *node = pp->node_name;
        if (node == NULL)
            continue;
        const sobj *n = store_get(nodes, NULL, node);
        fit_result fr = {0, 0, NULL};
        if (n)
            node_fit(sim, n, &fr);
        if (n == NULL || !fr.should_continue) {
            condemn(p, o, n ? "it may no longer run on its node" : "its node is gone");
            changed = 1;
            continue;
        }
        if (map_get(&by_node, node)) {
            condemn(p, o, "another pod of the NodeSet already runs on its node");
            changed = 1;
            continue;
        }
        map_put(&by_node, node, (void *)(uintptr_t)o);
    }
    /* Pods not yet scheduled still hold their node (through the affinity
     * term); count them so we do not create twins. */
    for (size_t i = 0; i < p->n_pods; i++) {
        const sobj *o = pod_sobj(&p->pods[i]);
        if (p->pods[i].terminating || pod_of(o)->node_name)
            continue;
        const char *host = sobj_label_i(o, p->c->ik.hostname);
        if (host && *host && !map_get(&by_node, host))
            map_put(&by_node, host, (void *)(uintptr_t)o);
    }
    size_t it = 0, cap = 16, made = 0;
    struct create_item **items = xcalloc(cap, sizeof(*items));
    struct create_job *job = tmpl ? job_new(p, tmpl) : NULL;
    tmpl = NULL; /* the job owns it now */
    const sobj *n;
    /* The Nodes to get a pod, by the Slurm name it would take: two Nodes
     * whose names map to one ("n1.a" and "n1.b" both give hostname "n1")
     * get one pod, on the Node created first (then by name); a name a live
     * pod of the Controller's NodeSets holds gets none (names_collide). */
    int hn = p->spec.host_network;
    char ctl[512];
    ctl_key_of(&p->spec, p->nsname, ctl, sizeof(ctl));
    map_t want; /* Slurm name -> struct ds_want */
    map_init_type(&want, &ds_want_type);
    while (job && (n = store_next(nodes, &it))) {
        fit_result fr;
        node_fit(sim, n, &fr);
        /* An unhealthy Node (--unhealthy-node-*) gets no pod until it is
         * healthy again: its pod was drained and deleted for health. */
        if (!fr.should_run || map_get(&by_node, n->name) || nss_health_keep_off(p->op, n->name))
            continue;
        char *host = nsb_daemonset_hostname(n->name, sobj_annotation(n, NSB_ANN_HOSTNAME_OVERRIDE));
        if (map_get(&by_node, host)) {
            free(host);
            continue;
        }
        const char *sname = nsb_slurm_node_name(NSB_DAEMONSET, hn, n->name, host, NULL);
        const sobj *h = nss_name_holder(p->op, ctl, sname, NULL, NULL);
        struct ds_want *w = map_get(&want, sname);
        const sobj *other = w ? w->node : NULL;
        if (h) {
            names_collide(p->c, p->o, h, sname, NULL);
            set_conflict(p,
                         xasprintf("Node %s would give its pod Slurm node name %s, which pod %s/%s holds: it "
                                   "gets no pod of this NodeSet",
                                   n->name, sname, h->ns, h->name));
            want_requeue(p, CRC_CONFLICT_RETRY_MS);
        } else if (other == NULL || ns_earlier(n, other)) {
            if (other)
                op_warn(p->op, p->o, NSB_KIND, "SlurmNameConflict",
                        "Nodes %s and %s would both give their pods Slurm node name %s: only %s gets a pod",
                        n->name, other->name, sname, n->name);
            if (w == NULL) {
                w = xcalloc(1, sizeof(*w));
                w->name = xstrdup(sname);
                map_put(&want, w->name, w);
            }
            w->node = n;
        } else {
            op_warn(p->op, p->o, NSB_KIND, "SlurmNameConflict",
                    "Nodes %s and %s would both give their pods Slurm node name %s: only %s gets a pod",
                    other->name, n->name, sname, other->name);
        }
        free(host);
    }
    size_t wit = 0;
    const char *wk;
    void *wv;
    while (job && map_next(&want, &wit, &wk, &wv)) {
        n = ((struct ds_want *)wv)->node;
        const char *override = sobj_annotation(n, NSB_ANN_HOSTNAME_OVERRIDE);
        char *host = nsb_daemonset_hostname(n->name, override);
        sync_claims(p, -1, host, NULL, 0);
        free(host);
        if (made == cap) {
            cap *= 2;
            items = xrealloc(items, cap * sizeof(*items));
        }
        items[made++] = item_new(job, -1, n->name, override, NULL);
    }
    map_free(&want);
    if (made) {
        op_event(p->op, p->o, NSB_KIND, "ScalingUp", "Scale", "Creating %zu pod(s) on eligible nodes", made);
        changed = 1;
    }
    if (job)
        submit_creates(p, job, items, made);
    free(items);
    map_free(&by_node);
    cJSON_Delete(tmpl);
    cJSON_Delete(sim);
    return changed;
}

/* RollingUpdate: replace old pods, unhealthy first, within maxUnavailable.
 * ScheduledUpdate: only the unhealthy old pods, at once (as Slinky: a pod
 * that is not Running and Ready serves no job, so waiting for the
 * maintenance window gains nothing); the healthy ones go when their node
 * enters the maintenance reservation (nodeset_slurm). Condemned pods are
 * still drained before they are deleted. */
static void rolling_update(struct pass *p)
{
    int scheduled = p->spec.strategy == NSP_SCHEDULED_UPDATE;
    if (p->spec.strategy == NSP_ON_DELETE)
        return; /* pods take the new revision when recreated */
    const nsb_pod **v = xcalloc(p->n_pods + 1, sizeof(*v));
    nsb_split split;
    nsb_split_update(p->pods, p->n_pods, p->update_hash, p->name, v, &split);
    /* Terminating pods count as old but are never condemned again: with no
     * other old pod there is nothing to roll (and no Event to send). */
    size_t live_old = 0;
    for (size_t i = 0; i < split.old_unhealthy + split.old_healthy; i++)
        live_old += !v[i]->terminating;
    if (live_old == 0) {
        free(v);
        return;
    }
    int total = p->mode == NSB_STATEFULSET ? p->spec.replicas : (int)p->n_pods;
    int maxu = 1;
    if (nsb_max_unavailable(p->spec.max_unavailable, total,
                            &maxu) != 0)
        maxu = 1;
    int unavailable = nsb_rolling_unavailable(
        p->pods, p->n_pods, p->update_hash, p->name, p->mode == NSB_STATEFULSET ? p->spec.replicas : -1,
        p->spec.min_ready_secs, p->now);
    /* Terminating old pods are already unavailable. */
    for (size_t i = 0; i < p->n_pods; i++)
        if (p->pods[i].terminating)
            unavailable++;
    for (size_t i = 0; i < split.old_unhealthy; i++) {
        condemn(p, pod_sobj(v[i]), scheduled ? "scheduled update (unhealthy old revision)"
                                              : "rolling update (unhealthy old revision)");
    }
    if (scheduled) {
        free(v);
        return;
    }
    int budget = nsb_rolling_budget(maxu, unavailable + (int)split.old_unhealthy);
    if (budget > 0)
        op_event(p->op, p->o, NSB_KIND, "RollingUpdate", "Update",
                 "Rolling update to %s: replacing up to %d pod(s) (maxUnavailable %d)", p->update_hash,
                 budget, maxu);
    for (size_t i = 0; i < (size_t)budget && i < split.old_healthy; i++)
        condemn(p, pod_sobj(v[split.old_unhealthy + i]), "rolling update");
    free(v);
}

/* One status PATCH in flight per NodeSet, at most one a second
 * (nodeset_write.h, nsw_pace): the NodeSet's watch ignores the status we
 * write (see nodeset_changed), so a pass that finds one in flight sends
 * nothing, and the pass its end queues diffs against what the cache then
 * holds; a change sooner than a second after the last write waits for a
 * queued pass, so pods that turn Ready one by one make one write a second,
 * not one each. */
static void status_written(int err, const cJSON *obj, const kube_status *st, void *data)
{
    struct keyref *k = data;
    struct ns_rec *rec = rec_get(k->c, k->key);
    /* A record goes while a PATCH is on its way only with the whole state
     * (stop): one that exists kept its pace in flight. */
    int64_t again = rec ? nsw_pace_end(&rec->status, uv_now(k->c->op->loop)) : -1;
    if (err == OP_ECANCELED) {
        /* stopping: nothing more to send */
    } else if (err && err != OP_ENOTFOUND) {
        log_warn("nodeset %s: status update failed: %s (%s)", k->key, err_str(err), st ? st->message : "");
        if (k->c->q)
            mark_failed(k->c, k->key);
    } else if (again >= 0 && k->c->q) {
        if (again == 0)
            wq_add(k->c->q, k->key);
        else
            wq_add_after(k->c->q, k->key, (uint64_t)again);
    }
    if (rec && err != OP_ECANCELED && store_get_key(op_store(k->c->op, OPK_NODESETS), k->key) == NULL)
        rec_forget(k->c, k->key); /* the NodeSet is gone */
    free(k);
}

/* Sends a status patch unless one is in flight (then the next pass after it
 * completes sends what is still different). Returns 1 when sent. */
static int status_send(struct pass *p, const cJSON *patch)
{
    int64_t wait = nsw_pace_take(&rec_ensure(p->c, p->key)->status, uv_now(p->op->loop));
    if (wait > 0 && p->c->q)
        wq_add_after(p->c->q, p->key, (uint64_t)wait);
    if (wait != 0)
        return 0;
    nsw_patch_status(p->op, p->nsname, p->name, patch, status_written, keyref_new(p->c, p->key));
    return 1;
}

/* The NodeSet's own conditions in a status object: Valid (False with the
 * validation messages; removed once valid) and DrainBlocked (True while
 * condemned pods are kept because Slurm cannot be asked). */
static void set_conditions(struct pass *p, cJSON *status, const char *invalid)
{
    char now[32];
    rfc3339_now(now, 0);
    const char *msg = NULL;
    const char *blocked = invalid ? NULL : nss_blocked(p->op, p->o, &msg);
    cJSON *conds =
        crc_conditions_set(json_child(status, "conditions"), CRC_COND_VALID, invalid ? "False" : NULL,
                           "ValidationFailed", invalid, p->o->generation, now);
    if (!invalid) {
        cJSON *c2 = crc_conditions_set(conds, NSB_COND_DRAIN_BLOCKED, blocked ? "True" : NULL, blocked,
                                       msg ? msg : "", p->o->generation, now);
        cJSON_Delete(conds);
        conds = c2;
        c2 = crc_conditions_set(conds, CRC_COND_CONFLICT, p->conflict ? "True" : NULL, CRC_REASON_NOT_OWNED,
                                p->conflict, p->o->generation, now);
        cJSON_Delete(conds);
        conds = c2;
    }
    json_set(status, "conditions", conds);
}

static void write_status(struct pass *p, const nsb_counts *counts, const nsb_slurm_counts *sc,
                         const cJSON *o2n);

static void sync_status(struct pass *p)
{
    nsb_counts counts;
    nsb_slurm_counts sc = {0};
    int32_t desired = p->spec.replicas;
    if (p->mode == NSB_DAEMONSET) {
        char err[256];
        nsb_pod_args a;
        fill_args(p, &a);
        cJSON *sim = nsb_daemon_sim_spec(&a, err, sizeof(err));
        desired = 0;
        size_t it = 0;
        const sobj *n;
        while (sim && (n = store_next(op_store(p->op, OPK_NODES), &it))) {
            fit_result fr;
            node_fit(sim, n, &fr);
            desired += fr.should_run;
        }
        cJSON_Delete(sim);
    }
    int32_t min_ready = p->spec.min_ready_secs;
    nsb_count(p->pods, p->n_pods, p->update_hash, p->current_hash, p->name, p->mode, desired, min_ready,
              p->now, &counts);
    nss_status(p->op, p->o, p->ctl, p->ns, &p->spec, p->pods, p->n_pods, &sc);
    cJSON *o2n = NULL;
    if (p->mode == NSB_STATEFULSET && p->spec.pin_to_node) {
        /* Remember where each ordinal runs, so its replacement comes back to
         * the same node; forget nodes that are gone. */
        o2n = cJSON_CreateObject();
        const cJSON *cur = json_get(p->o->json, "status.ordinalToNode");
        for (const cJSON *e = cur ? cur->child : NULL; e; e = e->next)
            if (cJSON_IsString(e) && store_get(op_store(p->op, OPK_NODES), NULL, e->valuestring))
                json_set_str(o2n, e->string, e->valuestring);
        for (size_t i = 0; i < p->n_pods; i++) {
            const pod_proj *pp = pod_of(pod_sobj(&p->pods[i]));
            if (p->pods[i].ordinal < 0 || pp->node_name == NULL || p->pods[i].phase != NSB_PHASE_RUNNING)
                continue;
            char k[16];
            snprintf(k, sizeof(k), "%d", p->pods[i].ordinal);
            json_set_str(o2n, k, pp->node_name);
        }
    }
    write_status(p, &counts, &sc, o2n);
    cJSON_Delete(o2n);
    /* Pods Ready but not yet available (minReadySeconds) need a later look. */
    if (min_ready > 0 && counts.available < counts.ready)
        want_requeue(p, (uint32_t)min_ready * 1000u + 1000u);
}

/* Patch the status when it differs from the NodeSet's. */
static void write_status(struct pass *p, const nsb_counts *counts, const nsb_slurm_counts *sc,
                         const cJSON *o2n)
{
    cJSON *status = nsb_build_status(p->ns, counts, sc, p->update_hash, p->collision, o2n);
    set_conditions(p, status, NULL);
    const cJSON *cur = json_child(p->o->json, "status");
    if (!json_subset(status, cur) || !json_subset(cur, status)) {
        cJSON *diff = json_merge_diff(cur, status);
        if (diff) {
            cJSON *patch = cJSON_CreateObject();
            json_set(patch, "status", diff);
            if (status_send(p, patch))
                note_write(p, 0);
            cJSON_Delete(patch);
        }
    }
    cJSON_Delete(status);
}

/* The status write of a NodeSet whose spec is invalid: the Valid
 * condition only. */
static void write_invalid(struct pass *p, const nsb_msgs *msgs)
{
    char text[1024];
    size_t off = 0;
    text[0] = '\0';
    for (size_t i = 0; i < msgs->n && off < sizeof(text) - 1; i++) {
        int w = snprintf(text + off, sizeof(text) - off, "%s%s", i ? "; " : "", msgs->v[i]);
        if (w < 0)
            break;
        off += (size_t)w;
    }
    const cJSON *cur = json_child(p->o->json, "status");
    cJSON *status = cJSON_CreateObject();
    const cJSON *conds = json_child(cur, "conditions");
    json_set(status, "conditions", conds ? cJSON_Duplicate(conds, 1) : cJSON_CreateArray());
    set_conditions(p, status, text);
    const cJSON *want = json_child(status, "conditions");
    if (!json_equal(want, conds)) {
        cJSON *patch = cJSON_CreateObject();
        cJSON *pst = json_obj_ensure(patch, "status");
        json_set(pst, "conditions", cJSON_Duplicate(want, 1));
        /* The CRD requires these two in any status: a NodeSet never synced
         * (invalid from its creation) has none yet, and a patch without
         * them is rejected. No revision exists yet: no hash. */
        if (!json_child(cur, "nodeSetHash"))
            json_set_str(pst, "nodeSetHash", "");
        if (!json_child(cur, "selector")) {
            char *sel = nsb_selector_string(p->name);
            json_set_str(pst, "selector", sel);
            free(sel);
        }
        status_send(p, patch);
        cJSON_Delete(patch);
    }
    cJSON_Delete(status);
}

/* A NodeSet being deleted with our finalizer: its pods are condemned as in
 * a scale-in (drained, deleted once Slurm says so) and the finalizer goes
 * when none is left. Not when the deletion orphans the pods (the user
 * keeps them). Returns the number of pods left. */
static size_t drain_on_delete(struct pass *p)
{
    if (!nss_has_finalizer(p->o->json, NSS_DRAIN_FINALIZER))
        return 0;
    if (nss_has_finalizer(p->o->json, "orphan")) {
        nss_set_finalizer(p->op, p->o, NSS_DRAIN_FINALIZER, 0);
        return 0;
    }
    collect_pods(p);
    if (p->n_pods == 0) {
        /* Its partition leaves slurm.conf with it: not while slurmctld
         * keeps job records that name it. */
        if (nss_jobrec_clear(p->op, p->o, p->ns, &p->spec) && nss_unmake_all(p->op, p->o))
            nss_set_finalizer(p->op, p->o, NSS_DRAIN_FINALIZER, 0);
        return 0;
    }
    nss_observe(p->op, p->o);
    if (exp_done(p->c, p->key, p->o->uid, uv_now(p->op->loop))) {
        size_t n = 0;
        const nsb_pod **v = xcalloc(p->n_pods + 1, sizeof(*v));
        for (size_t i = 0; i < p->n_pods; i++)
            if (!p->pods[i].terminating)
                v[n++] = &p->pods[i];
        nsb_sort_victims(v, n);
        for (size_t i = 0; i < n; i++)
            condemn(p, pod_sobj(v[i]), "NodeSet deleted");
        free(v);
    } else {
        log_debug(
            "nodeset %s: deleted; %zu pod(s) left, waiting for earlier creations/deletions to be observed "
            "before condemning them",
            p->key, p->n_pods);
    }
    sync_status(p); /* sends this pass's drains, keeps the counts current */
    return p->n_pods;
}

/* What nss_sync may do in a pass. */
static void slurm_delete_pod(void *ctx, const sobj *pod, const char *why)
{
    /* A delete the Slurm side decided may answer an event a gap of "Slurm
     * busy" deferred: its latency counts from that event. */
    struct pass *p = ctx;
    uint64_t held = p->held_ns;
    if (p->busy_held_ns && (held == 0 || p->busy_held_ns < held))
        p->held_ns = p->busy_held_ns;
    delete_pod(p, pod, why);
    p->held_ns = held;
}

static void slurm_delete_unchanged(void *ctx, const sobj *pod, const char *why)
{
    delete_pod_as(ctx, pod, why, 1);
}

static void slurm_condemn(void *ctx, const sobj *pod, const char *why)
{
    condemn(ctx, pod, why);
}

/* A victim released while the NodeSet's deletes are in flight (a busy
 * pod whose job ended, nss_release): its delete goes ahead of theirs,
 * which a scale-in queues by the thousand. */
static void slurm_release_pod(void *ctx, const sobj *pod, const char *why)
{
    struct pass *p = ctx;
    p->delete_first = 1;
    slurm_delete_pod(p, pod, why);
    p->delete_first = 0;
}

/* ---- incremental passes (see "incremental passes" above) ---- */

static int mode_ok(const nodeset_state *c, enum nsb_mode mode, const sobj *o)
{
    const char *m = sobj_label_i(o, c->ik.mode);
    return m == NULL || strcmp(m, mode == NSB_DAEMONSET ? "DaemonSet" : "StatefulSet") == 0;
}

/* Whether the state models this spec. */
static int incr_models(const struct pass *p)
{
    return p->mode == NSB_STATEFULSET && p->spec.claims == NULL && !p->spec.pin_to_node &&
           p->spec.min_ready_secs == 0;
}

/* The state of a NodeSet's pods from scratch, as a full pass collects them
 * (the owner index; no adoption). */
/* The state a full pass would build from the pods now. With slurm_from,
 * each pod's Slurm bits are taken from that state instead of the node
 * cache (see incr_check). */
static void incr_derive(const struct pass *p, const char *update_hash, const char *current_hash,
                        const nsi_state *slurm_from, nsi_state *out)
{
    store *pods = op_store(p->op, OPK_PODS);
    store_cursor c;
    nsb_pod nb;
    nsi_clear(out);
    for (const sobj *o = store_index_first(pods, p->c->ix_pod_owner, p->o->uid, &c); o;
         o = store_index_next(&c)) {
        fill_pod(p->c, o, p->name, &nb);
        nsi_pod f = nsi_pod_of(&nb, mode_ok(p->c, p->mode, o), update_hash, current_hash, p->name);
        const nsi_pod *had = slurm_from ? nsi_get(slurm_from, o->uid) : NULL;
        f.slurm = had ? had->slurm : nss_pod_slurm_bits(p->op, p->o, o) & 15u;
        nsi_set(out, o->uid, o->key, &f);
    }
}

/* End of a full pass that collected the pods: the state is rebuilt from
 * them (the full pass is the reference), and its next resync noted. */
static void incr_rebuild(struct pass *p, uint32_t requeue_ms)
{
    struct incr *r = incr_get_or_new(p->c, p->key);
    map_free(&r->dirty);
    r->full = 0;
    r->slurm_owed = 0; /* this pass ran nss_sync and nss_status over every pod */
    /* A pass that found somebody else's object under our names keeps its
     * Conflict condition only in full passes (sync_shared_objects). */
    r->valid = incr_models(p) && p->conflict == NULL;
    if (!r->valid) {
        nsi_clear(&r->st);
        return;
    }
    nsi_clear(&r->st);
    for (size_t i = 0; i < p->n_pods; i++) {
        const sobj *o = pod_sobj(&p->pods[i]);
        nsi_pod f =
            nsi_pod_of(&p->pods[i], mode_ok(p->c, p->mode, o), p->update_hash, p->current_hash, p->name);
        f.slurm = nss_pod_slurm_bits(p->op, p->o, o) & 15u;
        nsi_set(&r->st, o->uid, o->key, &f);
    }
    snprintf(r->update_hash, sizeof(r->update_hash), "%s", p->update_hash);
    snprintf(r->current_hash, sizeof(r->current_hash), "%s", p->current_hash);
    r->collision = p->collision;
    r->rolling = p->spec.strategy == NSP_ROLLING_UPDATE;
    r->full_due_ms = uv_now(p->op->loop) + requeue_ms;
}

/* An incremental pass: p is set up as for a full pass (NodeSet valid and not
 * being deleted, Controller found). While writes are in flight it only
 * updates the state and the status, as a full pass does then. Returns 0
 * when a full pass must run instead (having taken no action). */
/* The state of key when an incremental step may use it, else NULL. With
 * k8s_ok, a state that is usable but for the Slurm side (not calm, or a
 * Slurm share owed) is returned too, and p->k8s_share says so: the step
 * must then leave the Slurm side alone. */
static struct incr *incr_usable(struct pass *p, uint64_t now, int k8s_ok)
{
    struct incr *r = incr_of(p->c, p->key);
    p->slurm_busy = p->k8s_share = 0;
    if (r == NULL || !r->valid)
        p->full_why = "no-state";
    else if (r->full)
        p->full_why = r->full_why ? r->full_why : "queued";
    else if (now >= r->full_due_ms)
        p->full_why = "resync";
    else if (r->slurm_owed || (!nss_quiet(p->op, p->o) && !nss_calm(p->op, p->o, &p->spec))) {
        p->full_why = "slurm-busy";
        p->slurm_busy = 1;
        p->k8s_share = k8s_ok;
        return k8s_ok ? r : NULL;
    } else
        return r;
    return NULL;
}

/* ---- Slurm busy
 *
 * While the Slurm side is not calm (nss_calm: a scale-in draining, a
 * Slurm outage, a table held), the rules of nss_sync are over every pod
 * and every event would need a full pass, up to 100 ms of the loop each
 * for a large fleet: at 1,000 events/s during a slurmrestd outage the loop
 * would do nothing else. So such passes run at most once per gap per
 * NodeSet: BUSY_GAP_X times what the last
 * full pass cost, within [BUSY_GAP_MIN_MS, BUSY_GAP_MAX_MS]. An event in
 * the gap gets the Kubernetes share of an incremental step at once
 * (incr_pending: ended pods deleted, missing ordinals created; neither
 * depends on Slurm, and a full pass does the same then), and its Slurm
 * share is owed (slurm_owed): the next pass that may touch Slurm is a
 * full one, at the end of the gap. No condemnation and no drain-based
 * delete is taken in the gap; they wait for that full pass, at most a
 * gap later. */
#define BUSY_GAP_X 3
#define BUSY_GAP_MIN_MS 10
#define BUSY_GAP_MAX_MS 200

/* How long the full pass of key waits (ms), 0: run it now. */
static uint64_t busy_gap_left(const struct incr *r)
{
    if (r == NULL || r->full_end_ns == 0)
        return 0;
    uint64_t gap = r->full_cost_ns * BUSY_GAP_X, now = uv_hrtime();
    if (gap < BUSY_GAP_MIN_MS * 1000000ull)
        gap = BUSY_GAP_MIN_MS * 1000000ull;
    if (gap > BUSY_GAP_MAX_MS * 1000000ull)
        gap = BUSY_GAP_MAX_MS * 1000000ull;
    if (now >= r->full_end_ns + gap)
        return 0;
    return (r->full_end_ns + gap - now + 999999) / 1000000;
}

static void busy_hold(struct incr *r, uint64_t first_add_ns)
{
    if (first_add_ns && (r->busy_held_ns == 0 || first_add_ns < r->busy_held_ns))
        r->busy_held_ns = first_add_ns;
}

/* After a Kubernetes-share step: the events it looked at without a pod
 * write may need the Slurm share (a drained pod's delete); a pod delete
 * the Slurm side decides in the owed full pass counts its latency from the
 * first of them (slurm_delete_pod). Not every pod write of that pass: most
 * answer the event that brought the pass, and charging them the whole gap
 * would report a delay nothing had. */
static void busy_defer(struct pass *p, uint64_t first_add_ns)
{
    struct incr *r = incr_of(p->c, p->key);
    if (r && p->k8s_share && !p->wrote_pod) {
        busy_hold(r, p->held_ns);
        busy_hold(r, first_add_ns);
    }
}

/* Bring the state up to date for the pods that changed; when changed is
 * given, it gets those still there (malloc'd, *n_changed of them; their
 * sobj pointers hold for this pass: the store changes only between loop
 * iterations). */
static void incr_apply_dirty(struct pass *p, struct incr *r, nsb_pod **changed, size_t *n_changed)
{
    store *pods = op_store(p->op, OPK_PODS);
    size_t it = 0, n = 0;
    const char *uid;
    void *v;
    nsb_pod nb;
    nsb_pod *kept = changed ? xcalloc(r->dirty.count + 1, sizeof(*kept)) : NULL;
    while (map_next(&r->dirty, &it, &uid, &v)) {
        const sobj *pod = store_get_key(pods, v);
        if (pod && strcmp(pod->uid, uid) == 0 && pod->owner_uid && strcmp(pod->owner_uid, p->o->uid) == 0) {
            fill_pod(p->c, pod, p->name, &nb);
            nsi_pod f =
                nsi_pod_of(&nb, mode_ok(p->c, p->mode, pod), r->update_hash, r->current_hash, p->name);
            f.slurm = nss_pod_slurm_bits(p->op, p->o, pod) & 15u;
            nsi_set(&r->st, uid, pod->key, &f);
            if (kept)
                kept[n++] = nb;
        } else {
            nsi_set(&r->st, uid, NULL, NULL);
        }
    }
    map_free(&r->dirty);
    if (changed) {
        *changed = kept;
        *n_changed = n;
    }
}

/* The Slurm side of an incremental pass (a RestApi, nss_calm): each pod
 * that changed, or whose Slurm node did, gets what nss_sync and nss_status
 * would do for it. Returns 0 when a full pass must decide instead. */
static int incr_slurm(struct pass *p, struct incr *r, const nsb_pod *changed, size_t n, int sync)
{
    /* nss_sync uncordons only while no scale-in is under way: every pod
     * that is not terminating, of either mode, within replicas */
    int uncordon_ok = r->st.active + r->st.other_mode <= p->spec.replicas;
    for (size_t i = 0; i < n; i++)
        if (nss_pod_step(p->op, p->o, p->ns, &p->spec, &changed[i], r->update_hash, uncordon_ok, sync) !=
            NSS_STEP_DONE)
            return 0;
    return 1;
}

/* Debug builds: the state rebuilt from every pod must be equal to the
 * incrementally updated one (the full pass is the reference). */
static void incr_check(struct pass *p, struct incr *r)
{
#ifndef NDEBUG
    nsi_state ref_st;
    char why[256];
    nsi_init(&ref_st);
    /* While a Slurm share is owed ("Slurm busy"), the state's Slurm bits
     * are those of the last full pass or of a step that read the cache
     * while it could not be trusted; nothing uses them until the owed full
     * pass rebuilds them, so they are not compared. */
    incr_derive(p, r->update_hash, r->current_hash, r->slurm_owed ? &r->st : NULL, &ref_st);
    if (!nsi_equal(&r->st, &ref_st, why, sizeof(why))) {
        log_error("nodeset %s: incremental state differs from a full pass: %s", p->key, why);
        r->valid = 0;
    }
    nsi_free(&ref_st);
#else
    (void)p;
    (void)r;
    (void)incr_derive;
#endif
}

/* The `want` lowest ordinals neither in use nor being created, into out
 * (room for want); returns how many were found. */
static size_t incr_free_ordinals(const struct incr *r, int want, int *out)
{
    size_t n_all = (size_t)want + (size_t)r->n_creating;
    int *all = xcalloc(n_all + 1, sizeof(int));
    size_t got = nsi_free_ordinals(&r->st, (int)n_all, all), k = 0;
    for (size_t i = 0; i < got && k < (size_t)want; i++)
        if ((size_t)all[i] >= r->creating_cap || !r->creating[all[i]])
            out[k++] = all[i];
    free(all);
    return k;
}

/* Another NodeSet of the same Controller, in another namespace, with the
 * same name and created first (ties: the smaller namespace). Pods are named
 * after their NodeSet and so are their Slurm nodes: two such NodeSets would
 * give two pods one Slurm node, and a drain read of that name could then
 * license the deletion of a pod whose own slurmd runs a job. The older one
 * keeps the name; the other is invalid (nothing acted on, its pods kept). */
static const sobj *name_twin(nodeset_state *c, const sobj *o, const nsp_spec *sp)
{
    char v[512];
    store_cursor cur;
    snprintf(v, sizeof(v), "%s/%s", sp->ctl_ns ? sp->ctl_ns : "", sp->ctl_name);
    for (const sobj *t = store_index_first(op_store(c->op, OPK_NODESETS), c->ix_ns_ctl, v, &cur); t;
         t = store_index_next(&cur)) {
        if (t == o || strcmp(t->name, o->name) != 0 || strcmp(t->ns, o->ns) == 0)
            continue;
        if (t->created < o->created || (t->created == o->created && strcmp(t->ns, o->ns) < 0))
            return t;
    }
    return NULL;
}

/* Writes of the NodeSet are in flight (expectations pending): a full pass
 * could only refresh status, and such passes are throttled (WAIT_PASS_MS).
 * When the state is usable, the pods that changed are still taken in at
 * once, and:
 *   - the pods that ended are deleted at once, each unless its delete is
 *     already in flight: an ended pod (Failed or Succeeded) runs nothing,
 *     and a full pass deletes it without a drain too (DRAIN-SAFETY.md,
 *     rule 4), only later (once it sees the right size);
 *   - missing ordinals are created at once when every create in flight is
 *     one the state tracks (expectations count as many as `creating`):
 *     those count as pods, their ordinals are not free, and a pod whose
 *     delete is in flight still counts as active, so nothing is created
 *     twice; a terminating pod of the mode is waited for, as in a full
 *     pass (its ordinal comes back).
 * Nothing else is decided here: no status write (the throttled pass's), no
 * victim order (a plan that needs every pod does nothing). Returns whether
 * the state was usable (the events were looked at). */
static int incr_pending(struct pass *p)
{
    uint64_t now = uv_now(p->op->loop);
    /* With a RestApi and a calm Slurm side, the changed pods get what a
     * full pass gives them while writes are in flight: nss_status's share
     * (their conditions and pod info), not nss_sync's. When it is not calm,
     * only the Kubernetes share ("Slurm busy"). */
    struct incr *r = incr_usable(p, now, 1);
    if (r == NULL)
        return 0;
    if (r->dirty.count == 0)
        return 1;
    if (p->k8s_share)
        r->slurm_owed = 1;
    /* The revision the pods it creates carry (create_ordinals), as in
     * incr_pass. */
    snprintf(p->update_hash, sizeof(p->update_hash), "%s", r->update_hash);
    snprintf(p->current_hash, sizeof(p->current_hash), "%s", r->current_hash);
    p->collision = r->collision;
    int slurm = !nss_quiet(p->op, p->o) && !p->k8s_share;
    size_t n_changed = 0;
    nsb_pod *changed = NULL;
    incr_apply_dirty(p, r, slurm ? &changed : NULL, &n_changed);
    int slurm_ok = !slurm || incr_slurm(p, r, changed, n_changed, 0);
    free(changed);
    if (!slurm_ok) {
        /* a pod only a full pass may decide: the held pass is one */
        incr_mark_full(p->c, p->key, "slurm-pod");
        return 0;
    }
    if (r->st.ended.count > 0 && nsi_plan(&r->st, p->spec.replicas, r->rolling).action != NSI_FULL) {
        store *pods = op_store(p->op, OPK_PODS);
        size_t n = 0, cap = r->st.ended.count, it = 0;
        const sobj **gone = xcalloc(cap + 1, sizeof(*gone));
        const char *uid, *ref;
        while ((uid = nsi_ended_next(&r->st, &it, &ref)) && n < cap) {
            const sobj *pod = store_get_key(pods, ref);
            if (pod == NULL || strcmp(pod->uid, uid) != 0) {
                /* not where the state says: the next full pass decides */
                free(gone);
                r->valid = 0;
                return 0;
            }
            if (!pod->deleting && !exp_del_pending(p->c, p->key, pod->key))
                gone[n++] = pod;
        }
        for (size_t i = 0; i < n; i++)
            delete_pod(p, gone[i], "it has terminated and will be replaced");
        free(gone);
    }
    int adds = 0, dels = 0, replicas = p->spec.replicas;
    exp_counts(p->c, p->key, &adds, &dels);
    const nsi_state *st = &r->st;
    int32_t have = st->active + r->n_creating;
    if (adds == r->n_creating && st->other_mode == 0 && !(r->rolling && st->old > 0) &&
        have + st->coming_back < replicas) {
        int want = replicas - have - st->coming_back;
        int *ords = xcalloc((size_t)want + 1, sizeof(int));
        size_t n = incr_free_ordinals(r, want, ords);
        if (n > 0) {
            log_debug("nodeset %s: creating %zu pod(s) while %d create(s) are in flight", p->key, n, adds);
            create_ordinals(p, ords, (int)n, replicas);
        }
        free(ords);
    }
    incr_check(p, r);
    return 1;
}

static int incr_pass(struct pass *p, wq_result *res)
{
    uint64_t now = uv_now(p->op->loop);
    int act = exp_done(p->c, p->key, p->o->uid, now);
    p->full_why = NULL;
    /* The Slurm side acts on pods (nss_sync's share) only once writes are
     * not in flight, as a full pass runs nss_sync only then; before, the
     * pods get nss_status's share. */
    struct incr *r = incr_usable(p, now, 0);
    if (r == NULL)
        return 0;
    int slurm = !nss_quiet(p->op, p->o);
    store *pods = op_store(p->op, OPK_PODS);
    size_t it = 0, n_changed = 0;
    const char *uid;
    nsb_pod *changed = NULL;
    incr_apply_dirty(p, r, slurm ? &changed : NULL, &n_changed);
    int replicas = p->spec.replicas;
    nsi_plan_t plan = act ? nsi_plan(&r->st, replicas, r->rolling) : (nsi_plan_t){NSI_NONE, 0};
    snprintf(p->update_hash, sizeof(p->update_hash), "%s", r->update_hash);
    snprintf(p->current_hash, sizeof(p->current_hash), "%s", r->current_hash);
    p->collision = r->collision;
    if (plan.action == NSI_FULL)
        p->full_why = "plan";
    else if (slurm && !incr_slurm(p, r, changed, n_changed, act)) {
        plan.action = NSI_FULL;
        p->full_why = "slurm-pod";
    }
    free(changed);
    if (plan.action == NSI_FULL)
        return 0;
    if (plan.action == NSI_REPLACE) {
        /* Every ended pod must be where the state says before any goes. */
        size_t n = 0, cap = r->st.ended.count;
        const sobj **gone = xcalloc(cap + 1, sizeof(*gone));
        const char *ref;
        it = 0;
        while ((uid = nsi_ended_next(&r->st, &it, &ref)) && n < cap) {
            const sobj *pod = store_get_key(pods, ref);
            if (pod == NULL || strcmp(pod->uid, uid) != 0 || pod->deleting) {
                free(gone);
                r->valid = 0;
                p->full_why = "moved";
                return 0;
            }
            if (!exp_del_pending(p->c, p->key, pod->key))
                gone[n++] = pod;
        }
        for (size_t i = 0; i < n; i++)
            delete_pod(p, gone[i], "it has terminated and will be replaced");
        free(gone);
    } else if (plan.action == NSI_CREATE) {
        int *ords = xcalloc((size_t)plan.want + 1, sizeof(int));
        size_t n = incr_free_ordinals(r, plan.want, ords);
        if (n < (size_t)plan.want) {
            free(ords);
            p->full_why = "ordinals";
            return 0;
        }
        create_ordinals(p, ords, plan.want, replicas);
        free(ords);
    }
    if (act)
        p->wait_state = plan.action == NSI_WAIT ? WAIT_SHORT : WAIT_NONE;
    wait_net(p, r, now);
    nsb_counts counts;
    nsb_slurm_counts sc = {0};
    nsi_counts(&r->st, replicas, &counts);
    if (slurm) /* calm: the counts of the pods' nodes as nss_status adds them up */
        sc = (nsb_slurm_counts){.idle = r->st.slurm_idle,
                                .allocated = r->st.slurm_allocated,
                                .down = r->st.slurm_down,
                                .drain = r->st.slurm_drain};
    else
        nss_status(p->op, p->o, p->ctl, p->ns, &p->spec, NULL, 0, &sc); /* quiet: zeros, touches no pod */
    write_status(p, &counts, &sc, NULL);
    incr_check(p, r);
    uint64_t ms = r->full_due_ms - now;
    if (p->requeue_ms && p->requeue_ms < ms) {
        ms = p->requeue_ms;
        r->full_due_ms = now + ms;
    }
    if (p->soft_ms && p->soft_ms < ms)
        ms = p->soft_ms;
    *res = WQ_RESULT_AFTER(ms ? ms : 1);
    return 1;
}

/* The spec's problems (nsb_msgs): validation, the immutable fields, the
 * Controller reference, the tenancy rules and name collisions. *by_rival:
 * one of them is a collision a pass found, which is looked at again later. */
static void spec_problems(struct pass *p, nsb_msgs *msgs, int *by_rival)
{
    operator *op = p->op;
    const sobj *o = p->o;
    /* A change of an immutable field that got past the API server (see
     * nodeset_immut.h); never in the way of a deletion. */
    const struct ns_rec *rec = rec_get(p->c, o->key);
    if (nsb_validate(p->ns, NULL, msgs) == 0 && !o->deleting && rec)
        nsim_check(&rec->immut, o->uid, p->ns, msgs);
    /* With --namespace, a Controller outside the watched namespaces can never be found. */
    const char *out_ns = NULL;
    if (!o->deleting && cw_ref_outside(p->ns, op->opts.namespaces, (size_t)op->opts.n_namespaces, &out_ns)) {
        msgs->v = xrealloc(msgs->v, (msgs->n + 1) * sizeof(*msgs->v));
        msgs->v[msgs->n++] = xasprintf("spec.controllerRef.namespace: %s is not among the namespaces slurmop "
                                       "watches (--namespace)", out_ns);
    }
    /* A Controller of another namespace only when it admits ours, and only
     * text slurmctld can parse for its slurm.conf (tenancy.h). */
    const char *ref_ns = p->spec.ctl_ns;
    const sobj *ref_ctl = ref_ns ? store_get(op_store(op, OPK_CONTROLLERS), ref_ns, p->spec.ctl_name)
                                 : NULL;
    char *refused = o->deleting || out_ns ? NULL : tnc_nodeset_refusal(p->ns, ref_ctl ? ref_ctl->json : NULL,
                                                                             op->opts.allow_node_taints);
    if (refused) {
        msgs->v = xrealloc(msgs->v, (msgs->n + 1) * sizeof(*msgs->v));
        msgs->v[msgs->n++] = refused;
    }
    const sobj *twin = o->deleting ? NULL : name_twin(p->c, o, &p->spec);
    if (twin) {
        msgs->v = xrealloc(msgs->v, (msgs->n + 1) * sizeof(*msgs->v));
        msgs->v[msgs->n++] = xasprintf("metadata.name: NodeSet %s/%s of the same Controller has this name; "
                                       "their pods would share Slurm node names (rename one)",
                                       twin->ns, twin->name);
    }
    char *rival = o->deleting || twin ? NULL : names_rival(p->c, o, &p->spec);
    *by_rival = rival != NULL;
    if (rival) {
        msgs->v = xrealloc(msgs->v, (msgs->n + 1) * sizeof(*msgs->v));
        msgs->v[msgs->n++] = rival;
    }
}

/* The one end of a pass, whichever way it ends: what it made and found
 * (the NodeSet with defaults, its pods, the conflict text). */
static void pass_free(struct pass *p)
{
    free(p->conflict);
    free(p->pods);
    cJSON_Delete(p->ns);
    p->conflict = NULL;
    p->pods = NULL;
    p->ns = NULL;
}

static wq_result full_pass(struct pass *p);

/* One reconcile: the facts gathered in the order nsc_choose weighs them,
 * each step acted on as it chooses (nodeset_choose.h). */
static wq_result ns_sync(nodeset_state *c, const char *key, uint64_t first_add_ns)
{
    operator *op = c->op;
    const sobj *o = store_get_key(op_store(op, OPK_NODESETS), key);
    nsc_facts f = {0};
    struct pass p;

    f.synced = op_caches_synced(op) != 0;
    f.exists = o != NULL && o->json != NULL;
    f.deleting = f.exists && o->deleting;
    /* The first NodeSet of a namespace waits (a few hundred ms; at most
     * BH_SCOPE_WAIT_MS) until the topology webhook's namespaceSelector
     * admits its namespace: pods bound before would miss their topology,
     * which Slurm < 25.05 cannot take once slurmd registered. */
    f.covered = f.exists && (o->deleting || op_webhook_covers(op, o->ns));
    switch (nsc_choose(&f)) {
    case NSC_UNSYNCED:
        return WQ_RESULT_AFTER(NS_UNSYNCED_RETRY_MS);
    case NSC_FORGET:
        rec_forget(c, key);
        return WQ_RESULT_OK;
    case NSC_SCOPE_WAIT:
        return WQ_RESULT_AFTER(NS_SCOPE_RETRY_MS);
    default:
        break;
    }
    memset(&p, 0, sizeof(p));
    p.op = op;
    p.c = c;
    p.o = o;
    p.key = o->key;
    p.name = o->name;
    p.nsname = o->ns;
    p.first_add_ns = first_add_ns;
    p.now = (int64_t)time(NULL);
    p.ns = nsb_with_defaults(o->json);
    nsp_read(p.ns, &p.spec);
    p.mode = p.spec.mode;

    nsb_msgs msgs = {0};
    int by_rival = 0;
    spec_problems(&p, &msgs, &by_rival);
    f.invalid = msgs.n > 0;
    const char *ctlname = p.spec.ctl_name;
    const char *ctlns = p.spec.ctl_ns;
    const sobj *ctl = ctlns ? store_get(op_store(op, OPK_CONTROLLERS), ctlns, ctlname) : NULL;
    f.ctl_found = ctl != NULL && ctl->json != NULL;
    f.ctl_refuses = f.ctl_found && f.deleting && !tnc_nodeset_admitted(p.ns, ctl->json);
    nsc_step step = nsc_choose(&f);
    if (step == NSC_INVALID) {
        /* Nothing of an invalid spec is acted on (a replicas beyond the
         * maximum would allocate and loop for it): Events and a condition
         * say why, and a spec change queues it again. */
        for (size_t i = 0; i < msgs.n; i++)
            op_warn(op, o, NSB_KIND, "ValidationFailed", "%s", msgs.v[i]);
        write_invalid(&p, &msgs);
        nsb_msgs_free(&msgs);
        incr_drop(c, key);
        pass_free(&p);
        /* A collision a pass found is remembered for RIVAL_TTL_MS: look
         * again then (the earlier NodeSet's passes note it again while it
         * lasts). */
        return by_rival ? WQ_RESULT_AFTER(RIVAL_TTL_MS + 1000u) : WQ_RESULT_OK;
    }
    /* Being deleted: its pods are drained and deleted, and its finalizers
     * go, whatever its validity (a NodeSet made invalid after its pods
     * existed must stay deletable). Every pod still goes through the drain
     * proof (nss_condemn), shared Slurm name or not. */
    for (size_t i = 0; i < msgs.n; i++)
        log_info("nodeset %s: being deleted with an invalid spec (%s); draining its pods all the same", key,
                 msgs.v[i]);
    nsb_msgs_free(&msgs);
    nsim_remember(&rec_ensure(c, o->key)->immut, o->uid, p.ns);

    if (step == NSC_DELETE_REFUSED) {
        /* Draining through a Controller that does not admit this namespace
         * would write into another tenant's cluster: nothing is drained, the
         * drain finalizer (if any) stays until the Controller admits the
         * namespace again, goes, or the NodeSet's owner removes it. */
        op_warn(op, o, NSB_KIND, "ControllerRefFailed", "%s",
                "deleted while its Controller does not admit this namespace: its pods are not drained "
                "through it");
        incr_drop(c, key);
        pass_free(&p);
        return WQ_RESULT_OK;
    }
    if (step == NSC_DELETE) {
        incr_drop(c, key);
        p.ctl = ctl ? ctl->json : NULL;
        size_t left = drain_on_delete(&p);
        nss_finalize(op, o, &p.spec);
        pass_free(&p);
        /* Events (a drain read back, a pod gone) bring the next pass; this
         * is the net under them. Short, because a deleted NodeSet waits on
         * nothing else, and its passes are cheap next to what a missed
         * wake-up costs here: the NodeSet and its pods stay for the whole
         * period (seen in CI once: 30 s for a drain that took 2 ms). */
        return left ? WQ_RESULT_AFTER(DELETE_RECHECK_MS) : WQ_RESULT_OK;
    }
    /* Before any pod exists: a deleted NodeSet drains its pods first. Until
     * the API server has the finalizer, nothing else is written: a pod
     * created meanwhile could be deleted with its NodeSet undrained, and a
     * status write in the same pass would move the resourceVersion the
     * finalizer's patch is guarded by (a 409, and a retry a second later).
     * Its update event brings the next pass. */
    if (!nss_delete_without_drain(o) && !nss_has_finalizer(o->json, NSS_DRAIN_FINALIZER)) {
        nss_set_finalizer(op, o, NSS_DRAIN_FINALIZER, 1);
        pass_free(&p);
        return WQ_RESULT_OK;
    }
    if (step == NSC_NO_CONTROLLER) {
        op_warn(op, o, NSB_KIND, "ControllerRefFailed", "Controller %s/%s not found", o->ns, ctlname);
        incr_drop(c, key);
        pass_free(&p);
        return WQ_RESULT_OK; /* the Controller's creation queues us */
    }
    p.ctl = ctl->json;

    int adds = 0, dels = 0;
    if (!exp_done(c, key, o->uid, uv_now(op->loop)))
        exp_counts(c, key, &adds, &dels);
    f.writes_pending = adds > 0 || dels > 0;
    if (!f.writes_pending) {
        p.held_ns = wait_pass_take(c, key);
        wait_pass_drop(c, key);
    }
    int looked = 0;
    wq_result res;
    for (;;) {
        step = nsc_choose(&f);
        assert(step >= NSC_PENDING);
        switch (step) {
        case NSC_PENDING:
            /* Writes in flight bring event storms (several events per pod),
             * and a pass then can only refresh the status: throttled, so that
             * the loop stays free for the writes themselves. */
            p.held_ns = wait_pass_take(c, key);
            looked = incr_pending(&p);
            busy_defer(&p, p.first_add_ns);
            f.wait_ms = wait_pass_delay(c, key, uv_now(op->loop));
            f.pending_done = 1;
            break;
        case NSC_WAIT:
            /* Events the incremental step looked at needed no pod write
             * when it made none; others wait for the held pass. */
            if (!looked && !p.wrote_pod) {
                wait_pass_hold(c, key, p.held_ns);
                wait_pass_hold(c, key, p.first_add_ns);
            }
            pass_free(&p);
            return WQ_RESULT_AFTER(f.wait_ms);
        case NSC_INCR:
            if (incr_pass(&p, &res)) {
                if (c->mx_passes)
                    mx_counter_inc(mx_counter_get(c->mx_passes, MX_LV("incremental")));
                pass_free(&p);
                return res;
            }
            f.incr_tried = 1;
            f.slurm_busy = p.slurm_busy != 0;
            f.gap_ms = p.slurm_busy ? busy_gap_left(incr_of(c, key)) : 0;
            break;
        case NSC_K8S_SHARE:
            /* Slurm busy: the Kubernetes share now, the full pass at the
             * end of the gap. */
            incr_pending(&p);
            busy_defer(&p, first_add_ns);
            if (c->mx_passes)
                mx_counter_inc(mx_counter_get(c->mx_passes, MX_LV("kubernetes-share")));
            pass_free(&p);
            return WQ_RESULT_AFTER(f.gap_ms);
        default:
            assert(step == NSC_FULL);
            return full_pass(&p);
        }
    }
}

/* Every pod of the NodeSet looked at: revisions, scale, rolling update,
 * the Slurm side's rules, status; the incremental state rebuilt from it. */
static wq_result full_pass(struct pass *p)
{
    nodeset_state *c = p->c;
    operator *op = p->op;
    const sobj *o = p->o;
    const char *key = p->key;
    struct incr *r = incr_of(c, key);
    if (r) {
        p->busy_held_ns = r->busy_held_ns;
        r->busy_held_ns = 0;
    }
    uint64_t full_t0 = uv_hrtime();
    if (c->mx_passes)
        mx_counter_inc(mx_counter_get(c->mx_passes, MX_LV("full")));
    if (c->mx_full_why)
        mx_counter_inc(mx_counter_get(c->mx_full_why, MX_LV(p->full_why ? p->full_why : "other")));
    collect_pods(p);
    char *prival = pods_rival(p);
    if (prival) {
        /* A pod of this NodeSet shares its Slurm name with one of an
         * earlier NodeSet: nothing is acted on, as for an invalid spec. */
        nsb_msgs rm = {0};
        rm.v = xcalloc(1, sizeof(*rm.v));
        rm.v[rm.n++] = prival;
        op_warn(op, o, NSB_KIND, "ValidationFailed", "%s", prival);
        write_invalid(p, &rm);
        nsb_msgs_free(&rm);
        incr_drop(c, key);
        pass_free(p);
        return WQ_RESULT_AFTER(RIVAL_TTL_MS);
    }
    sync_revisions(p);
    nss_observe(op, o);
    if (exp_done(c, key, o->uid, uv_now(op->loop))) {
        sync_shared_objects(p);
        int scaled = p->mode == NSB_DAEMONSET ? scale_daemonset(p) : scale_statefulset(p);
        if (!scaled)
            rolling_update(p);
        /* After every condemnation of the pass, so that the Slurm side
         * knows which cordoned pods are kept (and may be uncordoned). */
        nss_actions act = {.ctx = p,
                           .delete_pod = slurm_delete_pod,
                           .delete_unchanged = slurm_delete_unchanged,
                           .condemn = slurm_condemn};
        nss_sync(op, o, p->ctl, p->ns, &p->spec, p->pods, p->n_pods, p->update_hash, &act);
    } else {
        int a, d;
        exp_counts(c, key, &a, &d);
        log_debug("nodeset %s: waiting for %d creation(s) and %d deletion(s) to be observed", key, a, d);
        nss_actions act = {.ctx = p,
                           .delete_pod = slurm_delete_pod,
                           .delete_unchanged = slurm_delete_unchanged,
                           .condemn = slurm_condemn,
                           .release_pod = slurm_release_pod};
        nss_release(op, o, p->pods, p->n_pods, &act);
    }
    sync_status(p);
    wait_net(p, incr_of(c, key), uv_now(op->loop));
    incr_rebuild(p, p->requeue_ms ? p->requeue_ms : RESYNC_MS);
    r = incr_of(c, key);
    r->full_end_ns = uv_hrtime();
    r->full_cost_ns = r->full_end_ns - full_t0;
    log_debug("nodeset %s: full pass over %zu pods (%s) in %.1f ms", key, p->n_pods,
              p->full_why ? p->full_why : "other", (double)r->full_cost_ns / 1e6);
    pass_free(p);
    uint32_t after = p->requeue_ms ? p->requeue_ms : RESYNC_MS;
    if (p->soft_ms && p->soft_ms < after)
        after = p->soft_ms;
    return WQ_RESULT_AFTER(after);
}

/* A full pass over the NodeSet's own pods: one whose Slurm name a pod of
 * another NodeSet of the Controller holds (the pods index: O(1) a pod).
 * Returns why this NodeSet is the later of such a pair (malloc'd), NULL
 * when it is not; the later one is told either way (names_collide). */
static char *pods_rival(struct pass *p)
{
    char ctl[512];
    ctl_key_of(&p->spec, p->nsname, ctl, sizeof(ctl));
    char *why = NULL;
    for (size_t i = 0; i < p->n_pods && why == NULL; i++) {
        const sobj *pod = pod_sobj(&p->pods[i]);
        const char *name = nss_pod_slurm_name(pod);
        const sobj *h = *name ? nss_name_holder(p->op, ctl, name, NULL, p->o->uid) : NULL;
        if (h)
            names_collide(p->c, p->o, h, name, &why);
    }
    return why;
}

static wq_result handle(const char *key, uint64_t first_add_ns, void *data)
{
    nodeset_state *c = data;
    uint64_t t0 = uv_hrtime();
    int failed_before = take_failed(c, key);
    if (failed_before)
        incr_mark_full(c, key, "failed-write");
    incr_take_due(c, key);
    wq_result r = ns_sync(c, key, first_add_ns);
    if (failed_before)
        r = WQ_RESULT_ERROR; /* keep backing off while writes fail */
    op_observe_reconcile(c->op, NODESET_CONTROLLER, r, (double)(uv_hrtime() - t0) / 1e9);
    return r;
}

static int start(operator *op)
{
    nodeset_state *c = nodeset_of(op);
    int err = 0;
    /* Failed writes back off per NodeSet up to a minute, not the queue's
     * default 1000 s: status PATCHes timing out under load for a while drove
     * one NodeSet to the cap, and its status stayed stale for over ten
     * minutes after the API server had recovered (the benchmark on a real
     * API server, 1,024 pods). A pass a minute for a NodeSet whose writes
     * keep failing costs little; a fleet's status that long out of date
     * does not. */
    wq_opts o = {.name = NODESET_CONTROLLER,
                 .handler = handle,
                 .data = c,
                 .metrics = op->metrics,
                 .max_delay_ns = NODESET_BACKOFF_MAX_S * 1000000000ull};
    if (op->metrics)
        c->mx_passes = mx_family_new(op->metrics, MX_COUNTER, "slurmop_nodeset_passes_total",
                                     "NodeSet passes that reached the pods, by kind: full (every pod), "
                                     "incremental (the pods that changed), or kubernetes-share (the pods "
                                     "that changed, their Slurm share left to a full pass while the Slurm "
                                     "side is busy)",
                                     "kind", NULL, 0, NULL);
    if (op->metrics)
        c->mx_full_why =
            mx_family_new(op->metrics, MX_COUNTER, "slurmop_nodeset_full_passes_total",
                          "NodeSet passes over every pod, by why an incremental one could not do: "
                          "no-state, resync, slurm-busy, plan, slurm-pod, moved, ordinals, or what "
                          "queued "
                          "the NodeSet (nodeset, controller, revision, node, slurm, requeue, "
                          "own-write, adopted, orphan-pod, failed-write, many-pods)",
                          "reason", NULL, 0, NULL);
    c->q = wq_new(op->loop, &o, &err);
    if (c->q == NULL)
        return err;
    size_t it = 0;
    const sobj *n;
    while ((n = store_next(op_store(op, OPK_NODESETS), &it)))
        wq_add(c->q, n->key);
    return nss_start(op);
}

static void stop(operator *op)
{
    nodeset_state *c = nodeset_of(op);
    nss_stop(op);
    nsw_stop(op);
    if (c->q)
        wq_shutdown(c->q, NULL, NULL);
    c->q = NULL;
    map_free(&c->recs);
    istr_put(c->ik.revision);
    istr_put(c->ik.revision_slinky);
    istr_put(c->ik.cordon);
    istr_put(c->ik.cost);
    istr_put(c->ik.deadline);
    istr_put(c->ik.hostname);
    istr_put(c->ik.instance);
    istr_put(c->ik.mode);
    memset(&c->ik, 0, sizeof(c->ik));
}

static void *state_new(void)
{
    nodeset_state *c = xcalloc(1, sizeof(*c));
    map_init_type(&c->recs, &rec_type);
    return c;
}

static void state_free(void *state)
{
    nodeset_state *c = state;
    if (c == NULL)
        return;
    map_free(&c->recs);
    free(c);
}

nodeset_state *nodeset_of(const operator *op)
{
    return op_state(op, OPR_NODESET);
}

const op_reconciler RC_NODESET = {
    .name = NODESET_CONTROLLER,
    .slot = OPR_NODESET,
    .new_state = state_new,
    .free_state = state_free,
    .setup = setup,
    .start = start,
    .stop = stop,
};
