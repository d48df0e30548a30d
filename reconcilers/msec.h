/* msec: the --metrics-secure /metrics server.
 *
 * /metrics over HTTPS, each scrape authenticated and authorized by the API
 * server (core/kauth: a TokenReview of the scrape's bearer token, then a
 * SubjectAccessReview of `get` on the non-resource path /metrics), as
 * controller-runtime's secure metrics server does. The certificate comes
 * from --metrics-cert-file / --metrics-key-file (read once at start), or a
 * self-signed one is made at start when neither is given (core/selfcert).
 *
 * A scrape is answered when its reviews return: 200 with the metrics, 401
 * (no, malformed or unauthenticated token), 403 (not allowed), 429 or 500;
 * the loop never waits for them. Only /metrics is served here (404 for
 * anything else): /healthz and /readyz stay on the plain health server.
 */
#ifndef OP_MSEC_H
#define OP_MSEC_H

#include <stddef.h>
#include <uv.h>

#include "core/buf.h"
#include "core/kube.h"

typedef struct msec msec;

/** Render the metrics into out: 0, or an error (answered 500). */
typedef int (*msec_render_fn)(void *data, buf_t *out);

typedef struct msec_opts {
    const char *host;      /* numeric address to bind */
    int port;              /* 0: a free port (msec_port) */
    const char *cert_file; /* PEM chain, leaf first; NULL with key_file NULL: self-signed */
    const char *key_file;
    kube_client *client;   /* for the reviews; must outlive the server */
    msec_render_fn render;
    void *data;
} msec_opts;

/** Load or make the certificate and listen. NULL with a message in err and
 *  *rc set (OP_EINVAL: only one of the files given; OP_ECONFIG: unreadable
 *  or unparsable PEM; a bind error). */
msec *msec_start(uv_loop_t *loop, const msec_opts *o, int *rc, char *err, size_t errlen);
int msec_port(const msec *m);
/** Stop listening, drop the scrapes in progress (their reviews finish
 *  unseen) and free everything; on_closed runs once that is done. */
void msec_close(msec *m, void (*on_closed)(void *data), void *data);

#endif
