/* conn: one stream connection over uv_tcp_t, plain or TLS, with one set of
 * callback semantics for both (a transport vtable underneath).
 *
 * Client side: conn_connect() resolves (numeric IPv4/IPv6 directly, names
 * through uv_getaddrinfo, trying every address in order), connects, and for
 * TLS completes the handshake, then calls on_connect(c, 0). Any failure or
 * the timeout (which covers all three steps) calls on_connect(c, err) once.
 * Server side: conn_accept() takes a connection from a listening stream; a
 * TLS handshake, if any, runs transparently (its failure or timeout is
 * reported through on_read as an error).
 *
 * Writes are accepted at any time after creation: bytes written before the
 * connection is open are sent once it is. They are not sent from inside
 * conn_write: they are collected and flushed together, in one writev (or
 * one run of TLS records), from a uv_prepare callback, i.e. before the loop
 * next blocks. That coalesces every response produced in one loop turn.
 *
 * Reads: after conn_read_start(), on_read(c, n, bytes) delivers plaintext
 * (n > 0; the bytes are only valid during the call: copy what you keep).
 * n < 0 is the end: UV_EOF for a clean end (TCP FIN, TLS close_notify),
 * another code for an error (a failed write is reported the same way,
 * OP_ETLS / OP_ECERT for TLS, OP_ETIMEOUT for a stalled server-side
 * handshake). After n < 0 nothing more is read. While reading is stopped no
 * on_read runs, even for bytes already decrypted.
 *
 * Lifetime: the user calls conn_close() (or conn_end()) on every path
 * including failed connects; conn_end at most once and never after
 * conn_close (asserted), conn_close also after conn_end (to cut the
 * lingering short) or again (a no-op). No user callback except on_close
 * runs after that; on_close runs once, after every handle and request is
 * finished, and the conn is freed right after it returns. Every callback
 * runs from the loop, never from inside the conn_* call that caused it.
 */
#ifndef OP_CONN_H
#define OP_CONN_H

#include <stddef.h>
#include <sys/types.h>
#include <uv.h>

#include "core/tls.h"

typedef struct conn conn;

typedef struct conn_cbs {
    /* Client only: established (0) or failed (< 0: libuv code, OP_ETIMEOUT, OP_ETLS, OP_ECERT). */
    void (*on_connect)(conn *c, int status);
    /* See above. Required when reading. */
    void (*on_read)(conn *c, ssize_t nread, const char *bytes);
    /* The user timer (conn_timer_start) expired. */
    void (*on_timer)(conn *c);
    /* conn_defer() was requested: runs from the loop before the next flush. */
    void (*on_defer)(conn *c);
    /* Last callback; the conn is freed when it returns. */
    void (*on_close)(conn *c);
    /* conn_notify_drain() was requested and the queue fell to its mark. */
    void (*on_drain)(conn *c);
} conn_cbs;

typedef struct conn_connect_opts {
    const char *host; /* name, IPv4 literal, or IPv6 literal (brackets allowed) */
    int port;
    tls_config *tls;     /* client config, or NULL for plain TCP (a reference is taken) */
    unsigned timeout_ms; /* resolve + connect + handshake; 0 = none */
} conn_connect_opts;

/** Start connecting. cbs must outlive the conn. Never NULL: failures,
 *  including bad arguments, arrive through on_connect. */
conn *conn_connect(uv_loop_t *loop, const conn_connect_opts *o, const conn_cbs *cbs, void *data);

/** Accept one pending connection from server (call from its connection
 *  callback). tls: server config or NULL; handshake_timeout_ms bounds the
 *  TLS handshake (0 = none). NULL with *err set when uv_accept fails. */
conn *conn_accept(uv_stream_t *server, tls_config *tls, unsigned handshake_timeout_ms, const conn_cbs *cbs,
                  void *data, int *err);

void *conn_data(const conn *c);
void conn_set_data(conn *c, void *data);
uv_loop_t *conn_loop(const conn *c);

/** Deliver data through on_read (idempotent). */
void conn_read_start(conn *c);
void conn_read_stop(conn *c);

/** Queue a copy of len bytes. Small writes are packed into shared blocks.
 *  0, or OP_ECLOSED once the conn is closing or has failed. */
int conn_write(conn *c, const void *p, size_t len);
/** Queue len bytes without copying: p must stay valid until release(arg)
 *  is called, which happens once the bytes were written, failed, or were
 *  dropped by a close (possibly before this call returns, e.g. for TLS,
 *  which encrypts at flush time). release may be NULL for static data.
 *  On OP_ECLOSED release has already been called. */
int conn_write_ref(conn *c, const char *p, size_t len, void (*release)(void *arg), void *arg);
/** Bytes accepted by conn_write* and not yet handed to the kernel: the
 *  measure for capping slow readers. */
size_t conn_queued(const conn *c);
/** Ask for one on_drain call, from the loop, once conn_queued() is at most
 *  low (at the next flush when it already is). A server that stops reading
 *  a client with too many answers queued uses it to start again. A failed
 *  write empties the queue, so it fires then too. */
void conn_notify_drain(conn *c, size_t low);

/** Arm the user timer: on_timer runs after ms milliseconds (restarts a
 *  running one). conn_timer_stop disarms it. */
void conn_timer_start(conn *c, unsigned ms);
void conn_timer_stop(conn *c);
/** Ask for one on_defer call from the loop (coalesced). */
void conn_defer(conn *c);

/** Graceful end: flush queued writes, send close_notify (TLS), shut the
 *  write side down, discard whatever the peer still sends, and close on its
 *  EOF or after linger_ms (0: close right after the flush). Counts as the
 *  user's close: only on_close runs afterwards. */
void conn_end(conn *c, unsigned linger_ms);
/** Close now; queued writes are dropped. Idempotent, and allowed after
 *  conn_end. */
void conn_close(conn *c);
int conn_is_closing(const conn *c);

int conn_is_tls(const conn *c);
/** Verified client certificate CN (server side), or NULL. */
const char *conn_peer_cn(conn *c);
/** Peer address "ip:port" ("[v6]:port"), "" when unknown. */
const char *conn_peer(conn *c);

/** Bytes read from / written to the socket (ciphertext for TLS). */
unsigned long long conn_bytes_in(const conn *c);
unsigned long long conn_bytes_out(const conn *c);

#endif
