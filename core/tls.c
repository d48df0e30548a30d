/* tls: mbedtls (2.28 or 3.6, core/tls_compat.h) beneath our streams. See tls.h for the contract. */
#include "core/tls.h"

#include <arpa/inet.h>
#include <assert.h>
#include <mbedtls/chachapoly.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/gcm.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/ssl_ticket.h>
#include <mbedtls/x509_crt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/buf.h"
#include "core/err.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/tls_compat.h"

struct tls_config {
    int refs;
    int is_server;
    int insecure;
    char *server_name; /* verification name override (client) */
    mbedtls_ssl_config conf;
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_x509_crt ca;  /* trust anchors: server CAs (client) or client CAs (server) */
    mbedtls_x509_crt own; /* own certificate chain */
    mbedtls_pk_context key;
    /* Resumption. A client keeps the last session it completed (for the
     * name it was made with) and offers it on its next connection, which
     * then skips the key exchange and the certificate chain: an API server
     * restart makes every watch and list connect again at once, and those
     * handshakes were a sixth of the operator's CPU while it relisted. The
     * session was verified when it was made; it lives as long as the
     * server's ticket. A server issues tickets under a key of its own. */
    mbedtls_ssl_session saved;
    char *saved_name;
    mbedtls_ssl_ticket_context ticket;
};

struct tls_session {
    tls_config *cfg;
    mbedtls_ssl_context ssl;
    const unsigned char *in; /* ciphertext not yet consumed (not owned) */
    size_t in_len;
    buf_t out;            /* ciphertext produced, waiting for the transport */
    unsigned char ip[16]; /* the address to find among iPAddress SANs */
    size_t ip_len;        /* 0 when the verified name is a DNS name */
    int hs_done;
    int dead;
    char *peer_cn;
    int peer_cn_done;
    char *name; /* client: the name verified (the key of the saved session) */
    int cert_checked;
};

/* ALPN lists must outlive every config that points at them. */
static const char *alpn_http11[] = {"http/1.1", NULL};

static void log_mbedtls(const char *what, int rc)
{
    if (log_enabled(LOGL_DEBUG)) {
        char msg[160];
        mbedtls_strerror(rc, msg, sizeof(msg));
        log_debug("TLS %s failed: %s (-0x%04x)", what, msg, (unsigned)-rc);
    }
}

/* mbedtls wants PEM NUL-terminated with the terminator counted in the
 * length; our callers hand us (pointer, length) without one. */
static int parse_crts(mbedtls_x509_crt *chain, const char *pem, size_t len)
{
    char *tmp = xstrndup(pem, len);
    int rc = mbedtls_x509_crt_parse(chain, (const unsigned char *)tmp, len + 1);
    free(tmp);
    /* A positive result counts certificates that failed to parse: a bundle
     * with a few unsupported entries is still usable, an empty one is not. */
    if (rc < 0 || chain->version == 0) {
        log_mbedtls("certificate parse", rc);
        return OP_ECONFIG;
    }
    return 0;
}

static int parse_key(mbedtls_pk_context *pk, const char *pem, size_t len)
{
    char *tmp = xstrndup(pem, len);
    int rc = tlsc_pk_parse_key(pk, (const unsigned char *)tmp, len + 1);
    mbedtls_platform_zeroize(tmp, len);
    free(tmp);
    if (rc != 0) {
        log_mbedtls("key parse", rc);
        return OP_ECONFIG;
    }
    return 0;
}

/* Phase 1 of construction: every member in a safe empty state. */
static tls_config *config_alloc(int is_server)
{
    tls_config *c = xcalloc(1, sizeof(*c));
    c->refs = 1;
    c->is_server = is_server;
    mbedtls_ssl_config_init(&c->conf);
    mbedtls_entropy_init(&c->entropy);
    mbedtls_ctr_drbg_init(&c->drbg);
    mbedtls_x509_crt_init(&c->ca);
    mbedtls_x509_crt_init(&c->own);
    mbedtls_pk_init(&c->key);
    mbedtls_ssl_session_init(&c->saved);
    mbedtls_ssl_ticket_init(&c->ticket);
    return c;
}

/* Which AEAD the suites list first. mbedtls 2.28's AES-GCM does its GHASH a
 * block at a time (with AES-NI, the AES part is cheap) and its
 * ChaCha20-Poly1305 is portable C, so which one costs less per byte depends
 * on the CPU, and the choice shows in the operator's CPU during a scale-out
 * (docs/internals/HTTP.md). So it is measured once per process: a few 16 KB records (TLS's size)
 * of each, interleaved, the best time of each (about a millisecond). Go
 * servers (kube-apiserver) follow the client's first choice of the two. Only
 * forward-secret AEAD suites. */
#define AEAD_PROBE_BYTES 16384
#define AEAD_PROBE_ROUNDS 5

static uint64_t probe_gcm(mbedtls_gcm_context *g, const unsigned char *in, unsigned char *out)
{
    static const unsigned char iv[12];
    unsigned char tag[16];
    uint64_t t0 = uv_hrtime();
    (void)mbedtls_gcm_crypt_and_tag(g, MBEDTLS_GCM_ENCRYPT, AEAD_PROBE_BYTES, iv, sizeof(iv), NULL, 0, in,
                                    out, sizeof(tag), tag);
    return uv_hrtime() - t0;
}

static uint64_t probe_chachapoly(mbedtls_chachapoly_context *c, const unsigned char *in, unsigned char *out)
{
    static const unsigned char nonce[12];
    unsigned char tag[16];
    uint64_t t0 = uv_hrtime();
    (void)mbedtls_chachapoly_encrypt_and_tag(c, AEAD_PROBE_BYTES, nonce, NULL, 0, in, out, tag);
    return uv_hrtime() - t0;
}

/* 1 when ChaCha20-Poly1305 encrypts faster than AES-128-GCM here. */
static int chacha_cheaper(void)
{
    static const unsigned char key[32] = {1};
    unsigned char *in = xcalloc(2, AEAD_PROBE_BYTES), *out = in + AEAD_PROBE_BYTES;
    mbedtls_gcm_context g;
    mbedtls_chachapoly_context c;
    mbedtls_gcm_init(&g);
    mbedtls_chachapoly_init(&c);
    int ok = mbedtls_gcm_setkey(&g, MBEDTLS_CIPHER_ID_AES, key, 128) == 0 &&
             mbedtls_chachapoly_setkey(&c, key) == 0;
    uint64_t best_gcm = UINT64_MAX, best_cp = UINT64_MAX;
    for (int i = 0; ok && i < AEAD_PROBE_ROUNDS; i++) {
        uint64_t a = probe_gcm(&g, in, out), b = probe_chachapoly(&c, in, out);
        best_gcm = a < best_gcm ? a : best_gcm;
        best_cp = b < best_cp ? b : best_cp;
    }
    mbedtls_gcm_free(&g);
    mbedtls_chachapoly_free(&c);
    free(in);
    return ok && best_cp < best_gcm;
}

static const int *preferred_suites(void)
{
    /* TLS 1.3 suites (3.6 only) name the AEAD alone; the 1.2 ones after them. */
    static const int aes_first[] = {
#if TLSC_TLS13
        MBEDTLS_TLS1_3_AES_128_GCM_SHA256,
        MBEDTLS_TLS1_3_AES_256_GCM_SHA384,
        MBEDTLS_TLS1_3_CHACHA20_POLY1305_SHA256,
#endif
        MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        MBEDTLS_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        MBEDTLS_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        0,
    };
    static const int chacha_first[] = {
#if TLSC_TLS13
        MBEDTLS_TLS1_3_CHACHA20_POLY1305_SHA256,
        MBEDTLS_TLS1_3_AES_128_GCM_SHA256,
        MBEDTLS_TLS1_3_AES_256_GCM_SHA384,
#endif
        MBEDTLS_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        MBEDTLS_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        0,
    };
    /* Decided once per process (configs are made on the loop thread). */
    static int chacha = -1;
    if (chacha < 0) {
        chacha = chacha_cheaper();
        log_debug("tls: %s first (the cheaper AEAD on this CPU)", chacha ? "ChaCha20-Poly1305" : "AES-GCM");
    }
    return chacha ? chacha_first : aes_first;
}

static int config_common(tls_config *c, int endpoint)
{
    static const char pers[] = "slurmop-tls";
    if (tlsc_init() != 0) {
        log_warn("TLS: the crypto library did not start");
        return OP_ETLS;
    }
    int rc = mbedtls_ctr_drbg_seed(&c->drbg, mbedtls_entropy_func, &c->entropy, (const unsigned char *)pers,
                                   sizeof(pers) - 1);
    if (rc != 0) {
        log_mbedtls("RNG seed", rc);
        return OP_ETLS;
    }
    rc = mbedtls_ssl_config_defaults(&c->conf, endpoint, MBEDTLS_SSL_TRANSPORT_STREAM,
                                     MBEDTLS_SSL_PRESET_DEFAULT);
    if (rc != 0) {
        log_mbedtls("config defaults", rc);
        return OP_ETLS;
    }
    mbedtls_ssl_conf_rng(&c->conf, mbedtls_ctr_drbg_random, &c->drbg);
    /* TLS 1.2 or newer: 2.28 speaks up to 1.2, 3.6 up to 1.3 (tls_compat.h), clients 1.2 (below). */
    tlsc_conf_min_tls12(&c->conf);
    mbedtls_ssl_conf_ciphersuites(&c->conf, preferred_suites());
    /* A client stays at TLS 1.2, where it resumes its last session (see tls_config): a 1.3
     * session resumes only by the ticket the server sends after the handshake, which mbedtls 3.6
     * hands over through a signal from its read calls; under this byte filter the read after that
     * signal consumed no input and the connection stalled (tried with unit.tls). The servers
     * (metrics, webhooks, probes) speak 1.3. */
    if (endpoint == MBEDTLS_SSL_IS_CLIENT)
        tlsc_conf_max_tls12(&c->conf);
    return 0;
}

static int own_cert(tls_config *c, const char *cert, size_t cert_len, const char *key, size_t key_len)
{
    int rc = parse_crts(&c->own, cert, cert_len);
    if (rc == 0)
        rc = parse_key(&c->key, key, key_len);
    if (rc == 0 && tlsc_pk_check_pair(&c->own.pk, &c->key) != 0) {
        log_debug("TLS key does not match the certificate");
        rc = OP_ECONFIG;
    }
    if (rc == 0 && mbedtls_ssl_conf_own_cert(&c->conf, &c->own, &c->key) != 0)
        rc = OP_ETLS;
    return rc;
}

tls_config *tls_client_config_new(const tls_client_opts *o, int *err)
{
    tls_config *c = config_alloc(0);
    int rc = config_common(c, MBEDTLS_SSL_IS_CLIENT);
    if (rc)
        goto fail;
    c->insecure = o->insecure_skip_verify != 0;
    if (o->server_name && *o->server_name)
        c->server_name = xstrdup(o->server_name);
    if (o->ca_pem && o->ca_len) {
        rc = parse_crts(&c->ca, o->ca_pem, o->ca_len);
        if (rc)
            goto fail;
        mbedtls_ssl_conf_ca_chain(&c->conf, &c->ca, NULL);
    }
    if ((o->cert_pem && o->cert_len) != (o->key_pem && o->key_len)) {
        rc = OP_EINVAL;
        goto fail;
    }
    if (o->cert_pem && o->cert_len) {
        rc = own_cert(c, o->cert_pem, o->cert_len, o->key_pem, o->key_len);
        if (rc)
            goto fail;
    }
    /* REQUIRED is the default for clients; NONE only on explicit request.
     * Without a CA bundle REQUIRED fails every handshake, as documented. */
    mbedtls_ssl_conf_authmode(&c->conf, c->insecure ? MBEDTLS_SSL_VERIFY_NONE : MBEDTLS_SSL_VERIFY_REQUIRED);
    if (!o->no_alpn)
        mbedtls_ssl_conf_alpn_protocols(&c->conf, alpn_http11);
    return c;
fail:
    tls_config_unref(c);
    *err = rc;
    return NULL;
}

tls_config *tls_server_config_new(const tls_server_opts *o, int *err)
{
    tls_config *c = config_alloc(1);
    int rc = config_common(c, MBEDTLS_SSL_IS_SERVER);
    if (rc)
        goto fail;
    if (!o->cert_pem || !o->cert_len || !o->key_pem || !o->key_len) {
        rc = OP_EINVAL;
        goto fail;
    }
    rc = own_cert(c, o->cert_pem, o->cert_len, o->key_pem, o->key_len);
    if (rc)
        goto fail;
    if (o->client_ca_pem && o->client_ca_len) {
        rc = parse_crts(&c->ca, o->client_ca_pem, o->client_ca_len);
        if (rc)
            goto fail;
        mbedtls_ssl_conf_ca_chain(&c->conf, &c->ca, NULL);
        mbedtls_ssl_conf_authmode(&c->conf, o->require_client_cert ? MBEDTLS_SSL_VERIFY_REQUIRED
                                                                   : MBEDTLS_SSL_VERIFY_OPTIONAL);
    } else {
        mbedtls_ssl_conf_authmode(&c->conf, MBEDTLS_SSL_VERIFY_NONE);
    }
    mbedtls_ssl_conf_alpn_protocols(&c->conf, alpn_http11);
    /* Tickets for 1 hour under a key only this process knows; without the
     * ticket module clients just make full handshakes. */
    if (mbedtls_ssl_ticket_setup(&c->ticket, mbedtls_ctr_drbg_random, &c->drbg, MBEDTLS_CIPHER_AES_256_GCM,
                                 3600) == 0) {
        mbedtls_ssl_conf_session_tickets_cb(&c->conf, mbedtls_ssl_ticket_write, mbedtls_ssl_ticket_parse,
                                            &c->ticket);
    }
    return c;
fail:
    tls_config_unref(c);
    *err = rc;
    return NULL;
}

tls_config *tls_config_ref(tls_config *cfg)
{
    assert(cfg->refs > 0); /* only a live config gains a reference */
    cfg->refs++;
    return cfg;
}

void tls_config_unref(tls_config *c)
{
    assert(c == NULL || c->refs > 0);
    if (!c || --c->refs > 0)
        return;
    mbedtls_ssl_config_free(&c->conf);
    mbedtls_ctr_drbg_free(&c->drbg);
    mbedtls_entropy_free(&c->entropy);
    mbedtls_x509_crt_free(&c->ca);
    mbedtls_x509_crt_free(&c->own);
    mbedtls_pk_free(&c->key);
    mbedtls_ssl_session_free(&c->saved);
    mbedtls_ssl_ticket_free(&c->ticket);
    free(c->saved_name);
    free(c->server_name);
    free(c);
}

int tls_config_is_server(const tls_config *cfg)
{
    return cfg->is_server;
}

/* BIO callbacks: the session never touches a socket. */
static int bio_send(void *ctx, const unsigned char *p, size_t len)
{
    tls_session *s = ctx;
    /* Start with room for a full record: fewer reallocs per flush. */
    if (!s->out.data && buf_reserve(&s->out, len > 17 * 1024 ? len : 17 * 1024) != 0)
        return MBEDTLS_ERR_SSL_INTERNAL_ERROR;
    if (buf_append(&s->out, p, len) != 0)
        return MBEDTLS_ERR_SSL_INTERNAL_ERROR;
    return (int)len;
}

static int bio_recv(void *ctx, unsigned char *p, size_t len)
{
    tls_session *s = ctx;
    if (s->in_len == 0)
        return MBEDTLS_ERR_SSL_WANT_READ; /* 0 would mean EOF */
    size_t n = len < s->in_len ? len : s->in_len;
    memcpy(p, s->in, n);
    s->in += n;
    s->in_len -= n;
    return (int)n;
}

/* mbedtls 2.28 matches only dNSName SANs and the CN against the hostname,
 * so for an IP literal it always reports a name mismatch. Accept the leaf
 * only when one of its iPAddress SANs is exactly our address, and then
 * clear only that flag: chain, validity and usage problems stay fatal. */
static int verify_peer(void *ctx, mbedtls_x509_crt *crt, int depth, uint32_t *flags)
{
    tls_session *s = ctx;
    s->cert_checked = 1; /* a full handshake (a resumed one has no certificate) */
    if (depth != 0 || s->ip_len == 0 || !(*flags & MBEDTLS_X509_BADCERT_CN_MISMATCH))
        return 0;
    for (const mbedtls_x509_sequence *san = &crt->subject_alt_names; san; san = san->next) {
        if (!san->buf.p)
            continue;
        if ((san->buf.tag & MBEDTLS_ASN1_TAG_CLASS_MASK) != MBEDTLS_ASN1_CONTEXT_SPECIFIC ||
            (san->buf.tag & MBEDTLS_ASN1_TAG_VALUE_MASK) != MBEDTLS_X509_SAN_IP_ADDRESS)
            continue;
        if (san->buf.len == s->ip_len && memcmp(san->buf.p, s->ip, s->ip_len) == 0) {
            *flags &= ~(uint32_t)MBEDTLS_X509_BADCERT_CN_MISMATCH;
            break;
        }
    }
    return 0;
}

/* Parse an IP literal (IPv6 possibly in brackets) into network order. */
static size_t parse_ip(const char *host, unsigned char out[16])
{
    char tmp[64];
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof(tmp))
        return 0;
    memcpy(tmp, host, n);
    tmp[n] = '\0';
    if (inet_pton(AF_INET, tmp, out) == 1)
        return 4;
    if (inet_pton(AF_INET6, tmp, out) == 1)
        return 16;
    return 0;
}

tls_session *tls_sess_new(tls_config *cfg, const char *host, int *err)
{
    tls_session *s = xcalloc(1, sizeof(*s));
    s->cfg = tls_config_ref(cfg);
    mbedtls_ssl_init(&s->ssl);
    buf_init(&s->out, BUF_UNLIMITED);
    int rc = mbedtls_ssl_setup(&s->ssl, &cfg->conf);
    if (rc != 0) {
        log_mbedtls("setup", rc);
        tls_sess_free(s);
        *err = OP_ETLS;
        return NULL;
    }
    mbedtls_ssl_set_bio(&s->ssl, s, bio_send, bio_recv, NULL);
    if (!cfg->is_server) {
        const char *name = cfg->server_name ? cfg->server_name : host;
        char bare[64];
        if (!name)
            name = "";
        s->ip_len = parse_ip(name, s->ip);
        if (s->ip_len && name[0] == '[') {
            /* Strip brackets so SNI and error messages see the address. */
            size_t n = strlen(name) - 2;
            if (n < sizeof(bare)) {
                memcpy(bare, name + 1, n);
                bare[n] = '\0';
                name = bare;
            }
        }
        /* Always set: without it a verifying client refuses to handshake. */
        rc = mbedtls_ssl_set_hostname(&s->ssl, name);
        if (rc != 0) {
            log_mbedtls("set hostname", rc);
            tls_sess_free(s);
            *err = OP_EINVAL;
            return NULL;
        }
        mbedtls_ssl_set_verify(&s->ssl, verify_peer, s);
        /* A failed resumption falls back to a full handshake by itself. */
        if (cfg->saved_name && strcmp(cfg->saved_name, name) == 0 &&
            mbedtls_ssl_set_session(&s->ssl, &cfg->saved) != 0)
            log_debug("TLS: cannot offer the saved session to %s", name);
        s->name = xstrdup(name);
    }
    return s;
}

void tls_sess_free(tls_session *s)
{
    if (!s)
        return;
    mbedtls_ssl_free(&s->ssl);
    buf_free(&s->out);
    free(s->peer_cn);
    free(s->name);
    tls_config_unref(s->cfg);
    free(s);
}

void tls_sess_set_input(tls_session *s, const char *p, size_t n)
{
    assert(p != NULL || n == 0);
    s->in = (const unsigned char *)p;
    s->in_len = n;
}

size_t tls_sess_input_left(const tls_session *s, const char **p)
{
    if (p)
        *p = (const char *)s->in;
    return s->in_len;
}

static int map_error(tls_session *s, const char *what, int rc)
{
    s->dead = 1;
    log_mbedtls(what, rc);
    switch (rc) {
    case MBEDTLS_ERR_X509_CERT_VERIFY_FAILED:
    case MBEDTLS_ERR_SSL_NO_CLIENT_CERTIFICATE:
    case MBEDTLS_ERR_SSL_CA_CHAIN_REQUIRED:
    case TLSC_ERR_BAD_CERTIFICATE:
        return OP_ECERT;
    default:
        return OP_ETLS;
    }
}

/* Client: keep the session just completed for the next connection. */
static void save_session(tls_session *s)
{
    tls_config *c = s->cfg;
    if (c->is_server || s->name == NULL)
        return;
    mbedtls_ssl_session fresh;
    mbedtls_ssl_session_init(&fresh);
    if (mbedtls_ssl_get_session(&s->ssl, &fresh) != 0) {
        mbedtls_ssl_session_free(&fresh);
        return;
    }
    mbedtls_ssl_session_free(&c->saved);
    c->saved = fresh; /* moved: fresh is not freed */
    free(c->saved_name);
    c->saved_name = xstrdup(s->name);
}

int tls_sess_handshake(tls_session *s)
{
    if (s->dead)
        return OP_ETLS;
    if (s->hs_done)
        return 0;
    int rc = mbedtls_ssl_handshake(&s->ssl);
    if (rc == 0) {
        s->hs_done = 1;
        save_session(s);
        return 0;
    }
    if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE)
        return TLS_AGAIN;
    if (log_enabled(LOGL_DEBUG) && rc == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED) {
        char info[256];
        mbedtls_x509_crt_verify_info(info, sizeof(info), "", mbedtls_ssl_get_verify_result(&s->ssl));
        log_debug("TLS peer certificate rejected: %s", info);
    }
    return map_error(s, "handshake", rc);
}

int tls_sess_is_tls13(const tls_session *s)
{
#if TLSC_TLS13
    return s->hs_done && mbedtls_ssl_get_version_number(&s->ssl) == MBEDTLS_SSL_VERSION_TLS1_3;
#else
    (void)s;
    return 0;
#endif
}

const char *tls_sess_version(const tls_session *s)
{
    return s->hs_done ? mbedtls_ssl_get_version(&s->ssl) : "";
}

int tls_sess_handshake_done(const tls_session *s)
{
    return s->hs_done;
}

int tls_sess_resumed(const tls_session *s)
{
    return !s->cfg->is_server && !s->cfg->insecure && s->hs_done && !s->cert_checked;
}

int tls_sess_read(tls_session *s, char *out, size_t cap)
{
    if (s->dead)
        return OP_ETLS;
    for (;;) {
        int rc = mbedtls_ssl_read(&s->ssl, (unsigned char *)out, cap);
        if (rc > 0) {
            assert((size_t)rc <= cap);
            return rc;
        }
        switch (rc) {
        case MBEDTLS_ERR_SSL_WANT_READ:
        case MBEDTLS_ERR_SSL_WANT_WRITE:
            return 0;
        case MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY:
            return UV_EOF;
        case 0:
        case MBEDTLS_ERR_SSL_CONN_EOF:
            /* Transport EOF without close_notify (unclean): the HTTP layer
             * detects truncation by its own framing. */
            return UV_EOF;
        default:
            return map_error(s, "read", rc);
        }
    }
}

int tls_sess_pending(const tls_session *s)
{
    return mbedtls_ssl_get_bytes_avail(&s->ssl) > 0 || mbedtls_ssl_check_pending(&s->ssl);
}

int tls_sess_write(tls_session *s, const char *p, size_t len)
{
    if (s->dead)
        return OP_ETLS;
    int rc = mbedtls_ssl_write(&s->ssl, (const unsigned char *)p, len);
    if (rc > 0) {
        assert((size_t)rc <= len); /* conn.c advances its queue by it */
        return rc;
    }
    if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE || rc == 0)
        return 0;
    return map_error(s, "write", rc);
}

void tls_sess_close_notify(tls_session *s)
{
    if (!s->dead && s->hs_done)
        (void)mbedtls_ssl_close_notify(&s->ssl);
}

size_t tls_sess_output_len(const tls_session *s)
{
    return s->out.len;
}

char *tls_sess_take_output(tls_session *s, size_t *len)
{
    if (s->out.len == 0) {
        *len = 0;
        return NULL;
    }
    return buf_detach(&s->out, len);
}

const char *tls_sess_peer_cn(tls_session *s)
{
    if (s->peer_cn_done)
        return s->peer_cn;
    if (!s->hs_done)
        return NULL;
    s->peer_cn_done = 1;
    const mbedtls_x509_crt *crt = mbedtls_ssl_get_peer_cert(&s->ssl);
    if (!crt || mbedtls_ssl_get_verify_result(&s->ssl) != 0 || s->cfg->insecure)
        return NULL;
    if (s->cfg->is_server && s->cfg->ca.version == 0)
        return NULL; /* no client CA configured: nothing was verified */
    for (const mbedtls_x509_name *n = &crt->subject; n; n = n->next) {
        if (n->oid.p && MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &n->oid) == 0) {
            s->peer_cn = xstrndup((const char *)n->val.p, n->val.len);
            break;
        }
    }
    return s->peer_cn;
}

const char *tls_sess_alpn(const tls_session *s)
{
    return mbedtls_ssl_get_alpn_protocol(&s->ssl);
}
