/* kube: the Kubernetes API client (JSON over core/httpc).
 *
 * Paths and verbs for any resource (kube_res; the built-in types are
 * declared here, custom resources by the layers that use them), Status
 * errors decoded into one error type, a client-side token-bucket limiter (QPS and
 * burst, applied when each request starts, watches included), retries of
 * 429 / 5xx answers that carry Retry-After (up to max_retries, as client-go
 * does), one retry after a 401 with a freshly read token, and retries of
 * idempotent reads after connection failures. Watches are streamed: every
 * newline-delimited event is parsed as it arrives, whatever the chunking.
 *
 * Every call completes exactly once and asynchronously through its callback.
 * Objects handed to callbacks are borrowed: valid only during the call.
 *
 * Write fence: kube_client_fence() stops every write (anything but GET) that
 * has not reached a connection yet and refuses later ones; a leader that
 * lost its lease closes it so that nothing it had queued reaches the server
 * after a successor took over. Reads and watches are not affected.
 *
 * Errors (callback err): 0 on 2xx; otherwise OP_ENOTFOUND (404),
 * OP_EEXISTS (409 AlreadyExists), OP_ECONFLICT (409 other), OP_EGONE (410),
 * OP_EINVALID (422), OP_EINVAL (400), OP_EUNAUTHORIZED (401),
 * OP_EFORBIDDEN (403), OP_ENOTSUP (405/406/415), OP_ETOOBIG (413),
 * OP_ERATELIMIT (429), OP_EUNAVAILABLE (503), OP_ETIMEOUT (504 or no answer
 * in time), OP_ESERVER (other 5xx), OP_EHTTP (other codes), or a transport
 * error (UV_ECONNREFUSED, OP_ECLOSED, OP_ETLS, OP_ECERT, ...). st carries the
 * HTTP code, the Status reason and message when there is one.
 */
#ifndef OP_KUBE_H
#define OP_KUBE_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <uv.h>

#include "core/buf.h"
#include "core/httpc.h"
#include "core/list.h"

typedef struct kube_client kube_client;
typedef struct kube_request kube_request;
typedef struct kube_request kube_watch; /* a watch is a streaming request */

/** A resource type: where it lives in the API. */
typedef struct kube_res {
    const char *group;   /* "" for core */
    const char *version; /* "v1" */
    const char *plural;  /* "pods" */
    const char *kind;    /* "Pod" */
    int namespaced;
} kube_res;

extern const kube_res KUBE_PODS, KUBE_NODES, KUBE_NAMESPACES, KUBE_SERVICES, KUBE_CONFIGMAPS, KUBE_SECRETS,
    KUBE_PVCS, KUBE_EVENTS, KUBE_EVENTS_V1, KUBE_STATEFULSETS, KUBE_DEPLOYMENTS, KUBE_CONTROLLERREVISIONS,
    KUBE_PDBS, KUBE_LEASES, KUBE_CRDS, KUBE_SERVICEMONITORS, KUBE_MUTATINGWEBHOOKS;

/** "apps/v1" or "v1". */
const char *kube_api_version(const kube_res *res, char *buf, size_t len);

typedef struct kube_status {
    int http;          /* HTTP status, 0 for transport errors */
    char reason[48];   /* Status.reason ("Conflict", "AlreadyExists", ...) or "" */
    char message[512]; /* Status.message, or the body text, or the transport error */
    int retry_after;   /* seconds from Retry-After / details.retryAfterSeconds, 0 if none */
} kube_status;

typedef void (*kube_cb)(int err, const cJSON *obj, const kube_status *st, void *data);

/* Longest bearer token sent (OIDC tokens with many groups run to several
 * KiB; the API server's header limit is 1 MiB). A longer one fails every
 * request with OP_ETOOBIG and an error log, instead of being cut. */
#define KUBE_MAX_BEARER_TOKEN 65536

/** Observation hook for metrics: one call per finished HTTP exchange
 *  (retries included). verb is GET/LIST/WATCH/POST/PUT/PATCH/DELETE. */
typedef void (*kube_observe_fn)(void *data, const char *verb, const char *resource, int code, double seconds);

typedef struct kube_client_opts {
    const char *server;        /* "https://host:port" */
    const hc_tls_opts *tls;    /* for https */
    const char *(*token)(void *data); /* current bearer token, or NULL for none */
    void (*token_invalidate)(void *data); /* a 401 was received: re-read the token */
    void *token_data;
    double qps;                /* client-side limiter; <= 0 disables (default 200) */
    int burst;                 /* default 400 */
    int max_conns;             /* keep-alive connections (default 32) */
    unsigned request_timeout_ms; /* default 60000 */
    int max_retries;           /* for 429/5xx with Retry-After (default 10) */
    const char *user_agent;    /* default "slurmop/<version>" */
    kube_observe_fn observe;
    void *observe_data;
    unsigned event_budget_us;  /* watch events are dispatched for at most this long per loop iteration, over
                                  all watches; the rest waits (its connection paused) until the work queues
                                  had their turn (default KUBE_EVENT_BUDGET_US) */
} kube_client_opts;

#define KUBE_EVENT_BUDGET_US 30

kube_client *kube_client_new(uv_loop_t *loop, const kube_client_opts *opts, int *err);
/** A hook told when the API server serves again: at the first success
 *  (2xx, a watch's included) after an exchange that ended without an answer
 *  (connection refused or reset, a timeout) or with 503. Reflectors use it
 *  to end their backoff at once: after a kube-apiserver restart each one
 *  otherwise waits out its own jittered backoff (up to 30 s), and the last
 *  watch came back seconds after the server did. fn runs from a completion of the
 *  client, never from inside a kube_* call; it may unwatch its own hook.
 *  The client unlinks every hook when it closes. */
typedef struct kube_reach_hook {
    list_node link; /* list_init it before kube_reach_watch */
    void (*fn)(struct kube_reach_hook *h);
} kube_reach_hook;

void kube_reach_watch(kube_client *c, kube_reach_hook *h);
/** Safe on an unlinked hook, and after the client closed. */
void kube_reach_unwatch(kube_reach_hook *h);

/** Close the write fence (for good). Every write still waiting in the
 *  client (for the limiter or a retry) or in the connection pool (for a
 *  connection) completes with OP_ECANCELED on a later tick; a write already
 *  handed to a connection may be on the wire and finishes normally (its
 *  retries, if any, are refused). Every write submitted afterwards
 *  completes with OP_ECANCELED too (st.message says the fence refused it).
 *  GETs, LISTs and watches go on. Returns the number of queued writes it
 *  canceled (0 on a second call); kube_stats.fenced counts all of them. */
int kube_client_fence(kube_client *c);
/** 1 once kube_client_fence was called. */
int kube_client_fenced(const kube_client *c);

/** Cancel every request and watch (their callbacks run with OP_ECANCELED),
 *  close connections, free the client; on_closed runs last. */
void kube_client_close(kube_client *c, void (*on_closed)(void *data), void *data);

/** Build a path into b: collection when name is NULL, object otherwise,
 *  subresource when sub is non-NULL; ns NULL/"" for cluster scope or for the
 *  all-namespaces collection. query (without '?') is appended when non-NULL. */
int kube_path(buf_t *b, const kube_res *res, const char *ns, const char *name, const char *sub,
              const char *query) OP_WUR;

/** Percent-encode s for use as a query value into b. */
int kube_query_escape(buf_t *b, const char *s) OP_WUR;

enum kube_patch_type { KUBE_PATCH_MERGE, KUBE_PATCH_JSON, KUBE_PATCH_STRATEGIC, KUBE_PATCH_APPLY };

typedef struct kube_delete_opts {
    const char *uid;              /* precondition, optional */
    const char *resource_version; /* precondition, optional */
    const char *propagation;      /* "Background" / "Foreground" / "Orphan", optional */
    int grace_seconds;            /* -1 = server default */
} kube_delete_opts;

kube_request *kube_get(kube_client *c, const kube_res *res, const char *ns, const char *name, const char *sub,
                       kube_cb cb, void *data);

/** Per-request options for the *_with calls (a zeroed struct, or NULL,
 *  gives what the plain calls do). Leader election uses them so that a
 *  Lease renewal neither waits behind the operator's own writes nor hangs
 *  for the client's 60 s default. */
typedef struct kube_req_opts {
    unsigned timeout_ms; /* the whole call, retries included; 0 = the client's request_timeout_ms per attempt.
                            Retries that cannot finish in time are not made: the call fails with the last
                            error (OP_ETIMEOUT when an attempt ran out of time) */
    int unthrottled;     /* skip the client-side QPS limiter (takes no token either) */
    int urgent;          /* go ahead of queued requests for a connection, opening one beyond max_conns
                            when every connection is busy (hc_req_opts.urgent) */
    int no_answer;       /* the caller does not read the object a success returns: it is not parsed
                            and the callback gets NULL (errors are decoded as always) */
    int prio;            /* ahead of ordinary requests: it does not wait for the limiter (it still takes
                            a token, so the requests after it pay the debt back and the long-run rate
                            stays at qps) and goes ahead of them for a connection, within max_conns
                            (hc_req_opts.prio). For the few writes that end a long wait, such as the
                            delete of a pod whose Slurm node was just found drained */
    int first;           /* as prio, and ahead of the prio requests queued before it (hc_req_opts.first) */
} kube_req_opts;

kube_request *kube_get_with(kube_client *c, const kube_req_opts *ro, const kube_res *res, const char *ns,
                            const char *name, kube_cb cb, void *data);
/** One page of a list; query carries labelSelector/fieldSelector/limit/continue/resourceVersion. */
kube_request *kube_list(kube_client *c, const kube_res *res, const char *ns, const char *query, kube_cb cb,
                        void *data);
kube_request *kube_create(kube_client *c, const kube_res *res, const char *ns, const cJSON *obj, kube_cb cb,
                          void *data);
/** PUT (optimistic concurrency: obj carries metadata.resourceVersion). */
kube_request *kube_update(kube_client *c, const kube_res *res, const char *ns, const char *name,
                          const char *sub, const cJSON *obj, kube_cb cb, void *data);
kube_request *kube_create_with(kube_client *c, const kube_req_opts *ro, const kube_res *res, const char *ns,
                               const cJSON *obj, kube_cb cb, void *data);
kube_request *kube_update_with(kube_client *c, const kube_req_opts *ro, const kube_res *res, const char *ns,
                               const char *name, const cJSON *obj, kube_cb cb, void *data);
/** field_manager is required for KUBE_PATCH_APPLY; force only applies to it. */
kube_request *kube_patch(kube_client *c, const kube_res *res, const char *ns, const char *name,
                         const char *sub, enum kube_patch_type type, const cJSON *patch,
                         const char *field_manager, int force, kube_cb cb, void *data);
kube_request *kube_delete(kube_client *c, const kube_res *res, const char *ns, const char *name,
                          const kube_delete_opts *opts, kube_cb cb, void *data);
/** kube_patch and kube_delete with per-request options (no_answer: a
 *  status PATCH or a pod DELETE whose caller reads only the outcome). */
kube_request *kube_patch_with(kube_client *c, const kube_req_opts *ro, const kube_res *res, const char *ns,
                              const char *name, const char *sub, enum kube_patch_type type,
                              const cJSON *patch, const char *field_manager, int force, kube_cb cb,
                              void *data);
kube_request *kube_delete_with(kube_client *c, const kube_req_opts *ro, const kube_res *res, const char *ns,
                               const char *name, const kube_delete_opts *opts, kube_cb cb, void *data);
/** Cancel: the callback runs later with OP_ECANCELED unless already done. */
void kube_cancel(kube_request *r);

enum kube_event { KUBE_EV_ADDED, KUBE_EV_MODIFIED, KUBE_EV_DELETED, KUBE_EV_BOOKMARK };
typedef void (*kube_watch_event_cb)(int type, const cJSON *obj, void *data);
/** err 0: the server ended the stream cleanly (timeout); OP_EGONE: 410 as
 *  HTTP status or ERROR event (relist); OP_ECANCELED after kube_watch_stop;
 *  anything else: failure (back off, relist). st as for kube_cb. */
typedef void (*kube_watch_done_cb)(int err, const kube_status *st, int events_seen, void *data);

typedef struct kube_watch_opts {
    const char *resource_version;  /* "" or NULL = start at most recent */
    const char *label_selector;
    const char *field_selector;
    int timeout_seconds;           /* server-side timeout; 0 = server default */
    int bookmarks;                 /* allowWatchBookmarks=true */
    size_t max_event_bytes;        /* default 16 MiB */
} kube_watch_opts;

kube_watch *kube_watch_start(kube_client *c, const kube_res *res, const char *ns, const kube_watch_opts *opts,
                             kube_watch_event_cb on_event, kube_watch_done_cb on_done, void *data);
/** Stop a watch: on_done runs later with OP_ECANCELED (never from inside). */
void kube_watch_stop(kube_watch *w);

/** Map an HTTP status and Status reason to the project's error code. */
int kube_err_from_http(int http, const char *reason);
/** Decode a Status body (or plain text) into st; best effort. */
void kube_status_decode(kube_status *st, int http, const char *body, size_t len);

typedef struct kube_stats {
    unsigned long long requests, retries, watches, throttled_ms;
    unsigned long long reached_again; /* answers after unanswered exchanges (kube_reach_hook) */
    unsigned long long offloaded; /* answers parsed on the threadpool */
    unsigned long long fenced;    /* writes canceled or refused by the write fence */
    int in_flight, waiting; /* in_flight: every request not finished, watches included */
    int watches_open;
} kube_stats;
void kube_client_stats(const kube_client *c, kube_stats *out);

#endif
