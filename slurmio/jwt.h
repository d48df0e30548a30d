/* jwt: HS256 JSON Web Tokens as Slurm's auth/jwt plugin accepts them.
 *
 * slurmctld verifies a token with HMAC-SHA256 over "header.payload" keyed
 * with the raw bytes of its jwt_key file, checks "exp", and takes the Slurm
 * user name from the "sun" claim. The operator mints such tokens itself (no
 * scontrol, no round trip): for its own slurmrestd client and for the Token
 * resources it serves. The claims follow Slinky's token library: jti (a
 * random UUID), iss "slurm-operator", iat, nbf = now, exp = now + lifetime,
 * sun = the Slurm user name.
 *
 * The decoder is for the Token reconciler (which must read iat and exp of
 * the token it stored, also when that token has expired, to decide when to
 * refresh) and for tests. It accepts only alg HS256: "none" and every other
 * algorithm are refused, and the signature is compared in constant time.
 */
#ifndef OP_JWT_H
#define OP_JWT_H

#include <stddef.h>
#include <stdint.h>

/** Issuer written into every token the operator mints. */
#define JWT_ISSUER "slurm-operator"
/** Longest token accepted by the decoder (bytes). */
#define JWT_MAX_LEN 16384

typedef struct jwt_claims {
    char *jti;             /* NULL when absent */
    char *iss;             /* NULL when absent */
    char *sun;             /* Slurm user name; required by the decoder */
    int64_t iat, nbf, exp; /* seconds since the epoch; 0 when absent (exp is required) */
} jwt_claims;

/**
 * Mint a token for user that is valid from now for lifetime seconds.
 *
 * @param key, key_len  the signing key (raw bytes of Slurm's jwt_key).
 * @param user          the Slurm user name ("sun"); must be non-empty.
 * @param now           the issue time (seconds since the epoch).
 * @param lifetime      seconds until "exp"; must be positive.
 * @return a malloc'd "header.payload.signature" string, or NULL when an
 *         argument is invalid.
 */
char *jwt_mint(const void *key, size_t key_len, const char *user, int64_t now, int64_t lifetime);

/**
 * Mint a token with exactly the given claims (tests need expired and
 * not-yet-valid tokens). A NULL jti gets a fresh UUID; a NULL iss gets
 * JWT_ISSUER; sun must be non-empty.
 * @return a malloc'd token, or NULL when sun is missing.
 */
char *jwt_mint_claims(const void *key, size_t key_len, const jwt_claims *claims);

/**
 * Check the shape, algorithm and signature of a token and read its claims;
 * times are NOT checked (see jwt_verify).
 *
 * @param out  receives the claims on success (free with jwt_claims_free);
 *             zeroed on failure.
 * @return 0; OP_EPARSE for a malformed token (not three base64url parts,
 *         bad JSON, missing "sun" or "exp", longer than JWT_MAX_LEN);
 *         OP_EUNAUTHORIZED when the algorithm is not HS256 or the signature
 *         does not match key.
 */
int jwt_decode(const char *token, const void *key, size_t key_len, jwt_claims *out);

/**
 * jwt_decode, then the times: the token must not have expired (exp > now)
 * and must already be valid (nbf <= now, when nbf is present).
 * @return as jwt_decode; OP_EUNAUTHORIZED also for an expired or not yet
 *         valid token (out is still zeroed then).
 */
int jwt_verify(const char *token, const void *key, size_t key_len, int64_t now, jwt_claims *out);

/** Free the strings of claims filled by jwt_decode/jwt_verify. */
void jwt_claims_free(jwt_claims *c);

#endif
