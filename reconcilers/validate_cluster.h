/* validate_cluster: Slinky's admission checks (the schema rules of
 * docs/compat.md#controller-spec and docs/compat.md#admission-checks)
 * for Controller, LoginSet, RestApi,
 * Accounting and Token, as pure functions.
 *
 * slurmop serves no admission webhook, so the reconcilers run these checks
 * themselves before building anything: an object with errors gets a Warning
 * event and a status condition and no writes; warnings are reported (event)
 * but do not block. Checks that compare with the previous spec
 * (immutability) need the last accepted version of the object: pass it as
 * old, or NULL to run only the create-time checks.
 *
 * Every function appends to r (which must start zeroed or be reused after
 * vclu_result_free) and returns 0 when it found no error, OP_EINVALID
 * otherwise. Messages are full sentences naming the field.
 */
#ifndef OP_VALIDATE_CLUSTER_H
#define OP_VALIDATE_CLUSTER_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "reconcilers/cluster_common.h"

typedef struct vclu_result {
    char **errors; /* malloc'd strings */
    size_t n_errors;
    char **warnings;
    size_t n_warnings;
} vclu_result;

/** Append an error (msg is taken). */
void vclu_add_error(vclu_result *r, char *msg);
/** Free every message and zero r. */
void vclu_result_free(vclu_result *r);
/** The messages joined with "; " (malloc'd; "" when n is 0). */
char *vclu_join(char *const *msgs, size_t n);

/** Controller. Errors: slurmKeyRef missing when not external; neither
 *  jwtKeyRef nor jwtHs256KeyRef when not external; externalConfig (host,
 *  port) missing when external; ha.enabled without persistence.enabled and
 *  a persistence.existingClaim; a configFileRefs ConfigMap that env cannot
 *  find; a config file named slurm.conf or slurmdbd.conf (reserved); with
 *  HA, an existing existingClaim PVC without ReadWriteMany; on create
 *  (old NULL) a ClusterName longer than 40 characters; on update a changed
 *  ClusterName, slurmKeyRef name, effective JWT key ref,
 *  persistence.enabled, or persistence.existingClaim (while enabled).
 *  Warnings: a ConfigMap ref (configFileRefs, the script refs) naming
 *  another namespace (ignored: read from the Controller's), config file names Slurm does not know (the list
 * in docs/compat.md#admission-checks), and spec.service.spec.externalIPs (it is ignored). */
int vclu_controller(const cJSON *cr, const cJSON *old, const clc_env *env, vclu_result *r);

/** LoginSet. Errors: empty controllerRef.name or sssdConfRef.name; on
 *  update a changed controllerRef. Warning: service externalIPs. */
int vclu_loginset(const cJSON *cr, const cJSON *old, vclu_result *r);

/** RestApi. Error: empty controllerRef.name. Warning: service externalIPs. */
int vclu_restapi(const cJSON *cr, const cJSON *old, vclu_result *r);

/** Accounting. Errors: the Controller-like key rules when not external
 *  (slurmKeyRef, a JWT key ref), externalConfig when external, empty
 *  storageConfig.host or storageConfig.passwordKeyRef (when not external);
 *  on update a changed effective JWT key ref. Warning: service
 *  externalIPs. */
int vclu_accounting(const cJSON *cr, const cJSON *old, vclu_result *r);

/** Token. Errors: neither jwtKeyRef nor jwtHs256KeyRef; empty username; an
 *  unparsable spec.lifetime; on update a changed effective JWT key ref. */
int vclu_token(const cJSON *cr, const cJSON *old, vclu_result *r);

#endif
