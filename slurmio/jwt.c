#include "slurmio/jwt.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/crypto.h"
#include "core/err.h"
#include "core/json.h"
#include "core/mem.h"

/* Both Slurm (libjwt) and Slinky (golang-jwt) write this header; slurmctld
 * only looks at "alg". */
static const char header_json[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";

static char *sign(const void *key, size_t key_len, const char *signing_input)
{
    uint8_t mac[SHA256_LEN];
    hmac_sha256(key, key_len, signing_input, strlen(signing_input), mac);
    return base64url_encode(mac, sizeof(mac));
}

char *jwt_mint_claims(const void *key, size_t key_len, const jwt_claims *c)
{
    if (!c->sun || !c->sun[0])
        return NULL;
    char jti[37];
    if (!c->jti)
        uuid_v4(jti);
    buf_t p;
    buf_init(&p, BUF_UNLIMITED);
    int rc = buf_printf(&p, "{\"jti\":");
    rc |= json_quote_buf(&p, c->jti ? c->jti : jti);
    rc |= buf_puts(&p, ",\"iss\":");
    rc |= json_quote_buf(&p, c->iss ? c->iss : JWT_ISSUER);
    rc |= buf_printf(&p, ",\"iat\":%" PRId64 ",\"nbf\":%" PRId64 ",\"exp\":%" PRId64 ",\"sun\":", c->iat,
                     c->nbf, c->exp);
    rc |= json_quote_buf(&p, c->sun);
    rc |= buf_putc(&p, '}');
    if (rc) { /* cannot happen with an unlimited buffer */
        buf_free(&p);
        return NULL;
    }
    char *h64 = base64url_encode(header_json, sizeof(header_json) - 1);
    char *p64 = base64url_encode(p.data, p.len);
    buf_free(&p);
    char *input = xasprintf("%s.%s", h64, p64);
    char *sig = sign(key, key_len, input);
    char *tok = xasprintf("%s.%s", input, sig);
    free(h64);
    free(p64);
    free(input);
    free(sig);
    return tok;
}

char *jwt_mint(const void *key, size_t key_len, const char *user, int64_t now, int64_t lifetime)
{
    if (!user || !user[0] || lifetime <= 0)
        return NULL;
    jwt_claims c = {.sun = (char *)(uintptr_t)user, .iat = now, .nbf = now, .exp = now + lifetime};
    return jwt_mint_claims(key, key_len, &c);
}

void jwt_claims_free(jwt_claims *c)
{
    free(c->jti);
    free(c->iss);
    free(c->sun);
    memset(c, 0, sizeof(*c));
}

/* Constant-time comparison: the time taken must not tell an attacker how
 * many leading bytes of a forged signature were right. */
static int ct_equal(const char *a, const char *b, size_t n)
{
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

static cJSON *decode_part(const char *s, size_t n)
{
    size_t len;
    uint8_t *raw = base64_decode(s, n, &len);
    if (!raw)
        return NULL;
    cJSON *j = json_parse((const char *)raw, len, NULL);
    free(raw);
    if (j && !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static int b64url_chars(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
              c == '_'))
            return 0;
    }
    return 1;
}

static char *dup_str(const cJSON *o, const char *key)
{
    const char *s = json_get_str(o, key);
    return s ? xstrdup(s) : NULL;
}

int jwt_decode(const char *token, const void *key, size_t key_len, jwt_claims *out)
{
    memset(out, 0, sizeof(*out));
    if (!token)
        return OP_EPARSE;
    size_t len = strnlen(token, JWT_MAX_LEN + 1);
    if (len > JWT_MAX_LEN)
        return OP_EPARSE;
    const char *d1 = memchr(token, '.', len);
    if (!d1)
        return OP_EPARSE;
    const char *d2 = memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - token));
    if (!d2 || memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - token)))
        return OP_EPARSE;
    size_t hlen = (size_t)(d1 - token), plen = (size_t)(d2 - d1 - 1), slen = len - (size_t)(d2 + 1 - token);
    if (!hlen || !plen || !slen || !b64url_chars(token, hlen) || !b64url_chars(d1 + 1, plen) ||
        !b64url_chars(d2 + 1, slen))
        return OP_EPARSE;

    cJSON *hdr = decode_part(token, hlen);
    if (!hdr)
        return OP_EPARSE;
    const char *alg = json_get_str(hdr, "alg");
    int alg_ok = alg && strcmp(alg, "HS256") == 0;
    cJSON_Delete(hdr);
    if (!alg_ok)
        return OP_EUNAUTHORIZED;

    char *input = xstrndup(token, (size_t)(d2 - token));
    char *want = sign(key, key_len, input);
    free(input);
    int sig_ok = strlen(want) == slen && ct_equal(want, d2 + 1, slen);
    free(want);
    if (!sig_ok)
        return OP_EUNAUTHORIZED;

    cJSON *pl = decode_part(d1 + 1, plen);
    if (!pl)
        return OP_EPARSE;
    const char *sun = json_get_str(pl, "sun");
    const cJSON *exp = json_child(pl, "exp");
    if (!sun || !sun[0] || !cJSON_IsNumber(exp)) {
        cJSON_Delete(pl);
        return OP_EPARSE;
    }
    out->sun = xstrdup(sun);
    out->jti = dup_str(pl, "jti");
    out->iss = dup_str(pl, "iss");
    out->exp = json_get_int(pl, "exp", 0);
    out->iat = json_get_int(pl, "iat", 0);
    out->nbf = json_get_int(pl, "nbf", 0);
    cJSON_Delete(pl);
    return 0;
}

int jwt_verify(const char *token, const void *key, size_t key_len, int64_t now, jwt_claims *out)
{
    int rc = jwt_decode(token, key, key_len, out);
    if (rc < 0)
        return rc;
    if (out->exp <= now || (out->nbf && out->nbf > now)) {
        jwt_claims_free(out);
        return OP_EUNAUTHORIZED;
    }
    return 0;
}
