/* crypto: hashing, HMAC, base64, randomness and UUIDs (mbedtls underneath).
 *
 * Small synchronous helpers shared by the JWT minting (slurmio, Token
 * reconciler), the configuration hash annotations that roll pods, kubeconfig
 * *-data fields and kubesim's uids. Nothing here allocates on behalf of a
 * peer without a bound given by the caller.
 */
#ifndef OP_CRYPTO_H
#define OP_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32

void sha256(const void *data, size_t len, uint8_t out[SHA256_LEN]);
/** Lower-case hex digest into out (65 bytes with the terminator). */
void sha256_hex(const void *data, size_t len, char out[2 * SHA256_LEN + 1]);
void hmac_sha256(const void *key, size_t key_len, const void *data, size_t len, uint8_t out[SHA256_LEN]);

/** Incremental SHA-256 for hashing several inputs (sorted secret keys ...). */
typedef struct sha256_ctx {
    unsigned char opaque[128] __attribute__((aligned(8)));
} sha256_ctx;
void sha256_begin(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t len);
void sha256_end(sha256_ctx *c, uint8_t out[SHA256_LEN]);
void hex_encode(const uint8_t *in, size_t len, char *out); /* out: 2*len+1 */

/** Base64 (standard alphabet, padded) of len bytes; malloc'd string. */
char *base64_encode(const void *data, size_t len);
/** Base64url without padding (JWT); malloc'd string. */
char *base64url_encode(const void *data, size_t len);
/** Decode standard or url alphabet, padding optional, whitespace skipped.
 *  Returns a malloc'd buffer (NUL-terminated for convenience) or NULL on
 *  malformed input. */
uint8_t *base64_decode(const char *s, size_t len, size_t *out_len);

/** Fill buf with cryptographically strong random bytes (getrandom). */
void random_bytes(void *buf, size_t len);
/** A random RFC 4122 version 4 UUID string (37 bytes with terminator). */
void uuid_v4(char out[37]);

#endif
