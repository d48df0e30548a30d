/* nodeset_names: pure arithmetic on the Slurm node names of StatefulSet-mode
 * NodeSets, for the rule that names are unique across every NodeSet of a
 * Controller (docs/internals/DRAIN-SAFETY.md#names).
 *
 * A StatefulSet-mode NodeSet names its pods' Slurm nodes prefix + the
 * ordinal zero-padded to `pad` digits ("%0*d"), for ordinals 0 .. count-1:
 * a "scheme". Two schemes can share names without sharing a prefix ("gpu-"
 * ordinal 10 is "gpu-1" ordinal 0), so the check is arithmetic, in time
 * independent of the counts. */
#ifndef OP_NODESET_NAMES_H
#define OP_NODESET_NAMES_H

#include <stddef.h>

typedef struct nsn_scheme {
    const char *prefix; /* NULL: "" */
    int pad;            /* zero-padding width, 0..64 */
    long long count;    /* ordinals 0..count-1 (<= 0: no names) */
} nsn_scheme;

/** 1 when a and b share a name; then the smallest such name of a's
 *  ordinals goes into ex (when ex is not NULL, truncated to exlen). */
int nsn_overlap(const nsn_scheme *a, const nsn_scheme *b, char *ex, size_t exlen);

/** 1 when name is one of the scheme's names (prefix + "%0*d" of an
 *  ordinal below count). */
int nsn_in_scheme(const char *name, const nsn_scheme *s);

#endif
