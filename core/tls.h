/* tls: mbedtls configurations and a byte-filter TLS session.
 *
 * Built against mbedtls 2.28 (Debian 12) it speaks TLS 1.2; against 3.6 (Debian 13, the operator
 * image) a server speaks TLS 1.3 and 1.2 (1.3 preferred) and a client 1.2, where it resumes sessions
 * (tls.c says why). The version differences are in core/tls_compat.h.
 *
 * A tls_config is the shared part (trust anchors, own certificate, RNG,
 * protocol settings, fixed once built; a client's last session and a
 * server's ticket key, for resumption); it is reference counted so that a
 * pool and its connections, or a server and its accepted connections, can
 * share one. A tls_session is one connection's TLS state. It does no I/O:
 * the transport feeds it ciphertext (tls_sess_set_input) and takes the
 * ciphertext it produced (tls_sess_take_output), so it sits beneath any
 * stream (core/conn.c puts it under a uv_tcp_t).
 *
 * Verification (client side): the peer certificate must chain to the CA
 * bundle and match the name: a DNS name is matched by mbedtls itself
 * (dNSName SANs, then CN); an IP literal is matched by our verify callback
 * against the iPAddress SANs, because mbedtls 2.28 cannot (one path for every version). The callback
 * clears only the name-mismatch flag, only on an exact address match;
 * verification is never switched off unless insecure_skip_verify was asked
 * for explicitly.
 *
 * Return codes: a positive byte count for reads and writes, 0 when more
 * input is needed (reads) or the write must be repeated later (writes),
 * TLS_AGAIN from the handshake while it is in progress, UV_EOF for a
 * received close_notify, OP_ECERT for a certificate that failed
 * verification (either side), OP_ETLS for every other TLS failure. After an
 * error the session is dead and must be freed.
 */
#ifndef OP_TLS_H
#define OP_TLS_H

#include <stddef.h>

typedef struct tls_config tls_config;
typedef struct tls_session tls_session;

#define TLS_AGAIN 1

typedef struct tls_client_opts {
    const char *ca_pem; /* trusted CA bundle (PEM); NULL: nothing is trusted, verification fails */
    size_t ca_len;
    const char *cert_pem; /* optional client certificate chain (PEM) */
    size_t cert_len;
    const char *key_pem; /* its private key (PEM); required with cert_pem */
    size_t key_len;
    const char *server_name;  /* name to verify instead of the host connected to (may be an IP literal) */
    int insecure_skip_verify; /* accept any certificate: only when the user asked for it explicitly */
    int no_alpn;              /* do not offer ALPN (default: offer "http/1.1") */
} tls_client_opts;

typedef struct tls_server_opts {
    const char *cert_pem; /* serving certificate chain (PEM), leaf first */
    size_t cert_len;
    const char *key_pem; /* its private key (PEM) */
    size_t key_len;
    const char *client_ca_pem; /* when set, client certificates are requested and verified against it */
    size_t client_ca_len;
    int require_client_cert; /* with client_ca_pem: fail the handshake without a valid client certificate */
} tls_server_opts;

/** Build a client configuration. PEM blobs are copied (they need not be
 *  NUL-terminated; *_len is the length without a terminator). NULL with *err
 *  set (OP_ECONFIG for unparsable PEM, OP_EINVAL for a key without cert).
 *  The result holds one reference. */
tls_config *tls_client_config_new(const tls_client_opts *o, int *err);
/** Build a server configuration; same conventions. */
tls_config *tls_server_config_new(const tls_server_opts *o, int *err);
tls_config *tls_config_ref(tls_config *cfg);
/** Drop a reference; the config is freed with the last one. NULL is ignored. */
void tls_config_unref(tls_config *cfg);
int tls_config_is_server(const tls_config *cfg);

/** Create a session. host (client side only): the host connected to, used
 *  for SNI and verification unless the config names a server_name. The
 *  session holds a reference to cfg. NULL with *err set. */
tls_session *tls_sess_new(tls_config *cfg, const char *host, int *err);
void tls_sess_free(tls_session *s);

/** Point the session at the next ciphertext (not copied: it must stay valid
 *  until the session has consumed it or the caller replaces it). */
void tls_sess_set_input(tls_session *s, const char *p, size_t n);
/** Ciphertext given with tls_sess_set_input not yet consumed. */
size_t tls_sess_input_left(const tls_session *s, const char **p);

/** Advance the handshake: 0 when complete, TLS_AGAIN, or an error. */
int tls_sess_handshake(tls_session *s);
int tls_sess_handshake_done(const tls_session *s);
/** Client: 1 when the completed handshake resumed the config's last session
 *  (a ticket from the same server name), so no key exchange and no
 *  certificate chain were needed. A client config keeps the last session it
 *  completed and offers it on its next connection; a server config issues
 *  tickets (1 hour, a key of its own). Always 0 on the server side and with
 *  insecure_skip_verify (nothing is verified there to tell by). */
int tls_sess_resumed(const tls_session *s);
/** 1 when the completed handshake negotiated TLS 1.3. */
int tls_sess_is_tls13(const tls_session *s);
/** The negotiated protocol ("TLSv1.2", "TLSv1.3"); "" before the handshake is done. */
const char *tls_sess_version(const tls_session *s);
/** Decrypt into out: bytes (> 0), 0 when the input is used up, UV_EOF
 *  after close_notify (or a transport EOF mbedtls saw), or an error. Call
 *  until it is not > 0. */
int tls_sess_read(tls_session *s, char *out, size_t cap);
/** Plaintext decrypted or buffered in the session that tls_sess_read would
 *  return without more input. */
int tls_sess_pending(const tls_session *s);
/** Encrypt: bytes consumed (> 0, possibly fewer than len: call again with
 *  the rest), 0 when blocked (call again later with the SAME p and len), or
 *  an error. */
int tls_sess_write(tls_session *s, const char *p, size_t len);
/** Queue a close_notify alert. */
void tls_sess_close_notify(tls_session *s);
/** Bytes of ciphertext waiting to be sent. */
size_t tls_sess_output_len(const tls_session *s);
/** Take the ciphertext produced so far (malloc'd, caller frees), or NULL
 *  when there is none. */
char *tls_sess_take_output(tls_session *s, size_t *len);

/** Subject CN of the verified peer certificate (a server's view of its
 *  client), or NULL when none was presented or it did not verify. Owned by
 *  the session. */
const char *tls_sess_peer_cn(tls_session *s);
/** Negotiated ALPN protocol or NULL. */
const char *tls_sess_alpn(const tls_session *s);

#endif
