/* controller_build: the objects a Controller CR owns (docs/compat.md#controller-objects,
 * docs/compat.md#generated-files).
 *
 *   <ctl>-controller-internal  Service, headless, selects every slurmctld pod
 *   <ctl>-controller           Service, selects the active slurmctld pod
 *   <ctl>-config               ConfigMap: slurm.conf (+ cgroup.conf)
 *   <ctl>-controller           StatefulSet running slurmctld
 *   <ctl>-controller           ServiceMonitor (monitoring.coreos.com/v1)
 *
 * Each builder takes the Controller CR as the API server stores it, applies
 * the in-memory defaults to a private copy (ctlb_defaults), and returns a new
 * object (apiVersion, kind, metadata with name, namespace, labels,
 * annotations and a controller ownerReference to the CR, then spec or data)
 * in *out, owned by the caller. Labels of every object: the CR's labels, the
 * per-object user labels where the CR has them, then the operator's
 * {app.kubernetes.io/name: slurmctld, instance: <ctl>, component:
 * controller}, later ones winning; annotations: the CR's, then the user's.
 *
 * External Controllers (spec.external) only get the ConfigMap: every other
 * builder returns 0 with *out == NULL, meaning "skip" (an existing object is
 * left alone, as Slinky does).
 *
 * Errors: 0, or a negative OP_E* code with a sentence in *why (when why is
 * non-NULL; free it) and *out == NULL.
 */
#ifndef OP_CONTROLLER_BUILD_H
#define OP_CONTROLLER_BUILD_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "reconcilers/cluster_common.h"

#define CTLB_KIND "Controller"
#define CTLB_APP "slurmctld"
#define CTLB_COMPONENT "controller"

/** A copy of controller with Slinky's in-memory defaults:
 *  spec.persistence.enabled = true when absent, spec.ha.backups = 1 when
 *  spec.ha.enabled and absent. */
cJSON *ctlb_defaults(const cJSON *controller);

/** Object names for a Controller named ctl (malloc'd): "<ctl>-controller"
 *  (StatefulSet, Service, ServiceMonitor), "<ctl>-controller-internal",
 *  "<ctl>-config". */
char *ctlb_name(const char *ctl);
char *ctlb_internal_service_name(const char *ctl);
char *ctlb_config_name(const char *ctl);

/** The headless Service `<ctl>-controller-internal` (governing Service of
 *  the StatefulSet; pod DNS names in SlurmctldHost): clusterIP None,
 *  publishNotReadyAddresses, selector {name: slurmctld, instance: <ctl>},
 *  port "slurmctld" 6817 -> "slurmctld". The user's ServiceSpec is not
 *  applied (a LoadBalancer type would contradict clusterIP None); the
 *  user's service metadata is. */
int ctlb_internal_service(const cJSON *controller, cJSON **out, char **why);

/** The Service `<ctl>-controller`: the user's spec.service.spec, with the
 *  selector {name, instance, controller.slinky.slurm.net/active: "true"}
 *  (so that only the responding slurmctld receives traffic), port
 *  "slurmctld" = spec.service.port or 6817 (nodePort from
 *  spec.service.nodePort) -> target "slurmctld" appended to the user's
 *  ports, and spec.externalIPs always removed (CVE-2020-8554).
 *  OP_EINVAL when a user port clashes with ours by name or number. */
int ctlb_service(const cJSON *controller, cJSON **out, char **why);

/** The ConfigMap `<ctl>-config` with data.slurm.conf (sconf_slurm_conf, see
 *  slurmconf.h for nodesets and what env must resolve) and
 *  data.cgroup.conf = sconf_cgroup_conf() unless a ConfigMap of
 *  spec.configFileRefs has a key cgroup.conf. Every ConfigMap of
 *  configFileRefs and of the script refs must exist: OP_ENOTFOUND names the
 *  first missing one. External Controllers get only the minimal slurm.conf,
 *  labelled with the operator labels over spec.template.metadata (as
 *  Slinky does). */
int ctlb_config(const cJSON *controller, const cJSON *const *nodesets, size_t n_nodesets, const clc_env *env,
                cJSON **out, char **why);

/** The StatefulSet `<ctl>-controller` (docs/compat.md#controller-objects, #persistence).
 *
 *  replicas = 1 + ha.backups (HA) else 1; serviceName
 *  `<ctl>-controller-internal`; revisionHistoryLimit 0; selector {name,
 *  instance}. Pod template: see controller_build.c for the full shape
 *  (containers slurmctld, native sidecars reconfigure (always: without
 *  spec.inplaceReconfigure it applies what the NodeSets add) and logfile, volumes slurm-etc projected 0610,
 *  slurm-logfile, run, slurm-authsocket, statesave), with the user's
 *  spec.slurmctld / spec.reconfigure / spec.logfile container overrides and
 *  spec.template merged per reconcilers/podtemplate.h.
 *
 *  Pod annotations (rolling the pods when an input changes):
 *   slinky.slurm.net/slurm-key-hash  clc_hash_data(Secret slurmKeyRef.name, base64)
 *   slinky.slurm.net/jwt-key-hash    clc_hash_data(Secret <jwt ref>.name, base64)
 *     i.e. SHA-256 of the base64-decoded values of every key of the Secret's
 *     data, concatenated in bytewise key order (keys not hashed; "" for a
 *     missing or empty Secret);
 *   slinky.slurm.net/slurm-config-hash  (only without inplaceReconfigure)
 *     clc_hash_data(config, raw) of the ConfigMap with slurm.conf read
 *     through sconf_without_nodesets(): SHA-256 of the data values
 *     concatenated in key order (slurm.conf then cgroup.conf). What the
 *     NodeSets add (their lines, MaxNodeCount) never rolls slurmctld: the
 *     reconfigure sidecar applies it.
 *  config is the `<ctl>-config` ConfigMap to hash: pass the one ctlb_config()
 *  just built so the hash is current in the same pass; NULL looks up the
 *  stored "ConfigMap" `<ctl>-config` in env (Slinky's behaviour, one pass
 *  late). Secrets are looked up in env.
 *
 *  statesave (docs/compat.md#persistence), with persistence.enabled defaulting to true:
 *   enabled, no existingClaim, no HA -> volumeClaimTemplates[statesave] with
 *       spec.persistence minus {enabled, existingClaim} as the PVC spec;
 *   enabled, existingClaim            -> volume from that PVC (all replicas);
 *   enabled, no existingClaim, HA     -> OP_EINVAL "HA requires persistence.existingClaim";
 *   disabled, no HA                   -> emptyDir;
 *   disabled, HA                      -> OP_EINVAL.
 *  With HA and an existingClaim that env resolves to a PVC without
 *  ReadWriteMany: OP_EINVAL. */
int ctlb_statefulset(const cJSON *controller, const cJSON *config, const clc_env *env, cJSON **out,
                     char **why);

/** The ServiceMonitor `<ctl>-controller` when spec.metrics.enabled and
 *  spec.metrics.serviceMonitor.enabled, else 0 with *out NULL (the
 *  reconciler deletes an existing one). Selector {name, instance},
 *  namespaceSelector {matchNames: [<ns>]}, endpoints on port "slurmctld",
 *  scheme http: the user's serviceMonitor.endpoints (each interval and
 *  scrapeTimeout defaulting to the serviceMonitor's), or the four defaults
 *  /metrics/jobs, /metrics/nodes, /metrics/partitions, /metrics/scheduler.
 *  Labels also take serviceMonitor.labels, annotations
 *  serviceMonitor.annotations. */
int ctlb_service_monitor(const cJSON *controller, cJSON **out, char **why);

/* ---- Slurm versions (docs/compat.md#slurm-versions) ---------------------- */

/* The condition that says whether slurmop can deploy the Controller's Slurm. */
#define CTLB_COND_SLURM_VERSION "SlurmVersionSupported"
/* auth/slurm and cred/slurm, which the generated configuration uses, came
 * with Slurm 23.11. */
#define CTLB_MIN_DEPLOYED_VERSION 2311

/** The SlurmVersionSupported condition of a Controller: *status "True"
 *  (reason "Supported") when spec.slurmctld.image's tag names Slurm 23.11
 *  or later, "False" ("Unsupported") when it names an older one, "Unknown"
 *  ("VersionUnknown") when it names none; NULL (no condition) for an
 *  external Controller, whose Slurm the user runs. *message is a sentence
 *  (malloc'd; NULL with *status NULL). */
void ctlb_version_condition(const cJSON *controller, const char **status, const char **reason,
                            char **message);

#endif
