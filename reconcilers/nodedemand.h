/* nodedemand: NodeSets that follow Slurm's queue. Pure (no I/O): the
 * NodeSet engine's Slurm side (nodeset_slurm.c) reads the pending jobs and
 * its nodes, asks this module how many nodes the queue wants of a NodeSet
 * and how many replicas it should have, writes the NodeSet's replicas and
 * status, and the normal scale-in path (drain, proof, delete) does the
 * rest. docs/internals/NODE-DEMAND.md says why it has this shape.
 *
 * A NodeSet opts in with the annotation ND_ANNOTATION, "max=N" with
 * optional "min=M" (default 0) and "cooldown=S" (seconds, or with an s, m
 * or h suffix; default 300), separated by commas. Every NodeSet of a
 * Controller that opts in shares that Controller's queue:
 *  - a PENDING job whose reason says it waits for nodes (nd_waits) is
 *    counted on one NodeSet: the first, by key, whose Slurm partitions meet
 *    the job's and whose max holds the job's node count (nd_route); a job
 *    that no such NodeSet can ever hold is reported, not counted;
 *  - a NodeSet wants its busy nodes plus the nodes its jobs ask for, within
 *    [min, max]; it gives back only nodes idle past the cool-down (nd_want).
 */
#ifndef OP_NODEDEMAND_H
#define OP_NODEDEMAND_H

#include <stddef.h>
#include <stdint.h>

#define ND_ANNOTATION "slurmop.slinky.slurm.net/autoscale"
#define ND_DEFAULT_COOLDOWN_S 300u
/* The largest max accepted: the most nodes one slurm.conf admits is
 * Slurm's to say (MaxNodeCount), this only stops a typo's million. */
#define ND_MAX_REPLICAS 65536

typedef struct nd_policy {
    int32_t min, max;
    uint32_t cooldown_s;
} nd_policy;

/** Parse the annotation's text into p. 0, or OP_EINVAL with a sentence
 *  naming the bad word in err (max missing, min > max, unknown key, a
 *  number out of range, a key given twice). */
int nd_parse(const char *text, nd_policy *p, char *err, size_t errlen);

/** Whether a pending job with this state_reason waits for nodes (and more
 *  nodes would let it run): "None" (not scheduled yet), "Resources",
 *  "Priority", "ReqNodeNotAvail...", "Nodes required for job are DOWN,
 *  DRAINED or reserved ...". Held jobs, dependencies, begin times, limits
 *  (QOS, association, partition) and reasons this module does not know
 *  are not demand: more nodes would not start them. */
int nd_waits(const char *reason);

/** 1 when the comma-separated lists a and b share an item. */
int nd_lists_meet(const char *a, const char *b);

/** A NodeSet that follows the queue, as nd_route sees it. */
typedef struct nd_set {
    const char *partitions; /* comma-separated Slurm partitions it serves */
    int32_t max;
} nd_set;

#define ND_NO_SET (-1)  /* no NodeSet serves the job's partitions: not ours */
#define ND_NEVER_FITS (-2) /* some serve them, none can hold its node count */

/** The index in sets[0..n-1] of the NodeSet that counts a job of these
 *  partitions asking for nodes nodes, or ND_NO_SET / ND_NEVER_FITS. */
int nd_route(const char *job_partitions, int32_t nodes, const nd_set *sets, size_t n);

/** The replicas a NodeSet of policy p should have: busy nodes (with or
 *  holding a job) plus demand (nodes its pending jobs ask for), when that
 *  is more than replicas; otherwise replicas less the nodes idle past the
 *  cool-down (idle_cooled), never below what busy + demand needs; always
 *  within [min, max]. */
int32_t nd_want(const nd_policy *p, int32_t replicas, int32_t busy, int32_t demand, int32_t idle_cooled);

#endif
