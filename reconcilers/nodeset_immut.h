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
 * The memory is one nsim_mem per NodeSet, kept in the NodeSet's record
 * (nodeset.c, struct ns_rec) and freed with it: after a restart the first
 * valid generation seen becomes the reference. A NodeSet recreated under
 * the same name (new uid) starts again. Loop thread only.
 */
#ifndef OP_NODESET_IMMUT_H
#define OP_NODESET_IMMUT_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "reconcilers/nodeset_build.h"

/* The immutable fields of one NodeSet's last valid generation. All zero:
 * nothing remembered. */
typedef struct nsim_mem {
    char uid[64]; /* the incarnation they belong to */
    cJSON *old;   /* a minimal NodeSet holding only those fields */
} nsim_mem;

/** Append to out the messages of the immutable fields of nodeset (the
 *  object with defaults, already valid on its own) that differ from those
 *  remembered in m for the same uid; how many were added. 0 when nothing
 *  is remembered (or for another uid). */
size_t nsim_check(const nsim_mem *m, const char *uid, const cJSON *nodeset, nsb_msgs *out);

/** Remember the immutable fields of nodeset (valid, checked). */
void nsim_remember(nsim_mem *m, const char *uid, const cJSON *nodeset);

/** Forget them (the NodeSet is gone); m is all zero again. */
void nsim_forget(nsim_mem *m);

#endif
