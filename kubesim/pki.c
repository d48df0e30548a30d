/* pki: test/dev certificate authority on mbedtls 2.28. See pki.h.
 *
 * 2.28's certificate writer has no helpers for subjectAltName or
 * extendedKeyUsage, so both extensions are DER-encoded here and attached
 * with mbedtls_x509write_crt_set_extension().
 */
#include "kubesim/pki.h"

#include <arpa/inet.h>
#include <mbedtls/asn1.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecp.h>
#include <mbedtls/entropy.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/x509_crt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/crypto.h"
#include "core/err.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/tls_compat.h"

#define PEM_MAX 16384

/* The RNG: getrandom through core/crypto is enough for key generation and
 * ECDSA blinding, and needs no seeding state. */
static int rng(void *ctx, unsigned char *out, size_t len)
{
    (void)ctx;
    random_bytes(out, len);
    return 0;
}

/* --- a tiny DER writer (definite lengths, forward order) ---------------- */

static void der_len(buf_t *b, size_t n)
{
    unsigned char tmp[9];
    size_t k = 0;
    if (n < 0x80) {
        tmp[k++] = (unsigned char)n;
    } else {
        unsigned char be[8];
        size_t m = 0;
        for (size_t v = n; v; v >>= 8)
            be[m++] = (unsigned char)(v & 0xff);
        tmp[k++] = (unsigned char)(0x80 | m);
        while (m)
            tmp[k++] = be[--m];
    }
    if (buf_append(b, tmp, k) != 0)
        abort(); /* unlimited buffer */
}

static void der_tlv(buf_t *b, unsigned char tag, const void *p, size_t n)
{
    if (buf_putc(b, (char)tag) != 0)
        abort();
    der_len(b, n);
    if (buf_append(b, p, n) != 0)
        abort();
}

/* GeneralNames ::= SEQUENCE OF GeneralName, with dNSName [2] IA5String and
 * iPAddress [7] OCTET STRING, both implicitly tagged. */
static int san_der(const pki_leaf_opts *o, buf_t *out)
{
    buf_t inner;
    buf_init(&inner, BUF_UNLIMITED);
    for (size_t i = 0; i < o->n_dns; i++)
        der_tlv(&inner, MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_DNS_NAME, o->dns[i],
                strlen(o->dns[i]));
    for (size_t i = 0; i < o->n_ips; i++) {
        unsigned char a[16];
        size_t n;
        if (inet_pton(AF_INET, o->ips[i], a) == 1) {
            n = 4;
        } else if (inet_pton(AF_INET6, o->ips[i], a) == 1) {
            n = 16;
        } else {
            buf_free(&inner);
            return OP_EINVAL;
        }
        der_tlv(&inner, MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_IP_ADDRESS, a, n);
    }
    der_tlv(out, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE, inner.data, inner.len);
    buf_free(&inner);
    return 0;
}

/* ExtKeyUsageSyntax ::= SEQUENCE OF KeyPurposeId (OBJECT IDENTIFIER). */
static void eku_der(int usage, buf_t *out)
{
    buf_t inner;
    buf_init(&inner, BUF_UNLIMITED);
    if (usage & PKI_SERVER_AUTH)
        der_tlv(&inner, MBEDTLS_ASN1_OID, MBEDTLS_OID_SERVER_AUTH, MBEDTLS_OID_SIZE(MBEDTLS_OID_SERVER_AUTH));
    if (usage & PKI_CLIENT_AUTH)
        der_tlv(&inner, MBEDTLS_ASN1_OID, MBEDTLS_OID_CLIENT_AUTH, MBEDTLS_OID_SIZE(MBEDTLS_OID_CLIENT_AUTH));
    der_tlv(out, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE, inner.data, inner.len);
    buf_free(&inner);
}

/* --- helpers ------------------------------------------------------------- */

static int gen_key(mbedtls_pk_context *pk)
{
    if (mbedtls_pk_setup(pk, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY)) != 0)
        return OP_ETLS;
    if (mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(*pk), rng, NULL) != 0)
        return OP_ETLS;
    return 0;
}

static void fmt_time(time_t t, char out[16])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    /* X.509 GeneralizedTime as mbedtls wants it: YYYYMMDDhhmmss. */
    strftime(out, 16, "%Y%m%d%H%M%S", &tm);
}

/* Append "KEY=value" to a subject string. mbedtls 2.28 accepts only "\,"
 * as an escape, so commas are escaped and backslashes refused. */
static int name_add(buf_t *b, const char *key, const char *val)
{
    if (strchr(val, '\\'))
        return OP_EINVAL;
    int rc = buf_printf(b, "%s%s=", b->len ? "," : "", key);
    for (const char *p = val; rc == 0 && *p; p++) {
        if (*p == ',')
            rc = buf_putc(b, '\\');
        if (rc == 0)
            rc = buf_putc(b, *p);
    }
    return rc;
}

static int set_serial(mbedtls_x509write_cert *crt)
{
    unsigned char raw[16];
    random_bytes(raw, sizeof(raw));
    raw[0] &= 0x7f; /* positive */
    raw[0] |= 0x01; /* and exactly 16 bytes long */
    return tlsc_crt_set_serial(crt, raw, sizeof(raw)) ? OP_ETLS : 0;
}

static int write_pems(mbedtls_x509write_cert *crt, mbedtls_pk_context *key, pki_pair *out)
{
    unsigned char *pem = xmalloc(PEM_MAX);
    int rc = mbedtls_x509write_crt_pem(crt, pem, PEM_MAX, rng, NULL);
    if (rc != 0) {
        free(pem);
        return OP_ETLS;
    }
    out->cert_pem = xstrdup((char *)pem);
    rc = mbedtls_pk_write_key_pem(key, pem, PEM_MAX);
    if (rc != 0) {
        free(out->cert_pem);
        out->cert_pem = NULL;
        free(pem);
        return OP_ETLS;
    }
    out->key_pem = xstrdup((char *)pem);
    memset(pem, 0, PEM_MAX);
    free(pem);
    return 0;
}

/* --- public -------------------------------------------------------------- */

int pki_ca_new(const char *cn, unsigned days, pki_pair *out)
{
    out->cert_pem = out->key_pem = NULL;
    if (!cn || !*cn)
        return OP_EINVAL;
    mbedtls_pk_context key;
    mbedtls_x509write_cert crt;
    buf_t subj;
    char nb[16], na[16];
    mbedtls_pk_init(&key);
    mbedtls_x509write_crt_init(&crt);
    buf_init(&subj, 4096);

    time_t now = time(NULL);
    fmt_time(now - 3600, nb);
    fmt_time(now + (time_t)(days ? days : 3650) * 86400, na);
    int rc = name_add(&subj, "CN", cn);
    if (rc)
        goto done;
    rc = gen_key(&key);
    if (rc)
        goto done;
    mbedtls_x509write_crt_set_version(&crt, MBEDTLS_X509_CRT_VERSION_3);
    mbedtls_x509write_crt_set_md_alg(&crt, MBEDTLS_MD_SHA256);
    mbedtls_x509write_crt_set_subject_key(&crt, &key);
    mbedtls_x509write_crt_set_issuer_key(&crt, &key);
    rc = OP_ETLS;
    if (set_serial(&crt) != 0 || mbedtls_x509write_crt_set_validity(&crt, nb, na) != 0 ||
        mbedtls_x509write_crt_set_subject_name(&crt, buf_cstr(&subj)) != 0 ||
        mbedtls_x509write_crt_set_issuer_name(&crt, buf_cstr(&subj)) != 0 ||
        mbedtls_x509write_crt_set_basic_constraints(&crt, 1, -1) != 0 ||
        mbedtls_x509write_crt_set_key_usage(&crt, MBEDTLS_X509_KU_KEY_CERT_SIGN | MBEDTLS_X509_KU_CRL_SIGN |
                                                      MBEDTLS_X509_KU_DIGITAL_SIGNATURE) != 0 ||
        mbedtls_x509write_crt_set_subject_key_identifier(&crt) != 0 ||
        mbedtls_x509write_crt_set_authority_key_identifier(&crt) != 0)
        goto done;
    rc = write_pems(&crt, &key, out);
done:
    buf_free(&subj);
    mbedtls_x509write_crt_free(&crt);
    mbedtls_pk_free(&key);
    return rc;
}

int pki_leaf_new(const pki_pair *ca, const pki_leaf_opts *o, pki_pair *out)
{
    out->cert_pem = out->key_pem = NULL;
    if (!ca || !ca->cert_pem || !ca->key_pem || !o->cn || !*o->cn)
        return OP_EINVAL;
    mbedtls_x509_crt ca_crt;
    mbedtls_pk_context ca_key, key;
    mbedtls_x509write_cert crt;
    buf_t subj, san, eku;
    char issuer[1024], nb[16], na[16];
    mbedtls_x509_crt_init(&ca_crt);
    mbedtls_pk_init(&ca_key);
    mbedtls_pk_init(&key);
    mbedtls_x509write_crt_init(&crt);
    buf_init(&subj, 4096);
    buf_init(&san, BUF_UNLIMITED);
    buf_init(&eku, BUF_UNLIMITED);

    int rc = OP_EINVAL;
    if (mbedtls_x509_crt_parse(&ca_crt, (const unsigned char *)ca->cert_pem, strlen(ca->cert_pem) + 1) != 0 ||
        tlsc_pk_parse_key(&ca_key, (const unsigned char *)ca->key_pem, strlen(ca->key_pem) + 1) != 0 ||
        mbedtls_x509_dn_gets(issuer, sizeof(issuer), &ca_crt.subject) < 0)
        goto done;
    rc = name_add(&subj, "CN", o->cn);
    if (rc == 0 && o->org && *o->org)
        rc = name_add(&subj, "O", o->org);
    if (rc)
        goto done;
    if (o->n_dns || o->n_ips) {
        rc = san_der(o, &san);
        if (rc)
            goto done;
    }
    int usage = o->usage ? o->usage : (PKI_SERVER_AUTH | PKI_CLIENT_AUTH);
    eku_der(usage, &eku);

    time_t nbt = o->not_before ? o->not_before : time(NULL) - 3600;
    time_t nat = o->not_after ? o->not_after : nbt + 365 * 86400;
    fmt_time(nbt, nb);
    fmt_time(nat, na);

    rc = gen_key(&key);
    if (rc)
        goto done;
    mbedtls_x509write_crt_set_version(&crt, MBEDTLS_X509_CRT_VERSION_3);
    mbedtls_x509write_crt_set_md_alg(&crt, MBEDTLS_MD_SHA256);
    mbedtls_x509write_crt_set_subject_key(&crt, &key);
    mbedtls_x509write_crt_set_issuer_key(&crt, &ca_key);
    rc = OP_ETLS;
    if (set_serial(&crt) != 0 || mbedtls_x509write_crt_set_validity(&crt, nb, na) != 0 ||
        mbedtls_x509write_crt_set_subject_name(&crt, buf_cstr(&subj)) != 0 ||
        mbedtls_x509write_crt_set_issuer_name(&crt, issuer) != 0 ||
        mbedtls_x509write_crt_set_basic_constraints(&crt, 0, -1) != 0 ||
        mbedtls_x509write_crt_set_key_usage(&crt, MBEDTLS_X509_KU_DIGITAL_SIGNATURE) != 0 ||
        mbedtls_x509write_crt_set_subject_key_identifier(&crt) != 0 ||
        mbedtls_x509write_crt_set_authority_key_identifier(&crt) != 0 ||
        mbedtls_x509write_crt_set_extension(&crt, MBEDTLS_OID_EXTENDED_KEY_USAGE,
                                            MBEDTLS_OID_SIZE(MBEDTLS_OID_EXTENDED_KEY_USAGE), 0,
                                            (const unsigned char *)eku.data, eku.len) != 0)
        goto done;
    /* A leaf with no name at all gets no SAN extension (an empty
     * GeneralNames is invalid DER for the extension). */
    if (san.len && mbedtls_x509write_crt_set_extension(&crt, MBEDTLS_OID_SUBJECT_ALT_NAME,
                                                       MBEDTLS_OID_SIZE(MBEDTLS_OID_SUBJECT_ALT_NAME), 0,
                                                       (const unsigned char *)san.data, san.len) != 0)
        goto done;
    rc = write_pems(&crt, &key, out);
done:
    buf_free(&subj);
    buf_free(&san);
    buf_free(&eku);
    mbedtls_x509write_crt_free(&crt);
    mbedtls_pk_free(&key);
    mbedtls_pk_free(&ca_key);
    mbedtls_x509_crt_free(&ca_crt);
    return rc;
}

void pki_pair_free(pki_pair *p)
{
    if (!p)
        return;
    free(p->cert_pem);
    if (p->key_pem) {
        memset(p->key_pem, 0, strlen(p->key_pem));
        free(p->key_pem);
    }
    p->cert_pem = p->key_pem = NULL;
}
