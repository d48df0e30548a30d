/* nodeset_slurm: the Slurm side of the NodeSet engine: drain before delete, Slurm node state on pods, cordon
 * sync, pod info, deadlines, topology and features, registration drift, pruning of defunct node records, and
 * the ScheduledUpdate reservation. The NodeSet reconciler calls these hooks at fixed points of its pass; each
 * reads the Controller's Slurm node cache (slurmclient.h) and queues batched Slurm writes and Kubernetes
 * patches, never waiting for either inside the pass. Node cache events queue the NodeSet that owns the node
 * (the pod whose hostname is the Slurm node name), so a drain that completes is acted on at once.
 *
 * THE RULE (no exceptions elsewhere): a pod whose Slurm node may run jobs
 * is deleted only when
 *   (a) a read sent after our drain was accepted (nothing settling) and at
 *       most PROOF_FRESH_MS old shows the node drained with no jobs (DRAIN,
 *       not UNDRAIN, base IDLE/DOWN, not COMPLETING; an unknown state is
 *       busy), and, for a drain with our reason, shows a reason time newer
 *       than any seen before our drain was sent (nc_drain_proved: an older
 *       answer replayed cannot), or
 *   (b) Slurm answered a read of that very name, at most PROOF_FRESH_MS
 *       old, with "Invalid node name" (nc_confirm_gone), and the name is
 *       the one the pod's slurmd took: nss_pod_slurm_name() is the one
 *       mapping of pods to names, for every mode, and where it cannot be
 *       certain (hostNetwork: the host's own name) a read must have shown
 *       that node as the pod's (its pod info in the comment, a matching
 *       NodeHostname) before; otherwise the pod is kept (a hostNetwork pod
 *       never bound to a Node has no name and no node).
 * Absence from a table is never proof. A table that lists none of the
 * registered nodes of a NodeSet is held: no drift, no label or condition
 * change. Unknown, unreachable, erring or suspect Slurm means wait, with
 * the pod cordoned and a Warning Event saying why; so does a Controller
 * without a RestApi (Slinky deletes without a drain there; we do not).
 * The one opt-out is the NodeSet annotation NSS_ANN_NO_DRAIN="true".
 * (The NodeSet reconciler also replaces pods whose phase is Failed or
 * Succeeded at once: all their containers ended, so no slurmd runs.)
 * docs/internals/DRAIN-SAFETY.md says why the rule has this shape.
 * Registration drift (a Ready pod whose node Slurm has not listed for
 * DRIFT_GRACE_S) replaces a pod only under (b), at most
 * DRIFT_MAX_PER_WINDOW per NodeSet per window. Drains whose reason lacks
 * the "slurm-operator: " prefix belong to people: never undone, never
 * overwritten.
 *
 * Pass order: observe -> condemn* (scale-in, rolling update) -> sync (when
 * expectations are satisfied) -> status (always).
 */
#ifndef OP_NODESET_SLURM_H
#define OP_NODESET_SLURM_H

#include "reconcilers/nodeset_build.h"
#include "reconcilers/nodeset_spec.h"
#include "slurmio/model.h"
#include "reconcilers/operator.h"

enum nss_verdict { NSS_DELETE = 0, NSS_WAIT = 1 };

/* Drain reasons the operator writes all start with this; others are people's. */
#define NSS_REASON_PREFIX "slurm-operator: "
/* The NodeSet annotation that allows deleting its pods without a drain
 * (when Slurm cannot be asked); "true" enables it. */
#define NSS_ANN_NO_DRAIN "nodeset.slinky.slurm.net/delete-without-drain"
/* The finalizer that guarantees the ScheduledUpdate reservation is removed. */
#define NSS_RESV_FINALIZER "nodeset.slinky.slurm.net/reservation"
/* The finalizer that makes a deleted NodeSet drain and delete its pods
 * (as a scale-in does) before it goes, so the garbage collector never
 * deletes a pod whose node runs jobs. */
#define NSS_DRAIN_FINALIZER "nodeset.slinky.slurm.net/drain"
/* The ScheduledUpdate reservation of NodeSet <name>: NSS_RESV_PREFIX<name>. */
#define NSS_RESV_PREFIX "SlurmOperatorMaint-"

/** What nss_sync may ask of the NodeSet reconciler in a pass. */
typedef struct nss_actions {
    void *ctx;
    /* Delete a pod now (registration drift), with the reconciler's expectations. */
    void (*delete_pod)(void *ctx, const sobj *pod, const char *why);
    /* The same, only if the pod is still as the cache shows it (its
     * resourceVersion a precondition of the DELETE): for a pod judged by
     * what it has not done yet (never bound to a Node). */
    void (*delete_unchanged)(void *ctx, const sobj *pod, const char *why);
    /* Condemn a pod (ScheduledUpdate maintenance): drain, then delete. */
    void (*condemn)(void *ctx, const sobj *pod, const char *why);
    /* Delete a condemned pod whose wait is over (nss_release), ahead of the
     * deletes queued before it; optional (NULL: delete_pod). */
    void (*release_pod)(void *ctx, const sobj *pod, const char *why);
} nss_actions;

/** What the Slurm side keeps about one NodeSet (condemnations, drains,
 *  drift, the reservation write, health, the queue's demand, the last Slurm
 *  counts): a part of the NodeSet's record, which nodeset.c keeps and frees
 *  (nss_set_free), made here on first need through nss_queue.part. */
typedef struct nss_set nss_set;
void nss_set_free(nss_set *s);

/** How nodeset_slurm queues a pass of a NodeSet (Slurm node and reservation
 *  events, drains that complete, deadlines that expire) and finds its part
 *  of a NodeSet's record: the NodeSet reconciler's queue and records, handed
 *  over at setup so that this module never calls into nodeset.c. All but
 *  pod_after are required. */
typedef struct nss_queue {
    void *ctx;
    /* Queue the NodeSet "ns/name" now. */
    void (*now)(void *ctx, const char *key);
    /* Queue it after ms milliseconds (an earlier queueing wins). */
    void (*after)(void *ctx, const char *key, uint64_t ms);
    /* Queue it for a change of one pod's Slurm node (the pod is its own):
     * an incremental pass may look at that pod only. */
    void (*pod)(void *ctx, const char *key, const sobj *pod);
    /* Queue it to look at that pod again after ms milliseconds (a Slurm
     * write for it failed and backs off); NULL: `after`. */
    void (*pod_after)(void *ctx, const char *key, const sobj *pod, uint64_t ms);
    /* The slot of the Slurm side's part in the record of NodeSet key (NULL
     * in it: none made yet); with make, the record is made when missing,
     * else NULL then. */
    nss_set **(*part)(void *ctx, const char *key, int make);
    /* The next part made, from cursor *it (0 to start); NULL at the end. */
    nss_set *(*next_part)(void *ctx, size_t *it);
} nss_queue;

/** The Slurm side's state (the NodeSets' condemnations, drains, drift and
 *  reservation bookkeeping, the Slurm write backoffs, the queue hook; its
 *  Kubernetes writes go through the writer, nodeset_write.h), a part of the NodeSet reconciler in the
 *  registry (RC_NODESET_SLURM: its state only; the NodeSet reconciler sets
 *  it up, starts and stops it), freed once the API client has closed.
 *  Slurm writes complete through the Controller's node cache, which may
 *  close later still, so the state counts the writes it sent whose
 *  completion has not run, and is freed late (free_late): freeing it while
 *  some are in flight only marks it released, and the last completion
 *  frees it (as slurmclient's). */
typedef struct nss_state nss_state;
extern const op_reconciler RC_NODESET_SLURM;
/** op's (never NULL from op_start on). */
nss_state *nss_of(const operator *op);

/** Set up the Slurm side; q is copied. */
void nss_setup(operator *op, const nss_queue *q);
int nss_start(operator *op);
void nss_stop(operator *op);
/** The NodeSet is gone: forget what was kept for it. */
void nss_forget(operator *op, const char *key);
/** Finalizer work on a NodeSet being deleted (delete the ScheduledUpdate
 *  reservation, then drop the finalizer); returns non-zero when the pass
 *  must stop here. */
int nss_finalize(operator *op, const sobj *nodeset, const nsp_spec *sp);

/** The pods of ordinals ords (their Slurm names: names) are about to be created: make their Slurm node
 *  records FUTURE first, in requests of NSPR_BATCH_MAX names, when the NodeSet's pods declare their hardware
 *  and the cluster's version can (nodeset_precreate.h). Names in the node table or asked for before are left
 *  out; a request refused because one of its names has a record is split until the refusal names one.
 *  Nothing waits for it: a record that could not be made is made by its slurmd's registration. A record made
 *  here whose slurmd has not registered is deleted by nss_sync once the NodeSet's replicas are below its
 *  ordinal and its pod is gone, and by nss_unmake_all when the NodeSet is deleted. */
void nss_precreate(operator *op, const sobj *nodeset, const nsp_spec *sp, const char *const *names,
                   const int *ords, size_t n);
/** A NodeSet being deleted has no pod left: delete the records nss_precreate made that no slurmd took.
 *  1 when none is left (or no Slurm client is there to ask, or they were not deleted within a minute: they
 *  stay, as after a restart of this process, which forgets them); 0 while a delete is due or on its way
 *  (the NodeSet is queued again within a second). */
int nss_unmake_all(operator *op, const sobj *nodeset);
/** A NodeSet being deleted whose pods are all gone: 1 when its drain
 *  finalizer may go, i.e. its partition (spec.partition.enabled) may leave
 *  slurm.conf: Slurm's current job list has no record, in any state, in
 *  that partition. slurmctld keeps a job's record MinJobAge (300 s by
 *  default) after it ended, and one that names a partition slurm.conf no
 *  longer has made slurmctld crash on its next reconfigure, again at
 *  every start (Slinky issue 138). 0: wait (the NodeSet is queued again in
 *  1 s, a pass of a NodeSet without pods; a Warning Event says why once); a job list that cannot be read
 *  counts as naming it. 1 at once without a partition, with the opt-out
 *  annotation, without a RestApi, or when its Controller is being deleted
 *  too (an uninstall: no slurmctld is reconfigured without it); bounded:
 *  after an hour, 1 with a Warning. */
int nss_jobrec_clear(operator *op, const sobj *nodeset, const cJSON *ns, const nsp_spec *sp);
/** Start of a pass: forget the last pass's condemnations and drains, and
 *  ask the Controller's node cache for job deadlines. (Slurm node events
 *  reach the owning NodeSet through an index of the pods store by Slurm
 *  node name, kept by the store itself: nothing is rebuilt per pass.) */
void nss_observe(operator *op, const sobj *nodeset);
/** A pod must go: cordon and drain it; NSS_DELETE when it may be deleted now. */
int nss_condemn(operator *op, const sobj *nodeset, const cJSON *ctl, const sobj *pod,
                          const char *why);
/** After scaling and updates (expectations satisfied): cordon/uncordon sync,
 *  deadlines, topology, features, registration drift, pruning, the
 *  ScheduledUpdate reservation. update_hash is the update revision. */
void nss_sync(operator *op, const sobj *nodeset, const cJSON *ctl, const cJSON *ns, const nsp_spec *sp,
              const nsb_pod *pods, size_t n, const char *update_hash, const nss_actions *act);
/** A full pass that waits for its creates or deletes to be seen decides
 *  nothing over the pod list (it may not show them yet), but a pod that the
 *  last deciding pass (nss_sync) condemned, for this generation of the
 *  NodeSet, needs no count to go: it is judged again as a deciding pass
 *  would (Slurm readable, its node drained by us and read fresh) and
 *  deleted through act->delete_pod. No new victim is ever chosen here. At
 *  a real API server's pace, the busy pods of an 8,192-pod scale-in
 *  otherwise waited up to 53 s after their jobs, until kube-apiserver had
 *  processed the 8,176 idle pods' deletions. */
void nss_release(operator *op, const sobj *nodeset, const nsb_pod *pods, size_t n, const nss_actions *act);
/** Every pass, with the status: pod conditions, pod-protect labels, pod info
 *  in the node comments, and the Slurm counts for the NodeSet status (the
 *  last known counts while Slurm cannot be read). */
void nss_status(operator *op, const sobj *nodeset, const cJSON *ctl, const cJSON *ns, const nsp_spec *sp,
                const nsb_pod *pods, size_t n, nsb_slurm_counts *out);

/** For the NodeSet reconciler's incremental passes: non-zero when the Slurm
 *  side of this NodeSet has nothing to do for any pod (its Controller has no
 *  RestApi, so nss_sync and nss_status touch no pod) and
 *  nothing of the last pass is pending (no condemned pod, drain or blocked
 *  condition). */
int nss_quiet(operator *op, const sobj *nodeset);

/** For the NodeSet reconciler's incremental passes with a RestApi: non-zero
 *  when nothing of the Slurm side needs every pod: the client is ready,
 *  the last full pass ran nss_sync and counted the nodes, the table was not
 *  held, and no condemnation, drain, blocked condition, registration drift
 *  or reservation write is pending; not with a ScheduledUpdate strategy. */
int nss_calm(operator *op, const sobj *nodeset, const nsp_spec *sp);
/** NSI_SLURM_* (nodeset_incr.h) of the pod's Slurm node as the node cache
 *  lists it now (0 when not listed or the client is not ready): its share
 *  of the counts nss_status adds up. */
unsigned nss_pod_slurm_bits(operator *op, const sobj *nodeset, const sobj *pod);
enum { NSS_STEP_DONE = 0, NSS_STEP_FULL = 1 };
/** An incremental pass's Slurm work for one pod that changed (or whose
 *  Slurm node did), while nss_calm holds: what nss_sync and nss_status do
 *  for it (deadline, topology, cordon sync, features, conditions, the
 *  protect label, pod info, a stale DOWN), with uncordon_ok as nss_sync
 *  finds it (no scale-in under way). sync 0 (writes of the NodeSet in
 *  flight, when a full pass runs nss_status but not nss_sync): nss_status's
 *  share only. NSS_STEP_FULL,
 *  having written nothing for the pod, when only a full pass may decide:
 *  a Ready pod whose node the table lacks (registration drift), or the
 *  client not ready. Never condemns or deletes. */
int nss_pod_step(operator *op, const sobj *nodeset, const cJSON *ns, const nsp_spec *sp, const nsb_pod *p,
                 const char *update_hash, int uncordon_ok, int sync);
/** Why the last pass kept condemned pods it could not drain (a reason
 *  such as "DrainBlockedNoRestApi"; NULL when none) and, in *message, the
 *  condition message. */
const char *nss_blocked(operator *op, const sobj *nodeset, const char **message);
/** Whether obj's metadata.finalizers holds name. */
int nss_has_finalizer(const cJSON *obj, const char *name);
/** Add (want 1) or remove a finalizer of a NodeSet, with a merge patch
 *  guarded by its resourceVersion; nothing when already so or in flight. */
void nss_set_finalizer(operator *op, const sobj *nodeset, const char *name, int want);
/** Whether the NodeSet opted out of drain before delete (NSS_ANN_NO_DRAIN). */
int nss_delete_without_drain(const sobj *nodeset);
/** The Slurm node name of a pod, for every mode, as slurmd -Z takes it
 *  (gethostname() whole, case kept: 22.05, 24.11 and 26.05): with
 *  hostNetwork (both modes) the full name of the Node it is bound to ("" while not
 *  bound: no Slurm node can exist), else spec.hostname (StatefulSet
 *  ordinal hostnames, DaemonSet hostnames: the Node's name to its first
 *  dot, or its override), else the pod name. The only mapping: nothing
 *  else may derive it (nsb_slurm_node_name does the arithmetic). Points
 *  into the pod's cached data. */
const char *nss_pod_slurm_name(const sobj *pod);
/** 1 when nss_pod_slurm_name() is certainly the name the pod's slurmd
 *  registers under (no hostNetwork: the kubelet sets the kernel hostname
 *  the builder chose); 0 when it is the host's own name, only guessed from
 *  the Node's (case, dots, overrides may differ), so that Slurm's "no such
 *  node" for it proves nothing until a read has shown the node as the
 *  pod's. */
int nss_pod_slurm_name_exact(const sobj *pod);
/** A pod (other than the one of uid except_uid, and not one owned by
 *  except_owner_uid; NULL: none) whose Slurm name is `name` and whose
 *  NodeSet (any namespace) uses the Controller ctl_key ("ns/name"); NULL
 *  when none. Through the pods store's index by Slurm name: O(pods of that
 *  name). Names must be unique per Controller
 *  (docs/internals/DRAIN-SAFETY.md#names). */
const sobj *nss_name_holder(operator *op, const char *ctl_key, const char *name, const char *except_uid,
                            const char *except_owner_uid);

/** Whether the Node is unhealthy by --unhealthy-node-* (nodehealth.h):
 *  DaemonSet mode creates no pod there until it is healthy again. */
int nss_health_keep_off(operator *op, const char *node);
/** Keep a StatefulSet-mode pod about to be created off the unhealthy Nodes
 *  (its required node affinity gets metadata.name NotIn them, at most 256). */
void nss_health_avoid(operator *op, cJSON *pod);

/* ---- pure helpers (exposed for tests) ---- */

/** The SlurmNodeState* condition bits (PSC_*, watchers/kinds.h) of a node. */
uint32_t nss_condition_bits(const sm_node *n);
/** Sanitise a cordon reason: tabs and newlines become spaces, other control
 *  characters are dropped, the ends trimmed, at most 256 characters kept
 *  (UTF-8 sequences are not split); malloc'd. */
char *nss_sanitize_reason(const char *s);
/** The pod info JSON written into the Slurm node comment. */
char *nss_pod_info(const char *ns, const char *pod, const char *node, const char *nodeset, const char *uid);
/** The features to set on a Slurm node so that its "k8s/" features are
 *  exactly "k8s/<v>" for each comma-separated v of spec (NULL: none), and
 *  every other feature of current is kept. Sorted, de-duplicated; NULL when
 *  nothing would change. */
char *nss_merge_features(const char *current, const char *spec);
/** The same with the non-"k8s/" features taken from base (comma-separated)
 *  instead of current when base is not NULL: what slurmd's --conf gives the
 *  pod (nsb_slurmd_features), which Slurm does not take from a dynamic
 *  node's later registrations. */
char *nss_merge_features_base(const char *current, const char *base, const char *spec);

/** The CPUs and RealMemory (MB) a slurmd --conf (nsb_slurmd_conf: items
 *  separated by NSB_CONF_SEP, keys in any case) gives the node; -1 for one
 *  it does not set, or sets to something other than a plain count. */
void nss_conf_resources(const char *conf, int *cpus, int64_t *mem_mb);

#endif
