#include "reconcilers/reconcilers.h"

#include "reconcilers/nodeset.h"
#include "reconcilers/slurmclient.h"

const op_reconciler *const op_reconcilers[] = {
    &RC_SLURMCLIENT, /* before the NodeSets: they ask it for Slurm clients */
    &RC_NODESET,
};

const size_t op_reconciler_count = sizeof(op_reconcilers) / sizeof(op_reconcilers[0]);
