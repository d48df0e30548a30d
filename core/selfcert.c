/* selfcert: self-signed serving certificate. See selfcert.h.
 *
 * mbedtls 2.28's certificate writer has no helper for subjectAltName or
 * extendedKeyUsage, so both extensions are DER-encoded here.
 */
#include "core/selfcert.h"

#include <mbedtls/asn1.h>
#include <mbedtls/ecp.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/x509_crt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/crypto.h"
#include "core/err.h"
#include "core/mem.h"
#include "core/tls_compat.h"

#define PEM_MAX 8192

static int rng(void *ctx, unsigned char *out, size_t len)
{
    (void)ctx;
    random_bytes(out, len);
    return 0;
}

/* Tag, definite length, value; the buffers are unlimited so appends only fail on OOM (which aborts). */
static int tlv(buf_t *b, unsigned char tag, const void *p, size_t n)
{
    unsigned char hdr[4];
    size_t k = 0;
    if (n > 0xffff)
        return OP_EINVAL;
    hdr[k++] = tag;
    if (n < 0x80) {
        hdr[k++] = (unsigned char)n;
    } else if (n < 0x100) {
        hdr[k++] = 0x81;
        hdr[k++] = (unsigned char)n;
    } else {
        hdr[k++] = 0x82;
        hdr[k++] = (unsigned char)(n >> 8);
        hdr[k++] = (unsigned char)n;
    }
    if (buf_append(b, hdr, k) != 0 || buf_append(b, p, n) != 0)
        return OP_ENOMEM;
    return 0;
}

static int san_der(const char *const *dns, size_t n_dns, buf_t *out)
{
    static const unsigned char v4[4] = {127, 0, 0, 1};
    static const unsigned char v6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    buf_t in;
    buf_init(&in, BUF_UNLIMITED);
    const unsigned char dtag = MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_DNS_NAME;
    const unsigned char itag = MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_IP_ADDRESS;
    int rc = tlv(&in, dtag, "localhost", 9);
    for (size_t i = 0; rc == 0 && i < n_dns; i++)
        if (dns[i] && *dns[i] && strcmp(dns[i], "localhost") != 0)
            rc = tlv(&in, dtag, dns[i], strlen(dns[i]));
    if (rc == 0)
        rc = tlv(&in, itag, v4, sizeof(v4));
    if (rc == 0)
        rc = tlv(&in, itag, v6, sizeof(v6));
    if (rc == 0)
        rc = tlv(out, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE, in.data, in.len);
    buf_free(&in);
    return rc;
}

static void fmt_time(time_t t, char out[16])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 16, "%Y%m%d%H%M%S", &tm); /* what mbedtls_x509write_crt_set_validity wants */
}

int selfcert_new(const char *cn, const char *const *dns, size_t n_dns, char **cert_pem, char **key_pem)
{
    *cert_pem = *key_pem = NULL;
    if (cn == NULL || *cn == '\0' || strpbrk(cn, ",\\=+<>#;\"") != NULL)
        return OP_EINVAL;
    mbedtls_pk_context key;
    mbedtls_x509write_cert crt;
    buf_t subj, san, eku;
    mbedtls_pk_init(&key);
    mbedtls_x509write_crt_init(&crt);
    buf_init(&subj, 4096);
    buf_init(&san, BUF_UNLIMITED);
    buf_init(&eku, BUF_UNLIMITED);
    unsigned char *pem = xmalloc(PEM_MAX);
    char nb[16], na[16];
    unsigned char raw[16];
    time_t now = time(NULL);

    int rc = buf_printf(&subj, "CN=%s", cn);
    if (rc == 0)
        rc = san_der(dns, n_dns, &san);
    if (rc == 0) {
        buf_t oid;
        buf_init(&oid, BUF_UNLIMITED);
        rc = tlv(&oid, MBEDTLS_ASN1_OID, MBEDTLS_OID_SERVER_AUTH, MBEDTLS_OID_SIZE(MBEDTLS_OID_SERVER_AUTH));
        if (rc == 0)
            rc = tlv(&eku, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE, oid.data, oid.len);
        buf_free(&oid);
    }
    if (rc)
        goto done;
    rc = OP_ETLS;
    if (mbedtls_pk_setup(&key, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY)) != 0 ||
        mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(key), rng, NULL) != 0)
        goto done;
    random_bytes(raw, sizeof(raw));
    raw[0] = (unsigned char)((raw[0] & 0x7f) | 0x01); /* positive, 16 bytes */
    fmt_time(now - 3600, nb);
    fmt_time(now + 365 * 86400, na);
    mbedtls_x509write_crt_set_version(&crt, MBEDTLS_X509_CRT_VERSION_3);
    mbedtls_x509write_crt_set_md_alg(&crt, MBEDTLS_MD_SHA256);
    mbedtls_x509write_crt_set_subject_key(&crt, &key);
    mbedtls_x509write_crt_set_issuer_key(&crt, &key);
    if (        tlsc_crt_set_serial(&crt, raw, sizeof(raw)) != 0 ||
        mbedtls_x509write_crt_set_validity(&crt, nb, na) != 0 ||
        mbedtls_x509write_crt_set_subject_name(&crt, buf_cstr(&subj)) != 0 ||
        mbedtls_x509write_crt_set_issuer_name(&crt, buf_cstr(&subj)) != 0 ||
        mbedtls_x509write_crt_set_basic_constraints(&crt, 0, -1) != 0 ||
        mbedtls_x509write_crt_set_key_usage(&crt, MBEDTLS_X509_KU_DIGITAL_SIGNATURE) != 0 ||
        mbedtls_x509write_crt_set_subject_key_identifier(&crt) != 0 ||
        mbedtls_x509write_crt_set_extension(&crt, MBEDTLS_OID_EXTENDED_KEY_USAGE,
                                            MBEDTLS_OID_SIZE(MBEDTLS_OID_EXTENDED_KEY_USAGE), 0,
                                            (const unsigned char *)eku.data, eku.len) != 0 ||
        mbedtls_x509write_crt_set_extension(&crt, MBEDTLS_OID_SUBJECT_ALT_NAME,
                                            MBEDTLS_OID_SIZE(MBEDTLS_OID_SUBJECT_ALT_NAME), 0,
                                            (const unsigned char *)san.data, san.len) != 0)
        goto done;
    if (mbedtls_x509write_crt_pem(&crt, pem, PEM_MAX, rng, NULL) != 0)
        goto done;
    *cert_pem = xstrdup((char *)pem);
    if (mbedtls_pk_write_key_pem(&key, pem, PEM_MAX) != 0) {
        free(*cert_pem);
        *cert_pem = NULL;
        goto done;
    }
    *key_pem = xstrdup((char *)pem);
    rc = 0;
done:
    memset(pem, 0, PEM_MAX);
    free(pem);
    buf_free(&subj);
    buf_free(&san);
    buf_free(&eku);
    mbedtls_x509write_crt_free(&crt);
    mbedtls_pk_free(&key);
    return rc;
}
