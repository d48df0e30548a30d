/* nodeset: the NodeSet reconciler (docs/compat.md#nodeset;
 * the implementation: docs/internals/NODESET.md).
 *
 * A NodeSet's pods are created directly (no StatefulSet or DaemonSet
 * objects), like Slinky does: ordinal pods in StatefulSet mode, one pod per
 * eligible Node in DaemonSet mode. Each pass is a planner: it reads the
 * caches, computes the difference between desired and observed, submits
 * asynchronous writes and returns; completions and watch events queue the
 * NodeSet again. Expectations stop a pass from repeating creates and deletes
 * still in flight; writes go out in slow-start batches without a per-pass
 * cap.
 *
 * Victims of a scale-in or a rolling update are "condemned": the pod is
 * cordoned, its Slurm node drained, and the pod deleted only once Slurm says
 * the node is drained (nodeset_slurm.h decides). Status is written through
 * the status subresource only when it changed.
 */
#ifndef OP_NODESET_H
#define OP_NODESET_H

#include <stdint.h>

#include "reconcilers/operator.h"

#define NODESET_CONTROLLER "nodeset-controller"

extern const op_reconciler RC_NODESET;

/** The reconciler's state (queue, expectations, incremental state, failed
 *  keys, backoffs, the last valid immutable fields: nodeset_immut.h), made
 *  before setup and freed once the operator's client has closed (write
 *  completions use it), through the registry (RC_NODESET). */
typedef struct nodeset_state nodeset_state;
/** op's (never NULL from op_start on). */
nodeset_state *nodeset_of(const operator *op);

/** Queue a NodeSet ("ns/name") for a full pass (no-op when not leading). */
void nodeset_enqueue(operator *op, const char *key);
/** Queue a NodeSet for a full pass after ms milliseconds (an earlier
 *  queueing wins). */
void nodeset_enqueue_after(operator *op, const char *key, uint64_t ms);

#endif
