/* nodetaint: NodeSet spec.taintKubeNodes (docs/compat.md#taintkubenodes).
 *
 * A Kubernetes Node that runs a pod of a NodeSet with taintKubeNodes: true
 * (the pod Running, not terminating, its controller ownerReference that
 * NodeSet) carries the taint nodeset.slinky.slurm.net/worker with effect
 * NoExecute, so pods that do not tolerate it leave the Node and no new ones
 * come; every worker pod tolerates it (nodeset_build). A Node without such a
 * pod loses the taint: when the last pod goes, is deleted, or its NodeSet
 * turns taintKubeNodes off or is deleted. Only that one taint is ever added
 * or removed; the Node's other taints are kept as they are.
 *
 * Its own work queue of Node names, fed by the pods (an index by
 * spec.nodeName), Nodes and NodeSets caches; a pass reads the caches and
 * sends at most one merge patch of spec.taints, guarded by the Node's
 * resourceVersion (a 409 is read again, never overwrites another writer's
 * taints). Kept out of the NodeSet engine: it only reads what that engine
 * writes.
 */
#ifndef OP_NODETAINT_H
#define OP_NODETAINT_H

#include <cjson/cJSON.h>

#include "reconcilers/operator.h"

#define NODETAINT_CONTROLLER "nodetaint-controller"

extern const op_reconciler RC_NODETAINT;

/** The reconciler's state (queue, pending patches, the pods-by-node index),
 *  made before setup and freed once the operator's client has closed,
 *  through the registry (RC_NODETAINT). */
typedef struct nodetaint_state nodetaint_state;
/** op's (never NULL from op_start on). */
nodetaint_state *nodetaint_of(const operator *op);

/** Whether the taints array (a Node's spec.taints, may be NULL) holds the
 *  worker taint (key nodeset.slinky.slurm.net/worker, effect NoExecute). */
int nodetaint_has(const cJSON *taints);

/** The Node's spec.taints as it should be: taints with the worker taint
 *  added (want != 0, appended, no value, as Slinky's) or removed (want ==
 *  0). NULL when taints already agree (nothing to write); else a new
 *  array (caller frees; possibly empty). */
cJSON *nodetaint_desired(const cJSON *taints, int want);

#endif
