/* selfcert: a self-signed serving certificate made at start-up.
 *
 * What controller-runtime does for its secure metrics server when no
 * certificate is given: an ECDSA P-256 key and a self-signed certificate
 * (serverAuth, CA:false) for "localhost", 127.0.0.1 and ::1 plus the names
 * the caller adds (the host name), valid for a year from an hour ago.
 * Scrapers cannot verify it against anything but itself: it protects the
 * bearer token in transit from passive listeners, not from an active
 * man-in-the-middle; give a real certificate for that.
 *
 * Key generation is synchronous and takes a few milliseconds: start-up
 * only.
 */
#ifndef OP_SELFCERT_H
#define OP_SELFCERT_H

#include <stddef.h>

/** Make a certificate for cn with extra DNS names (n_dns of them) besides
 *  localhost and the loopback addresses. 0 with *cert_pem and *key_pem
 *  malloc'd (the caller frees; wipe the key), or OP_EINVAL / OP_ETLS. */
int selfcert_new(const char *cn, const char *const *dns, size_t n_dns, char **cert_pem, char **key_pem);

#endif
