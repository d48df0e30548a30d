#include "reconcilers/nodeset_slurm.h"

#include <string.h>

#include "core/json.h"
#include "core/log.h"

/* Until slurmio is wired in, every Controller is treated as one without a
 * RestApi: there is no Slurm to ask, so pods are deleted without a drain
 * (Slinky's behaviour in that case) and Slurm counts stay at zero. */

void nodeset_slurm_setup(operator *op)
{
}

int nodeset_slurm_start(operator *op)
{
    return 0;
}

void nodeset_slurm_stop(operator *op)
{
}

void nodeset_slurm_forget(operator *op, const char *key)
{
}

int nodeset_slurm_finalize(operator *op, const sobj *nodeset, const cJSON *ns)
{
    return 0;
}

void nodeset_slurm_observe(operator *op, const sobj *nodeset, const cJSON *ctl, const nsb_pod *pods, size_t n)
{
}

int nodeset_slurm_condemn(operator *op, const sobj *nodeset, const cJSON *ctl, const sobj *pod, const char *why)
{
    return NSS_DELETE;
}

void nodeset_slurm_sync(operator *op, const sobj *nodeset, const cJSON *ctl, const cJSON *ns, const nsb_pod *pods,
                        size_t n)
{
}

void nodeset_slurm_counts(operator *op, const sobj *nodeset, const cJSON *ctl, const nsb_pod *pods, size_t n,
                          nsb_slurm_counts *out)
{
    memset(out, 0, sizeof(*out));
}
