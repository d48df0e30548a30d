/* pki: a throw-away certificate authority for tests and development.
 *
 * Generates ECDSA P-256 keys, a self-signed CA (basicConstraints CA:true,
 * keyCertSign) and leaf certificates signed by it, with DNS and IP
 * subjectAltNames and serverAuth / clientAuth extended key usage. kubesim
 * serves HTTPS with such a leaf and writes kubeconfigs whose users hold
 * client certificates (CN = user name, O = group, as Kubernetes reads
 * them); the TLS tests use it to build every scenario without files.
 *
 * Everything is returned as PEM strings. Key generation is synchronous and
 * takes a few milliseconds: call it at start-up, not on a hot path.
 */
#ifndef OP_PKI_H
#define OP_PKI_H

#include <stddef.h>
#include <time.h>

/** A certificate and its private key, both PEM, malloc'd. */
typedef struct pki_pair {
    char *cert_pem;
    char *key_pem;
} pki_pair;

#define PKI_SERVER_AUTH 1 /* extendedKeyUsage serverAuth */
#define PKI_CLIENT_AUTH 2 /* extendedKeyUsage clientAuth */

typedef struct pki_leaf_opts {
    const char *cn;         /* subject CN (required) */
    const char *org;        /* subject O, optional (Kubernetes group of a client certificate) */
    const char *const *dns; /* DNS subjectAltNames, n_dns of them */
    size_t n_dns;
    const char *const *ips; /* IPv4 / IPv6 literal subjectAltNames, n_ips of them */
    size_t n_ips;
    int usage;         /* PKI_SERVER_AUTH | PKI_CLIENT_AUTH; 0 means both */
    time_t not_before; /* 0: one hour ago (tolerates clock skew) */
    time_t not_after;  /* 0: not_before + 365 days */
} pki_leaf_opts;

/** Create a self-signed CA with subject CN=cn, valid from an hour ago for
 *  days days (0: 10 years). 0 or OP_EINVAL / OP_ETLS; on success *out owns
 *  two strings (free with pki_pair_free). */
int pki_ca_new(const char *cn, unsigned days, pki_pair *out);

/** Create a leaf certificate signed by ca (as returned by pki_ca_new).
 *  OP_EINVAL for an unparsable IP literal, missing CN or bad CA PEM. */
int pki_leaf_new(const pki_pair *ca, const pki_leaf_opts *o, pki_pair *out);

/** Free the strings of a pair (the struct itself is the caller's). */
void pki_pair_free(pki_pair *p);

#endif
