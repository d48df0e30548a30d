/* accounting_build: the objects an Accounting CR owns (docs/compat.md#accounting-objects).
 *
 *   <name>-accounting  Service      port "slurmdbd" (spec.service.port or 6819)
 *   <name>-accounting  Secret       data.slurmdbd.conf (holds the DB password)
 *   <name>-accounting  StatefulSet  one slurmdbd pod, <name>-accounting-0
 *
 * An external Accounting (spec.external) runs outside Kubernetes: nothing is
 * built, every builder returns 0 with *out == NULL ("skip"). The Controller's
 * slurm.conf then points at spec.externalConfig (slurmconf.h).
 *
 * Conventions as in controller_build.h: CR in as stored, defaults applied to
 * a private copy, a new object with a controller ownerReference to the
 * Accounting in *out; 0 or a negative OP_E* code with a sentence in *why.
 * Labels: the CR's, the user's, then {app.kubernetes.io/name: slurmdbd,
 * instance: <name>, component: accounting}.
 */
#ifndef OP_ACCOUNTING_BUILD_H
#define OP_ACCOUNTING_BUILD_H

#include <cjson/cJSON.h>

#include "reconcilers/cluster_common.h"

#define ACB_KIND "Accounting"
#define ACB_APP "slurmdbd"
#define ACB_COMPONENT "accounting"

/** A copy of accounting with spec.storageConfig.port = 3306 and
 *  spec.storageConfig.database = "slurm_acct_db" when absent. */
cJSON *acb_defaults(const cJSON *accounting);

/** "<name>-accounting" (malloc'd): Service, Secret and StatefulSet name. */
char *acb_name(const char *accounting);

/** The Service `<name>-accounting`: the user's spec.service.spec with
 *  selector {name: slurmdbd, instance} and port "slurmdbd" -> "slurmdbd"
 *  appended. OP_EINVAL on a port clash. */
int acb_service(const cJSON *accounting, cJSON **out, char **why);

/** The Secret `<name>-accounting` with data.slurmdbd.conf =
 *  base64(sconf_slurmdbd_conf(accounting, password)), immutable false.
 *  The password is the base64-decoded value of
 *  spec.storageConfig.passwordKeyRef (Secret name/key) looked up in env:
 *  OP_ENOTFOUND when the Secret or the key is missing (Slinky's behaviour:
 *  no config without the password). */
int acb_config_secret(const cJSON *accounting, const clc_env *env, cJSON **out, char **why);

/** The StatefulSet `<name>-accounting`: replicas 1, podManagementPolicy
 *  Parallel, serviceName `<name>-accounting`, revisionHistoryLimit 0.
 *  Pod: container "slurmdbd" (port "slurmdbd" 6819, TCP readiness probe on
 *  6819, uid/gid 401, runAsNonRoot), /etc/slurm = projected "slurm-etc"
 *  (0600) of slurmdbd.conf from the Secret, slurm.key, jwt.key (+ jwks.json
 *  with spec.jwksKeyRef), /run = emptyDir(Memory) "run";
 *  automountServiceAccountToken false. Pod annotations: slurm-key-hash and
 *  jwt-key-hash (clc_hash_data of the key Secrets, base64-decoded),
 *  slurmdbd-conf-hash = clc_hash_data(config_secret, base64), i.e. the
 *  SHA-256 of the decoded slurmdbd.conf; config_secret NULL looks up the
 *  stored Secret `<name>-accounting` in env. */
int acb_statefulset(const cJSON *accounting, const cJSON *config_secret, const clc_env *env, cJSON **out,
                    char **why);

#endif
