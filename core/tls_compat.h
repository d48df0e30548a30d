/* tls_compat: the calls whose form differs between mbedtls 2.28 (Debian 12) and 3.6 (Debian 13), in one
 * place, so that the rest of the tree is written once.
 *
 * 3.x dropped the `_ret` hash names (their plain names now return int), passes an RNG to key parsing
 * and to key-pair checks (for blinding), takes a certificate serial as bytes, hides the fields of an
 * EC key pair, and names protocol versions by number; TLS 1.3 (3.x only) needs the PSA crypto layer
 * started before a handshake. Everything here is static inline and compiles to the library call of
 * the version built against. */
#ifndef OP_TLS_COMPAT_H
#define OP_TLS_COMPAT_H

#include <mbedtls/version.h>
#include <mbedtls/ecp.h>
#include <mbedtls/pk.h>
#include <mbedtls/sha256.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>
#include <stddef.h>

#if MBEDTLS_VERSION_NUMBER >= 0x03000000
#define TLSC_V3 1
#include <psa/crypto.h>
#else
#define TLSC_V3 0
#include <mbedtls/bignum.h>
#endif

/* TLS 1.3: mbedtls 3.x built with it (Debian 13's is). */
#if TLSC_V3 && defined(MBEDTLS_SSL_PROTO_TLS1_3)
#define TLSC_TLS13 1
#else
#define TLSC_TLS13 0
#endif

/* A certificate message that could not be used (3.x folded the handshake-message codes into one). */
#if TLSC_V3
#define TLSC_ERR_BAD_CERTIFICATE MBEDTLS_ERR_SSL_BAD_CERTIFICATE
#else
#define TLSC_ERR_BAD_CERTIFICATE MBEDTLS_ERR_SSL_BAD_HS_CERTIFICATE
#endif

/** An RNG callback for the 3.x calls that want one (getrandom, as core/crypto's random_bytes). */
int tlsc_rng(void *ctx, unsigned char *out, size_t len);

static inline int tlsc_sha256(const unsigned char *in, size_t len, unsigned char out[32])
{
#if TLSC_V3
    return mbedtls_sha256(in, len, out, 0);
#else
    return mbedtls_sha256_ret(in, len, out, 0);
#endif
}

static inline int tlsc_sha256_starts(mbedtls_sha256_context *c)
{
#if TLSC_V3
    return mbedtls_sha256_starts(c, 0);
#else
    return mbedtls_sha256_starts_ret(c, 0);
#endif
}

static inline int tlsc_sha256_update(mbedtls_sha256_context *c, const unsigned char *in, size_t len)
{
#if TLSC_V3
    return mbedtls_sha256_update(c, in, len);
#else
    return mbedtls_sha256_update_ret(c, in, len);
#endif
}

static inline int tlsc_sha256_finish(mbedtls_sha256_context *c, unsigned char out[32])
{
#if TLSC_V3
    return mbedtls_sha256_finish(c, out);
#else
    return mbedtls_sha256_finish_ret(c, out);
#endif
}

/** Parse a PEM (NUL included in len) or DER private key without a password. */
static inline int tlsc_pk_parse_key(mbedtls_pk_context *pk, const unsigned char *key, size_t len)
{
#if TLSC_V3
    return mbedtls_pk_parse_key(pk, key, len, NULL, 0, tlsc_rng, NULL);
#else
    return mbedtls_pk_parse_key(pk, key, len, NULL, 0);
#endif
}

static inline int tlsc_pk_check_pair(const mbedtls_pk_context *pub, const mbedtls_pk_context *prv)
{
#if TLSC_V3
    return mbedtls_pk_check_pair(pub, prv, tlsc_rng, NULL);
#else
    return mbedtls_pk_check_pair(pub, prv);
#endif
}

/** The certificate serial, big-endian bytes. */
static inline int tlsc_crt_set_serial(mbedtls_x509write_cert *crt, unsigned char *raw, size_t len)
{
#if TLSC_V3
    return mbedtls_x509write_crt_set_serial_raw(crt, raw, len);
#else
    mbedtls_mpi serial;
    mbedtls_mpi_init(&serial);
    int rc = mbedtls_mpi_read_binary(&serial, raw, len);
    if (rc == 0)
        rc = mbedtls_x509write_crt_set_serial(crt, &serial);
    mbedtls_mpi_free(&serial);
    return rc;
#endif
}

static inline mbedtls_ecp_group_id tlsc_ec_group(const mbedtls_ecp_keypair *ec)
{
#if TLSC_V3
    return mbedtls_ecp_keypair_get_group_id(ec);
#else
    return ec->grp.id;
#endif
}

/** 1 when the certificate's basic constraints say CA. */
static inline int tlsc_crt_is_ca(const mbedtls_x509_crt *crt)
{
#if TLSC_V3
    return crt->MBEDTLS_PRIVATE(ca_istrue);
#else
    return crt->ca_istrue;
#endif
}

/** The public point of an EC key, uncompressed. */
static inline int tlsc_ec_public(const mbedtls_ecp_keypair *ec, size_t *olen, unsigned char *out, size_t cap)
{
#if TLSC_V3
    return mbedtls_ecp_write_public_key(ec, MBEDTLS_ECP_PF_UNCOMPRESSED, olen, out, cap);
#else
    return mbedtls_ecp_point_write_binary(&ec->grp, &ec->Q, MBEDTLS_ECP_PF_UNCOMPRESSED, olen, out, cap);
#endif
}

/** Refuse anything older than TLS 1.2; the newest version the library speaks stays the maximum. */
static inline void tlsc_conf_min_tls12(mbedtls_ssl_config *conf)
{
#if TLSC_V3
    mbedtls_ssl_conf_min_tls_version(conf, MBEDTLS_SSL_VERSION_TLS1_2);
#else
    mbedtls_ssl_conf_min_version(conf, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
#endif
}

/** Speak nothing newer than TLS 1.2 (3.x; 2.28 has nothing newer). */
static inline void tlsc_conf_max_tls12(mbedtls_ssl_config *conf)
{
#if TLSC_V3
    mbedtls_ssl_conf_max_tls_version(conf, MBEDTLS_SSL_VERSION_TLS1_2);
#else
    (void)conf;
#endif
}

/** Start what the library needs before any handshake (3.x: PSA crypto, which TLS 1.3 runs on). */
static inline int tlsc_init(void)
{
#if TLSC_V3
    return psa_crypto_init() == PSA_SUCCESS ? 0 : -1;
#else
    return 0;
#endif
}

#endif
