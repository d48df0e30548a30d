/* reconcilers: the registry of the modules the operator runs and whose
 * states it holds (operator.h, op_reconciler). */
#ifndef OP_RECONCILERS_H
#define OP_RECONCILERS_H

#include <assert.h>
#include <stddef.h>

#include "reconcilers/operator.h"

/* The registry's slots, in setup, start and stop order: op_reconcilers[s]
 * is the module of slot s, op->state[s] its state. */
enum op_rc {
    OPR_SLURMCLIENT = 0, /* first: the NodeSets and the Controllers ask it for Slurm clients */
    OPR_NODESET,
    OPR_NODESET_SLURM, /* a part: the NodeSet reconciler's Slurm side */
    OPR_NODESET_WRITE, /* a part: the NodeSet engine's writer */
    OPR_CONTROLLER,
    OPR_RESTAPI,
    OPR_ACCOUNTING,
    OPR_LOGINSET,
    OPR_TOKEN,
    OPR_NODETAINT,
    OPR__COUNT
};

/* Every module, indexed by its slot (op_reconcilers[s]->slot == s). */
extern const op_reconciler *const op_reconcilers[OPR__COUNT];

/** The state of slot s in op: what its module's new_state made. Only
 *  that module calls it, through the typed accessor its header declares;
 *  never NULL from op_start until the operator frees it. */
static inline void *op_state(const operator *op, enum op_rc s)
{
    assert(s < OPR__COUNT && op->state != NULL && op->state[s] != NULL);
    return op->state[s];
}

#endif
