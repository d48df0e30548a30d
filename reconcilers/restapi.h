/* restapi: the RestApi reconciler (docs/compat.md#restapi-objects).
 *
 * For each RestApi CR: the Service `<name>-restapi` (port "slurmrestd",
 * 6820) and the Deployment `<name>-restapi` running slurmrestd against the
 * Controller its controllerRef names (slurm.conf from `<ctl>-config`, the
 * Controller's slurm key).
 *
 * Watches: the CR; its Deployment and Service; its Controller (the
 * Deployment's args and volumes follow the Controller's accountingRef and
 * slurmKeyRef); a Secret holding its Controller's slurm or JWT key. No
 * periodic requeue.
 */
#ifndef OP_RESTAPI_H
#define OP_RESTAPI_H

#include "reconcilers/operator.h"

#define RESTAPI_CONTROLLER "restapi-controller"

extern const op_reconciler RC_RESTAPI;

/** The reconciler's own state (its crc_module), made before setup and
 *  freed once the operator's client has closed, through the registry
 *  (RC_RESTAPI). */
typedef struct restapi_state restapi_state;
/** op's (never NULL from op_start on). */
restapi_state *restapi_of(const operator *op);

#endif
