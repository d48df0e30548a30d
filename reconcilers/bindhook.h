/* bindhook: the mutating admission webhook on pods/binding that puts a
 * Node's topology on a NodeSet pod at the moment it is bound.
 *
 * Why: slurmd reads its topology (POD_TOPOLOGY, from the pod annotation
 * topology.slinky.slurm.net/spec through the downward API) once, when it
 * starts and registers. The NodeSet reconciler copies the Node's annotation
 * onto the pod only after it sees the pod scheduled, which races with the
 * kubelet starting the container, so a new pod often registered with no
 * topology; Slurm >= 25.05 can be corrected over REST afterwards, older
 * ones cannot. The API server applies a Binding's annotations to the pod
 * in the same write that sets spec.nodeName, so an annotation added to the
 * Binding by this webhook is on the pod before any kubelet sees it.
 *
 * What it answers (AdmissionReview v1, POST BH_PATH): a CREATE of
 * pods/binding for a pod owned by a NodeSet (controller ownerReference,
 * looked up in the operator's pod cache, or read by name when the cache has
 * not seen the pod yet), whose target Node (the Node cache) carries a
 * non-empty topology annotation, gets a JSON patch adding that annotation to
 * the Binding. Everything else is allowed unchanged: the webhook never
 * refuses a binding (the chart registers it with failurePolicy Ignore too,
 * so an operator that is down delays nothing).
 *
 * Certificates: from files (--webhook-cert-file/--webhook-key-file, e.g.
 * mounted from cert-manager's Secret), read again every reload interval and
 * swapped in when they change; or a self-signed one made at start
 * (core/selfcert, for the names given) and made anew every rotation
 * interval. With a self-signed certificate and a MutatingWebhookConfiguration
 * name, the operator keeps every webhook's clientConfig.caBundle of that
 * configuration equal to its certificates (the current one and the one
 * before, so the API server trusts either during a rotation), checking it
 * every resync interval; a new certificate is served only once the
 * configuration trusts it.
 *
 * Scope (scope_nodesets, with a configuration name): the API server calls
 * the webhook for every pod bound in the namespaces its namespaceSelector
 * admits, so a cluster-wide registration puts a call to us in front of
 * every pod of the cluster. The operator keeps one expression of every
 * webhook's namespaceSelector, `kubernetes.io/metadata.name In [...]`,
 * equal to the namespaces that hold NodeSets (BH_NO_NAMESPACE, which no
 * namespace can be called, when none does); every other expression and the
 * matchLabels stay as registered (the chart's NotIn exclusions). It checks
 * it every resync interval, after its NodeSet cache has synced, and at
 * once when bh_covers finds a namespace the selector does not admit yet:
 * the NodeSet reconciler asks before a pass, so that the first pods of a
 * NodeSet in a new namespace are not bound past the webhook (Slurm < 25.05
 * cannot be given a topology after slurmd registered). bh_covers gives up
 * waiting (answers yes) BH_SCOPE_WAIT_MS after it first said no, so a
 * configuration that cannot be read or patched delays a NodeSet by that
 * much once, never for good; the reason is logged.
 *
 * A self-signed certificate is per process: with several operator replicas
 * behind one Service, give them one certificate (files, cert-manager).
 *
 * Who may call it: anyone who reaches the port, unless client_ca_file is
 * given: then the TLS handshake requires a client certificate signed by that
 * CA (the one that signs the certificate the API server presents to
 * webhooks, from its --admission-control-config-file kubeconfig), and with
 * client_names only those subject CNs are answered (403 otherwise).
 *
 * Budget: the pod reads go through the client given here, which the operator
 * makes for the webhook alone (its own QPS limiter and connections), never
 * the reconcilers' client; at most BH_MAX_READS of them are in flight, and
 * BH_MAX_READS_PER_PEER per caller address. A review past either bound is
 * answered at once, allowed and unchanged ("throttled"): the NodeSet
 * reconciler copies the topology later, as when the webhook is down.
 */
#ifndef OP_BINDHOOK_H
#define OP_BINDHOOK_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/buf.h"
#include "core/kube.h"
#include "core/metrics.h"
#include "core/store.h"

#define BH_PATH "/mutate-pods-binding"
#define BH_MAX_READS 64
#define BH_MAX_READS_PER_PEER 16
#define BH_NO_NAMESPACE "no_nodesets" /* an In value no namespace name can equal ('_') */
#define BH_SCOPE_WAIT_MS 10000u

typedef struct bindhook bindhook;

typedef struct bh_opts {
    const char *host;      /* numeric address to bind */
    int port;              /* 0: a free port (bh_port) */
    const char *cert_file; /* PEM chain; NULL with key_file NULL: self-signed */
    const char *key_file;
    const char *const *dns; /* names of the self-signed certificate (besides localhost, 127.0.0.1, ::1) */
    size_t n_dns;
    const char *config_name; /* MutatingWebhookConfiguration kept: its caBundle (self-signed only) and, with
                                scope_nodesets, its namespaceSelector; NULL: none */
    int scope_nodesets;      /* keep the namespaceSelector to the NodeSets' namespaces (see Scope above) */
    const store *nodesets;   /* with scope_nodesets: the operator's NodeSet cache */
    int (*synced)(void *data); /* with scope_nodesets: 1 once the NodeSet cache has synced */
    void *synced_data;
    uint64_t rotate_ms;      /* self-signed: a new certificate this often (0: 182 days; it is valid 365) */
    unsigned resync_ms;      /* caBundle checked / files re-read this often (0: 60 s) */
    const char
        *client_ca_file; /* PEM CA bundle: callers must present a certificate it signed; NULL: anyone */
    const char *client_names;   /* with client_ca_file: comma list of the subject CNs answered; NULL: any */
    kube_client *client; /* pod reads and configuration patches (the webhook's own budget); must outlive it */
    const store *pods;       /* the operator's pod cache */
    const store *nodes;      /* the operator's Node cache */
    mx_registry *metrics;
} bh_opts;

/** Load or make the certificate and listen. NULL with a message in err and
 *  *rc set (OP_EINVAL: only one of the files; OP_ECONFIG: unreadable or
 *  unparsable PEM; a bind error). */
bindhook *bh_start(uv_loop_t *loop, const bh_opts *o, int *rc, char *err, size_t errlen);
int bh_port(const bindhook *h);
/** May pods of namespace ns be bound now, their topology added by the
 *  webhook? 1 without scope keeping (or h NULL); else 1 when the
 *  configuration admits ns, or after BH_SCOPE_WAIT_MS of asking; 0 (and a
 *  check of the configuration soon) otherwise. */
int bh_covers(bindhook *h, const char *ns);
/** Stop listening, cancel the reads and patches in flight and free
 *  everything; on_closed runs once that is done. */
void bh_close(bindhook *h, void (*on_closed)(void *data), void *data);

/* ------------------------------------------------------------------ */
/* the pure part (unit-tested) */

typedef struct bh_review {
    char uid[128];
    char ns[254];
    char pod[254];  /* the pod being bound (request.name) */
    char node[254]; /* the Binding's target.name */
    int has_annotations; /* the Binding already has metadata.annotations */
} bh_review;

/** Read an AdmissionReview v1 of pods/binding. 0, or OP_EINVAL when it is
 *  not an AdmissionReview with a request uid (answered 400); *binding is 1
 *  for a CREATE of pods/binding of a Node target, 0 for anything else
 *  (answered "allowed", unchanged). */
int bh_parse_review(const cJSON *review, bh_review *out, int *binding);

/** The AdmissionReview answer: allowed, with a JSON patch adding the
 *  topology annotation when topology is neither NULL nor empty. */
int bh_build_response(const bh_review *r, const char *topology, buf_t *out) OP_WUR;

/** Is this pod object (JSON) a NodeSet's: a controller ownerReference of
 *  kind NodeSet in group slinky.slurm.net. */
int bh_pod_is_nodeset(const cJSON *pod);

/** The namespaceSelector a webhook should have (selector: its current one,
 *  or NULL): selector's matchLabels and expressions, but for those of key
 *  kubernetes.io/metadata.name and operator In, with one such expression
 *  first whose values are nss[0..n) (BH_NO_NAMESPACE when n is 0). */
cJSON *bh_scope_selector(const cJSON *selector, const char *const *nss, size_t n);

/** Does this namespaceSelector's In expression on kubernetes.io/metadata.name
 *  (if any) admit ns, and none of its NotIn ones exclude it? Other
 *  expressions and matchLabels are not judged (they need the Namespace's
 *  labels): 1 when only those remain. */
int bh_selector_admits(const cJSON *selector, const char *ns);

#endif
