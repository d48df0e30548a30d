/* expect: ReplicaSet-style expectations, so a second reconcile pass never
 * repeats creates or deletes that are still in flight.
 *
 * Before submitting N creates and the deletes of some pods, the reconciler
 * records them against the owner (its record, with its uid). Watch events lower
 * them as the store observes the new pods (a count) and the deleted pods (by pod key,
 * so a delete seen twice is not counted twice); a failed write lowers them at
 * once. While an owner's expectations are not satisfied, its reconcile does
 * only status work. Expectations expire after EXPECT_TTL_MS (a lost event must
 * not wedge an owner forever) and are dropped when the owner is deleted or
 * recreated under the same name (a different uid) — Slinky kept stale ones,
 * so a recreated NodeSet stayed at zero replicas until a restart.
 */
#ifndef OP_EXPECT_H
#define OP_EXPECT_H

#include <stdint.h>

#include "core/map.h"

#define EXPECT_TTL_MS (5 * 60 * 1000)

/* One owner's expectations, kept by the owner's own record (the NodeSet's,
 * struct ns_rec in nodeset.c). All zero: none. */
typedef struct exp_owner {
    char *uid;       /* the owner incarnation they were made for (NULL: none) */
    int adds;        /* creations not observed yet */
    map_t dels;      /* dependent key -> itself (owned): deletions not observed yet */
    uint64_t set_at; /* when the last expectation was made */
} exp_owner;

/** Expect `adds` more creations for owner uid (replaces older records of
 *  another uid). */
void exp_expect_creations(exp_owner *e, const char *uid, int adds, uint64_t now_ms);
/** Expect the deletion of one dependent (by its store key). */
void exp_expect_deletion(exp_owner *e, const char *uid, const char *dep_key, uint64_t now_ms);
/** A creation was observed, or a create failed: lower the count. */
void exp_creation_observed(exp_owner *e);
/** A deletion was observed, or a delete failed / found nothing. */
void exp_deletion_observed(exp_owner *e, const char *dep_key);
/** Whether the deletion of dep_key is expected and not yet observed (a
 *  delete of it is in flight). */
int exp_deletion_pending(const exp_owner *e, const char *dep_key);
/** True when the owner may scale again: nothing pending, expired, or the
 *  record belongs to another uid (then it is dropped). */
int exp_satisfied(exp_owner *e, const char *uid, uint64_t now_ms);
/** Forget everything (the owner was deleted or made again); e is all zero. */
void exp_drop(exp_owner *e);
/** Pending counts for logs and tests. */
void exp_pending(const exp_owner *e, int *adds, int *dels);

#endif
