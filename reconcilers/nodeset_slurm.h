/* nodeset_slurm: the Slurm side of the NodeSet engine (slinky-compat
 * §3.6-3.10): drain before delete, Slurm node state on pods, cordon sync,
 * pod info, deadlines, topology and features, and the ScheduledUpdate
 * reservation. The NodeSet reconciler calls these hooks at fixed points of
 * its pass; each reads the Slurm node cache and queues batched Slurm
 * writes, never waiting for Slurm inside the pass.
 *
 * Safety rules (DESIGN.md): a condemned pod is deleted only when Slurm says
 * its node is drained (DRAIN and not busy) or positively reports that the
 * node does not exist; an unknown state, an unreachable Slurm or an error
 * answer means wait. Drains whose reason lacks the "slurm-operator: " prefix
 * belong to people and are never undone. A Controller without any RestApi
 * has no way to ask Slurm: then, as Slinky does, pods are deleted without a
 * drain and a Warning event says so.
 */
#ifndef OP_NODESET_SLURM_H
#define OP_NODESET_SLURM_H

#include "reconcilers/nodeset_build.h"
#include "reconcilers/operator.h"

enum nss_verdict { NSS_DELETE = 0, NSS_WAIT = 1 };

void nodeset_slurm_setup(operator *op);
int nodeset_slurm_start(operator *op);
void nodeset_slurm_stop(operator *op);
/** The NodeSet is gone: forget what was cached for it. */
void nodeset_slurm_forget(operator *op, const char *key);
/** Finalizer work on a NodeSet being deleted (the reservation); returns
 *  non-zero when the pass must stop here. */
int nodeset_slurm_finalize(operator *op, const sobj *nodeset, const cJSON *ns);
/** Before scaling: learn which pods map to which Slurm nodes. */
void nodeset_slurm_observe(operator *op, const sobj *nodeset, const cJSON *ctl, const nsb_pod *pods, size_t n);
/** A pod must go: cordon and drain it; NSS_DELETE when it may be deleted now. */
int nodeset_slurm_condemn(operator *op, const sobj *nodeset, const cJSON *ctl, const sobj *pod, const char *why);
/** After scaling: cordon/uncordon sync, pod conditions and labels, pod info,
 *  deadlines, topology, features, registration drift. */
void nodeset_slurm_sync(operator *op, const sobj *nodeset, const cJSON *ctl, const cJSON *ns, const nsb_pod *pods,
                        size_t n);
/** Slurm state counts for the NodeSet status. */
void nodeset_slurm_counts(operator *op, const sobj *nodeset, const cJSON *ctl, const nsb_pod *pods, size_t n,
                          nsb_slurm_counts *out);

#endif
