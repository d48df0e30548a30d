/* tenancy: which namespaces may use a Controller, an Accounting or a JWT key
 * of another namespace (docs/compat.md#references-across-namespaces).
 *
 * A user with rights in one namespace must not reach another namespace's
 * Slurm cluster, Secrets or configuration through slurmop. References stay
 * in their namespace unless the referenced side opts in: a Controller (or an
 * Accounting) carries the annotation TNC_ANN_ALLOWED_NAMESPACES listing the
 * namespaces that may join it. The annotation sits on the referenced object
 * because only that namespace's owner may write it; a field of the
 * referring object would be the tenant's own word. An annotation rather
 * than a spec field keeps the CRDs those of Slinky, so a cluster moves
 * between Slinky and slurmop unchanged.
 *
 * A refusal never says whether the object of the other namespace exists:
 * "not there" and "there but not admitting you" read the same (tnc_refused),
 * so nobody learns the names of another namespace's objects by trying them.
 *
 * Pure functions of the objects as the API server stores them.
 */
#ifndef OP_TENANCY_H
#define OP_TENANCY_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Comma- or space-separated namespace names; "*" admits every namespace. */
#define TNC_ANN_ALLOWED_NAMESPACES "slinky.slurm.net/allowed-namespaces"
#define TNC_ANY "*"
/* RFC 7518 section 3.2: an HS256 key MUST be at least as long as the hash,
 * 256 bits. Shorter keys, and any other Secret value used as one (a
 * database password), are refused: a JWT signed with a short or guessable
 * key lets its holder recover the key offline. */
#define TNC_JWT_KEY_MIN_BYTES 32

/** obj (a Controller or Accounting, as stored) admits namespace ns: it lives
 *  in ns, or its TNC_ANN_ALLOWED_NAMESPACES annotation lists ns or "*".
 *  0 for a NULL obj or ns. */
int tnc_admits(const cJSON *obj, const char *ns);

/** The message for a reference from namespace from_ns to the kind ns/name
 *  that is refused, the same whether the object exists or not (malloc'd).
 *  field: the referring field ("spec.controllerRef"). */
char *tnc_refused(const char *field, const char *kind, const char *ns, const char *name, const char *from_ns);

/** A Controller vouches for a Token's signing key ns/secret (key): the
 *  Controller lives in ns and admits token_ns, and its effective JWT key ref
 *  (jwtKeyRef, else jwtHs256KeyRef) names secret and key, or key_secret
 *  (the Secret as stored, may be NULL) has it as controller owner. */
int tnc_vouches(const cJSON *controller, const char *token_ns, const char *secret, const char *key,
                const cJSON *key_secret);

/** The refusal of a Token's key: from the Token's namespace, the same sentence
 *  for a Secret that is missing, empty, too short, of no Controller, or of a
 *  Controller that does not admit it; in the Token's own namespace the
 *  specific reason (why_same, used as is, e.g. "it is 12 bytes long").
 *  malloc'd. */
char *tnc_key_refused(const char *token_ns, const char *key_ns, const char *secret, const char *key,
                      const char *why_same);

/** The NodeSet may join controller (the Controller its controllerRef names,
 *  as cached, NULL when absent): same namespace, or the Controller admits
 *  the NodeSet's. */
int tnc_nodeset_admitted(const cJSON *nodeset, const cJSON *controller);

/** The Slurm version of a Controller's slurmctld image (spec.slurmctld.image,
 *  clc_image_slurm_version), 0 when unknown (external, no tag). */
int tnc_controller_slurm_version(const cJSON *controller);

/** What the NodeSet would write into its Controller's slurm.conf passes
 *  partconf.h for a slurmctld of slurm_version (tnc_controller_slurm_version): the Slurm NodeSet name
 * (pcf_check_name) and, with spec.partition.enabled, spec.partition.config (pcf_check). 0, or -1 with a
 * sentence naming the field in why. */
int tnc_nodeset_conf_check(const cJSON *nodeset, int slurm_version, char *why, size_t size);

/** Every refusal of a NodeSet (tnc_nodeset_admitted with a cross-namespace
 *  controller, tnc_nodeset_conf_check, spec.taintKubeNodes without
 *  allow_taints, the operator's --allow-node-taints), "; "-joined and
 *  malloc'd, or NULL when it may join and what it adds is valid. */
char *tnc_nodeset_refusal(const cJSON *nodeset, const cJSON *controller, int allow_taints);

#endif
