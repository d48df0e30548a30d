/* cluster_watch: which custom resources a change to another object concerns
 * (docs/compat.md#watches).
 *
 * The Controller, RestApi, Accounting, LoginSet and Token reconcilers are
 * driven by watch events: a Secret, ConfigMap, PVC, NodeSet or Accounting
 * changes, and every CR whose output depends on it is queued again. The
 * decisions are pure functions of the objects as the API server stores them
 * (cJSON), kept here so that they can be tested without an operator. The
 * reconcilers call them from their store change handlers with the cached
 * JSON of the CRs of the changed object's namespace.
 *
 * Every predicate answers 0 for NULL objects and NULL or empty names.
 */
#ifndef OP_CLUSTER_WATCH_H
#define OP_CLUSTER_WATCH_H

#include <cjson/cJSON.h>
#include <stddef.h>

/** spec.controllerRef.name of a NodeSet, LoginSet or RestApi, or NULL. */
const char *cw_controller_ref(const cJSON *cr);

/** A Controller reads the Secret: slurmKeyRef, jwtKeyRef or jwtHs256KeyRef
 *  names it (all three are mounted or hashed, so any change matters). */
int cw_controller_uses_secret(const cJSON *controller, const char *secret);

/** A Controller reads the ConfigMap: configFileRefs, prologScriptRefs,
 *  epilogScriptRefs, prologSlurmctldScriptRefs, epilogSlurmctldScriptRefs
 *  or jwksKeyRef names it. */
int cw_controller_uses_configmap(const cJSON *controller, const char *configmap);

/** A Controller reads the PVC: spec.persistence.existingClaim (HA checks
 *  its access modes). */
int cw_controller_uses_pvc(const cJSON *controller, const char *pvc);

/** A Controller's slurm.conf names the Accounting: spec.accountingRef. */
int cw_controller_uses_accounting(const cJSON *controller, const char *accounting);

/** Which Controllers must regenerate slurm.conf after a NodeSet event.
 *  old/new: the NodeSet before and after (NULL for add / delete). The names
 *  (pointers into old/new) are stored in out[0..return-1]:
 *   - add or delete: its controllerRef;
 *   - controllerRef changed: the old and the new one;
 *   - otherwise the NodeSet's one when a field slurm.conf shows changed:
 *     spec.partition (enabled, config) or spec.template.spec.hostname (the
 *     Slurm NodeSet name); replicas, images and the rest do not matter.
 *  Returns 0, 1 or 2. */
int cw_nodeset_affects(const cJSON *old_ns, const cJSON *new_ns, const char *out[2]);

/** An Accounting reads the Secret: slurmKeyRef, jwtKeyRef, jwtHs256KeyRef or
 *  storageConfig.passwordKeyRef names it. */
int cw_accounting_uses_secret(const cJSON *accounting, const char *secret);

/** An Accounting reads the ConfigMap: jwksKeyRef names it. */
int cw_accounting_uses_configmap(const cJSON *accounting, const char *configmap);

/** A LoginSet reads the Secret: its sssdConfRef, or (controller non-NULL,
 *  the LoginSet's Controller) the Controller's slurm or JWT key. */
int cw_loginset_uses_secret(const cJSON *loginset, const cJSON *controller, const char *secret);

/** A RestApi reads the Secret through its Controller (the slurm key is
 *  mounted; the JWT key signs what slurmrestd forwards). */
int cw_restapi_uses_secret(const cJSON *restapi, const cJSON *controller, const char *secret);

/** A Token reads or writes the Secret: its signing key (jwtKeyRef, else
 *  jwtHs256KeyRef) or its output Secret (spec.secretRef.name, else
 *  "<token>-jwt-<username>"). */
int cw_token_uses_secret(const cJSON *token, const char *secret);

/** The ordinal of a StatefulSet pod named "<sts>-<n>", or -1 when name is not
 *  of that form (n decimal, no sign, no leading zeros except "0"). */
int cw_pod_ordinal(const char *pod, const char *sts);

#endif
