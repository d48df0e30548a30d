/* nodeset_slurm: the Slurm side of the NodeSet engine (slinky-compat
 * §3.6-3.10): drain before delete, Slurm node state on pods, cordon sync,
 * pod info, deadlines, topology and features, registration drift, pruning
 * of defunct node records, and the ScheduledUpdate reservation. The NodeSet
 * reconciler calls these hooks at fixed points of its pass; each reads the
 * Controller's Slurm node cache (slurmclient.h) and queues batched Slurm
 * writes and Kubernetes patches, never waiting for either inside the pass.
 * Node cache events queue the NodeSet that owns the node (the pod whose
 * hostname is the Slurm node name), so a drain that completes is acted on
 * at once.
 *
 * Safety rules (DESIGN.md): a condemned pod is deleted only when Slurm says
 * its node is drained (DRAIN, not UNDRAIN, not ALLOCATED/MIXED/COMPLETING)
 * or positively reports that the node does not exist; an unknown state, an
 * unreachable Slurm, an error answer or a write not yet read back means
 * wait. Drains whose reason lacks the "slurm-operator: " prefix belong to
 * people: they are never undone, never overwritten. A Controller without
 * any RestApi has no way to ask Slurm: then, as Slinky does, pods are
 * deleted without a drain and a Warning event says so.
 *
 * Pass order: observe -> condemn* (scale-in, rolling update) -> sync (when
 * expectations are satisfied) -> status (always).
 */
#ifndef OP_NODESET_SLURM_H
#define OP_NODESET_SLURM_H

#include "reconcilers/nodeset_build.h"
#include "slurmio/model.h"
#include "reconcilers/operator.h"

enum nss_verdict { NSS_DELETE = 0, NSS_WAIT = 1 };

/* Drain reasons the operator writes all start with this; others are people's. */
#define NSS_REASON_PREFIX "slurm-operator: "
/* The finalizer that guarantees the ScheduledUpdate reservation is removed. */
#define NSS_RESV_FINALIZER "nodeset.slinky.slurm.net/reservation"
/* The ScheduledUpdate reservation of NodeSet <name>: NSS_RESV_PREFIX<name>. */
#define NSS_RESV_PREFIX "SlurmOperatorMaint-"

/** What nodeset_slurm_sync may ask of the NodeSet reconciler in a pass. */
typedef struct nss_actions {
    void *ctx;
    /* Delete a pod now (registration drift), with the reconciler's expectations. */
    void (*delete_pod)(void *ctx, const sobj *pod, const char *why);
    /* Condemn a pod (ScheduledUpdate maintenance): drain, then delete. */
    void (*condemn)(void *ctx, const sobj *pod, const char *why);
} nss_actions;

void nodeset_slurm_setup(operator *op);
int nodeset_slurm_start(operator *op);
void nodeset_slurm_stop(operator *op);
/** The NodeSet is gone: forget what was kept for it. */
void nodeset_slurm_forget(operator *op, const char *key);
/** Finalizer work on a NodeSet being deleted (delete the ScheduledUpdate
 *  reservation, then drop the finalizer); returns non-zero when the pass
 *  must stop here. */
int nodeset_slurm_finalize(operator *op, const sobj *nodeset, const cJSON *ns);
/** Start of a pass: forget the last pass's condemnations and drains, and
 *  ask the Controller's node cache for job deadlines. (Slurm node events
 *  reach the owning NodeSet through an index of the pods store by Slurm
 *  node name, kept by the store itself: nothing is rebuilt per pass.) */
void nodeset_slurm_observe(operator *op, const sobj *nodeset);
/** A pod must go: cordon and drain it; NSS_DELETE when it may be deleted now. */
int nodeset_slurm_condemn(operator *op, const sobj *nodeset, const cJSON *ctl, const sobj *pod,
                          const char *why);
/** After scaling and updates (expectations satisfied): cordon/uncordon sync,
 *  deadlines, topology, features, registration drift, pruning, the
 *  ScheduledUpdate reservation. update_hash is the update revision. */
void nodeset_slurm_sync(operator *op, const sobj *nodeset, const cJSON *ctl, const cJSON *ns,
                        const nsb_pod *pods, size_t n, const char *update_hash, const nss_actions *act);
/** Every pass, with the status: pod conditions, pod-protect labels, pod info
 *  in the node comments, and the Slurm counts for the NodeSet status (the
 *  last known counts while Slurm cannot be read). */
void nodeset_slurm_status(operator *op, const sobj *nodeset, const cJSON *ctl, const cJSON *ns,
                          const nsb_pod *pods, size_t n, nsb_slurm_counts *out);

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

#endif
