/* nodehealth: which Kubernetes Nodes are unhealthy for Slurm, and how many
 * of a NodeSet's Slurm nodes may be out for health at once. Pure (no I/O):
 * the NodeSet engine's Slurm side (nodeset_slurm.c) drains the Slurm node
 * of a pod on such a Node, deletes the pod once the drain proof holds (the
 * one rule of nodeset_slurm.h, nss_condemn), keeps the replacement off the
 * Node, and undoes its own drain when the Node is healthy again.
 *
 * A Node is unhealthy when one of its conditions has a configured type and
 * status (--unhealthy-node-condition TYPE[=STATUS], STATUS "True" when not
 * given) or it carries a taint with a configured key
 * (--unhealthy-node-taint KEY). Both default to none: the feature is off.
 * At most --unhealthy-max-share percent of a NodeSet (at least one node) is
 * drained or replaced for health at once, so that a health signal gone
 * wrong on every Node cannot empty the fleet.
 * docs/internals/NODE-HEALTH.md says why it has this shape.
 */
#ifndef OP_NODEHEALTH_H
#define OP_NODEHEALTH_H

#include <stddef.h>
#include <stdint.h>

#include "core/json.h"

#define NH_MAX_RULES 32
#define NH_DEFAULT_SHARE_PCT 10u
/* The pod condition written on a pod whose Node is unhealthy while its
 * Slurm node is drained for health. */
#define NH_POD_CONDITION "SlurmNodeUnhealthy"

typedef struct nh_rule {
    char *key;    /* condition type, or taint key */
    char *status; /* condition status that means unhealthy ("True" unless given); NULL for a taint */
} nh_rule;

typedef struct nh_config {
    nh_rule conds[NH_MAX_RULES];
    size_t n_conds;
    nh_rule taints[NH_MAX_RULES];
    size_t n_taints;
    unsigned max_share_pct; /* 1..100 */
} nh_config;

/** An empty configuration (nothing unhealthy, share NH_DEFAULT_SHARE_PCT). */
void nh_config_init(nh_config *c);
void nh_config_free(nh_config *c);
/** Add "TYPE" or "TYPE=STATUS"; OP_EINVAL with a message in err for an
 *  empty or malformed one, OP_ETOOBIG past NH_MAX_RULES. */
int nh_add_condition(nh_config *c, const char *arg, char *err, size_t errlen);
/** Add a taint key (any value, any effect). */
int nh_add_taint(nh_config *c, const char *arg, char *err, size_t errlen);
/** "10" or "10%": 1..100. */
int nh_set_share(nh_config *c, const char *arg, char *err, size_t errlen);
/** Non-zero when any rule is configured. NULL: 0. */
int nh_enabled(const nh_config *c);
/** The condition types, comma-separated (for the Nodes store's trim); NULL
 *  when none. malloc'd. */
char *nh_condition_types(const nh_config *c);

/** Whether node (a Node's JSON: status.conditions, spec.taints) is
 *  unhealthy. 1: why holds "<TYPE>: <message>" (the condition's message,
 *  else its reason) or "<taint key>: <value>" (else its effect), and
 *  *since_s, when not NULL, the condition's lastTransitionTime or the
 *  taint's timeAdded (0 when absent). 0: healthy. The first rule that
 *  matches wins, conditions before taints, in the order given. */
int nh_node_unhealthy(const nh_config *c, const cJSON *node, char *why, size_t len, int64_t *since_s);

/** How many of a NodeSet of `fleet` Slurm nodes may be out for health at
 *  once: fleet * share / 100 rounded down, at least 1 (0 for an empty
 *  fleet). */
size_t nh_cap(const nh_config *c, size_t fleet);

/** A pod on an unhealthy Node that is not out for health yet. */
typedef struct nh_cand {
    const char *name; /* its Slurm node name */
    int64_t since_s;  /* when its Node turned unhealthy (0: unknown, last) */
    int admit;        /* set by nh_admit */
} nh_cand;

/** Admit candidates while fewer than cap are out: the `held` already out
 *  count first, then the candidates longest unhealthy (since_s, then
 *  name). Sets admit on those chosen; returns how many. */
size_t nh_admit(nh_cand *c, size_t n, size_t held, size_t cap);

/** The drain reason for why: "slurm-operator: <why>", control characters
 *  dropped, at most 256 characters. malloc'd. */
char *nh_reason(const char *why);

/** Add to a pod's required node affinity (every nodeSelectorTerm, or one
 *  term when it has none) the field requirement metadata.name NotIn nodes,
 *  so that the scheduler keeps it off them, and name them in the annotation
 *  ANN_POD_AVOIDED (watchers/kinds.h): a user sees why the pod waits
 *  unscheduled, and the operator knows which NotIn names are its own (the
 *  template may have some too). n 0: nothing. Returns 0, or OP_EINVAL for a pod that is
 *  not an object. */
int nh_avoid_nodes(cJSON *pod, const char *const *nodes, size_t n);

/** 1 when the ANN_POD_AVOIDED value avoided (NULL: none) names a Node for
 *  which usable(node, data) is 1: one healthy again, that the pod's
 *  affinity still keeps it off. */
int nh_avoids_usable(const char *avoided, int (*usable)(const char *node, void *data), void *data);

#endif
