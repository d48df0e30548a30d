#include "reconcilers/reconcilers.h"

#include "reconcilers/accounting.h"
#include "reconcilers/controller.h"
#include "reconcilers/loginset.h"
#include "reconcilers/nodeset.h"
#include "reconcilers/nodeset_slurm.h"
#include "reconcilers/nodeset_write.h"
#include "reconcilers/nodetaint.h"
#include "reconcilers/restapi.h"
#include "reconcilers/slurmclient.h"
#include "reconcilers/token.h"

const op_reconciler *const op_reconcilers[OPR__COUNT] = {
    [OPR_SLURMCLIENT] = &RC_SLURMCLIENT,
    [OPR_NODESET] = &RC_NODESET,
    [OPR_NODESET_SLURM] = &RC_NODESET_SLURM,
    [OPR_NODESET_WRITE] = &RC_NODESET_WRITE,
    [OPR_CONTROLLER] = &RC_CONTROLLER,
    [OPR_RESTAPI] = &RC_RESTAPI,
    [OPR_ACCOUNTING] = &RC_ACCOUNTING,
    [OPR_LOGINSET] = &RC_LOGINSET,
    [OPR_TOKEN] = &RC_TOKEN,
    [OPR_NODETAINT] = &RC_NODETAINT,
};
