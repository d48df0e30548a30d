/* expect: ReplicaSet-style expectations, so a second reconcile pass never
 * repeats creates or deletes that are still in flight.
 *
 * Before submitting N creates and the deletes of some pods, the reconciler
 * records them against the owner (key and uid). Watch events lower them as
 * the store observes the new pods (a count) and the deleted pods (by pod key,
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

#define EXPECT_TTL_MS (5 * 60 * 1000)

typedef struct expect_table expect_table;

expect_table *exp_new(void);
void exp_free(expect_table *t);

/** Expect `adds` more creations for owner key/uid (replaces older records of
 *  another uid). */
void exp_expect_creations(expect_table *t, const char *key, const char *uid, int adds, uint64_t now_ms);
/** Expect the deletion of one dependent (by its store key). */
void exp_expect_deletion(expect_table *t, const char *key, const char *uid, const char *dep_key,
                         uint64_t now_ms);
/** A creation was observed, or a create failed: lower the count. */
void exp_creation_observed(expect_table *t, const char *key);
/** A deletion was observed, or a delete failed / found nothing. */
void exp_deletion_observed(expect_table *t, const char *key, const char *dep_key);
/** Whether the deletion of dep_key is expected and not yet observed (a
 *  delete of it is in flight). */
int exp_deletion_pending(expect_table *t, const char *key, const char *dep_key);
/** True when the owner may scale again: nothing pending, expired, or the
 *  record belongs to another uid (then it is dropped). */
int exp_satisfied(expect_table *t, const char *key, const char *uid, uint64_t now_ms);
/** Forget an owner (deleted). */
void exp_drop(expect_table *t, const char *key);
/** Pending counts for logs and tests. */
void exp_pending(expect_table *t, const char *key, int *adds, int *dels);

#endif
