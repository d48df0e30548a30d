/* accounting: the Accounting reconciler (docs/compat.md#accounting-objects).
 *
 * For each Accounting CR that runs in Kubernetes: the Service
 * `<name>-accounting` (port "slurmdbd", 6819), the Secret
 * `<name>-accounting` holding slurmdbd.conf (with the database password),
 * and the StatefulSet `<name>-accounting` running one slurmdbd, whose
 * slurmdbd-conf-hash annotation is computed from the Secret built in the
 * same pass. An external Accounting (spec.external) gets nothing: the
 * Controller's slurm.conf points at its externalConfig.
 *
 * While NodeSets of a Controller that names it (and that it admits) exist,
 * the Accounting holds CRC_NODESETS_FINALIZER, as the Controller and the
 * RestApi do: deleted with its cluster, it goes after the drain, so that
 * slurm.conf keeps its accounting lines and slurmctld is not rolled meanwhile.
 *
 * Watches: the CR; its StatefulSet, Service and Secret; a Secret it names
 * (slurm key, JWT key, database password); the ConfigMap of its jwksKeyRef;
 * the Controllers naming it and their NodeSets (added or gone).
 * No periodic requeue.
 */
#ifndef OP_ACCOUNTING_H
#define OP_ACCOUNTING_H

#include "reconcilers/operator.h"

#define ACCOUNTING_CONTROLLER "accounting-controller"

extern const op_reconciler RC_ACCOUNTING;

/** The reconciler's own state (its crc_module), made before setup and
 *  freed once the operator's client has closed, through the registry
 *  (RC_ACCOUNTING). */
typedef struct accounting_state accounting_state;
/** op's (never NULL from op_start on). */
accounting_state *accounting_of(const operator *op);

#endif
