/* kinds: what the operator keeps of each watched resource type.
 *
 * Pods are the many objects (8,192+ per fleet), so a pod is kept as a
 * compact sobj plus the pod_proj below, with only the annotations the
 * NodeSet engine reads. Nodes keep a trimmed JSON (name, labels, the
 * annotations we read, taints, unschedulable, conditions) because the
 * DaemonSet predicates evaluate it. Everything else the operator watches
 * (the six CRs and the objects it owns: Services, ConfigMaps, Secrets,
 * StatefulSets, Deployments, PDBs, ControllerRevisions, PVCs) exists in small
 * numbers and keeps its full JSON, because reconcilers diff it field by field.
 */
#ifndef OP_KINDS_H
#define OP_KINDS_H

#include <stdint.h>

#include "core/store.h"

/* Same order as nsb_phase (reconcilers/nodeset.c asserts it at compile time): POD_NONE is a pod the
 * API server has not given a phase yet. */
enum pod_phase { POD_NONE = 0, POD_PENDING, POD_RUNNING, POD_SUCCEEDED, POD_FAILED, POD_UNKNOWN };

/* Slurm node state conditions mirrored on pods (docs/compat.md#nodeset-conditions). */
enum pod_slurm_cond {
    PSC_ALLOCATED = 1 << 0,
    PSC_DOWN = 1 << 1,
    PSC_ERROR = 1 << 2,
    PSC_FUTURE = 1 << 3,
    PSC_IDLE = 1 << 4,
    PSC_MIXED = 1 << 5,
    PSC_UNKNOWN = 1 << 6,
    PSC_COMPLETING = 1 << 7,
    PSC_DRAIN = 1 << 8,
    PSC_FAIL = 1 << 9,
    PSC_INVALID = 1 << 10,
    PSC_INVALID_REG = 1 << 11,
    PSC_MAINTENANCE = 1 << 12,
    PSC_NOT_RESPONDING = 1 << 13,
    PSC_UNDRAIN = 1 << 14,
};
#define PSC_COUNT 15
/** Condition type ("SlurmNodeStateDrain") of a PSC_ bit index. */
extern const char *const pod_slurm_cond_types[PSC_COUNT];

typedef struct pod_proj {
    uint8_t phase;          /* enum pod_phase */
    uint8_t ready;          /* Ready condition True */
    uint8_t scheduled;      /* bound to a node */
    uint8_t containers_ready;
    uint8_t host_network;   /* spec.hostNetwork: slurmd registers under the Node's name */
    int64_t ready_since;    /* lastTransitionTime of Ready=True, unix seconds */
    const char *node_name;  /* interned, NULL when unscheduled */
    const char *hostname;   /* spec.hostname, interned */
    uint32_t slurm_conds;   /* PSC_ bits present with status True */
    uint32_t slurm_msg_hash; /* pod_slurm_cond_hash of those conditions' types and messages */
    uint32_t restarts;      /* sum of container restart counts */
} pod_proj;

extern const store_kind KIND_PODS, KIND_NODES, KIND_FULL_NAMESPACED, KIND_FULL_CLUSTER, KIND_REVISIONS;

/** A hash of the True SlurmNodeState* conditions with their messages:
 *  the XOR over conditions of a hash of "type\0message". For the set a pod
 *  would get (every bit of bits with the same message) pass that message;
 *  the projection computes it from the pod's actual conditions, so equal
 *  values mean "nothing to write" (docs/compat.md#nodeset-conditions). */
uint32_t pod_slurm_cond_hash(uint32_t bits, const char *message);
uint32_t pod_slurm_cond_hash1(const char *type, const char *message);

/** Which Node condition types the trimmed Nodes keep (comma-separated, only
 *  while True): the --propagated-node-conditions, whose reasons become drain
 *  reasons on cordon. Only these and the health types below are read, and at 8,192 Nodes
 *  they are most of a Node's bytes. Call before the caches fill. */
void kinds_keep_node_conditions(const char *csv);
/** Which Node condition types the trimmed Nodes keep whatever their status,
 *  with lastTransitionTime: the --unhealthy-node-condition types
 *  (reconcilers/nodehealth.h). Call before the caches fill. */
void kinds_keep_node_health(const char *csv);

/** The pod projection of an sobj from a pods store (never NULL there). */
static inline const pod_proj *pod_of(const sobj *o)
{
    return (const pod_proj *)o->proj;
}

/* Pod annotation keys the NodeSet engine reads (kept by KIND_PODS). */
#define ANN_POD_CORDON "nodeset.slinky.slurm.net/pod-cordon"
#define ANN_POD_DELETION_COST "nodeset.slinky.slurm.net/pod-deletion-cost"
#define ANN_POD_DEADLINE "nodeset.slinky.slurm.net/pod-deadline"
#define ANN_TOPOLOGY "topology.slinky.slurm.net/spec"
#define ANN_FEATURES "features.slinky.slurm.net/spec"
#define ANN_NODE_CORDON_REASON "nodeset.slinky.slurm.net/node-cordon-reason"
#define ANN_HOSTNAME_OVERRIDE "nodeset.slinky.slurm.net/hostname-override"
/* On slurmctld pods: the hash of the slurm.conf ConfigMap they should see
 * (reconcilers/controller.c); a change makes their kubelet refresh the
 * projected /etc/slurm now instead of at its next periodic sync. */
#define ANN_CONTROLLER_CONFIG "controller.slinky.slurm.net/config-hash"
/* On a NodeSet pod created while Nodes were unhealthy: the Nodes its
 * affinity keeps it off, comma-separated (reconcilers/nodehealth.h). */
#define ANN_POD_AVOIDED "slurmop.slinky.slurm.net/avoided-unhealthy-nodes"

#endif
