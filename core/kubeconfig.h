/* kubeconfig: where the API server is and how to authenticate to it.
 *
 * Sources, in controller-runtime's order (kcfg_load):
 *   1. an explicit kubeconfig path (the --kubeconfig flag);
 *   2. $KUBECONFIG: one or more files separated by ':', merged;
 *   3. in-cluster: KUBERNETES_SERVICE_HOST/PORT and the service account
 *      files (only tried when $KUBECONFIG is unset or empty);
 *   4. ~/.kube/config.
 *
 * Kubeconfig files are YAML (or JSON). Merging follows kubectl: for each
 * named cluster, user and context the first file that defines the name
 * wins, and so does the first non-empty current-context; files in the list
 * that do not exist are skipped. `*-data` fields (base64 of PEM) win over
 * their path variants; relative paths resolve against the directory of the
 * file the entry came from. Supported: server, certificate-authority[-data],
 * tls-server-name, insecure-skip-tls-verify (not together with a CA, as in
 * kubectl), client-certificate[-data], client-key[-data], token, tokenFile,
 * the context's namespace. Refused with an error naming the field: exec and
 * auth-provider plugins, proxy-url, basic auth and impersonation.
 *
 * Bearer tokens: kcfg_token() re-reads the token file (tokenFile, or the
 * service account token in-cluster) at most once a minute, and on the next
 * call after kcfg_token_invalidate() (call it on an HTTP 401), because bound
 * service account tokens are rotated by the kubelet. A failed re-read keeps
 * the last good token and logs a warning.
 *
 * Every failure returns a negative code and writes a message naming the
 * file and the field into err: OP_ECONFIG (bad or inconsistent values),
 * OP_ENOTSUP (unsupported features), OP_EPARSE (YAML syntax), OP_ENOTFOUND
 * (no configuration anywhere / not in a cluster), or an errno code for a
 * file that cannot be read.
 */
#ifndef OP_KUBECONFIG_H
#define OP_KUBECONFIG_H

#include <stddef.h>
#include <stdint.h>

/** Default service account directory of a pod. */
#define KCFG_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
/** How often kcfg_token() re-reads a token file. */
#define KCFG_TOKEN_REREAD_NS (60ull * 1000000000ull)
/** Largest kubeconfig, PEM or token file accepted. */
#define KCFG_MAX_FILE (4u << 20)

/** A resolved client configuration. Fields are read-only for users; PEM
 *  blobs are NUL-terminated (the length excludes the terminator). */
typedef struct kcfg {
    char *server;      /* "https://host:port" (IPv6 hosts bracketed), no path, no trailing '/' */
    char *path_prefix; /* path part of the kubeconfig server URL without trailing '/', "" normally */
    char *host;        /* host without brackets ("127.0.0.1", "::1", "kube.example") */
    int port;
    int tls;      /* 1 for https */
    char *ca_pem; /* NULL when none (then verification cannot succeed unless insecure) */
    size_t ca_len;
    char *cert_pem; /* client certificate, or NULL */
    size_t cert_len;
    char *key_pem; /* client key, or NULL */
    size_t key_len;
    char *token_file;      /* bearer token file (re-read), or NULL */
    char *tls_server_name; /* name to verify instead of host, or NULL */
    int insecure;          /* insecure-skip-tls-verify */
    char *namespace;       /* context namespace / service account namespace, or NULL when not set */
    char *source; /* human description: "kubeconfig /x/config (context kind-dev)", "in-cluster ..." */

    /* private: bearer token state */
    char *_token;       /* current token (from tokenFile, or the static token) */
    uint64_t _token_at; /* time of the last read, valid when _token_at_set */
    int _token_at_set;
    int _token_stale; /* invalidated: re-read on the next kcfg_token */
} kcfg;

typedef struct kcfg_opts {
    const char *kubeconfig; /* explicit path (--kubeconfig); NULL or "" = none */
    const char *context;    /* context override (--context); NULL or "" = current-context */
    const char *sa_dir;     /* service account directory; NULL = KCFG_SA_DIR (tests override) */
} kcfg_opts;

/** Resolve the configuration in controller-runtime's order (see above).
 *  On success *out is a new kcfg (kcfg_free it) and 0 is returned; on
 *  failure a negative code and a message in err. */
int kcfg_load(const kcfg_opts *opts, kcfg **out, char *err, size_t errlen);

/** Load kubeconfig files: paths is one path or several separated by ':'
 *  (merged as $KUBECONFIG); context overrides current-context when not
 *  NULL/"". Fails with OP_ENOTFOUND when none of the files exists. */
int kcfg_load_file(const char *paths, const char *context, kcfg **out, char *err, size_t errlen);

/** In-cluster configuration from the environment and sa_dir (NULL =
 *  KCFG_SA_DIR). OP_ENOTFOUND when KUBERNETES_SERVICE_HOST or _PORT is
 *  missing (not in a cluster); token and ca.crt must be readable. */
int kcfg_in_cluster(const char *sa_dir, kcfg **out, char *err, size_t errlen);

void kcfg_free(kcfg *c);

/** The bearer token to send at time now (monotonic ns, e.g. uv_hrtime()),
 *  or NULL when the configuration has none. Re-reads the token file when
 *  KCFG_TOKEN_REREAD_NS passed since the last read, or after
 *  kcfg_token_invalidate(). The string is valid until the next kcfg_token,
 *  kcfg_token_invalidate or kcfg_free call. */
const char *kcfg_token(kcfg *c, uint64_t now);

/** Make the next kcfg_token() re-read the token file (after an HTTP 401). */
void kcfg_token_invalidate(kcfg *c);

#endif
