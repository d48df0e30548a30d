/* controller: the Controller reconciler (docs/compat.md#controller-objects,
 * docs/compat.md#generated-files).
 *
 * For each Controller CR, in order: the headless Service
 * `<ctl>-controller-internal`, the Service `<ctl>-controller`, the ConfigMap
 * `<ctl>-config` (slurm.conf listing the NodeSets that reference the
 * Controller, cgroup.conf unless a config file supplies one), the
 * StatefulSet `<ctl>-controller` (its config hash annotation computed from
 * the ConfigMap built in the same pass, so one pass rolls the pods), and the
 * ServiceMonitor `<ctl>-controller` when metrics and the ServiceMonitor are
 * enabled and the servicemonitors.monitoring.coreos.com CRD exists (it is
 * deleted when they are switched off). An external Controller gets only the
 * ConfigMap. Then the slurmctld pods are labelled: the active one gets
 * `controller.slinky.slurm.net/active=true`, the others lose it (the
 * Service selects on it).
 *
 * Watches (what queues a Controller again): the CR; its StatefulSet,
 * Services, ConfigMaps and Secrets; an Accounting its accountingRef names;
 * a NodeSet that references it being added, removed, or changing its
 * controllerRef, partition or hostname; a Secret its key refs name; a
 * ConfigMap its configFileRefs, script refs or jwksKeyRef name; its
 * existingClaim PVC; its slurmctld pods appearing, going or changing the
 * active label. No periodic requeue: events drive it.
 */
#ifndef OP_CONTROLLER_H
#define OP_CONTROLLER_H

#include "reconcilers/operator.h"

#define CONTROLLER_CONTROLLER "controller-controller"

extern const op_reconciler RC_CONTROLLER;

/** The reconciler's own state (its queue and per-CR memory, the
 *  ServiceMonitor checks, the active-label writes, the ping hook), made before
 *  setup and freed once the operator's client has closed, through the
 *  registry (RC_CONTROLLER). */
typedef struct controller_state controller_state;
/** op's (never NULL from op_start on). */
controller_state *controller_of(const operator *op);

/** Queue a Controller ("ns/name") of op for reconciliation (no-op when not
 *  leading). */
void controller_enqueue(operator *op, const char *key);

/** Which slurmctld of a Controller answers (the HA case, docs/compat.md#active-slurmctld-ha:
 *  Slinky pings every slurmctld through slurmrestd and marks the first one
 *  that responds). Returns the ordinal (0..replicas-1) of the responding
 *  slurmctld; -1 when there is no Slurm to ask (no RestApi: pod 0 is taken
 *  as active, as Slinky does); CONTROLLER_PING_UNKNOWN when Slurm cannot
 *  say (no answer yet, slurmrestd unreachable, no slurmctld responds): the
 *  label then stays where it is, and goes to pod 0 only when no pod has it
 *  (the Service needs an endpoint for Slurm to come up at all). Must not
 *  block: an implementation pings asynchronously, caches the answer and
 *  calls controller_enqueue() when it changes. */
#define CONTROLLER_PING_UNKNOWN (-2)
typedef int (*controller_ping_fn)(operator *op, const char *ns, const char *name, int replicas, void *data);

/** Plug op's Slurm ping in (NULL restores the default, which knows
 *  nothing and answers -1). Any time after the state is made: slurmclient
 *  does it in its setup. */
void controller_set_ping_hook(operator *op, controller_ping_fn fn, void *data);

#endif
