#include "core/crypto.h"

#include <assert.h>
#include <errno.h>
#include <mbedtls/base64.h>
#include <mbedtls/md.h>
#include <mbedtls/sha256.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/mem.h"
#include "core/tls_compat.h"

_Static_assert(sizeof(mbedtls_sha256_context) <= sizeof(sha256_ctx), "sha256_ctx too small");

void hex_encode(const uint8_t *in, size_t len, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = hex[in[i] >> 4];
        out[2 * i + 1] = hex[in[i] & 15];
    }
    out[2 * len] = '\0';
}

void sha256(const void *data, size_t len, uint8_t out[SHA256_LEN])
{
    tlsc_sha256(data, len, out);
}

void sha256_hex(const void *data, size_t len, char out[2 * SHA256_LEN + 1])
{
    uint8_t d[SHA256_LEN];
    sha256(data, len, d);
    hex_encode(d, SHA256_LEN, out);
}

void sha256_begin(sha256_ctx *c)
{
    mbedtls_sha256_context *m = (mbedtls_sha256_context *)(void *)c->opaque;
    mbedtls_sha256_init(m);
    tlsc_sha256_starts(m);
}

void sha256_update(sha256_ctx *c, const void *data, size_t len)
{
    tlsc_sha256_update((mbedtls_sha256_context *)(void *)c->opaque, data, len);
}

void sha256_end(sha256_ctx *c, uint8_t out[SHA256_LEN])
{
    mbedtls_sha256_context *m = (mbedtls_sha256_context *)(void *)c->opaque;
    tlsc_sha256_finish(m, out);
    mbedtls_sha256_free(m);
}

void hmac_sha256(const void *key, size_t key_len, const void *data, size_t len, uint8_t out[SHA256_LEN])
{
    const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
    if (mbedtls_md_hmac(md, key, key_len, data, len, out) != 0)
        abort(); /* only fails on bad parameters, which would be our bug */
}

char *base64_encode(const void *data, size_t len)
{
    size_t olen = 0;
    mbedtls_base64_encode(NULL, 0, &olen, data, len);
    char *out = xmalloc(olen + 1);
    if (mbedtls_base64_encode((unsigned char *)out, olen + 1, &olen, data, len) != 0)
        abort();
    assert(olen == (len + 2) / 3 * 4);
    out[olen] = '\0';
    return out;
}

char *base64url_encode(const void *data, size_t len)
{
    char *s = base64_encode(data, len);
    size_t n = strlen(s);
    while (n && s[n - 1] == '=')
        s[--n] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '+')
            s[i] = '-';
        else if (s[i] == '/')
            s[i] = '_';
    }
    return s;
}

uint8_t *base64_decode(const char *s, size_t len, size_t *out_len)
{
    /* Normalise to the padded standard alphabet without whitespace, which is
     * what mbedtls accepts. */
    char *norm = xmalloc(len + 4);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        if (c == '-')
            c = '+';
        else if (c == '_')
            c = '/';
        norm[n++] = c;
    }
    while (n % 4)
        norm[n++] = '=';
    size_t olen = 0;
    uint8_t *out = xmalloc(n / 4 * 3 + 1);
    if (mbedtls_base64_decode(out, n / 4 * 3 + 1, &olen, (const unsigned char *)norm, n) != 0) {
        free(norm);
        free(out);
        return NULL;
    }
    free(norm);
    assert(olen <= n / 4 * 3); /* the room given to mbedtls */
    out[olen] = '\0';
    if (out_len)
        *out_len = olen;
    return out;
}

void random_bytes(void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len) {
        ssize_t r = getrandom(p, len, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            abort();
        }
        p += r;
        len -= (size_t)r;
    }
}

void uuid_v4(char out[37])
{
    uint8_t b[16];
    random_bytes(b, sizeof(b));
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}
