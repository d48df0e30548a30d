/* ks_server: kubesim's engine served over HTTP and HTTPS (core/httpd), with
 * certificates from kubesim/pki and kubeconfig output.
 *
 * The glue turns each hs_req into a ks_req, answers from the ks_resp
 * (delayed by a timer when the engine asks for latency), streams watches
 * through a ks_sink, and performs the engine's "after" actions (dropping
 * every connection for the restart fault).
 */
#ifndef KS_SERVER_H
#define KS_SERVER_H

#include <uv.h>

#include "kubesim/ks.h"

typedef struct ks_server ks_server;

typedef struct ks_server_opts {
    const char *host; /* listen address (default 127.0.0.1) */
    int https_port;   /* -1: no TLS listener; 0: ephemeral */
    int http_port;    /* -1: no plain listener; 0: ephemeral */
    /* Certificates: all optional. Without ca_cert/ca_key a CA is generated;
     * without tls_cert/tls_key a serving certificate for localhost,
     * 127.0.0.1 and ::1 is issued by the CA; a client certificate for the
     * kubeconfig is issued when the CA key is known. */
    const char *ca_cert_file, *ca_key_file;
    const char *tls_cert_file, *tls_key_file;
    const char *client_ca_file; /* CA that verifies client certificates (default: the CA) */
    int require_client_cert;    /* TLS handshake refused without one */
    size_t max_write_queue; /* per-connection output cap (default 256 MiB, a watch of 8k pods is ~20 MiB) */
} ks_server_opts;

/** Start listening. NULL with *err set (bind failure, bad certificate files). */
ks_server *ks_server_new(uv_loop_t *loop, ks *k, const ks_server_opts *o, int *err);
/** Bind the engine (when the server was created with k == NULL). */
void ks_server_set_engine(ks_server *s, ks *k);
int ks_server_https_port(const ks_server *s);
int ks_server_http_port(const ks_server *s);
/** "https://127.0.0.1:PORT" (or http when there is no TLS listener); owned by s. */
const char *ks_server_url(const ks_server *s);
const char *ks_server_http_url(const ks_server *s);
/** PEM of the CA (the cluster CA of kubeconfigs). */
const char *ks_server_ca_pem(const ks_server *s);
/** Write a kubeconfig for the primary URL: CA data, the client certificate
 *  and key (when one was issued) and token (when non-NULL). */
int ks_server_write_kubeconfig(const ks_server *s, const char *path, const char *token);
/** Drop every open connection on both listeners. */
void ks_server_drop_connections(ks_server *s);
/** Stop listening, close every connection; cb runs once everything is closed. */
void ks_server_close(ks_server *s, void (*cb)(void *data), void *data);

#endif
