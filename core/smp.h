/* smp: Kubernetes strategic merge patch for built-in types, without schemas.
 *
 * kube-apiserver merges lists of built-in types element by element using a
 * per-field merge key taken from the Go types (containers by name, conditions
 * by type, ...). We carry that knowledge as a table keyed by field name,
 * which is exact for every field of the core and apps types that slurmop and
 * kubesim touch (see the table in smp.c); lists without a merge key are
 * replaced, as RFC 7386 does. Supported directives: `$patch: replace|delete`
 * (objects and list elements), `$retainKeys`, `$setElementOrder/<field>`,
 * `$deleteFromPrimitiveList/<field>`. Primitive lists with the merge strategy
 * (finalizers) are unioned.
 *
 * The same machinery merges Slinky pod templates: with SMP_CONCAT_CONTAINERS
 * the containers and initContainers lists are concatenated instead of merged
 * by name (docs/compat.md#nodeset-pod).
 */
#ifndef OP_SMP_H
#define OP_SMP_H

#include <cjson/cJSON.h>

enum smp_flags {
    SMP_CONCAT_CONTAINERS = 1 << 0,
};

/** Apply patch to target in place and return the new root (target itself, or
 *  a replacement when the patch replaces the root; target is then freed).
 *  OP_EINVAL in *err (when non-NULL) for a malformed directive; target is
 *  left partially patched in that case, so apply to a copy. */
cJSON *smp_apply(cJSON *target, const cJSON *patch, int flags, int *err);

/** The merge key of a list field ("name" for containers), NULL when the
 *  list has none. elem is a sample element (needed for "ports"). */
const char *smp_merge_key(const char *field, const cJSON *elem);

#endif
