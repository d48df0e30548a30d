/* Unit tests for slurmio/jwt: minting, a vector computed independently
 * (Python's hmac), claims, expiry, tampering and refused algorithms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "core/crypto.h"
#include "core/err.h"
#include "core/json.h"
#include "core/mem.h"
#include "slurmio/jwt.h"

static uint8_t key[32];

static int setup(void **state)
{
    for (int i = 0; i < 32; i++)
        key[i] = (uint8_t)i;
    return 0;
}

/* Computed with Python's hmac/hashlib over the same header and payload. */
static const char vector[] = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
                             "eyJqdGkiOiIwMDAwMDAwMC0wMDAwLTQwMDAtODAwMC0wMDAwMDAwMDAwMDAiLCJpc3MiOiJzbHVybS1"
                             "vcGVyYXRvciIsImlhdCI6MTcwMDAw"
                             "MDAwMCwibmJmIjoxNzAwMDAwMDAwLCJleHAiOjE3MDAwMDM2MDAsInN1biI6InNsdXJtIn0."
                             "VhrS5i3vGxBdeScMlB_V7bbkP5XZGfUZOFzpDK1yMIE";

static void test_known_vector(void **state)
{
    jwt_claims c = {.jti = (char *)"00000000-0000-4000-8000-000000000000",
                    .sun = (char *)"slurm",
                    .iat = 1700000000,
                    .nbf = 1700000000,
                    .exp = 1700003600};
    char *tok = jwt_mint_claims(key, sizeof(key), &c);
    assert_string_equal(tok, vector);
    free(tok);

    jwt_claims out;
    assert_int_equal(jwt_decode(vector, key, sizeof(key), &out), 0);
    assert_string_equal(out.sun, "slurm");
    assert_string_equal(out.iss, "slurm-operator");
    assert_string_equal(out.jti, "00000000-0000-4000-8000-000000000000");
    assert_int_equal(out.iat, 1700000000);
    assert_int_equal(out.nbf, 1700000000);
    assert_int_equal(out.exp, 1700003600);
    jwt_claims_free(&out);
    assert_null(out.sun);

    assert_int_equal(jwt_verify(vector, key, sizeof(key), 1700000000, &out), 0);
    jwt_claims_free(&out);
    assert_int_equal(jwt_verify(vector, key, sizeof(key), 1700003599, &out), 0);
    jwt_claims_free(&out);
    /* exp is exclusive: at exp the token is no longer valid. */
    assert_int_equal(jwt_verify(vector, key, sizeof(key), 1700003600, &out), OP_EUNAUTHORIZED);
    assert_null(out.sun);
    /* nbf: before it the token is not valid yet. */
    assert_int_equal(jwt_verify(vector, key, sizeof(key), 1699999999, &out), OP_EUNAUTHORIZED);
    /* Expired tokens still decode: the Token reconciler reads their times. */
    assert_int_equal(jwt_decode(vector, key, sizeof(key), &out), 0);
    jwt_claims_free(&out);
}

static void test_mint(void **state)
{
    char *a = jwt_mint(key, sizeof(key), "root", 1000, 3600);
    char *b = jwt_mint(key, sizeof(key), "root", 1000, 3600);
    assert_non_null(a);
    assert_string_not_equal(a, b); /* a fresh jti each time */
    jwt_claims ca, cb;
    assert_int_equal(jwt_verify(a, key, sizeof(key), 2000, &ca), 0);
    assert_int_equal(jwt_verify(b, key, sizeof(key), 2000, &cb), 0);
    assert_string_equal(ca.sun, "root");
    assert_string_equal(ca.iss, JWT_ISSUER);
    assert_int_equal(ca.iat, 1000);
    assert_int_equal(ca.nbf, 1000);
    assert_int_equal(ca.exp, 4600);
    /* jti is an RFC 4122 version 4 UUID. */
    assert_int_equal(strlen(ca.jti), 36);
    assert_int_equal(ca.jti[14], '4');
    assert_non_null(strchr("89ab", ca.jti[19]));
    assert_string_not_equal(ca.jti, cb.jti);
    jwt_claims_free(&ca);
    jwt_claims_free(&cb);

    /* The header is exactly what Slurm's own tokens carry. */
    const char *dot = strchr(a, '.');
    size_t n;
    uint8_t *hdr = base64_decode(a, (size_t)(dot - a), &n);
    assert_string_equal((char *)hdr, "{\"alg\":\"HS256\",\"typ\":\"JWT\"}");
    free(hdr);
    free(a);
    free(b);

    /* A user name that needs JSON escaping survives the round trip. */
    char *q = jwt_mint(key, sizeof(key), "we\"ird\\user", 1, 10);
    jwt_claims cq;
    assert_int_equal(jwt_decode(q, key, sizeof(key), &cq), 0);
    assert_string_equal(cq.sun, "we\"ird\\user");
    jwt_claims_free(&cq);
    free(q);

    assert_null(jwt_mint(key, sizeof(key), "", 1, 10));
    assert_null(jwt_mint(key, sizeof(key), NULL, 1, 10));
    assert_null(jwt_mint(key, sizeof(key), "root", 1, 0));
}

static void test_refused(void **state)
{
    jwt_claims out;
    /* Wrong key. */
    uint8_t other[32] = {1};
    assert_int_equal(jwt_decode(vector, other, sizeof(other), &out), OP_EUNAUTHORIZED);
    assert_null(out.sun);

    /* Tampered payload (one character of the base64 changed). */
    char *t = xstrdup(vector);
    char *p = strchr(t, '.') + 5;
    *p = *p == 'A' ? 'B' : 'A';
    assert_int_equal(jwt_decode(t, key, sizeof(key), &out), OP_EUNAUTHORIZED);
    free(t);

    /* Tampered signature. */
    t = xstrdup(vector);
    t[strlen(t) - 1] = t[strlen(t) - 1] == 'E' ? 'F' : 'E';
    assert_int_equal(jwt_decode(t, key, sizeof(key), &out), OP_EUNAUTHORIZED);
    free(t);

    /* alg "none" is never accepted, whatever the signature part holds. */
    char *none = xasprintf("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.%s", strchr(vector, '.') + 1);
    assert_int_equal(jwt_decode(none, key, sizeof(key), &out), OP_EUNAUTHORIZED);
    free(none);

    /* A valid signature over claims without sun/exp is malformed. */
    static const char jwtio[] = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
                                "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ."
                                "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
    assert_int_equal(jwt_decode(jwtio, "your-256-bit-secret", 19, &out), OP_EPARSE);
    assert_int_equal(jwt_decode(jwtio, "another-secret", 14, &out), OP_EUNAUTHORIZED);

    static const char *bad[] = {"", "abc", "a.b", "a.b.c.d", "..", "a..c", "a.b.", "a+b.c.d", "a.b.c d"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        if (jwt_decode(bad[i], key, sizeof(key), &out) != OP_EPARSE)
            fail_msg("accepted %s", bad[i]);
    }
    assert_int_equal(jwt_decode(NULL, key, sizeof(key), &out), OP_EPARSE);
    char *huge = xmalloc(JWT_MAX_LEN + 10);
    memset(huge, 'a', JWT_MAX_LEN + 9);
    huge[10] = '.';
    huge[20] = '.';
    huge[JWT_MAX_LEN + 9] = '\0';
    assert_int_equal(jwt_decode(huge, key, sizeof(key), &out), OP_EPARSE);
    free(huge);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_vector),
        cmocka_unit_test(test_mint),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
