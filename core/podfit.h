/* podfit: does a pod belong on a Kubernetes Node?
 *
 * The predicates that both kubesim's scheduler and the NodeSet engine's
 * DaemonSet mode evaluate: spec.nodeName, spec.nodeSelector, required node
 * affinity (nodeSelectorTerms: ORed terms of ANDed matchExpressions on labels
 * and matchFields on metadata.name), taints and tolerations, and the
 * hostname-topology form of required pod anti-affinity. Inputs are the JSON
 * of a pod spec and of a Node; nothing is cached, nothing allocates beyond
 * the temporary selectors.
 */
#ifndef OP_PODFIT_H
#define OP_PODFIT_H

#include <cjson/cJSON.h>

#include "core/labels.h"

typedef struct fit_result {
    int should_run;      /* a new pod may be placed (DaemonSet: should exist) */
    int should_continue; /* an existing pod may keep running (untolerated NoExecute says no) */
    const char *reason;  /* static text for the first failed predicate, NULL when it fits */
} fit_result;

/** spec.nodeSelector is a subset of the Node's labels (true when absent). */
int fit_node_selector(const cJSON *podspec, const cJSON *node);
/** Required node affinity holds (true when absent). */
int fit_node_affinity(const cJSON *podspec, const cJSON *node);
/** A toleration list tolerates one taint. */
int fit_tolerates(const cJSON *tolerations, const cJSON *taint);

/** The DaemonSet controller's view: nodeName, nodeSelector, node affinity,
 *  taints (untolerated NoSchedule or NoExecute: should not run; untolerated
 *  NoExecute: should not continue). Node unschedulable is ignored, as
 *  DaemonSet pods tolerate it. */
void fit_daemon(const cJSON *podspec, const cJSON *node, fit_result *out);
/** fit_daemon with the Node's labels read through `labels` (ctx is its
 *  first argument) instead of node's metadata.labels, for a cache that keeps
 *  them apart from the Node's JSON. */
void fit_daemon_labels(const cJSON *podspec, const cJSON *node, lsel_lookup_fn labels, void *ctx,
                       fit_result *out);

/** The scheduler's view: as fit_daemon, but an unschedulable Node accepts no
 *  new pods unless the pod tolerates node.kubernetes.io/unschedulable. */
void fit_schedule(const cJSON *podspec, const cJSON *node, fit_result *out);

/** True when a required pod anti-affinity term of podspec with topology key
 *  kubernetes.io/hostname selects a pod with these labels (the caller checks
 *  both directions for pods on the same node). */
int fit_anti_affinity_conflict(const cJSON *podspec, const char *pod_ns, const cJSON *other_labels,
                               const char *other_ns);

#endif
