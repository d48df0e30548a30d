/* sshkeys: SSH host key generation for LoginSets (docs/compat.md#loginset-objects).
 *
 * Slinky generates three host key pairs for `<loginset>-ssh-host-keys`:
 * RSA 4096, ECDSA P-256 and Ed25519, and so do we. RSA and ECDSA come from
 * mbedtls; Ed25519 from libsodium, because mbedtls 2.28 (Debian 12) has no
 * Ed25519.
 *
 * Formats, chosen so that OpenSSH's sshd and ssh-keygen read them:
 *  - RSA and ECDSA private keys as PEM: "-----BEGIN RSA PRIVATE KEY-----"
 *    (PKCS#1) and "-----BEGIN EC PRIVATE KEY-----" (SEC1), as mbedtls
 *    writes them;
 *  - the Ed25519 private key in OpenSSH's own format (there is no PEM form
 *    OpenSSH reads for it): "-----BEGIN OPENSSH PRIVATE KEY-----",
 *    openssh-key-v1, unencrypted (cipher and KDF "none"), one key, an empty
 *    comment, base64 wrapped at 70 columns, as `ssh-keygen -t ed25519 -N ''`
 *    writes it;
 *  - public keys in the authorized_keys form, without a comment and with a
 *    final newline: "ssh-rsa AAAA...\n", "ecdsa-sha2-nistp256 AAAA...\n",
 *    "ssh-ed25519 AAAA...\n" (RFC 4253 §6.6, RFC 5656 §3.1 and RFC 8709 §4
 *    wire blobs, base64).
 *
 * Threading: RSA 4096 generation takes seconds, so the reconciler runs
 * sshk_generate_host_keys() with uv_queue_work. Every call owns its own
 * DRBG (seeded from getrandom) and touches no shared mutable state
 * (sodium_init is thread-safe and idempotent), so any number of calls may
 * run concurrently on threadpool workers. Do not touch the results from the
 * loop thread before the after_work callback.
 */
#ifndef OP_SSHKEYS_H
#define OP_SSHKEYS_H

#include <stdatomic.h>
#include <stddef.h>

typedef enum sshk_type {
    SSHK_RSA,
    SSHK_ECDSA_P256,
    SSHK_ED25519,
} sshk_type;

typedef struct sshk_keypair {
    char *private_pem; /* malloc'd PEM (or OpenSSH key file) text, NUL-terminated */
    char *public_ssh;  /* malloc'd "<type> <base64>\n" */
} sshk_keypair;

/* Bounds for RSA modulus sizes accepted by sshk_generate(). */
#define SSHK_RSA_MIN_BITS 2048
#define SSHK_RSA_MAX_BITS 8192
#define SSHK_RSA_HOST_BITS 4096

/** Generate one key pair. rsa_bits is used for SSHK_RSA only and must be in
 *  [SSHK_RSA_MIN_BITS, SSHK_RSA_MAX_BITS] and even. Returns 0 and fills *out
 *  (free with sshk_keypair_free), or OP_EINVAL (bad arguments) / OP_ETLS
 *  (mbedtls or libsodium failed) / OP_ECANCELED; *out is zeroed on error.
 *  Thread-safe, blocking. cancel (may be NULL): once another thread sets
 *  it, an RSA or ECDSA generation stops at its next draw of randomness and
 *  returns OP_ECANCELED (a shutdown need not wait seconds for RSA 4096). */
int sshk_generate(sshk_type type, unsigned rsa_bits, const atomic_int *cancel, sshk_keypair *out);

/** Free both strings and zero the pair (NULL-safe, idempotent). */
void sshk_keypair_free(sshk_keypair *kp);

/** The host keys of a LoginSet: RSA 4096, ECDSA P-256 and Ed25519. */
typedef struct sshk_host_keys {
    sshk_keypair rsa;
    sshk_keypair ecdsa;
    sshk_keypair ed25519;
} sshk_host_keys;

/** Generate the three host key pairs. 0, or the first error (then nothing is
 *  left allocated). Thread-safe, blocking for seconds: run it on the uv
 *  threadpool. */
int sshk_generate_host_keys(sshk_host_keys *out, const atomic_int *cancel);
void sshk_host_keys_free(sshk_host_keys *hk);

/** The authorized_keys form of the public half of a private key written by
 *  sshk_generate() (RSA or ECDSA P-256 PEM, Ed25519 OpenSSH key file). 0 and
 *  a malloc'd string in *out, OP_EPARSE when pem is not such a key,
 *  OP_ENOTSUP for other key types. */
int sshk_public_from_private(const char *pem, char **out);

#endif
