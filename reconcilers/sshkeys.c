#include "reconcilers/sshkeys.h"

#include <mbedtls/bignum.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecp.h>
#include <mbedtls/pk.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/rsa.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/crypto.h"
#include "core/err.h"
#include "core/mem.h"

/* The DRBG's entropy source: the kernel's, through getrandom. Using our own
 * callback instead of mbedtls_entropy keeps each call self-contained (no
 * entropy context, no global source list). */
static int kernel_entropy(void *unused, unsigned char *out, size_t len)
{
    (void)unused;
    random_bytes(out, len);
    return 0;
}

/* ---- SSH wire encoding (RFC 4251 §5) -------------------------------------- */

static void wire_u32(buf_t *b, size_t v)
{
    uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    if (buf_append(b, x, 4) != 0)
        abort();
}

static void wire_string(buf_t *b, const void *p, size_t n)
{
    wire_u32(b, n);
    if (n && buf_append(b, p, n) != 0)
        abort();
}

/* mpint: big-endian two's complement, minimal length, a leading zero byte
 * when the top bit is set (positive numbers only here). */
static int wire_mpint(buf_t *b, const mbedtls_mpi *x)
{
    size_t n = mbedtls_mpi_size(x);
    uint8_t *v = xmalloc(n + 1);
    v[0] = 0;
    if (n && mbedtls_mpi_write_binary(x, v + 1, n) != 0) {
        free(v);
        return OP_ETLS;
    }
    size_t off = 1;
    if (n && (v[1] & 0x80))
        off = 0;
    wire_string(b, v + off, n + 1 - off);
    free(v);
    return 0;
}

static char *public_line(const char *type, const buf_t *blob)
{
    char *b64 = base64_encode(blob->data, blob->len);
    char *line = xasprintf("%s %s\n", type, b64);
    free(b64);
    return line;
}

static int public_rsa(mbedtls_pk_context *pk, char **out)
{
    mbedtls_rsa_context *rsa = mbedtls_pk_rsa(*pk);
    mbedtls_mpi n, e;
    mbedtls_mpi_init(&n);
    mbedtls_mpi_init(&e);
    int rc = OP_ETLS;
    buf_t blob;
    buf_init(&blob, BUF_UNLIMITED);
    if (mbedtls_rsa_export(rsa, &n, NULL, NULL, NULL, &e) == 0) {
        wire_string(&blob, "ssh-rsa", 7);
        if (wire_mpint(&blob, &e) == 0 && wire_mpint(&blob, &n) == 0) {
            *out = public_line("ssh-rsa", &blob);
            rc = 0;
        }
    }
    buf_free(&blob);
    mbedtls_mpi_free(&n);
    mbedtls_mpi_free(&e);
    return rc;
}

static int public_ecdsa(mbedtls_pk_context *pk, char **out)
{
    mbedtls_ecp_keypair *ec = mbedtls_pk_ec(*pk);
    if (ec->grp.id != MBEDTLS_ECP_DP_SECP256R1)
        return OP_ENOTSUP;
    uint8_t q[1 + 2 * 32];
    size_t qlen = 0;
    if (mbedtls_ecp_point_write_binary(&ec->grp, &ec->Q, MBEDTLS_ECP_PF_UNCOMPRESSED, &qlen, q, sizeof(q)) !=
        0)
        return OP_ETLS;
    buf_t blob;
    buf_init(&blob, BUF_UNLIMITED);
    wire_string(&blob, "ecdsa-sha2-nistp256", 19);
    wire_string(&blob, "nistp256", 8);
    wire_string(&blob, q, qlen);
    *out = public_line("ecdsa-sha2-nistp256", &blob);
    buf_free(&blob);
    return 0;
}

static int public_of(mbedtls_pk_context *pk, char **out)
{
    switch (mbedtls_pk_get_type(pk)) {
    case MBEDTLS_PK_RSA:
        return public_rsa(pk, out);
    case MBEDTLS_PK_ECKEY:
        return public_ecdsa(pk, out);
    default:
        return OP_ENOTSUP;
    }
}

/* A PEM of a 8192-bit RSA key is about 6.3 KB. */
#define PEM_MAX 16384

int sshk_generate(sshk_type type, unsigned rsa_bits, sshk_keypair *out)
{
    memset(out, 0, sizeof(*out));
    if (type == SSHK_RSA && (rsa_bits < SSHK_RSA_MIN_BITS || rsa_bits > SSHK_RSA_MAX_BITS || rsa_bits % 2))
        return OP_EINVAL;
    if (type != SSHK_RSA && type != SSHK_ECDSA_P256)
        return OP_EINVAL;

    mbedtls_ctr_drbg_context drbg;
    mbedtls_pk_context pk;
    mbedtls_ctr_drbg_init(&drbg);
    mbedtls_pk_init(&pk);
    static const char pers[] = "slurmop-sshk";
    unsigned char *pem = NULL;
    int rc = OP_ETLS;

    if (mbedtls_ctr_drbg_seed(&drbg, kernel_entropy, NULL, (const unsigned char *)pers, sizeof(pers) - 1) !=
        0)
        goto done;
    if (type == SSHK_RSA) {
        if (mbedtls_pk_setup(&pk, mbedtls_pk_info_from_type(MBEDTLS_PK_RSA)) != 0)
            goto done;
        if (mbedtls_rsa_gen_key(mbedtls_pk_rsa(pk), mbedtls_ctr_drbg_random, &drbg, rsa_bits, 65537) != 0)
            goto done;
    } else {
        if (mbedtls_pk_setup(&pk, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY)) != 0)
            goto done;
        if (mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(pk), mbedtls_ctr_drbg_random,
                                &drbg) != 0)
            goto done;
    }
    pem = xcalloc(1, PEM_MAX);
    if (mbedtls_pk_write_key_pem(&pk, pem, PEM_MAX) != 0)
        goto done;
    rc = public_of(&pk, &out->public_ssh);
    if (rc == 0)
        out->private_pem = xstrdup((const char *)pem);

done:
    if (pem) {
        /* The private key must not linger in freed memory. */
        mbedtls_platform_zeroize(pem, PEM_MAX);
        free(pem);
    }
    mbedtls_pk_free(&pk);
    mbedtls_ctr_drbg_free(&drbg);
    if (rc)
        sshk_keypair_free(out);
    return rc;
}

void sshk_keypair_free(sshk_keypair *kp)
{
    if (kp == NULL)
        return;
    if (kp->private_pem) {
        mbedtls_platform_zeroize(kp->private_pem, strlen(kp->private_pem));
        free(kp->private_pem);
    }
    free(kp->public_ssh);
    kp->private_pem = kp->public_ssh = NULL;
}

int sshk_generate_host_keys(sshk_host_keys *out)
{
    memset(out, 0, sizeof(*out));
    int rc = sshk_generate(SSHK_RSA, SSHK_RSA_HOST_BITS, &out->rsa);
    if (rc == 0)
        rc = sshk_generate(SSHK_ECDSA_P256, 0, &out->ecdsa);
    if (rc)
        sshk_host_keys_free(out);
    return rc;
}

void sshk_host_keys_free(sshk_host_keys *hk)
{
    if (hk == NULL)
        return;
    sshk_keypair_free(&hk->rsa);
    sshk_keypair_free(&hk->ecdsa);
}

int sshk_public_from_private(const char *pem, char **out)
{
    *out = NULL;
    if (pem == NULL)
        return OP_EPARSE;
    mbedtls_pk_context pk;
    mbedtls_pk_init(&pk);
    /* mbedtls wants the terminating NUL counted for PEM input. */
    int rc = OP_EPARSE;
    if (mbedtls_pk_parse_key(&pk, (const unsigned char *)pem, strlen(pem) + 1, NULL, 0) == 0)
        rc = public_of(&pk, out);
    mbedtls_pk_free(&pk);
    return rc;
}
