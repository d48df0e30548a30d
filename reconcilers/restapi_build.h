/* restapi_build: the objects a RestApi CR owns (docs/compat.md#restapi-objects).
 *
 *   <name>-restapi  Service     port "slurmrestd" (spec.service.port or 6820)
 *   <name>-restapi  Deployment  slurmrestd, replicas spec.replicas (default 1)
 *
 * Conventions as in controller_build.h: the CR goes in as stored, defaults
 * are applied to a private copy, a new object with a controller
 * ownerReference to the RestApi comes out in *out; 0 or a negative OP_E*
 * code with a sentence in *why. Labels: the CR's, the user's, then
 * {app.kubernetes.io/name: slurmrestd, instance: <name>, component: restapi}.
 */
#ifndef OP_RESTAPI_BUILD_H
#define OP_RESTAPI_BUILD_H

#include <cjson/cJSON.h>

#include "reconcilers/cluster_common.h"

#define RAB_KIND "RestApi"
#define RAB_APP "slurmrestd"
#define RAB_COMPONENT "restapi"

/** A copy of restapi with spec.replicas = 1 when absent. */
cJSON *rab_defaults(const cJSON *restapi);

/** "<name>-restapi" (malloc'd): the Service and Deployment name, and the
 *  host of the slurmrestd URL http://<name>-restapi.<ns>:6820. */
char *rab_name(const char *restapi);

/** The Service `<name>-restapi`: the user's spec.service.spec with selector
 *  {name: slurmrestd, instance: <name>} and port "slurmrestd" (6820 or
 *  spec.service.port) -> "slurmrestd" appended. OP_EINVAL on a port clash. */
int rab_service(const cJSON *restapi, cJSON **out, char **why);

/** The Deployment `<name>-restapi` (replicas, revisionHistoryLimit 0,
 *  selector {name, instance}). The pod runs container "slurmrestd" with
 *  env SLURM_JWT=daemon and SLURMRESTD_SECURITY=disable_unshare_files,
 *  disable_unshare_sysv; args "-s openapi/slurmctld" only when the
 *  Controller has no accountingRef (so slurmrestd does not load the
 *  slurmdbd plugins), then the user's args, then "0.0.0.0:6820" last; TCP
 *  probes on 6820 (startup and liveness: failureThreshold 6, period 10 s);
 *  uid/gid 65534 (nobody), runAsNonRoot; /etc/slurm = projected volume
 *  "slurm-etc" (mode 0600) of slurm.conf from `<ctl>-config` and the
 *  Controller's slurm key as slurm.key (no JWT key: slurmrestd passes
 *  client tokens through). automountServiceAccountToken false.
 *
 *  env resolves "Controller" spec.controllerRef.name; OP_ENOTFOUND when it
 *  is missing, OP_EINVAL when it has no slurmKeyRef (an external Controller
 *  defined without one). */
int rab_deployment(const cJSON *restapi, const clc_env *env, cJSON **out, char **why);

#endif
