/* reconcilers: the registry of reconciler modules the operator runs. */
#ifndef OP_RECONCILERS_H
#define OP_RECONCILERS_H

#include <stddef.h>

#include "reconcilers/operator.h"

extern const op_reconciler *const op_reconcilers[];
extern const size_t op_reconciler_count;

#endif
