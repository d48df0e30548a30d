/* nodeset_precreate: the Slurm node records a scale-out makes before its pods' slurmd register.
 *
 * slurmctld creates a dynamic node's record when its slurmd first registers, and each creation rebuilds the
 * partitions' node bitmaps and the cluster's TRES over the whole node table: a storm of N registrations costs
 * N² (docs/internals/NODESET.md, "Node records made first"). One create request that names a hostlist pays
 * that once, so when a NodeSet scales out, the records of the new pods are made FUTURE first, in one request,
 * and each slurmd then registers a node that exists.
 *
 * A record made first keeps its own hardware when its slurmd registers: it is exact only when it is made
 * from the same line slurmd gets and that line declares the hardware. So a record is made first only when
 * the pods' --conf (nsb_slurmd_conf) declares CPUs= and RealMemory=, and Gres= when the pods ask for a GPU;
 * otherwise the nodes register as they would have. The functions here are pure; nodeset_slurm.c sends.
 */
#ifndef OP_NODESET_PRECREATE_H
#define OP_NODESET_PRECREATE_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* A NodeSet annotated "false" has no records made first. */
#define NSPR_ANNOTATION "slurmop.slinky.slurm.net/precreate-nodes"
/* At most this many names a request: slurmctld holds its node write lock for the whole call. */
#define NSPR_BATCH_MAX 1024

/** Why a NodeSet's records are not made first (NSPR_OK: they may be). */
enum nspr_why {
    NSPR_OK = 0,
    NSPR_NO_CPUS,    /* the --conf has no CPUs= */
    NSPR_NO_MEMORY,  /* ... no RealMemory= */
    NSPR_NO_GRES,    /* the pods ask for a GPU and the --conf has no Gres= */
    NSPR_OPTED_OUT,  /* NSPR_ANNOTATION is "false" */
};

/** Whether records of pods with this --conf (NSB_CONF_SEP-separated items) may be made first; gpus: the pod
 *  template asks for a GPU (nspr_template_gpus); opted_out: the NodeSet's NSPR_ANNOTATION is "false". */
enum nspr_why nspr_check(const char *conf, int gpus, int opted_out);
/** A short text for logs ("the pods' --conf declares no CPUs="). */
const char *nspr_why_str(enum nspr_why why);
/** 1 when a container of the pod template (its "spec": containers and initContainers) asks for a resource
 *  named "<vendor>/gpu" (nvidia.com/gpu, amd.com/gpu) in its requests or limits. */
int nspr_template_gpus(const cJSON *pod_spec);
/** The create line of names: "NodeName=<hostlist> State=FUTURE <the --conf's items>", the items in their
 *  order. NULL when n is 0, a name cannot be in a hostlist, or an item holds a space. malloc'd. */
char *nspr_line(const char *conf, const char *const *names, size_t n);

#endif
