#include "reconcilers/nodeset_slurm.h"

#include <assert.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/err.h"
#include "core/intern.h"
#include "core/json.h"
#include "core/log.h"
#include "core/map.h"
#include "core/mem.h"
#include "core/metrics.h"
#include "core/rfc3339.h"
#include "reconcilers/cluster_common.h"
#include "reconcilers/cluster_watch.h"
#include "reconcilers/nodedemand.h"
#include "reconcilers/nodehealth.h"
#include "reconcilers/nodeset_incr.h"
#include "reconcilers/nodeset_precreate.h"
#include "reconcilers/nodeset_verdict.h"
#include "reconcilers/nodeset_write.h"
#include "reconcilers/reconcilers.h"
#include "reconcilers/slurmclient.h"
#include "slurmio/hostlist.h"
#include "slurmio/nodecache.h"
#include "watchers/kinds.h"
#include "watchers/slinky.h"

/* A Kubernetes write not yet visible in the cache is not repeated for this
 * long (the watch event normally arrives within milliseconds). */
/* A Ready pod gets this long to register its Slurm node before a missing
 * node counts as registration drift; the node must have been missing from
 * every table read for this long too. */
#define DRIFT_GRACE_DEFAULT_S 60
#define DRIFT_GRACE_S(op)                                                                                  \
    ((int64_t)((op)->opts.drift_grace_s ? (op)->opts.drift_grace_s : DRIFT_GRACE_DEFAULT_S))
#define DRIFT_GRACE_MS(op) ((uint64_t)DRIFT_GRACE_S(op) * 1000u)
/* Registration drift replaces at most this many pods per NodeSet per
 * DRIFT_WINDOW_MS: a lying or broken Slurm can never empty a NodeSet. */
#define DRIFT_MAX_PER_WINDOW 2
#define DRIFT_WINDOW_MS 60000u
/* The proof's age and the graces: nodeset_verdict.h. */
#define PROOF_FRESH_MS NSV_PROOF_FRESH_MS
/* How long a condemned pod's node is read on its own while it drains. */
#define TRACK_MS (10u * 60u * 1000u)
/* A pod whose delete was decided gets no more status writes (conditions,
 * labels, pod info) for this long; once it is seen terminating it gets
 * none anyway, and if the delete failed, the next decision marks it again. */
#define DELETING_MS 60000u
/* A drained idle victim waiting only for its job read gets no status write
 * for this long (mark_deciding; the read answers in milliseconds). */
#define DECIDING_MS 2000u
/* Failed Slurm writes back off per node: 1 s, 2 s, ... 60 s. */
#define BACKOFF_MAX_MS 60000u
/* A pass that condemns more pods than this drains them with one reason (the
 * NodeSet's), so they go to Slurm as one hostlist request; fewer get
 * Slinky's reason naming each pod. */
#define BATCH_REASON_MIN 16
/* The deadline written for a job without a time limit. */
#define DEADLINE_INFINITE ((int64_t)253402300799) /* 9999-12-31T23:59:59Z */

/* ------------------------------------------------------------------ */
/* state */

typedef struct nss_set {
    char *key;     /* ns/name of the NodeSet */
    char *ctl_key; /* ns/name of its Controller */
    map_t condemned; /* pod uids condemned in the current pass (keys owned, values unused) */
    /* The condemned set of the last pass that ran nss_sync, for the passes
     * that wait for writes in flight (nss_release), and the NodeSet's
     * generation it was decided for. */
    map_t victims;
    int64_t cond_gen, victims_gen;
    nsb_slurm_counts counts;
    int counts_known;
    /* drains decided by this pass's condemnations, sent at its end */
    char **drain_nodes;
    char **drain_pods; /* "ns/pod" */
    size_t n_drains;
    /* reservation writes: one at a time, and none until a read after the
     * last one has shown its effect */
    int resv_writing;
    int resv_marked;
    uint64_t resv_mark;
    /* registration drift: pod uid -> uv_now() ms since which it has been
     * Ready while Slurm's tables lacked its node (values malloc'd) */
    map_t drift_since;
    /* pods whose delete this process decided: uid -> deleting_ent. Their
     * status writes are skipped: in a scale-in of a thousand pods they were
     * a thousand PATCHes queued ahead of the deletes that end a busy node's
     * drain, and every one was for a pod about to go */
    map_t deleting;
    size_t deleting_sweep_at; /* count at which mark_deleting drops stale marks (their pods are gone) */
    uint64_t drift_window_ms; /* start of the current drift window */
    int drift_used;           /* replacements in it */
    /* why this pass kept condemned pods that it could not drain (a static
     * string; NULL when none) and the message of the condition */
    const char *blocked;
    char blocked_msg[768];
    /* uv_now() ms since which every full pass has kept pods for a blocked
     * drain (0: the last one kept none), for
     * slurmop_drain_blocked_oldest_seconds */
    uint64_t blocked_since;
    /* condemned pods kept by the last passes: uid -> kept_ent (the reason
     * that keeps it, or NULL while its node drains), for
     * slurmop_drains_blocked and slurmop_busy_pods_kept */
    map_t kept;
    /* what the last full pass saw, for incremental passes (nss_calm):
     * nss_sync ran, and the node table was held as listing none of the
     * NodeSet's registered nodes */
    int synced;
    int held;
    /* Pods whose Slurm name is not certain by construction (hostNetwork:
     * the host's own name) and that a read has shown under it as theirs
     * (name_record): uid -> proved_ent. Only for these does Slurm's "no
     * such node" count as proof (name_gone). Swept by full passes. */
    map_t proved;
    uint64_t status_passes; /* full nss_status passes, the sweep's clock */
    /* the features slurmd's --conf gives the NodeSet's update revision
     * (nsb_slurmd_features), for the generation it was computed at */
    char *features;
    int64_t features_gen;
    /* Slurm nodes out for health (sync_health): Slurm name -> hl_ent, and
     * how many unhealthy ones the cap held back in the last pass */
    map_t health;
    size_t health_waiting;
    /* Unbound pods deleted for avoiding Nodes healthy again
     * (sweep_avoiding): uid -> swept_ent, pruned by each sync_health */
    map_t swept;
    uint64_t health_passes;
    /* Pods whose Slurm node's record is out of date (sync_record): uid ->
     * record_ent; and the resources of the update revision's --conf, for
     * the generation they were read at */
    map_t records;
    uint64_t sync_passes;
    int res_cpus;
    int64_t res_mem;
    int64_t res_gen;
    /* A NodeSet being deleted waits for Slurm's job records of its
     * partition (nss_jobrec_clear): since when (uv_now ms; 0: not
     * waiting), and whether its Event was sent */
    uint64_t jobrec_since;
    int jobrec_warned;
    /* Following the queue (nodedemand.h, demand_step): whether the
     * annotation parsed, its policy, the partitions this NodeSet's nodes
     * serve (its siblings route jobs by them), since when each Slurm node
     * reads idle (name -> uint64_t uv_now ms), the annotation text whose
     * error was reported, the last job reported as never fitting */
    int demand_on;
    nd_policy demand;
    char *demand_parts;
    /* Every partition a read showed one of its nodes in, in this process's
     * life: a NodeSet scaled to 0 still serves them (note_parts). */
    char *seen_parts;
    map_t idle_since;
    char *demand_bad;
    uint32_t unfit_job;
    /* Records this process asked to make first (nss_precreate) whose slurmd has not been seen registered:
     * Slurm name -> made_ent. A later pass does not ask for them again, and a scale-in past them deletes
     * them (sync_unmake); unmake_due: the last nss_sync left one to delete once its pod is gone */
    map_t made;
    int unmake_due;
    uint64_t unmake_since; /* when a NodeSet being deleted began deleting them (nss_unmake_all; 0: not) */
} nss_set;

/* How long a NodeSet being deleted waits for the deletes of its records made first. */
#define UNMAKE_MAX_MS 60000u

/* A record made first: its pod's ordinal and name (a pod of that name still there keeps it), and whether
 * our delete of it is in flight. One allocation: name, then pod. */
typedef struct made_ent {
    int ordinal;
    int deleting;
    uint64_t conf_hash; /* of the --conf it was made with (hash_str) */
    const char *pod;
    char name[]; /* map key */
} made_ent;

static made_ent *made_new(const char *name, const char *pod, int ordinal, uint64_t conf_hash)
{
    size_t ln = strlen(name) + 1, lp = strlen(pod) + 1;
    made_ent *e = xcalloc(1, sizeof(*e) + ln + lp);
    memcpy(e->name, name, ln);
    memcpy(e->name + ln, pod, lp);
    e->pod = e->name + ln;
    e->ordinal = ordinal;
    e->conf_hash = conf_hash;
    return e;
}

typedef struct kept_ent {
    const char *reason; /* a static DrainBlocked* string; NULL: waiting for its drain */
    char uid[];         /* map key */
} kept_ent;
/* A Slurm node of the NodeSet drained for health, then replaced. */
typedef struct hl_ent {
    char *name;       /* Slurm node name (map key) */
    char *uid;        /* the pod drained for it */
    char *node;       /* its Kubernetes Node */
    char *reason;     /* the drain reason ("slurm-operator: <why>") */
    uint64_t seen_ms; /* when this process saw the Node unhealthy */
    uint64_t gone_ms; /* when the pod's delete was decided (0: not yet) */
    int drain_seen;   /* a read showed our drain (its latency observed) */
    int cond_written; /* the pod condition was written */
} hl_ent;

/* A pod of the update revision whose Slurm node record differs from its
 * --conf (sync_record). */
typedef struct record_ent {
    uint64_t deleted_ms; /* when our DELETE of the record was sent (0: not yet) */
    uint64_t pass;       /* sync_passes when last seen */
    char uid[];          /* map key */
} record_ent;

/* How long a record whose DELETE was sent may still read present before
 * the delete counts as failed and the node is judged again. */
#define RECORD_DELETE_WAIT_MS 30000u

/* A pod whose delete sweep_avoiding sent, at the resourceVersion it sent
 * as the precondition: the same pod at the same version is not sent
 * again; a changed one (the delete was refused) is judged anew. */
typedef struct swept_ent {
    uint64_t rv_hash;
    uint64_t pass; /* health_passes when last among the NodeSet's pods */
    char uid[];    /* map key */
} swept_ent;

typedef struct proved_ent {
    char *uid; /* map key */
    char *name;
    uint64_t pass; /* status_passes when last seen among the NodeSet's pods */
} proved_ent;

typedef struct drift_ent {
    char *uid; /* map key */
    uint64_t since;
    int lost_warned; /* the Event for a lost busy node was sent */
    int unproved_warned; /* the Event for a name not proved was sent */
} drift_ent;

typedef struct deleting_ent {
    char *uid; /* map key */
    uint64_t until;       /* its delete was decided: no writes, not judged again */
    uint64_t quiet_until; /* its verdict is due (mark_deciding): no status writes */
} deleting_ent;

static void hl_free(void *v)
{
    hl_ent *e = v;
    free(e->name);
    free(e->uid);
    free(e->node);
    free(e->reason);
    free(e);
}

static const map_type hl_type = {.val_free = hl_free};

/* An unhealthy Node (nss_state.unhealthy). */
typedef struct uh_ent {
    char *name;  /* Node name (map key) */
    uint64_t at; /* uv_now() ms when first seen unhealthy */
} uh_ent;

static void uh_free(void *v)
{
    uh_ent *e = v;
    free(e->name);
    free(e);
}

static const map_type uh_type = {.val_free = uh_free};
static const nh_config *health_cfg(const operator *op);
static void on_node_health(store *sto, const sobj *old, const sobj *new, void *data);
struct nss_state;
static void health_gauges(struct nss_state *st, const struct nss_set *s, const char *ns, const char *name);

typedef struct bo_ent {
    char *key; /* ctl_key "\x1f" node */
    unsigned fails;
    uint64_t next_ms;
} bo_ent;

/* The Slurm side's state: one per operator (nss_of). Hooks get
 * it as their data, write completions through their context; the public
 * functions reach it through the operator. */
struct nss_state {
    operator *op;
    nss_queue q;       /* the NodeSet reconciler's queue */
    int ix_slurm_name; /* pods store index: Slurm node name -> pods */
    map_t backoff;     /* Slurm write backoff */
    const char *ik_mode; /* interned NSB_LABEL_SCALING_MODE (a reference of ours) */
    int stopped;         /* late completions touch nothing but the count below */
    /* Slurm writes sent whose completion has not run yet (Kubernetes
     * writes go through the writer, nodeset_write.h). They complete
     * through the Controller's node cache, which may
     * close after the operator freed this state (free_late): a state
     * released while some are in flight is freed by the last completion. */
    unsigned inflight;
    int released;
    /* slurmop_drains_blocked{reason}, slurmop_busy_pods_kept,
     * slurmop_drain_blocked_oldest_seconds: refreshed at every scrape */
    mx_family *mx_blocked;
    mx_gauge *mx_busy, *mx_oldest;
    /* Nodes unhealthy by --unhealthy-node-* (nodehealth.h): Node name ->
     * uh_ent; and the metrics */
    map_t unhealthy;
    mx_gauge *mx_unhealthy;
    mx_family *mx_out, *mx_waiting, *mx_replaced;
    mx_histogram *mx_drain_s;
    /* NodeSets that follow the queue (demand_step) */
    mx_family *mx_pending, *mx_cooled, *mx_scaled;
    mx_family *mx_precreated; /* slurmop_slurm_node_precreates_total{result} */
    mx_counter *mx_unmade;    /* slurmop_slurm_node_precreates_deleted_total */
};

/* Every reason keep() gives, so that slurmop_drains_blocked lists each
 * one (0 when none applies) and an alert can name them. */
static const char *const kept_reasons[] = {"DrainBlockedNoRestApi", "DrainBlockedSlurmUnknown",
                                           "DrainBlockedNameUnproved", "DrainBlockedNodeLost",
                                           "DrainHeldSlurmContradiction"};

static void clear_drains(nss_set *s);

/* Queue a NodeSet pass through the hook given at setup. */
static void enqueue(nss_state *st, const char *key)
{
    st->q.now(st->q.ctx, key);
}

static void enqueue_after(nss_state *st, const char *key, uint64_t ms)
{
    st->q.after(st->q.ctx, key, ms);
}

static char *join_key(const char *a, const char *b)
{
    return xasprintf("%s\x1f%s", a, b);
}

static void drift_free(void *v)
{
    drift_ent *d = v;
    free(d->uid);
    free(d);
}

static void bo_free(void *v)
{
    bo_ent *e = v;
    free(e->key);
    free(e);
}

static void proved_free(void *v)
{
    proved_ent *e = v;
    free(e->uid);
    free(e->name);
    free(e);
}

static void deleting_free(void *v)
{
    deleting_ent *e = v;
    free(e->uid);
    free(e);
}

static const map_type drift_type = {.val_free = drift_free};
static const map_type deleting_type = {.val_free = deleting_free};
static const map_type proved_type = {.val_free = proved_free};
static const map_type bo_type = {.val_free = bo_free};

/* idle_since: the key is its own copy, the value a uint64_t. */
static void free_idle_key(char *key)
{
    free(key);
}
static const map_type idle_type = {.val_free = free, .key_free = free_idle_key};

void nss_set_free(nss_set *s)
{
    if (s == NULL)
        return;
    map_free(&s->condemned);
    map_free(&s->victims);
    map_free(&s->drift_since);
    map_free(&s->deleting);
    map_free(&s->proved);
    map_free(&s->kept);
    map_free(&s->health);
    map_free(&s->swept);
    map_free(&s->records);
    map_free(&s->idle_since);
    map_free(&s->made);
    free(s->demand_parts);
    free(s->seen_parts);
    free(s->demand_bad);
    clear_drains(s);
    free(s->features);
    free(s->key);
    free(s->ctl_key);
    free(s);
}

static nss_set *set_get(nss_state *st, const sobj *nodeset, const nsp_spec *sp);

/* The Slurm side's part of NodeSet key's record, NULL when none was made. */
static nss_set *set_find(const nss_state *st, const char *key)
{
    nss_set **slot = st->q.part(st->q.ctx, key, 0);
    return slot ? *slot : NULL;
}

/* For the hooks that get the NodeSet as it is stored (no pass read its
 * spec): only its controllerRef counts here, which has no default. */
static nss_set *set_of_json(nss_state *st, const sobj *nodeset)
{
    nsp_spec sp;
    nsp_read(nodeset->json, &sp);
    return set_get(st, nodeset, &sp);
}

static nss_set *set_get(nss_state *st, const sobj *nodeset, const nsp_spec *sp)
{
    nss_set **slot = st->q.part(st->q.ctx, nodeset->key, 1);
    nss_set *s = *slot;
    char *ctl_key = xasprintf("%s/%s", sp->ctl_ns ? sp->ctl_ns : nodeset->ns, sp->ctl_name);
    if (s && strcmp(s->ctl_key, ctl_key) != 0) {
        nss_set_free(s); /* another Controller's: nothing of it holds */
        s = *slot = NULL;
    }
    if (!s) {
        s = xcalloc(1, sizeof(*s));
        s->key = xstrdup(nodeset->key);
        s->ctl_key = ctl_key;
        map_init_type(&s->condemned, &map_type_free_val); /* uid -> itself */
        map_init_type(&s->victims, &map_type_free_val);
        map_init_type(&s->drift_since, &drift_type);
        map_init_type(&s->deleting, &deleting_type);
        map_init_type(&s->proved, &proved_type);
        map_init_type(&s->kept, &map_type_free_val);
        map_init_type(&s->health, &hl_type);
        map_init_type(&s->swept, &map_type_free_val);
        map_init_type(&s->records, &map_type_free_val);
        s->res_gen = -1;
        map_init_type(&s->idle_since, &idle_type);
        map_init_type(&s->made, &map_type_free_val);
        *slot = s;
    } else {
        free(ctl_key);
    }
    return s;
}

static void clear_drains(nss_set *s)
{
    for (size_t i = 0; i < s->n_drains; i++) {
        free(s->drain_nodes[i]);
        free(s->drain_pods[i]);
    }
    free(s->drain_nodes);
    free(s->drain_pods);
    s->drain_nodes = s->drain_pods = NULL;
    s->n_drains = 0;
}

static void clear_condemned(nss_set *s)
{
    map_free(&s->condemned);
}

/* ------------------------------------------------------------------ */
/* events from the Slurm side */

/* A node without a pod that turns defunct (DOWN and NOT_RESPONDING, our
 * pod info in its comment) is for its NodeSet's pruneSlurmNodeRecords to
 * delete: tell that NodeSet, since no pod event will (its pod may have gone
 * before the node table showed the node defunct). */
static void wake_pruner(nss_state *st, const char *ctl_key, const char *node)
{
    nc_cache *cache = NULL;
    const sm_node *n = NULL;
    if (slurmclient_get(st->op, ctl_key, &cache) != SC_READY || nc_lookup(cache, node, &n) != NC_PRESENT)
        return;
    if (n->base != SM_NODE_DOWN || !(n->flags & SM_NF(NOT_RESPONDING)) || !n->comment || n->comment[0] != '{')
        return;
    cJSON *info = json_parse(n->comment, strlen(n->comment), NULL);
    const char *ns = info ? json_get_str(info, "namespace") : NULL;
    const char *set = info ? json_get_str(info, "nodeSetName") : NULL;
    if (ns && set && *ns && *set) {
        char key[512];
        snprintf(key, sizeof(key), "%s/%s", ns, set);
        const nss_set *s = set_find(st, key);
        if (s && strcmp(s->ctl_key, ctl_key) == 0)
            enqueue(st, key);
    }
    cJSON_Delete(info);
}

/* The key ("ns/name") of the NodeSet that owns pod into key; 0 when no
 * NodeSet owns it. */
static int owner_key(const sobj *pod, char *key, size_t len)
{
    if (!pod->owner_name || !pod->owner_kind || strcmp(pod->owner_kind, NSB_KIND) != 0)
        return 0;
    snprintf(key, len, "%s/%s", pod->ns, pod->owner_name);
    return 1;
}

static void on_slurm_node(const char *ctl_key, const char *node, void *data)
{
    nss_state *st = data;
    if (st->stopped)
        return; /* the NodeSet reconciler's queue is gone */
    if (node) {
        /* The pods named so in Slurm, through the pods store's index; the
         * NodeSet that owns one and uses this Controller is told. */
        store *pods = op_store(st->op, OPK_PODS);
        store_cursor cur;
        int any = 0;
        for (const sobj *pod = store_index_first(pods, st->ix_slurm_name, node, &cur); pod;
             pod = store_index_next(&cur)) {
            any = 1;
            char key[512];
            if (!owner_key(pod, key, sizeof(key)))
                continue;
            const nss_set *s = set_find(st, key);
            if (s == NULL || strcmp(s->ctl_key, ctl_key) == 0)
                st->q.pod(st->q.ctx, key, pod);
        }
        if (!any)
            wake_pruner(st, ctl_key, node);
        return;
    }
    /* Everything of that Controller. */
    size_t it = 0;
    for (const nss_set *s; (s = st->q.next_part(st->q.ctx, &it));)
        if (strcmp(s->ctl_key, ctl_key) == 0)
            enqueue(st, s->key);
}

static void on_slurm_resv(const char *ctl_key, const char *resv, void *data)
{
    const nss_state *st = data;
    if (st->stopped)
        return;
    size_t pl = strlen(NSS_RESV_PREFIX);
    if (!resv || strncmp(resv, NSS_RESV_PREFIX, pl) != 0)
        return;
    const char *slash = strchr(ctl_key, '/');
    if (!slash)
        return;
    char *key = xasprintf("%.*s/%s", (int)(slash - ctl_key), ctl_key, resv + pl);
    enqueue(data, key);
    free(key);
}

/* ------------------------------------------------------------------ */
/* helpers */

static int our_reason(const char *r)
{
    return r && strncmp(r, NSS_REASON_PREFIX, strlen(NSS_REASON_PREFIX)) == 0;
}

/* The one mapping of pods to Slurm node names; mode is the pod's
 * NSB_LABEL_SCALING_MODE label. */
static const char *slurm_name_of(const sobj *pod, const char *mode)
{
    const pod_proj *pp = pod_of(pod);
    enum nsb_mode m = mode && strcmp(mode, "DaemonSet") == 0 ? NSB_DAEMONSET : NSB_STATEFULSET;
    return nsb_slurm_node_name(m, pp->host_network, pp->node_name, pp->hostname, pod->name);
}

const char *nss_pod_slurm_name(const sobj *pod)
{
    return slurm_name_of(pod, sobj_label(pod, NSB_LABEL_SCALING_MODE));
}

/* nss_pod_slurm_name with the label found by pointer (the per-pod loops and
 * the store index). */
static const char *slurm_name(const nss_state *st, const sobj *pod)
{
    return slurm_name_of(pod, sobj_label_i(pod, st->ik_mode));
}

static const char *slurm_name_index(const sobj *pod, void *data)
{
    const char *n = slurm_name(data, pod);
    return *n ? n : NULL;
}

static const sobj *pod_sobj(const nsb_pod *p)
{
    return p->ud;
}

int nss_pod_slurm_name_exact(const sobj *pod)
{
    /* Without hostNetwork the kubelet sets the pod's kernel hostname to
     * spec.hostname, which the builder set (setHostnameAsFQDN is refused by
     * nsb_validate), and slurmd registers under it: certain. With it, the
     * host's own hostname, which may differ from the Node's name in case
     * (the kubelet lowercases it), in dots (a Node named by its FQDN on a
     * host with a short name, or the reverse), or altogether
     * (--hostname-override, a cloud provider's names). */
    return !pod_of(pod)->host_network;
}

/* The Controller key ("ns/name") of the NodeSet that owns pod into buf;
 * 0 when no NodeSet in the store owns it. */
static int pod_ctl_key(operator *op, const sobj *pod, char *buf, size_t len)
{
    if (!pod->owner_name || !pod->owner_kind || strcmp(pod->owner_kind, NSB_KIND) != 0)
        return 0;
    const sobj *ns = store_get(op_store(op, OPK_NODESETS), pod->ns, pod->owner_name);
    if (!ns || !ns->json)
        return 0;
    const char *ctl = json_get_str(ns->json, "spec.controllerRef.name");
    const char *cns = cw_ref_ns(ns->json, "spec.controllerRef");
    if (!ctl || !*ctl)
        return 0;
    snprintf(buf, len, "%s/%s", cns ? cns : pod->ns, ctl);
    return 1;
}

const sobj *nss_name_holder(operator *op, const char *ctl_key, const char *name, const char *except_uid,
                            const char *except_owner_uid)
{
    nss_state *st = nss_of(op);
    if (!st || !name || !*name || st->ix_slurm_name < 0)
        return NULL;
    store_cursor cur;
    for (const sobj *o = store_index_first(op_store(op, OPK_PODS), st->ix_slurm_name, name, &cur); o;
         o = store_index_next(&cur)) {
        char k[512];
        if ((except_uid && strcmp(o->uid, except_uid) == 0) ||
            (except_owner_uid && o->owner_uid && strcmp(o->owner_uid, except_owner_uid) == 0))
            continue;
        if (pod_ctl_key(op, o, k, sizeof(k)) && strcmp(k, ctl_key) == 0)
            return o;
    }
    return NULL;
}

/* Another pod (of any NodeSet of the Controller, any namespace) whose slurmd
 * takes the same Slurm name: the node is not this pod's alone, and what its
 * own rules would write (an undrain, its pod info, a resumed DOWN) could
 * undo what the other's need (a drain before its delete). */
static int name_shared(const nss_state *st, const nss_set *s, const sobj *pod, const char *name)
{
    return nss_name_holder(st->op, s->ctl_key, name, pod->uid, NULL) != NULL;
}

/* A read shows node `name` (sn) as this pod's: its comment is the pod
 * info slurmop wrote for this very pod (namespace and pod name), and its
 * NodeHostname, which slurmd sends as its hostname cut at the first dot,
 * is that of a host named `name` (or is not reported). Recorded for pods
 * whose name is not certain (nss_pod_slurm_name_exact), so that a later
 * "no such node" of that name proves something (name_gone). */
static void name_record(nss_set *s, const sobj *pod, const char *name, const sm_node *sn)
{
    if (nss_pod_slurm_name_exact(pod) || !sn || !sn->comment || sn->comment[0] != '{')
        return;
    proved_ent *e = map_get(&s->proved, pod->uid);
    if (e && strcmp(e->name, name) == 0) {
        e->pass = s->status_passes;
        return;
    }
    const char *h = sn->hostname ? sn->hostname : "";
    size_t short_len = strcspn(name, ".");
    if (*h && (strlen(h) != short_len || strncmp(h, name, short_len) != 0))
        return;
    cJSON *info = json_parse(sn->comment, strlen(sn->comment), NULL);
    int mine = info && strcmp(json_get_str_or(info, "namespace", ""), pod->ns) == 0 &&
               strcmp(json_get_str_or(info, "podName", ""), pod->name) == 0;
    cJSON_Delete(info);
    if (!mine)
        return;
    if (e == NULL) {
        e = xcalloc(1, sizeof(*e));
        e->uid = xstrdup(pod->uid);
        map_put(&s->proved, e->uid, e);
    }
    free(e->name);
    e->name = xstrdup(name);
    e->pass = s->status_passes;
}

/* Drop the entries of m last seen before pass `oldest`: every value is a
 * struct with a uint64_t pass counter at pass_off (offsetof) and its key
 * inside it. Keys are collected first: a map is not changed while walked. */
static void drop_older(map_t *m, size_t pass_off, uint64_t oldest)
{
    if (m->count == 0)
        return;
    size_t it = 0, n = 0;
    const char *k;
    void *v;
    const char **gone = xcalloc(m->count, sizeof(*gone));
    while (map_next(m, &it, &k, &v)) {
        uint64_t pass;
        memcpy(&pass, (const char *)v + pass_off, sizeof(pass));
        if (pass < oldest)
            gone[n++] = k;
    }
    for (size_t i = 0; i < n; i++)
        map_drop(m, gone[i]);
    free(gone);
}

/* Drop the records of pods the last full status pass did not see (gone). */
static void proved_sweep(nss_set *s)
{
    drop_older(&s->proved, offsetof(proved_ent, pass), s->status_passes);
}

/* Slurm's "no such node" to a fresh read of the pod's name, and the name is
 * known to be the one its slurmd took: certain by construction, or shown
 * by a read as this pod's (name_record). Otherwise the answer is about a
 * name the pod may never have used: no proof of anything. */
/* The name is known to be the one the pod's slurmd took: certain by
 * construction, or shown by a read as this pod's (name_record). */
static int name_known(const nss_set *s, const sobj *pod, const char *name)
{
    if (nss_pod_slurm_name_exact(pod))
        return 1;
    const proved_ent *e = s->proved.count ? map_get(&s->proved, pod->uid) : NULL;
    return e && strcmp(e->name, name) == 0;
}

static int name_gone(const nss_set *s, nc_cache *cache, const sobj *pod, const char *name)
{
    return nc_confirm_gone(cache, name, PROOF_FRESH_MS) && name_known(s, pod, name);
}

static uint64_t now_ms(const nss_state *st)
{
    return uv_now(st->op->loop);
}

/* ---- writes in flight ---- */

static void state_destroy(nss_state *st);

/* A Slurm write of ours was sent: its completion must run before the state goes. */
static void write_sent(nss_state *st)
{
    st->inflight++;
}

/* A write's completion ran: the last one frees a released state. */
static void write_done(nss_state *st)
{
    if (--st->inflight == 0 && st->released)
        state_destroy(st);
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = s ? s : "\x01"; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return s ? h : 0;
}

/* Set (value non-NULL) or remove (NULL) a pod annotation or label, through
 * the writer's value gate. */
static void set_pod_meta(nss_state *st, const char *set, const sobj *pod, int label, const char *key,
                         const char *value)
{
    const char *cur = label ? sobj_label(pod, key) : sobj_annotation(pod, key);
    if ((cur == NULL && value == NULL) || (cur && value && strcmp(cur, value) == 0))
        return;
    char what[256];
    snprintf(what, sizeof(what), "%s %s", label ? "label" : "annotation", key);
    nsw_ticket *e = nsw_take(st->op, pod->uid, what, hash_str(value));
    if (!e)
        return;
    cJSON *patch = cJSON_CreateObject();
    cJSON *m = json_obj_ensure(json_obj_ensure(patch, "metadata"), label ? "labels" : "annotations");
    if (value)
        json_set_str(m, key, value);
    else
        json_set(m, key, cJSON_CreateNull());
    nsw_patch_pod(st->op, e, set, pod, NULL, KUBE_PATCH_MERGE, patch, what);
}

/* ---- Slurm writes ---- */

/* Look at node's pod in set again after ms (its write failed): that pod
 * alone when the queue can (nss_queue.pod_after), else the whole set. */
static void retry_node(nss_state *st, const char *set, const char *node, uint64_t ms)
{
    if (st->q.pod_after && node) {
        store *pods = op_store(st->op, OPK_PODS);
        store_cursor cur;
        char key[512];
        for (const sobj *pod = store_index_first(pods, st->ix_slurm_name, node, &cur); pod;
             pod = store_index_next(&cur)) {
            if (owner_key(pod, key, sizeof(key)) && strcmp(key, set) == 0) {
                st->q.pod_after(st->q.ctx, set, pod, ms);
                return;
            }
        }
    }
    enqueue_after(st, set, ms);
}

typedef struct sw_ctx {
    nss_state *st;
    char *set;
    char *bkey;
} sw_ctx;

static void slurm_written(const char *node, int status, void *data)
{
    sw_ctx *c = data;
    nss_state *st = c->st;
    if (status == 0) {
        map_drop(&st->backoff, c->bkey);
    } else if (status != OP_ECANCELED && !st->stopped) {
        bo_ent *b = map_get(&st->backoff, c->bkey);
        if (!b) {
            b = xcalloc(1, sizeof(*b));
            b->key = xstrdup(c->bkey);
            map_put(&st->backoff, b->key, b);
        }
        unsigned delay = 1000u << (b->fails < 6 ? b->fails : 6);
        if (delay > BACKOFF_MAX_MS)
            delay = BACKOFF_MAX_MS;
        b->fails++;
        b->next_ms = now_ms(st) + delay;
        if (status != OP_ENOTFOUND)
            log_warn("nodeset %s: Slurm write to node %s failed (%s); retrying in %u ms", c->set, node,
                     err_str(status), delay);
        retry_node(st, c->set, node, delay);
    }
    free(c->set);
    free(c->bkey);
    free(c);
    write_done(st);
}

/* Queue a node update; 0 when queued, 1 when the same one is already in
 * flight or settling (nothing sent), a negative code otherwise (backing off
 * after failures included). */
static int slurm_update(nss_state *st, nc_cache *cache, const nss_set *s, const char *node,
                        const sm_node_update *u)
{
    char *bkey = join_key(s->ctl_key, node);
    bo_ent *b = map_get(&st->backoff, bkey);
    if (b && now_ms(st) < b->next_ms) {
        /* The wake-up the failure queued runs on the work queue's clock,
         * which may be a few ms ahead of the loop's cached one: a pass it
         * brings can land here just before the backoff ends, and without
         * another wake-up the write would wait for the next resync (seen:
         * a refused cordon drain never retried). */
        retry_node(st, s->key, node, b->next_ms - now_ms(st));
        free(bkey);
        return OP_EBUSY;
    }
    sw_ctx *c = xcalloc(1, sizeof(*c));
    c->st = st;
    c->set = xstrdup(s->key);
    c->bkey = bkey;
    int rc = nc_update(cache, node, u, slurm_written, c);
    if (rc != 0) {
        free(c->set);
        free(c->bkey);
        free(c);
    } else {
        write_sent(st); /* slurm_written runs later, once */
    }
    return rc;
}

static int slurm_delete(nss_state *st, nc_cache *cache, const nss_set *s, const char *node)
{
    sw_ctx *c = xcalloc(1, sizeof(*c));
    c->st = st;
    c->set = xstrdup(s->key);
    c->bkey = join_key(s->ctl_key, node);
    int rc = nc_delete_node(cache, node, slurm_written, c);
    if (rc != 0) {
        free(c->set);
        free(c->bkey);
        free(c);
    } else {
        write_sent(st);
    }
    return rc; /* 1: the same delete is in flight or not read back yet */
}

static int drain(nss_state *st, nc_cache *cache, const nss_set *s, const char *node, const char *reason)
{
    sm_node_update u = {.set = SM_UPD_STATE | SM_UPD_REASON, .state = SM_REQ_DRAIN, .reason = reason};
    return slurm_update(st, cache, s, node, &u);
}

/* ------------------------------------------------------------------ */
/* pure helpers */

uint32_t nss_condition_bits(const sm_node *n)
{
    uint32_t b = 0;
    switch (n->base) {
    case SM_NODE_ALLOCATED:
        b |= PSC_ALLOCATED;
        break;
    case SM_NODE_DOWN:
        b |= PSC_DOWN;
        break;
    case SM_NODE_ERROR:
        b |= PSC_ERROR;
        break;
    case SM_NODE_FUTURE:
        b |= PSC_FUTURE;
        break;
    case SM_NODE_IDLE:
        b |= PSC_IDLE;
        break;
    case SM_NODE_MIXED:
        b |= PSC_MIXED;
        break;
    default:
        b |= PSC_UNKNOWN;
        break;
    }
    if (!n->flags_known)
        return b;
    static const struct {
        uint64_t flag;
        uint32_t bit;
    } fl[] = {
        {SM_NF(COMPLETING), PSC_COMPLETING},
        {SM_NF(DRAIN), PSC_DRAIN},
        {SM_NF(FAIL), PSC_FAIL},
        {SM_NF(INVALID), PSC_INVALID},
        {SM_NF(INVALID_REG), PSC_INVALID_REG},
        {SM_NF(MAINTENANCE), PSC_MAINTENANCE},
        {SM_NF(NOT_RESPONDING), PSC_NOT_RESPONDING},
        {SM_NF(UNDRAIN), PSC_UNDRAIN},
    };
    for (size_t i = 0; i < ARRAY_SIZE(fl); i++)
        if (n->flags & fl[i].flag)
            b |= fl[i].bit;
    return b;
}

char *nss_sanitize_reason(const char *s)
{
    buf_t b;
    buf_init(&b, 4096);
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t runes = 0;
    int rc = 0;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    while (*p && runes < 256) {
        unsigned char ch = *p;
        if (ch == '\t' || ch == '\n' || ch == '\r') {
            rc |= buf_putc(&b, ' ');
            p++;
            runes++;
            continue;
        }
        if (ch < 0x20 || ch == 0x7f) {
            p++;
            continue;
        }
        size_t len = ch < 0x80 ? 1 : (ch >> 5) == 6 ? 2 : (ch >> 4) == 14 ? 3 : (ch >> 3) == 30 ? 4 : 1;
        size_t k = 1;
        while (k < len && p[k] && (p[k] & 0xC0) == 0x80)
            k++;
        rc |= buf_append(&b, p, k);
        p += k;
        runes++;
    }
    (void)rc;
    char *out = b.data ? buf_detach(&b, NULL) : xstrdup("");
    size_t n = strlen(out);
    while (n && out[n - 1] == ' ')
        out[--n] = '\0';
    return out;
}

char *nss_pod_info(const char *ns, const char *pod, const char *node, const char *nodeset, const char *uid)
{
    cJSON *o = cJSON_CreateObject();
    json_set_str(o, "namespace", ns ? ns : "");
    json_set_str(o, "podName", pod ? pod : "");
    json_set_str(o, "node", node ? node : "");
    json_set_str(o, "nodeSetName", nodeset ? nodeset : "");
    json_set_str(o, "nodeSetUID", uid ? uid : "");
    char *s = json_dump(o);
    cJSON_Delete(o);
    return s;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Split a comma list into trimmed, non-empty, malloc'd items. */
static size_t split_csv(const char *s, char ***out)
{
    size_t n = 0, cap = 8;
    char **v = xcalloc(cap, sizeof(char *));
    const char *p = s ? s : "";
    while (*p) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        const char *a = p, *z = p + len;
        while (a < z && (*a == ' ' || *a == '\t'))
            a++;
        while (z > a && (z[-1] == ' ' || z[-1] == '\t'))
            z--;
        if (z > a) {
            if (n == cap) {
                cap *= 2;
                v = xrealloc(v, cap * sizeof(char *));
            }
            v[n++] = xstrndup(a, (size_t)(z - a));
        }
        p += len;
        if (*p == ',')
            p++;
    }
    *out = v;
    return n;
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Sort and de-duplicate in place; returns the new count. */
static size_t uniq(char **v, size_t n)
{
    qsort(v, n, sizeof(char *), cmp_str);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && strcmp(v[k - 1], v[i]) == 0) {
            free(v[i]);
            continue;
        }
        v[k++] = v[i];
    }
    return k;
}

static char *join_csv(char **v, size_t n)
{
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        rc |= buf_printf(&b, "%s%s", i ? "," : "", v[i]);
    (void)rc;
    return b.data ? buf_detach(&b, NULL) : xstrdup("");
}

char *nss_merge_features(const char *current, const char *spec)
{
    return nss_merge_features_base(current, NULL, spec);
}

char *nss_merge_features_base(const char *current, const char *base, const char *spec)
{
    char **cur, **want, **bv = NULL;
    size_t nc = split_csv(current, &cur), nw = split_csv(spec, &want), nb = base ? split_csv(base, &bv) : 0;
    /* The result: base (or the non-k8s/ part of current) plus k8s/<spec value>. */
    char **res = xcalloc(nc + nw + nb + 1, sizeof(char *));
    size_t nr = 0;
    if (base) {
        for (size_t i = 0; i < nb; i++)
            if (strncmp(bv[i], "k8s/", 4) != 0)
                res[nr++] = xstrdup(bv[i]);
        free_list(bv, nb);
    } else {
        for (size_t i = 0; i < nc; i++)
            if (strncmp(cur[i], "k8s/", 4) != 0)
                res[nr++] = xstrdup(cur[i]);
    }
    for (size_t i = 0; i < nw; i++)
        res[nr++] = xasprintf("k8s/%s", want[i]);
    nr = uniq(res, nr);
    nc = uniq(cur, nc);
    int same = nr == nc;
    for (size_t i = 0; same && i < nr; i++)
        same = strcmp(res[i], cur[i]) == 0;
    char *out = same ? NULL : join_csv(res, nr);
    free_list(cur, nc);
    free_list(want, nw);
    free_list(res, nr);
    return out;
}

/* ------------------------------------------------------------------ */
/* hooks */

static void *state_new(void)
{
    nss_state *st = xcalloc(1, sizeof(*st));
    map_init_type(&st->backoff, &bo_type);
    map_init_type(&st->unhealthy, &uh_type);
    st->ik_mode = istr_get(NSB_LABEL_SCALING_MODE);
    st->ix_slurm_name = -1; /* until nss_setup */
    return st;
}

static void free_all(nss_state *st)
{
    map_free(&st->backoff);
    map_free(&st->unhealthy);
}

static void state_destroy(nss_state *st)
{
    free_all(st);
    istr_put(st->ik_mode);
    free(st);
}

static void state_free(void *state)
{
    nss_state *st = state;
    if (st == NULL)
        return;
    /* The operator is going: a completion still to come must touch
     * nothing of it (nss_stop has normally said so already). */
    st->stopped = 1;
    if (st->inflight > 0) {
        st->released = 1; /* write_done finishes it */
        return;
    }
    state_destroy(st);
}

nss_state *nss_of(const operator *op)
{
    return op_state(op, OPR_NODESET_SLURM);
}

const op_reconciler RC_NODESET_SLURM = {
    .name = "nodeset-slurm",
    .slot = OPR_NODESET_SLURM,
    .new_state = state_new,
    .free_state = state_free,
    .free_late = 1, /* the last Slurm write in flight frees it */
};

static void on_scrape(void *data)
{
    nss_state *st = data;
    double by_reason[ARRAY_SIZE(kept_reasons)] = {0}, busy = 0, oldest = 0;
    uint64_t now = st->op ? uv_now(st->op->loop) : 0;
    size_t it = 0;
    for (const nss_set *set; !st->stopped && (set = st->q.next_part(st->q.ctx, &it));) {
        if (set->blocked && set->blocked_since && now > set->blocked_since &&
            (double)(now - set->blocked_since) / 1000.0 > oldest)
            oldest = (double)(now - set->blocked_since) / 1000.0;
        size_t i2 = 0;
        const char *k2;
        void *v2;
        while (map_next(&set->kept, &i2, &k2, &v2)) {
            const kept_ent *e = v2;
            if (e->reason == NULL) {
                busy++;
                continue;
            }
            for (size_t r = 0; r < ARRAY_SIZE(kept_reasons); r++)
                if (strcmp(e->reason, kept_reasons[r]) == 0)
                    by_reason[r]++;
        }
    }
    for (size_t r = 0; r < ARRAY_SIZE(kept_reasons); r++)
        mx_gauge_set(mx_gauge_get(st->mx_blocked, MX_LV(kept_reasons[r])), by_reason[r]);
    mx_gauge_set(st->mx_busy, busy);
    mx_gauge_set(st->mx_oldest, oldest);
}

static void setup_metrics(nss_state *st, mx_registry *r)
{
    st->mx_pending =
        mx_family_new(r, MX_GAUGE, "slurmop_nodeset_pending_nodes",
                      "Nodes that Slurm's pending jobs counted on a NodeSet that follows the queue "
                      "ask for",
                      "namespace,nodeset", NULL, 0, NULL);
    st->mx_cooled = mx_family_new(r, MX_GAUGE, "slurmop_nodeset_idle_cooled_nodes",
                                  "Slurm nodes of a NodeSet that follows the queue idle past its cool-down",
                                  "namespace,nodeset", NULL, 0, NULL);
    st->mx_scaled =
        mx_family_new(r, MX_COUNTER, "slurmop_nodeset_autoscale_total",
                      "Replicas writes of NodeSets that follow the queue, by direction (up, down)",
                      "namespace,nodeset,direction", NULL, 0, NULL);
    st->mx_blocked =
        mx_family_new(r, MX_GAUGE, "slurmop_drains_blocked",
                      "Condemned pods kept because their drain cannot go on, by the reason of the "
                      "NodeSet's DrainBlocked condition",
                      "reason", NULL, 0, NULL);
    st->mx_busy =
        mx_gauge_new(r, "slurmop_busy_pods_kept",
                     "Condemned pods kept while their Slurm node drains (jobs still run on it, or the "
                     "read that proves it free is on its way)",
                     NULL);
    st->mx_oldest =
        mx_gauge_new(r, "slurmop_drain_blocked_oldest_seconds",
                     "How long the longest-blocked NodeSet has kept condemned pods for a blocked drain "
                     "(0 when none is blocked)",
                     NULL);
    st->mx_precreated =
        mx_family_new(r, MX_COUNTER, "slurmop_slurm_node_precreates_total",
                      "Slurm node records a scale-out asked to make FUTURE before their slurmd register, by "
                      "result (created; exists: the name had a record, FUTURE or registered, that the node "
                      "table did not list; failed)",
                      "result", NULL, 0, NULL);
    st->mx_unmade =
        mx_counter_new(r, "slurmop_slurm_node_precreates_deleted_total",
                       "Slurm node records made first and deleted while still FUTURE, their pods gone before "
                       "their slurmd registered (a scale-in past them, or their NodeSet deleted)",
                       NULL);
    /* Served at 0 from the start, so that a rate over it has a base before the first scale-out. */
    static const char *const pc_results[] = {"created", "exists", "failed"};
    for (size_t i = 0; st->mx_precreated && i < 3; i++)
        mx_counter_get(st->mx_precreated, MX_LV(pc_results[i]));
    if (st->mx_blocked && st->mx_busy && st->mx_oldest)
        mx_registry_on_scrape(r, on_scrape, st);
}

void nss_setup(operator *op, const nss_queue *q)
{
    nss_state *st = nss_of(op);
    assert(q->now && q->after && q->pod && q->part && q->next_part);
    st->op = op;
    st->q = *q;
    st->ix_slurm_name = store_add_index(op_store(op, OPK_PODS), slurm_name_index, st);
    if (st->ix_slurm_name < 0)
        log_error("nodeset: cannot index pods by Slurm node name (%s); Slurm node changes will wait for the "
                  "periodic resync",
                  err_str(st->ix_slurm_name));
    slurmclient_on_node(op, on_slurm_node, st);
    slurmclient_on_resv(op, on_slurm_resv, st);
    if (op->metrics)
        setup_metrics(st, op->metrics);
    if (health_cfg(op)) {
        store_on_change(op_store(op, OPK_NODES), on_node_health, st);
        if (op->metrics) {
            static const double b[] = {0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300};
            mx_family *f =
                mx_family_new(op->metrics, MX_GAUGE, "slurmop_health_unhealthy_nodes",
                              "Kubernetes Nodes that --unhealthy-node-condition/--unhealthy-node-taint "
                              "call unhealthy",
                              NULL, NULL, 0, NULL);
            st->mx_unhealthy = f ? mx_gauge_get(f, NULL) : NULL;
            st->mx_out =
                mx_family_new(op->metrics, MX_GAUGE, "slurmop_health_drained_nodes",
                              "Slurm nodes of a NodeSet drained or being replaced for health (counted "
                              "against --unhealthy-max-share)",
                              "namespace,nodeset", NULL, 0, NULL);
            st->mx_waiting =
                mx_family_new(op->metrics, MX_GAUGE, "slurmop_health_waiting_nodes",
                              "Pods of a NodeSet on unhealthy Nodes that the --unhealthy-max-share cap "
                              "holds back",
                              "namespace,nodeset", NULL, 0, NULL);
            st->mx_replaced = mx_family_new(op->metrics, MX_COUNTER, "slurmop_health_replaced_pods_total",
                                            "Pods deleted for replacement because their Node was unhealthy",
                                            "namespace,nodeset", NULL, 0, NULL);
            f = mx_family_new(op->metrics, MX_HISTOGRAM, "slurmop_health_drain_seconds",
                              "From a Node seen unhealthy to a read showing its Slurm node drained",
                              NULL, b, sizeof(b) / sizeof(b[0]), NULL);
            st->mx_drain_s = f ? mx_histogram_get(f, NULL) : NULL;
        }
    }
}

int nss_start(operator *op)
{
    nss_of(op)->stopped = 0;
    return 0;
}

void nss_stop(operator *op)
{
    /* Writes still in flight complete later, through the state their
     * context points to (state_free leaves the state to the last of them); once
     * stopped they change nothing. */
    nss_state *st = nss_of(op);
    st->stopped = 1;
    free_all(st);
}

void nss_forget(operator *op, const char *key)
{
    nss_state *st = nss_of(op);
    nss_set *s = set_find(st, key);
    if (s && (s->health.count || s->health_waiting)) {
        const char *slash = strchr(key, '/');
        char ns[256];
        snprintf(ns, sizeof(ns), "%.*s", slash ? (int)(slash - key) : 0, key);
        map_free(&s->health);
        s->health_waiting = 0;
        health_gauges(st, s, ns, slash ? slash + 1 : key);
    }
    nss_set **slot = st->q.part(st->q.ctx, key, 0);
    if (slot) {
        nss_set_free(*slot);
        *slot = NULL;
    }
}


void nss_observe(operator *op, const sobj *nodeset)
{
    nss_set *s = set_of_json(nss_of(op), nodeset);
    if (s->synced) {
        /* the last pass decided: its condemnations are the victims (moved) */
        map_free(&s->victims);
        s->victims = s->condemned;
        s->victims_gen = s->cond_gen;
        map_init_type(&s->condemned, &map_type_free_val);
    }
    clear_condemned(s);
    clear_drains(s);
    if (s->blocked == NULL)
        s->blocked_since = 0; /* the last pass kept nothing for a blocked drain */
    map_free(&s->kept);
    s->blocked = NULL;
    s->synced = 0;
    s->held = 0;
    nc_cache *cache;
    if (slurmclient_get(op, s->ctl_key, &cache) == SC_READY)
        nc_want_jobs(cache);
}

int nss_delete_without_drain(const sobj *nodeset)
{
    /* The NodeSets store keeps the full JSON and no annotation pairs:
     * sobj_annotation() never sees this one there. */
    const char *v = sobj_annotation(nodeset, NSS_ANN_NO_DRAIN);
    if (v == NULL && nodeset->json)
        v = cJSON_GetStringValue(
            json_child(json_get(nodeset->json, "metadata.annotations"), NSS_ANN_NO_DRAIN));
    return v && strcmp(v, "true") == 0;
}

static void queue_drain(nss_set *s, const sobj *pod, const char *name)
{
    s->drain_nodes = xrealloc(s->drain_nodes, (s->n_drains + 1) * sizeof(char *));
    s->drain_pods = xrealloc(s->drain_pods, (s->n_drains + 1) * sizeof(char *));
    s->drain_nodes[s->n_drains] = xstrdup(name);
    s->drain_pods[s->n_drains] = xasprintf("%s/%s", pod->ns, pod->name);
    s->n_drains++;
}

/* Keep a condemned pod: cordon it, and say once per pass why. */
static kept_ent *kept_get(nss_set *s, const sobj *pod)
{
    kept_ent *e = map_get(&s->kept, pod->uid);
    if (e == NULL) {
        size_t n = strlen(pod->uid) + 1;
        e = xcalloc(1, sizeof(*e) + n);
        memcpy(e->uid, pod->uid, n);
        map_put(&s->kept, e->uid, e);
    }
    return e;
}

static int keep(nss_state *st, nss_set *s, const sobj *nodeset, const sobj *pod, const char *reason,
                const char *fmt, const char *arg)
{
    set_pod_meta(st, s->key, pod, 0, NSB_ANN_POD_CORDON, "true");
    kept_get(s, pod)->reason = reason;
    if (s->blocked_since == 0)
        s->blocked_since = now_ms(st);
    if (s->blocked == NULL) {
        s->blocked = reason;
        snprintf(s->blocked_msg, sizeof(s->blocked_msg), fmt, arg);
        op_warn(st->op, nodeset, NSB_KIND, reason, "Keeping pod %s (and any other condemned pod): %s",
                pod->name, s->blocked_msg);
    }
    return NSS_WAIT;
}

/* condemn's return while only a job read on its way is missing (no need to
 * cordon the pod for those milliseconds). Never returned by nss_condemn. */
#define JUDGE_WAIT_READ (-100)

/* What the node cache says of the pod's Slurm node, for nsv_judge: only the
 * facts that cost nothing (the two that cost a read are asked by it). */
static void node_facts(nss_set *s, nc_cache *cache, const sobj *pod, const char *name, nsv_facts *f)
{
    const sm_node *n = NULL;
    switch (nc_lookup(cache, name, &n)) {
    case NC_UNKNOWN:
        f->found = NSV_UNKNOWN;
        return;
    case NC_ABSENT:
        f->found = NSV_ABSENT;
        f->name_known = name_known(s, pod, name);
        f->lost = nc_vanished(cache, name, &f->lost_ago_ms);
        return;
    case NC_PRESENT:
        break;
    }
    f->found = NSV_PRESENT;
    f->settling = nc_settling(cache, name);
    f->contradicted = nc_contradicted(cache, name);
    f->drain = sm_node_drain(n);
    f->our_reason = our_reason(n->reason);
    f->drain_proved = nc_drain_proved(cache, name);
    f->drain_state = nc_drain_state(cache, name, &f->drain_ago_ms);
    f->drained = sm_node_drained(n);
    f->unknown_ago_ms = nc_unknown_ago(cache, name);
    f->fresh = nc_fresh(cache, name, NSV_PROOF_FRESH_MS);
}

/* A pod kept for a cause a person should see: cordoned, and the NodeSet's
 * DrainBlocked condition and Warning say why and what to do. */
static int keep_for(operator *op, nss_set *s, nc_cache *cache, const sobj *nodeset, const sobj *pod,
                    const char *name, nsv_cause cause)
{
    nss_state *st = nss_of(op);
    const char *reason = nsv_cause_reason(cause);
    char cause_txt[320], msg[700];
    assert(reason != NULL);
    switch (cause) {
    case NSV_CAUSE_NO_RESTAPI:
        return keep(st, s, nodeset, pod, reason,
                    "Controller %s has no RestApi, so Slurm cannot be asked whether its nodes run jobs; "
                    "condemned pods stay (cordoned). Next: create a RestApi whose spec.controllerRef names "
                    "the Controller, or, if no job may run on them, annotate the NodeSet " NSS_ANN_NO_DRAIN
                    "=true",
                    s->ctl_key);
    case NSV_CAUSE_SUSPECT: {
        const char *why = cache ? nc_suspect_why(cache) : NULL;
        return keep(st, s, nodeset, pod, reason,
                    "Slurm's answer cannot be trusted (%s); condemned pods stay while it is read again. "
                    "Next: nothing, a second read within seconds settles it",
                    why ? why : "a contradiction");
    }
    case NSV_CAUSE_UNREADABLE: {
        const char *next = slurmclient_why(op, s->ctl_key, cause_txt, sizeof(cause_txt));
        snprintf(msg, sizeof(msg),
                 "Slurm of Controller %s cannot be read: %s; condemned pods stay (cordoned). Next: %s",
                 s->ctl_key, cause_txt, next);
        return keep(st, s, nodeset, pod, reason, "%s", msg);
    }
    case NSV_CAUSE_NAME_UNPROVED:
        return keep(
            st, s, nodeset, pod, reason,
            "Slurm has no node %s, but that is only the name slurmop derives from the pod's Node: a "
            "hostNetwork pod's slurmd registers under its host's own hostname (in full, case kept), "
            "and no Slurm read has shown that node as this pod's (its pod info and NodeHostname). The "
            "pod may run jobs under another name; condemned pods stay (cordoned). Next: find the "
            "pod's node in 'scontrol show nodes' (NodeHostname); once it is listed it drains as usual, "
            "or, if no job runs there, annotate the NodeSet " NSS_ANN_NO_DRAIN "=true",
            name);
    case NSV_CAUSE_NODE_LOST:
        return keep(
            st, s, nodeset, pod, reason,
            "Slurm node %s ran jobs when last read and is now unknown to Slurm, though slurmop "
            "did not delete it (slurmctld restarted without its state?): slurmd may still run "
            "them; condemned pods stay (cordoned). Next: restore slurmctld's state or restart the "
            "pod's slurmd so the node registers again (it then drains as usual); if no job runs "
            "there, annotate the NodeSet " NSS_ANN_NO_DRAIN "=true",
            name);
    case NSV_CAUSE_CONTRADICTED:
        return keep(
            st, s, nodeset, pod, reason,
            "Slurm's last read of node %s shows a reason time from the future; every decision about it "
            "waits until a second read settles it. Next: nothing; if it stays, compare the clocks of "
            "slurmctld's host and the operator's",
            name);
    case NSV_CAUSE_JOBS_UNREADABLE:
        return keep(
            st, s, nodeset, pod, reason,
            "Slurm's job list of Controller %s cannot be read (the last job read failed, or named nodes "
            "that do not read as a hostlist), so no node can be shown free of jobs; condemned pods stay "
            "(cordoned). Next: read slurmrestd's log for the failed jobs request, and check that squeue "
            "answers in the slurmctld pod",
            s->ctl_key);
    default:
        return NSS_WAIT;
    }
}

/* The verdict on a condemned pod (nsv_judge, the rule's one home), and what
 * it asks for done: the drain queued (sent at the end of the pass with the
 * others, flush_drains), the node read by name while it drains, the
 * NodeSet queued again after a grace, the pod cordoned while it stays. */
static int condemn(operator *op, nss_set *s, const sobj *nodeset, const sobj *pod, const char *why)
{
    nss_state *st = nss_of(op);
    if (!map_get(&s->condemned, pod->uid)) {
        char *k = xstrdup(pod->uid);
        map_put(&s->condemned, k, k);
    }
    /* A hostNetwork pod registers under its Node's name, so before it is
     * bound to a Node it cannot have registered at all. */
    const char *name = slurm_name(st, pod);
    nc_cache *cache = NULL;
    nsv_facts f = {.no_drain = nss_delete_without_drain(nodeset), .named = *name != '\0'};
    if (!f.no_drain && f.named) {
        int avail = slurmclient_get(op, s->ctl_key, &cache);
        if (avail == SC_NO_RESTAPI)
            f.client = NSV_CLIENT_NO_RESTAPI;
        else if (avail == SC_READY && nc_suspect_why(cache))
            f.client = NSV_CLIENT_SUSPECT;
        else if (avail != SC_READY || !nc_ready(cache))
            f.client = NSV_CLIENT_UNREADY;
        else
            node_facts(s, cache, pod, name, &f);
    }
    nsv_verdict v = nsv_judge(&f);
    for (int asks = 0; v.step == NSV_ASK_GONE || v.step == NSV_ASK_JOBS; asks++) {
        assert(asks < 2 && cache != NULL);
        if (v.step == NSV_ASK_GONE) {
            f.gone = nc_confirm_gone(cache, name, NSV_PROOF_FRESH_MS);
            f.gone_asked = 1;
        } else {
            f.jobs_free = nc_jobs_free(cache, name, NSV_PROOF_FRESH_MS);
            f.job_holds = nc_job_holds(cache, name);
            f.jobs_failed = nc_jobs_failed(cache);
            f.jobs_asked = 1;
        }
        v = nsv_judge(&f);
    }
    if (v.acts & NSV_DRAIN)
        queue_drain(s, pod, name);
    if (v.acts & NSV_TRACK)
        nc_track(cache, name, TRACK_MS);
    /* Tracked by the hundred, the nodes of deleted pods would slow the reads
     * of the busy ones. */
    if (v.acts & NSV_UNTRACK)
        nc_untrack(cache, name);
    if (v.acts & NSV_READ_SOON)
        nc_read_soon(cache, name); /* its event brings us back */
    if (v.after_ms)
        enqueue_after(st, s->key, (uint32_t)v.after_ms);
    switch (v.step) {
    case NSV_DELETE:
        if (v.cause == NSV_CAUSE_NO_DRAIN)
            op_warn(op, nodeset, NSB_KIND, "DeletedWithoutDrain",
                    "Deleting pod %s (%s) without draining its Slurm node: the NodeSet has " NSS_ANN_NO_DRAIN
                    "=true",
                    pod->name, why);
        else if (v.cause == NSV_CAUSE_NEVER_BOUND)
            log_info("nodeset %s: pod %s was never bound to a Node; no Slurm node to drain", s->key,
                     pod->name);
        else if (v.cause == NSV_CAUSE_GONE)
            log_info("nodeset %s: Slurm says it has no node %s (read by name); pod %s can go", s->key, name,
                     pod->name);
        else
            log_info("nodeset %s: Slurm node %s is drained and holds no job; deleting pod %s (%s)", s->key,
                     name, pod->name, why);
        return NSS_DELETE;
    case NSV_WAIT_READ:
        return JUDGE_WAIT_READ; /* the read was asked for; its end brings us back */
    default:
        break;
    }
    if (f.found == NSV_ABSENT && f.gone_asked && !f.gone)
        log_debug("nodeset %s: Slurm node %s of pod %s is not in the table; asking Slurm for it by name",
                  s->key, name, pod->name);
    else if (f.jobs_asked && f.job_holds == 1)
        log_debug("nodeset %s: Slurm node %s of pod %s reads drained, but a job still holds it", s->key, name,
                  pod->name);
    /* A condemned pod that stays is cordoned, whatever keeps it: that
     * includes a node the table shows drained when that read cannot be
     * trusted yet (a reason not proven ours, a replayed answer). */
    if (v.cause != NSV_CAUSE_NONE)
        return keep_for(op, s, cache, nodeset, pod, name, v.cause);
    set_pod_meta(st, s->key, pod, 0, NSB_ANN_POD_CORDON, "true");
    return NSS_WAIT;
}

static deleting_ent *deleting_get(nss_set *s, const sobj *pod)
{
    deleting_ent *e = map_get(&s->deleting, pod->uid);
    if (e == NULL) {
        e = xcalloc(1, sizeof(*e));
        e->uid = xstrdup(pod->uid);
        map_put(&s->deleting, e->uid, e);
    }
    return e;
}

/* A drained idle victim waiting only for the job read sent after its drain:
 * the delete is most likely milliseconds away, and a status write now (the
 * node's IDLE+DRAIN conditions) would be one more PATCH per victim queued
 * ahead of the deletes. Its status writes wait DECIDING_MS; it is judged
 * again as soon as the read is in, and if that shows a job its writes
 * resume. */
static void mark_deciding(nss_set *s, const sobj *pod, uint64_t now)
{
    deleting_get(s, pod)->quiet_until = now + DECIDING_MS;
}

static void mark_deleting(nss_set *s, const sobj *pod, uint64_t now)
{
    deleting_ent *e = deleting_get(s, pod);
    e->until = now + DELETING_MS;
    if (s->deleting.count < s->deleting_sweep_at)
        return;
    /* A gone pod's mark is never looked up again: drop the stale ones now
     * and then (amortized: the next sweep waits for twice what is left). */
    size_t it = 0, n = 0;
    const char *k;
    void *v;
    deleting_ent **old = xcalloc(s->deleting.count + 1, sizeof(*old));
    while (map_next(&s->deleting, &it, &k, &v))
        if (((deleting_ent *)v)->until <= now && ((deleting_ent *)v)->quiet_until <= now)
            old[n++] = v;
    for (size_t i = 0; i < n; i++)
        map_drop(&s->deleting, old[i]->uid);
    free(old);
    s->deleting_sweep_at = 2 * s->deleting.count > 64 ? 2 * s->deleting.count : 64;
}

/* pod's mark, or NULL; a mark past both its times is dropped. */
static deleting_ent *mark_of(nss_set *s, const sobj *pod, uint64_t now)
{
    deleting_ent *e = s->deleting.count ? map_get(&s->deleting, pod->uid) : NULL;
    if (e && e->until <= now && e->quiet_until <= now) {
        map_drop(&s->deleting, pod->uid);
        return NULL;
    }
    return e;
}

/* 1 while pod's delete, decided here, may still be on its way. */
static int is_deleting(nss_set *s, const sobj *pod, uint64_t now)
{
    const deleting_ent *e = mark_of(s, pod, now);
    return e && e->until > now;
}

/* 1 while pod gets no status writes: its delete was decided, or its
 * verdict is due within milliseconds (mark_deciding). */
static int is_quiet(nss_set *s, const sobj *pod, uint64_t now)
{
    return mark_of(s, pod, now) != NULL;
}

int nss_condemn(operator *op, const sobj *nodeset, const cJSON *ctl, const sobj *pod, const char *why)
{
    (void)ctl;
    nss_set *s = set_of_json(nss_of(op), nodeset);
    kept_ent *e = s->kept.count ? map_get(&s->kept, pod->uid) : NULL;
    if (e)
        e->reason = NULL; /* this pass says again what keeps it */
    int v = condemn(op, s, nodeset, pod, why);
    if (v == NSS_DELETE) {
        mark_deleting(s, pod, now_ms(nss_of(op)));
        map_drop(&s->kept, pod->uid);
    } else if (v == JUDGE_WAIT_READ) {
        mark_deciding(s, pod, now_ms(nss_of(op)));
        kept_get(s, pod);
        v = NSS_WAIT;
    } else if (v == NSS_WAIT) {
        kept_get(s, pod); /* its reason, if any, set by keep() */
    }
    return v;
}

/* A hook for the NodeSet reconciler's incremental passes (nodeset.c); reads only. */
int nss_quiet(operator *op, const sobj *nodeset)
{
    const nss_set *s = set_find(nss_of(op), nodeset->key);
    nc_cache *cache;
    if (s == NULL || s->condemned.count || s->n_drains || s->blocked)
        return 0;
    return slurmclient_get(op, s->ctl_key, &cache) == SC_NO_RESTAPI;
}

const char *nss_blocked(operator *op, const sobj *nodeset, const char **message)
{
    const nss_set *s = set_find(nss_of(op), nodeset->key);
    if (message)
        *message = s && s->blocked ? s->blocked_msg : NULL;
    return s ? s->blocked : NULL;
}

/* Send the drains of this pass's condemnations: each with Slinky's reason
 * naming its pod, or, for a large scale-in, all with one reason so that the
 * batcher sends them as one hostlist request. */
static void flush_drains(nss_state *st, nss_set *s, nc_cache *cache, const sobj *nodeset)
{
    if (s->n_drains == 0)
        return;
    char reason[600];
    int shared = s->n_drains > BATCH_REASON_MIN;
    if (shared) {
        snprintf(reason, sizeof(reason),
                 NSS_REASON_PREFIX "Pods of NodeSet (%s/%s) are pending termination for scale-in",
                 nodeset->ns, nodeset->name);
        log_info("nodeset %s: draining %zu Slurm nodes for scale-in", s->key, s->n_drains);
    }
    for (size_t i = 0; cache && i < s->n_drains; i++) {
        if (!shared)
            snprintf(reason, sizeof(reason), NSS_REASON_PREFIX "Pod (%s) is pending termination for scale-in",
                     s->drain_pods[i]);
        /* Slurm keeps the reason time of a drain that repeats the current
         * reason, and that time is what proves the drain: say it anew. */
        const sm_node *cur = NULL;
        const char *r = reason;
        /* A node out for health keeps its health reason (sync_health). */
        const hl_ent *h = s->health.count ? map_get(&s->health, s->drain_nodes[i]) : NULL;
        if (h)
            r = h->reason;
        char again[640];
        if (nc_lookup(cache, s->drain_nodes[i], &cur) == NC_PRESENT && cur->reason &&
            strcmp(cur->reason, r) == 0) {
            snprintf(again, sizeof(again), "%s (drain repeated)", r);
            r = again;
        }
        int rc = drain(st, cache, s, s->drain_nodes[i], r);
        if (rc < 0 && rc != OP_EBUSY)
            log_warn("nodeset %s: cannot drain Slurm node %s: %s", s->key, s->drain_nodes[i],
                     err_str(rc));
    }
    clear_drains(s);
}

/* ---- node records made first (nodeset_precreate.h) ---- */

typedef struct pc_ctx {
    nss_state *st;
    char *set;
    char *conf; /* the pods' --conf, for the halves of a refused request */
    char **names;
    size_t n;
} pc_ctx;

static int precreate_send(nss_state *st, const nss_set *s, nc_cache *cache, const char *conf,
                          char *const *names, size_t n);

static void pc_free(pc_ctx *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->names[i]);
    free(c->names);
    free(c->conf);
    free(c->set);
    free(c);
}

/* slurmctld refuses a whole request when one of its names has a record (error 2168), and the node table does
 * not list a FUTURE one (a record this process made before a restart, or one made by hand): the request is
 * split in halves until each refusal names one record, so that one old record costs 2 log2(n) requests and
 * keeps no other record from being made. */
static void precreated(int status, void *data)
{
    pc_ctx *c = data;
    nss_state *st = c->st;
    nss_set *s = st->stopped ? NULL : set_find(st, c->set);
    nc_cache *cache = NULL;
    if (s && status == OP_EEXISTS && c->n > 1 && slurmclient_get(st->op, s->ctl_key, &cache) == SC_READY) {
        size_t h = c->n / 2;
        for (int half = 0; half < 2; half++) {
            char *const *names = half ? c->names + h : c->names;
            size_t k = half ? c->n - h : h;
            if (precreate_send(st, s, cache, c->conf, names, k) != 0)
                for (size_t i = 0; i < k; i++)
                    map_drop(&s->made, names[i]);
        }
        pc_free(c);
        write_done(st);
        return;
    }
    const char *result = status == 0 ? "created" : status == OP_EEXISTS ? "exists" : "failed";
    if (!st->stopped) {
        if (st->mx_precreated)
            mx_counter_add(mx_counter_get(st->mx_precreated, MX_LV(result)), (double)c->n);
        /* A record that exists stays in made: it was not listed, so it is FUTURE (or registered since), and a
         * scale-in past it deletes it as one made here. */
        for (size_t i = 0; s && status != 0 && status != OP_EEXISTS && i < c->n; i++)
            map_drop(&s->made, c->names[i]); /* not made: a later scale-out may ask again */
        if (status != 0 && status != OP_EEXISTS)
            log_info("nodeset %s: the %zu Slurm node record(s) asked for before their pods were not made "
                     "(%s): those nodes register as they start",
                     c->set, c->n, err_str(status));
        else if (status == OP_EEXISTS)
            log_debug("nodeset %s: Slurm node %s has a record already", c->set, c->names[0]);
    }
    pc_free(c);
    write_done(st);
}

/* One create request for names; 0 when sent (precreated runs later, once). */
static int precreate_send(nss_state *st, const nss_set *s, nc_cache *cache, const char *conf,
                          char *const *names, size_t n)
{
    char *line = nspr_line(conf, (const char *const *)names, n);
    if (line == NULL)
        return OP_EINVAL;
    pc_ctx *c = xcalloc(1, sizeof(*c));
    c->st = st;
    c->set = xstrdup(s->key);
    c->conf = xstrdup(conf);
    c->names = xcalloc(n, sizeof(char *));
    for (size_t j = 0; j < n; j++)
        c->names[j] = xstrdup(names[j]);
    c->n = n;
    int rc = nc_create_nodes(cache, line, precreated, c);
    free(line);
    if (rc != 0) {
        pc_free(c);
        return rc;
    }
    write_sent(st);
    return 0;
}

static int unmake_one(nss_state *st, nc_cache *cache, const nss_set *s, made_ent *e, const char *remake);

void nss_precreate(operator *op, const sobj *nodeset, const nsp_spec *sp, const char *const *names,
                   const int *ords, size_t n)
{
    nss_state *st = nss_of(op);
    if (n == 0 || sp->mode != NSB_STATEFULSET || sp->host_network || st->stopped)
        return;
    nss_set *s = set_get(st, nodeset, sp);
    nc_cache *cache;
    if (slurmclient_get(op, s->ctl_key, &cache) != SC_READY || !nc_ready(cache) ||
        !nc_can_create_nodes(cache))
        return;
    const char *ann = sobj_annotation(nodeset, NSPR_ANNOTATION);
    char err[256];
    char *conf = nsb_slurmd_conf(nodeset->json, err, sizeof(err));
    enum nspr_why why = nspr_check(conf, nspr_template_gpus(json_get(nodeset->json, "spec.template.spec")),
                                   ann && strcmp(ann, "false") == 0);
    if (conf == NULL || why != NSPR_OK) {
        log_debug("nodeset %s: no Slurm node records made before the pods: %s", s->key,
                  conf ? nspr_why_str(why) : err);
        free(conf);
        return;
    }
    uint64_t h = hash_str(conf);
    char **batch = xcalloc(n < NSPR_BATCH_MAX ? n : NSPR_BATCH_MAX, sizeof(*batch));
    int *bords = xcalloc(n < NSPR_BATCH_MAX ? n : NSPR_BATCH_MAX, sizeof(*bords));
    size_t k = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n) {
            /* A name in the table has registered; one asked for before exists or is on its way. */
            made_ent *e = map_get(&s->made, names[i]);
            enum nc_found f = nc_lookup(cache, names[i], NULL);
            if (e && f == NC_ABSENT && !e->deleting && e->conf_hash != h) {
                /* Made with another --conf (the pods' hardware changed before this one registered): its
                 * pod is about to be made, so none runs, and its slurmd would register into the old
                 * hardware. Deleted, then made again with this --conf. */
                log_info("nodeset %s: Slurm node %s's FUTURE record has an older --conf: deleting it to make "
                         "it anew",
                         s->key, names[i]);
                (void)unmake_one(st, cache, s, e, conf);
            }
            if (f != NC_ABSENT || e)
                continue;
            bords[k] = ords[i];
            batch[k++] = (char *)names[i];
        }
        if (k == 0 || (k < NSPR_BATCH_MAX && i < n))
            continue;
        if (precreate_send(st, s, cache, conf, batch, k) == 0) {
            for (size_t j = 0; j < k; j++) {
                char *pod = nsb_pod_name(nodeset->name, sp->ordinal_pad, bords[j]);
                made_ent *e = made_new(batch[j], pod, bords[j], h);
                map_put(&s->made, e->name, e);
                free(pod);
            }
        }
        k = 0;
    }
    free(bords);
    free(batch);
    free(conf);
}

/* ---- records made first that no slurmd took ---- */

typedef struct unmake_ctx {
    nss_state *st;
    char *set;
    char *remake; /* the --conf to make the record again with (NULL: deleted for good) */
} unmake_ctx;

static void unmade(const char *node, int status, void *data)
{
    unmake_ctx *c = data;
    nss_state *st = c->st;
    nss_set *s = st->stopped ? NULL : set_find(st, c->set);
    made_ent *e = s ? map_get(&s->made, node) : NULL;
    nc_cache *cache;
    if (e && (status == 0 || status == OP_ENOTFOUND) && c->remake &&
        slurmclient_get(st->op, s->ctl_key, &cache) == SC_READY) {
        made_ent *again = made_new(e->name, e->pod, e->ordinal, hash_str(c->remake));
        char *names[] = {again->name};
        map_drop(&s->made, node);
        if (precreate_send(st, s, cache, c->remake, names, 1) == 0)
            map_put(&s->made, again->name, again);
        else
            free(again); /* its slurmd registers as it would have */
    } else if (e && (status == 0 || status == OP_ENOTFOUND)) {
        /* ENOTFOUND: no record by that name (slurmctld lost it, or someone deleted it): nothing left */
        if (status == 0 && st->mx_unmade)
            mx_counter_inc(st->mx_unmade);
        map_drop(&s->made, node);
        enqueue(st, c->set); /* a NodeSet being deleted waits for this to drop its finalizer */
    } else if (e) {
        e->deleting = 0;
        if (status != OP_ECANCELED) {
            log_warn("nodeset %s: deleting the FUTURE record of Slurm node %s failed (%s); retrying in 5 s",
                     c->set, node, err_str(status));
            enqueue_after(st, c->set, 5000);
        }
    }
    free(c->remake);
    free(c->set);
    free(c);
    write_done(st);
}

/* Delete the record made first of e, whose pod is gone and whose slurmd never registered, and make it again
 * with the --conf remake when that is not NULL. 0 when sent. */
static int unmake_one(nss_state *st, nc_cache *cache, const nss_set *s, made_ent *e, const char *remake)
{
    unmake_ctx *c = xcalloc(1, sizeof(*c));
    c->st = st;
    c->set = xstrdup(s->key);
    c->remake = remake ? xstrdup(remake) : NULL;
    int rc = nc_delete_node(cache, e->name, unmade, c);
    if (rc != 0) {
        free(c->remake);
        free(c->set);
        free(c);
        return rc;
    }
    write_sent(st);
    e->deleting = 1;
    return 0;
}

/* The records made first that no slurmd took, once nothing will: the NodeSet no longer wants the ordinal
 * (all = 0: a scale-in past it; all = 1: the NodeSet is being deleted), no pod of that name exists, and a
 * fresh node table does not list the name. A FUTURE record holds no job and is not listed; a listed one has
 * registered and is an ordinary node, no longer ours to delete here. A slurmd needs its pod, so with the pod
 * gone none can register under the name while the delete is on its way; and one that did (a pod made by
 * someone else) is refused while it runs a job, and registers again by itself if its record goes
 * (the image's registration check). Returns how many are left to delete or in flight. */
static size_t unmake(nss_state *st, nss_set *s, nc_cache *cache, const sobj *nodeset, int replicas, int all)
{
    size_t it = 0, n = 0, left = 0, sent = 0;
    const char *key;
    void *v;
    char **drop = NULL;
    char first[128] = "";
    while (map_next(&s->made, &it, &key, &v)) {
        made_ent *e = v;
        enum nc_found f = nc_lookup(cache, e->name, NULL);
        if (f == NC_PRESENT && !e->deleting) {
            drop = xrealloc(drop, (n + 1) * sizeof(*drop));
            drop[n++] = xstrdup(e->name); /* registered: the node's own record now */
            continue;
        }
        if (!all && e->ordinal < replicas)
            continue;
        left++;
        if (e->deleting || f != NC_ABSENT || store_get(op_store(st->op, OPK_PODS), nodeset->ns, e->pod))
            continue;
        if (unmake_one(st, cache, s, e, NULL) == 0 && sent++ == 0)
            snprintf(first, sizeof(first), "%s", e->name);
    }
    for (size_t i = 0; i < n; i++) {
        map_drop(&s->made, drop[i]);
        free(drop[i]);
    }
    free(drop);
    if (sent)
        op_event(st->op, nodeset, NSB_KIND, "SlurmNodeRecordsDeleted", "Delete",
                 "Deleting the FUTURE record of %zu Slurm node(s) (%s%s) made before their pods: the pods "
                 "are gone and their slurmd never registered",
                 sent, first, sent > 1 ? ", ..." : "");
    return left;
}

int nss_unmake_all(operator *op, const sobj *nodeset)
{
    nss_state *st = nss_of(op);
    nss_set *s = set_find(st, nodeset->key);
    if (s == NULL || s->made.count == 0)
        return 1;
    nc_cache *cache;
    uint64_t now = now_ms(st);
    if (s->unmake_since == 0)
        s->unmake_since = now ? now : 1;
    /* The cleanup never holds a deletion for long: with no client (the Controller or its RestApi went
     * first, an uninstall), or past UNMAKE_MAX_MS (Slurm unreadable, deletes refused), the records stay,
     * as after a restart of this process. */
    if (slurmclient_get(op, s->ctl_key, &cache) != SC_READY || now - s->unmake_since > UNMAKE_MAX_MS) {
        const char *why = now - s->unmake_since > UNMAKE_MAX_MS ? "not deleted in time" : "no Slurm client";
        log_warn("nodeset %s: deleted; the FUTURE records of %zu Slurm node(s) it made first stay (%s)",
                 s->key, s->made.count, why);
        map_free(&s->made);
        return 1;
    }
    if (nc_ready(cache) && unmake(st, s, cache, nodeset, 0, 1) == 0)
        return 1;
    enqueue_after(st, s->key, 1000); /* the net under the deletes' own wake-ups */
    return 0;
}

/* ---- sync ---- */

/* Why a Node is cordoned, for the drain reason (without our prefix). */
static char *cordon_reason(const operator *op, const sobj *node, const sobj *pod)
{
    const char *ann = sobj_annotation(node, ANN_NODE_CORDON_REASON);
    if (ann && *ann) {
        char *r = nss_sanitize_reason(ann);
        if (*r)
            return r;
        free(r);
    }
    const char *prop = op->opts.propagated_node_conditions;
    if (prop && *prop && node->json) {
        char **types;
        size_t nt = split_csv(prop, &types);
        buf_t b;
        buf_init(&b, 8192);
        int rc = 0;
        const cJSON *c;
        cJSON_ArrayForEach(c, json_get(node->json, "status.conditions"))
        {
            if (strcmp(json_get_str_or(c, "status", ""), "True") != 0)
                continue;
            const char *type = json_get_str_or(c, "type", "");
            for (size_t i = 0; i < nt; i++) {
                if (strcmp(types[i], type) == 0) {
                    rc |= buf_printf(&b, "%s(%s: %s)", b.len ? " " : "", json_get_str_or(c, "reason", type),
                                     json_get_str_or(c, "message", ""));
                    break;
                }
            }
        }
        (void)rc;
        free_list(types, nt);
        if (b.len) {
            char *r = nss_sanitize_reason(buf_cstr(&b));
            buf_free(&b);
            return r;
        }
        buf_free(&b);
    }
    return xasprintf("Node (%s) was cordoned, Pod (%s/%s) must be cordoned", node->name, pod->ns, pod->name);
}

typedef struct sync_ctx {
    operator *op;
    nss_state *st; /* nss_of(op) */
    const sobj *nodeset;
    const cJSON *ns;
    const nsp_spec *sp; /* ns's fields */
    nss_set *s;
    nc_cache *cache;
    const nss_actions *act;
    const char *update_hash;
    int uncordon_ok; /* no scale-in under way */
    int rolling;     /* RollingUpdate strategy */
} sync_ctx;

static int health_holds(const nss_set *s, const sobj *pod, const char *name);

static void sync_cordon(sync_ctx *x, const nsb_pod *p, const sobj *pod, const char *name, const sm_node *n)
{
    const pod_proj *pp = pod_of(pod);
    if (!pp->node_name)
        return;
    const sobj *node = store_get(op_store(x->op, OPK_NODES), NULL, pp->node_name);
    if (!node)
        return; /* as Slinky: no Node, no cordon sync */
    if (nc_settling(x->cache, name))
        return;
    /* 1. Someone else's drain (or a node that stopped responding) is theirs. */
    if ((n->reason && n->reason[0] && !our_reason(n->reason)) ||
        (n->base == SM_NODE_DOWN && n->reason && strstr(n->reason, "Not responding")))
        return;
    int unschedulable = node->json && json_get_bool(node->json, "spec.unschedulable", 0);
    int condemned = map_get(&x->s->condemned, pod->uid) != NULL;
    char reason[1024];
    if (unschedulable) {
        /* 2. The Node is cordoned: so is the pod, and its Slurm node drains. */
        set_pod_meta(x->st, x->s->key, pod, 0, NSB_ANN_POD_CORDON, "true");
        if (!sm_node_drain(n)) {
            char *why = cordon_reason(x->op, node, pod);
            snprintf(reason, sizeof(reason), NSS_REASON_PREFIX "%s", why);
            free(why);
            if (drain(x->st, x->cache, x->s, name, reason) == 0)
                op_event(x->op, x->nodeset, NSB_KIND, "NodeCordon", "Drain",
                         "Node %s is cordoned: draining Slurm node %s of pod %s", node->name, name,
                         pod->name);
        }
        return;
    }
    /* 2b. Out for health (sync_health): that drain stays until the Node is
     *     healthy again or the pod is gone. */
    if (health_holds(x->s, pod, name))
        return;
    if (p->cordoned) {
        /* 3. A cordoned pod: keep it drained, unless it is a pod to keep
         *    (no scale-in under way, not condemned now, not an old pod of a
         *    rolling update), which Slinky uncordons. */
        int keep = x->uncordon_ok && !condemned && !p->terminating &&
                   (!x->rolling ||
                    (p->revision && nsb_revision_same(p->revision, x->update_hash, x->nodeset->name)));
        if (!keep) {
            if (!sm_node_drain(n)) {
                snprintf(reason, sizeof(reason), NSS_REASON_PREFIX "Pod (%s/%s) was cordoned", pod->ns,
                         pod->name);
                drain(x->st, x->cache, x->s, name, reason);
            }
            return;
        }
        set_pod_meta(x->st, x->s->key, pod, 0, NSB_ANN_POD_CORDON, NULL);
    } else if (condemned) {
        return; /* its cordon annotation is on its way */
    }
    /* 4. Not cordoned: undo our own drain, never anybody else's, and not
     *    on a node another pod shares: its drain may be the one that
     *    licenses that pod's delete (issue 39: the kept pod's sync undid the
     *    condemned one's drain). The undrain carries no reason: on a node
     *    that is also DOWN (the old pod's preStop, after our cordon drain)
     *    a reason would replace the preStop's and leave a DOWN that reads
     *    "was uncordoned" (seen on 24.11, and on 26.05 when our cache had
     *    not seen the DOWN yet), which sync_stale_down, looking for the
     *    preStop's reason, then never resumes. On a node that is not DOWN
     *    Slurm clears the reason with the drain, so a reason would only
     *    ever be seen in that wrong case. */
    if (sm_node_drain(n) && our_reason(n->reason) && !name_shared(x->st, x->s, pod, name)) {
        sm_node_update u = {.set = SM_UPD_STATE, .state = SM_REQ_UNDRAIN};
        if (slurm_update(x->st, x->cache, x->s, name, &u) == 0)
            log_info("nodeset %s: Slurm node %s undrained: pod %s/%s was uncordoned", x->s->key, name,
                     pod->ns, pod->name);
    }
}

static void sync_deadline(sync_ctx *x, const sobj *pod, const char *name)
{
    if (!nc_jobs_ready(x->cache))
        return;
    int64_t dl = nc_deadline(x->cache, name);
    char t[32];
    const char *want = NULL;
    if (dl > 0) {
        rfc3339_format(dl == SM_INFINITE ? DEADLINE_INFINITE : dl, t);
        want = t;
    }
    set_pod_meta(x->st, x->s->key, pod, 0, NSB_ANN_DEADLINE, want);
}

static void sync_topology(sync_ctx *x, const sobj *pod, const char *name, const sm_node *n, const sobj *node)
{
    const char *spec = node ? sobj_annotation(node, ANN_TOPOLOGY) : NULL;
    if (node)
        set_pod_meta(x->st, x->s->key, pod, 0, NSB_ANN_TOPOLOGY, spec && *spec ? spec : NULL);
    if (!n || !spec || !*spec || strcmp(n->topology ? n->topology : "", spec) == 0)
        return;
    if (!sm_version_has(nc_version(x->cache), SM_OP_UPDATE_TOPOLOGY))
        return; /* Slurm before 25.05 (data_parser v0.0.43) cannot set it */
    if (nc_settling(x->cache, name))
        return;
    sm_node_update u = {.set = SM_UPD_TOPOLOGY, .topology = spec};
    slurm_update(x->st, x->cache, x->s, name, &u);
}

/* The features of the NodeSet's update revision, computed once per
 * generation (NULL when its --conf cannot be built). */
static const char *revision_features(sync_ctx *x)
{
    int64_t gen = json_get_int(x->ns, "metadata.generation", 0);
    if (x->s->features == NULL || x->s->features_gen != gen) {
        free(x->s->features);
        x->s->features = nsb_slurmd_features(x->ns);
        x->s->features_gen = gen;
    }
    return x->s->features;
}

/* A dynamic node keeps the features of its first registration: a pod that
 * registers again under the same name with other --conf features changes
 * nothing in Slurm until the record is deleted (issue 32). So the features
 * of a pod of the update revision are set over Slurm's API to what its
 * --conf says (plus the k8s/ ones of its Node); an older pod's are left as
 * they are (it still runs the old --conf, and a rolling update replaces
 * it). The NodeSet owns them: features set by hand on such a node are
 * replaced too (as Slinky's records, deleted and made anew with every pod). */
static void sync_features(sync_ctx *x, const nsb_pod *p, const char *name, const sm_node *n,
                          const sobj *node)
{
    if (!node || nc_settling(x->cache, name))
        return;
    const char *spec = sobj_annotation(node, ANN_FEATURES);
    /* Only a dynamic node: a node of slurm.conf takes its features from
     * there again at every reconfigure. */
    int dynamic = n->flags_known && (n->flags & SM_NF(DYNAMIC_NORM));
    const char *base =
        dynamic && p->revision && nsb_revision_same(p->revision, x->update_hash, x->nodeset->name)
            ? revision_features(x)
            : NULL;
    char *avail = nss_merge_features_base(n->features, base, spec);
    char *active = nss_merge_features_base(n->active_features, base, spec);
    if (avail || active) {
        sm_node_update u = {.set = 0};
        if (avail) {
            u.set |= SM_UPD_FEATURES;
            u.features = avail;
        }
        if (active) {
            u.set |= SM_UPD_FEATURES_ACT;
            u.features_act = active;
        }
        slurm_update(x->st, x->cache, x->s, name, &u);
    }
    free(avail);
    free(active);
}

void nss_conf_resources(const char *conf, int *cpus, int64_t *mem_mb)
{
    *cpus = -1;
    *mem_mb = -1;
    for (const char *item = conf; item && *item;) {
        const char *end = strchr(item, NSB_CONF_SEP);
        size_t len = end ? (size_t)(end - item) : strlen(item);
        const char *eq = memchr(item, '=', len);
        if (eq) {
            size_t kl = (size_t)(eq - item);
            long long v = 0;
            const char *d = eq + 1;
            int ok = d < item + len;
            for (; d < item + len && ok; d++) {
                ok = *d >= '0' && *d <= '9' && v < 1000000000000LL;
                v = v * 10 + (*d - '0');
            }
            if (kl == 4 && strncasecmp(item, "CPUs", 4) == 0)
                *cpus = ok && v <= 1000000 ? (int)v : -1;
            else if (kl == 10 && strncasecmp(item, "RealMemory", 10) == 0)
                *mem_mb = ok ? (int64_t)v : -1;
        }
        item = end ? end + 1 : item + len;
    }
}

/* The update revision's CPUs and RealMemory, read once per generation. */
static void revision_resources(sync_ctx *x, int *cpus, int64_t *mem)
{
    int64_t gen = json_get_int(x->ns, "metadata.generation", 0);
    if (x->s->res_gen != gen) {
        char err[256];
        char *conf = nsb_slurmd_conf(x->ns, err, sizeof(err));
        nss_conf_resources(conf, &x->s->res_cpus, &x->s->res_mem);
        free(conf);
        x->s->res_gen = gen;
    }
    *cpus = x->s->res_cpus;
    *mem = x->s->res_mem;
}

#define RECORD_REASON NSS_REASON_PREFIX "node record out of date"

/* A dynamic node keeps the CPUs and RealMemory of its first registration:
 * a pod of a new revision that registers under the same name with another
 * --conf changes neither, and Slurm cannot update them (scontrol refuses;
 * they are not fields of a node update). Too much memory in the record
 * means jobs the pod cannot hold; too little, capacity lost. Only deleting
 * the record helps, and slurmd does not register again by itself, so the
 * pod restarts. Safely: the node is drained first (reason RECORD_REASON);
 * the record is deleted once a read after that drain shows no job holding
 * it and no job record of any state naming it (slurmctld keeps ended jobs
 * MinJobAge, and deleting a node they name crashes some versions); the
 * pod is deleted once a read shows the record gone (sync_record_gone), and
 * its replacement registers anew. Returns 1 when this owns the node's
 * drain (the cordon sync must leave it alone). */
static int sync_record(sync_ctx *x, const nsb_pod *p, const sobj *pod, const char *name, const sm_node *n)
{
    record_ent *e = x->s->records.count ? map_get(&x->s->records, pod->uid) : NULL;
    if (e && e->deleted_ms) {
        /* Our DELETE is sent: the node's drain stays ours until a read
         * shows the record gone (settling meanwhile, or still listed); a
         * record still there long after was not deleted (refused, lost),
         * and the node is judged again. */
        e->pass = x->s->sync_passes;
        if (nc_settling(x->cache, name) || now_ms(x->st) - e->deleted_ms < RECORD_DELETE_WAIT_MS)
            return 1;
        e->deleted_ms = 0;
    }
    int dynamic = n->flags_known && (n->flags & SM_NF(DYNAMIC_NORM));
    /* Only a record known to be this pod's: the drain, the record's
     * delete and the pod's delete all rest on that. */
    if (!dynamic || !p->revision || !nsb_revision_same(p->revision, x->update_hash, x->nodeset->name) ||
        !name_known(x->s, pod, name) || nc_settling(x->cache, name) || health_holds(x->s, pod, name)) {
        if (e)
            map_drop(&x->s->records, pod->uid);
        return 0;
    }
    int cpus;
    int64_t mem;
    revision_resources(x, &cpus, &mem);
    char what[192] = "";
    size_t w = 0;
    if (cpus > 0 && n->cpus > 0 && n->cpus != cpus)
        w += (size_t)snprintf(what, sizeof(what), "CPUs %d, --conf %d", n->cpus, cpus);
    if (mem > 0 && n->real_memory > 0 && n->real_memory != mem)
        snprintf(what + w, sizeof(what) - w, "%sRealMemory %" PRId64 ", --conf %" PRId64, w ? "; " : "",
                 n->real_memory, mem);
    if (!what[0]) {
        if (e)
            map_drop(&x->s->records, pod->uid);
        return 0;
    }
    /* Someone else's drain stays theirs; the record waits for it to go. */
    int ours = n->reason && strncmp(n->reason, RECORD_REASON, strlen(RECORD_REASON)) == 0;
    if (sm_node_drain(n) && n->reason && n->reason[0] && !ours && !our_reason(n->reason))
        return 0;
    if (e == NULL) {
        size_t l = strlen(pod->uid) + 1;
        e = xcalloc(1, sizeof(*e) + l);
        memcpy(e->uid, pod->uid, l);
        map_put(&x->s->records, e->uid, e);
    }
    e->pass = x->s->sync_passes;
    if (!sm_node_drain(n) || !ours) {
        char reason[256];
        snprintf(reason, sizeof(reason), RECORD_REASON " (%s)", what);
        if (drain(x->st, x->cache, x->s, name, reason) == 0)
            op_warn(
                x->op, x->nodeset, NSB_KIND, "SlurmRecordStale",
                "Slurm node %s of pod %s keeps the resources of its first registration (%s): draining it; "
                "its record is made anew, and the pod restarted, once no job holds or names it",
                name, pod->name, what);
        return 1;
    }
    if (!nc_drain_proved(x->cache, name) || nc_jobs_free(x->cache, name, 5000) != 1 ||
        nc_job_names(x->cache, name) != 0 || (n->alloc_known && (n->alloc_cpus > 0 || n->alloc_memory > 0)))
        return 1; /* a job holds it, or its record is still listed: wait (the job list is polled) */
    if (slurm_delete(x->st, x->cache, x->s, name) == 0) {
        uint64_t t = now_ms(x->st);
        e->deleted_ms = t ? t : 1;
        op_event(x->op, x->nodeset, NSB_KIND, "SlurmRecordDeleted", "Delete",
                 "Deleted the record of Slurm node %s (%s): no job holds or names it; pod %s restarts to "
                 "register it anew",
                 name, what, pod->name);
    }
    return 1;
}

/* The pod of a record sync_record deleted: once a read shows the record
 * gone (and not lost some other way: nc_vanished), the pod restarts. The
 * node was proved free before the delete, and no job lands on a node
 * Slurm does not have. Returns 1 when it was handled here. */
static int sync_record_gone(sync_ctx *x, const sobj *pod, const char *name)
{
    record_ent *e = x->s->records.count ? map_get(&x->s->records, pod->uid) : NULL;
    if (e == NULL || !e->deleted_ms)
        return 0;
    e->pass = x->s->sync_passes;
    if (x->act == NULL || nc_vanished(x->cache, name, NULL))
        return 1;
    map_drop(&x->s->records, pod->uid);
    x->act->delete_pod(x->act->ctx, pod,
                       "its Slurm node's out-of-date record was deleted: it registers anew");
    return 1;
}

/* DaemonSet mode, pruneSlurmNodeRecords: NodeNotFound. */
typedef struct prune_ctx {
    sync_ctx *x;
    const char *uid;
    char **victims;
    size_t n;
} prune_ctx;

static void prune_scan(const sm_node *n, void *data)
{
    prune_ctx *pc = data;
    sync_ctx *x = pc->x;
    if (n->base != SM_NODE_DOWN || !(n->flags & SM_NF(NOT_RESPONDING)) || !n->comment || !n->comment[0])
        return;
    cJSON *info = json_parse(n->comment, strlen(n->comment), NULL);
    if (!info)
        return;
    const char *ns = json_get_str_or(info, "namespace", "");
    const char *podname = json_get_str_or(info, "podName", "");
    const char *knode = json_get_str_or(info, "node", "");
    int mine = strcmp(ns, x->nodeset->ns) == 0 &&
               strcmp(json_get_str_or(info, "nodeSetName", ""), x->nodeset->name) == 0 &&
               strcmp(json_get_str_or(info, "nodeSetUID", ""), pc->uid) == 0;
    int gone = 0;
    if (mine && !store_get(op_store(x->op, OPK_PODS), ns, podname)) {
        const sobj *node = *knode ? store_get(op_store(x->op, OPK_NODES), NULL, knode) : NULL;
        if (!node) {
            gone = 1;
        } else {
            /* The name a pod of this NodeSet on that Node would register
             * under, by the same arithmetic as nss_pod_slurm_name. */
            char *host = nsb_daemonset_hostname(node->name, sobj_annotation(node, ANN_HOSTNAME_OVERRIDE));
            int hn = x->sp->host_network;
            gone = strcmp(nsb_slurm_node_name(NSB_DAEMONSET, hn, node->name, host, NULL), n->name) != 0;
            free(host);
        }
    }
    cJSON_Delete(info);
    if (gone) {
        pc->victims = xrealloc(pc->victims, (pc->n + 1) * sizeof(char *));
        pc->victims[pc->n++] = xstrdup(n->name);
    }
}

static void sync_prune(sync_ctx *x)
{
    prune_ctx pc = {.x = x, .uid = x->nodeset->uid};
    nc_foreach(x->cache, prune_scan, &pc);
    for (size_t i = 0; i < pc.n; i++) {
        if (slurm_delete(x->st, x->cache, x->s, pc.victims[i]) == 0)
            op_event(x->op, x->nodeset, NSB_KIND, "DefunctSlurmNodePruned", "Prune",
                     "Deleted the record of Slurm node %s: its pod and Kubernetes node are gone",
                     pc.victims[i]);
        free(pc.victims[i]);
    }
    free(pc.victims);
}

/* ---- ScheduledUpdate ---- */

typedef struct resv_ctx {
    nss_state *st;
    char *set;
} resv_ctx;

static void resv_done(int status, void *data)
{
    resv_ctx *c = data;
    nss_state *st = c->st;
    nss_set *s = st->stopped ? NULL : set_find(st, c->set);
    if (s) {
        s->resv_writing = 0;
        nc_cache *cache;
        if (slurmclient_get(st->op, s->ctl_key, &cache) == SC_READY) {
            s->resv_mark = nc_resv_mark(cache);
            s->resv_marked = 1;
        }
    }
    /* Once stopped, nothing is queued: the NodeSet reconciler's queue is
     * gone, and its state may be too. */
    if (status < 0 && status != OP_ECANCELED && !st->stopped)
        enqueue_after(st, c->set, 5000);
    else if (status == 0 && !st->stopped)
        enqueue(st, c->set);
    free(c->set);
    free(c);
    write_done(st);
}

/* Whether the reservations read reflect this NodeSet's last write. */
static int resv_settled(nss_set *s, nc_cache *cache)
{
    return !s->resv_writing && (!s->resv_marked || nc_resv_read_since(cache, s->resv_mark));
}

static int resv_write(nss_state *st, nc_cache *cache, nss_set *s, enum nc_resv_op op, const sm_resv_desc *d)
{
    resv_ctx *c = xcalloc(1, sizeof(*c));
    c->st = st;
    c->set = xstrdup(s->key);
    int rc = nc_resv_write(cache, op, d, resv_done, c);
    if (rc < 0) {
        free(c->set);
        free(c);
        return rc;
    }
    write_sent(st); /* resv_done runs later, once */
    s->resv_writing = 1;
    return rc;
}

int nss_has_finalizer(const cJSON *obj, const char *name)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, json_get(obj, "metadata.finalizers"))
    {
        if (cJSON_IsString(f) && strcmp(f->valuestring, name) == 0)
            return 1;
    }
    return 0;
}

static int has_finalizer(const cJSON *obj)
{
    return nss_has_finalizer(obj, NSS_RESV_FINALIZER);
}

/* Add or remove a finalizer (a merge patch of the whole list, guarded by
 * the resourceVersion so a concurrent change is not lost: a 409 retries). */
void nss_set_finalizer(operator *op, const sobj *nodeset, const char *name, int want)
{
    if (nss_has_finalizer(nodeset->json, name) == want)
        return;
    char what[128];
    snprintf(what, sizeof(what), "finalizer %s", name);
    nsw_ticket *e = nsw_take(op, nodeset->uid, what, (uint64_t)want + 1);
    if (!e)
        return;
    cJSON *list = cJSON_CreateArray();
    const cJSON *f;
    cJSON_ArrayForEach(f, json_get(nodeset->json, "metadata.finalizers"))
    {
        if (cJSON_IsString(f) && strcmp(f->valuestring, name) != 0)
            cJSON_AddItemToArray(list, cJSON_CreateString(f->valuestring));
    }
    if (want)
        cJSON_AddItemToArray(list, cJSON_CreateString(name));
    cJSON *patch = cJSON_CreateObject();
    cJSON *meta = json_obj_ensure(patch, "metadata");
    json_set(meta, "finalizers", list);
    json_set_str(meta, "resourceVersion", nodeset->rv);
    nsw_patch_nodeset(op, e, nodeset, NULL, patch);
}

static void set_finalizer(operator *op, const sobj *nodeset, int want)
{
    nss_set_finalizer(op, nodeset, NSS_RESV_FINALIZER, want);
}

/* Set the NodeSet condition ReservationCreated (status "True"/"False"). */
static void set_resv_condition(nss_state *st, const sobj *nodeset, const char *status, const char *reason,
                               int64_t start)
{
    const cJSON *conds = json_get(nodeset->json, "status.conditions");
    const cJSON *c;
    char t[32];
    rfc3339_format(start, t);
    cJSON_ArrayForEach(c, conds)
    {
        if (strcmp(json_get_str_or(c, "type", ""), "ReservationCreated") == 0 &&
            strcmp(json_get_str_or(c, "status", ""), status) == 0 &&
            strcmp(json_get_str_or(c, "lastTransitionTime", ""), t) == 0)
            return;
    }
    nsw_ticket *e = nsw_take(st->op, nodeset->uid, "ReservationCreated", hash_str(status) ^ (uint64_t)start);
    if (!e)
        return;
    cJSON *list = cJSON_CreateArray();
    cJSON_ArrayForEach(c, conds)
    {
        if (strcmp(json_get_str_or(c, "type", ""), "ReservationCreated") != 0)
            cJSON_AddItemToArray(list, cJSON_Duplicate(c, 1));
    }
    cJSON *mine = cJSON_CreateObject();
    json_set_str(mine, "type", "ReservationCreated");
    json_set_str(mine, "status", status);
    json_set_str(mine, "reason", reason);
    json_set_str(mine, "message", "");
    json_set_str(mine, "lastTransitionTime", t);
    json_set_int(mine, "observedGeneration", nodeset->generation);
    cJSON_AddItemToArray(list, mine);
    cJSON *patch = cJSON_CreateObject();
    json_set(json_obj_ensure(patch, "status"), "conditions", list);
    nsw_patch_nodeset(st->op, e, nodeset, "status", patch);
}

static int resv_created_for(const sobj *nodeset, int64_t start)
{
    char t[32];
    rfc3339_format(start, t);
    const cJSON *c;
    cJSON_ArrayForEach(c, json_get(nodeset->json, "status.conditions"))
    {
        if (strcmp(json_get_str_or(c, "type", ""), "ReservationCreated") == 0 &&
            strcmp(json_get_str_or(c, "status", ""), "True") == 0 &&
            strcmp(json_get_str_or(c, "lastTransitionTime", ""), t) == 0)
            return 1;
    }
    return 0;
}

static int in_names(const hostlist_names *hn, const char *name)
{
    for (size_t i = 0; name && i < hn->n; i++)
        if (strcmp(hn->names[i], name) == 0)
            return 1;
    return 0;
}

/* Old pods whose node is in maintenance under our reservation go. Run
 * before the per-pod pass, so that a pod condemned here is not undrained
 * there as a pod to keep (the two would take turns forever). */
static void condemn_in_maintenance(sync_ctx *x, const nsb_pod *pods, size_t n)
{
    char resv_name[300];
    snprintf(resv_name, sizeof(resv_name), NSS_RESV_PREFIX "%s", x->nodeset->name);
    const sm_resv *r = NULL;
    if (x->sp->strategy != NSP_SCHEDULED_UPDATE)
        return;
    enum nc_found found = nc_reservation(x->cache, resv_name, &r);
    if (!resv_settled(x->s, x->cache))
        return;
    /* A node names its reservation only from REST v0.0.39 on (Slurm 22.05's
     * v0.0.38 leaves it empty): there, a node in MAINTENANCE that our active
     * reservation lists is under it. */
    if (found == NC_PRESENT && x->act && x->act->condemn) {
        hostlist_names listed = {0};
        if (r->start_time <= (int64_t)time(NULL) && hostlist_expand(r->node_list, 0, &listed) != 0)
            hostlist_names_free(&listed);
        for (size_t i = 0; i < n; i++) {
            const nsb_pod *p = &pods[i];
            if (p->terminating || map_get(&x->s->condemned, pod_sobj(p)->uid) ||
                (p->revision && nsb_revision_same(p->revision, x->update_hash, x->nodeset->name)))
                continue;
            const sm_node *sn = NULL;
            if (nc_lookup(x->cache, slurm_name(x->st, pod_sobj(p)), &sn) != NC_PRESENT)
                continue;
            if (!(sn->flags & SM_NF(MAINTENANCE)))
                continue;
            int ours = sn->reservation && *sn->reservation
                           ? strcmp(sn->reservation, resv_name) == 0
                           : in_names(&listed, slurm_name(x->st, pod_sobj(p)));
            if (ours)
                x->act->condemn(x->act->ctx, pod_sobj(p),
                                "scheduled update (maintenance reservation active)");
        }
        hostlist_names_free(&listed);
    }
}

static void sync_reservation(sync_ctx *x, const nsb_pod *pods, size_t n, const nsb_slurm_counts *counts)
{
    char resv_name[300];
    snprintf(resv_name, sizeof(resv_name), NSS_RESV_PREFIX "%s", x->nodeset->name);
    int scheduled = x->sp->strategy == NSP_SCHEDULED_UPDATE;
    nc_want_reservations(x->cache);
    const sm_resv *r = NULL;
    enum nc_found found = nc_reservation(x->cache, resv_name, &r);
    if (found == NC_UNKNOWN || !resv_settled(x->s, x->cache))
        return;
    int replicas = x->sp->mode == NSB_DAEMONSET ? (int)n : x->sp->replicas;
    if (scheduled && found == NC_ABSENT && !nc_resv_writable(x->cache)) {
        /* Nothing can create the maintenance reservation here (e.g. Slurm
         * 24.11's REST v0.0.42 without the libslurm backend): say so, and
         * add no finalizer for a reservation that will never exist. */
        int64_t st = x->sp->sched.start_secs;
        if (nc_version(x->cache) != 0 && st > 0) {
            set_resv_condition(x->st, x->nodeset, "False", "NotSupported", st);
            op_warn(x->op, x->nodeset, NSB_KIND, "ReservationNotSupported",
                    "Cannot create Slurm reservation %s: this Slurm's REST API (data parser v0.0.%d) has no "
                    "reservation writes and no libslurm backend can reach it",
                    resv_name, nc_version(x->cache));
        }
        return;
    }
    sm_resv_desc del = {.name = resv_name};
    if (!scheduled || replicas == 0) {
        if (found == NC_PRESENT && resv_write(x->st, x->cache, x->s, NC_RESV_DELETE, &del) == 0)
            log_info("nodeset %s: deleting reservation %s (%s)", x->s->key, resv_name,
                     scheduled ? "no replicas" : "the update strategy changed");
        if (found == NC_ABSENT && !scheduled)
            set_finalizer(x->op, x->nodeset, 0);
        return;
    }
    int64_t start = x->sp->sched.start_secs;
    int64_t dur_ns = 0;
    if (clc_parse_duration(x->sp->sched.duration, &dur_ns) != 0 || start <= 0)
        return; /* the webhook refuses such a NodeSet */
    uint64_t flags = SM_RF(MAINT) | SM_RF(IGNORE_JOBS);
    const cJSON *f;
    cJSON_ArrayForEach(f, x->sp->sched.flags)
    {
        if (!cJSON_IsString(f))
            continue;
        int bit = sm_resv_flag_bit(f->valuestring);
        if (bit >= 0 && bit != SM_RFB_OTHER)
            flags |= UINT64_C(1) << bit;
    }
    /* The node list: this NodeSet's registered Slurm nodes. */
    const char **names = xcalloc(n + 1, sizeof(char *));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = slurm_name(x->st, pod_sobj(&pods[i]));
        if (nc_lookup(x->cache, name, NULL) == NC_PRESENT)
            names[k++] = name;
    }
    char *nodes = hostlist_compress(names, k);
    free(names);
    int64_t now = (int64_t)time(NULL);
    sm_resv_desc d = {.name = resv_name,
                      .start_time = start,
                      .duration = dur_ns / 60000000000LL,
                      .flags = flags,
                      .users = "slurm",
                      .node_list = nodes};
    if (found == NC_ABSENT) {
        int force = (flags & SM_RF(FORCE_START)) != 0;
        if (k > 0 && counts->idle + counts->allocated > 0 && (start > now || force) &&
            !resv_created_for(x->nodeset, start)) {
            /* The finalizer first, so the reservation can never outlive the
             * NodeSet; its update event brings us back here. */
            if (!has_finalizer(x->nodeset->json)) {
                set_finalizer(x->op, x->nodeset, 1);
                free(nodes);
                return;
            }
            if (resv_write(x->st, x->cache, x->s, NC_RESV_CREATE, &d) == 0) {
                op_event(x->op, x->nodeset, NSB_KIND, "Scheduled Update", "Reserve",
                         "Creating Slurm reservation %s for %s (%lld min) on %s", resv_name,
                         x->sp->sched.start,
                         (long long)d.duration, nodes ? nodes : "");
                set_resv_condition(x->st, x->nodeset, "True", "Created", start);
            }
        }
    } else if (found == NC_PRESENT && nodes && *nodes) {
        int active = now >= r->start_time;
        int nodes_differ = strcmp(r->node_list ? r->node_list : "", nodes) != 0;
        uint64_t rflags = r->flags & ~(SM_RF(SPEC_NODES) | SM_RF(OTHER));
        int other_differ = r->start_time != start || sm_resv_duration(r) != d.duration ||
                           (rflags & ~SM_RF(FORCE_START)) != (flags & ~SM_RF(FORCE_START));
        if (active && nodes_differ) {
            sm_resv_desc only = {.name = resv_name, .node_list = nodes};
            resv_write(x->st, x->cache, x->s, NC_RESV_UPDATE, &only);
        } else if (!active && (nodes_differ || other_differ)) {
            resv_write(x->st, x->cache, x->s, NC_RESV_UPDATE, &d);
        }
    }
    free(nodes);
}

/* How long a NodeSet being deleted waits for its partition's job records
 * (MinJobAge, 300 s by default, then slurmctld's purge every 60 s) before
 * it goes anyway, with a Warning: every wait is bounded. */
#define JOBREC_MAX_MS (60u * 60u * 1000u)
#define JOBREC_RETRY_MS 1000u

int nss_jobrec_clear(operator *op, const sobj *nodeset, const cJSON *ns, const nsp_spec *sp)
{
    nss_state *st = nss_of(op);
    if (nss_delete_without_drain(nodeset) || !sp->partition)
        return 1; /* opted out, or no partition of ours in slurm.conf */
    nss_set *s = set_get(st, nodeset, sp);
    char pb[256];
    const char *part = clc_nodeset_name(ns, pb, sizeof(pb));
    /* The whole cluster going (its Controller deleted, or gone): no
     * slurmctld is reconfigured without the partition; an uninstall does
     * not wait for MinJobAge. */
    const sobj *ctl = store_get_key(op_store(op, OPK_CONTROLLERS), s->ctl_key);
    if (ctl == NULL || ctl->deleting)
        return 1;
    nc_cache *cache = NULL;
    int avail = slurmclient_get(op, s->ctl_key, &cache);
    if (avail == SC_NO_RESTAPI)
        return 1; /* nothing to ask; without a RestApi no drain could have been proved either */
    uint64_t now = now_ms(st);
    if (!s->jobrec_since)
        s->jobrec_since = now;
    int named = -1;
    if (avail == SC_READY) {
        nc_want_jobs(cache);
        named = nc_job_in_partition(cache, part);
    }
    if (named == 0) {
        if (s->jobrec_warned)
            op_event(op, nodeset, NSB_KIND, "JobRecordsPurged", "Finalize",
                     "Slurm keeps no job record of partition %s any more: the NodeSet leaves slurm.conf",
                     part);
        s->jobrec_since = 0;
        return 1;
    }
    if (now - s->jobrec_since >= JOBREC_MAX_MS) {
        op_warn(
            op, nodeset, NSB_KIND, "JobRecordsWaitExpired",
            "Waited %u minutes for Slurm to purge the job records of partition %s (or to be readable); the "
            "NodeSet leaves slurm.conf now",
            JOBREC_MAX_MS / 60000u, part);
        s->jobrec_since = 0;
        return 1;
    }
    if (!s->jobrec_warned) {
        s->jobrec_warned = 1;
        op_warn(
            op, nodeset, NSB_KIND, "WaitingForJobRecords",
            named > 0
                ? "Every pod is gone, but Slurm still keeps records of jobs in partition %s (MinJobAge): "
                  "the NodeSet stays in slurm.conf until they are purged (slurmctld fails to load job "
                  "state that names a partition slurm.conf no longer has)"
                : "Every pod is gone, but Slurm's job list cannot be read, so it is not known whether job "
                  "records of partition %s remain; the NodeSet stays in slurm.conf until it can be read",
            part);
    }
    enqueue_after(st, s->key, JOBREC_RETRY_MS);
    return 0;
}

int nss_finalize(operator *op, const sobj *nodeset, const nsp_spec *sp)
{
    if (!nodeset->deleting || !nodeset->json || !has_finalizer(nodeset->json))
        return 0;
    nss_set *s = set_get(nss_of(op), nodeset, sp);
    if (!store_get(op_store(op, OPK_CONTROLLERS), sp->ctl_ns ? sp->ctl_ns : nodeset->ns, sp->ctl_name)) {
        set_finalizer(op, nodeset, 0);
        return 1;
    }
    nc_cache *cache;
    int avail = slurmclient_get(op, s->ctl_key, &cache);
    if (avail == SC_NO_RESTAPI) {
        set_finalizer(op, nodeset, 0);
        return 1;
    }
    if (avail != SC_READY)
        return 1;
    char resv_name[300];
    snprintf(resv_name, sizeof(resv_name), NSS_RESV_PREFIX "%s", nodeset->name);
    nc_want_reservations(cache);
    switch (nc_reservation(cache, resv_name, NULL)) {
    case NC_ABSENT:
        if (resv_settled(s, cache))
            set_finalizer(op, nodeset, 0);
        break;
    case NC_PRESENT: {
        sm_resv_desc d = {.name = resv_name};
        if (!resv_settled(s, cache))
            break; /* a write is on its way; its completion queues us */
        if (resv_write(nss_of(op), cache, s, NC_RESV_DELETE, &d) == OP_ENOTSUP) {
            log_warn("nodeset %s: cannot delete reservation %s with this Slurm; dropping the finalizer",
                     s->key, resv_name);
            set_finalizer(op, nodeset, 0);
        }
        break;
    }
    case NC_UNKNOWN:
        enqueue_after(nss_of(op), s->key, 5000);
        break;
    }
    return 1;
}

/* ---- registration drift ---- */

static void drift_clear(nss_set *s, const char *uid)
{
    map_drop(&s->drift_since, uid);
}

/* A Ready pod whose Slurm node no table lists (slurmd lost its
 * registration, or never made it): replace it, so that it registers again.
 * Only when every table for DRIFT_GRACE_MS lacked the node, Slurm answered a
 * fresh read of that name with "no such node" (so no job can run there),
 * and at most DRIFT_MAX_PER_WINDOW per NodeSet per window. */
static void sync_drift(sync_ctx *x, const sobj *pod)
{
    nss_set *s = x->s;
    uint64_t now = now_ms(x->st);
    uint64_t grace_ms = DRIFT_GRACE_MS(x->op);
    drift_ent *d = map_get(&s->drift_since, pod->uid);
    if (d == NULL) {
        d = xcalloc(1, sizeof(*d));
        d->uid = xstrdup(pod->uid);
        d->since = now;
        map_put(&s->drift_since, d->uid, d);
    }
    /* Ready for the grace period, and missing from every read for as long
     * (a pass comes back when both have passed: nothing else would). */
    int64_t ready_for_ms = ((int64_t)time(NULL) - pod_of(pod)->ready_since) * 1000;
    uint64_t wait = 0;
    if (ready_for_ms < (int64_t)grace_ms)
        wait = grace_ms - (uint64_t)ready_for_ms;
    if (now - d->since < grace_ms && grace_ms - (now - d->since) > wait)
        wait = grace_ms - (now - d->since);
    if (wait) {
        enqueue_after(x->st, s->key, (uint32_t)(wait + 500u));
        return;
    }
    const char *name = slurm_name(x->st, pod);
    if (!nc_confirm_gone(x->cache, name, PROOF_FRESH_MS))
        return; /* asked by name; the answer queues us */
    if (!name_gone(s, x->cache, pod, name)) {
        /* The name may not be the one its slurmd took (hostNetwork): its
         * node may be listed under another and run jobs. */
        if (!d->unproved_warned) {
            d->unproved_warned = 1;
            op_warn(x->op, x->nodeset, NSB_KIND, "SlurmNameUnproved",
                    "Pod %s is Ready but Slurm has no node %s, the name slurmop derives from its Node; its "
                    "slurmd "
                    "registers under its host's own hostname, which may differ (case, dots): keeping the pod",
                    pod->name, name);
        }
        return;
    }
    /* A node Slurm lost while it ran jobs (nc_vanished) may still run them
     * under slurmd: "no such node" proves nothing for it, here as in a
     * scale-in. The pod stays until the node registers again. */
    if (nc_vanished(x->cache, name, NULL) == 2) {
        if (!d->lost_warned) {
            d->lost_warned = 1;
            op_warn(
                x->op, x->nodeset, NSB_KIND, "SlurmNodeLost",
                "Pod %s is Ready but Slurm no longer knows its node %s, which ran jobs when last read "
                "(slurmctld restarted without its state?); keeping the pod until the node registers again",
                pod->name, name);
        }
        return;
    }
    if (now - s->drift_window_ms >= DRIFT_WINDOW_MS) {
        s->drift_window_ms = now;
        s->drift_used = 0;
    }
    if (s->drift_used >= DRIFT_MAX_PER_WINDOW) {
        enqueue_after(x->st, s->key, (uint32_t)(DRIFT_WINDOW_MS - (now - s->drift_window_ms)) + 100u);
        return;
    }
    if (!x->act || !x->act->delete_pod)
        return;
    s->drift_used++;
    op_warn(x->op, x->nodeset, NSB_KIND, "SlurmNodeNotRegistered",
            "Pod %s has been Ready for over %lld s but Slurm has no node %s (confirmed by name); deleting it "
            "so that "
            "it registers again (at most %d per NodeSet per %u s)",
            pod->name, (long long)DRIFT_GRACE_S(x->op), name, DRIFT_MAX_PER_WINDOW, DRIFT_WINDOW_MS / 1000u);
    x->act->delete_pod(x->act->ctx, pod, "its Slurm node is not registered");
    drift_clear(s, pod->uid);
}

/* ---- health (nodehealth.h, docs/internals/NODE-HEALTH.md) ----
 *
 * A pod on a Node that --unhealthy-node-* calls unhealthy is taken out for
 * health, at most nh_cap() of the NodeSet at once: its Slurm node is
 * drained with the condition as the reason, and once a fresh read proves it
 * drained with no job holding it (nss_condemn, the one rule), the pod is
 * deleted; its replacement is kept off unhealthy Nodes (nss_health_avoid,
 * nss_health_keep_off). A Node healthy again before that gets its node
 * undrained by the cordon sync (rule 4) once the entry is gone. A node a
 * person drained is left alone. */

static const nh_config *health_cfg(const operator *op)
{
    return nh_enabled(op->opts.health) ? op->opts.health : NULL;
}

/* 1 while pod's Slurm node is out for health with this pod: the cordon
 * sync must not undo that drain. */
static int health_holds(const nss_set *s, const sobj *pod, const char *name)
{
    const hl_ent *e = s->health.count ? map_get(&s->health, name) : NULL;
    return e && strcmp(e->uid, pod->uid) == 0;
}

static void health_gauges(nss_state *st, const nss_set *s, const char *ns, const char *name)
{
    if (st->mx_out)
        mx_gauge_set(mx_gauge_get(st->mx_out, MX_LV(ns, name)), (double)s->health.count);
    if (st->mx_waiting)
        mx_gauge_set(mx_gauge_get(st->mx_waiting, MX_LV(ns, name)), (double)s->health_waiting);
    if (st->mx_replaced)
        (void)mx_counter_get(st->mx_replaced, MX_LV(ns, name)); /* listed from the start, at 0 */
}

/* The pod condition NH_POD_CONDITION: True with msg, or removed (NULL). */
static void health_condition(nss_state *st, nss_set *s, const sobj *pod, const char *msg)
{
    nsw_ticket *e = nsw_take(st->op, pod->uid, "health condition", msg ? hash_str(msg) : 1);
    if (!e)
        return;
    cJSON *c = cJSON_CreateObject();
    json_set_str(c, "type", NH_POD_CONDITION);
    if (msg) {
        char t[32];
        rfc3339_format((int64_t)time(NULL), t);
        json_set_str(c, "status", "True");
        json_set_str(c, "reason", "NodeUnhealthy");
        json_set_str(c, "message", msg);
        json_set_str(c, "lastTransitionTime", t);
    } else {
        json_set_str(c, "$patch", "delete");
    }
    cJSON *list = cJSON_CreateArray();
    cJSON_AddItemToArray(list, c);
    cJSON *patch = cJSON_CreateObject();
    json_set(json_obj_ensure(patch, "status"), "conditions", list);
    nsw_patch_pod(st->op, e, s->key, pod, "status", KUBE_PATCH_STRATEGIC, patch, "health condition");
}

/* What to do for a pod out for health, each pass until it is gone. */
static void health_act(sync_ctx *x, hl_ent *e, const sobj *pod)
{
    const sm_node *sn = NULL;
    enum nc_found found = nc_lookup(x->cache, e->name, &sn);
    if (!e->cond_written) {
        health_condition(x->st, x->s, pod, e->reason + strlen(NSS_REASON_PREFIX));
        e->cond_written = 1;
    }
    if (found == NC_PRESENT) {
        if (nc_settling(x->cache, e->name))
            return; /* our drain is not read back yet */
        if (!sm_node_drain(sn)) {
            int rc = drain(x->st, x->cache, x->s, e->name, e->reason);
            if (rc < 0 && rc != OP_EBUSY)
                log_warn("nodeset %s: cannot drain Slurm node %s for health: %s", x->s->key, e->name,
                         err_str(rc));
            return;
        }
        if (!our_reason(sn->reason))
            return; /* a person drained it meanwhile: theirs, and the pod stays (sync_health drops us) */
        if (!e->drain_seen) {
            e->drain_seen = 1;
            if (x->st->mx_drain_s)
                mx_histogram_observe(x->st->mx_drain_s, (double)(now_ms(x->st) - e->seen_ms) / 1000.0);
            log_info(
                "nodeset %s: Slurm node %s drained for health %.3f s after its Node %s was seen unhealthy",
                x->s->key, e->name, (double)(now_ms(x->st) - e->seen_ms) / 1000.0, e->node);
        }
        /* Our drain must be the one the read shows before the pod is
         * condemned: judge() would otherwise drain it again with its own
         * reason (it uses ours, flush_drains, for a node out for health). */
        if (!nc_drain_proved(x->cache, e->name) && nc_drain_state(x->cache, e->name, NULL) != 0)
            return;
    }
    if (!x->act || !x->act->condemn)
        return;
    char why[600];
    snprintf(why, sizeof(why), "its Node %s is unhealthy (%s)", e->node,
             e->reason + strlen(NSS_REASON_PREFIX));
    x->act->condemn(x->act->ctx, pod, why);
    uint64_t now = now_ms(x->st);
    if (!e->gone_ms && is_deleting(x->s, pod, now)) {
        e->gone_ms = now;
        if (x->st->mx_replaced)
            mx_counter_inc(mx_counter_get(x->st->mx_replaced, MX_LV(x->nodeset->ns, x->nodeset->name)));
        op_event(
            x->op, x->nodeset, NSB_KIND, "UnhealthyNodeReplaced", "Delete",
            "Slurm node %s is drained and holds no job: deleting pod %s on unhealthy Node %s to replace it",
            e->name, pod->name, e->node);
    }
}

static void health_drop(sync_ctx *x, hl_ent *e, const sobj *pod)
{
    if (pod && e->cond_written && strcmp(pod->uid, e->uid) == 0)
        health_condition(x->st, x->s, pod, NULL);
    map_drop(&x->s->health, e->name);
}

/* How long an entry whose pod went (StatefulSet mode) waits for the
 * replacement under its name to be Ready before it stops counting against
 * the cap (a scale-in may have taken the ordinal). */
#define HEALTH_GONE_TTL_MS (10u * 60u * 1000u)

/* A Node a pod could go to now: known and not unhealthy. */
static int node_usable(const char *node, void *data)
{
    const sync_ctx *x = data;
    return store_get(op_store(x->op, OPK_NODES), NULL, node) != NULL &&
           map_get(&x->st->unhealthy, node) == NULL;
}

/* A pod created while Nodes were unhealthy has an affinity that keeps it
 * off them for good (nss_health_avoid). Unbound, it runs nothing: once one
 * of those Nodes is usable again it goes, and its replacement gets the
 * Nodes of now. Only as the cache shows it (its resourceVersion the
 * precondition): bound since, it may run slurmd, and the DELETE is
 * refused; the pod then reads changed and is judged again. Returns 1 when
 * its delete was sent (now or by an earlier pass). */
static int sweep_avoiding(sync_ctx *x, const sobj *pod)
{
    const pod_proj *pp = pod_of(pod);
    const char *avoided = pp->node_name ? NULL : sobj_annotation(pod, ANN_POD_AVOIDED);
    if (avoided == NULL || x->act == NULL || x->act->delete_unchanged == NULL)
        return 0;
    uint64_t h = hash_str(pod->rv ? pod->rv : "");
    swept_ent *e = map_get(&x->s->swept, pod->uid);
    if (e && e->rv_hash == h) {
        e->pass = x->s->health_passes;
        return 1;
    }
    if (!nh_avoids_usable(avoided, node_usable, x))
        return 0;
    if (e == NULL) {
        size_t l = strlen(pod->uid) + 1;
        e = xmalloc(sizeof(*e) + l);
        memcpy(e->uid, pod->uid, l);
        map_put(&x->s->swept, e->uid, e);
    }
    e->rv_hash = h;
    e->pass = x->s->health_passes;
    x->act->delete_unchanged(x->act->ctx, pod, "it waits unscheduled, kept off Nodes that are healthy again");
    return 1;
}

static void sync_health(sync_ctx *x, const nsb_pod *pods, size_t n)
{
    const nh_config *cfg = health_cfg(x->op);
    nss_set *s = x->s;
    if (cfg == NULL) {
        if (s->health.count)
            map_free(&s->health);
        if (s->swept.count)
            map_free(&s->swept);
        return;
    }
    s->health_passes++;
    store *nodes = op_store(x->op, OPK_NODES);
    uint64_t now = now_ms(x->st);
    int ds = x->sp->mode == NSB_DAEMONSET;
    map_t seen; /* names of entries whose name a pod holds (keys borrowed) */
    map_init(&seen);
    nh_cand *cands = xcalloc(n + 1, sizeof(*cands));
    const sobj **cpods = xcalloc(n + 1, sizeof(*cpods));
    char **cwhy = xcalloc(n + 1, sizeof(*cwhy));
    size_t nc = 0, fleet = 0;
    char why[512];
    for (size_t i = 0; i < n; i++) {
        const nsb_pod *p = &pods[i];
        const sobj *pod = pod_sobj(p);
        const char *name = slurm_name(x->st, pod);
        hl_ent *e = *name ? map_get(&s->health, name) : NULL;
        if (e)
            map_put(&seen, e->name, e);
        if (p->terminating)
            continue;
        int swept = sweep_avoiding(x, pod);
        if (!*name)
            continue;
        fleet++;
        const pod_proj *pp = pod_of(pod);
        const sobj *node = pp->node_name ? store_get(nodes, NULL, pp->node_name) : NULL;
        int64_t since = 0;
        int bad = node && nh_node_unhealthy(cfg, node->json, why, sizeof(why), &since);
        if (e && strcmp(e->uid, pod->uid) != 0) {
            /* Another pod under the name: the replacement. Once Ready on a
             * healthy Node the node is back in the fleet. */
            if (!bad) {
                if (p->ready)
                    map_drop(&s->health, e->name);
                else if (swept)
                    e->gone_ms = now; /* its replacement's wait starts again */
                continue;
            }
            /* Nothing kept it off an unhealthy Node: it is the one out now. */
            free(e->uid);
            e->uid = xstrdup(pod->uid);
            free(e->node);
            e->node = xstrdup(node->name);
            e->gone_ms = 0;
            e->cond_written = 0;
        } else if (e && !bad) {
            op_event(x->op, x->nodeset, NSB_KIND, "NodeHealthy", "Undrain",
                     "Node %s is healthy again: Slurm node %s of pod %s returns to service", e->node, e->name,
                     pod->name);
            health_drop(x, e, pod);
            continue;
        } else if (!e) {
            if (!bad)
                continue;
            const sm_node *sn = NULL;
            if (nc_lookup(x->cache, name, &sn) == NC_PRESENT && sm_node_drain(sn) && !our_reason(sn->reason))
                continue; /* a person's drain: theirs to undo, and no replacement of ours */
            cands[nc].name = name;
            cands[nc].since_s = since;
            cpods[nc] = pod;
            cwhy[nc] = xstrdup(why);
            nc++;
            continue;
        }
        /* A person drained it after we did: leave node and pod to them. */
        const sm_node *sn = NULL;
        if (!e->gone_ms && nc_lookup(x->cache, name, &sn) == NC_PRESENT && !nc_settling(x->cache, name) &&
            sm_node_drain(sn) && sn->reason && *sn->reason && !our_reason(sn->reason)) {
            health_drop(x, e, pod);
            continue;
        }
        health_act(x, e, pod);
    }
    /* Entries whose name no pod holds: the pod went. */
    size_t it = 0, ng = 0, kept_off = 0;
    const char *k;
    void *v;
    hl_ent **gone = xcalloc(s->health.count + 1, sizeof(*gone));
    while (map_next(&s->health, &it, &k, &v)) {
        hl_ent *e = v;
        if (map_get(&seen, e->name))
            continue;
        /* Kept off its Node (DaemonSet) while that Node is unhealthy; a
         * replacement on its way (StatefulSet) for a while; a pod that
         * went without our decision frees its place. */
        int keep = e->gone_ms && (ds ? map_get(&x->st->unhealthy, e->node) != NULL
                                     : now - e->gone_ms < HEALTH_GONE_TTL_MS);
        if (keep)
            kept_off++;
        else
            gone[ng++] = e;
    }
    for (size_t i = 0; i < ng; i++)
        map_drop(&s->health, gone[i]->name);
    free(gone);
    map_free(&seen);
    if (!ds && (size_t)x->sp->replicas > fleet)
        fleet = (size_t)x->sp->replicas;
    else if (ds)
        fleet += kept_off;
    size_t cap = nh_cap(cfg, fleet), held = s->health.count;
    size_t admitted = nh_admit(cands, nc, held, cap);
    for (size_t i = 0; i < nc; i++) {
        if (!cands[i].admit)
            continue;
        const pod_proj *pp = pod_of(cpods[i]);
        hl_ent *e = xcalloc(1, sizeof(*e));
        e->name = xstrdup(cands[i].name);
        e->uid = xstrdup(cpods[i]->uid);
        e->node = xstrdup(pp->node_name);
        e->reason = nh_reason(cwhy[i]);
        const uh_ent *at = map_get(&x->st->unhealthy, pp->node_name);
        e->seen_ms = at ? at->at : now;
        map_put(&s->health, e->name, e);
        op_warn(
            x->op, x->nodeset, NSB_KIND, "NodeUnhealthy",
            "Node %s is unhealthy (%s): draining Slurm node %s of pod %s; the pod is replaced once no job "
            "holds it",
            e->node, cwhy[i], e->name, cpods[i]->name);
        health_act(x, e, cpods[i]);
    }
    size_t waiting = nc - admitted;
    if (waiting && waiting != s->health_waiting)
        op_warn(x->op, x->nodeset, NSB_KIND, "UnhealthyNodesCapped",
                "%zu more pod(s) are on unhealthy Nodes; at most %zu of the NodeSet's %zu Slurm nodes are "
                "drained "
                "or replaced for health at once (--unhealthy-max-share %u%%)",
                waiting, cap, fleet, cfg->max_share_pct);
    s->health_waiting = waiting;
    for (size_t i = 0; i < nc; i++)
        free(cwhy[i]);
    free(cwhy);
    free(cpods);
    free(cands);
    drop_older(&s->swept, offsetof(swept_ent, pass), s->health_passes);
    health_gauges(x->st, s, x->nodeset->ns, x->nodeset->name);
}

/* The Nodes store: keep the set of unhealthy Nodes. */
static void on_node_health(store *sto, const sobj *old, const sobj *new, void *data)
{
    (void)sto;
    (void)old;
    nss_state *st = data;
    const nh_config *cfg = health_cfg(st->op);
    const sobj *o = new ? new : old;
    char why[512];
    int bad = new && cfg && nh_node_unhealthy(cfg, new->json, why, sizeof(why), NULL);
    uh_ent *at = map_get(&st->unhealthy, o->name);
    if (bad && !at) {
        at = xmalloc(sizeof(*at));
        at->name = xstrdup(o->name);
        at->at = now_ms(st);
        map_put(&st->unhealthy, at->name, at);
        log_info("nodehealth: Node %s is unhealthy: %s", o->name, why);
    } else if (!bad && at) {
        map_drop(&st->unhealthy, o->name);
        log_info("nodehealth: Node %s is healthy again", o->name);
    }
    if (st->mx_unhealthy)
        mx_gauge_set(st->mx_unhealthy, (double)st->unhealthy.count);
}

int nss_health_keep_off(operator *op, const char *node)
{
    const nss_state *st = nss_of(op);
    return st && node && st->unhealthy.count && map_get(&st->unhealthy, node) != NULL;
}

/* At most this many Nodes named in a pod's affinity: a storm on a large
 * fleet would otherwise make every pod body huge; the cap keeps the
 * replacements few, and the scheduler tries the others first anyway. */
#define HEALTH_AVOID_MAX 256

void nss_health_avoid(operator *op, cJSON *pod)
{
    const nss_state *st = nss_of(op);
    if (st == NULL || st->unhealthy.count == 0)
        return;
    const char **names = xcalloc(st->unhealthy.count + 1, sizeof(*names));
    size_t it = 0, n = 0;
    const char *k;
    void *v;
    while (n < HEALTH_AVOID_MAX && map_next(&st->unhealthy, &it, &k, &v))
        names[n++] = k;
    (void)nh_avoid_nodes(pod, names, n);
    free(names);
}

/* 1 when the pod's Node is unhealthy and it is not out for health yet, or
 * the other way round: a full pass must decide (cap, drain or undrain). */
static int health_changed(operator *op, const nss_set *s, const sobj *pod, const char *name)
{
    const nh_config *cfg = health_cfg(op);
    if (cfg == NULL)
        return 0;
    const pod_proj *pp = pod_of(pod);
    int bad = pp->node_name && map_get(&nss_of(op)->unhealthy, pp->node_name) != NULL;
    return bad != health_holds(s, pod, name);
}

/* A pass's context without actions, uncordons not allowed yet. */
static sync_ctx sync_ctx_of(operator *op, nss_set *s, nc_cache *cache, const sobj *nodeset, const cJSON *ns,
                            const nsp_spec *sp, const char *update_hash)
{
    return (sync_ctx){
        .op = op,
        .st = nss_of(op),
        .nodeset = nodeset,
        .ns = ns,
        .sp = sp,
        .s = s,
        .cache = cache,
        .update_hash = update_hash,
        .rolling = sp->strategy == NSP_ROLLING_UPDATE,
    };
}

/* nss_sync's work on one pod that is not terminating and has a Slurm name
 * (sn: its node when listed), but for registration drift. */
static void sync_pod(sync_ctx *x, const nsb_pod *p, const char *name, const sm_node *sn, const sobj *node)
{
    const sobj *pod = pod_sobj(p);
    sync_deadline(x, pod, name);
    sync_topology(x, pod, name, sn, node);
    if (sn) {
        if (!sync_record(x, p, pod, name, sn))
            sync_cordon(x, p, pod, name, sn);
        sync_features(x, p, name, sn, node);
        drift_clear(x->s, pod->uid);
    }
}

static void sync_unmake(sync_ctx *x)
{
    x->s->unmake_due = x->s->made.count && unmake(x->st, x->s, x->cache, x->nodeset, x->sp->replicas, 0) > 0;
}

void nss_sync(operator *op, const sobj *nodeset, const cJSON *ctl, const cJSON *ns, const nsp_spec *sp,
                        const nsb_pod *pods, size_t n, const char *update_hash, const nss_actions *act)
{
    nss_state *st = nss_of(op);
    nss_set *s = set_get(st, nodeset, sp);
    nc_cache *cache;
    if (slurmclient_get(op, s->ctl_key, &cache) != SC_READY || !nc_ready(cache))
        return; /* fail closed: nothing is decided on unknown data */
    sync_ctx x = sync_ctx_of(op, s, cache, nodeset, ns, sp, update_hash);
    x.act = act;
    /* Pods are uncordoned only when no scale-in is under way. */
    size_t active = 0;
    for (size_t i = 0; i < n; i++)
        active += !pods[i].terminating;
    x.uncordon_ok = sp->mode == NSB_DAEMONSET || (int)active <= sp->replicas;
    int32_t min_ready = sp->min_ready_secs;
    int64_t now = (int64_t)time(NULL);
    nsb_slurm_counts counts = {0};
    size_t expected = 0, listed = 0;
    const sobj **drifting = xcalloc(n + 1, sizeof(*drifting));
    size_t n_drifting = 0;
    /* Before the per-pod pass, as condemn_in_maintenance: a node taken out
     * for health here is not undrained there as a pod to keep. */
    s->sync_passes++;
    sync_health(&x, pods, n);
    condemn_in_maintenance(&x, pods, n);
    for (size_t i = 0; i < n; i++) {
        const nsb_pod *p = &pods[i];
        const sobj *pod = pod_sobj(p);
        if (p->terminating)
            continue;
        const char *name = slurm_name(st, pod);
        if (!*name)
            continue; /* not bound to a Node yet (hostNetwork): nothing in Slurm */
        const pod_proj *pp = pod_of(pod);
        const sobj *node = pp->node_name ? store_get(op_store(op, OPK_NODES), NULL, pp->node_name) : NULL;
        const sm_node *sn = NULL;
        enum nc_found found = nc_lookup(cache, name, &sn);
        int settled = nsb_pod_available(p, min_ready, now) && p->ready_since > 0 &&
                      now > p->ready_since + DRIFT_GRACE_S(op);
        expected += settled;
        sync_pod(&x, p, name, found == NC_PRESENT ? sn : NULL, node);
        if (found == NC_PRESENT) {
            listed += settled;
            counts.idle += sn->base == SM_NODE_IDLE;
            counts.allocated += sn->base == SM_NODE_ALLOCATED || sn->base == SM_NODE_MIXED;
        } else if (found == NC_ABSENT && sync_record_gone(&x, pod, name)) {
            drift_clear(s, pod->uid);
        } else if (found == NC_ABSENT && nsb_pod_available(p, min_ready, now) && p->ready_since > 0 &&
                   !map_get(&s->condemned, pod->uid)) {
            drifting[n_drifting++] = pod;
        } else {
            drift_clear(s, pod->uid);
        }
    }
    /* A table that lists none of the nodes this NodeSet's settled pods
     * registered is more likely wrong than a NodeSet that all lost its
     * nodes at once: hold. */
    if (expected >= 2 && listed == 0) {
        s->held = 1;
        if (n_drifting)
            log_warn(
                "nodeset %s: Slurm's node table lists none of its %zu registered nodes; not treating any as "
                "unregistered",
                s->key, expected);
        for (size_t i = 0; i < n_drifting; i++)
            drift_clear(s, drifting[i]->uid);
        n_drifting = 0;
    }
    if (s->drift_since.count > n_drifting) {
        /* Entries of pods that are Ready and listed again, or gone. */
        size_t it = 0, k = 0;
        const char *key;
        void *v;
        drift_ent **old = xcalloc(s->drift_since.count + 1, sizeof(*old));
        while (map_next(&s->drift_since, &it, &key, &v)) {
            size_t j = 0;
            while (j < n_drifting && strcmp(drifting[j]->uid, key) != 0)
                j++;
            if (j == n_drifting)
                old[k++] = v;
        }
        for (size_t j = 0; j < k; j++)
            drift_clear(s, old[j]->uid);
        free(old);
    }
    for (size_t i = 0; i < n_drifting; i++)
        sync_drift(&x, drifting[i]);
    free(drifting);
    if (sp->mode == NSB_DAEMONSET && sp->prune_not_found)
        sync_prune(&x);
    sync_reservation(&x, pods, n, &counts);
    sync_unmake(&x);
    /* (incremental steps see some pods only: two full passes' grace) */
    drop_older(&s->records, offsetof(record_ent, pass), s->sync_passes - 1);
    s->synced = 1;
    s->cond_gen = nodeset->generation;
}

void nss_release(operator *op, const sobj *nodeset, const nsb_pod *pods, size_t n, const nss_actions *act)
{
    nss_state *st = nss_of(op);
    nss_set *s = set_find(st, nodeset->key);
    if (s == NULL || s->victims.count == 0 || s->victims_gen != nodeset->generation)
        return;
    uint64_t now = now_ms(st);
    for (size_t i = 0; i < n; i++) {
        const sobj *pod = pod_sobj(&pods[i]);
        if (pods[i].terminating || pod->deleting || !map_get(&s->victims, pod->uid) ||
            is_deleting(s, pod, now))
            continue;
        /* the same per-pod rules as in a deciding pass (kept while Slurm
         * cannot be read, cordoned while it waits, drained again when the
         * drain is not proven ours; marked deleting when it goes) */
        if (nss_condemn(op, nodeset, NULL, pod, "condemned by the last full pass") != NSS_DELETE)
            continue;
        (act->release_pod ? act->release_pod : act->delete_pod)(act->ctx, pod,
                                                                 "condemned by the last full pass; its Slurm "
                                                                 "node is drained");
    }
}

/* ---- status ---- */

static void sync_conditions(nss_state *st, nss_set *s, const sobj *pod, const sm_node *sn)
{
    const pod_proj *pp = pod_of(pod);
    uint32_t want = sn ? nss_condition_bits(sn) : 0;
    const char *msg = sn && sn->reason ? sn->reason : "";
    uint32_t want_hash = pod_slurm_cond_hash(want, msg);
    if (want == pp->slurm_conds && want_hash == pp->slurm_msg_hash)
        return;
    nsw_ticket *e = nsw_take(st->op, pod->uid, "conditions", ((uint64_t)want << 32) | want_hash);
    if (!e)
        return;
    char t[32];
    rfc3339_format((int64_t)time(NULL), t);
    cJSON *list = cJSON_CreateArray();
    for (int i = 0; i < PSC_COUNT; i++) {
        uint32_t bit = 1u << i;
        if (want & bit) {
            cJSON *c = cJSON_CreateObject();
            json_set_str(c, "type", pod_slurm_cond_types[i]);
            json_set_str(c, "status", "True");
            json_set_str(c, "message", msg);
            if (!(pp->slurm_conds & bit))
                json_set_str(c, "lastTransitionTime", t);
            cJSON_AddItemToArray(list, c);
        } else if (pp->slurm_conds & bit) {
            cJSON *c = cJSON_CreateObject();
            json_set_str(c, "type", pod_slurm_cond_types[i]);
            json_set_str(c, "$patch", "delete");
            cJSON_AddItemToArray(list, c);
        }
    }
    cJSON *patch = cJSON_CreateObject();
    json_set(json_obj_ensure(patch, "status"), "conditions", list);
    nsw_patch_pod(st->op, e, s->key, pod, "status", KUBE_PATCH_STRATEGIC, patch, "Slurm conditions");
}

static void sync_pod_info(nss_state *st, nss_set *s, nc_cache *cache, const sobj *nodeset, const sobj *pod,
                          const char *name, const sm_node *sn)
{
    if (nc_settling(cache, name))
        return;
    const pod_proj *pp = pod_of(pod);
    char *info = nss_pod_info(pod->ns, pod->name, pp->node_name, nodeset->name, nodeset->uid);
    const char *cur = sn->comment ? sn->comment : "";
    if (strcmp(cur, info) != 0) {
        /* Compare what it says, not how it is written. */
        cJSON *a = json_parse(cur, strlen(cur), NULL), *b = json_parse(info, strlen(info), NULL);
        int same = a && b && json_equal(a, b);
        const char *prev_node = a ? json_get_str_or(a, "node", "") : "";
        if (!same) {
            sm_node_update u = {.set = SM_UPD_COMMENT, .comment = info};
            int sent = slurm_update(st, cache, s, name, &u) == 0;
            /* The pod moved or was recreated: clear the DOWN its old pod's
             * preStop left, when that DOWN is ours (or has no reason); once,
             * with the comment that records the move. */
            if (sent && prev_node[0] && strcmp(prev_node, pp->node_name ? pp->node_name : "") != 0 &&
                sn->base == SM_NODE_DOWN && (!sn->reason || !sn->reason[0] || our_reason(sn->reason))) {
                sm_node_update r = {.set = SM_UPD_STATE, .state = SM_REQ_RESUME};
                slurm_update(st, cache, s, name, &r);
            }
        }
        cJSON_Delete(a);
        cJSON_Delete(b);
    }
    free(info);
}

/* The preStop hook of a pod sets its node DOWN ("Pod is terminating"). A
 * pod recreated under the same name on the same Node registers a node that
 * stays DOWN (Slurm returns an admin's DOWN to service only with
 * ReturnToService=2, which slurm.conf does not set), and the pod-info move
 * check does not fire. A DOWN of ours set before the slurmd now registered
 * started came from an earlier pod: resume it. A DOWN set after (this
 * pod's own preStop, while its deletion is on its way to our cache) is
 * left alone. Either of two signs tells: the slurmd now registered started
 * after the DOWN (both times Slurm's, so a 1 s startup probe passes it), or
 * the current pod became Ready well after it (the margin covers the two
 * clocks; this one also holds where slurmd was not restarted with the pod,
 * or Slurm gives no start time). Each is false for the pod's own preStop,
 * which comes after its slurmd started and after it was Ready. */
#define STALE_DOWN_MARGIN_S 5
#define PRESTOP_REASON NSS_REASON_PREFIX "Pod is terminating"

static void sync_stale_down(nss_state *st, nss_set *s, nc_cache *cache, const sobj *pod, const char *name,
                            const sm_node *sn)
{
    const pod_proj *pp = pod_of(pod);
    if (sn->base != SM_NODE_DOWN || !sn->reason ||
        strncmp(sn->reason, PRESTOP_REASON, strlen(PRESTOP_REASON)) != 0 || sn->reason_changed_at <= 0 ||
        nc_settling(cache, name))
        return;
    int earlier = sn->slurmd_started_at > sn->reason_changed_at ||
                  pp->ready_since > sn->reason_changed_at + STALE_DOWN_MARGIN_S;
    if (!earlier)
        return;
    sm_node_update r = {.set = SM_UPD_STATE, .state = SM_REQ_RESUME};
    if (slurm_update(st, cache, s, name, &r) == 0)
        log_info("nodeset %s: Slurm node %s is DOWN from an earlier pod's preStop; resuming it under pod %s",
                 s->key, name, pod->name);
}

/* What a listed node adds to the NodeSet's Slurm counts. */
static unsigned slurm_bits(const sm_node *sn)
{
    if (sn == NULL)
        return 0;
    unsigned b = sn->base == SM_NODE_IDLE                                        ? NSI_SLURM_IDLE
                 : sn->base == SM_NODE_ALLOCATED || sn->base == SM_NODE_MIXED ? NSI_SLURM_ALLOCATED
                 : sn->base == SM_NODE_DOWN                                    ? NSI_SLURM_DOWN
                                                                               : 0;
    return b | ((sn->flags & SM_NF(DRAIN)) ? NSI_SLURM_DRAIN : 0);
}

/* nss_status's work on one pod that is not terminating (sn: its node when
 * listed). */
static void status_pod(nss_state *st, nss_set *s, nc_cache *cache, const sobj *nodeset, const nsb_pod *p,
                       const char *name, const sm_node *sn, int wdp)
{
    const sobj *pod = pod_sobj(p);
    if (is_quiet(s, pod, now_ms(st)))
        return;
    sync_conditions(st, s, pod, sn);
    int busy = sn && sm_node_busy(sn);
    /* The protection goes only when Slurm shows the node idle, or says
     * by name that it does not exist: not because a table lacks it. */
    int protected = sobj_label(pod, NSB_LABEL_POD_PROTECT) != NULL;
    if (sn)
        name_record(s, pod, name, sn);
    if (busy || sn || !wdp || !protected || !*name || name_gone(s, cache, pod, name))
        set_pod_meta(st, s->key, pod, 1, NSB_LABEL_POD_PROTECT, busy && wdp ? "true" : NULL);
    /* A node another pod shares gets neither pod's info nor a resumed
     * DOWN: the two would take turns, and a DOWN may be the other's. */
    int shared = sn && nsb_pod_running_ready(p) && name_shared(st, s, pod, name);
    if (sn && nsb_pod_running_ready(p) && pod_of(pod)->node_name && !shared)
        sync_pod_info(st, s, cache, nodeset, pod, name, sn);
    if (sn && nsb_pod_running_ready(p) && !shared)
        sync_stale_down(st, s, cache, pod, name, sn);
}

/* ---- following the queue (nodedemand.h, docs/internals/NODE-DEMAND.md) ----
 *
 * A NodeSet with ND_ANNOTATION is looked at by a full pass every
 * DEMAND_TICK_MS while the job list is read every track_ms: a job queued
 * now is seen within about two ticks. Its spec.replicas is written; the
 * scale-in then goes the normal way: victims in their
 * order (idle ones first), drained, deleted once proved free. */
#define DEMAND_TICK_MS 1000u
#define DEMAND_JOBS_FAST_MS 5000u

/* Add to s->seen_parts the partitions of list it lacks: one scan of a short
 * list per pod and pass, and nothing allocated while they are known. */
static void note_parts(nss_set *s, const char *list)
{
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char item[256];
        if (len && len < sizeof(item)) {
            memcpy(item, p, len);
            item[len] = '\0';
            if (!nd_lists_meet(item, s->seen_parts)) {
                char *u =
                    s->seen_parts && *s->seen_parts ? xasprintf("%s,%s", s->seen_parts, item) : xstrdup(item);
                free(s->seen_parts);
                s->seen_parts = u;
            }
        }
        p = e ? e + 1 : p + len;
    }
}

static int cmp_set_key(const void *a, const void *b)
{
    return strcmp((*(nss_set *const *)a)->key, (*(nss_set *const *)b)->key);
}

static void demand_off(nss_set *s)
{
    s->demand_on = 0;
    map_free(&s->idle_since);
    map_init_type(&s->idle_since, &idle_type);
    free(s->demand_parts);
    s->demand_parts = NULL;
}

static const char *demand_text(const sobj *nodeset)
{
    /* The NodeSets store keeps whole objects, not chosen annotations. */
    return cJSON_GetStringValue(json_child(json_get(nodeset->json, "metadata.annotations"), ND_ANNOTATION));
}

/* The demand series of a NodeSet with the annotation exist from its first
 * pass (at 0 until Slurm is read), as the health ones do. */
static void demand_gauges(nss_state *st, const sobj *nodeset)
{
    if (!st->mx_pending || demand_text(nodeset) == NULL)
        return;
    (void)mx_gauge_get(st->mx_pending, MX_LV(nodeset->ns, nodeset->name));
    (void)mx_gauge_get(st->mx_cooled, MX_LV(nodeset->ns, nodeset->name));
    (void)mx_counter_get(st->mx_scaled, MX_LV(nodeset->ns, nodeset->name, "up"));
    (void)mx_counter_get(st->mx_scaled, MX_LV(nodeset->ns, nodeset->name, "down"));
}

/* Whether the annotation asks to follow the queue and parses; a text that
 * does not parse is reported once (Event and log) and changes nothing. */
static int demand_policy(nss_state *st, nss_set *s, const sobj *nodeset, const nsp_spec *sp)
{
    const char *text = demand_text(nodeset);
    if (text == NULL || nodeset->deleting) {
        demand_off(s);
        return 0;
    }
    char err[256];
    const char *why = NULL;
    if (nd_parse(text, &s->demand, err, sizeof(err)) != 0)
        why = err;
    else if (sp->mode == NSB_DAEMONSET)
        why = "a DaemonSet-mode NodeSet has one pod per eligible Node: its size follows the Nodes, not "
              "replicas";
    if (why) {
        if (s->demand_bad == NULL || strcmp(s->demand_bad, text) != 0) {
            free(s->demand_bad);
            s->demand_bad = xstrdup(text);
            log_warn("nodeset %s: annotation %s=\"%.128s\" is not used: %s", nodeset->key, ND_ANNOTATION,
                     text, why);
            op_event(st->op, nodeset, NSB_KIND, "AutoscaleInvalid", "Autoscale",
                     "annotation %s=\"%.128s\" is not used: %s", ND_ANNOTATION, text, why);
        }
        demand_off(s);
        return 0;
    }
    free(s->demand_bad);
    s->demand_bad = NULL;
    s->demand_on = 1;
    return 1;
}

/* The NodeSet's share of the queue: nodes its pending jobs ask for, and
 * the one job (if any) that no NodeSet of the Controller can ever hold. */
static int32_t demand_of(nss_state *st, nss_set *s, nc_cache *cache, const sobj *nodeset, int32_t *jobs)
{
    size_t n_sibs = 0, it = 0, cap = 8;
    nss_set **sibs = xcalloc(cap, sizeof(*sibs));
    for (nss_set *o; (o = st->q.next_part(st->q.ctx, &it));) {
        if (!o->demand_on || !o->demand_parts || strcmp(o->ctl_key, s->ctl_key) != 0)
            continue;
        if (n_sibs == cap)
            sibs = xrealloc(sibs, (cap *= 2) * sizeof(*sibs));
        sibs[n_sibs++] = o;
    }
    qsort(sibs, n_sibs, sizeof(*sibs), cmp_set_key);
    nd_set *view = xcalloc(n_sibs + 1, sizeof(*view));
    int self = -1;
    for (size_t i = 0; i < n_sibs; i++) {
        view[i].partitions = sibs[i]->demand_parts;
        view[i].max = sibs[i]->demand.max;
        if (sibs[i] == s)
            self = (int)i;
    }
    const nc_pending *pj;
    size_t n = nc_pending_jobs(cache, &pj);
    int32_t demand = 0;
    *jobs = 0;
    for (size_t i = 0; i < n && self >= 0; i++) {
        if (!nd_waits(pj[i].reason))
            continue;
        int r = nd_route(pj[i].partitions, pj[i].nodes, view, n_sibs);
        if (r == self) {
            demand = pj[i].nodes > INT32_MAX - demand ? INT32_MAX : demand + pj[i].nodes;
            (*jobs)++;
        } else if (r == ND_NEVER_FITS && nd_lists_meet(pj[i].partitions, s->demand_parts) &&
                   pj[i].id != s->unfit_job) {
            s->unfit_job = pj[i].id;
            log_warn("nodeset %s: job %" PRIu32
                     " asks for %d nodes in partition(s) %.128s: no NodeSet that follows "
                     "the queue there may grow that far (this one: max=%d)",
                     nodeset->key, pj[i].id, (int)pj[i].nodes, pj[i].partitions, (int)s->demand.max);
            op_event(st->op, nodeset, NSB_KIND, "JobNeverFits", "Autoscale",
                     "job %" PRIu32
                     " asks for %d nodes in partition(s) %.128s: no NodeSet that follows the queue "
                     "there may grow that far (this one: max=%d); raise max or cancel the job",
                     pj[i].id, (int)pj[i].nodes, pj[i].partitions, (int)s->demand.max);
        }
    }
    free(view);
    free(sibs);
    return demand;
}

/* Count the NodeSet's busy nodes and those idle past the cool-down, note
 * the partitions its nodes serve, then write replicas when the queue
 * wants another number. sn_of[i]: pods[i]'s Slurm node, NULL when not
 * listed. */
static void demand_step(nss_state *st, nss_set *s, nc_cache *cache, const sobj *nodeset, const cJSON *ns,
                        const nsp_spec *sp,
                        const nsb_pod *pods, size_t n, const sm_node *const *sn_of, nsb_slurm_counts *out)
{
    if (!demand_policy(st, s, nodeset, sp))
        return;
    nc_jobs_fast(cache, DEMAND_JOBS_FAST_MS);
    enqueue_after(st, s->key, DEMAND_TICK_MS);
    uint64_t now = now_ms(st);
    map_t idle;
    map_init_type(&idle, &idle_type);
    if (sp->partition) {
        char pb[256];
        note_parts(s, clc_nodeset_name(ns, pb, sizeof(pb)));
    }
    int32_t busy = 0, cooled = 0;
    for (size_t i = 0; i < n; i++) {
        const sm_node *sn = sn_of[i];
        if (sn == NULL)
            continue;
        if (pods[i].terminating)
            continue;
        if (sm_node_busy(sn)) {
            busy++;
            continue;
        }
        if (sn->base != SM_NODE_IDLE || (sn->flags & SM_NF(DRAIN)) || !nsb_pod_running_ready(&pods[i]))
            continue;
        const uint64_t *was = map_get(&s->idle_since, sn->name);
        uint64_t *since = xmalloc(sizeof(*since));
        *since = was ? *was : now;
        if (now - *since >= (uint64_t)s->demand.cooldown_s * 1000u)
            cooled++;
        map_put(&idle, xstrdup(sn->name), since);
    }
    /* Nodes no longer idle start their cool-down again next time. */
    map_free(&s->idle_since);
    s->idle_since = idle;
    free(s->demand_parts);
    s->demand_parts = xstrdup(s->seen_parts ? s->seen_parts : "");
    if (!nc_jobs_ready(cache) || nc_jobs_failed(cache)) {
        /* The queue is unknown (the job list is not current, or did not
         * read cleanly): no job is assumed absent, nothing is scaled; the
         * status keeps what was last known. */
        out->demand_known = s->counts.demand_known;
        out->pending_nodes = s->counts.pending_nodes;
        out->idle_cooled = cooled;
        return;
    }
    int32_t jobs = 0, demand = demand_of(st, s, cache, nodeset, &jobs);
    out->demand_known = 1;
    out->pending_nodes = demand;
    out->idle_cooled = cooled;
    if (st->mx_pending)
        mx_gauge_set(mx_gauge_get(st->mx_pending, MX_LV(nodeset->ns, nodeset->name)), (double)demand);
    if (st->mx_cooled)
        mx_gauge_set(mx_gauge_get(st->mx_cooled, MX_LV(nodeset->ns, nodeset->name)), (double)cooled);
    int32_t replicas = nsb_replicas(ns);
    int32_t want = nd_want(&s->demand, replicas, busy, demand, cooled);
    if (want == replicas)
        return;
    nsw_ticket *e = nsw_take(st->op, nodeset->uid, "autoscale replicas", (uint64_t)want + 1);
    if (!e)
        return;
    const char *dir = want > replicas ? "up" : "down";
    log_info(
        "nodeset %s: following the queue: replicas %d -> %d (%d busy, %d node(s) asked for by %d pending "
        "job(s), %d idle past %us)",
        nodeset->key, (int)replicas, (int)want, (int)busy, (int)demand, (int)jobs, (int)cooled,
        s->demand.cooldown_s);
    op_event(
        st->op, nodeset, NSB_KIND, want > replicas ? "ScaledUp" : "ScaledDown", "Autoscale",
        "replicas %d -> %d: %d busy, %d node(s) asked for by %d pending job(s), %d idle past %us (min=%d, "
        "max=%d)",
        (int)replicas, (int)want, (int)busy, (int)demand, (int)jobs, (int)cooled, s->demand.cooldown_s,
        (int)s->demand.min, (int)s->demand.max);
    if (st->mx_scaled)
        mx_counter_inc(mx_counter_get(st->mx_scaled, MX_LV(nodeset->ns, nodeset->name, dir)));
    /* spec.replicas alone (the operator's RBAC has no nodesets/scale), and
     * without a resourceVersion: the annotation hands replicas to the
     * queue, as an HPA holds them, and our own status writes would make a
     * precondition fail once per step. */
    cJSON *patch = cJSON_CreateObject();
    json_set_int(json_obj_ensure(patch, "spec"), "replicas", want);
    nsw_patch_nodeset(st->op, e, nodeset, NULL, patch);
}

void nss_status(operator *op, const sobj *nodeset, const cJSON *ctl, const cJSON *ns, const nsp_spec *sp,
                const nsb_pod *pods, size_t n, nsb_slurm_counts *out)
{
    nss_state *st = nss_of(op);
    nss_set *s = set_get(st, nodeset, sp);
    memset(out, 0, sizeof(*out));
    /* The health gauges of every NodeSet exist from its first pass, at 0
     * until a Node turns unhealthy. */
    if (health_cfg(op))
        health_gauges(st, s, nodeset->ns, nodeset->name);
    demand_gauges(st, nodeset);
    nc_cache *cache;
    int avail = slurmclient_get(op, s->ctl_key, &cache);
    flush_drains(st, s, avail == SC_READY && nc_ready(cache) ? cache : NULL, nodeset);
    if (avail == SC_NO_RESTAPI)
        return; /* nothing to count: zeros, as Slinky without a client */
    if (avail != SC_READY || !nc_ready(cache)) {
        if (s->counts_known)
            *out = s->counts; /* unknown: keep what was last known, do not report zeros */
        return;
    }
    int wdp = sp->wdp;
    /* A table that lists none of this NodeSet's registered nodes is held:
     * nothing is concluded from it (labels, conditions, counts). */
    int32_t min_ready = sp->min_ready_secs;
    int64_t now = (int64_t)time(NULL);
    size_t expected = 0, listed = 0;
    /* Each pod's node is looked up once; the second loop acts on it. */
    const sm_node **sn_of = xcalloc(n + 1, sizeof(*sn_of));
    for (size_t i = 0; i < n; i++) {
        const nsb_pod *p = &pods[i];
        const char *name = slurm_name(st, pod_sobj(p));
        if (*name && nc_lookup(cache, name, &sn_of[i]) != NC_PRESENT)
            sn_of[i] = NULL;
        if (p->terminating || !(nsb_pod_available(p, min_ready, now) && p->ready_since > 0 &&
                                now > p->ready_since + DRIFT_GRACE_S(op)))
            continue;
        expected++;
        listed += sn_of[i] != NULL;
    }
    if (expected >= 2 && listed == 0) {
        s->held = 1;
        if (s->counts_known)
            *out = s->counts;
        free(sn_of);
        return;
    }
    s->status_passes++;
    for (size_t i = 0; i < n; i++) {
        const sobj *pod = pod_sobj(&pods[i]);
        const char *name = slurm_name(st, pod);
        const sm_node *sn = sn_of[i];
        proved_ent *pe = s->proved.count ? map_get(&s->proved, pod->uid) : NULL;
        if (pe)
            pe->pass = s->status_passes;
        if (sn)
            note_parts(s, sn->partitions);
        unsigned b = slurm_bits(sn);
        out->idle += (b & NSI_SLURM_IDLE) != 0;
        out->allocated += (b & NSI_SLURM_ALLOCATED) != 0;
        out->down += (b & NSI_SLURM_DOWN) != 0;
        out->drain += (b & NSI_SLURM_DRAIN) != 0;
        if (!pods[i].terminating)
            status_pod(st, s, cache, nodeset, &pods[i], name, sn, wdp);
    }
    demand_step(st, s, cache, nodeset, ns, sp, pods, n, sn_of, out);
    free(sn_of);
    proved_sweep(s);
    s->counts = *out;
    s->counts_known = 1;
}

/* ---- incremental passes ---- */

int nss_calm(operator *op, const sobj *nodeset, const nsp_spec *sp)
{
    const nss_set *s = set_find(nss_of(op), nodeset->key);
    nc_cache *cache;
    if (s == NULL || s->condemned.count || s->n_drains || s->blocked || s->drift_since.count || s->held ||
        !s->synced || !s->counts_known || s->resv_writing || s->health.count || s->demand_on ||
        s->unmake_due)
        return 0;
    if (sp->strategy == NSP_SCHEDULED_UPDATE)
        return 0; /* maintenance condemns pods: a decision over every pod */
    return slurmclient_get(op, s->ctl_key, &cache) == SC_READY && nc_ready(cache);
}

unsigned nss_pod_slurm_bits(operator *op, const sobj *nodeset, const sobj *pod)
{
    nss_state *st = nss_of(op);
    const nss_set *s = set_find(st, nodeset->key);
    nc_cache *cache;
    const sm_node *sn = NULL;
    if (s == NULL || slurmclient_get(op, s->ctl_key, &cache) != SC_READY || !nc_ready(cache))
        return 0;
    const char *name = slurm_name(st, pod);
    if (!*name || nc_lookup(cache, name, &sn) != NC_PRESENT)
        return 0;
    return slurm_bits(sn);
}

int nss_pod_step(operator *op, const sobj *nodeset, const cJSON *ns, const nsp_spec *sp, const nsb_pod *p,
                 const char *update_hash, int uncordon_ok, int sync)
{
    nss_state *st = nss_of(op);
    nss_set *s = set_find(st, nodeset->key);
    nc_cache *cache;
    if (s == NULL || slurmclient_get(op, s->ctl_key, &cache) != SC_READY || !nc_ready(cache))
        return NSS_STEP_FULL;
    const sobj *pod = pod_sobj(p);
    const char *name = slurm_name(st, pod);
    int wdp = sp->wdp;
    if (p->terminating)
        return NSS_STEP_DONE; /* only counted (nss_sync and nss_status skip it) */
    if (!*name) {
        /* not bound to a Node yet (hostNetwork): nothing in Slurm */
        status_pod(st, s, cache, nodeset, p, name, NULL, wdp);
        return NSS_STEP_DONE;
    }
    const sm_node *sn = NULL;
    enum nc_found found = nc_lookup(cache, name, &sn);
    if (found == NC_UNKNOWN)
        return NSS_STEP_FULL;
    int64_t now = (int64_t)time(NULL);
    /* A Ready pod whose node the table lacks starts registration drift: a
     * full pass keeps its clock and the rules over every pod. */
    if (found != NC_PRESENT && nsb_pod_available(p, 0, now) && p->ready_since > 0)
        return NSS_STEP_FULL;
    if (found != NC_PRESENT)
        sn = NULL;
    /* A Node that turned unhealthy (or healthy again): the cap is a
     * decision over the NodeSet. */
    if (health_changed(op, s, pod, name))
        return NSS_STEP_FULL;
    if (sync) {
        const pod_proj *pp = pod_of(pod);
        const sobj *node = pp->node_name ? store_get(op_store(op, OPK_NODES), NULL, pp->node_name) : NULL;
        sync_ctx x = sync_ctx_of(op, s, cache, nodeset, ns, sp, update_hash);
        x.uncordon_ok = uncordon_ok;
        sync_pod(&x, p, name, sn, node);
    }
    status_pod(st, s, cache, nodeset, p, name, sn, wdp);
    return NSS_STEP_DONE;
}
