#include "reconcilers/sshkeys.h"

#include <mbedtls/bignum.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecp.h>
#include <mbedtls/pk.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/rsa.h>
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/crypto.h"
#include "core/err.h"
#include "core/mem.h"
#include "core/tls_compat.h"

/* The DRBG's entropy source: the kernel's, through getrandom. Using our own
 * callback instead of mbedtls_entropy keeps each call self-contained (no
 * entropy context, no global source list). */
static int kernel_entropy(void *unused, unsigned char *out, size_t len)
{
    (void)unused;
    random_bytes(out, len);
    return 0;
}

/* The DRBG as mbedtls's random source, refusing once *cancel is set: RSA
 * generation draws for every candidate prime, so it stops within one. */
typedef struct rng {
    mbedtls_ctr_drbg_context *drbg;
    const atomic_int *cancel;
} rng;

static int rng_random(void *p, unsigned char *out, size_t len)
{
    rng *r = p;
    if (r->cancel && atomic_load(r->cancel))
        return MBEDTLS_ERR_CTR_DRBG_ENTROPY_SOURCE_FAILED;
    return mbedtls_ctr_drbg_random(r->drbg, out, len);
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
    if (tlsc_ec_group(ec) != MBEDTLS_ECP_DP_SECP256R1)
        return OP_ENOTSUP;
    uint8_t q[1 + 2 * 32];
    size_t qlen = 0;
    if (tlsc_ec_public(ec, &qlen, q, sizeof(q)) != 0)
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

/* ---- Ed25519 (libsodium) in OpenSSH's own key format -------------------- */

/* A fixed-size writer for the key file's binary form: the private half
 * never goes through a growing buffer, so no copy of it is left behind in
 * memory freed by a realloc. */
typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
} wbuf;

static void wb_put(wbuf *w, const void *p, size_t n)
{
    if (w->len + n > w->cap)
        abort(); /* sizes are fixed below: a programming error */
    memcpy(w->p + w->len, p, n);
    w->len += n;
}

static void wb_u32(wbuf *w, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    wb_put(w, x, 4);
}

static void wb_string(wbuf *w, const void *p, size_t n)
{
    wb_u32(w, (uint32_t)n);
    wb_put(w, p, n);
}

#define ED_TYPE "ssh-ed25519"
#define ED_TYPE_LEN (sizeof(ED_TYPE) - 1)
/* The public key blob: string "ssh-ed25519", string pk. */
#define ED_PUB_BLOB (4 + ED_TYPE_LEN + 4 + crypto_sign_PUBLICKEYBYTES)
/* The private section before padding: two check ints, the key type, pk,
 * sk (seed and pk, 64 bytes) and an empty comment; padded to 8 bytes, the
 * block size of the cipher "none". */
#define ED_PRIV_RAW                                                                                          \
    (8 + 4 + ED_TYPE_LEN + 4 + crypto_sign_PUBLICKEYBYTES + 4 + crypto_sign_SECRETKEYBYTES + 4)
#define ED_PRIV_PADDED ((ED_PRIV_RAW + 7) / 8 * 8)
#define ED_MAGIC "openssh-key-v1"
#define ED_FILE_BIN (sizeof(ED_MAGIC) + 2 * (4 + 4) + 4 + 4 + 4 + ED_PUB_BLOB + 4 + ED_PRIV_PADDED)
#define ED_B64_LINE 70
#define ED_BEGIN "-----BEGIN OPENSSH PRIVATE KEY-----\n"
#define ED_END "-----END OPENSSH PRIVATE KEY-----\n"

static void ed_public_blob(wbuf *w, const uint8_t *pk)
{
    wb_string(w, ED_TYPE, ED_TYPE_LEN);
    wb_string(w, pk, crypto_sign_PUBLICKEYBYTES);
}

/* The private key file as OpenSSH writes it unencrypted (PROTOCOL.key):
 * the magic "openssh-key-v1\0", cipher and KDF "none", empty KDF options,
 * one key, its public blob, then the private section. The section starts
 * with the same random check int twice (a decryption check) and ends with
 * the padding bytes 1, 2, 3, ... Base64 wrapped at 70 columns. */
static char *ed_private_file(const uint8_t *pk, const uint8_t *sk)
{
    uint8_t bin[ED_FILE_BIN];
    uint8_t priv[ED_PRIV_PADDED];
    wbuf w = {bin, 0, sizeof(bin)};
    wbuf v = {priv, 0, sizeof(priv)};
    uint32_t check;
    randombytes_buf(&check, sizeof(check));
    wb_u32(&v, check);
    wb_u32(&v, check);
    wb_string(&v, ED_TYPE, ED_TYPE_LEN);
    wb_string(&v, pk, crypto_sign_PUBLICKEYBYTES);
    wb_string(&v, sk, crypto_sign_SECRETKEYBYTES);
    wb_string(&v, "", 0);
    for (uint8_t pad = 1; v.len < v.cap; pad++)
        wb_put(&v, &pad, 1);

    wb_put(&w, ED_MAGIC, sizeof(ED_MAGIC)); /* with its NUL */
    wb_string(&w, "none", 4);
    wb_string(&w, "none", 4);
    wb_string(&w, "", 0);
    wb_u32(&w, 1);
    wb_u32(&w, (uint32_t)ED_PUB_BLOB);
    ed_public_blob(&w, pk);
    wb_string(&w, priv, v.len);
    if (w.len != w.cap)
        abort();

    char b64[sodium_base64_ENCODED_LEN(ED_FILE_BIN, sodium_base64_VARIANT_ORIGINAL)];
    sodium_bin2base64(b64, sizeof(b64), bin, w.len, sodium_base64_VARIANT_ORIGINAL);
    size_t n = strlen(b64);
    size_t cap = sizeof(ED_BEGIN) + n + n / ED_B64_LINE + 1 + sizeof(ED_END);
    char *out = xmalloc(cap);
    size_t o = 0;
    memcpy(out, ED_BEGIN, sizeof(ED_BEGIN) - 1);
    o += sizeof(ED_BEGIN) - 1;
    for (size_t i = 0; i < n; i += ED_B64_LINE) {
        size_t k = n - i < ED_B64_LINE ? n - i : ED_B64_LINE;
        memcpy(out + o, b64 + i, k);
        o += k;
        out[o++] = '\n';
    }
    memcpy(out + o, ED_END, sizeof(ED_END)); /* with its NUL */
    sodium_memzero(priv, sizeof(priv));
    sodium_memzero(bin, sizeof(bin));
    sodium_memzero(b64, sizeof(b64));
    return out;
}

static int generate_ed25519(sshk_keypair *out)
{
    /* Thread-safe and idempotent (0 first, 1 after); -1 only when the
     * library cannot start (no entropy source). */
    if (sodium_init() < 0)
        return OP_ETLS;
    uint8_t pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
    if (crypto_sign_keypair(pk, sk) != 0)
        return OP_ETLS;
    out->private_pem = ed_private_file(pk, sk);
    sodium_memzero(sk, sizeof(sk));
    uint8_t blob[ED_PUB_BLOB];
    wbuf w = {blob, 0, sizeof(blob)};
    ed_public_blob(&w, pk);
    buf_t b = {.data = (char *)blob, .len = w.len};
    out->public_ssh = public_line(ED_TYPE, &b);
    return 0;
}

/* A PEM of a 8192-bit RSA key is about 6.3 KB. */
#define PEM_MAX 16384

int sshk_generate(sshk_type type, unsigned rsa_bits, const atomic_int *cancel, sshk_keypair *out)
{
    memset(out, 0, sizeof(*out));
    if (type == SSHK_RSA && (rsa_bits < SSHK_RSA_MIN_BITS || rsa_bits > SSHK_RSA_MAX_BITS || rsa_bits % 2))
        return OP_EINVAL;
    if (type == SSHK_ED25519)
        return generate_ed25519(out);
    if (type != SSHK_RSA && type != SSHK_ECDSA_P256)
        return OP_EINVAL;

    mbedtls_ctr_drbg_context drbg;
    mbedtls_pk_context pk;
    mbedtls_ctr_drbg_init(&drbg);
    mbedtls_pk_init(&pk);
    static const char pers[] = "slurmop-sshk";
    unsigned char *pem = NULL;
    int rc = OP_ETLS;
    rng r = {.drbg = &drbg, .cancel = cancel};

    if (mbedtls_ctr_drbg_seed(&drbg, kernel_entropy, NULL, (const unsigned char *)pers, sizeof(pers) - 1) !=
        0)
        goto done;
    if (type == SSHK_RSA) {
        if (mbedtls_pk_setup(&pk, mbedtls_pk_info_from_type(MBEDTLS_PK_RSA)) != 0)
            goto done;
        if (mbedtls_rsa_gen_key(mbedtls_pk_rsa(pk), rng_random, &r, rsa_bits, 65537) != 0)
            goto done;
    } else {
        if (mbedtls_pk_setup(&pk, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY)) != 0)
            goto done;
        if (mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(pk), rng_random, &r) != 0)
            goto done;
    }
    pem = xcalloc(1, PEM_MAX);
    if (mbedtls_pk_write_key_pem(&pk, pem, PEM_MAX) != 0)
        goto done;
    rc = public_of(&pk, &out->public_ssh);
    if (rc == 0)
        out->private_pem = xstrdup((const char *)pem);

done:
    if (rc && cancel && atomic_load(cancel))
        rc = OP_ECANCELED;
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

int sshk_generate_host_keys(sshk_host_keys *out, const atomic_int *cancel)
{
    memset(out, 0, sizeof(*out));
    int rc = sshk_generate(SSHK_RSA, SSHK_RSA_HOST_BITS, cancel, &out->rsa);
    if (rc == 0)
        rc = sshk_generate(SSHK_ECDSA_P256, 0, cancel, &out->ecdsa);
    if (rc == 0)
        rc = sshk_generate(SSHK_ED25519, 0, cancel, &out->ed25519);
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
    sshk_keypair_free(&hk->ed25519);
}

/* Read one RFC 4251 string at *off of bin. */
static const uint8_t *rd_string(const uint8_t *bin, size_t len, size_t *off, size_t *n)
{
    if (len - *off < 4)
        return NULL;
    const uint8_t *p = bin + *off;
    *n = (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
    if (len - *off - 4 < *n)
        return NULL;
    *off += 4 + *n;
    return p + 4;
}

/* The public key line of an unencrypted OpenSSH Ed25519 key file: the
 * public blob of its header, checked against the private section's. */
static int ed_public_from_file(const char *text, char **out)
{
    const char *b = text + sizeof(ED_BEGIN) - 1;
    const char *e = strstr(b, ED_END);
    if (e == NULL)
        return OP_EPARSE;
    size_t len = 0;
    uint8_t *bin = xmalloc((size_t)(e - b) + 1);
    int rc = OP_EPARSE;
    if (sodium_base642bin(bin, (size_t)(e - b), b, (size_t)(e - b), "\n", &len, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0)
        goto done;
    size_t off = sizeof(ED_MAGIC), n, m, k;
    if (len < off || memcmp(bin, ED_MAGIC, sizeof(ED_MAGIC)) != 0)
        goto done;
    const uint8_t *cipher = rd_string(bin, len, &off, &n);
    const uint8_t *kdf = cipher ? rd_string(bin, len, &off, &m) : NULL;
    if (kdf == NULL || rd_string(bin, len, &off, &k) == NULL || len - off < 4)
        goto done;
    if (n != 4 || memcmp(cipher, "none", 4) != 0 || m != 4 || memcmp(kdf, "none", 4) != 0)
        goto done; /* encrypted: not one of ours */
    const uint8_t *nk = bin + off;
    off += 4;
    if (nk[0] || nk[1] || nk[2] || nk[3] != 1)
        goto done;
    const uint8_t *blob = rd_string(bin, len, &off, &n);
    const uint8_t *priv = blob ? rd_string(bin, len, &off, &m) : NULL;
    if (priv == NULL)
        goto done;
    size_t bo = 0, po = 8, tn, pn;
    const uint8_t *t = rd_string(blob, n, &bo, &tn);
    const uint8_t *pk = t ? rd_string(blob, n, &bo, &pn) : NULL;
    if (pk == NULL || bo != n)
        goto done;
    if (tn != ED_TYPE_LEN || memcmp(t, ED_TYPE, ED_TYPE_LEN) != 0) {
        rc = OP_ENOTSUP;
        goto done;
    }
    /* The private section: equal check ints, the same type and public key. */
    size_t t2n, pk2n;
    const uint8_t *t2 = m >= 8 && memcmp(priv, priv + 4, 4) == 0 ? rd_string(priv, m, &po, &t2n) : NULL;
    const uint8_t *pk2 = t2 ? rd_string(priv, m, &po, &pk2n) : NULL;
    if (pk2 == NULL || pn != crypto_sign_PUBLICKEYBYTES || t2n != tn || memcmp(t2, t, tn) != 0 ||
        pk2n != pn || memcmp(pk2, pk, pn) != 0)
        goto done;
    buf_t bb = {.data = (char *)(uintptr_t)blob, .len = n};
    *out = public_line(ED_TYPE, &bb);
    rc = 0;
done:
    sodium_memzero(bin, (size_t)(e - b) + 1);
    free(bin);
    return rc;
}

int sshk_public_from_private(const char *pem, char **out)
{
    *out = NULL;
    if (pem == NULL)
        return OP_EPARSE;
    if (strncmp(pem, ED_BEGIN, sizeof(ED_BEGIN) - 1) == 0)
        return ed_public_from_file(pem, out);
    mbedtls_pk_context pk;
    mbedtls_pk_init(&pk);
    /* mbedtls wants the terminating NUL counted for PEM input. */
    int rc = OP_EPARSE;
    if (tlsc_pk_parse_key(&pk, (const unsigned char *)pem, strlen(pem) + 1) == 0)
        rc = public_of(&pk, out);
    mbedtls_pk_free(&pk);
    return rc;
}
