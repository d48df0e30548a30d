/* httpd: a small nonblocking HTTP/1.1 server on libuv (llhttp, TCP or TLS).
 *
 * Serves the operator's /metrics, /healthz and /readyz, and kubesim's whole
 * Kubernetes API, so it supports: keep-alive and pipelined requests (answered
 * strictly in order), responses completed later than the handler call
 * (a handler may keep the hs_req and answer from a timer), chunked streaming
 * responses of unbounded length (watches), TLS with optional client
 * certificate verification, and hard limits on request headers and bodies
 * (413 / 431 answered, then the connection is closed).
 *
 * Bounded for clients that mean harm (hs_opts): answers queued to a client
 * that does not read them (past max_pending_out it is neither read nor
 * parsed until they drain), connections in all and per peer address (a new
 * one takes the place of the one idle longest), bodies refused at the
 * headers (on_head), and deadlines that request bytes cannot push back
 * (one for a whole request, one for idleness).
 *
 * Each request is handed to the handler exactly once, after its whole body
 * arrived. On one connection, a request reaches the handler only after the
 * previous one was finished (a deferred response holds the pipeline; its
 * successors stay unparsed). "Expect: 100-continue" is answered by the
 * server itself. The handler must eventually finish it with exactly one of
 * hs_respond() or hs_stream_begin() ... hs_stream_end(). If the client goes
 * away first, the request's on_close callback (hs_req_on_close) runs and the
 * request must not be used after it returns; a request that was never
 * finished is freed then. Nothing is ever called from inside hs_respond /
 * hs_stream_* (completions are asynchronous).
 */
#ifndef OP_HTTPD_H
#define OP_HTTPD_H

#include <stddef.h>
#include <uv.h>

typedef struct hs_server hs_server;
typedef struct hs_req hs_req;

typedef void (*hs_handler)(hs_req *req, void *data);

typedef struct hs_tls_opts {
    const char *cert_pem; /* serving certificate chain (PEM) */
    size_t cert_len;
    const char *key_pem;  /* its private key (PEM) */
    size_t key_len;
    const char *client_ca_pem; /* when set, client certificates signed by this CA are verified */
    size_t client_ca_len;
    int require_client_cert;   /* refuse the handshake without a valid client certificate */
} hs_tls_opts;

typedef struct hs_opts {
    size_t max_header_bytes;   /* request line + headers (default 64 KiB) -> 431 */
    size_t max_body_bytes;     /* request body (default 3 MiB, as kube-apiserver) -> 413 */
    size_t
        max_write_queue; /* bytes a stream may queue to a slow client before it is dropped (default 64 MiB) */
    size_t max_pending_out; /* answers queued to a client that does not read them: past this the connection is
                               neither read nor parsed until half of it drained (default 1 MiB; one answer may
                               be larger: it is checked between answers) */
    unsigned idle_timeout_ms;  /* close a connection with no request under way this long: before the first,
                                  between requests, or with its answers unread (default 120 s) */
    unsigned request_timeout_ms; /* a request's line, headers and body must all arrive within this of its
                                  first byte, however it trickles in (default 30 s) -> 408 and close */
    int max_conns;             /* open connections (default 1024) */
    int max_conns_per_peer;    /* open connections from one IP address (default: max_conns) */
    /* Past either cap a new connection takes the place of the one that has
     * waited longest for its next request (none with the handler or
     * streaming is ever taken); when there is none it is answered 503 and
     * closed. */
    /* Called once a request's line and headers have arrived, before any of
     * its body is read: 0 to go on, or an HTTP status (4xx/5xx) to answer
     * at once and close the connection (the body is never read, the
     * handler never sees the request). NULL: every request goes on. */
    int (*on_head)(hs_req *req, void *data);
    const hs_tls_opts *tls;    /* NULL = plain HTTP */
    hs_handler handler;
    void *data;
} hs_opts;

/** An on_head for endpoints that take GET and HEAD without a body: 405 for
 *  another method, 413 for a body, both before any of it is read. */
int hs_get_only(hs_req *req, void *data);
/** Fill o (zeroed first) with the limits of a server of small GET-only
 *  endpoints that anyone may reach (the operator's /metrics, /healthz,
 *  /readyz): hs_get_only, 16 KiB of headers, no body, 256 KiB of unread
 *  answers per connection, 128 connections (32 per address), 10 s for a
 *  request, 60 s idle. Worst case about 128 x (16 KiB + 256 KiB + one
 *  answer). The caller sets handler, data and tls. */
void hs_opts_get_only(hs_opts *o);

/** Create a server and listen on host:port (port 0 picks a free port, see
 *  hs_port). host is a numeric IPv4/IPv6 address or "localhost" (NULL:
 *  0.0.0.0). NULL with *err set when the address cannot be bound or the TLS
 *  material does not parse (OP_ECONFIG); the half-built server is then freed
 *  by the loop. */
hs_server *hs_listen(uv_loop_t *loop, const char *host, int port, const hs_opts *opts, int *err);
/** The bound port. */
int hs_port(const hs_server *srv);
/** Stop listening and close every connection (requests get on_close); the
 *  server is freed once every handle is closed, then on_closed runs. */
void hs_close(hs_server *srv, void (*on_closed)(void *data), void *data);
/** Serve new TLS handshakes with this certificate (a rotation): open
 *  connections keep the one they started with. Only for a server started
 *  with TLS. 0, or OP_EINVAL (a plain server) / OP_ECONFIG (PEM that does
 *  not parse: the old certificate stays). */
int hs_set_tls(hs_server *srv, const hs_tls_opts *tls);
/** Close every open connection at once but keep listening (kubesim's
 *  "drop all watches" fault). */
void hs_drop_connections(hs_server *srv);

/* Request accessors: valid until the request is finished or closed. */
const char *hs_req_method(const hs_req *req);   /* "GET" */
const char *hs_req_path(const hs_req *req);     /* decoded path without query: "/api/v1/pods" */
const char *hs_req_query(const hs_req *req);    /* raw query without '?', "" when none */
/** Value of a query parameter, percent-decoded into a string owned by the
 *  request; NULL when absent, "" for "?watch". */
const char *hs_req_param(hs_req *req, const char *name);
const char *hs_req_header(const hs_req *req, const char *name); /* case-insensitive */
const char *hs_req_body(const hs_req *req, size_t *len);        /* NUL-terminated */
/** The request announced a body (Content-Length > 0 or chunked): for on_head,
 *  before any of it is read. */
int hs_req_has_body(const hs_req *req);
/** Subject common name of a verified client certificate, or NULL. */
const char *hs_req_client_cn(const hs_req *req);
/** Peer address as "ip:port". */
const char *hs_req_peer(const hs_req *req);
/* The address part of a peer string ("1.2.3.4:80" -> "1.2.3.4",
 * "[::1]:80" -> "::1"), cut to fit cap bytes with its NUL: the key that
 * per-address limits count by. */
void hs_peer_ip(const char *peer, char *out, size_t cap);

/** Attach the handler's own pointer to the request. */
void hs_req_set_data(hs_req *req, void *data);
void *hs_req_get_data(const hs_req *req);
/** Called once if the connection closes before the request is finished
 *  (including after hs_stream_begin, e.g. a watcher going away). */
void hs_req_on_close(hs_req *req, void (*cb)(hs_req *req, void *data), void *data);

/** Send a complete response (Content-Length framing; none and no body for
 *  1xx/204/304; the length but no body for HEAD). extra_headers: NULL or
 *  "Name: value\r\n..." */
void hs_respond(hs_req *req, int status, const char *content_type, const char *extra_headers,
                const char *body, size_t len);

/** Start a chunked response: status line and headers are sent at once. */
void hs_stream_begin(hs_req *req, int status, const char *content_type, const char *extra_headers);
/** Send one chunk (len > 0). Returns 0, or OP_ECLOSED when the client is
 *  gone, or OP_ETOOBIG when the client is too slow (the connection is then
 *  closed and on_close will run). */
int hs_stream_write(hs_req *req, const char *bytes, size_t len);
/** Finish the chunked body (terminating zero chunk); the connection stays
 *  usable for the next request. */
void hs_stream_end(hs_req *req);
/** Abort a streaming response mid-body: the connection is closed without the
 *  terminating chunk (simulates a dropped stream). This finishes the
 *  request: its on_close does not run. */
void hs_stream_abort(hs_req *req);

typedef struct hs_stats {
    unsigned long long connections;
    unsigned long long requests;
    unsigned long long refused;  /* new connections answered 503 at a cap */
    unsigned long long evicted;  /* connections closed to make room for a new one */
    unsigned long long timeouts; /* idle, request or unread-answer deadlines */
    unsigned long long head_refused; /* requests refused by on_head */
    int open_conns;   /* including those still closing */
    int open_streams;
    int reads_paused; /* connections not read because their answers wait for the client */
    size_t queued_out; /* answer bytes queued over all connections, now */
} hs_stats;
void hs_server_stats(const hs_server *srv, hs_stats *out);

#endif
