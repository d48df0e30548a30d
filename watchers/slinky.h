/* slinky: where Slinky's six custom resources live in the API
 * (slinky.slurm.net/v1beta1, the kinds of crds/).
 *
 * core/kube.h describes the built-in Kubernetes types only: core is the
 * transport and knows no custom resource definition. The operator's
 * kinds are named here, one layer up, beside the caches that keep them.
 */
#ifndef OP_SLINKY_H
#define OP_SLINKY_H

#include "core/kube.h"

extern const kube_res SLINKY_CONTROLLERS, SLINKY_NODESETS, SLINKY_LOGINSETS, SLINKY_RESTAPIS,
    SLINKY_ACCOUNTINGS, SLINKY_TOKENS;

#endif
