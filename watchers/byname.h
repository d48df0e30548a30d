/* byname: a store kept by GETs of the objects asked for by name, instead of
 * a watch of the whole resource type.
 *
 * The operator caches only the Secrets and ConfigMaps it created (reflectors
 * with the managed-by label selector). The user objects a custom resource
 * references (the slurm key and JWT key Secrets, a database password, an
 * sssd.conf, config file ConfigMaps) are read one by one: the first lookup
 * of a name starts a GET and reports "pending"; its answer lands in the store
 * (found: upsert, which fires the store's handlers; 404: delete). Nothing
 * else of the namespace is read, so the process neither holds nor receives
 * the other Secrets there (Helm release Secrets, service account tokens,
 * anything of other applications).
 *
 * Rotation: every name asked for is fetched again every poll interval
 * (default 30 s, spread over the interval), and a new resourceVersion is an
 * upsert like a watch event would have been: a key rotation is noticed
 * within one interval, or at once by a user that has a sign of it
 * (bn_refresh). A periodic GET per name was chosen over one watch per
 * name (a fieldSelector metadata.name=NAME): a watch holds a connection per
 * referenced object and needs list/watch permission, a GET needs neither,
 * costs one small request per name and interval, and cannot stall silently.
 *
 * Names nobody asks for any more are forgotten: a name not looked up for
 * the idle time (default 10 min) is "touched" (the store's handlers run with
 * the unchanged object, so the reconcilers that use it look it up again);
 * when no lookup follows within one more interval it is dropped from the
 * store. Lookups of names that were never asked for cost one GET each, and
 * entries are bounded, in all and per namespace: one namespace may hold at
 * most BN_NS_SHARE names, so a tenant who names thousands of Secrets fills
 * only its own share; the table holds BN_MAX_ENTRIES names in all, but a
 * namespace holding fewer than BN_NS_RESERVE may always add one more (up to
 * BN_HARD_MAX), so a namespace with a handful of references is never shut
 * out by the others. A lookup refused for want of room is never "absent":
 * it answers pending (BN_PENDING_FULL), is counted (bn_stats.full) and
 * logged, and the caller retries; a Controller must not read a key it could
 * not look up as a key that is not there (an empty hash rolls slurmctld).
 *
 * Errors other than 404 (403 when RBAC lacks get or a restarted API server's
 * authorizer has not synced yet, a transport failure) keep the last object,
 * are retried sooner than the poll (BN_RETRY_MIN_MS, doubling) and are logged
 * at warn level when they start and when they stop; a name whose first GET
 * failed is reported pending, not absent, until one succeeds or answers 404
 * (a failed read proves nothing about the object).
 *
 * Everything runs on the loop thread.
 */
#ifndef OP_BYNAME_H
#define OP_BYNAME_H

#include <stdint.h>
#include <uv.h>

#include "core/kube.h"
#include "core/store.h"

#define BN_MAX_ENTRIES 4096
#define BN_NS_SHARE 512
#define BN_NS_RESERVE 32
#define BN_HARD_MAX (2 * BN_MAX_ENTRIES)
/* *pending of bn_get: the first GET is on its way / no room for the name. */
#define BN_PENDING_READ 1
#define BN_PENDING_FULL 2
#define BN_REFRESH_MIN_MS 1000
/* A failed GET (not 404) is retried after this, doubling up to the poll
 * interval, at the resolution of the poll timer (poll/8, 0.1-5 s). */
#define BN_RETRY_MIN_MS 1000

typedef struct byname byname;

typedef struct bn_opts {
    kube_client *client;
    const kube_res *res; /* a namespaced resource (Secrets, ConfigMaps) */
    store *store;        /* receives what the GETs find; nothing else may feed it */
    uint32_t poll_ms;    /* each wanted name is fetched again this often (0: 30 s) */
    uint32_t idle_ms;    /* a name not looked up this long is touched, then dropped (0: 10 min) */
} bn_opts;

typedef struct bn_stats {
    unsigned long long gets;      /* GET requests answered */
    unsigned long long not_found; /* ... with 404 */
    unsigned long long failures;  /* ... with any other error */
    unsigned long long dropped;   /* names forgotten after the idle time */
    unsigned long long full;      /* lookups of new names refused for want of room (BN_PENDING_FULL) */
    size_t entries;               /* names currently wanted */
} bn_stats;

byname *bn_start(uv_loop_t *loop, const bn_opts *opts);
/** Stop and free; on_stopped runs once nothing is in flight anymore. */
void bn_stop(byname *b, void (*on_stopped)(void *data), void *data);

/** The object ns/name from the store, noting that it is wanted (and fetched
 *  from now on). NULL when absent; then *pending (when not NULL) is
 *  BN_PENDING_READ while no GET of the name has been answered with the
 *  object or 404 yet, BN_PENDING_FULL when the name could not be taken in
 *  (the table or the namespace's share is full: retry later), else 0 (the
 *  object is not there). */
const sobj *bn_get(byname *b, const char *ns, const char *name, int *pending);

/** Fetch ns/name again now, ahead of its poll, for a caller with a reason to
 *  think it changed (slurmrestd refused a token signed with the key it
 *  holds: the key Secret may have been rotated). Only for a name already
 *  wanted (bn_get); nothing when its GET is in flight or the last one
 *  started less than BN_REFRESH_MIN_MS ago (a burst of refusals costs one
 *  GET; the poll covers the rest). Returns 1 when a GET was started. */
int bn_refresh(byname *b, const char *ns, const char *name);

void bn_get_stats(const byname *b, bn_stats *out);

#endif
