/* cluster_watch: which custom resources a change to another object concerns
 * (docs/compat.md#watches).
 *
 * The Controller, RestApi, Accounting, LoginSet and Token reconcilers are
 * driven by watch events: a Secret, ConfigMap, PVC, NodeSet or Accounting
 * changes, and every CR whose output depends on it is queued again. The
 * decisions are pure functions of the objects as the API server stores them
 * (cJSON), kept here so that they can be tested without an operator. The
 * reconcilers call them from their store change handlers with the cached
 * JSON of the CRs; references to Slinky's kinds and a Token's key may name
 * another namespace (cw_ref_ns), so those mappings look at every namespace.
 *
 * Every predicate answers 0 for NULL objects and NULL or empty names.
 */
#ifndef OP_CLUSTER_WATCH_H
#define OP_CLUSTER_WATCH_H

#include <cjson/cJSON.h>
#include <stddef.h>

/** spec.controllerRef.name of a NodeSet, LoginSet or RestApi, or NULL. */
const char *cw_controller_ref(const cJSON *cr);

/** The namespace the reference at path ref of cr ("spec.controllerRef",
 *  "spec.accountingRef", "spec.jwtKeyRef") points into: its `namespace`
 *  when set and non-empty, else cr's own metadata.namespace. Slinky's
 *  manager reads an empty namespace as the namespace "" (cluster-wide lists
 *  match nothing); slurmop reads it as the CR's own, so definitions written
 *  without it keep working (docs/slinky.md, "Known differences from Slinky"). NULL
 *  when cr has neither. */
const char *cw_ref_ns(const cJSON *cr, const char *ref);

/** cr's reference at path ref names the object ns/name (the name non-empty;
 *  the namespace as cw_ref_ns reads it). */
int cw_ref_is(const cJSON *cr, const char *ref, const char *ns, const char *name);

/** The first reference of cr whose namespace is not among namespaces[0..n-1]
 *  (n == 0: every namespace is watched, the answer is NULL): spec.controllerRef
 *  (NodeSet, LoginSet, RestApi), spec.accountingRef (Controller), the Token's
 *  JWT key ref; the namespace as cw_ref_ns / cw_token_key_ns read it. Returns
 *  the field's path ("spec.controllerRef") and stores the namespace in *ns, or
 *  NULL. A reference there cannot be followed: slurmop neither caches nor may
 *  read (namespaced RBAC) that namespace. */
const char *cw_ref_outside(const cJSON *cr, const char *const *namespaces, size_t n, const char **ns);

/** A Controller, as a NodeSet event names it. */
typedef struct cw_ref {
    const char *ns, *name;
} cw_ref;

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

/** A Controller's slurm.conf names the Accounting ns/accounting:
 *  spec.accountingRef (its namespace as cw_ref_ns reads it). */
int cw_controller_uses_accounting(const cJSON *controller, const char *ns, const char *accounting);

/** Which Controllers must regenerate slurm.conf after a NodeSet event.
 *  old/new: the NodeSet before and after (NULL for add / delete). The
 *  Controllers (namespace and name, pointers into old/new) are stored in
 *  out[0..return-1]; a Controller may live in another namespace than the
 *  NodeSet (controllerRef.namespace):
 *   - add or delete: its controllerRef;
 *   - controllerRef changed (name or namespace): the old and the new one;
 *   - otherwise the NodeSet's one when a field slurm.conf shows changed:
 *     spec.partition (enabled, config), spec.template.spec.hostname (the
 *     Slurm NodeSet name) or the NodeSet's share of MaxNodeCount
 *     (sconf_nodeset_fleet: replicas, scaling mode, DaemonSet-mode eligible
 *     Nodes); images and the rest do not matter.
 *  Returns 0, 1 or 2. */
int cw_nodeset_affects(const cJSON *old_ns, const cJSON *new_ns, cw_ref out[2]);

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

/** A Token reads or writes the Secret ns/secret: its signing key (jwtKeyRef,
 *  else jwtHs256KeyRef; in cw_token_key_ns) or its output Secret
 *  (spec.secretRef.name, else "<token>-jwt-<username>"; in the Token's
 *  namespace). */
int cw_token_uses_secret(const cJSON *token, const char *ns, const char *secret);

/** The namespace of a Token's signing key Secret: the effective JWT key
 *  ref's `namespace` when non-empty (Slinky's JwtSecretKeySelector), else
 *  the Token's own. NULL when neither is set. */
const char *cw_token_key_ns(const cJSON *token);

/** The ordinal of a StatefulSet pod named "<sts>-<n>", or -1 when name is not
 *  of that form (n decimal, no sign, no leading zeros except "0"). */
int cw_pod_ordinal(const char *pod, const char *sts);

#endif
