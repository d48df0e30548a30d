/* rest: the nonblocking slurmrestd client.
 *
 * One sr_client per slurmrestd (one per Slurm cluster), on core/httpc: a
 * small keep-alive pool, a deadline on every request, and the answer decoded
 * by model.h, so that an error is never read as success (HTTP 200 with a
 * non-empty "errors" list is an error; 304 is "unchanged", never "empty").
 *
 * Authentication. slurmrestd wants X-SLURM-USER-NAME and X-SLURM-USER-TOKEN
 * on every request (22.05 refuses a request without the name header; newer
 * versions take the name from the token). The token is an HS256 JWT the
 * client mints itself from the cluster's JWT key (jwt.h), for the configured
 * user (default "slurm"), valid for token_lifetime_s. It is minted on demand:
 * a request made after 80 % of the lifetime has passed, or after the key was
 * replaced (sr_set_key), gets a fresh token first. There is no refresh timer
 * that could stop: a client that sends requests always has a valid token.
 *
 * Version negotiation. The data_parser version (v0.0.45 ... v0.0.38) is read
 * from GET /openapi/v3 before the first request (sm_negotiate), unless the
 * options force one. Requests made meanwhile wait for it; if negotiation
 * fails they fail with its error and the next request tries again (so a
 * slurmrestd that comes up late is picked up). A 404 without a Slurm error
 * list on a path the version should have (the server was replaced by another
 * Slurm release) makes the next request negotiate again.
 *
 * Completions. Every submitted request completes exactly once through its
 * callback, always asynchronously (never from inside the call that submitted
 * it), with status 0 and the decoded response, or a negative code: the
 * model's (OP_ENOTFOUND, OP_ESLURM, OP_EUNAVAILABLE, ...), OP_ENOTSUP when
 * the negotiated version lacks the operation, a transport error (OP_ETIMEOUT,
 * UV_ECONNREFUSED, ...), or OP_ECANCELED when the client is closed first.
 * Large bodies (a node table of thousands of nodes is megabytes) are decoded
 * on libuv's threadpool so the loop is not held for tens of milliseconds.
 *
 * Memory. An answer's body is capped (max_body, default SR_DEFAULT_MAX_BODY,
 * sized for 16,384 nodes on the largest data parser with room to spare), and
 * its JSON tree is built in an arena bounded by SR_TREE_FACTOR times the
 * cap. Past either bound the request fails with OP_ETOOBIG and a message
 * naming the cap and how to raise it: never a partial table. Large bodies
 * are handed to the threadpool without a copy and decoded one at a time per
 * client, so one client's decode never holds more than one body, its tree
 * (both bounded by the cap) and the model; memory is given back to the
 * system (malloc_trim) after a large answer. Figures: docs/internals/SLURMIO.md.
 */
#ifndef OP_SLURM_REST_H
#define OP_SLURM_REST_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/httpc.h"
#include "slurmio/model.h"

typedef struct sr_client sr_client;

/** Bodies at least this large are decoded on the threadpool. */
#define SR_OFFLOAD_BYTES (256u * 1024u)

/** Default cap on an answer's body: 64 MiB. A node table takes ~1.2-1.4 KB
 *  per node on v0.0.38 (22.05; 11.5 MB at 8,192 nodes) and ~1.9-2.9 KB on
 *  v0.0.40-44 (compact to two-space indented), so 16,384 nodes take
 *  ~15-23 MB and ~31-47 MB: the cap holds 16,384 nodes of any version with
 *  a third to spare. */
#define SR_DEFAULT_MAX_BODY ((size_t)64 << 20)
/** The JSON tree of an answer may take at most this many times the body
 *  cap (256 MiB at the default). A node table's tree takes 4.2-4.5 times
 *  its indented text and ~5.5 times compact text, so 16,384 nodes of any
 *  version (at most ~210 MB of tree) fit; a hostile answer, which can need
 *  ~30 times its size, stops there. One decode then holds at most the body
 *  and the tree: 5 x the cap (320 MiB at the default). */
#define SR_TREE_FACTOR 4u
/** A reading of slurmctld's clock older than this is not used (drift). */
#define SR_CLOCK_MAX_AGE_S 300u

/** The tree bound for a body cap: SR_TREE_FACTOR * max_body (saturated). */
size_t sr_max_tree(size_t max_body);

typedef struct sr_opts {
    const char *url; /* "http://host:port" or "https://host:port" (then tls is required) */
    const hc_tls_opts *tls; /* CA (and optional client certificate) for https; copied */
    const void *key; /* JWT signing key (raw bytes of Slurm's jwt_key); copied; required */
    size_t key_len;
    const char *user;            /* Slurm user of the token and of X-SLURM-USER-NAME (default "slurm") */
    unsigned token_lifetime_s;   /* default 900 (15 min); re-minted after 80 % */
    unsigned timeout_ms;         /* deadline of each request, from submission (default 15000) */
    unsigned connect_timeout_ms; /* default 5000 */
    size_t max_body;             /* answer body cap (default SR_DEFAULT_MAX_BODY); over it: OP_ETOOBIG */
    int max_conns;               /* keep-alive connections (default 4) */
    int version;                 /* a SM_V* to use without negotiating; 0 = negotiate */
    /* 22.05 (versions before v0.0.40): keep a reading of slurmctld's clock
     * with a GET diag in the background (one when a GET nodes/jobs is sent
     * and the reading is missing or older than SR_CLOCK_MAX_AGE_S), so that
     * list answers carry server_time (see sr_cb). Off: no request is added. */
    int read_clock;
    /* Called on the loop thread, from a completion, whenever slurmrestd or
     * slurmctld refuses a token (401; 511 or Slurm's authentication error
     * 1007; on v0.0.38, 22.05, an HTTP 500 with Slurm errno -1 to a request
     * without update_time): the key may have been rotated, and its owner can
     * read it again before its next poll (then sr_set_key). NULL: nothing. */
    void (*on_unauthorized)(void *data);
    void *unauthorized_data;
    /* The wall clock used for tokens (seconds since the epoch); NULL = time(). For tests. */
    int64_t (*now)(void *data);
    void *now_data;
} sr_opts;

/**
 * A request's completion. resp is never NULL: on failure it is zeroed except
 * for resp->err (code, message, HTTP status).
 *
 * resp->server_time is slurmctld's clock, for the next update_time:
 *  - the answer's own time when it has one (v0.0.40+ lists: last_update;
 *    diag: req_time), which also becomes the client's reading of that clock;
 *  - else (22.05's lists, 304s) SM_TIME_ESTIMATE: a lower bound of
 *    slurmctld's clock when the request was sent, from the latest reading
 *    (at most SR_CLOCK_MAX_AGE_S old) plus the monotonic time elapsed since
 *    it arrived, minus 1 s. A poll that passes it as update_time never
 *    misses a change made after its answer (slurmctld answers 304 only when
 *    update_time - 1 >= its last change), whatever our wall clock says. On
 *    22.05 a reading comes only from diag: sr_get_diag, or sr_opts.read_clock
 *    (then the first GET nodes/jobs, and the first after the reading aged
 *    out, may go without: server_time 0);
 *  - else the HTTP Date header (SM_TIME_HTTP_DATE, slurmrestd's clock; 22.05
 *    sends none), else 0. The callback may move data out
 * of resp (take resp->nodes and set it to NULL and n_nodes to 0, for example);
 * whatever is left is freed when it returns.
 */
typedef void (*sr_cb)(int status, sm_response *resp, void *data);

/** Create a client. 0, or OP_EINVAL (no URL or key, bad URL) with *out NULL. */
int sr_client_new(uv_loop_t *loop, const sr_opts *opts, sr_client **out);

/** Close: every request not yet completed completes with OP_ECANCELED, then
 *  cb (may be NULL) runs and the client is freed. Idempotent; requests
 *  submitted afterwards are refused with OP_ECANCELED. */
void sr_client_close(sr_client *c, void (*cb)(void *data), void *data);

/** Replace the JWT key (copied): the next request carries a token signed
 *  with it. 0 or OP_EINVAL for an empty key. */
int sr_set_key(sr_client *c, const void *key, size_t len);

/** The negotiated (or forced) version, 0 while unknown. */
int sr_version(const sr_client *c);

/** Make sure the version is known: cb(status, version, data) runs later
 *  (status 0 and the version, or the negotiation's error). Starts a
 *  negotiation when none runs and the version is unknown. 0, or
 *  OP_ECANCELED when closing (cb never runs then). */
int sr_negotiate(sr_client *c, void (*cb)(int status, int version, void *data), void *data);

/* ---- operations ----
 * Each returns 0 (cb runs later, exactly once) or a negative code for a bad
 * argument or a closing client (OP_EINVAL, OP_ECANCELED; cb never runs). */

/** GET nodes; update_time > 0 asks for 304 when nothing changed since then. */
int sr_get_nodes(sr_client *c, int64_t update_time, sr_cb cb, void *data);
/** GET node/{name}: exactly one node, or OP_ENOTFOUND. */
int sr_get_node(sr_client *c, const char *name, sr_cb cb, void *data);
/** GET jobs; update_time as for sr_get_nodes. */
int sr_get_jobs(sr_client *c, int64_t update_time, sr_cb cb, void *data);
/** GET ping. */
int sr_ping(sr_client *c, sr_cb cb, void *data);
/**
 * GET diag, for slurmctld's clock: resp->server_time is its time() when it
 * answered (statistics.req_time; server_time_src SM_TIME_REQ_TIME), in every
 * version; its reading serves the estimates of later answers (see sr_cb).
 */
int sr_get_diag(sr_client *c, sr_cb cb, void *data);
/** GET reservations. */
int sr_get_reservations(sr_client *c, sr_cb cb, void *data);
/** GET reservation/{name}: exactly one, or OP_ENOTFOUND. */
int sr_get_reservation(sr_client *c, const char *name, sr_cb cb, void *data);

/**
 * Update the nodes of a hostlist expression (u->names is ignored). v0.0.42+:
 * one POST nodes/ with the hostlist as "name"; v0.0.40/41: POST node/{name},
 * only for a single node name; earlier versions: OP_ENOTSUP (use the
 * libslurm backend, see backend.h). Errors of the update message itself
 * (sm_node_update_json) complete with that error.
 */
int sr_update_nodes(sr_client *c, const char *hostlist, const sm_node_update *u, sr_cb cb, void *data);
/** DELETE node/{name} (v0.0.40+). */
int sr_delete_node(sr_client *c, const char *name, sr_cb cb, void *data);
/** POST new/node/ (v0.0.44+, Slurm 25.11 and later): create the node records of node_conf, a slurm.conf
 *  node line whose NodeName may be a hostlist ("NodeName=a-[0-9] State=FUTURE CPUs=4 ..."). Slurm makes
 *  all or none: one name that exists fails the call with OP_EEXISTS. Earlier versions: OP_ENOTSUP. */
int sr_create_nodes(sr_client *c, const char *node_conf, sr_cb cb, void *data);
/** POST reservation: create or update (v0.0.43+). */
int sr_post_reservation(sr_client *c, const sm_resv_desc *d, sr_cb cb, void *data);
/** DELETE reservation/{name} (v0.0.43+). */
int sr_delete_reservation(sr_client *c, const char *name, sr_cb cb, void *data);

/** Counters for metrics and tests. */
typedef struct sr_stats {
    uint64_t requests;     /* HTTP requests sent (negotiation included) */
    uint64_t errors;       /* completions with a negative status (canceled ones excluded) */
    uint64_t not_modified; /* 304 answers */
    uint64_t bytes_in;     /* response body bytes */
    uint64_t tokens_minted;
    uint64_t negotiations; /* GET /openapi/v3 sent */
    uint64_t offloaded;    /* bodies decoded on the threadpool */
    uint64_t clock_reads;  /* GET diag sent for slurmctld's clock (22.05) */
    int in_flight;         /* submitted and not completed */
} sr_stats;
void sr_get_stats(const sr_client *c, sr_stats *out);

#endif
