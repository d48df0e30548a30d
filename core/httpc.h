/* httpc: a nonblocking HTTP/1.1 client on libuv (llhttp, TCP or TLS).
 *
 * One hc_pool per server (scheme, host, port, TLS settings). A pool keeps up
 * to max_conns keep-alive connections for ordinary requests and queues the
 * rest in FIFO order, behind the urgent and prio requests (hc_req_opts). Streaming requests (watches) get a
 * connection of their own that does not count against max_conns, because a watch holds its connection for
 * minutes.
 *
 * Every request completes exactly once through on_done, always
 * asynchronously (never from inside hc_request or hc_cancel), with status 0
 * and a response, or a negative error code (OP_ETIMEOUT, OP_ECLOSED,
 * OP_ECANCELED, OP_ETOOBIG, OP_ETLS, OP_ECERT, a libuv code such as
 * UV_ECONNREFUSED, ...). An HTTP error status (404, 500) is not an error
 * here: it is a response with that status.
 *
 * Body delivery:
 *  - buffered (on_data == NULL): the whole body, capped at max_body bytes
 *    (exceeding it fails the request with OP_ETOOBIG), is in resp->body when
 *    on_done runs;
 *  - streaming (on_data != NULL): on_headers runs once the status line and
 *    headers are in, then on_data for every decoded fragment of the body as
 *    it arrives (chunk boundaries are not preserved and mean nothing), then
 *    on_done with resp->body empty. Returning non-zero from on_data aborts the
 *    request (on_done gets OP_ECANCELED).
 *
 * Timeouts (milliseconds, 0 = none): connect_timeout covers DNS, TCP connect
 * and the TLS handshake; request_timeout covers the whole exchange, from the
 * moment a connection takes the request (time queued behind other requests
 * for a connection does not count); total_timeout counts from hc_request,
 * queue included; idle_timeout fires when no byte arrived for that long
 * (re-armed on every read), which is the one that matters for watches.
 *
 * Lifetimes: the request copies method, path, headers and body at submit.
 * resp and everything it points to are valid only during on_done /
 * on_headers. resp is never NULL: on errors resp->status is 0 and the body
 * is empty. The hc_req pointer is valid until on_done returns. Closing the
 * pool completes every queued and running request with OP_ECANCELED; so
 * does hc_request on a pool that is being closed.
 *
 * Connections: a request sent on a reused keep-alive connection that the
 * server had already closed (EOF or reset before any response byte) is sent
 * once more on a new connection when its method is idempotent (GET, HEAD,
 * PUT, DELETE, OPTIONS); otherwise it fails with OP_ECLOSED. A response with
 * "Connection: close" (or an HTTP/1.0 one without keep-alive), or a
 * request carrying "Connection: close", retires its connection.
 */
#ifndef OP_HTTPC_H
#define OP_HTTPC_H

#include <stddef.h>
#include <uv.h>

typedef struct hc_pool hc_pool;
typedef struct hc_req hc_req;

/** One header line. */
typedef struct hc_header {
    const char *name;
    const char *value;
} hc_header;

/** TLS settings of a pool. PEM blobs are copied at hc_pool_new. */
typedef struct hc_tls_opts {
    const char *ca_pem; /* trusted CA bundle (PEM); NULL = system store is NOT used: verification fails */
    size_t ca_len;
    const char *cert_pem; /* client certificate (PEM), optional */
    size_t cert_len;
    const char *key_pem; /* client private key (PEM), optional */
    size_t key_len;
    const char *server_name; /* name to verify instead of the URL host (kubeconfig tls-server-name) */
    int insecure_skip_verify; /* only when the user asked for it explicitly */
} hc_tls_opts;

typedef struct hc_pool_opts {
    int max_conns;           /* keep-alive connections for non-streaming requests (default 16) */
    size_t max_header_bytes; /* response status line + headers (default 64 KiB) */
    size_t max_body_bytes;   /* buffered response bodies (default 64 MiB) */
    unsigned connect_timeout_ms;    /* default 10 s */
    unsigned idle_conn_timeout_ms;  /* close a pooled idle connection after this (default 90 s) */
    const hc_tls_opts *tls;  /* required for https URLs */
} hc_pool_opts;

typedef struct hc_response {
    int status;              /* HTTP status code */
    const hc_header *headers;
    size_t n_headers;
    const char *body;        /* NUL-terminated; "" when streaming or empty */
    size_t body_len;
} hc_response;

typedef void (*hc_done_cb)(hc_req *req, int status, const hc_response *resp, void *data);
typedef void (*hc_headers_cb)(hc_req *req, const hc_response *resp, void *data);
typedef int (*hc_data_cb)(hc_req *req, const char *bytes, size_t len, void *data);

typedef struct hc_req_opts {
    const char *method;       /* "GET", "POST", ... */
    const char *path;         /* path and query, already escaped: "/api/v1/pods?watch=1" */
    const hc_header *headers; /* extra headers; Host, Content-Length and Transfer-Encoding given here are
                                 ignored (the client writes them); CR/LF in a name or value is OP_EINVAL */
    size_t n_headers;
    const char *body;         /* may be NULL */
    size_t body_len;
    unsigned request_timeout_ms; /* from dispatch to a connection */
    unsigned total_timeout_ms;   /* from hc_request, queue included */
    unsigned idle_timeout_ms;
    int urgent;               /* queue ahead of ordinary requests and, when every connection is busy, open
                                 one more beyond max_conns (leader election must not wait behind writes) */
    int prio;                 /* queue ahead of ordinary requests, behind urgent ones, within max_conns (a
                                 pod delete that ends a drain must not wait behind thousands of status
                                 writes) */
    int first;                /* as prio, but at the head of the queue, ahead of the prio requests queued
                                 before it (a busy pod's delete once its job ended must not wait behind a
                                 scale-in's thousands of idle-pod deletes), within max_conns */
    hc_headers_cb on_headers; /* optional */
    hc_data_cb on_data;       /* non-NULL selects streaming mode */
    hc_done_cb on_done;       /* required */
    void *data;
} hc_req_opts;

/** Create a pool for base_url ("http://host:port" or "https://host:port";
 *  a path part is not allowed). Host may be a name, an IPv4 address or a
 *  bracketed IPv6 address. NULL with *err set on bad input. */
hc_pool *hc_pool_new(uv_loop_t *loop, const char *base_url, const hc_pool_opts *opts, int *err);

/** Cancel everything, close every connection; the pool is freed once the
 *  last handle is closed. on_closed (optional) runs after that. */
void hc_pool_close(hc_pool *pool, void (*on_closed)(void *data), void *data);

/** Submit a request. Never NULL: errors found now are reported through
 *  on_done on a later loop iteration. */
hc_req *hc_request(hc_pool *pool, const hc_req_opts *opts);

/** Abort a request; on_done runs later with OP_ECANCELED (unless it already
 *  completed, in which case nothing happens). Safe to call from callbacks
 *  of the same request. */
void hc_cancel(hc_req *req);

/** Streaming requests that are on a connection: stop reading the response
 *  until hc_resume, so that a consumer with a backlog is not handed more.
 *  Bytes already read when it is called may still reach on_data before the
 *  callback that called it returns; none come after, and the connection's
 *  buffered bytes wait in it. Time spent paused does not count towards the
 *  idle timeout. No effect on other requests or when already paused. */
void hc_pause(hc_req *req);
/** Read again after hc_pause (bytes waiting in the connection come on a
 *  later loop iteration, never from inside this call). */
void hc_resume(hc_req *req);

/** 1 once the request's bytes were handed to a connection (they may be on
 *  the wire, so the server may act on them even if the request is canceled
 *  now); 0 while it waits in the pool's queue or for its connection to
 *  open (again while queued for the one resend on a fresh connection, made
 *  only when the server closed a kept-alive connection before answering),
 *  and after it completed. */
int hc_req_on_wire(const hc_req *req);

/** During on_done of a buffered request that succeeded: take the body
 *  (NUL-terminated; its length in *len), so that a large answer is handed on
 *  without a copy. The caller frees it; resp->body points to the same bytes.
 *  NULL (and *len 0) when there is no body or at any other time. */
char *hc_take_body(hc_req *req, size_t *len);

/** Look up a response header (case-insensitive), or NULL. */
const char *hc_header_get(const hc_response *resp, const char *name);

/** Counters for metrics and tests. */
typedef struct hc_stats {
    unsigned long long requests;    /* submitted */
    unsigned long long connects;    /* TCP connections opened */
    unsigned long long reused;      /* requests served on a kept-alive connection */
    unsigned long long bytes_in;
    unsigned long long bytes_out;
    int open_conns;
    int queued;
} hc_stats;
void hc_pool_stats(const hc_pool *pool, hc_stats *out);

#endif
