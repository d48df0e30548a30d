/* nodeset_immut: the operator's own check of the NodeSet fields that cannot
 * change after creation (controllerRef, volumeClaimTemplates).
 *
 * The API server refuses such edits with the CRD's transition rules, but an
 * object can get past them: a CRD installed without the rules, an API
 * server that does not evaluate CEL (kubesim). Without an old object to
 * compare with, nsb_validate cannot see the change, so this module
 * remembers, per NodeSet key and uid, the immutable fields of the last
 * generation that passed validation, and checks every later generation
 * against them with nsb_validate(new, remembered).
 *
 * The memory is a table the NodeSet reconciler's state owns (nodeset.h),
 * handed to every call: after a restart the first valid generation seen becomes
 * the reference. A NodeSet recreated under the same name (new uid) starts
 * again. Loop thread only.
 */
#ifndef OP_NODESET_IMMUT_H
#define OP_NODESET_IMMUT_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "reconcilers/nodeset_build.h"

/* key -> the immutable fields of its last valid generation. */
typedef struct nsim_table nsim_table;

/** An empty table. */
nsim_table *nsim_new(void);
/** Free it (NULL: nothing). */
void nsim_free(nsim_table *t);

/** Append to out the messages of the immutable fields of nodeset (the
 *  object with defaults, already valid on its own) that differ from those
 *  remembered in t for key with the same uid; how many were added. 0 when
 *  nothing is remembered (or for another uid). */
size_t nsim_check(const nsim_table *t, const char *key, const char *uid, const cJSON *nodeset, nsb_msgs *out);

/** Remember the immutable fields of nodeset (valid, checked) as key's. */
void nsim_remember(nsim_table *t, const char *key, const char *uid, const cJSON *nodeset);

/** Forget key (the NodeSet is gone). */
void nsim_forget(nsim_table *t, const char *key);

/** Forget everything (the reconciler stops). */
void nsim_clear(nsim_table *t);

#endif
