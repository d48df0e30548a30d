#include "reconcilers/reconcilers.h"

#include "reconcilers/accounting.h"
#include "reconcilers/controller.h"
#include "reconcilers/loginset.h"
#include "reconcilers/nodeset.h"
#include "reconcilers/nodetaint.h"
#include "reconcilers/restapi.h"
#include "reconcilers/slurmclient.h"
#include "reconcilers/token.h"

const op_reconciler *const op_reconcilers[] = {
    &RC_SLURMCLIENT, /* first: the NodeSets and the Controllers ask it for Slurm clients */
    &RC_NODESET, &RC_CONTROLLER, &RC_RESTAPI, &RC_ACCOUNTING, &RC_LOGINSET, &RC_TOKEN, &RC_NODETAINT,
};

const size_t op_reconciler_count = sizeof(op_reconcilers) / sizeof(op_reconcilers[0]);
