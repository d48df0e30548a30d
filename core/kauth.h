/* kauth: delegated authentication and authorization of an HTTP request.
 *
 * What controller-runtime's secure metrics filter does: the bearer token a
 * request carries is checked with a TokenReview, and the user (name, uid,
 * groups, extra) it names is checked with a SubjectAccessReview for a
 * non-resource path and verb. Both are POSTs to the API server through the
 * operator's own kube client, so its ServiceAccount needs `create` on
 * tokenreviews (authentication.k8s.io) and subjectaccessreviews
 * (authorization.k8s.io).
 *
 * Verdicts (the HTTP status to answer): 200 allowed; 401 no token, a
 * malformed Authorization header or a token the API server does not
 * authenticate; 403 authenticated but not allowed; 429 too many checks in
 * flight at once (KAUTH_MAX_INFLIGHT, so a flood of distinct tokens cannot
 * pile up reviews on the API server); 500 the reviews could not be made
 * (unreachable API server, missing RBAC). Every verdict but 429 and 500 is
 * cached per (SHA-256 of the token, verb, path): allowed for ttl_ms,
 * refused for deny_ttl_ms, at most max_entries (the oldest go first). The
 * token itself is never stored, logged or put in a reason.
 *
 * Every check completes exactly once, asynchronously (a cache hit on the
 * next loop iteration), unless it is canceled first.
 */
#ifndef OP_KAUTH_H
#define OP_KAUTH_H

#include <stddef.h>
#include <uv.h>

#include "core/kube.h"

#define KAUTH_MAX_INFLIGHT 64

typedef struct kauth kauth;
typedef struct kauth_check kauth_check;

/** status: 200, 401, 403, 429 or 500; reason: a short text for the
 *  response body and logs (never the token); user: the authenticated user
 *  name or NULL. Strings are valid during the call only. */
typedef void (*kauth_cb)(int status, const char *reason, const char *user, void *data);

typedef struct kauth_opts {
    unsigned ttl_ms;      /* allowed verdicts cached this long (0: 60 s) */
    unsigned deny_ttl_ms; /* 401 / 403 verdicts cached this long (0: 10 s) */
    size_t max_entries;   /* cache bound (0: 1024) */
    unsigned timeout_ms;  /* each review, as a whole (0: 10 s) */
} kauth_opts;

/** The client must outlive the kauth (close the kauth first). */
kauth *kauth_new(uv_loop_t *loop, kube_client *client, const kauth_opts *opts);

/** Check the value of a request's Authorization header (NULL when absent)
 *  for verb on the non-resource path. The returned handle is valid until
 *  the callback has run or kauth_cancel was called. */
kauth_check *kauth_check_start(kauth *a, const char *authorization, const char *verb, const char *path,
                               kauth_cb cb, void *data);
/** The callback of c will not run (the reviews in flight finish unseen). */
void kauth_cancel(kauth_check *c);

/** Cancel every check (their callbacks do not run) and free the kauth once
 *  its reviews in flight have returned; on_closed runs then, never from
 *  inside this call. */
void kauth_close(kauth *a, void (*on_closed)(void *data), void *data);

typedef struct kauth_stats {
    unsigned long long reviews;    /* TokenReviews + SubjectAccessReviews sent */
    unsigned long long cache_hits; /* checks answered from the cache */
    size_t cached;                 /* entries now */
    int in_flight;                 /* checks waiting for a review */
} kauth_stats;
void kauth_get_stats(const kauth *a, kauth_stats *out);

#endif
