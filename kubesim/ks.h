/* ks: kubesim's engine, a Kubernetes API server and kubelet simulator.
 *
 * The engine knows nothing about sockets: a request goes in (method, path,
 * query, a few headers, body) and a response comes out (status, headers,
 * body), or, for a watch, a ks_watch that streams events into a sink the
 * caller provides. ks_server.c binds it to core/httpd; unit tests drive it
 * directly. Everything runs on one libuv loop: the engine's own timers
 * (watch timeouts and bookmarks, the simulated kubelet and scheduler, the
 * garbage collector) live on the loop given to ks_new.
 *
 * Behaviour follows docs/internals/KUBE-API.md; kubesim/README.md lists
 * what is simulated and what is simplified.
 */
#ifndef KS_H
#define KS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/buf.h"

typedef struct ks ks;
typedef struct ks_watch ks_watch;

typedef struct ks_config {
    /* Simulated cluster. */
    int nodes;                      /* Nodes created at start (node-00001 ...) */
    int node_gpus;                  /* nvidia.com/gpu capacity of each Node (0 = none) */
    const char *const *node_labels; /* "k=v", added to every Node */
    int n_node_labels;
    const char *const *node_taints; /* "k=v:Effect" or "k:Effect" */
    int n_node_taints;
    unsigned pod_start_delay_ms; /* bound -> Running (default 100) */
    unsigned pod_ready_delay_ms; /* Running -> containers ready (default 100) */
    unsigned max_grace_ms;       /* cap on a pod's termination grace period (default 2000) */
    unsigned schedule_retry_ms;  /* retry unschedulable pods at most this often (default 1000) */
    int namespace_defaults; /* new namespaces get ServiceAccount "default" and kube-root-ca.crt (default 1) */

    /* API server behaviour. */
    unsigned history;               /* watch events kept per resource (default 10000) */
    unsigned bookmark_interval_ms;  /* periodic bookmarks (default 60000) */
    unsigned continue_ttl_ms;       /* continue tokens expire after this (default 300000) */
    unsigned too_large_wait_ms;     /* wait before 504 on a too-large resourceVersion (default 3000) */
    unsigned gc_delay_ms;           /* garbage collector reaction time (default 20) */
    unsigned min_request_timeout_s; /* watches without timeoutSeconds last [t, 2t) (default 1800) */
    uint64_t seed;                  /* 0 = random */

    /* Authentication: when auth_required, a request needs a verified client
     * certificate (ks_req.client_cn) or one of the bearer tokens. */
    int auth_required;
    const char *const *tokens;
    int n_tokens;

    /* Faults active from the start (see also the /kubesim/ admin API). */
    double rate_429;        /* fraction of API requests answered 429 (plain-text APF body) */
    double rate_500;        /* fraction answered 500 InternalError */
    unsigned latency_ms;    /* added to every API response */
    double write_rate;      /* > 0: API writes are applied at most this many per second, in order */
    int expire_watches;     /* the next N watch requests get the 410 ERROR event */
    unsigned retry_after_s; /* Retry-After of injected 429s (default 1) */

    const char *state_file;  /* --state: loaded by ks_new, written by ks_state_save */
    const char *root_ca_pem; /* CA certificate published in every namespace's kube-root-ca.crt */
} ks_config;

/** Fill c with the defaults documented above. */
void ks_config_defaults(ks_config *c);

/** One API request. All strings are borrowed for the duration of ks_handle. */
typedef struct ks_req {
    const char *method;        /* "GET", "POST", ... */
    const char *path;          /* percent-decoded path without the query */
    const char *query;         /* raw query string without '?', may be NULL */
    const char *content_type;  /* may be NULL */
    const char *accept;        /* may be NULL */
    const char *user_agent;    /* may be NULL (default field manager name) */
    const char *authorization; /* "Bearer ..." or NULL */
    const char *client_cn;     /* CN of a verified client certificate, or NULL */
    const char *body;
    size_t body_len;
} ks_req;

/** What to do after the response is sent (admin endpoints). */
enum ks_after {
    KS_AFTER_NONE = 0,
    KS_AFTER_DROP_CONNECTIONS, /* "restart": drop every connection (the engine already ended all watches) */
};

/** The answer. ks_resp_init before ks_handle, ks_resp_free after. */
typedef struct ks_resp {
    int status;
    const char *content_type; /* static string */
    buf_t headers;            /* extra header lines "Name: value\r\n" */
    buf_t body;
    unsigned delay_ms; /* send the response this much later (latency faults, too-large RV) */
    ks_watch *watch;   /* non-NULL: stream this watch (status 200), see ks_watch_attach */
    enum ks_after after;
} ks_resp;

void ks_resp_init(ks_resp *r);
void ks_resp_free(ks_resp *r);

/** Create the engine on loop: loads cfg->state_file when it exists, creates
 *  the namespaces default and kube-system and cfg->nodes Nodes, and starts
 *  the simulated kubelet. cfg and the strings it points to are copied.
 *  NULL with *err set (OP_EIO/OP_EPARSE for an unreadable state file). */
ks *ks_new(uv_loop_t *loop, const ks_config *cfg, int *err);

/** Stop everything: every watch gets end(abort=1), timers are closed; the
 *  engine is freed once its handles are closed, then cb runs (may be NULL). */
void ks_close(ks *k, void (*cb)(void *data), void *data);

/** Answer one request. Never calls back into the caller; a watch request
 *  returns resp->watch, which produces nothing until ks_watch_attach. */
void ks_handle(ks *k, const ks_req *req, ks_resp *resp);
/** The write-rate fault (ks_config.write_rate, admin "writeRate"): how long
 *  an API write (POST, PUT, PATCH, DELETE under /api or /apis) arriving at
 *  now_ms waits before ks_handle may apply it; its slot is taken. A real
 *  kube-apiserver with etcd behind it applies writes at a finite pace, and
 *  a burst of thousands (a scale-in's deletes) is seen by watchers only as
 *  fast as it is applied; kubesim applies each at once unless this is set.
 *  0 for everything else. */
unsigned ks_write_wait_ms(ks *k, const char *method, const char *path, uint64_t now_ms);

/** Where a watch writes. write returns 0, or non-zero when the stream is
 *  dead (the engine then writes nothing more and waits for ks_watch_cancel).
 *  end finishes the stream (abort: drop it without the chunked terminator);
 *  after end the caller must forget the watch. */
typedef struct ks_sink {
    int (*write)(void *ctx, const char *bytes, size_t len);
    void (*end)(void *ctx, int abort);
    void *ctx;
} ks_sink;

/** Start streaming: the headers have been sent. Initial events are written
 *  from the loop (never from inside this call). sink is copied. */
void ks_watch_attach(ks_watch *w, const ks_sink *sink);
/** The client went away (or the caller never attached the watch): the engine
 *  forgets the sink and frees the watch. Not to be called after end. */
void ks_watch_cancel(ks_watch *w);

/** Hook for admin actions that concern connections the engine does not own. */
typedef struct ks_hooks {
    void (*drop_connections)(void *data);
    void *data;
} ks_hooks;
void ks_set_hooks(ks *k, const ks_hooks *h);

/** Write the store to path (or cfg->state_file when path is NULL): a JSON
 *  document, written to a temporary file and renamed. 0 or a negative code. */
int ks_state_save(ks *k, const char *path);

/** Current global resourceVersion. */
uint64_t ks_rv(const ks *k);

/** Counts of objects, watches and memory for benchmarks and tests. */
typedef struct ks_stats {
    size_t objects;
    size_t watches;
    size_t history_events;
    size_t json_bytes; /* serialised bytes of live objects */
} ks_stats;
void ks_get_stats(const ks *k, ks_stats *out);

#endif
